"""The owner service: one process owns a store, every other process goes through it.

Owners here are real processes started the way kernels start them; the hash embedder
(``model="hash:64"``) stands in for the model except in the torch-free-kernel test. Every
test that goes through the ``mem`` fixture runs twice: over a unix socket and over
loopback TCP with the owner's secret (``NBMEMORY_TRANSPORT``); tests/test_transport.py
has the rest of the transport.
"""

import contextlib
import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

import nbmemory
from nbmemory.ranking import KEYWORD_WEIGHT
from nbmemory.embed import HashEmbedder
from nbmemory.errors import (Conflict, EmbedderMismatch, InvalidInput, NotFound, StoreLocked,
                             StoreTooNew, StoreUnavailable)
from nbmemory.memory import Memory
from nbmemory.models import (Anchor, Event, Hit, Hits, Note, Page, Provenance, Snapshot,
                             StaleReason)
from nbmemory.service import codec, owner_info, stop
from nbmemory.service import transport as transports
from nbmemory.service.protocol import lock_held, read_info

from waiting import pid_alive, served, signal_owner, wait_for

HASH = "hash:64"


def python(code, *args, timeout=120, check=True):
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
                            capture_output=True, text=True, timeout=timeout,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if check:
        assert result.returncode == 0, result.stderr
    return result


@pytest.fixture
def store(store_dir):
    """A store directory whose owner (if any) is stopped after the test."""
    yield store_dir
    try:
        stop(store_dir, timeout=30)
    except StoreLocked:
        pass
    info = owner_info(store_dir)
    if info and info.get("mode") == "service":
        signal_owner(info["pid"])


@pytest.fixture(params=["unix", "tcp"])
def transport(request, monkeypatch):
    """The transport of the owners this test starts (their clients read it from owner.json)."""
    monkeypatch.setenv("NBMEMORY_TRANSPORT", request.param)
    return request.param


@pytest.fixture
def mem(store, transport):
    with Memory.open(store, model=HASH, mode="service") as memory:
        yield memory


# -- the wire format -------------------------------------------------------------------------

def test_codec_round_trips_every_domain_object():
    at = datetime(2026, 1, 31, 12, 30, tzinfo=timezone.utc)
    prov = Provenance(notebook="a.ipynb", cell_id="c1", execution_count=3, git_dirty=False)
    note = Note(7, "orders.amount is in cents", "gotcha", "high", ("orders", "units"),
                "active", 2, at, at, "ana", prov,
                (Anchor("file", "data/orders.csv", {"sha": "ab"}),),
                (StaleReason("content_changed", "data/orders.csv", "hash differs"),))
    hit = Hit(note, 0.91, 0.5, 0.8)
    fusion = {"weight": 0.7, "covered": 0.52, "from": 0.35, "full": 0.45, "most": 0.7,
              "priority": 0.02}
    hits = Hits([hit], query="order units", filtered_out=2, previously=(Hit(note, 0.3),),
                explain=True, fusion=fusion)
    values = {
        "note": note, "hit": hit, "page": Page([note], 12, 0, 1),
        "snapshot": Snapshot("before", 9, at, "why", "ana", 4),
        "event": Event(3, at, 7, "edited", "ana", {"changed": ["text"]}),
        "at": at, "tags": ("a", "b"), "odd": {"$type": "not mine", "n": 1}, "none": None,
    }
    back = codec.decode(json.loads(json.dumps(codec.encode(values))))
    assert back == {**values, "tags": ["a", "b"]}
    decoded = codec.decode(json.loads(json.dumps(codec.encode(hits))))
    assert isinstance(decoded, Hits) and list(decoded) == [hit]
    assert (decoded.query, decoded.filtered_out, decoded.previously, decoded.explain,
            decoded.fusion) == ("order units", 2, (Hit(note, 0.3),), True, fusion)
    assert codec.encode_arguments({"progress": print, "k": 3}) == {"k": 3}
    with pytest.raises(TypeError, match="Cannot send a object to the store's owner"):
        codec.encode(object())


def test_owner_encodes_batches_on_the_thread_count_that_is_faster():
    from nbmemory.embed import ThreadTuner

    class Fake:
        name, threads, now, calls = "fake", 1, 0.0, []

        def encode(self, texts):
            Fake.calls.append((len(texts), Fake.threads))
            Fake.now += len(texts) * self.cost[Fake.threads]
            return [[0.0]] * len(texts)

    def set_threads(n):
        Fake.threads = n

    fake = Fake()
    tuner = ThreadTuner(fake, set_threads=set_threads, explore=4, clock=lambda: Fake.now)
    assert tuner.name == "fake"
    fake.cost = {1: 0.010, 2: 0.006}  # a quiet machine: two threads win
    for _ in range(8):
        tuner.encode(["a", "b", "c", "d"])
        tuner.encode(["query"])
    assert [t for n, t in Fake.calls if n == 1] == [1] * 8  # queries stay on one thread
    assert [t for n, t in Fake.calls if n == 4] == [1, 2, 2, 2, 1, 2, 2, 2]
    assert Fake.threads == 1
    fake.cost = {1: 0.010, 2: 0.050}  # other processes took the second core
    Fake.calls.clear()
    for _ in range(8):
        tuner.encode(["a", "b", "c", "d"])
    # One slow batch on two threads sends it back to one; every 4th batch tries two again.
    assert [t for _, t in Fake.calls] == [1, 2, 1, 1, 2, 1, 1, 1]


def test_bulk_batches_keep_their_own_record_and_may_use_every_core():
    from nbmemory.embed import BULK, ThreadTuner

    calls = []

    class Fake:
        name = "fake"

        def encode(self, texts):
            calls.append((len(texts), threads[0]))
            now[0] += len(texts) * {1: 0.010, 4: 0.004}[threads[0]]
            return [[0.0]] * len(texts)

    threads, now = [1], [0.0]
    tuner = ThreadTuner(Fake(), set_threads=lambda n: threads.__setitem__(0, n), explore=100,
                        clock=lambda: now[0], cores=4)
    for _ in range(3):
        tuner.encode(["x"] * BULK)
    tuner.encode(["a", "b"])  # a small batch starts on one thread: bulk records do not count
    assert calls == [(BULK, 4), (BULK, 1), (BULK, 4), (2, 1)]
    assert threads[0] == 1  # back to one thread for the next query


def test_a_query_goes_before_the_next_bulk_chunk():
    """Found by review: an import encodes chunk after chunk outside the engine's lock; the
    lock around the model is not fair, so the import took it back between its chunks and a
    recall (holding the engine's lock meanwhile) waited for several of them."""
    import threading

    from nbmemory.embed import BULK, ThreadTuner

    order, first_chunk = [], threading.Event()

    class Fake:
        name = "fake"

        def encode(self, texts):
            order.append(texts[0])
            if texts[0] == "chunk 1":
                assert first_chunk.wait(30)
            return [[0.0]] * len(texts)

    tuner = ThreadTuner(Fake(), set_threads=lambda n: None)
    importing = threading.Thread(target=lambda: [tuner.encode([f"chunk {i}"] * BULK)
                                                 for i in (1, 2)])
    importing.start()
    wait_for(lambda: order == ["chunk 1"], what="the first chunk to be encoded")
    asking = threading.Thread(target=lambda: tuner.encode(["a query"]))
    asking.start()
    wait_for(lambda: tuner._small_waiting == 1, what="the query to wait for the model")
    first_chunk.set()
    importing.join(30)
    asking.join(30)
    assert order == ["chunk 1", "a query", "chunk 2"]


