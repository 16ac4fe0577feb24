"""`nbmemory mcp` as a subprocess, driven over stdio by the MCP SDK's own client.

The hash embedder (NBMEMORY_MODEL=hash:64) stands in for the model: these tests are
about the protocol, the counters and the shared store, not retrieval quality.
"""

import json
import getpass
import os
import shutil
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

mcp = pytest.importorskip("mcp")
from mcp import Client, StdioServerParameters  # noqa: E402

from nbmemory.embed import HashEmbedder  # noqa: E402
from nbmemory.memory import Memory  # noqa: E402
from nbmemory.service import stop  # noqa: E402

from test_browse import kernel  # noqa: E402,F401  (a real IPython kernel)
from test_engine import snapshot_of  # noqa: E402

ENTRY = shutil.which("nbmemory", path=str(Path(sys.executable).parent)) or "nbmemory"
ENV = {"NBMEMORY_MODEL": "hash:64", "HF_HUB_OFFLINE": "1",
       # a checkout tested without installing it (PYTHONPATH=...) serves its own code
       **({"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {})}
LONG_NOTE = "orders.amount is stored in cents before 2021-03 and in euros after; divide by 100 first."


@asynccontextmanager
async def connect(store_dir, *args):
    params = StdioServerParameters(command=ENTRY, args=["mcp", "--store", str(store_dir), *args],
                                   env=ENV)
    async with Client(params, read_timeout_seconds=120) as client:
        yield client


async def call(client, tool, **arguments):
    """(parsed JSON, hint line or None); fails the test on a tool error."""
    result = await client.call_tool(tool, arguments)
    texts = [c.text for c in result.content]
    assert not result.is_error, texts
    assert len(texts) in (1, 2)
    return json.loads(texts[0]), (texts[1] if len(texts) == 2 else None)


async def error(client, tool, **arguments) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.content
    assert len(result.content) == 1
    return result.content[0].text


def run(body):
    anyio.run(body)


def test_tools_teach_good_use(store_dir):
    async def body():
        async with connect(store_dir) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == {"remember", "recall", "show", "list_notes", "forget",
                                  "reinstate", "snapshot", "snapshot_list", "snapshot_diff",
                                  "history", "status", "verify"}
            assert "not a pointer" in tools["remember"].description
            assert "Pair each recall with a note" in tools["recall"].description
            assert tools["recall"].annotations.read_only_hint is True
            assert tools["forget"].annotations.read_only_hint is False
            schema = tools["remember"].input_schema["properties"]
            assert "gotcha" in json.dumps(schema["kind"])
            assert "Pair each search with a note" in client.instructions
    run(body)


def test_remember_recall_forget_reinstate_status(store_dir):
    async def body():
        async with connect(store_dir) as client:
            data, _ = await call(client, "remember", text=LONG_NOTE, tags=["orders", "units"],
                                 kind="gotcha", priority="high")
            assert data["remembered"] == 1
            assert data["note"]["provenance"]["source"] == "mcp"
            data, _ = await call(client, "remember", text="acquire_lock() must run before the watcher starts")
            assert data["remembered"] == 2

            data, _ = await call(client, "recall", query="what unit is orders.amount in", k=3)
            top = data["hits"][0]
            assert top["id"] == 1 and top["text"] == LONG_NOTE
            assert top["stale"] == []
            assert top["provenance"]["source"] == "mcp" and top["provenance"]["cwd"] == os.getcwd()
            assert "cell_source" not in top["provenance"]
            assert (top["kind"], top["priority"], top["tags"]) == ("gotcha", "high", ["orders", "units"])

            data, _ = await call(client, "forget", note_ids=[1])
            assert data == {"forgotten": [1], "undo": "reinstate(note_id=1)"}
            data, _ = await call(client, "recall", query="orders.amount cents")
            assert 1 not in [h["id"] for h in data["hits"]]
            assert [h["id"] for h in data["previously_believed"]] == [1]
            assert data["previously_believed"][0]["status"] == "revoked"

            data, _ = await call(client, "reinstate", note_id=1)
            assert data["reinstated"] == 1 and data["note"]["status"] == "active"
            data, _ = await call(client, "history", note_id=1)
            assert [e["type"] for e in data["events"]] == ["created", "revoked", "reinstated"]
            assert "versions" not in data  # never edited: one version, the note's text

            data, _ = await call(client, "snapshot", name="after-units", message="units known")
            assert data["snapshot"]["note_count"] == 2
            data, _ = await call(client, "snapshot_list")
            assert [s["name"] for s in data["snapshots"]] == ["after-units"]

            data, _ = await call(client, "status")
            assert data["store"]["store"] == str(store_dir) and data["store"]["notes"] == 2
            tools = data["session"]["tools"]
            assert tools["remember"] == {"calls": 2, "errors": 0}
            assert (tools["recall"]["calls"], tools["recall"]["errors"]) == (2, 0)  # empty
            # ones are counted in test_empty_recalls_are_counted
            assert tools["forget"]["calls"] == tools["reinstate"]["calls"] == 1
    run(body)


def test_a_store_not_there_is_said_to_the_agent_and_made_only_by_remember(tmp_path):
    """A mistyped --store in the agent's configuration: a read says so (an empty answer
    would tell the agent to start writing there); remember creates the store."""
    store = tmp_path / "store"

    async def body():
        async with connect(store) as client:
            text = await error(client, "recall", query="what unit is orders.amount in")
            assert text == (f"No store at {store} (given explicitly): nothing was remembered "
                            "there yet. Check --store and NBMEMORY_HOME; the remember tool "
                            "creates it. Nothing was changed.")
            assert not store.exists()
            text = await error(client, "remember", text="   ")  # refused: no store made
            assert text.startswith("The note is empty") and not store.exists()
            text = await error(client, "remember", text=LONG_NOTE, about=["missing.csv"])
            assert text == (f"about='missing.csv': nothing exists there (looked in "
                            f"{os.getcwd()}, {tmp_path}). Check the path. Nothing was changed.")
            assert not store.exists()
            data, _ = await call(client, "remember", text=LONG_NOTE)
            assert data["created_store"] == f"{store} (given explicitly)"  # as mcp.md says
            data, _ = await call(client, "recall", query="what unit is orders.amount in")
            assert data["hits"][0]["id"] == 1
    run(body)


def test_a_project_without_notes_yet_answers_empty_and_its_first_note_says_where(tmp_path):
    """Not configured with --store: the project's store is made by the first remember. A
    recall before it is an empty answer, not an error (it was the agent's first call)."""
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    params = StdioServerParameters(command=ENTRY, args=["mcp"], env=ENV, cwd=str(project))

    async def body():
        async with Client(params, read_timeout_seconds=120) as client:
            data, _ = await call(client, "recall", query="what unit is orders.amount in")
            assert data["hits"] == [] and data["advice"].startswith(
                f"No notes yet: nothing was remembered in this project (its store, "
                f"{project / '.nbmemory'} (git root of {project}), is made by the first remember)")
            data, _ = await call(client, "list_notes")
            assert data["total"] == 0 and data["advice"].startswith("No notes yet")
            for name, empty in (("status", {"store": {"store": f"{project / '.nbmemory'} (git "
                                                               f"root of {project})",
                                                      "notes": 0}}),
                                ("snapshot_list", {"snapshots": []})):
                data, _ = await call(client, name)  # an agent's first call: not an error
                assert data["advice"].startswith("No notes yet") and empty.items() <= data.items()
            assert not (project / ".nbmemory").exists()
            data, _ = await call(client, "remember", text=LONG_NOTE)
            assert data["created_store"] == f"{project / '.nbmemory'} (git root of {project})"
            data, _ = await call(client, "remember", text="exports run at 02:00")
            assert "created_store" not in data
            data, _ = await call(client, "recall", query="refunds", min_score=0)
            assert len(data["hits"]) == 2  # below the threshold, asked for
            data, _ = await call(client, "status")
            assert data["session"]["tools"]["recall"]["errors"] == 0
    try:
        run(body)
    finally:
        stop(project / ".nbmemory")


def test_long_notes_are_cut_in_lists_and_pointers_get_advice(store_dir):
    """One note holding a whole file would fill the agent's context on every related
    recall: recall and list_notes give its start, show gives it whole."""
    long_text = "the ledger export " + " ".join(f"column{i} is an int64" for i in range(800))

    async def body():
        async with connect(store_dir) as client:
            data, _ = await call(client, "remember", text=long_text)
            assert data["advice"].startswith(f"A long note ({len(long_text):,} characters)")
            # The agent wrote it: it does not come back whole (it filled 100k tokens).
            assert len(data["note"]["text"]) < 2100 and "show(note_ids=[1])" in data["note"]["cut"]
            data, _ = await call(client, "remember", text=long_text + " (again)")
            assert [(s["id"], len(s["text"]) < 2100) for s in data["similar"]] == [(1, True)]
            await call(client, "forget", note_ids=[data["remembered"]])
            data, _ = await call(client, "remember", text="see src/ledger.py:214")
            assert data["advice"] == ("#3 is only a location. Pointers go stale as code "
                                      "moves: store the finding itself (what happens there and "
                                      "why it matters), e.g. remember(text=<the finding>, "
                                      "supersedes=3).")
            data, _ = await call(client, "recall", query="ledger export column7 int64")
            hit = next(h for h in data["hits"] if h["id"] == 1)
            assert len(hit["text"]) < 2100 and hit["text"].endswith(" …")
            assert hit["cut"].endswith("characters; show(note_ids=[1]) gives the whole text")
            await call(client, "snapshot", name="before")
            data, _ = await call(client, "recall", query="ledger export column7 int64",
                                 as_of="before")
            hit = next(h for h in data["hits"] if h["id"] == 1)  # show gives the text now
            assert hit["cut"].endswith("characters; show(note_ids=[1]) (as the note is now, "
                                       "not at 'before') gives the whole text")
            data, _ = await call(client, "show", note_ids=[1])
            assert data["notes"][0]["text"] == long_text
            data, _ = await call(client, "show", note_ids=[1, 99])  # the one there, at least
            assert ([n["id"] for n in data["notes"]], data["not_found"]) == ([1], [99])
            data, _ = await call(client, "list_notes", limit=1)
            assert (data["total"], [n["id"] for n in data["notes"]]) == (2, [3])
            assert data["next"] == "list_notes(offset=1, ...)"
            data, _ = await call(client, "list_notes", offset=1)
            assert [n["id"] for n in data["notes"]] == [1] and "cut" in data["notes"][0]
            data, _ = await call(client, "list_notes", stale=True)
            assert (data["total"], data["notes"]) == (0, [])
    run(body)


def test_history_gives_what_each_version_said(store_dir):
    with Memory.open(store_dir, embedder=HashEmbedder(64)) as mem:  # the analyst edited it
        mem.remember("the export job runs at 02:00 UTC")
        mem.edit(1, text="the export job runs at 03:00 UTC since May")

    async def body():
        async with connect(store_dir) as client:
            data, _ = await call(client, "history", note_id=1)
            assert [(v["version"], v["text"]) for v in data["versions"]] == [
                (1, "the export job runs at 02:00 UTC"),
                (2, "the export job runs at 03:00 UTC since May")]
    run(body)


def test_superseding_through_mcp_marks_the_old_note(store_dir):
    async def body():
        async with connect(store_dir) as client:
            await call(client, "remember", text="the export job runs at 02:00 UTC",
                       kind="gotcha", tags=["export"])
            data, _ = await call(client, "remember", text="the export job runs at 03:00 UTC since May",
                                 supersedes=1)
            assert data["remembered"] == 2
            data, _ = await call(client, "show", note_ids=[1, 2])
            old, new = data["notes"]
            assert old["status"] == "superseded" and old["stale"] == ["superseded #2"]
            assert new["status"] == "active"
            assert (new["kind"], new["priority"], new["tags"]) == ("gotcha", "medium", ["export"])
    run(body)


def test_recall_by_author(store_dir):
    async def body():
        async with connect(store_dir) as client:
            await call(client, "remember", text=LONG_NOTE)
            data, _ = await call(client, "recall", query="orders.amount", author="nobody-here")
            assert data["hits"] == []
            me = getpass.getuser()  # the server's environment has no JUPYTERHUB_USER
            data, _ = await call(client, "recall", query="orders.amount", author=[me])
            assert [h["text"] for h in data["hits"]] == [LONG_NOTE]
    run(body)


def test_snapshot_diff_and_recall_as_of(store_dir):
    async def body():
        async with connect(store_dir) as client:
            await call(client, "remember", text="the export job runs at 02:00 UTC")
            await call(client, "snapshot", name="before")
            await call(client, "remember", text="the export job runs at 03:00 UTC since May",
                       supersedes=1)
            data, _ = await call(client, "snapshot_diff", a="before")
            assert (data["a"], data["b"]) == ("before", "now")
            assert sorted((c["change"], c["note"]["id"], c["detail"]) for c in data["changes"]) == [
                ("added", 2, ""), ("superseded", 1, "by #2")]
            data, _ = await call(client, "recall", query="when does the export job run",
                                 as_of="before")
            assert data["as_of"] == "before"
            assert [h["id"] for h in data["hits"]] == [1] and data["hits"][0]["status"] == "active"
            data, _ = await call(client, "recall", query="when does the export job run")
            assert data["hits"][0]["id"] == 2 and data["hits"][0]["supersedes"] == 1
            data, _ = await call(client, "recall", query="refunds kubernetes", as_of="before")
            assert data["advice"].startswith("Nothing matched in the notes as they were at "
                                             "snapshot 'before'")
            for n in range(3):
                await call(client, "remember", text=f"partition {n} of the export is checked")
            data, _ = await call(client, "snapshot_diff", a="before", limit=2)
            assert (data["total"], len(data["changes"])) == (5, 2)
            assert data["next"] == "snapshot_diff(a='before', offset=2, limit=2)"
            data, _ = await call(client, "snapshot_diff", a="before", offset=4)
            assert len(data["changes"]) == 1 and "next" not in data
            text = await error(client, "snapshot_diff", a="nope")
            assert "No snapshot named 'nope'" in text
            text = await error(client, "recall", query="export", as_of="nope")
            assert "No snapshot named 'nope'" in text
    run(body)


def test_stale_reasons_reach_the_agent_and_verify_clears_them(store_dir, tmp_path):
    source = tmp_path / "lock.py"  # the workspace is the store's parent (no git here)
    source.write_text("def acquire_lock():\n    pass\n")

    async def body():
        async with connect(store_dir) as client:
            note, _ = await call(client, "remember", text="acquire_lock() must run before the watcher",
                                  about=["lock.py"])
            assert note["note"]["anchors"] == ["file lock.py"]
            await call(client, "snapshot", name="before")
            one, _ = await call(client, "remember", text="the lock file is lock.py's only output",
                                about="lock.py")  # one path as a string, as tags may be
            assert one["note"]["anchors"] == ["file lock.py"]
            await call(client, "forget", note_ids=[one["remembered"]])
            source.write_text("def acquire_lock(timeout):\n    pass\n")
            found, _ = await call(client, "recall", query="acquire_lock watcher")
            assert found["hits"][0]["stale"] == ["content_changed lock.py"]
            # The notes beside a write and in a diff say what they are about, and if stale.
            again, _ = await call(client, "remember", text="acquire_lock() runs before the watcher")
            assert [(h["id"], h["anchors"], h["stale"]) for h in again["similar"]] == [
                (1, ["file lock.py"], ["content_changed lock.py"])]
            await call(client, "forget", note_ids=[again["remembered"]])
            diff, _ = await call(client, "snapshot_diff", a="before")
            assert {(c["change"], c["note"]["id"], tuple(c["note"].get("anchors", ())))
                    for c in diff["changes"]} == {("became_stale", 1, ("file lock.py",))}
            verified, _ = await call(client, "verify", note_id=1)
            assert verified["note"]["stale"] == []
            found, _ = await call(client, "recall", query="acquire_lock watcher")
            assert found["hits"][0]["stale"] == []
            source.rename(tmp_path / "lock_old.py")
            verified, _ = await call(client, "verify", note_id=1)
            assert verified["advice"] == ("lock.py is missing: the note is verified as holding "
                                          "without it, and goes stale again if it comes back.")
    run(body)


def test_hint_after_the_token_threshold_once_per_threshold(store_dir):
    tokens = len(LONG_NOTE) // 4  # 22 tokens per recall of this one note

    async def body():
        async with connect(store_dir, "--hint-tokens", "40", "--hint-calls", "1000") as client:
            await call(client, "remember", text=LONG_NOTE)
            hints = []
            for _ in range(4):
                _, hint = await call(client, "recall", query="orders.amount cents")
                hints.append(hint)
            # 22 -> none; 44 >= 40 -> hint, next at 84; 66 -> none; 88 >= 84 -> hint.
            assert [h is not None for h in hints] == [False, True, False, True]
            assert "fetched again by id with show" in hints[1]
            _, hint = await call(client, "remember", text="writes never count toward the hint")
            assert hint is None
            data, hint = await call(client, "status")
            assert hint is None
            assert data["session"]["tokens_returned"] == 4 * tokens
            assert data["session"]["hints_given"] == 2
            # The store's notes shown beside a write do count: here, one similar note.
            again, _ = await call(client, "remember", text=LONG_NOTE + " Checked again.")
            assert [h["id"] for h in again["similar"]] == [1]
            data, _ = await call(client, "status")
            assert data["session"]["tokens_returned"] == 5 * tokens
    run(body)


def test_hint_after_a_number_of_calls(store_dir):
    async def body():
        async with connect(store_dir, "--hint-tokens", "100000", "--hint-calls", "3") as client:
            await call(client, "remember", text="a short note")
            hints = [(await call(client, "show", note_ids=[1]))[1] for _ in range(6)]
            assert [h is not None for h in hints] == [False, False, True, False, False, True]
    run(body)


def test_a_keyword_only_answer_says_why(store_dir):
    """The model cannot read a question mostly in other scripts: the agent is told the
    answer comes from keywords alone, as the magics and the panel say."""
    async def body():
        async with connect(store_dir) as client:
            await call(client, "remember", text="订单金额在2021年3月之前以分为单位存储。")
            data, _ = await call(client, "recall", query="金额单位")
            assert len(data["hits"]) == 1
            assert data["behind"].startswith("Keyword matches only: the model hash reads "
                                             "English, and most of this question is in other")
            data, _ = await call(client, "recall", query="orders amount")
            assert "behind" not in data
    run(body)


def test_empty_recalls_are_counted(store_dir):
    async def body():
        async with connect(store_dir) as client:
            await call(client, "remember", text=LONG_NOTE)
            data, _ = await call(client, "recall", query="kubernetes ingress timeout")
            assert data["hits"] == [] and "remember the finding" in data["advice"]
            data, _ = await call(client, "recall", query="kubernetes", tags=["nosuch"])
            assert data["advice"] == ("Nothing matched among the notes these filters keep; "
                                      "recall without them searches every note.")
            await call(client, "recall", query="zebra migration patterns")
            data, _ = await call(client, "recall", query="orders.amount")
            assert data["hits"] and "advice" not in data
            await error(client, "recall", query="x", k=0)  # an error is not an empty recall
            data, _ = await call(client, "status")
            assert data["session"]["tools"]["recall"] == {"calls": 5, "errors": 1, "empty": 3}
            assert (data["session"]["recalls"], data["session"]["empty_recalls"]) == (5, 3)
            # The store's own log agrees (it counts recalls that ran).
            assert (data["store"]["recalls"], data["store"]["empty_recalls"]) == (4, 3)
    run(body)


BAD_CALLS = [
    ("remember", {}, "Bad arguments for remember: text is required. Nothing was changed."),
    ("remember", {"text": "   "}, "The note is empty"),
    ("remember", {"text": "x", "kind": "idea"},
     "Bad arguments for remember: kind: Input should be 'finding', 'gotcha', 'decision', "
     "'question', 'reference' or 'procedure' (got 'idea'). Nothing was changed."),
    ("recall", {"query": "x", "kind": "bug"},  # a value or a list: said once, for the value
     "Bad arguments for recall: kind: Input should be 'finding', 'gotcha', 'decision', "
     "'question', 'reference' or 'procedure' (got 'bug'). Nothing was changed."),
    ("remember", {"text": "x", "tags": ["two words"]},
     "Tag 'two words' contains a space; a tag is one word: join its words with - or _"),
    ("remember", {"text": "x", "supersedes": 99}, "No note #99"),
    ("remember", {"text": "x", "note": "y"},
     "Unknown argument(s) for remember: note; it takes about, kind, priority, supersedes, tags, text. "
     "Nothing was changed."),
    ("recall", {"query": "x", "k": 0},
     "Bad arguments for recall: k: Input should be greater than or equal to 1 (got 0). Nothing was changed."),
    ("recall", {"query": ""}, "Bad arguments for recall: query: String should have at least 1 character"),
    ("recall", {"query": "x", "limit": 3}, "Unknown argument(s) for recall: limit"),
    ("forget", {"note_ids": [1, 99]}, "No note #99"),
    ("remember", {"text": "x", "about": ["/nonexistent/zzz"]},  # no notebook's advice
     "about='/nonexistent/zzz': nothing exists there. Check the path. Nothing was changed."),
    ("remember", {"text": "x", "about": [""]}, "Cannot anchor a note to ''; give a path, a glob "
     "or a variable name, e.g. about='data/orders.csv'. Nothing was changed."),
    ("forget", {"note_ids": [True]}, "Bad arguments for forget: note_ids: Input should be a "
                                     "valid integer (got True). Nothing was changed."),
    ("reinstate", {"note_id": True}, "Bad arguments for reinstate: note_id: Input should be a "
                                     "valid integer"),
    ("remember", {"text": "x", "supersedes": True}, "Bad arguments for remember: supersedes"),
    ("show", {"note_ids": ["1"]}, "Bad arguments for show: note_ids: Input should be a valid "
                                  "integer"),
    ("recall", {"query": "x", "k": True}, "Bad arguments for recall: k: Input should be a valid "
                                          "integer"),
    ("recall", {"query": "x" * 10_001}, "Bad arguments for recall: query: String should have at "
                                        "most 10000 characters"),
    ("forget", {"note_ids": []}, "Bad arguments for forget: note_ids: List should have at least 1 item"),
    ("forget", {"note_ids": "one"}, "Bad arguments for forget: note_ids: Input should be a valid list"),
    # A path or a list of them: the bad item, said once (the whole list was said too).
    ("remember", {"text": "x", "about": ["data", 5]}, "Bad arguments for remember: about: Input "
     "should be a valid string (got 5). Nothing was changed."),
    ("reinstate", {"note_id": 1}, "Cannot reinstate note #1: it is active already"),
    ("verify", {"note_id": 3}, "Cannot verify note #3: it is superseded by #4, the note to correct: "
                               "the remember tool (text=<the corrected finding>, supersedes=4)."),
    ("snapshot", {"name": "two words"}, "Bad arguments for snapshot: name: String should match pattern"),
    ("snapshot", {"name": "sealed"}, "A snapshot named 'sealed' already exists"),
    ("snapshot", {"name": "Now"}, "'now' is what a diff compares with when it is given one "
                                  "snapshot; give the snapshot another name"),
    ("history", {"note_id": 99}, "No note #99"),
    ("snapshot_diff", {"a": "sealed", "b": "missing"}, "No snapshot named 'missing'"),
    ("snapshot_diff", {"a": "now", "b": "sealed"}, "'now' is where a diff ends when it is given "
                      "one snapshot, not where it starts: give the snapshot to compare with "
                      "first, e.g. the snapshot_diff tool (a='before-refactor')"),
    ("snapshot", {"name": "-x"}, "A snapshot's name may not start with a dash"),
    ("recall", {"query": "x", "as_of": "missing"}, "No snapshot named 'missing'"),
    ("show", {"note_ids": ["abc"]}, "Bad arguments for show: note_ids: Input should be a valid integer"),
    ("show", {"note_ids": [99, 98]}, "No note #99"),
    ("nonexistent", {}, "Unknown tool 'nonexistent'; nbmemory's tools are forget, history, "
                        "list_notes, recall, reinstate, remember, show, snapshot, snapshot_diff, "
                        "snapshot_list, status, verify. Nothing was changed."),
]


def test_arguments_that_are_not_an_object_are_refused_by_name():
    # The SDK's client cannot send them; a hand-written JSON-RPC client can.
    from types import SimpleNamespace

    from nbmemory.mcp import Session, _middleware

    async def never(ctx):
        raise AssertionError("the tool ran")

    check = _middleware(Session(), {"recall": {"query", "k", "tags"}})
    ctx = SimpleNamespace(method="tools/call", params={"name": "recall", "arguments": "abc"})
    result = anyio.run(check, ctx, never)
    assert result.is_error and result.content[0].text == (
        "The arguments for recall must be an object of its parameters (k, query, tags), not "
        "str. Nothing was changed.")


def test_bad_arguments_give_clear_errors_and_leave_the_store_unchanged(store_dir):
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        mem.remember("the first note")
        mem.remember("the second note")
        mem.supersede(mem.remember("the third note").id, "the third note, corrected")
        mem.snapshot("sealed")
    before = snapshot_of(store_dir)

    async def body():
        async with connect(store_dir) as client:
            for tool, arguments, message in BAD_CALLS:
                text = await error(client, tool, **arguments)
                assert message in text, (tool, arguments, text)
                assert "\n" not in text and "pydantic" not in text
                if tool != "nonexistent":
                    assert text.endswith("Nothing was changed."), text
            data, _ = await call(client, "status")
            errors = sum(t["errors"] for t in data["session"]["tools"].values())
            assert errors == len(BAD_CALLS) - 1  # the unknown tool has no counter
    run(body)
    assert snapshot_of(store_dir) == before


def test_a_note_crosses_between_mcp_and_the_magics(kernel, store_dir):
    """An agent and a notebook kernel on one store at the same time, through its owner."""
    kernel.run(f"%load_ext nbmemory\n%config NbMemory.store = {str(store_dir)!r}\n"
               "%config NbMemory.model = 'hash:64'")

    async def body():
        async with connect(store_dir) as client:
            data, _ = await call(client, "remember", text="the watcher thread races acquire_lock()",
                                 tags=["locks"])
            agent_id = data["remembered"]
            found = kernel.state("[(h.note.id, h.note.provenance.source) for h in "
                                 "get_ipython().run_line_magic('recall', 'watcher acquire_lock')]")
            assert found == [[agent_id, "mcp"]]
            out = kernel.run("%remember -t orders orders.amount is in cents before 2021")
            assert f"Remembered #{agent_id + 1} (finding, medium) [orders]" in out
            data, _ = await call(client, "recall", query="orders.amount cents", tags=["orders"])
            assert [h["id"] for h in data["hits"]] == [agent_id + 1]
            assert data["hits"][0]["provenance"]["source"] == "kernel"

    try:
        run(body)
    finally:
        stop(store_dir)


def test_store_owned_elsewhere_is_a_clear_tool_error(store_dir):
    async def body():
        async with connect(store_dir) as client:
            text = await error(client, "recall", query="anything")
            assert f"owned by another process (pid {os.getpid()})" in text
            assert text.endswith("Nothing was changed.")

    with Memory.open(store_dir, embedder=HashEmbedder()):
        run(body)


def test_a_stuck_owner_is_a_tool_error_the_agent_can_read(store_dir, tmp_path):
    """The agent's client gave up long before the 600 s a call waited for a stuck owner,
    and told the agent only that it timed out."""
    hold = tmp_path / "hold"
    env = {**ENV, "NBMEMORY_TEST_HOLD": str(hold), "NBMEMORY_REQUEST_TIMEOUT": "2"}
    params = StdioServerParameters(command=ENTRY, args=["mcp", "--store", str(store_dir)],
                                   env=env)

    async def body():
        async with Client(params, read_timeout_seconds=120) as client:
            await call(client, "remember", text=LONG_NOTE)
            hold.touch()  # the owner now holds every call
            text = await error(client, "recall", query="orders amount")
            assert text.startswith("The store's owner did not answer within 2 s. It may be "
                                   "stuck: see "), text
            assert text.endswith("Nothing was changed.")  # a read
            text = await error(client, "remember", text="exports run at 02:00")
            assert text.endswith("What it was asked (remember) may or may not have been "
                                 "applied: check before sending it again."), text
            assert "Nothing was changed" not in text  # an agent told so sends it again
            hold.unlink()
    try:
        run(body)
    finally:
        hold.unlink(missing_ok=True)
        stop(store_dir)


def test_a_call_holding_half_a_utf16_pair_gets_an_error_not_silence(store_dir):
    """A client that cuts a string inside an emoji sends "\\ud83d" alone. The SDK's reader
    dropped that line without a reply, and the agent's call waited forever."""
    import queue
    import subprocess
    import threading

    from mcp.types import LATEST_PROTOCOL_VERSION

    server = subprocess.Popen([ENTRY, "mcp", "--store", str(store_dir)], env={**os.environ, **ENV},
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    replies: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [replies.put(json.loads(line)) for line in server.stdout],
                     daemon=True).start()

    def ask(number, method, params):
        line = json.dumps({"jsonrpc": "2.0", "id": number, "method": method, "params": params})
        server.stdin.write(line.replace("CUT", "\\ud83d").encode() + b"\n")
        server.stdin.flush()
        reply = replies.get(timeout=120)  # a hang fails here, not forever
        assert reply["id"] == number
        return reply["result"]

    try:
        ask(1, "initialize", {"protocolVersion": LATEST_PROTOCOL_VERSION, "capabilities": {},
                              "clientInfo": {"name": "test", "version": "1"}})
        server.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        result = ask(2, "tools/call", {"name": "remember",
                                       "arguments": {"text": "the export fails on CUT names"}})
        assert result["isError"] and result["content"][0]["text"] == (
            "A text in this call holds half of a UTF-16 pair (an escape such as \\ud83d without "
            "its partner, as when a string is cut inside an emoji), which is not text. Send "
            "whole characters. Nothing was changed.")
        result = ask(3, "tools/call", {"name": "remember",
                                       "arguments": {"text": "the export fails on 🐍 names"}})
        assert not result["isError"]  # the next call is served as ever
    finally:
        server.stdin.close()
        server.wait(timeout=60)
        stop(store_dir)
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        assert [n.text for n in mem.notes().notes] == ["the export fails on 🐍 names"]


@pytest.mark.parametrize("line", [
    b'{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "recall"}}\n',
    b'{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"reason": "\\ud83d"}}\n',
    b"not json\n", b'{"jsonrpc": "2.0", "id": 5, "params": ["\\ud83d"]}\n'])
def test_every_other_line_reaches_the_sdk_as_it_came(line):
    """Only a request holding an unpaired surrogate is rewritten: a notification has no reply
    to wait for, and what the SDK can parse or refuses itself is its own to answer."""
    from nbmemory.mcp_wire import mended

    assert mended(line) is line


@pytest.mark.skipif(sys.platform == "win32", reason="closes descriptor 0 in preexec_fn")
def test_without_a_stdin_the_wire_is_left_to_the_sdk():
    """Started with descriptor 0 closed, the server must not die mending a stdin it lacks."""
    import subprocess

    done = subprocess.run([sys.executable, "-c", "from nbmemory.mcp_wire import mend_stdin; "
                           "mend_stdin(); print('served')"], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, env={**os.environ, **ENV},
                          preexec_fn=lambda: os.close(0))
    assert (done.returncode, done.stdout, done.stderr) == (0, "served\n", "")
