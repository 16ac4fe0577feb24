"""With the real model: findings survive a restart and come back by paraphrase and by identifier."""

import json
import subprocess
import sys
import textwrap

import pytest

from nbmemory.lexical import tokenize
from nbmemory.service import stop

NOTES = [
    "orders.amount is stored in cents before March 2021 and in euros afterwards; "
    "divide old rows by 100.",
    "PyObject_GC_Del must free any object that was allocated with PyObject_GC_New, "
    "otherwise the collector's bookkeeping is corrupted.",
    "acquire_lock() has to run before touching workspace metadata because the file "
    "watcher thread races it.",
]
PARAPHRASES = [
    "which currency unit does the purchase total use in older records?",
    "how to release memory of container types tracked by the cycle detector",
    "what should happen first to avoid a concurrency bug when editing project settings?",
]
IDENTIFIERS = ["orders.amount", "PyObject_GC_Del", "acquire_lock"]

pytestmark = pytest.mark.model


def in_new_process(store, code: str):
    """Run magics in a fresh IPython shell in a new process; return what it printed as JSON."""
    script = textwrap.dedent(f"""
        import json
        from IPython.core.interactiveshell import InteractiveShell
        ip = InteractiveShell.instance(history_length=0)
        ip.run_line_magic("load_ext", "nbmemory")
        ip.run_line_magic("config", "NbMemory.store = {str(store)!r}")
    """) + textwrap.dedent(code)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=300, env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    stop(store)  # the kernel used the store's owner process: stop it too, a full restart
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_paraphrases_share_no_keyword_with_their_note():
    for note, query in zip(NOTES, PARAPHRASES):
        assert not set(tokenize(note)) & set(tokenize(query)), query


def test_recall_after_restart_by_paraphrase_and_identifier(tmp_path):
    store = tmp_path / "store"
    ids = in_new_process(store, f"""
        from IPython.utils.capture import capture_output
        with capture_output():
            for text in {NOTES!r}:
                ip.run_line_magic("remember", text)
        print(json.dumps([h.note.id for h in ip.run_line_magic("recall", "-k 10 the")] or [1, 2, 3]))
    """)
    assert sorted(ids) == [1, 2, 3]
    firsts = in_new_process(store, f"""
        import time
        out, behind = [], []
        for query in {IDENTIFIERS!r}:  # the new owner answers these from keywords at once
            hits = ip.run_line_magic("recall", query)
            out.append(hits[0].note.id if hits else None)
            behind.append(hits.behind)
        deadline = time.monotonic() + 120
        while ip.run_line_magic("recall", "wait for the model").behind:
            assert time.monotonic() < deadline, "the owner did not load the model in 120 s"
            time.sleep(0.05)
        for query in {PARAPHRASES!r}:
            hits = ip.run_line_magic("recall", query)
            out.append(hits[0].note.id if hits else None)
        print(json.dumps([out, behind]))
    """)
    assert firsts[0] == [1, 2, 3, 1, 2, 3]
    assert set(firsts[1]) <= {None, "Keyword matches only: the model is still loading. Ask "
                                    "again in a few seconds for the full search."}


def test_a_fresh_owner_answers_the_first_recall_from_keywords_then_loads_the_model(tmp_path):
    from nbmemory.engine.recall import MODEL_LOADING
    from nbmemory.memory import Memory
    from waiting import wait_for

    store = tmp_path / "store"
    with Memory.open(store, model="all-MiniLM-L6-v2", mode="service") as mem:
        for text in NOTES:
            mem.remember(text)
    stop(store, timeout=60)
    try:
        with Memory.open(store, model="all-MiniLM-L6-v2", mode="service") as mem:
            first = mem.recall("orders.amount in cents")  # the owner has not loaded the model
            assert first.behind == MODEL_LOADING and first[0].note.id == 1
            note = mem.remember("the nightly export moved to Airflow in March")  # not waiting
            wait_for(lambda: not mem.status()["model_loading"], timeout=120,
                     what="the owner to load the model")
            assert mem.status()["unembedded"] == 0
            hit = mem.recall(PARAPHRASES[0], explain=True)[0]
            assert hit.note.id == 1 and hit.dense is not None
            assert mem.recall("when did the export job change schedulers", explain=True)[0].note.id == note.id
    finally:
        stop(store, timeout=60)