# -- the same API, through the owner ---------------------------------------------------------

def test_every_call_works_through_the_owner(mem, store):
    assert mem.mode == "service"
    note = mem.remember("orders.amount is in cents before 2021", tags="orders,units",
                        priority="high", provenance=Provenance(notebook="a.ipynb"))
    assert (note.id, note.tags, note.priority, note.provenance.notebook) == \
        (1, ("orders", "units"), "high", "a.ipynb")
    assert mem.get(note.id) == note
    hits = mem.recall("orders.amount cents", explain=True, since=datetime(2020, 1, 1,
                                                                         tzinfo=timezone.utc))
    assert isinstance(hits, Hits) and hits[0].note == note and hits[0].lexical is not None
    assert hits.fusion["weight"] == KEYWORD_WEIGHT  # how the score was made reaches a kernel
    other = mem.remember("orders.amount is in cents before 2021 and in euros after")
    assert [h.note.id for h in mem.similar(other.id, k=3)] == [note.id]
    edited = mem.edit(note.id, text="orders.amount is in cents before March 2021")
    assert edited.version == 2
    assert [e.type for e in mem.history(note.id)] == ["created", "edited"]
    newer = mem.supersede(other.id, "load_orders converts cents to euros")
    assert mem.get(other.id).status == "superseded" and newer.id == 3
    assert [n.id for n in mem.forget([newer.id])] == [newer.id]
    assert mem.reinstate(newer.id).status == "active"
    snap = mem.snapshot("before-refactor", message="all good")
    assert mem.snapshots() == [snap] and snap.note_count == 2
    page = mem.notes(limit=1)
    assert isinstance(page, Page) and page.total == 2 and len(page.notes) == 1
    status = mem.status()
    assert status["mode"] == "service" and status["pid"] == owner_info(store)["pid"] != os.getpid()
    assert status["queue"] == 0 and status["model"] == HASH and status["notes"] == 2


@pytest.mark.parametrize("call, error, message", [
    (lambda m: m.remember("   "), InvalidInput, "The note is empty; write the finding itself"),
    (lambda m: m.remember("x", kind="idea"), InvalidInput, "Unknown kind 'idea'"),
    (lambda m: m.recall(""), InvalidInput, "The query is empty"),
    (lambda m: m.get(999), NotFound, "No note #999. Recall or list notes"),
    (lambda m: m.reinstate(1), Conflict, "Cannot reinstate note #1: it is active already"),
])
def test_errors_arrive_as_the_same_class_and_message(mem, call, error, message):
    mem.remember("a first note")
    with pytest.raises(error, match=message):
        call(mem)
    assert mem.notes().total == 1


def test_retried_remember_is_applied_once(mem):
    first = mem.remember("only once please", request_id="req-1")
    again = mem.remember("only once please", request_id="req-1")
    assert again == first and mem.notes().total == 1


def _question(m):
    return m.remember("is orders.amount in cents?", kind="question").id


def _forgotten(m):
    note = m.remember("a note to bring back")
    m.forget(note.id)
    return note.id


def _confirmed(m):
    note_id = _question(m)
    m.confirm(note_id, "checked the loader")
    return note_id


def _export(m, tmp_path):
    with Memory.open(tmp_path / "source", embedder=HashEmbedder(), mode="local") as source:
        for i in range(5):
            source.remember(f"exported finding {i}", tags="exported")
        source.export_jsonl(tmp_path / "export.jsonl")
    return tmp_path / "export.jsonl"


# operation -> (setup returning the argument, the call with a request id, event it journals)
RESENT_WRITES = {
    "reinstate": (_forgotten, lambda m, x, r: m.reinstate(x, request_id=r), "reinstated"),
    "purge": (lambda m: m.remember("secret").id, lambda m, x, r: m.purge(x, request_id=r),
              "purged"),
    "confirm": (_question, lambda m, x, r: m.confirm(x, "yes", request_id=r), "confirmed"),
    "refute": (_question, lambda m, x, r: m.refute(x, "no, euros", request_id=r), "refuted"),
    "reopen": (_confirmed, lambda m, x, r: m.reopen(x, request_id=r), "reopened"),
    "snapshot": (lambda m: "before-refactor",
                 lambda m, x, r: m.snapshot(x, message="sealed once", request_id=r), "snapshot"),
    "import_jsonl": (None, lambda m, x, r: m.import_jsonl(x, on_conflict="keep-both",
                                                          request_id=r), None),
    "reindex": (lambda m: None, lambda m, x, r: m.reindex(request_id=r), None),
    "reembed": (lambda m: None, lambda m, x, r: m.reembed(request_id=r), None),
}


@pytest.mark.parametrize("operation", list(RESENT_WRITES))
def test_every_resent_write_is_applied_once_and_answers_the_same(mem, tmp_path, operation):
    """A client resends a write whose owner died before answering: same request id."""
    setup, call, event = RESENT_WRITES[operation]
    mem.remember("a note that was there before")
    argument = _export(mem, tmp_path) if setup is None else setup(mem)
    before = mem.status()
    first = call(mem, argument, "req-resent")
    after = mem.status()
    again = call(mem, argument, "req-resent")
    assert again == first
    assert mem.status()["journal_position"] == after["journal_position"]  # nothing new
    assert mem.status()["by_status"] == after["by_status"]
    if event is not None:  # the journal holds the change once
        journal = mem.history(argument) if event != "snapshot" else None
        if journal is not None:
            assert [e.type for e in journal].count(event) == 1
    if operation == "snapshot":
        assert mem.snapshots() == [first]
        with pytest.raises(Conflict, match="A snapshot named 'before-refactor' already exists"):
            call(mem, argument, "another-request")  # a new request is refused as before
    if operation == "import_jsonl":
        # keep-both would add a copy of each note if the resend were applied again.
        assert first["added"] == 5 and mem.notes().total == before["notes"] + 5


def test_a_resent_import_into_an_empty_store_answers_like_the_first(mem, tmp_path):
    path = _export(mem, tmp_path)
    first = mem.import_jsonl(path, request_id="restore-1")
    assert first["restored"] == 5
    assert mem.import_jsonl(path, request_id="restore-1") == first
    assert mem.notes().total == 5


