"""The nbmemory command: every command with --json parsed back, exit codes, doctor.

Most commands run in this process through ``cli.main`` (the same function the console
script calls); a few run the installed ``nbmemory`` script in a subprocess to check
what a shell sees. The hash embedder (NBMEMORY_MODEL=hash:64) stands in for the model
except where re-embedding with the real model is the point.
"""

import io
import json
import os
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from nbmemory import cli
from nbmemory.embed import HashEmbedder
from nbmemory.engine import VECTOR_FILENAME
from nbmemory.memory import Memory
from nbmemory.service import stop
from nbmemory.store import Store

ENTRY = shutil.which("nbmemory", path=str(Path(sys.executable).parent)) or "nbmemory"


class Result:
    def __init__(self, code, out, err):
        self.code, self.out, self.err = code, out, err

    @property
    def json(self):
        return json.loads(self.out)


@pytest.fixture
def nbm(store_dir, capsys, monkeypatch):
    """Run ``nbmemory --store <store_dir> ARGS...`` in this process."""
    monkeypatch.setenv("NBMEMORY_MODEL", "hash:64")
    monkeypatch.delenv("NBMEMORY_HOME", raising=False)

    def run(*argv, stdin=None):
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        capsys.readouterr()
        code = cli.main(["--store", str(store_dir), *argv])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


def shell(*argv, env=None, stdin=None):
    """The installed console script, as a shell runs it."""
    environ = {**os.environ, "NBMEMORY_MODEL": "hash:64", "HF_HUB_OFFLINE": "1", **(env or {})}
    done = subprocess.run([ENTRY, *argv], capture_output=True, text=True, env=environ,
                          input=stdin, timeout=300)
    return Result(done.returncode, done.stdout, done.stderr)


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


# -- the commands -----------------------------------------------------------------------


def test_remember_and_recall_json_and_text(nbm):
    r = nbm("remember", "-t", "orders,units", "-p", "high", "-k", "gotcha",
            "orders.amount", "is", "in", "cents", "before", "2021", "--json")
    assert r.code == 0
    note = r.json["note"]
    assert (note["id"], note["text"], note["tags"], note["kind"], note["priority"]) == (
        1, "orders.amount is in cents before 2021", ["orders", "units"], "gotcha", "high")
    assert note["provenance"]["source"] == "cli" and note["provenance"]["cwd"] == os.getcwd()

    r = nbm("remember", "-", stdin="the watcher races acquire_lock()\nat startup\n")
    assert r.code == 0 and r.out.strip() == "Remembered #2 (finding, medium)"

    r = nbm("recall", "orders.amount", "--json", "-k", "3")
    assert r.code == 0
    hits = r.json["hits"]
    assert hits[0]["note"]["id"] == 1 and hits[0]["score"] > 0
    assert r.json["query"] == "orders.amount"
    r = nbm("recall", "--json", "-", stdin="what races\nacquire_lock?\n")  # as remember reads
    assert r.json["query"] == "what races acquire_lock?" and r.json["hits"][0]["note"]["id"] == 2

    r = nbm("recall", "--provenance", "watcher", "acquire_lock")
    assert r.out.startswith("#2  ") and "not from a notebook (cli)" in r.out
    assert "the watcher races acquire_lock()" in r.out

    r = nbm("recall", "kubernetes", "--kind", "decision", "--json")
    assert r.code == 0 and r.json["hits"] == []


def test_an_option_given_twice_is_refused_as_the_magics_refuse_it(nbm):
    """-t a -t b kept only b: the tags typed first were lost without a word."""
    r = nbm("remember", "-t", "收入", "-t", "财务", "the ledger closes on the 3rd")
    assert (r.code, one_line(r.err)) == (2, (
        "nbmemory: option -t/--tags was given twice; it takes one value (several tags: "
        "-t a,b) (see: nbmemory remember --help)"))
    r = nbm("recall", "--min-score", "0.1", "--min-score", "0.3", "ledger")
    assert r.code == 2 and "option --min-score was given twice" in r.err
    assert nbm("remember", "-t", "收入,财务", "--json", "x").json["note"]["tags"] == ["收入", "财务"]


def test_tags_with_a_space_after_a_comma_are_refused_not_read_as_text(nbm):
    """The shell splits -t x, y into -t 'x,' and a word y of the note: the tag y was lost."""
    for command in ("remember", "recall"):
        r = nbm(command, "-t", "x,", "y", "spaced", "after", "comma")
        assert (r.code, one_line(r.err)) == (2, (
            "nbmemory: argument -t/--tags: 'x,' ends with a comma: tags end at the first space, "
            f"so give them without spaces (-t a,b) or quoted (-t 'a, b') (see: nbmemory "
            f"{command} --help)"))
    assert nbm("remember", "-t", "x, y", "--json", "spaced").json["note"]["tags"] == ["x", "y"]


def test_recall_by_keywords_alone_and_options_are_never_abbreviated(nbm):
    """--mode lexical ranks by keywords only: no note without the word comes back. An
    abbreviated option is refused: --mode was once read as --model."""
    nbm("remember", "orders.amount is stored in cents")
    nbm("remember", "the warehouse is rebuilt nightly")
    r = nbm("recall", "--mode", "lexical", "--json", "--min-score", "0", "cents")
    assert [h["note"]["id"] for h in r.json["hits"]] == [1]
    r = nbm("recall", "--mode", "dense", "--json", "--min-score", "0", "cents")
    assert len(r.json["hits"]) == 2  # by meaning, every note has a score
    r = nbm("recall", "--mod", "lexical", "cents")
    assert (r.code, one_line(r.err)) == (2, "nbmemory: unrecognized arguments: --mod "
                                            "(see: nbmemory recall --help)")


def test_an_empty_recall_names_the_filters_that_emptied_it(nbm):
    nbm("remember", "-t", "penguins", "the table has 344 rows")
    r = nbm("recall", "-t", "nosuchtag", "--fresh", "rows")
    assert (r.code, r.out.strip()) == (0, "No notes match 'rows' with -t nosuchtag --fresh.")
    r = nbm("recall", "--open", "--kind", "finding", "rows")
    assert (r.code, one_line(r.err)) == (2, "nbmemory: --open searches the open questions: "
                                            "leave --kind out")
    assert nbm("recall", "nothing", "--min-score", "0.99").out.startswith(
        "No notes match 'nothing'.\n(1 more below the score threshold")  # no filter to name


def test_open_with_another_kind_is_refused_alike_with_a_query_or_without(nbm):
    """Without a query, --kind was said to apply "only to a query", and with one it was
    refused: the advice led to a second refusal. --kind question is what --open means."""
    nbm("remember", "-k", "question", "does the join drop rows?")
    for query in ([], ["join"]):
        r = nbm("recall", "--open", "--kind", "gotcha", *query)
        assert (r.code, one_line(r.err)) == (2, "nbmemory: --open searches the open "
                                                "questions: leave --kind out")
        r = nbm("recall", "--open", "--kind", "question", *query, "--json")
        assert r.code == 0, r.err


@pytest.mark.parametrize("status", ["", ",", " , "])
def test_a_status_filter_naming_no_status_is_refused_not_taken_as_all(nbm, status):
    nbm("remember", "a finding")
    r = nbm("list", "--status", status)
    assert (r.code, r.out) == (2, "")
    assert one_line(r.err) == (f"nbmemory: Unknown status {status!r}; use one or more of: "
                               "active, revoked, superseded, refuted, purged")


def test_recall_shows_the_start_of_a_long_note_and_how_to_see_it_all(nbm):
    long = "retry budget " + " ".join(f"word{i}" for i in range(3000))
    nbm("remember", "-", stdin=long)
    r = nbm("recall", "retry", "budget")
    assert r.code == 0
    start = " ".join(line.strip() for line in r.out.splitlines()[1:-1])
    assert long.startswith(start) and 500 < len(start) < 700
    assert r.out.splitlines()[-1] == (
        f"     … {len(long) - len(start):,} more characters: nbmemory show 1")
    assert "word2999" in nbm("show", "1").out


def test_global_options_work_after_the_command(nbm, store_dir):
    nbm("remember", "a finding about parquet files")
    r = cli.main(["list", "--json", "--store", str(store_dir)])
    assert r == 0


def test_list_show_history_forget_reinstate(nbm):
    for text, tags in (("first finding", "a"), ("second finding", "b"), ("third finding", "a,b")):
        nbm("remember", "-t", tags, text)
    r = nbm("list", "--json", "-t", "a")
    assert r.code == 0
    assert (r.json["total"], [n["id"] for n in r.json["notes"]]) == (2, [3, 1])
    r = nbm("list", "--order", "oldest", "-n", "2")
    assert r.out.splitlines()[0].split() == ["id", "age", "priority", "kind", "tags", "status", "note"]
    assert r.out.splitlines()[1].startswith("#1 ") and "(1-2 of 3 active notes)" in r.out

    r = nbm("forget", "#2", "3", "--json")
    assert r.code == 0 and [n["status"] for n in r.json["forgotten"]] == ["revoked", "revoked"]
    r = nbm("forget", "2")
    assert r.code == 1
    assert one_line(r.err) == ("nbmemory: Note #2 is already forgotten; nbmemory reinstate 2 "
                               "brings it back.")
    r = nbm("list", "--status", "revoked", "--json")
    assert [n["id"] for n in r.json["notes"]] == [3, 2]

    # All or none: one id that cannot come back keeps the others forgotten.
    r = nbm("reinstate", "2", "999")
    assert r.code == 1 and one_line(r.err).startswith("nbmemory: No note #999.")
    r = nbm("reinstate", "2", "2", "--json")
    assert r.code == 0 and [n["status"] for n in r.json["reinstated"]] == ["active"]
    r = nbm("reinstate", "3", "2")
    assert (r.code, one_line(r.err)) == (1, "nbmemory: Cannot reinstate note #2: it is active already: "
                                     "there is nothing to bring back.")
    r = nbm("reinstate", "3")
    assert (r.code, r.out.strip()) == (0, "Reinstated #3.")

    r = nbm("show", "2", "--json")
    assert (r.json["id"], r.json["text"], r.json["status"]) == (2, "second finding", "active")
    r = nbm("show", "1")
    assert r.out.splitlines()[0] == "#1  active  finding  medium  version 1"
    assert "tags     a" in r.out and "from     not from a notebook (cli)" in r.out

    r = nbm("history", "2", "--json")
    assert [e["type"] for e in r.json["events"]] == ["created", "revoked", "reinstated"]
    r = nbm("history", "2")
    assert r.out.startswith("History of #2") and "reinstated" in r.out


def test_supersede_from_the_command_line(nbm):
    nbm("remember", "-k", "gotcha", "-p", "high", "-t", "export", "the export runs at 02:00")
    r = nbm("remember", "--supersedes", "1", "the export runs at 03:00 since May", "--json")
    assert r.json["note"]["id"] == 2
    # What the new note does not say it keeps from the old one.
    kept = r.json["note"]
    assert (kept["kind"], kept["priority"], kept["tags"]) == ("gotcha", "high", ["export"])
    r = nbm("remember", "--supersedes", "2", "-p", "low", "the export runs at 04:00", "--json")
    assert (r.json["note"]["kind"], r.json["note"]["priority"]) == ("gotcha", "low")
    r = nbm("remember", "a new note", "--json")
    assert (r.json["note"]["kind"], r.json["note"]["priority"]) == ("finding", "medium")
    r = nbm("show", "1", "--json")
    assert r.json["status"] == "superseded"
    assert r.json["stale"] == [{"reason": "superseded", "target": "#2", "detail": ""}]


def test_edit_writes_a_new_version_that_history_shows(nbm):
    nbm("remember", "-t", "orders", "orders.amount is in dollars")
    r = nbm("edit", "1", "--text", "orders.amount is in cents", "-t", "orders,units", "-p", "high",
            "--json")
    assert r.code == 0, r.err
    assert (r.json["note"]["text"], r.json["note"]["tags"], r.json["note"]["priority"],
            r.json["note"]["version"]) == ("orders.amount is in cents", ["orders", "units"], "high", 2)
    assert (r.json["previous_version"], r.json["changed"]) == (1, ["text", "priority", "tags"])

    r = nbm("history", "1", "--json")
    events = r.json["events"]
    assert [e["type"] for e in events] == ["created", "edited"]
    assert events[1]["data"] == {"changed": ["text", "priority", "tags"]}
    assert events[1]["seq"] > events[0]["seq"] and events[1]["actor"]

    r = nbm("edit", "#1", "-", "--if-version", "2", stdin="  orders.amount is in cents until 2021\n")
    assert (r.code, r.out.strip()) == (0, "Edited #1: version 3 (text changed; version 2 stays in: "
                                          "nbmemory history 1).")
    r = nbm("edit", "1", "--text", "x", "--if-version", "2")  # made from a read replaced since
    assert (r.code, one_line(r.err)) == (1, (
        "nbmemory: Note #1 is at version 3, not 2: it was edited since it was read. Nothing was "
        "written; read it again and edit version 3."))
    r = nbm("recall", "cents", "--json")
    assert [(h["note"]["id"], h["note"]["text"]) for h in r.json["hits"]] == [
        (1, "orders.amount is in cents until 2021")]
    r = nbm("edit", "1", "-k", "gotcha", "--json")
    assert (r.json["note"]["kind"], r.json["note"]["text"], r.json["note"]["tags"]) == (
        "gotcha", "orders.amount is in cents until 2021", ["orders", "units"])
    r = nbm("edit", "1", "-t", "", "--json")
    assert (r.json["note"]["tags"], r.json["changed"], r.json["note"]["version"]) == ([], ["tags"], 5)

    # The same values again: nothing to write, no new version.
    r = nbm("edit", "1", "-k", "gotcha", "-p", "high")
    assert (r.code, r.out.strip()) == (0, "Nothing changed: #1 already says that (version 5).")
    r = nbm("history", "1", "--json")
    assert [e["type"] for e in r.json["events"]] == ["created"] + ["edited"] * 4
    # What the note said before each edit ("version 1 stays in: nbmemory history 1").
    assert [(v["version"], v["text"]) for v in r.json["versions"]][:3] == [
        (1, "orders.amount is in dollars"), (2, "orders.amount is in cents"),
        (3, "orders.amount is in cents until 2021")]
    out = nbm("history", "1").out
    assert "\n    orders.amount is in dollars\n" in out
    assert out.splitlines()[1].split() == ["seq", "time", "event", "actor", "detail"]
    assert "changed=text, priority, tags" in out


@pytest.mark.parametrize("argv, stdin, code, message", [
    (["edit", "99", "--text", "x"], None, 1,
     "nbmemory: No note #99. Recall or list notes to find their ids."),
    (["edit", "1", "--text", "  "], None, 2, "nbmemory: The new text is empty; give the note's "
                                              "new text with --text TEXT (or -), or leave out "
                                              "--text to change only -t, -k or -p"),
    (["edit", "1", "-"], " \n", 2, "nbmemory: The new text is empty"),
    (["edit", "1"], None, 2, "nbmemory: Say what to change: nbmemory edit ID --text TEXT"),
    (["edit", "1", "cents", "now"], None, 2,
     "nbmemory: Give the new text with --text (quoted: --text 'cents now'), or - to read it "
     "from stdin"),
    (["edit", "1", "-", "--text", "x"], "y", 2, "nbmemory: Give the new text once"),
    (["edit", "1", "-k", "idea"], None, 2, "nbmemory: Unknown kind 'idea'"),
    (["edit", "1", "-p", "urgent"], None, 2, "nbmemory: Unknown priority 'urgent'"),
    (["edit", "2", "--text", "x"], None, 1,
     "nbmemory: Cannot edit note #2: it is forgotten (revoked); reinstate it first"),
    (["edit", "x1", "--text", "x"], None, 2, "nbmemory: argument ID: 'x1' is not a note id"),
    # A version no read gave (ahead of the note, or 0).
    (["edit", "1", "--text", "x", "--if-version", "2"], None, 2,
     "nbmemory: Note #1 is at version 1; it has no version 2 to edit from. Nothing was "
     "written."),
    (["edit", "1", "--text", "x", "--if-version", "0"], None, 2,
     "nbmemory: The version an edit is made from is a whole number from 1, not 0"),
])
def test_edit_errors_are_clear_and_change_nothing(nbm, argv, stdin, code, message):
    nbm("remember", "-t", "orders", "orders.amount is in dollars")
    nbm("remember", "a forgotten note")
    nbm("forget", "2")

    def state():
        return [nbm(*a, "--json").json for a in (("show", "1"), ("history", "1"), ("history", "2"),
                                                  ("list", "--status", "active,revoked"))]

    before = state()
    r = nbm(*argv, stdin=stdin)
    assert r.code == code
    assert message in one_line(r.err)
    assert r.out == ""
    assert state() == before
    r = nbm("--json", *argv, stdin=stdin)
    assert r.json["error"]["exit"] == code and message.removeprefix("nbmemory: ") in \
        r.json["error"]["message"]