def test_an_import_resent_after_the_owner_was_killed_is_applied_once(mem, store, tmp_path):
    """kill -9 the owner once the import has committed and is embedding: the client starts
    another owner and resends the import under the same request id, which answers the
    first one's summary instead of merging the file again (keep-both would copy it all)."""
    with Memory.open(tmp_path / "source", embedder=HashEmbedder(), mode="local") as source:
        source._backend.engine.remember_many(
            [{"text": f"finding {i} about module m{i % 40}"} for i in range(1500)])
        source.export_jsonl(tmp_path / "all.jsonl")
    mem.remember("a note that was there before")  # so the import merges, then embeds
    first = owner_info(store)["pid"]
    mem._backend.progress_poll = 0.005
    killed = []

    def progress(done, total):
        if not killed:  # the merge has committed; the owner is embedding or indexing
            signal_owner(first)
            killed.append((done, total))

    summary = mem.import_jsonl(tmp_path / "all.jsonl", on_conflict="keep-both",
                               progress=progress)
    assert killed and summary["added"] == 1500
    assert owner_info(store)["pid"] != first  # a new owner finished the job
    status = mem.status()
    assert status["notes"] == 1501 and status["vectors"] == 1501
    assert mem.recall("finding 1234")[0].note.text == "finding 1234 about module m34"


def test_remember_many_writes_every_note_once_and_reports_progress(mem, store):
    notes = [{"text": f"finding {i} about table t{i % 7}", "tags": f"t{i % 7}",
              "priority": "high" if i % 10 == 0 else "medium"} for i in range(600)]
    seen = []
    mem._backend.progress_poll = 0.005
    written = mem.remember_many(notes, request_id="bulk-1", progress=lambda d, t: seen.append((d, t)))
    assert [n.text for n in written] == [n["text"] for n in notes]
    assert [n.id for n in written] == list(range(1, 601))
    assert written[10].priority == "high" and written[3].tags == ("t3",)
    assert seen[-1] == (600, 600)
    assert mem.recall("finding 123 about table t4")[0].note.id == 124
    # Sent again (as after a crash): the same notes come back, nothing is written twice.
    again = mem.remember_many(notes, request_id="bulk-1")
    assert [n.id for n in again] == [n.id for n in written]
    assert mem.status()["notes"] == 600


def test_remember_many_refuses_every_note_when_one_is_bad(mem, store):
    mem.remember("a note that was there before")
    with pytest.raises(InvalidInput, match=r"2 of 3 notes cannot be remembered, so none was: "
                                           r"note 1: The note is empty.*note 2: Unknown kind"):
        mem.remember_many([{"text": "fine"}, {"text": "  "}, {"text": "x", "kind": "rumour"}])
    with pytest.raises(InvalidInput, match="note 0: expected a dict of remember's arguments "
                                           "or a text, got int"):
        mem.remember_many([42])
    with pytest.raises(InvalidInput, match="^1 of 1 notes cannot be remembered, so none was: "
                                           "note 0: no argument 'colour'; a note takes text, "
                                           "kind, priority, tags, author, "):
        mem.remember_many([{"text": "x", "colour": "red"}])
    with pytest.raises(InvalidInput, match="so none was: note 0: no text$"):
        mem.remember_many([{"tags": "orders"}])
    with pytest.raises(InvalidInput, match="note 1: no argument 'prio', 'txt' \\(and no text\\); "):
        mem.remember_many(["fine", {"txt": "typo", "prio": "high"}])
    assert mem.status()["notes"] == 1


def test_remember_many_checks_what_it_supersedes_before_writing_any(mem, store):
    """A note replacing a missing or forgotten note, or one replaced twice, was found only
    when its chunk was written: the rest of the chunk was stored, and the error's count
    and its advice to send the call again (which wrote them all twice) were wrong."""
    old = mem.remember("orders.amount is in dollars")
    gone = mem.remember("a finding forgotten since")
    mem.forget(gone.id)
    notes = [f"finding {i} about table t{i}" for i in range(20)]
    for bad, says in ((999, "No note #999"), (gone.id, f"Cannot supersede note #{gone.id}")):
        with pytest.raises(InvalidInput, match=rf"^1 of 20 notes cannot be remembered, so none "
                                               rf"was: note 5: {says}"):
            mem.remember_many(notes[:5] + [{"text": "replaces", "supersedes": bad}] + notes[6:])
    twice = [{"text": "amount in cents", "supersedes": old.id},
             {"text": "amount in euros", "supersedes": old.id}]
    with pytest.raises(InvalidInput, match=rf"note 1: Cannot supersede note #{old.id} twice"):
        mem.remember_many(twice)
    assert mem.status()["notes"] == 1
    first = mem.remember_many(twice[:1] + notes, request_id="bulk-2")
    again = mem.remember_many(twice[:1] + notes, request_id="bulk-2")  # resent: not refused
    assert [n.id for n in again] == [n.id for n in first]
    assert mem.status()["notes"] == 21


def test_remember_many_takes_texts_alone(mem):
    notes = mem.remember_many(text for text in ("a text alone", "takes remember's defaults"))
    assert [(n.text, n.kind, n.priority) for n in notes] == [
        ("a text alone", "finding", "medium"), ("takes remember's defaults", "finding", "medium")]


def test_note_from_process_a_is_recalled_in_process_b_immediately(mem, store):
    writer = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent("""
            import sys
            from nbmemory import Memory
            mem = Memory.open(sys.argv[1], model="hash:64", mode="service")
            for line in sys.stdin:
                note = mem.remember(line.strip())
                print(note.id, flush=True)
        """), str(store)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        for i in range(20):
            writer.stdin.write(f"finding {i} about table zq{i}x\n")
            writer.stdin.flush()
            note_id = int(writer.stdout.readline())  # A's remember has returned
            assert mem.recall(f"zq{i}x")[0].note.id == note_id
            assert mem.notes(limit=1).notes[0].id == note_id
    finally:
        writer.stdin.close()
        writer.wait(timeout=30)
    assert writer.returncode == 0


# -- ownership -------------------------------------------------------------------------------

def test_in_process_mode_names_the_running_owner(mem, store):
    pid = owner_info(store)["pid"]
    assert (store / "owner.lock").read_text() == f"{pid}\nservice\n"
    with pytest.raises(StoreLocked, match=rf"owned by another process \(pid {pid}\)"):
        Memory.open(store, embedder=HashEmbedder())


def test_a_second_script_is_told_to_close_the_first_not_to_stop_an_owner(store):
    """A script holding the store in-process serves nobody, and nbmemory stop refuses it:
    "use it through that owner, or stop it first" could not be followed."""
    opening = ("import sys; from nbmemory import Memory; from nbmemory.embed import HashEmbedder; "
               "Memory.open(sys.argv[1], embedder=HashEmbedder(), mode='local')")
    with Memory.open(store, embedder=HashEmbedder(), mode="local"):
        second = subprocess.run([sys.executable, "-c", opening, str(store)], capture_output=True,
                                text=True, timeout=120)
    assert second.stderr.strip().splitlines()[-1] == (
        f"nbmemory.errors.StoreLocked: The store {store} is open in-process by another program "
        f"(pid {os.getpid()}), which serves no other process: close that program (or its "
        "Memory), then try again.")


def test_service_client_fails_fast_when_a_script_holds_the_store(store):
    with Memory.open(store, embedder=HashEmbedder(), mode="local"):
        started = time.monotonic()
        with pytest.raises(StoreLocked, match=rf"owned by another process \(pid {os.getpid()}\) "
                                              "that does not serve other processes"):
            Memory.open(store, model=HASH, mode="service")
        assert time.monotonic() - started < 5
        assert owner_info(store) == {"mode": "local", "pid": os.getpid(), "store": str(store)}


def test_an_owner_that_has_not_written_owner_json_yet_is_not_taken_for_a_script(store):
    """Between taking the lock and writing owner.json an owner may be descheduled on a
    loaded machine: a client waits for it (owner.lock says it is a service, or an older
    owner's owner.json names it), where a script holding the store is named at once."""
    from nbmemory.service.client import ServiceBackend
    from nbmemory.service.protocol import write_info

    store.mkdir(mode=0o700, exist_ok=True)
    locker = ("import fcntl, os, sys; f = open(sys.argv[1], 'r+'); fcntl.flock(f, "
              "fcntl.LOCK_EX); f.truncate(); f.write(f'{os.getpid()}\\n' + sys.argv[2]); "
              "f.flush(); print('locked', flush=True); sys.stdin.read()")
    (store / "owner.lock").touch(mode=0o600)
    for role in ("service\n", "an older owner", "a script"):
        holder = subprocess.Popen([sys.executable, "-c", locker, str(store / "owner.lock"),
                                   role if role == "service\n" else ""],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout.readline() == "locked\n"
            if role == "an older owner":
                write_info(store, {"pid": holder.pid, "state": "starting"})
            backend = ServiceBackend(store, model=HASH, startup_timeout=3)
            with pytest.raises((StoreLocked, StoreUnavailable)) as caught:
                backend.ensure_owner()
            backend.close()
            if role == "a script":
                assert caught.type is StoreLocked
                assert f"owned by another process (pid {holder.pid}) that does not serve" in \
                    str(caught.value)
                assert owner_info(store) == {"mode": "local", "pid": holder.pid,
                                             "store": str(store)}
            else:
                assert "answered within 3 s" in str(caught.value), str(caught.value)
            if role == "service\n":
                assert owner_info(store) == {"mode": "service", "pid": holder.pid,
                                             "store": str(store)}
                assert stop(store, timeout=10) is True  # SIGTERM: it does not answer yet
                assert holder.wait(timeout=30) == -signal.SIGTERM
        finally:
            holder.stdin.close()
            holder.wait(timeout=30)
            (store / "owner.json").unlink(missing_ok=True)


def test_stop_never_signals_a_lock_holder_whose_pid_is_unknown(store):
    """A new owner has locked the store but not written its pid: owner_info says None (it
    said -1, and a kill of pid -1 signals every process). stop waits a moment, then says so."""
    store.mkdir(mode=0o700, exist_ok=True)
    (store / "owner.lock").touch(mode=0o600)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, sys; f = open(sys.argv[1], 'r+'); "
         "fcntl.flock(f, fcntl.LOCK_EX); print('locked', flush=True); sys.stdin.read()",
         str(store / "owner.lock")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "locked\n"
        assert owner_info(store) == {"mode": "local", "pid": None, "store": str(store)}
        with pytest.raises(StoreLocked, match="locked by a process that wrote no pid into "
                                              r"owner.lock \(not nbmemory\?\); close it"):
            stop(store, timeout=5)
        assert holder.poll() is None
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)