def test_snapshot_create_and_list(nbm):
    nbm("remember", "a finding")
    r = nbm("snapshot", "before-refactor", "-m", "all good", "--json")
    assert r.code == 0
    assert (r.json["name"], r.json["message"], r.json["note_count"]) == ("before-refactor", "all good", 1)
    r = nbm("snapshot", "--list", "--json")
    assert [s["name"] for s in r.json["snapshots"]] == ["before-refactor"]
    r = nbm("snapshot", "--list")
    assert "before-refactor" in r.out and "all good" in r.out
    r = nbm("snapshot", "before-refactor")
    assert r.code == 1 and "A snapshot named 'before-refactor' already exists" in r.err
    r = nbm("snapshot")
    assert r.code == 2 and "Give the snapshot one name without spaces" in one_line(r.err)


def test_status_json(nbm, store_dir):
    nbm("remember", "a finding")
    nbm("recall", "nothing like it zzzz", "--min-score", "0.99")
    r = nbm("status", "--json")
    assert r.code == 0
    status = r.json
    assert (status["store"], status["notes"], status["model"]) == (str(store_dir), 1, "hash:64")
    assert (status["recalls"], status["empty_recalls"]) == (1, 1)
    r = nbm("status")
    assert f"store          {store_dir} (given explicitly)" in r.out


def test_stale_notes_and_verify(nbm, store_dir, tmp_path):
    source = tmp_path / "lock.py"  # the workspace is the store's parent (no git here)
    source.write_text("def acquire_lock():\n    pass\n")
    r = nbm("remember", "--about", "lock.py", "acquire_lock() must run before the watcher", "--json")
    assert [(a["kind"], a["target"]) for a in r.json["note"]["anchors"]] == [("file", "lock.py")]
    nbm("remember", "a note about nothing in particular")
    assert nbm("stale", "--json").json["total"] == 0
    source.write_text("def acquire_lock(timeout):\n    pass\n")

    r = nbm("stale", "--json")
    assert [n["id"] for n in r.json["notes"]] == [1]
    assert r.json["notes"][0]["stale"][0]["reason"] == "content_changed"
    r = nbm("stale")
    assert r.out.splitlines()[:2] == ["#1  content_changed lock.py",
                                      "    acquire_lock() must run before the watcher"], r.out
    r = nbm("recall", "--stale", "acquire_lock watcher", "--json")
    assert [h["note"]["id"] for h in r.json["hits"]] == [1]
    r = nbm("recall", "--fresh", "acquire_lock watcher", "--json")
    assert 1 not in [h["note"]["id"] for h in r.json["hits"]]
    r = nbm("recall", "--fresh", "--stale", "x")
    assert r.code == 2 and "not allowed with argument" in one_line(r.err)
    r = nbm("show", "1")
    assert "STALE    content_changed lock.py" in r.out

    # One id refused: none verified (an unknown id, a forgotten note, whichever comes first).
    nbm("forget", "2")
    r = nbm("verify", "1", "99")
    assert r.code == 1 and "No note #99" in r.err
    r = nbm("verify", "1", "2")
    assert r.code == 1 and "Cannot verify note #2: it is forgotten" in r.err
    assert [e["type"] for e in nbm("history", "1", "--json").json["events"]] == ["created"]
    r = nbm("verify", "1")
    assert r.code == 0 and r.out.startswith("Verified #1: re-took 1 fingerprint")
    assert nbm("stale", "--json").json["total"] == 0
    assert nbm("history", "1", "--json").json["events"][-1]["type"] == "verified"

    source.unlink()  # verifying a note whose file is gone says what that means
    assert nbm("stale", "--json").json["notes"][0]["stale"][0]["reason"] == "missing"
    r = nbm("verify", "1")
    assert r.out.strip() == (
        "Verified #1: re-took 1 fingerprint; cleared missing lock.py. lock.py is gone: the note "
        "is flagged again only if it comes back changed; if it moved, remember the note again "
        "about its new place, superseding #1.")


def test_snapshot_diff_and_recall_as_of(nbm):
    nbm("remember", "-t", "orders", "orders.amount is in cents")
    nbm("snapshot", "before")
    nbm("remember", "--supersedes", "1", "-t", "orders", "orders.amount is in cents until 2021-03")
    nbm("remember", "the watcher races acquire_lock")
    r = nbm("snapshot", "--diff", "before", "--json")
    assert r.code == 0 and (r.json["a"], r.json["b"]) == ("before", "now")
    changes = {(c["change"], c["note"]["id"], c["detail"]) for c in r.json["changes"]}
    assert changes == {("added", 2, ""), ("added", 3, ""), ("superseded", 1, "by #2")}
    r = nbm("snapshot", "--diff", "before")
    assert r.out.splitlines()[0] == "From 'before' to 'now'" and "Superseded (1):" in r.out
    nbm("snapshot", "after")
    r = nbm("snapshot", "--diff", "after", "before")
    assert (r.code, one_line(r.err)) == (2, "nbmemory: Snapshot 'after' was sealed after "
                                            "'before'; a diff goes from the earlier to the "
                                            "later: give 'before' first.")

    r = nbm("recall", "--as-of", "before", "orders.amount", "--json")
    assert r.json["as_of"] == "before"
    assert [(h["note"]["id"], h["note"]["text"]) for h in r.json["hits"]] == [
        (1, "orders.amount is in cents")]
    r = nbm("recall", "orders.amount", "--json")
    assert r.json["hits"][0]["note"]["id"] == 2
    r = nbm("recall", "--as-of", "nope", "orders")
    assert r.code == 1 and "No snapshot named 'nope'" in one_line(r.err)
    r = nbm("snapshot", "--diff")
    assert r.code == 2 and "Give one or two snapshot names" in one_line(r.err)
    r = nbm("snapshot", "--list", "--diff", "before")
    assert (r.code, one_line(r.err)) == (
        2, "nbmemory: --list takes nothing else: nbmemory snapshot --list")
    r = nbm("snapshot", "--list", "-m", "why")
    assert (r.code, one_line(r.err)) == (2, "nbmemory: -m is the message of a new snapshot; "
                                            "--list takes none: nbmemory snapshot NAME -m message")
    r = nbm("recall", "--as-of", "before", "orders.amount")
    assert r.out.startswith("As of snapshot 'before':\n#1 ")


def test_open_questions(nbm):
    nbm("remember", "-k", "question", "does the watcher race acquire_lock?")
    nbm("remember", "a plain finding about the watcher")
    r = nbm("recall", "--open", "--json")
    assert [n["id"] for n in r.json["open_questions"]] == [1] and r.json["more"] is False
    nbm("remember", "-k", "question", "does the loader retry on a timeout?")
    r = nbm("recall", "--open", "-k", "1")  # cut at k, and said: it was cut silently
    assert r.out.count("\n#") == 1 and "(more open questions than 1: -k 4 shows more)" in r.out
    assert nbm("recall", "--open", "-k", "1", "--json").json["more"] is True
    r = nbm("recall", "--open", "--provenance")
    assert r.code == 2 and "--provenance applies only to a query" in one_line(r.err)
    assert nbm("recall", "--open", "-t", "nosuchtag", "--json").json["open_questions"] == []
    for score in ("0.5", "0"):  # 0 is given too
        r = nbm("recall", "--open", "--min-score", score)
        assert r.code == 2 and "--open with no query lists the open questions; --min-score " \
            "applies only to a query" in one_line(r.err)
    r = nbm("recall", "--open", "watcher", "--json")
    assert [h["note"]["id"] for h in r.json["hits"]] == [1]
    r = nbm("recall")
    assert r.code == 2 and "Say what you want to know" in one_line(r.err)