def test_stop_signals_only_the_process_holding_the_lock(store):
    """A pid read 30 s earlier (an owner that has exited since) may be another program's
    by now: stop sends SIGTERM only to the pid that holds the store's lock."""
    from nbmemory.service import control

    store.mkdir(mode=0o700, exist_ok=True)
    bystander = subprocess.Popen(
        [sys.executable, "-c", "import signal, sys\n"
         "for s in (signal.SIGTERM, signal.SIGWINCH):\n"
         "    signal.signal(s, lambda n, f: print(signal.Signals(n).name, flush=True))\n"
         "print('ready', flush=True)\nsys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert bystander.stdout.readline() == "ready\n"
        control._terminate(store, bystander.pid)  # nobody holds this store's lock
        # Had SIGTERM been sent, Linux would deliver it before the higher SIGWINCH.
        os.kill(bystander.pid, signal.SIGWINCH)
        assert bystander.stdout.readline() == "SIGWINCH\n"
    finally:
        bystander.stdin.close()
        bystander.wait(timeout=30)


def test_embedder_objects_stay_local():
    with pytest.raises(InvalidInput, match="cannot be sent to the store's owner"):
        Memory.open("/nonexistent-store", embedder=HashEmbedder(), mode="service")
    with pytest.raises(InvalidInput, match="Unknown mode 'remote'"):
        Memory.open("/nonexistent-store", mode="remote")


def test_owner_files_are_private(mem, store, transport):
    mem.remember("x")
    info = owner_info(store)
    assert stat.S_IMODE(os.stat(store).st_mode) == 0o700
    assert info["state"] == "serving" and info["version"] == nbmemory.__version__
    assert info["model"] == HASH and info["transport"] == transport
    if transport == "unix":
        assert info["socket"] == str(store / "owner.sock") and info["port"] is None
        assert stat.S_IMODE(os.stat(store / "owner.sock").st_mode) == 0o600
        assert not (store / "owner.key").exists()
    else:
        assert info["socket"] is None and info["port"] > 0
        assert stat.S_IMODE(os.stat(store / "owner.key").st_mode) == 0o600
        assert not (store / "owner.sock").exists()
        secret = (store / "owner.key").read_text().strip()
        assert len(secret) == 64 and secret not in json.dumps(info)  # the port, not the key
        assert info["auth"] == "secret (owner.key)"


@pytest.mark.parametrize("mode", [0o777, 0o1777])
def test_world_writable_store_directory_is_refused(store, mode):
    store.mkdir()
    store.chmod(mode)
    with pytest.raises(StoreUnavailable, match=rf"{store} cannot be used safely: it is "
                                               rf"writable by every user.*chmod 700 {store}"):
        Memory.open(store, model=HASH, mode="service")
    result = python("from nbmemory.service.__main__ import main; raise SystemExit(main())",
                    "--store", store, check=False)
    assert result.returncode == 2 and "it is writable by every user" in result.stderr
    assert not (store / "owner.sock").exists() and not lock_held(store)
    assert not (store / "owner.error.json").exists()  # nothing written where others write


def test_a_store_started_through_the_service_stays_out_of_git(tmp_path):
    (tmp_path / ".git").mkdir()
    store = tmp_path / ".nbmemory"
    try:
        with Memory.open(store, model=HASH, mode="service") as memory:
            memory.remember("not for git")
        assert (store / ".gitignore").read_text().endswith("*\n")
    finally:
        stop(store)


def test_the_client_imports_nothing_heavy():
    out = python("""
        import sys
        import nbmemory.service, nbmemory.service.client, nbmemory.memory
        heavy = ["torch", "sentence_transformers", "duckdb", "usearch", "numpy", "tornado"]
        print(",".join(m for m in heavy if m in sys.modules))
    """)
    assert out.stdout.strip() == ""


def test_long_store_path_works(tmp_path):
    deep = tmp_path / ("d" * 60) / ("e" * 60) / "store"
    assert len(str(deep / "owner.sock")) > 108
    try:
        with Memory.open(deep, model=HASH, mode="service") as memory:
            assert memory.remember("deep stores work").id == 1
    finally:
        stop(deep)


def make_newer(store):
    """A store whose schema has a migration from a future nbmemory."""
    with Memory.open(store, embedder=HashEmbedder(), mode="local") as local:
        local.remember("a note")
        local._backend.engine.store.con.execute(
            "INSERT INTO migrations VALUES ('m999_from_the_future', now())")


def make_unreadable(store):
    store.mkdir(mode=0o700)
    (store / "memory.duckdb").write_bytes(b"this is not a database" * 100)


@pytest.mark.parametrize("make, error, says", [
    (make_newer, StoreTooNew, r"The store {db} was written by a newer nbmemory \(it has "
                              r"migration m999_from_the_future; .*\)\. Upgrade nbmemory \(pip "
                              r"install -U nbmemory\); the store was not touched\."),
    (make_unreadable, StoreUnavailable, r"The store {db} is unreadable \(.*\)\. It may be "
                                        r"damaged .*move memory\.duckdb and memory\.duckdb\.wal "
                                        r"away together to start a new store\."),
])
def test_owner_that_cannot_start_says_why_in_one_line(store, make, error, says):
    make(store)
    before = (store / "memory.duckdb").read_bytes()
    with pytest.raises(error) as caught:
        Memory.open(store, model=HASH, mode="service")
    assert type(caught.value) is error  # the owner's class, not a generic one
    message = str(caught.value)
    assert "\n" not in message
    assert re.fullmatch(says.format(db=re.escape(str(store / "memory.duckdb")))
                        + re.escape(f" (details: {store / 'owner.log'})"), message), message
    assert (store / "memory.duckdb").read_bytes() == before
    assert "nbmemory: The store" in (store / "owner.log").read_text()  # details stay there
    assert not lock_held(store) and not (store / "owner.sock").exists()


def test_an_owner_started_through_a_launcher_still_says_why_it_could_not_start(
        store, tmp_path, monkeypatch):
    """A Windows venv's python.exe is a launcher that runs the real interpreter as its
    child: the owner's pid is not the one the client started, and a store too new was
    reported as "could not start (exit status 1)"."""
    import nbmemory.service.client as client

    launcher = tmp_path / "python-launcher"
    launcher.write_text(f"#!/bin/sh\n{sys.executable} \"$@\"\n")  # a child, not exec
    launcher.chmod(0o755)
    monkeypatch.setattr(client.sys, "executable", str(launcher))
    make_newer(store)
    with pytest.raises(StoreTooNew, match="was written by a newer nbmemory"):
        Memory.open(store, model=HASH, mode="service")


def test_the_next_owner_forgets_an_earlier_failure_to_start(store):
    import duckdb

    make_newer(store)
    with pytest.raises(StoreTooNew):
        Memory.open(store, model=HASH, mode="service")
    assert json.loads((store / "owner.error.json").read_text())["type"] == "StoreTooNew"
    con = duckdb.connect(str(store / "memory.duckdb"))  # as if nbmemory were upgraded
    con.execute("DELETE FROM migrations WHERE name = 'm999_from_the_future'")
    con.close()
    with Memory.open(store, model=HASH, mode="service") as memory:
        assert memory.notes().total == 1
    assert not (store / "owner.error.json").exists()


# -- lifecycle -------------------------------------------------------------------------------

def test_stale_socket_and_lock_after_kill_9_do_not_block(mem, store, transport):
    note = mem.remember("survives the crash")
    old = owner_info(store)["pid"]
    signal_owner(old)
    wait_for(lambda: not pid_alive(old), what="the owner to die")
    leftover = "owner.sock" if transport == "unix" else "owner.key"
    assert (store / leftover).exists() and (store / "owner.lock").exists()
    started = time.monotonic()
    assert mem.get(note.id) == note  # the next request starts a new owner
    assert time.monotonic() - started < 15
    new = owner_info(store)["pid"]
    assert new != old and pid_alive(new)


def test_leftover_files_from_a_crash_do_not_block(store):
    store.mkdir(mode=0o700)
    leftover = socket.socket(socket.AF_UNIX)
    leftover.bind(str(store / "owner.sock"))
    leftover.close()  # a socket file nobody listens on
    (store / "owner.lock").write_text("999999\n")
    (store / "owner.json").write_text(json.dumps({"pid": 999999, "state": "serving"}))
    with Memory.open(store, model=HASH, mode="service") as memory:
        assert memory.remember("fresh start").id == 1
        assert owner_info(store)["pid"] != 999999


def test_owner_exits_when_idle_and_lets_go(store):
    with Memory.open(store, model=HASH, mode="service", idle_timeout=1) as memory:
        memory.remember("short-lived owner")
        [(pid, _)] = served(store)  # owner_info says None once it is gone
        wait_for(lambda: not lock_held(store), timeout=30, what="the idle owner to exit")
        assert not (store / "owner.sock").exists() and not (store / "owner.json").exists()
        wait_for(lambda: not pid_alive(pid), what="the owner process to end")
        assert "stopping: idle for 1 s" in (store / "owner.log").read_text()
        assert memory.recall("short-lived")[0].note.text == "short-lived owner"  # restarts
    stop(store)
    with Memory.open(store, embedder=HashEmbedder(), mode="local") as local:
        assert local.notes().total == 1


def test_idle_timeout_from_the_environment_reaches_spawned_owners(store, monkeypatch):
    """NBMEMORY_IDLE_TIMEOUT is read where owners are started, for every front end."""
    monkeypatch.setenv("NBMEMORY_IDLE_TIMEOUT", "0.5")
    with Memory.open(store, model=HASH, mode="service") as memory:
        memory.remember("an owner that leaves soon")
        assert served(store)[0][1] == "0.5"
        assert memory.status()["idle_timeout_s"] == 0.5
        wait_for(lambda: not lock_held(store), what="the idle owner to exit")
        assert "stopping: idle for 0.5 s" in (store / "owner.log").read_text()
    # The owner's own command reads it too when --idle-timeout is not given.
    owner = subprocess.Popen([sys.executable, "-m", "nbmemory.service", "--store", str(store),
                              "--model", HASH], stderr=subprocess.PIPE, text=True)
    try:
        assert owner.wait(timeout=60) == 0  # exits on its own after half a second
        assert "idle timeout 0.5 s" in owner.stderr.read()
    finally:
        if owner.poll() is None:
            owner.kill()


def test_a_bad_idle_timeout_in_the_environment_says_what_to_write(store, monkeypatch):
    monkeypatch.setenv("NBMEMORY_IDLE_TIMEOUT", "ten minutes")
    with pytest.raises(InvalidInput, match=r"NBMEMORY_IDLE_TIMEOUT='ten minutes' is not a "
                                           r"number of seconds; set it to e\.g\. 600, or 0"):
        Memory.open(store, model=HASH, mode="service")
    assert not lock_held(store)


def test_stop_and_owner_info(store):
    assert owner_info(store) is None and stop(store) is False
    with Memory.open(store, model=HASH, mode="service") as memory:
        memory.remember("x")
        info = owner_info(store)
        assert info["mode"] == "service" and info["queue"] == 0 and info["uptime_s"] >= 0
        assert stop(store) is True
        assert owner_info(store) is None and not lock_held(store)
        wait_for(lambda: not pid_alive(info["pid"]), what="the owner process to end")


def test_owner_runs_on_its_own_from_the_command_line(store):
    owner = subprocess.Popen([sys.executable, "-m", "nbmemory.service", "--store", str(store),
                              "--model", HASH, "--idle-timeout", "0"],
                             stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: (owner_info(store) or {}).get("state") == "serving",
                 what="the owner to serve")
        assert owner_info(store)["pid"] == owner.pid
        second = python("from nbmemory.service.__main__ import main; raise SystemExit(main())",
                        "--store", store, check=False)
        assert second.returncode == 3 and f"already has an owner (pid {owner.pid})" in second.stderr
        with Memory.open(store, mode="service") as memory:  # no model asked: the owner's
            memory.remember("served from the command line")
        owner.send_signal(signal.SIGTERM)
        assert owner.wait(timeout=30) == 0
        assert "stopping: signal" in owner.stderr.read()
    finally:
        if owner.poll() is None:
            owner.kill()
    assert not lock_held(store) and not (store / "owner.sock").exists()


def owner_as(store, version: str, protocol: int | None = None) -> subprocess.Popen:
    """An owner of ``store`` started as nbmemory ``version`` (speaking ``protocol``)."""
    code = f"import sys, nbmemory; nbmemory.__version__ = {version!r}; "
    if protocol is not None:
        code += f"import nbmemory.service.protocol as p; p.PROTOCOL = {protocol}; "
    code += "from nbmemory.service.__main__ import main; sys.exit(main())"
    owner = subprocess.Popen([sys.executable, "-c", code, "--store", str(store), "--model", HASH],
                             stderr=subprocess.PIPE, text=True)
    wait_for(lambda: (owner_info(store) or {}).get("version") == version,
             what=f"the owner of nbmemory {version} to serve")
    return owner


def test_owner_of_another_version_is_replaced(store):
    old = owner_as(store, "0.0.1")
    try:
        with Memory.open(store, model=HASH, mode="service") as memory:
            memory.remember("written by the current version")
        assert old.wait(timeout=30) == 0
        assert f"runs nbmemory {nbmemory.__version__}" in old.stderr.read()
        info = owner_info(store)
        assert info["version"] == nbmemory.__version__ and info["pid"] != old.pid
    finally:
        if old.poll() is None:
            old.kill()


def test_an_owner_of_a_newer_version_serves_an_older_client(store):
    """Two installs of different versions on one store (JupyterLab's and a kernel's) used to
    stop each other's owners, each starting its own in turn at its next call."""
    newer = owner_as(store, "9.9.9")
    try:
        with Memory.open(store, model=HASH, mode="service") as memory:
            memory.remember("written by an older nbmemory")
            assert [n.text for n in memory.notes().notes] == ["written by an older nbmemory"]
        assert owner_info(store)["pid"] == newer.pid and newer.poll() is None
    finally:
        newer.kill()
        newer.wait()


def test_an_owner_of_a_newer_protocol_is_left_running_and_the_client_is_told(store):
    newer = owner_as(store, "9.9.9", protocol=2)
    try:
        with Memory.open(store, model=HASH, mode="service") as memory:
            with pytest.raises(StoreTooNew) as raised:
                memory.remember("written by an older nbmemory")
        assert str(raised.value) == (
            f"The store {store} is served by nbmemory 9.9.9 (protocol 2), newer than this "
            f"nbmemory {nbmemory.__version__} (protocol 1), which cannot talk to it. It was "
            "left running and nothing was done: upgrade nbmemory here (pip install -U "
            "nbmemory), then restart the kernel.")
        assert owner_info(store)["pid"] == newer.pid and newer.poll() is None
    finally:
        newer.kill()
        newer.wait()
    with Memory.open(store, model=HASH, mode="service") as memory:
        assert memory.notes().total == 0


@pytest.mark.parametrize("version, than", [
    ("0.10.0", "0.9.1"), ("0.2.0", "0.2.0rc1"), ("0.2rc1", "0.2b3"), ("0.2a1", "0.2.dev4"),
    ("0.2.post1", "0.2"), ("1.0.1", "1.0"), ("0.2.dev5", "0.2.dev4"), ("v2", "1.9"),
    ("0.2rc1", "0.2rc1.dev3"), ("1!0.1", "2.0"), ("0.1.0+local", "0.1.0"),
])
def test_versions_are_ordered_as_pip_orders_them(version, than):
    from nbmemory.service.protocol import newer

    assert newer(version, than) and not newer(than, version)
    assert not newer("1.0", "1.0.0")
    from nbmemory.service.protocol import replaces  # the same version, spelled otherwise
    assert not any(replaces(a, b) for a, b in [("1.0", "1.0.0"), ("0.2c1", "0.2rc1"),
                                               ("v0.2.0", "0.2.0"), ("0.1.9", "0.2")])
    assert replaces("0.2.1", "0.2") and replaces("unknown", "0.2")  # newer; not told apart
    # Not a version: neither is known to be newer (an owner replaces such a client, as before).
    assert not newer("unknown", "1.0") and not newer("1.0", "unknown") and not newer(None, "1.0")


def raw_post(store, path, body, headers, secret=True):
    """One POST to the owner with exactly these headers, plus the owner's secret on TCP
    unless ``secret`` is False (no client logic)."""
    import http.client

    address = transports.address_of(store, read_info(store))
    conn = http.client.HTTPConnection("nbmemory", timeout=30)
    conn.sock = address.connect(30)
    if secret:
        headers = {**address.headers(), **headers}
    try:
        conn.request("POST", path, body=json.dumps(body).encode(),
                     headers={"Content-Type": "application/json", **headers})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


@pytest.mark.parametrize("path, headers", [
    ("/v99/call", {"X-NbMemory-Protocol": "99"}),  # a client from the future
    ("/v99/call", {}),  # the path alone says which protocol
    ("/v1/call", {"X-NbMemory-Protocol": "99"}),
])
def test_a_client_of_another_protocol_gets_a_mismatch_not_a_404(mem, store, path, headers):
    """The handshake comes before routing, so any client can tell to replace the owner."""
    request = {"operation": "remember", "arguments": {"text": "from another protocol"}}
    status, payload = raw_post(store, path, request, headers)
    assert status == 409
    error = payload["error"]
    assert error["type"] == "OwnerMismatch"
    assert error["message"] == "The client wants protocol 99 (owner speaks 1)."
    assert (error["version"], error["protocol"], error["pid"]) == \
        (nbmemory.__version__, 1, owner_info(store)["pid"])
    assert mem.notes().total == 0  # nothing was done
    status, payload = raw_post(store, "/v1/elsewhere", request, {})
    assert status == 404 and payload["error"]["message"] == "No route /v1/elsewhere"


def test_owner_with_another_model_is_replaced(store):
    with Memory.open(store, model=HASH, mode="service") as memory:
        memory.remember("orders.amount is in cents")
        first = owner_info(store)["pid"]
    with Memory.open(store, model="hash:32", mode="service") as memory:
        with pytest.raises(EmbedderMismatch, match="made with hash:64, but the configured model "
                                                   "is 'hash:32'"):
            memory.recall("cents")
        info = owner_info(store)
        assert info["model"] == "hash:32" and info["pid"] != first


# -- the magics and the kernel ---------------------------------------------------------------

@contextlib.contextmanager
def magics(store, **config):
    """An IPython shell with nbmemory loaded on ``store`` and ``NbMemory.<name> = value`` set."""
    shell = InteractiveShell.instance(history_length=0)
    try:
        shell.run_line_magic("load_ext", "nbmemory")
        for name, value in {"store": str(store), "model": HASH, **config}.items():
            shell.run_line_magic("config", f"NbMemory.{name} = {value!r}")
        yield shell
    finally:
        shell.run_line_magic("unload_ext", "nbmemory")
        InteractiveShell.clear_instance()


def test_memory_magic_shows_the_owner(store):
    with magics(store) as shell:
        with capture_output():
            shell.run_line_magic("remember", "-t orders orders.amount is in cents")
        with capture_output() as captured:
            shell.run_line_magic("memory", "")
        text = "".join(o.data.get("text/plain", "") for o in captured.outputs)
        pid = owner_info(store)["pid"]
        assert pid != os.getpid()
        assert f"owner          pid {pid}, up " in text and ", queue 0" in text
        assert f"model          {HASH}" in text


def test_magics_idle_timeout_setting_reaches_the_owner(store, monkeypatch):
    monkeypatch.setenv("NBMEMORY_IDLE_TIMEOUT", "5")  # the setting wins over the environment
    with magics(store, idle_timeout=1) as shell:
        with capture_output():
            shell.run_line_magic("remember", "orders.amount is in cents")
        assert float(served(store)[0][1]) == 1
        wait_for(lambda: not lock_held(store), what="the idle owner to exit")
        with capture_output() as captured:
            shell.run_line_magic("memory", "settings")
        assert re.search(r"^NbMemory\.idle_timeout += 1\.0$", captured.stdout, re.M)


def test_magics_in_service_mode_say_in_one_line_what_to_do(store):
    """Issue 2's errors through the owner: one-line UsageErrors, the store untouched."""
    from IPython.core.error import UsageError

    make_newer(store)
    before = (store / "memory.duckdb").read_bytes()
    with magics(store, mode="service") as shell:
        for magic, line in (("remember", "-t orders orders.amount is in cents"),
                            ("recall", "cents"), ("memory", "")):
            with pytest.raises(UsageError) as caught:
                shell.run_line_magic(magic, line)
            message = str(caught.value)
            assert "\n" not in message, message
            assert "was written by a newer nbmemory" in message
            assert "Upgrade nbmemory (pip install -U nbmemory); the store was not touched." \
                in message
            assert message.endswith(f"(details: {store / 'owner.log'})")
    assert (store / "memory.duckdb").read_bytes() == before
    assert not lock_held(store)


def test_magics_in_service_mode_name_an_unavailable_model_in_one_line(store):
    from IPython.core.error import UsageError

    with magics(store, model="no-such-org/no-such-model", mode="service") as shell:
        with pytest.raises(UsageError) as caught:
            shell.run_line_magic("remember", "orders.amount is in cents")
        message = str(caught.value)
        assert "\n" not in message and message.startswith(
            "Cannot load the embedding model 'no-such-org/no-such-model' offline")
        assert "Use the default model (NbMemory.model = 'all-MiniLM-L6-v2')" in message
    with Memory.open(store, model="no-such-org/no-such-model", mode="service") as memory:
        assert memory.notes().total == 0  # nothing was stored


@pytest.mark.model
def test_kernel_never_imports_the_model(store):
    """Remember and recall with the real model through the service: the kernel stays light."""
    out = python(f"""
        import json, sys, time
        from IPython.core.interactiveshell import InteractiveShell
        ip = InteractiveShell.instance(history_length=0)
        ip.run_line_magic("load_ext", "nbmemory")
        ip.run_line_magic("config", "NbMemory.store = {str(store)!r}")
        ip.run_line_magic("remember", "PyObject_GC_Del frees memory allocated by the collector")
        ip.run_line_magic("remember", "orders.amount is stored in cents before 2021")
        hits = ip.run_line_magic("recall", "what unit is the order total in?")
        heavy = ["torch", "sentence_transformers", "transformers", "duckdb", "usearch", "numpy"]
        print(json.dumps({{"loaded": [m for m in heavy if m in sys.modules],
                          "first": hits[0].note.text}}))
    """, timeout=300)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"loaded": [], "first": "orders.amount is stored in cents before 2021"}
    assert owner_info(store)["model"] == "all-MiniLM-L6-v2"


@pytest.mark.model
def test_an_owner_stopped_while_its_model_loads_exits_cleanly(store):
    """A stop right after the first calls finds the warm-up thread still loading the model;
    the interpreter's shutdown used to abort there (exit -6, "terminate called without an
    active exception" in owner.log), about one owner in two. Several tries, as the race
    does not always happen."""
    for attempt in range(6):
        owner = subprocess.Popen([sys.executable, "-m", "nbmemory.service", "--store", str(store),
                                  "--idle-timeout", "300"], stderr=subprocess.PIPE,
                                 env={**os.environ, "HF_HUB_OFFLINE": "1"})
        try:
            wait_for(lambda: (owner_info(store) or {}).get("pid") == owner.pid or
                     owner.poll() is not None, timeout=60, what="the owner to serve")
            with Memory.open(store) as mem:  # the owner just started: no model yet
                if attempt == 0:
                    mem.remember("the nightly export moved to Airflow in March")
                assert len(mem.recall("when did the export move", k=1)) == 1
            stop(store, timeout=60)
            _, err = owner.communicate(timeout=60)
        finally:
            if owner.poll() is None:
                owner.kill()
        assert (owner.returncode, b"terminate called" in err) == (0, False), err.decode()[-400:]


def test_long_work_reports_progress_across_the_socket(mem, tmp_path):
    """Import, export and reindex in the owner drive a progress bar in the client."""
    from nbmemory.embed import HashEmbedder
    from nbmemory.memory import Memory

    with Memory.open(tmp_path / "source", embedder=HashEmbedder()) as source:
        source.remember_many([f"finding {i} about module m{i % 40}" for i in range(1200)])
        source.export_jsonl(tmp_path / "all.jsonl")
    mem._backend.progress_poll = 0.005  # ask often: the work is short here
    seen = []
    summary = mem.import_jsonl(tmp_path / "all.jsonl", progress=lambda d, t: seen.append((d, t)))
    assert summary["restored"] == 1200
    assert seen and seen[-1][0] == seen[-1][1]  # the bar ends full
    # Within a phase (same total) the count only grows.
    assert all(a[0] <= b[0] for a, b in zip(seen, seen[1:]) if a[1] == b[1])
    seen.clear()
    mem.reindex(progress=lambda d, t: seen.append((d, t)))
    assert seen and seen[-1] == (1200, 1200)


def test_memory_status_names_the_transport(mem, store):
    from nbmemory.display import status_display

    status = mem.status()
    line = next(l for l in status_display(status).text.splitlines() if l.startswith("owner"))
    expected = (f"TCP 127.0.0.1:{status['port']} with a secret" if status["transport"] == "tcp"
                else "unix socket")
    assert line.endswith(expected), line


def test_a_client_that_starts_an_owner_says_why_it_waits_once(store):
    said = []
    with Memory.open(store, model=HASH, mode="service", announce=said.append) as first:
        first.remember("the export runs at 02:00")
        with Memory.open(store, model=HASH, mode="service", announce=said.append) as second:
            assert second.notes().total == 1  # found the running owner: nothing to say
    assert said == [f"starting the memory service for {store} (it loads the embedding model "
                    "once: a few seconds)"]


def test_an_owner_that_could_not_reach_its_team_store_says_so_by_its_exit_status(tmp_path):
    """Owners started at once by several processes share owner.error.json: one's record can
    replace another's before it is read. The exit status still says "unreachable", so the
    client raises StoreUnreachable (and starts another owner later), not a generic error."""
    import subprocess
    import sys

    from nbmemory.errors import StoreUnreachable
    from nbmemory.service.startup import start_error
    from nbmemory.service.protocol import EXIT_UNREACHABLE, write_info

    store = tmp_path / "cache"
    store.mkdir(mode=0o700)
    with open(store / "owner.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", "import sys; print('nbmemory: The team store postgresql://t "
             f"is unreachable (server closed the connection)', file=sys.stderr); sys.exit({EXIT_UNREACHABLE})"],
            stderr=log)
        proc.wait(60)
    write_info(store, {"pid": proc.pid + 1, "type": "StoreTooNew", "message": "another's"},
               name="owner.error.json")
    error = start_error(store, proc, 0, "a start of ours")
    assert type(error) is StoreUnreachable
    assert str(error) == ("The team store postgresql://t is unreachable (server closed the "
                          f"connection) (details: {store / 'owner.log'})")