def test_export_and_import_round_trip(nbm, store_dir, tmp_path, monkeypatch):
    nbm("remember", "-t", "orders", "orders.amount is in cents")
    nbm("remember", "-t", "locks", "the watcher races acquire_lock")
    nbm("forget", "2")
    nbm("snapshot", "sealed", "-m", "why")
    path = tmp_path / "all.jsonl"
    r = nbm("export", str(path), "--json")
    assert r.code == 0 and (r.json["notes"], r.json["snapshots"]) == (2, 1)
    monkeypatch.chdir(tmp_path)  # a relative path is the caller's, whichever process owns the store
    r = nbm("export", "relative.jsonl", "--json")
    assert r.json["path"] == str(tmp_path / "relative.jsonl")
    assert (tmp_path / "relative.jsonl").read_text() == path.read_text()
    r = nbm("export", str(path), "--by", "kind")
    assert r.code == 2 and "--by groups Markdown pages: add --markdown" in one_line(r.err)
    r = nbm("export", "--markdown", str(tmp_path / "pages"), "--json")
    assert r.code == 0 and any(p.endswith("orders.md") for p in r.json["markdown"])
    assert (tmp_path / "pages" / "orders.md").read_text().count("orders.amount is in cents") == 1

    r = nbm("--store", str(tmp_path / "copy"), "import", str(path))
    assert r.out.strip() == f"Restored 2 notes from {path} into the empty store; 1 snapshot."
    r = nbm("--store", str(tmp_path / "copy"), "import", str(path))
    assert r.out.strip() == f"Imported {path}: 0 added, 2 skipped (already here)."
    r = nbm("import", str(tmp_path / "pages" / "index.md"))
    assert r.code == 2 and "is not JSON" in one_line(r.err)
    r = nbm("export", str(tmp_path / "missing" / "dir" / "x.jsonl"))
    assert r.code == 2
    assert one_line(r.err) == (f"nbmemory: Cannot write the export to {tmp_path}/missing/dir/"
                               "x.jsonl: No such file or directory. Check that its directory "
                               "exists and is writable.")


def test_an_imported_store_matches_and_reimport_duplicates_nothing(nbm, tmp_path, capsys):
    nbm("remember", "-t", "orders", "orders.amount is in cents")
    nbm("remember", "the watcher races acquire_lock")
    nbm("forget", "2")
    path = tmp_path / "all.jsonl"
    nbm("export", str(path))
    other = tmp_path / "other"
    summaries = []
    for _ in range(2):
        capsys.readouterr()
        assert cli.main(["--store", str(other), "--json", "import", str(path)]) == 0
        summaries.append(json.loads(capsys.readouterr().out))
    assert summaries[0]["restored"] == 2
    assert summaries[1]["added"] == 0 and summaries[1]["skipped"] == 2
    assert cli.main(["--store", str(other), "--json", "list", "--status", "active,revoked"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert sorted((n["id"], n["text"], n["status"]) for n in notes) == [
        (1, "orders.amount is in cents", "active"), (2, "the watcher races acquire_lock", "revoked")]


def test_show_says_how_a_question_was_answered(nbm, store_dir):
    nbm("remember", "-k", "question", "is the churn window 30 days?")
    with Memory.open(store_dir, model="hash:64", mode="service") as mem:
        mem.refute(1, "it is 45 days since May")
    out = nbm("show", "1").out
    assert "refuted  it is 45 days since May" in out and "#1  refuted  question" in out


def test_purge_needs_confirmation(nbm, store_dir):
    nbm("remember", "a secret that should not have been written down")
    r = nbm("forget", "--purge", "1", stdin="")
    assert r.code == 2 and "confirm with --yes" in one_line(r.err)
    assert nbm("show", "1", "--json").json["text"] == "a secret that should not have been written down"
    r = nbm("forget", "--purge", "--yes", "1", "--json")
    assert r.code == 0 and r.json["purged"][0]["status"] == "purged"
    shown = nbm("show", "1", "--json").json
    assert shown["status"] == "purged" and "secret" not in json.dumps(shown)
    assert nbm("history", "1", "--json").json["versions"] == []  # erased: no blank versions
    r = nbm("forget", "--purge", "--yes", "7")
    assert r.code == 1 and "No note #7" in one_line(r.err)


def test_reindex_rebuilds_the_vector_index(nbm, store_dir):
    for i in range(30):
        nbm("remember", f"finding {i} about module m{i}")
    nbm("forget", "3")
    assert nbm("stop").code == 0  # the owner writes the index file as it exits
    (store_dir / VECTOR_FILENAME).unlink()
    r = nbm("reindex", "--json")
    assert r.code == 0
    assert (r.json["action"], r.json["model"], r.json["vectors"], r.json["notes"]) == (
        "rebuilt", "hash:64", 30, 29)
    r = nbm("reindex")
    assert r.out.strip() == "Rebuilt the indexes: 30 vectors (hash:64), 30 keyword documents."
    r = nbm("reindex", "--reembed")  # the same model: nothing to embed, and it says why
    assert r.out.strip() == ("Re-embedded 0 texts (every text had its vectors already); the "
                             "store now uses hash:64 (30 vectors).")
    assert nbm("doctor", "--skip", "jupyter", "--skip", "model").code == 0


@pytest.mark.model
def test_reindex_reembeds_when_the_model_changed(nbm, store_dir):
    nbm("remember", "orders.amount is in cents before 2021")
    nbm("remember", "the watcher thread races acquire_lock")
    nbm("forget", "2")
    r = nbm("--model", "all-MiniLM-L6-v2", "doctor", "--skip", "jupyter", "--json")
    checks = {c["name"]: c for c in r.json["checks"]}
    assert r.code == 1 and checks["embedder"]["status"] == "fail"
    assert "nbmemory reindex --model all-MiniLM-L6-v2" in checks["embedder"]["fix"]
    assert checks["model"]["status"] == "ok"  # the real model loads offline

    r = nbm("--model", "all-MiniLM-L6-v2", "reindex", "--json")
    assert r.code == 0
    assert (r.json["action"], r.json["from"], r.json["to"]) == (
        "reembedded", "hash:64", "all-MiniLM-L6-v2:384")
    assert r.json["vectors"] == 2  # the revoked note keeps its vector
    r = nbm("--model", "all-MiniLM-L6-v2", "doctor", "--skip", "jupyter", "--json")
    assert r.code == 0, r.out
    r = nbm("--model", "all-MiniLM-L6-v2", "recall", "what unit is the order total in", "--json")
    assert r.json["hits"][0]["note"]["id"] == 1


# -- errors and exit codes --------------------------------------------------------------


def test_help_documents_the_exit_codes():
    r = shell("--help")
    assert r.code == 0
    assert "exit codes:" in r.out and "3  store unavailable" in r.out
    assert "NBMEMORY_MODEL" in r.out
    r = shell("recall", "--help")
    assert r.code == 0 and "exit codes:" in r.out and "--min-score" in r.out


def test_a_note_piped_in_utf16_is_read_as_what_it_says(store_dir):
    """PowerShell 5 pipes and redirects text as UTF-16 with a byte order mark: it was told
    to convert from cp1252, which would not have helped."""
    environ = {**os.environ, "NBMEMORY_MODEL": "hash:64", "HF_HUB_OFFLINE": "1"}
    text = "Umsatz in Cent, nicht in Euro: ü"
    for data in (b"\xff\xfe" + text.encode("utf-16-le"), text.encode("utf-8")):
        done = subprocess.run([ENTRY, "--store", str(store_dir), "remember", "-", "--json"],
                              input=data, capture_output=True, env=environ, timeout=300)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["note"]["text"] == text
    stop(store_dir)


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_utf16_piped_without_its_byte_order_mark_is_refused_as_not_utf8(
        nbm, monkeypatch, encoding):
    """Read as UTF-8, UTF-16 without a byte order mark is the text with a NUL after (or
    before) each letter: it was stored like that; now it is refused, saying what it is."""
    nbm("remember", "a first finding")
    for argv in (["remember", "-"], ["edit", "1", "-"]):
        data = io.TextIOWrapper(io.BytesIO("Umsatz in Cent".encode(encoding)))
        monkeypatch.setattr(sys, "stdin", data)
        r = nbm(*argv)
        assert r.code == 2, r.out
        assert one_line(r.err) == (
            "nbmemory: stdin is not UTF-8: it holds NUL bytes, as UTF-16 text without a byte "
            f"order mark does. Convert it first, e.g. iconv -f {encoding[:6]}{encoding[7:]} "
            "-t utf-8")
    assert [n["text"] for n in nbm("list", "--json").json["notes"]] == ["a first finding"]


@pytest.mark.parametrize("argv", [["mcp", "--json"], ["--json", "mcp"], ["serve", "--json"]])
def test_json_is_refused_where_nothing_prints_it(argv):
    """mcp and serve print no answer that --json could shape: their help does not offer it,
    and given anyway it is refused in words rather than ignored."""
    command = [a for a in argv if a != "--json"][0]
    assert "--json" not in shell(command, "--help").out
    r = shell(*argv)
    assert r.code == 2
    why = {"mcp": "it speaks MCP's JSON-RPC on stdout", "serve": "it prints only its log"}[command]
    assert one_line(r.err) == f"nbmemory: --json does not apply to nbmemory {command}: {why}"


@pytest.mark.parametrize("argv, code, message", [
    (["show", "99"], 1, "nbmemory: No note #99. Recall or list notes to find their ids."),
    (["show", "abc"], 2, "nbmemory: argument ID: 'abc' is not a note id; ids are numbers like 12 "
                         "or #12 (see: nbmemory show --help)"),
    (["recall"], 2, "nbmemory: Say what you want to know: nbmemory recall QUERY... (see: nbmemory recall --help)"),
    (["show"], 2, "nbmemory: the following arguments are required: ID (see: nbmemory show --help)"),
    (["recall", "-k", "0", "x"], 2, "nbmemory: argument -k: must be at least 1 (got 0) "
                                    "(see: nbmemory recall --help)"),
    (["recall", "--since", "yesterday", "x"], 2, "cannot read the time 'yesterday'"),
    (["remember", "-k", "idea", "x"], 2, "nbmemory: Unknown kind 'idea'; use one of: finding, gotcha"),
    (["remember", "-t", "two words", "x"], 2, "Tag 'two words' contains a space"),
    (["frobnicate"], 2, "invalid choice: 'frobnicate'"),
    (["remember", "--bogus", "x"], 2, "nbmemory: unrecognized arguments: --bogus "
                                      "(see: nbmemory remember --help)"),
    # Before the command: its value was taken for the command ("invalid choice: 'hash:64'").
    (["--mod", "hash:64", "status"], 2, "nbmemory: unrecognized arguments: --mod "
                                        "(see: nbmemory --help)"),
    (["--stor=x", "status"], 2, "nbmemory: unrecognized arguments: --stor (see: nbmemory"),
    (["import", "."], 2, "is a directory; give the .jsonl file nbmemory export wrote"),
    # One dash: -tag was read as -t ag, so the note was stored with the tag "ag".
    (["remember", "-tag", "orders", "amounts in cents"], 2, "nbmemory: unknown option -tag: "
     "--tags takes two dashes (or write -- before a text that starts with a dash); nothing "
     "was done (see: nbmemory remember --help)"),
    (["recall", "x", "-kind=gotcha"], 2, "nbmemory: unknown option -kind: --kind takes two"),
    (["recall", "--min-score", "5", "x"], 2, "nbmemory: min_score is a score from -1 to 1"),
    (["list", "--status", "bogus"], 2, "nbmemory: Unknown status 'bogus'; use one or more of: "
                                       "active, revoked, superseded, refuted, purged"),
    (["serve", "--idle-timeout", "-5"], 2, "nbmemory: argument --idle-timeout: must be 0 (never) "
                                           "or more seconds (got -5)"),
    (["share", "1", "--to", "nonexist/x"], 2, "nbmemory: Cannot share with nonexist/x: "),
])
def test_errors_are_one_line_with_an_exit_code(store_dir, argv, code, message):
    Memory.open(store_dir, embedder=HashEmbedder()).close()  # an empty store
    r = shell("--store", str(store_dir), *argv, stdin="")
    assert r.code == code, r.err
    assert message in one_line(r.err)
    assert r.out == ""


def test_a_write_the_store_would_refuse_makes_no_store_where_store_points(tmp_path,
                                                                          monkeypatch):
    """A refused remember or import made an empty store (and started its owner) at a
    mistyped --store: from then on reading it said "No active notes", not "No store"."""
    monkeypatch.chdir(tmp_path)
    typo = tmp_path / "typo"
    (tmp_path / "notes.jsonl").write_text('{"a": 1}\n')
    for argv, message in ((["remember", "-k", "bogus", "x"], "nbmemory: Unknown kind 'bogus'; "
                           "use one of: finding, gotcha, decision, question, reference, procedure"),
                          (["remember", "-p", "urgent", "x"], "Unknown priority 'urgent'"),
                          (["remember", "-"], "nbmemory: The note is empty"),
                          (["remember", "--about", "missing.csv", "x"],
                           f"nbmemory: --about missing.csv: nothing exists there (looked in "
                           f"{tmp_path}). Check the path. The note was not stored."),
                          (["import", "missing.jsonl"], f"nbmemory: No file {tmp_path}/missing"),
                          (["import", "notes.jsonl"], "notes.jsonl is not an nbmemory export")):
        r = shell("--store", str(typo), *argv, stdin="")
        assert (r.code, message in one_line(r.err)) == (2, True), r.err
        assert not typo.exists()
    r = shell("--store", str(typo), "remember", "--supersedes", "3", "a correction")
    assert (r.code, one_line(r.err)) == (3, f"nbmemory: No store at {typo} (given explicitly): "
                                            "there is no note #3 to supersede. Check --store "
                                            "and NBMEMORY_HOME.")
    assert not typo.exists()
    r = shell("--store", str(typo), "list")
    assert r.code == 3 and "No store at" in r.err


def test_a_project_folder_given_as_the_store_names_its_store(tmp_path, monkeypatch):
    """--store PROJECT where PROJECT/.nbmemory is the store: reading said "No store at
    PROJECT", and a remember made a second store among the project's files and made the
    folder owner-only (755 -> 700)."""
    project = tmp_path / "project"
    project.mkdir(mode=0o755)
    Memory.open(project / ".nbmemory", embedder=HashEmbedder()).close()
    message = (f"nbmemory: {project} is a project folder whose store is {project}/.nbmemory: "
               f"give --store {project}/.nbmemory, or leave --store out when working in that "
               "project.")
    for argv in (["list"], ["remember", "meant for the project's store"]):
        r = shell("--store", str(project), *argv)
        assert (r.code, one_line(r.err)) == (2, message)
    assert sorted(p.name for p in project.iterdir()) == [".nbmemory"]
    assert project.stat().st_mode & 0o777 == 0o755


def test_a_mistyped_store_is_refused_not_created_empty(tmp_path, monkeypatch):
    """Reading a store that is not there would create an empty one and answer "No active
    notes." (the notes seem gone); a store is only created where its parent exists."""
    monkeypatch.chdir(tmp_path)
    typo = tmp_path / "projcet" / ".nbmemory"
    r = shell("--store", str(typo), "list")
    assert (r.code, one_line(r.err)) == (3, (
        f"nbmemory: No store at {typo} (given explicitly): nothing was remembered there yet. "
        "Check --store and NBMEMORY_HOME; 'nbmemory remember TEXT' (or import) creates it."))
    r = shell("--store", str(typo), "remember", "a finding")
    assert (r.code, one_line(r.err)) == (2, (
        f"nbmemory: Cannot create the store {typo} (given explicitly): {typo.parent} does not "
        "exist. Check --store and NBMEMORY_HOME, or make the directory first."))
    r = shell("status")  # the default store of this directory, not there yet
    assert r.code == 3 and "No store at" in r.err and "no git repository" in r.err
    r = shell("--store", "", "list")
    assert r.code == 2 and "--store is empty" in r.err
    (tmp_path / "notes.txt").write_text("not a store")
    r = shell("--store", str(tmp_path / "notes.txt"), "list")
    assert r.code == 2 and f"{tmp_path / 'notes.txt'} is a file, not a store" in r.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]  # nothing created


def test_a_notes_terminal_controls_are_shown_not_obeyed(nbm):
    """A note (imported, or written by an agent) must not retitle the terminal, move the
    cursor or hide text: its control characters print as \\xNN; JSON escapes them."""
    text = "amount \x1b[31min cents\x1b[0m \x1b]0;pwned\x07\rspoof \x9b2J"
    nbm("remember", "-", stdin=text)
    for argv in (("list",), ("show", "1"), ("recall", "amount cents"), ("history", "1")):
        out = nbm(*argv).out
        assert not any(c in out for c in "\x1b\x07\r\x9b"), argv
    shown = nbm("show", "1").out
    assert "amount \\x1b[31min cents\\x1b[0m \\x1b]0;pwned\\x07\\x0d" in shown
    assert "spoof \\x9b2J" in shown
    assert nbm("show", "1", "--json").json["text"] == text
    nbm("remember", "-", stdin="written on windows\r\nsecond line\r\n")
    assert "written on windows\n    second line" in nbm("show", "2").out  # no \\x0d
    # Bidirectional overrides would show the text after them reversed ("Trojan Source").
    nbm("remember", "-", stdin="grant \u202eadmin\u202c to the reviewer")
    for argv in (("list",), ("show", "3"), ("recall", "grant reviewer")):
        out = nbm(*argv).out
        assert "\u202e" not in out and "\\u202eadmin\\u202c" in out, argv


def test_a_note_that_is_only_a_location_gets_a_hint(nbm):
    r = nbm("remember", "see resolver.rs:214")
    assert r.out.splitlines() == [
        "Remembered #1 (finding, medium)",
        "Hint: #1 is only a location. Pointers go stale as code moves: store the finding itself "
        "(what happens there and why it matters), e.g. nbmemory remember --supersedes 1 "
        "'<the finding>'"]


def test_remember_with_no_text_says_what_to_do(nbm):
    r = nbm("remember", "-", stdin="   \n")
    assert r.code == 2 and "The note is empty" in one_line(r.err)


def test_remember_dash_and_words_refuses_rather_than_drop_the_piped_note(nbm):
    r = nbm("remember", "-", "extra", "words", stdin="piped\n")
    assert r.code == 2 and one_line(r.err) == (
        "nbmemory: - reads the note from stdin and takes nothing after it (got 'extra words'); "
        "for a note that starts with a dash, quote it: nbmemory remember -- '- extra words'")
    assert "No store at" in nbm("list").err  # nothing stored, nor a store made for it


def test_json_errors_are_json_on_stdout(store_dir):
    Memory.open(store_dir, embedder=HashEmbedder()).close()
    r = shell("--store", str(store_dir), "--json", "show", "7")
    assert r.code == 1
    assert r.json == {"error": {"type": "NotFound", "exit": 1,
                                "message": "No note #7. Recall or list notes to find their ids."}}


def test_a_store_owned_by_another_process_exits_3(store_dir):
    with Memory.open(store_dir, embedder=HashEmbedder()):
        r = shell("--store", str(store_dir), "list")
        assert r.code == 3
        assert f"owned by another process (pid {os.getpid()})" in one_line(r.err)
        r = shell("--store", str(store_dir), "doctor", "--skip", "jupyter", "--skip", "model", "--json")
        checks = {c["name"]: c for c in r.json["checks"]}
        assert checks["owner"]["status"] == "warn"
        assert f"open in process {os.getpid()}" in checks["owner"]["detail"]
        # Not "nbmemory stop", which refuses a process that opened the store in-process.
        assert checks["owner"]["fix"] == ("Close that process (a script or kernel that opened "
                                          "it in-process); then run doctor again.")
        assert "database" not in checks
        assert r.code == 0  # a busy store is not a broken one


def test_doctor_says_an_owner_is_starting_not_that_a_script_holds_the_store(store_dir):
    """An owner that has locked the store but not yet written owner.json says so in
    owner.lock: doctor waits for it, rather than sending the user after a script."""
    Memory.open(store_dir, embedder=HashEmbedder()).close()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys; f = open(sys.argv[1], 'r+'); "
         "fcntl.flock(f, fcntl.LOCK_EX); f.truncate(); f.write(f'{os.getpid()}\\nservice\\n'); "
         "f.flush(); print('locked', flush=True); sys.stdin.read()",
         str(store_dir / "owner.lock")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "locked\n"
        r = shell("--store", str(store_dir), "doctor", "--skip", "jupyter", "--skip", "model",
                  "--json")
        owner = {c["name"]: c for c in r.json["checks"]}["owner"]
        assert (owner["status"], owner["detail"]) == ("warn", f"an owner (pid {holder.pid}) "
                                                              "is starting")
        assert r.code == 0
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)