@pytest.mark.skipif(not hasattr(__import__("time"), "tzset"), reason="time.tzset is POSIX")
def test_a_day_is_the_same_midnight_in_every_front_end(monkeypatch):
    """`--since 2026-12-07` was UTC's midnight in the CLI and the magics, the Python API's
    '2026-12-07' this machine's, and a date could not be sent to the owner at all."""
    import time
    from datetime import date, datetime, timezone

    from nbmemory.engine.validate import moment
    from nbmemory.service import codec
    from nbmemory.store.filters import _naive
    from nbmemory.when import parse_since, parse_until

    monkeypatch.setenv("TZ", "America/Los_Angeles")
    time.tzset()
    try:
        day = parse_since("2026-12-07")
        assert day == datetime(2026, 12, 7, 8, tzinfo=timezone.utc)
        assert parse_until("2026-12-07") == datetime(2026, 12, 8, 8, tzinfo=timezone.utc)
        assert _naive(moment("2026-12-07", "since")) == _naive(day)
        assert _naive(moment(date(2026, 12, 7), "since")) == _naive(day)
        sent = codec.decode(json.loads(json.dumps(codec.encode(
            {"since": date(2026, 12, 7), "until": datetime(2026, 12, 7, 12)}))))
        assert sent == {"since": day, "until": datetime(2026, 12, 7, 20, tzinfo=timezone.utc)}
        assert parse_since("0001-01-01").year == 1  # no zone can take it: UTC's
        # The Python API reads text here, as the CLI does: the owner may run in another zone.
        from nbmemory.memory import _local_time
        assert (_local_time("2026-12-07"), _local_time("2026-12-07", end=True)) == (
            day, datetime(2026, 12, 8, 8, tzinfo=timezone.utc))
        assert _local_time("7d").tzinfo is not None and _local_time("last tuesday") == "last tuesday"
    finally:
        monkeypatch.undo()
        time.tzset()