def test_a_real_shell_round_trip(store_dir):
    r = shell("--store", str(store_dir), "remember", "--json", "-", stdin="piped from a shell\n")
    assert r.code == 0 and r.json["note"]["text"] == "piped from a shell"
    r = shell("--store", str(store_dir), "recall", "piped", "--json")
    assert r.code == 0 and [h["note"]["id"] for h in r.json["hits"]] == [1]
    r = shell("--store", str(store_dir), "list")
    assert r.code == 0 and "piped from a shell" in r.out


# -- doctor -----------------------------------------------------------------------------


def doctor(nbm, *extra):
    r = nbm("doctor", "--skip", "jupyter", "--json", *extra)
    return r, {c["name"]: c for c in r.json["checks"]}


def test_doctor_on_a_healthy_store(nbm):
    nbm("remember", "a finding")
    nbm("remember", "another finding")
    nbm("forget", "1")
    assert nbm("stop").code == 0  # with no owner running, doctor reads the files itself
    r, checks = doctor(nbm)
    assert r.code == 0 and r.json["ok"] is True
    assert [c["status"] for c in r.json["checks"]] == ["ok"] * len(r.json["checks"])
    assert list(checks) == ["nbmemory", "model", "store", "owner", "database", "schema", "notes",
                            "embedder", "index"]
    assert checks["index"]["detail"] == "2 vectors, one per note, up to date with the journal"
    assert checks["notes"]["detail"] == "1 active, 1 revoked"
    r = nbm("doctor", "--skip", "jupyter")
    assert r.code == 0 and r.out.strip().endswith("All checks passed.")


def test_doctor_on_a_missing_store_only_warns(nbm, store_dir):
    r, checks = doctor(nbm)
    assert r.code == 0
    assert checks["store"]["status"] == "warn" and "no store yet" in checks["store"]["detail"]
    assert not store_dir.exists()  # doctor creates nothing


def test_doctor_finds_a_missing_index_file(nbm, store_dir):
    """A warning, not a failure: the next open rebuilds it (an owner stopped while it was
    still building a large one leaves none, and doctor said the store had a problem)."""
    nbm("remember", "a finding")
    assert nbm("stop").code == 0
    (store_dir / VECTOR_FILENAME).unlink()
    r, checks = doctor(nbm)
    assert r.code == 0
    assert checks["index"] == {"name": "index", "status": "warn",
                               "detail": "vectors.usearch is missing (1 notes need vectors): "
                                         "the next open rebuilds it",
                               "fix": f"Rebuild it from the database: nbmemory reindex --store {store_dir}"}
    r = nbm("doctor", "--skip", "jupyter")
    assert "WARN  index" in r.out and f"-> Rebuild it from the database: nbmemory reindex --store {store_dir}" in r.out
    assert not (store_dir / VECTOR_FILENAME).exists()  # doctor repairs nothing itself
    assert nbm("reindex").code == 0
    assert doctor(nbm)[0].code == 0


def test_doctor_finds_an_index_that_disagrees_with_the_store(nbm, store_dir):
    nbm("remember", "a finding")
    nbm("remember", "another finding")
    assert nbm("stop").code == 0
    saved = (store_dir / VECTOR_FILENAME).read_bytes(), (store_dir / (VECTOR_FILENAME + ".json")).read_text()
    nbm("remember", "a third finding")
    assert nbm("stop").code == 0
    # Put back the older index but claim it is current: a projection that lies.
    (store_dir / VECTOR_FILENAME).write_bytes(saved[0])
    meta = json.loads(saved[1])
    store = Store(store_dir)
    meta["seq"] = store.position()
    store.close()
    (store_dir / (VECTOR_FILENAME + ".json")).write_text(json.dumps(meta))
    r, checks = doctor(nbm)
    assert r.code == 1
    assert checks["index"]["detail"] == ("vectors.usearch disagrees with the database: "
                                         "1 notes have no vector (e.g. #3)")
    # A note written while the owner's model loaded has no vector until the next open
    # embeds it (an owner stopped that early): said as such, not as a disagreement.
    store = Store(store_dir)
    store.con.execute("DELETE FROM embeddings WHERE content_hash = (SELECT content_hash "
                      "FROM notes WHERE id = 3)")
    store.close()
    r, checks = doctor(nbm)
    assert (r.code, checks["index"]["status"]) == (0, "warn")
    assert checks["index"]["detail"] == "1 notes have no vector yet (e.g. #3); the next open embeds them"


def test_doctor_says_a_database_restored_from_an_older_copy_has_lost_writes(nbm, store_dir):
    """Every command refuses such a store (the index saw more); doctor passed it, or sent
    the user to a reindex that refuses it too."""
    nbm("remember", "a finding")
    assert nbm("stop").code == 0
    older = (store_dir / "memory.duckdb").read_bytes()
    nbm("remember", "another finding")
    nbm("snapshot", "later")
    assert nbm("stop").code == 0
    (store_dir / "memory.duckdb").write_bytes(older)
    r, checks = doctor(nbm)
    assert r.code == 1
    assert checks["database"] == {
        "name": "database", "status": "fail",
        "detail": "the store has lost writes: its vector index saw journal position 3, the "
                  "database ends at 1",
        "fix": "Restore memory.duckdb from a backup, or keep what the database has: move "
               "vectors.usearch and vectors.usearch.json away, then open the store again."}
    r = nbm("list")
    assert r.code == 3 and "has lost writes" in one_line(r.err)


def test_doctor_on_a_store_from_a_newer_version(nbm, store_dir):
    nbm("remember", "keep me")
    assert nbm("stop").code == 0
    store = Store(store_dir)
    store.con.execute("INSERT INTO migrations VALUES ('m999_from_the_future', now())")
    store.close()
    database = (store_dir / "memory.duckdb").read_bytes()
    r, checks = doctor(nbm)
    assert r.code == 1
    assert checks["schema"]["status"] == "fail"
    assert "written by a newer nbmemory (migration m999_from_the_future" in checks["schema"]["detail"]
    assert checks["schema"]["fix"] == "Upgrade nbmemory: pip install -U nbmemory. The store was not touched."
    assert "index" not in checks
    assert (store_dir / "memory.duckdb").read_bytes() == database
    r = nbm("list")
    assert r.code == 3 and "written by a newer nbmemory" in one_line(r.err)
    assert (store_dir / "memory.duckdb").read_bytes() == database


def test_doctor_on_an_unreadable_database(nbm, store_dir):
    store_dir.mkdir(mode=0o700)
    (store_dir / "memory.duckdb").write_bytes(b"this is not a database" * 100)
    r, checks = doctor(nbm)
    assert r.code == 1
    assert checks["database"]["status"] == "fail" and "is unreadable" in checks["database"]["detail"]
    assert checks["database"]["fix"] == (
        "It may be damaged or written by another DuckDB version: use the nbmemory version that "
        "wrote it, or move memory.duckdb and memory.duckdb.wal away together to start a new "
        "store.")