def test_the_python_api_takes_its_model_from_NBMEMORY_MODEL_as_the_cli_does(tmp_path,
                                                                             monkeypatch):
    """A store made from Python ignored NBMEMORY_MODEL: it got the default model, and the
    CLI in the same shell then refused it as another model's."""
    from nbmemory.memory import Memory

    monkeypatch.setenv("NBMEMORY_MODEL", "hash:64")
    with Memory.open(tmp_path / "store", idle_timeout=5) as mem:
        mem.remember("orders.amount is in cents")
        assert mem.status()["model"] == "hash:64"


def test_an_owner_runs_the_nbmemory_its_client_imported(tmp_path):
    """A kernel in a source checkout imports the checkout's nbmemory; the owner it started
    (in the store's directory) imported the installed one, of another version, and the
    first call failed with 'OwnerMismatch'."""
    import shutil
    import subprocess
    import sys

    import nbmemory

    checkout = tmp_path / "checkout"
    shutil.copytree(Path(nbmemory.__file__).parent, checkout / "nbmemory",
                    ignore=shutil.ignore_patterns("__pycache__", "labextension"))
    version = checkout / "nbmemory" / "_version.py"
    version.write_text(version.read_text().replace(nbmemory.__version__, "9.9.9"))
    script = ("from nbmemory import Memory\n"
              f"with Memory.open({str(tmp_path / 'store')!r}, idle_timeout=5) as m:\n"
              "    m.remember('orders.amount is in cents')\n"
              "    print(m.status()['version'])\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=checkout, capture_output=True,
                          text=True, env={**os.environ, "NBMEMORY_MODEL": "hash:64"}, timeout=120)
    assert (done.returncode, done.stdout.strip()) == (0, "9.9.9"), done.stderr