def test_doctor_on_a_truncated_database_and_on_a_file(nbm, store_dir, tmp_path, capsys):
    with Memory.open(store_dir, embedder=HashEmbedder(), mode="local") as memory:
        memory.remember_many([{"text": f"finding number {i} about the orders"} for i in range(3000)])
    database = store_dir / "memory.duckdb"
    os.truncate(database, database.stat().st_size // 2)  # opens, then a read fails
    r, checks = doctor(nbm)
    assert r.code == 1
    assert checks["database"]["status"] == "fail"
    assert checks["database"]["detail"].startswith(f"{database} is damaged (IO Error: ")
    assert checks["database"]["fix"].startswith("Restore memory.duckdb from a backup")
    afile = tmp_path / "notes.txt"
    afile.write_text("not a store")
    capsys.readouterr()
    code = cli.main(["--store", str(afile), "doctor", "--skip", "jupyter", "--json"])
    checks = {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    assert code == 1 and checks["store"] == {
        "name": "store", "status": "fail", "detail": f"{afile} is a file, not a store",
        "fix": "Point NBMEMORY_HOME (or --store) at a directory."}


def test_doctor_with_a_model_that_cannot_load_offline(nbm):
    r = nbm("--model", "no-such-org/no-such-model", "doctor", "--skip", "jupyter", "--json")
    checks = {c["name"]: c for c in r.json["checks"]}
    assert r.code == 1 and checks["model"]["status"] == "fail"
    assert "Cannot load the embedding model 'no-such-org/no-such-model' offline" in checks["model"]["fix"]


@pytest.mark.skipif(not hasattr(os, "statvfs"), reason="a POSIX file system's flags")
def test_doctor_on_a_read_only_disk_does_not_send_the_user_to_chmod(nbm, store_dir,
                                                                   monkeypatch):
    """The fix said chmod u+rwx for a store already 0700 on a disk mounted read-only."""
    import types

    from nbmemory.doctor import check_store

    nbm("remember", "a finding")
    assert nbm("stop").code == 0
    monkeypatch.setattr(os, "access", lambda path, mode: False)  # (root may write anything)
    monkeypatch.setattr(os, "statvfs", lambda path: types.SimpleNamespace(f_flag=os.ST_RDONLY),
                        raising=False)
    check = {c.name: c for c in check_store(str(store_dir), "hash:64")}["store"]
    assert (check.status, check.fix) == ("fail", "Its file system is mounted read-only: mount "
                                                 "it read-write, or copy the store to a disk "
                                                 "you can write.")


@pytest.mark.model
def test_doctor_says_why_the_model_loads_on_torch_each_time(nbm, tmp_path, monkeypatch):
    """A model cache that cannot be written (a file, a read-only disk) made every owner load
    the model on torch (10-16 s instead of under one) without a word anywhere."""
    blocked = tmp_path / "a-file-not-a-directory"
    blocked.write_text("")
    monkeypatch.setenv("NBMEMORY_MODEL_CACHE", str(blocked))
    r = nbm("--model", "all-MiniLM-L6-v2", "doctor", "--skip", "jupyter", "--json")
    model = {c["name"]: c for c in r.json["checks"]}["model"]
    assert model["status"] == "warn" and "on torch" in model["detail"]
    assert model["detail"].endswith(f"but the model cache {blocked} is a file, not a "
                                    "directory")
    assert model["fix"].startswith("Set NBMEMORY_MODEL_CACHE to a directory this user can write")


def test_doctor_checks_the_server_extension(store_dir, tmp_path):
    """The user's Jupyter config disables the server extension: doctor says how to enable it."""
    config = tmp_path / "jupyter-config"
    (config / "jupyter_server_config.d").mkdir(parents=True)
    (config / "jupyter_server_config.d" / "nbmemory.json").write_text(
        json.dumps({"ServerApp": {"jpserver_extensions": {"nbmemory.server": False}}}))
    r = shell("--store", str(store_dir), "doctor", "--skip", "model", "--json",
              env={"JUPYTER_CONFIG_DIR": str(config), "JUPYTER_PREFER_ENV_PATH": "0"})
    checks = {c["name"]: c for c in r.json["checks"]}
    assert r.code == 1
    assert checks["server extension"] == {
        "name": "server extension", "status": "fail", "detail": "nbmemory.server is disabled",
        "fix": "jupyter server extension enable nbmemory.server"}
    assert checks["labextension"]["status"] in ("ok", "fail")



def test_doctor_finds_the_server_extension_and_panel_installed(store_dir, tmp_path):
    """What setup installed: the server extension enabled and the prebuilt panel found."""
    r = shell("--store", str(store_dir), "doctor", "--skip", "model", "--json",
              env={"JUPYTER_CONFIG_DIR": str(tmp_path / "empty-config")})
    checks = {c["name"]: c for c in r.json["checks"]}
    assert checks["server extension"]["status"] == "ok", checks["server extension"]
    assert checks["labextension"]["status"] == "ok", checks["labextension"]
    assert r.code == 0 and r.json["ok"] is True

def test_the_cli_module_imports_nothing_heavy():
    """`nbmemory --help` and argument errors answer without loading DuckDB or the model."""
    code = ("import sys, nbmemory.cli as c; c.build_parser(); "
            "print(','.join(m for m in ('duckdb', 'usearch', 'torch', 'sentence_transformers', "
            "'mcp', 'IPython') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""


# -- the owner process ------------------------------------------------------------------


def test_commands_share_one_owner_and_stop_ends_it(nbm, store_dir):
    from nbmemory.service import owner_info

    assert nbm("remember", "the watcher races acquire_lock").code == 0
    info = owner_info(store_dir)
    assert info["mode"] == "service" and info["pid"] != os.getpid()
    assert nbm("recall", "watcher", "--json").json["hits"][0]["note"]["id"] == 1
    assert owner_info(store_dir)["pid"] == info["pid"]  # the same owner served both
    r = nbm("stop", "--json")
    assert r.json == {"store": str(store_dir), "stopped": True, "pid": info["pid"]}
    assert owner_info(store_dir) is None
    r = nbm("stop")
    assert r.code == 0 and r.out.strip() == f"No owner is running for {store_dir}."


def test_serve_runs_an_owner_in_the_foreground(store_dir):
    import time

    from nbmemory.service import owner_info

    environ = {**os.environ, "NBMEMORY_MODEL": "hash:64", "HF_HUB_OFFLINE": "1"}
    # A store that is not there is refused (a mistyped --store would get an empty one).
    r = shell("--store", str(store_dir), "serve")
    assert (r.code, one_line(r.err)) == (3, f"nbmemory: No store at {store_dir} (given "
                                            "explicitly): nothing was remembered there yet. "
                                            "Check --store and NBMEMORY_HOME; 'nbmemory "
                                            "remember TEXT' (or import) creates it.")
    assert not store_dir.exists()
    with Memory.open(store_dir, embedder=HashEmbedder(), settings=None) as mem:
        mem.remember("made before the owner is served")
    server = subprocess.Popen([ENTRY, "--store", str(store_dir), "serve", "--idle-timeout", "0"],
                              env=environ, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not ((owner_info(store_dir) or {}).get("pid") == server.pid and
                   "state" in owner_info(store_dir)):
            assert server.poll() is None, server.stderr.read()
            assert time.monotonic() < deadline, "the owner did not come up"
            time.sleep(0.05)  # polling for a condition, with a deadline
        assert shell("--store", str(store_dir), "remember", "served in the foreground").code == 0
        r = shell("--store", str(store_dir), "doctor", "--skip", "model", "--skip", "jupyter", "--json")
        checks = {c["name"]: c for c in json.loads(r.out)["checks"]}
        assert checks["owner"]["status"] == "ok"
        assert f"owner service pid {server.pid}" in checks["owner"]["detail"]
        assert checks["index"]["status"] == "ok", checks["index"]
        assert shell("--store", str(store_dir), "stop").code == 0
        assert server.wait(timeout=60) == 0
        assert "serving" in server.stderr.read()
    finally:
        if server.poll() is None:
            server.kill()


def test_serve_refuses_an_idle_timeout_that_is_not_seconds(store_dir):
    environ = {**os.environ, "NBMEMORY_MODEL": "hash:64", "NBMEMORY_IDLE_TIMEOUT": "half an hour"}
    r = subprocess.run([ENTRY, "--store", str(store_dir), "serve"], env=environ,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert "NBMEMORY_IDLE_TIMEOUT='half an hour' is not a number of seconds" in r.stderr
    assert not (store_dir / "owner.json").exists()


def test_a_listing_from_a_team_stores_local_copy_says_so(capsys):
    """While a team store's server is away, a listing comes from this machine's copy: the
    CLI says so above the table, as recall does (tests/test_team.py makes such a page)."""
    import argparse

    from nbmemory.cli_commands import cmd_list
    from nbmemory.models import Note, Page

    behind = "The team store is unreachable: these come from this machine's copy as of 09:00"
    page = Page([Note(1, "the warehouse is rebuilt at 02:00 UTC")], 1, 0, 50, behind=behind)

    class Copy:
        def notes(self, **filters):
            return page

    cmd_list(Copy(), argparse.Namespace(tags=None, kind=None, priority=None, since=None,
                                        status="active", offset=0, limit=50, order="newest",
                                        json=False, author=None, mine=False))
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"({behind})"
    assert out[-1] == "(1-1 of 1 active note)"


# -- wide and combining characters --------------------------------------------------------

CHINESE = ("订单金额在2021年3月之前以分为单位存储，之后改为以元为单位，计算月度收入之前必须先统一"
           "单位，否则三月份的数据会被放大一百倍")


def columns(line: str) -> int:
    """The columns a terminal gives ``line``: CJK and emoji take two, combining marks none."""
    return sum(0 if unicodedata.category(c) in ("Mn", "Me", "Cf")
               else 2 if unicodedata.east_asian_width(c) in ("W", "F") else 1 for c in line)


def test_a_listing_of_wide_and_combining_text_fits_the_terminal_and_lines_up(nbm, monkeypatch):
    """Chinese has no spaces to cut at (it was listed as "..."), takes two columns a
    character (its rows were twice the terminal), and tags in CJK, emoji, NFD Latin or
    Devanagari pushed the status column out of line."""
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setattr("nbmemory.wording.age", lambda when, now=None: "2 min")
    nbm("remember", "-t", "订单,单位", CHINESE)
    nbm("remember", "-t", "cafe\u0301", "עמודת הסכום נשמרת באגורות לפני מרץ 2021.")
    nbm("remember", "-t", "🎉", "the launch 🎉 moved the export to 03:00")
    nbm("remember", "-t", "कुल", "कुल राशि पैसे में है")
    # The store may keep tags composed (NFC): "café" takes 4 columns either way.
    lines = [unicodedata.normalize("NFC", line) for line in nbm("list").out.splitlines()]
    assert lines == [
        "id  age    priority  kind     tags       status  note",
        "#4  2 min  medium    finding  कुल         active  कुल राशि पैसे में है",
        "#3  2 min  medium    finding  🎉         active  the launch 🎉 moved the ...",
        "#2  2 min  medium    finding  café       active  עמודת הסכום נשמרת באגורות ...",
        "#1  2 min  medium    finding  订单,单位  active  订单金额在2021年3月之前以分 ...",
        "(1-4 of 4 active notes)"]
    assert max(columns(line) for line in lines) <= 80
    words = ["status"] + ["active"] * 4
    starts = [columns(line[:line.index(word)]) for line, word in zip(lines, words)]
    assert starts == [41] * 5  # the status column lines up under its header


def test_an_emoji_finds_the_notes_marked_with_it(nbm):
    """An emoji was no keyword, and the model reads no meaning into one: nothing was found."""
    nbm("remember", "⚠️ the nightly export drops rows with null amounts")
    nbm("remember", "orders.amount is in cents")
    out = nbm("recall", "⚠").out
    assert out.startswith("(Keyword matches only: the model hash reads English, and most of "
                          "this question is in other scripts or symbols.")
    assert "the nightly export drops rows" in out and "cents" not in out


def test_a_chinese_note_wraps_at_the_terminals_columns(nbm):
    """The recall view wraps at 88 columns whatever the script (a Chinese line was 176).
    (No similar notes are listed for it: the embedder reads English only.)"""
    nbm("remember", CHINESE)
    r = nbm("remember", CHINESE.replace("一百倍", "一百倍！"))
    assert "Similar" not in r.out
    lines = nbm("recall", "--min-score", "0", "-k", "1", CHINESE).out.splitlines()
    assert lines[0].startswith("(Keyword matches only: the model hash reads English")
    assert lines[2:4] == [
        "     订单金额在2021年3月之前以分为单位存储，之后改为以元为单位，计算月度收入之前必须先统",
        "     一单位，否则三月份的数据会被放大一百倍"]
    assert columns(lines[2]) == 88


def test_an_interrupted_command_says_the_owner_may_still_finish_its_work(capsys, monkeypatch):
    """Ctrl-C stops the command here, not an import the owner was sent: it said only
    "interrupted", and the import it had been sent then landed whole."""
    def interrupted(argv):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "run", interrupted)
    assert cli.main(["import", "all.jsonl"]) == 130
    assert one_line(capsys.readouterr().err) == (
        "nbmemory: interrupted here; what the store's owner was sent (an import, an export, "
        "a re-embed) may still finish there: nbmemory status shows the store, nbmemory stop "
        "stops its owner")


def test_a_list_past_its_end_says_how_many_there_are(nbm):
    nbm("remember", "the only note")
    assert nbm("list", "--offset", "5").out.strip() == "Nothing past 1 active note (--offset 5)."
    assert nbm("list", "-t", "nosuchtag").out.strip() == "No active notes match."
    assert nbm("list", "--status", "revoked").out.strip() == "No revoked notes."
