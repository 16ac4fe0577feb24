"""Export to JSON Lines and Markdown, import back with conflict policies."""

import base64
import hashlib
import json
import os
import re
import threading
import time

import numpy as np
import pytest

from nbmemory import exchange
from nbmemory.embed import HashEmbedder
from nbmemory.errors import Conflict, InvalidInput
from nbmemory.memory import Memory
from waiting import holding_chunks, ran_while_held

ORDERS = "id,amount\n1,1000\n2,2500\n"
QUERIES = ["lock watcher", "orders amount", "parquet partition day", "retry", "cache 17"]
TOPICS = ["lock watcher", "orders amount cents", "parquet partition", "retry budget", "cache"]


def save_later(path, text):
    """Write ``text`` as a save made a moment after the notes (file clocks are coarse)."""
    path.write_text(text)
    later = time.time() + 2
    os.utime(path, (later, later))


# A workspace the notes are about: source files and a CSV (anchored paths are relative to it).
FILES = {"src/loader.py": "def load(path):\n    return read_parquet(path)\n",
         "data/orders.csv": ORDERS,
         "src/resolver.py": "def resolve(name):\n    return lookup(name)\n",
         "src/report.py": "def report(frame):\n    return frame.describe()\n"}
VERIFIED = (1, 41)  # anchored to the two files that change, verified after the change


def make_workspace(root):
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def build(memory, workspace, n=1000):
    """Notes with versions, revocations, supersedes, anchors (some verified, some stale)
    and 3 snapshots. Note ``id`` is ``finding id - 1``."""
    for i in range(n):
        note_id = i + 1
        text = f"finding {i}: the {TOPICS[i % 5]} detail number {i}"
        if note_id % 75 == 1:  # a path in the text is anchored too (dropped by an edit)
            text += " (see src/resolver.py)"
        about = [list(FILES)[(note_id // 40) % 4]] if note_id % 40 == 1 else None
        memory.remember(text, tags=f"t{i % 4}", priority=("high", "medium", "low")[i % 3],
                        about=about)
        if i == 300:
            memory.snapshot("s1", message="first")
    for i in range(1, n, 50):
        memory.edit(i, text=f"edited finding {i} about the {TOPICS[i % 5]}")
    memory.forget(list(range(2, n, 97)))
    memory.snapshot("s2")
    save_later(workspace / "src/loader.py", FILES["src/loader.py"] + "# now lazy\n")
    save_later(workspace / "data/orders.csv", ORDERS + "3,990\n4,15\n")
    for note_id in VERIFIED:
        memory.verify(note_id)
    for i in range(3, 300, 60):
        memory.supersede(i, f"finding {i} was wrong: the {TOPICS[i % 5]} works differently")
    memory.reinstate(2)
    memory.snapshot("s3", message="last")


def observe(memory):
    """Everything a user can see, to compare two stores."""
    statuses = ("active", "revoked", "superseded", "purged")
    notes = memory.notes(status=statuses, limit=10_000, order="oldest").notes
    return {
        "recall": {q: [(h.note.id, h.score) for h in memory.recall(q, k=10)] for q in QUERIES},
        "as_of": {q: [h.note.id for h in memory.recall(q, as_of="s2")] for q in QUERIES},
        "recall_stale": {q: [h.note.id for h in memory.recall(q, k=10, stale=True)]
                         for q in QUERIES},
        "notes": [n.to_dict() for n in notes],
        "anchors": {n.id: [a.to_dict() for a in n.anchors] for n in notes if n.anchors},
        "stale": {n.id: [r.to_dict() for r in n.stale]
                  for n in memory.stale(limit=10_000).notes},
        "history": {i: [e.to_dict() for e in memory.history(i)]
                    for i in (1, 2, 3, 41, 51, 76, 161, 999)},
        "snapshots": [s.to_dict() for s in memory.snapshots()],
        "diffs": [memory.snapshot_diff("s1", "s3").to_dict(), memory.snapshot_diff("s2").to_dict()],
    }


@pytest.fixture
def big_export(tmp_path_factory):
    workspace = make_workspace(tmp_path_factory.mktemp("workspace"))
    with Memory.open(workspace / "source", embedder=HashEmbedder()) as source:
        build(source, workspace)
        seen = []
        counts = source.export_jsonl(workspace / "all.jsonl",
                                     progress=lambda d, t: seen.append((d, t)))
        expected = observe(source)
    assert counts["notes"] == 1005 and counts["snapshots"] == 3
    assert seen[-1][0] == seen[-1][1]
    # The comparison is not vacuous: anchors of every kind of history are there.
    # 25 notes anchored with about=, 14 by a path in their text, 7 of those edited away
    assert len(expected["anchors"]) == 25 + 14 - 7
    stale = {i: {(r["reason"], r["target"]) for r in rs} for i, rs in expected["stale"].items()}
    assert stale[161] == {("content_changed", "src/loader.py")}
    assert stale[201] == {("rows_changed", "data/orders.csv")}
    assert not set(VERIFIED) & set(stale) and 81 not in stale
    assert len(stale) == 13 - 2 - 1  # on the changed files, less verified and revoked (#681)
    assert [e["type"] for e in expected["history"][41]] == ["created", "verified"]
    assert any(c["change"] == "became_stale" for c in expected["diffs"][1]["changes"])
    return workspace, expected


def test_round_trip_is_lossless_and_reimport_duplicates_nothing(big_export):
    workspace, expected = big_export
    path = workspace / "all.jsonl"
    with Memory.open(workspace / "copy", embedder=HashEmbedder()) as copy:
        summary = copy.import_jsonl(path)
        assert summary == {"restored": 1005, "snapshots": 3, "embedded": 0}
        assert observe(copy) == expected
        for policy in ("skip", "replace", "keep-both"):  # keep-both: the same notes, no copy
            copy.import_jsonl(path, on_conflict=policy)
            assert observe(copy) == expected
        # Kept copies (merged, with new ids and journal positions) carry the same anchors
        # and stale reasons as their originals. A note is copied when it differs from this
        # store's: here every one is made to.
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(exchange, "as_here", id)
            copy.import_jsonl(path, on_conflict="keep-both")
        copies = copy.notes(status=("active", "revoked", "superseded"), limit=10_000,
                            order="oldest").notes[1005:]
        assert len(copies) == 1005
        assert {n.id - 1005: [a.to_dict() for a in n.anchors]
                for n in copies if n.anchors} == expected["anchors"]
        assert {n.id - 1005: [r.to_dict() for r in n.stale]
                for n in copies if n.stale and n.status == "active"} == expected["stale"]
        # ... and supersede links that name the copies, not the originals.
        originals = {n["id"]: n for n in expected["notes"]}
        links = [(n.id, n.supersedes, [str(r) for r in n.stale if r.reason == "superseded"])
                 for n in copies if n.supersedes or n.status == "superseded"]
        assert len(links) == 10
        for note_id, supersedes, reasons in links:
            original = originals[note_id - 1005]
            if original["supersedes"]:
                assert supersedes == original["supersedes"] + 1005
            else:
                by = int(original["stale"][0]["target"].lstrip("#"))
                assert reasons == [f"superseded #{by + 1005}"]
        total = copy.notes(status=("active", "revoked", "superseded"), limit=1).total
        copy.import_jsonl(path, on_conflict="keep-both")
        assert copy.notes(status=("active", "revoked", "superseded"), limit=1).total == total


def test_merge_policies(tmp_path):
    with Memory.open(tmp_path / "a", embedder=HashEmbedder()) as a:
        shared = a.remember("amount is in dollars", tags="orders")
        a.export_jsonl(tmp_path / "v1.jsonl")
        a.edit(shared.id, text="amount is in cents")
        a.remember("only in a")
        a.snapshot("from-a")
        a.export_jsonl(tmp_path / "v2.jsonl")
    with Memory.open(tmp_path / "b", embedder=HashEmbedder()) as b:
        b.remember("b's own note")
        assert b.import_jsonl(tmp_path / "v1.jsonl")["added"] == 1
        assert b.import_jsonl(tmp_path / "v2.jsonl", on_conflict="skip") == {
            "added": 1, "skipped": 1, "differ": 1, "replaced": 0, "unchanged": 0,
            "snapshots": 1, "snapshots_skipped": 0, "embedded": 0}  # skipped in another version
        assert b.recall("amount")[0].note.text == "amount is in dollars"
        assert b.import_jsonl(tmp_path / "v2.jsonl", on_conflict="replace")["replaced"] == 1
        assert b.recall("amount")[0].note.text == "amount is in cents"
        # The history says what the import changed, as an edit's does (it said "imported").
        edited = [e for e in b.history(b.recall("amount")[0].note.id) if e.type == "edited"]
        assert edited[-1].data == {"changed": ["text", "imported"]}
        assert b.import_jsonl(tmp_path / "v2.jsonl", on_conflict="replace")["unchanged"] == 2
        # The same notes as the file's: nothing to keep both of (a copy each, before).
        summary = b.import_jsonl(tmp_path / "v2.jsonl", on_conflict="keep-both")
        assert (summary["added"], summary["unchanged"]) == (0, 2)
        mine = next(n for n in b.notes().notes if n.text == "amount is in cents")
        b.edit(mine.id, text="amount is in euro cents")
        summary = b.import_jsonl(tmp_path / "v2.jsonl", on_conflict="keep-both")
        assert (summary["added"], summary["unchanged"]) == (1, 1)
        assert b.import_jsonl(tmp_path / "v2.jsonl", on_conflict="keep-both")["added"] == 0
        texts = sorted(n.text for n in b.notes(limit=100).notes)
        assert texts == ["amount is in cents", "amount is in euro cents", "b's own note",
                         "only in a"]
        assert [s.name for s in b.snapshots()] == ["from-a"]


def test_importing_a_file_twice_keeping_both_copies_nothing_twice(tmp_path):
    """The first import added the file's notes; the second copied every one of them, as
    if they were this store's own notes in another version."""
    with Memory.open(tmp_path / "a", embedder=HashEmbedder()) as a:
        for text in ("orders.amount is in cents", "created_at is UTC"):
            a.remember(text)
        a.export_jsonl(tmp_path / "a.jsonl")
    with Memory.open(tmp_path / "b", embedder=HashEmbedder()) as b:
        b.remember("b's own note")
        assert b.import_jsonl(tmp_path / "a.jsonl", on_conflict="keep-both")["added"] == 2
        again = b.import_jsonl(tmp_path / "a.jsonl", on_conflict="keep-both")
        assert (again["added"], again["unchanged"]) == (0, 2)
        assert b.notes().total == 3


def test_a_later_import_brings_answers_and_edits_but_never_an_erased_text(tmp_path):
    """Replace brings a question's answer (confirmed, refuted) as well as an edit; a note
    purged there is skipped (an import neither erases this store's text nor makes it an
    empty note); keep-both brings a newer file's edit to the copy it made before."""
    with Memory.open(tmp_path / "a", embedder=HashEmbedder()) as a:
        window = a.remember("is the churn window 30 days?", kind="question")
        repeats = a.remember("do refunds repeat order ids?", kind="question")
        secret = a.remember("the staging password is hunter2")
        amount = a.remember("amount is in dollars")
        a.export_jsonl(tmp_path / "v1.jsonl")
        a.confirm(window.id, "checked the config")
        a.refute(repeats.id, "they never do")
        a.purge(secret.id)
        a.edit(amount.id, text="amount is in cents")
        a.export_jsonl(tmp_path / "v2.jsonl")
        a.edit(amount.id, text="amount is in cents since 2021")
        a.export_jsonl(tmp_path / "v3.jsonl")
    with Memory.open(tmp_path / "b", embedder=HashEmbedder()) as b:
        b.remember("b's own note")
        assert b.import_jsonl(tmp_path / "v1.jsonl")["added"] == 4
        summary = b.import_jsonl(tmp_path / "v2.jsonl", on_conflict="replace")
        assert (summary["replaced"], summary["skipped"], summary["unchanged"]) == (3, 1, 0)
        notes = {n.text: n for n in b.notes(status=("active", "refuted"), limit=10).notes}
        assert notes["is the churn window 30 days?"].resolution == "confirmed"
        assert notes["do refunds repeat order ids?"].status == "refuted"
        assert notes["the staging password is hunter2"].status == "active"
        assert "amount is in cents" in notes
        assert b.import_jsonl(tmp_path / "v2.jsonl", on_conflict="replace")["unchanged"] == 3
    with Memory.open(tmp_path / "c", embedder=HashEmbedder()) as c:
        c.import_jsonl(tmp_path / "v1.jsonl")
        summary = c.import_jsonl(tmp_path / "v2.jsonl", on_conflict="keep-both")
        assert (summary["added"], summary["skipped"]) == (3, 1)  # no copy of a purged note
        summary = c.import_jsonl(tmp_path / "v3.jsonl", on_conflict="keep-both")
        assert (summary["added"], summary["replaced"]) == (0, 1)
        texts = sorted(n.text for n in c.notes(limit=10).notes)
        assert "amount is in cents since 2021" in texts and "amount is in cents" not in texts


def test_an_export_holding_a_purge_merges_into_a_store_with_notes_of_its_own(tmp_path):
    with Memory.open(tmp_path / "a", embedder=HashEmbedder()) as a:
        a.remember("alpha: exports land at 02:00")
        a.purge(a.remember("beta: the vault code is 0451").id)
        a.export_jsonl(tmp_path / "a.jsonl")
    with Memory.open(tmp_path / "b", embedder=HashEmbedder()) as b:
        b.remember("gamma: b's own note")
        assert b.import_jsonl(tmp_path / "a.jsonl")["added"] == 1  # the purged one is no note
        assert [h.note.text for h in b.recall("alpha", mode="lexical")] == [
            "alpha: exports land at 02:00"]
        assert b.status()["vectors"] == 2 and b.recall("0451", mode="lexical") == []


def test_replace_then_new_notes_of_the_same_file_import_together(tmp_path):
    """A colleague edited a note both stores have, then wrote a new one: the replace
    writes through the journal while the new note waits to be written, and both once
    took the same journal position ("duplicate key"; nothing imported)."""
    with Memory.open(tmp_path / "a", embedder=HashEmbedder()) as a:
        a.remember("amount is in dollars")
        a.export_jsonl(tmp_path / "v1.jsonl")
        a.edit(1, text="amount is in cents")
        a.remember("refunds are negative amounts")
        a.export_jsonl(tmp_path / "v2.jsonl")
    with Memory.open(tmp_path / "b", embedder=HashEmbedder()) as b:
        b.remember("b's own note")
        b.import_jsonl(tmp_path / "v1.jsonl")
        summary = b.import_jsonl(tmp_path / "v2.jsonl", on_conflict="replace")
        assert (summary["added"], summary["replaced"]) == (1, 1)
        assert sorted(n.text for n in b.notes().notes) == [
            "amount is in cents", "b's own note", "refunds are negative amounts"]
        assert [e.type for e in b.history(2)] == ["created", "edited"]


def test_merged_snapshots_divide_the_files_events_as_they_did(tmp_path):
    """A snapshot is a journal position: merged among this store's notes, the file's
    events keep their order, so a note edited after the snapshot is not edited in it,
    and a snapshot sealed before every note the merge takes holds none of them."""
    with Memory.open(tmp_path / "a", embedder=HashEmbedder()) as a:
        a.remember("orders amount in dollars")
        a.export_jsonl(tmp_path / "first.jsonl")
        a.snapshot("start")
        a.remember("refunds are negative")
        a.snapshot("before-fix")
        a.edit(1, text="orders amount in cents")
        a.remember("refund rows repeat the order id")
        a.snapshot("after-fix")
        a.export_jsonl(tmp_path / "all.jsonl")
    with Memory.open(tmp_path / "b", embedder=HashEmbedder()) as b:
        b.remember("b's own note")
        b.import_jsonl(tmp_path / "first.jsonl")  # b has the first note; skip keeps it
        assert b.import_jsonl(tmp_path / "all.jsonl", on_conflict="skip")["snapshots"] == 3
        diff = b.snapshot_diff("start", "before-fix")
        assert [(c.change, c.note.text) for c in diff.changes] == [
            ("added", "refunds are negative")]
        diff = b.snapshot_diff("before-fix", "after-fix")
        assert [(c.change, c.note.text) for c in diff.changes] == [
            ("added", "refund rows repeat the order id")]
    with Memory.open(tmp_path / "c", embedder=HashEmbedder()) as c:
        c.remember("c's own note")
        c.import_jsonl(tmp_path / "all.jsonl")
        diff = c.snapshot_diff("before-fix", "after-fix")
        assert sorted((ch.change, ch.detail) for ch in diff.changes) == [
            ("added", ""), ("edited", "v1 -> v2")]
        hits = c.recall("orders amount", as_of="before-fix")
        assert hits[0].note.text == "orders amount in dollars"


def test_a_merged_snapshot_keeps_the_stale_flags_of_notes_this_store_had(tmp_path):
    """The flags a snapshot sealed are mapped to this store's ids for every note it names,
    the ones it already had too; a team store's, kept per host, merge as well."""
    data = tmp_path / "data.csv"
    data.write_text("a\n1\n")
    with Memory.open(tmp_path / "a", embedder=HashEmbedder()) as a:
        a.remember("data.csv has one row", about=[str(data)])
        a.export_jsonl(tmp_path / "v1.jsonl")
        data.write_text("a\n1\n2\n")
        a.snapshot("stale-now")
        a.export_jsonl(tmp_path / "v2.jsonl")
    lines = (tmp_path / "v2.jsonl").read_text().splitlines()
    for at, line in enumerate(lines):  # as a team store seals them: by host
        record = json.loads(line)
        if record.get("table") == "snapshots":
            record["row"]["stale"] = json.dumps({"@elsewhere": json.loads(record["row"]["stale"])})
            record["row"]["name"] = "team-seal"
            lines[at] = json.dumps(record)
    (tmp_path / "team.jsonl").write_text("\n".join(lines) + "\n")
    with Memory.open(tmp_path / "b", embedder=HashEmbedder()) as b:
        b.remember("b's own note")
        b.import_jsonl(tmp_path / "v1.jsonl")
        b.import_jsonl(tmp_path / "v2.jsonl")
        hits = b.recall("data.csv one row", as_of="stale-now", mode="lexical")
        assert [(h.note.id, [r.reason for r in h.note.stale]) for h in hits] == [
            (2, ["rows_changed"])]
        assert b.import_jsonl(tmp_path / "team.jsonl")["snapshots"] == 1
        b.export_jsonl(tmp_path / "b.jsonl")
    records = map(json.loads, (tmp_path / "b.jsonl").read_text().splitlines())
    sealed = {r["row"]["name"]: json.loads(r["row"]["stale"]) for r in records
              if r.get("table") == "snapshots"}
    assert {host: list(flags) for host, flags in sealed["team-seal"].items()} == {
        "@elsewhere": ["2"]}  # by this store's id


def test_a_note_shared_without_its_replacement_says_it_was_superseded_elsewhere(tmp_path):
    with Memory.open(tmp_path / "a", embedder=HashEmbedder()) as a:
        a.remember("orders.amount is in cents before 2021")
        a.supersede(1, "orders.amount is in cents before 2022")
    with Memory.open(tmp_path / "b", embedder=HashEmbedder()) as b:
        b.remember("refunds are negative amounts")
    with Memory.open(tmp_path / "a", embedder=HashEmbedder()) as a:
        a.share([1], tmp_path / "b", embedder=HashEmbedder())
    with Memory.open(tmp_path / "b", embedder=HashEmbedder()) as b:
        note = b.get(2)
        assert note.status == "superseded"
        assert [str(r) for r in note.stale] == ["superseded (by a note not in this store)"]
        hits = b.recall("orders.amount cents before 2021", min_score=0)
        assert "Previously believed (#2, superseded (by a note not in this store)): " in str(hits)


def test_notes_shared_into_a_new_store_of_the_same_model_are_recalled(tmp_path):
    """Found by review: a merge brings the file's vectors but never said whose model they
    are, so a store made by the share had none it would use: recall found nothing, not
    even by keywords, and after a reopen too."""
    with Memory.open(tmp_path / "a", embedder=HashEmbedder()) as a:
        a.remember("orders.amount is in cents before 2021")
        assert a.share([1], tmp_path / "b", embedder=HashEmbedder())["added"] == 1
    for _ in range(2):  # and once reopened
        with Memory.open(tmp_path / "b", embedder=HashEmbedder()) as b:
            assert [h.note.text for h in b.recall("amount in cents")] == [
                "orders.amount is in cents before 2021"]
            assert (b.status()["model"], b.status()["vectors"]) == ("hash:64", 1)


def test_sharing_with_this_store_or_a_note_it_has_not_is_refused_as_a_share(tmp_path):
    """Found by a walkthrough: a share into the store itself said "0 added, 1 already
    there", and a note id it has not said "Nothing was exported."."""
    from nbmemory.errors import NotFound

    with Memory.open(tmp_path / "a", embedder=HashEmbedder()) as a:
        a.remember("orders.amount is in cents before 2021")
        with pytest.raises(InvalidInput, match=r"^Cannot share with .*/a: it is this store\. "):
            a.share([1], tmp_path / "a")
        with pytest.raises(NotFound, match=r"^No note #9\b.* Nothing was shared\.$"):
            a.share([9], tmp_path / "b", embedder=HashEmbedder())
        # A purged note arrived as a note with no text, and was said as "0 added".
        a.purge(a.remember("a secret pasted by mistake").id)
        with pytest.raises(InvalidInput, match=r"^Note #2 was purged: its text is erased, so "
                                               r"there is nothing to share\. Nothing was "
                                               r"shared\.$"):
            a.share([1, 2], tmp_path / "b", embedder=HashEmbedder())
    assert not (tmp_path / "b").exists()
    from nbmemory.wording import shared_text  # an id given twice is one note shared
    assert shared_text([1, 1], {"added": 1}, "team") == "Shared 1 note with team: 1 added."


@pytest.mark.parametrize("first", ["newer", "older"])
def test_notes_shared_apart_are_linked_once_both_are_there(tmp_path, first):
    """The newer note shared first, then the one it replaced: the team store kept both
    active, the older 'superseded (by a note not in this store)', and let it be
    reinstated beside its replacement. The other way round, the older one stayed active."""
    with Memory.open(tmp_path / "a", embedder=HashEmbedder()) as a:
        older = a.remember("the lock is taken in acquire_lock")
        if first == "older":
            a.share([older.id], tmp_path / "team", embedder=HashEmbedder())
        newer = a.supersede(older.id, "the lock is taken in acquire_lock, before the watcher")
        for note in ([newer, older] if first == "newer" else [newer]):
            a.share([note.id], tmp_path / "team", embedder=HashEmbedder())
    with Memory.open(tmp_path / "team", embedder=HashEmbedder()) as team:
        ids = {n.text: n.id for n in team.notes(status=("active", "superseded")).notes}
        there_older, there_newer = ids[older.text], ids[newer.text]
        assert team.get(there_newer).supersedes == there_older
        assert team.get(there_older).status == "superseded"
        assert [str(r) for r in team.get(there_older).stale] == [f"superseded #{there_newer}"]
        with pytest.raises(Conflict, match=f"superseded by #{there_newer}, which is active"):
            team.reinstate(there_older)


def test_sharing_with_a_mistyped_directory_makes_no_store(tmp_path):
    with Memory.open(tmp_path / "a", embedder=HashEmbedder()) as a:
        a.remember("orders.amount is in cents")
        with pytest.raises(InvalidInput, match=r"^Cannot share with .*/nonexist/x: .*/nonexist "
                                               r"does not exist\.$"):
            a.share([1], tmp_path / "nonexist" / "x", embedder=HashEmbedder())
    assert not (tmp_path / "nonexist").exists()


def test_a_snapshot_whose_name_is_taken_is_reported_not_renamed(tmp_path):
    with Memory.open(tmp_path / "a", embedder=HashEmbedder()) as a:
        a.remember("a note")
        a.snapshot("weekly")
        a.export_jsonl(tmp_path / "a.jsonl")
    with Memory.open(tmp_path / "b", embedder=HashEmbedder()) as b:
        b.remember("b's own note")
        b.snapshot("weekly")
        summary = b.import_jsonl(tmp_path / "a.jsonl")
        assert (summary["snapshots"], summary["snapshots_skipped"]) == (0, 1)
    with Memory.open(tmp_path / "c", embedder=HashEmbedder()) as c:
        c.remember("c's own note")
        assert c.import_jsonl(tmp_path / "a.jsonl")["snapshots"] == 1
        again = c.import_jsonl(tmp_path / "a.jsonl")  # the same snapshot: no news
        assert (again["snapshots"], again["snapshots_skipped"]) == (0, 0)


def test_merged_supersede_links_name_this_stores_ids(tmp_path):
    """Ids inside the journal (superseded_by's "by", created's "supersedes") are the
    source store's; merged into a store with notes of its own they must be remapped,
    or the user is told a note was superseded by an unrelated one."""
    with Memory.open(tmp_path / "a", embedder=HashEmbedder()) as a:
        a.remember("the export runs at 02:00")
        a.supersede(1, "the export runs at 03:00")
        a.export_jsonl(tmp_path / "x.jsonl")
    with Memory.open(tmp_path / "b", embedder=HashEmbedder()) as b:
        for i in range(5):
            b.remember(f"b's own note {i}")
        assert b.import_jsonl(tmp_path / "x.jsonl")["added"] == 2
        old, new = b.get(6), b.get(7)
        assert (old.text, old.status, new.text, new.supersedes) == (
            "the export runs at 02:00", "superseded", "the export runs at 03:00", 6)
        assert [(r.reason, r.target) for r in old.stale] == [("superseded", "#7")]
        assert [(e.type, e.data) for e in b.history(6)] == [("created", {}),
                                                          ("superseded_by", {"by": 7})]
        assert [(e.type, e.data) for e in b.history(7)] == [("created", {"supersedes": 6})]
        assert [n.id for n in b.chain(6)] == [6, 7]


@pytest.mark.parametrize("policy", ["skip", "replace"])
def test_a_supersede_made_after_an_earlier_import_is_merged(tmp_path, policy):
    with Memory.open(tmp_path / "a", embedder=HashEmbedder()) as a:
        a.remember("the export runs at 02:00")
        a.export_jsonl(tmp_path / "v1.jsonl")
        a.supersede(1, "the export runs at 03:00")
        a.export_jsonl(tmp_path / "v2.jsonl")
    with Memory.open(tmp_path / "b", embedder=HashEmbedder()) as b:
        b.remember("b's own note")
        b.import_jsonl(tmp_path / "v1.jsonl")
        summary = b.import_jsonl(tmp_path / "v2.jsonl", on_conflict=policy)
        assert (summary["added"], summary["skipped"], summary["replaced"]) == (
            (1, 1, 0) if policy == "skip" else (1, 0, 1))
        assert b.get(3).supersedes == 2 and [n.id for n in b.chain(3)] == [2, 3]
        assert [(e.type, e.data) for e in b.history(3)] == [("created", {"supersedes": 2})]
        old = b.get(2)
        if policy == "skip":  # the store keeps its own version of the notes it has
            assert old.status == "active" and [e.type for e in b.history(2)] == ["created"]
        else:  # the file's: superseded, as a new event in this store's journal
            assert old.status == "superseded"
            assert [(e.type, e.data) for e in b.history(2)] == [
                ("created", {}), ("superseded_by", {"by": 3, "imported": True})]
            assert [h.note.id for h in b.recall("export runs")] == [3]
        events = b.status()["journal_position"]
        again = b.import_jsonl(tmp_path / "v2.jsonl", on_conflict=policy)
        assert again["added"] == 0 and again["replaced"] == 0
        assert b.status()["journal_position"] == events


ALL_STATUSES = ("active", "revoked", "superseded", "refuted", "purged")


def unchanged_state(memory):
    """What a refused import must leave exactly as it was: notes, snapshots, the journal,
    and the row count of every table."""
    store = memory._backend.engine.store
    tables = [r[0] for r in store.con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' "
        "AND table_name <> 'recall_log' ORDER BY 1").fetchall()]
    notes = memory.notes(status=ALL_STATUSES, limit=1000, order="oldest").notes
    return {"notes": [n.to_dict() for n in notes],
            "history": {n.id: [e.to_dict() for e in memory.history(n.id)] for n in notes},
            "snapshots": [s.to_dict() for s in memory.snapshots()],
            "journal_position": memory.status()["journal_position"],
            "rows": {t: store.con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                     for t in tables}}


def damage_a_row(lines):
    """A well-framed export whose 11th note breaks a constraint: the first 10 go in
    before the insert fails, so only a rollback leaves the store as it was."""
    out = []
    for line in lines:
        record = json.loads(line)
        if record.get("table") == "notes" and record["row"]["id"] == 11:
            record["row"]["uid"] = None
        out.append(json.dumps(record) + "\n")
    return "".join(out)


def edit_note(field, value, note=2):
    """The export with one field of one note changed, as by hand."""
    def edited(lines):
        out = []
        for line in lines:
            record = json.loads(line)
            if record.get("table") == "notes" and record["row"]["id"] == note:
                record["row"][field] = value
            out.append(json.dumps(record) + "\n")
        return "".join(out)
    return edited


REFUSED = "The file is damaged or was edited by hand; nothing was imported."


@pytest.mark.parametrize("into", ["existing store", "empty store"])
@pytest.mark.parametrize("content, message", [
    (edit_note("id", -5), "a note's id is -5, not a note id from 1 to 16,777,216. " + REFUSED),
    (edit_note("id", 2**62), "a note's id is 4611686018427387904, not a note id from 1 to "),
    (edit_note("id", True), "a note's id is True, not a note id"),
    (edit_note("priority", "urgent"), "note 2 has priority 'urgent', none of high, medium, low"),
    (edit_note("kind", "wat"), "note 2 has kind 'wat', none of finding, gotcha, decision"),
    (edit_note("tags", ["has space"]), "note 2: Tag 'has space' contains a space"),
    (edit_note("text", " "), "note 2 has no text. " + REFUSED),
    (edit_note("supersedes", 999), "note 2 replaces note 999, which the file does not hold"),
    (edit_note("version", 0), "note 2 has version 0, not a whole number from 1"),
    (None, "is truncated"),
    ('{"some": "json"}\n', "is not an nbmemory export"),
    ("id,text\n1,hello\n", "line 1 is not JSON"),
    ("", "is empty"),
    (damage_a_row, "has a row this store cannot take .*NOT NULL.*Nothing was imported"),
    (lambda lines: "".join(lines).replace('"status": "active"', '"status": "weird"', 1),
     "line [0-9]+: a note's status 'weird' is none of active, revoked, superseded, refuted, "
     "purged. Nothing was imported."),
    (lambda lines: "".join(lines[:-1]) + '{"type": "end"}\n', "line [0-9]+ is not an export record"),
    (lambda lines: lines[0] + '{"type": "row", "row": {}}\n' + "".join(lines[1:]),
     "line 2 is not an export record"),
    (lambda lines: re.sub(r'"format_version": (\d+)', r'"format_version": "\1"', lines[0])
     + "".join(lines[1:]), "is not an nbmemory export"),
    # A newer build says so by its format: every build so far is version 0.1.0.
    (lambda lines: re.sub(r'"format_version": (\d+)', '"format_version": 9', lines[0])
     + "".join(lines[1:]), r"was written by a newer nbmemory \(export format 9, this one reads "
                           r"up to 2\): upgrade to import it.$"),
    # A newer store schema: fields this build has no column for would be dropped.
    (lambda lines: re.sub(r'"schema": (\d+)', '"schema": 999', lines[0]) + "".join(lines[1:]),
     r"was written by a newer nbmemory \(store schema 999, this one has [0-9]+\), whose "
     r"fields this one would drop: upgrade to import it.$"),
])
def test_bad_files_are_refused_and_the_store_is_unchanged(tmp_path, content, message, into):
    with Memory.open(tmp_path / "src", embedder=HashEmbedder()) as src:
        for i in range(20):
            src.remember(f"note {i}")
        src.snapshot("in-the-file")
        src.export_jsonl(tmp_path / "good.jsonl")
    lines = (tmp_path / "good.jsonl").read_text().splitlines(keepends=True)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(lines[: len(lines) // 2]) if content is None
                   else content(lines) if callable(content) else content)
    with Memory.open(tmp_path / "dst", embedder=HashEmbedder()) as dst:
        if into == "existing store":
            dst.remember("existing")
            dst.remember("forgotten")
            dst.forget(2)
            dst.snapshot("before", message="the store as it was")
        before = unchanged_state(dst)
        assert before["journal_position"] == (4 if into == "existing store" else 0)
        with pytest.raises(InvalidInput, match=message):
            dst.import_jsonl(bad)
        assert unchanged_state(dst) == before
        with pytest.raises(InvalidInput, match="Unknown conflict policy 'merge'"):
            dst.import_jsonl(tmp_path / "good.jsonl", on_conflict="merge")
        with pytest.raises(InvalidInput, match="No file"):
            dst.import_jsonl(tmp_path / "missing.jsonl")
        assert unchanged_state(dst) == before
        # The store still takes a good file afterwards.
        assert dst.import_jsonl(tmp_path / "good.jsonl").get("embedded") == 0
        assert dst.notes(limit=1).total == 20 + (1 if into == "existing store" else 0)


@pytest.mark.parametrize("own_notes", [1, 29])
def test_verify_wins_after_merging_into_a_store_with_its_own_journal(tmp_path, own_notes):
    """Anchor rows follow the journal positions of the note they belong to: the source
    note's anchor was taken at position 31, the merged note's journal starts much lower,
    so a later verify must still be its current anchor (1 own note) and must not collide
    with the imported row's position (29 own notes: verify lands on position 31)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "orders.csv").write_text(ORDERS)
    with Memory.open(ws / "src", embedder=HashEmbedder()) as src:
        for i in range(30):  # journal positions with no note: not imported by a merge
            src.snapshot(f"s{i}")
        src.remember("orders.csv amounts are in cents", about=["orders.csv"])
        src.export_jsonl(tmp_path / "x.jsonl")
    with Memory.open(ws / "dst", embedder=HashEmbedder()) as dst:
        for i in range(own_notes):
            dst.remember(f"the destination's own note {i}")
        assert dst.import_jsonl(tmp_path / "x.jsonl")["added"] == 1
        note_id = own_notes + 1
        assert dst.get(note_id).text == "orders.csv amounts are in cents"
        assert dst.get(note_id).stale == ()
        save_later(ws / "orders.csv", ORDERS + "3,990\n")
        assert [(r.reason, r.target) for r in dst.get(note_id).stale] == [
            ("rows_changed", "orders.csv")]
        assert dst.verify(note_id).stale == ()
        note = dst.get(note_id)
        assert note.stale == ()
        new_sha = hashlib.sha256((ORDERS + "3,990\n").encode()).hexdigest()
        assert [a.fingerprint["sha256"] for a in note.anchors] == [new_sha]
        store = dst._backend.engine.store
        anchor_seqs = {r[0] for r in store.con.execute(
            "SELECT seq FROM anchors WHERE note_id = ?", [note_id]).fetchall()}
        event_seqs = {e.seq for e in dst.history(note_id)}
        assert anchor_seqs <= event_seqs and len(anchor_seqs) == 2



def test_replace_takes_the_fingerprints_the_file_took_later(tmp_path):
    """The source verified a note after the file changed; replacing brings that check over."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "orders.csv").write_text(ORDERS)
    with Memory.open(ws / "src", embedder=HashEmbedder()) as src:
        note_id = src.remember("orders.csv amounts are in cents", about=["orders.csv"]).id
        src.export_jsonl(tmp_path / "first.jsonl")
    with Memory.open(ws / "dst", embedder=HashEmbedder()) as dst:
        assert dst.import_jsonl(tmp_path / "first.jsonl")["restored"] == 1
    save_later(ws / "orders.csv", ORDERS + "3,990\n")
    with Memory.open(ws / "src", embedder=HashEmbedder()) as src:
        assert src.verify(note_id).stale == ()
        src.export_jsonl(tmp_path / "second.jsonl")
    with Memory.open(ws / "dst", embedder=HashEmbedder()) as dst:
        assert [r.reason for r in dst.get(note_id).stale] == ["rows_changed"]
        assert dst.import_jsonl(tmp_path / "second.jsonl", on_conflict="skip")["skipped"] == 1
        assert [r.reason for r in dst.get(note_id).stale] == ["rows_changed"]
        summary = dst.import_jsonl(tmp_path / "second.jsonl", on_conflict="replace")
        assert summary["replaced"] == 1
        note = dst.get(note_id)
        assert note.stale == () and note.text == "orders.csv amounts are in cents"
        new_sha = hashlib.sha256((ORDERS + "3,990\n").encode()).hexdigest()
        assert [(a.target, a.fingerprint["sha256"]) for a in note.anchors] == [
            ("orders.csv", new_sha)]
        assert [e.type for e in dst.history(note_id)][-1] == "verified"
        again = dst.import_jsonl(tmp_path / "second.jsonl", on_conflict="replace")
        assert (again["replaced"], again["unchanged"]) == (0, 1)

def test_import_into_another_model_embeds_the_texts(tmp_path):
    with Memory.open(tmp_path / "src", embedder=HashEmbedder(64)) as src:
        src.remember("orders.amount is in cents")
        src.export_jsonl(tmp_path / "x.jsonl")
    with Memory.open(tmp_path / "dst", embedder=HashEmbedder(32, name="other")) as dst:
        assert dst.import_jsonl(tmp_path / "x.jsonl")["embedded"] == 1
        assert dst.recall("cents")[0].note.id == 1
        assert dst.status()["model"] == "other:32"


def test_a_restore_from_a_store_that_switched_models_is_recalled_with_this_ones(tmp_path):
    """The file of a store that was re-embedded with another model brings vectors of both.
    Restored where the first model is configured, nothing was left to embed, so the store
    never learnt which vectors it uses: no vector index, recall found nothing (keywords
    included), and reindex said the store had no notes."""
    with Memory.open(tmp_path / "src", embedder=HashEmbedder(64)) as src:
        src.remember("orders.amount is in cents before 2021")
        src.remember("the ledger closes on the 3rd working day")
    with Memory.open(tmp_path / "src", embedder=HashEmbedder(32, name="other")) as src:
        src.reembed()
        src.export_jsonl(tmp_path / "x.jsonl")
    with Memory.open(tmp_path / "dst", embedder=HashEmbedder(64)) as dst:
        summary = dst.import_jsonl(tmp_path / "x.jsonl")
        assert (summary["restored"], summary["embedded"]) == (2, 0)
        status = dst.status()
        assert (status["model"], status["vectors"], status["mismatch"]) == ("hash:64", 2, False)
        assert dst.recall("cents")[0].note.text == "orders.amount is in cents before 2021"
        assert dst.recall("ledger", mode="dense")[0].note.id == 2
        assert dst.reindex()["action"] == "rebuilt"


def test_recalls_and_writes_go_on_while_an_import_embeds(tmp_path):
    """An import held the engine's lock while it embedded the texts it brought (minutes for
    a large file): every recall and write of every kernel waited. It embeds them first now,
    outside the lock, and commits the vectors with the notes."""
    with Memory.open(tmp_path / "src", embedder=HashEmbedder(64, name="other")) as src:
        src.remember_many([{"text": f"finding {i} about module m{i}"} for i in range(40)])
        src.export_jsonl(tmp_path / "all.jsonl")
    embedding, go_on = threading.Event(), threading.Event()
    Held = holding_chunks(HashEmbedder, embedding, go_on)
    with Memory.open(tmp_path / "dst", embedder=Held()) as mem:
        mem.remember("the nightly export lands at 02:00")
        summary, answers = {}, {}
        importing = threading.Thread(
            target=lambda: summary.update(mem.import_jsonl(tmp_path / "all.jsonl")))
        importing.start()
        assert embedding.wait(30)

        def meanwhile():
            answers["recalled"] = [h.note.text for h in mem.recall("nightly export")]
            answers["remembered"] = mem.remember("written while the import embeds").id

        assert ran_while_held(meanwhile, go_on, importing), \
            "the recall and the write waited for the import to embed"
        assert answers == {"recalled": ["the nightly export lands at 02:00"], "remembered": 2}
        assert (summary["added"], summary["embedded"]) == (40, 40)
        assert mem.recall("finding 7 about module m7")[0].note.text == "finding 7 about module m7"
        assert mem.status()["vectors"] == 42


def test_markdown_export_is_grouped_and_deterministic(memory, tmp_path):
    memory.remember("orders.amount is in cents", tags="orders,units", priority="high")
    memory.remember("acquire_lock must run first", kind="gotcha")
    memory.remember("revoked one", tags="orders")
    memory.forget(3)
    first = memory.export_markdown(tmp_path / "md1")
    second = memory.export_markdown(tmp_path / "md2")
    names = [p.rsplit("/", 1)[1] for p in first]
    assert names == ["index.md", "orders.md", "units.md", "untagged.md"]
    assert [open(p).read() for p in first] == [open(p).read() for p in second]
    orders = (tmp_path / "md1" / "orders.md").read_text()
    assert "## #1: finding, high priority\n\norders.amount is in cents\n" in orders
    assert "revoked one" not in orders
    assert "- from: not from a notebook" in orders
    by_kind = memory.export_markdown(tmp_path / "md3", by="kind")
    assert sorted(p.rsplit("/", 1)[1] for p in by_kind) == ["finding.md", "gotcha.md", "index.md"]


def test_markdown_export_gives_every_tag_a_page_of_its_own(memory, tmp_path):
    """Tags that make the same file name ("a.b", "a-b") or the index's ("index") lose no note;
    nor one Windows keeps for a device (aux.md would be the device there)."""
    for tag in ("a.b", "a-b", "index", "AUX"):
        memory.remember(f"a note tagged {tag}", tags=tag)
    written = memory.export_markdown(tmp_path / "md")
    names = sorted(p.rsplit("/", 1)[1] for p in written)
    assert names == ["a-b-2.md", "a-b.md", "aux-2.md", "index-2.md", "index.md"]
    pages = {name: (tmp_path / "md" / name).read_text() for name in names}
    for tag in ("a.b", "a-b", "index"):
        assert sum(f"a note tagged {tag}\n" in text for text in pages.values()) == 1, tag
    assert "- [index](index-2.md) (1 note)" in pages["index.md"]


def test_markdown_pages_of_tags_in_other_scripts_keep_their_letters(memory, tmp_path):
    """A tag's page was named by isalnum() alone: बिक्री (its vowel signs are marks) became
    ब-क-र-.md, and an emoji tag a dash whose number depended on the other tags."""
    for tag in ("बिक्री", "🎉", "café"):
        memory.remember(f"a note tagged {tag}", tags=tag)
    written = memory.export_markdown(tmp_path / "md")
    assert sorted(p.rsplit("/", 1)[1] for p in written) == [
        "café.md", "index.md", "u1f389.md", "बिक्री.md"]


def test_markdown_pages_of_long_tags_have_names_a_file_system_takes(memory, tmp_path):
    """A tag the store takes (100 characters) made a file name over 255 bytes in CJK or
    emoji, and the whole export stopped at it with 'File name too long'."""
    long_cjk, emoji = "数据" * 50, "🎉" * 50
    for tag in (long_cjk, long_cjk[:-1] + "表", emoji):
        memory.remember(f"a note tagged {tag[:3]}", tags=tag)
    written = memory.export_markdown(tmp_path / "md")
    names = sorted(p.rsplit("/", 1)[1] for p in written if not p.endswith("index.md"))
    assert len(names) == 3 and all(len(n.encode()) <= 203 for n in names)
    assert len({n[:40] for n in names}) == 2  # the two CJK tags: same start, apart by hash
    again = memory.export_markdown(tmp_path / "md")  # the same names, none left behind
    assert sorted(p.name for p in (tmp_path / "md").iterdir()) == sorted(
        [*names, "index.md"]) and len(again) == 4


def test_markdown_export_shows_a_tag_made_of_html_as_text(memory, tmp_path):
    """A renderer that allows raw HTML would run a tag heading <svg/onload=...>."""
    memory.remember("a note with a hostile tag", tags="<svg/onload=alert(3)>")
    memory.export_markdown(tmp_path / "md")
    [page] = [p for p in (tmp_path / "md").glob("*.md") if p.name != "index.md"]
    text = page.read_text()
    assert text.startswith("# &lt;svg/onload=alert(3)&gt;\n")
    assert "- tags: &lt;svg/onload=alert(3)&gt;" in text and "<svg" not in text
    assert "<svg" not in (tmp_path / "md" / "index.md").read_text()


def test_markdown_export_again_removes_its_pages_no_note_has_now(memory, tmp_path):
    """Exporting by kind where an export by tag was: the tag pages would sit beside the new
    index and mislead; a file that is not the export's own stays."""
    memory.remember("amount is in cents", tags="orders")
    memory.export_markdown(tmp_path / "md")
    (tmp_path / "md" / "README.md").write_text("# my own page")
    (tmp_path / "md" / "notes.md").write_text("my own notes")
    # An index that names files the export did not write (edited by hand, or a tag that
    # tried to add a line): only pages as the export names and writes them go.
    with open(tmp_path / "md" / "index.md", "a") as index:
        index.write("- [x](README.md) (1 note)\n- [y](notes.md) (1 note)\n"
                    "- [z](../outside.md) (1 note)\n")
    (tmp_path / "outside.md").write_text("# outside")
    written = memory.export_markdown(tmp_path / "md", by="kind")
    assert sorted(p.name for p in (tmp_path / "md").iterdir()) == [
        "README.md", "finding.md", "index.md", "notes.md"]
    assert len(written) == 2 and (tmp_path / "outside.md").exists()


def test_export_file_is_json_lines_with_header_and_end(memory, tmp_path):
    memory.remember("x")
    memory.export_jsonl(tmp_path / "e.jsonl")
    records = [json.loads(line) for line in (tmp_path / "e.jsonl").read_text().splitlines()]
    assert records[0]["format"] == "nbmemory-export" and records[0]["model"] == "hash:64"
    assert records[-1] == {"type": "end", "counts": {"notes": 1, "note_versions": 1,
                                                      "embeddings": 1, "events": 1,
                                                      "snapshots": 0, "anchors": 0}}


def test_an_export_never_replaces_a_device_or_a_fifo_and_leaves_no_partial_copy(memory, tmp_path):
    import stat

    memory.remember("orders.amount is in cents before 2021")
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(InvalidInput, match="Cannot export to .*pipe.jsonl: it is not a regular file"):
        memory.export_jsonl(fifo)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    with pytest.raises(InvalidInput, match="it is not a regular file"):
        memory.export_jsonl(tmp_path)  # a directory

    seen = []

    def fail(done, total):
        seen.append(oct(os.stat(tmp_path / "all.jsonl.partial").st_mode & 0o777))
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        memory.export_jsonl(tmp_path / "all.jsonl", progress=fail)
    assert seen == ["0o600"]  # while it was written, only its owner could read it
    assert not (tmp_path / "all.jsonl.partial").exists() and not (tmp_path / "all.jsonl").exists()
    memory.export_jsonl(tmp_path / "all.jsonl")
    assert oct(os.stat(tmp_path / "all.jsonl").st_mode & 0o777) == "0o600"


def test_an_export_over_the_stores_own_files_is_refused(memory, tmp_path, monkeypatch):
    """Renamed over memory.duckdb.wal (or the database), an export made DuckDB drop every
    write since: a crash later, the store reopened empty and doctor said all was well. (A
    team store's directory holds this machine's copy and indexes.)"""
    store_dir = memory.location.path
    for i in range(3):
        memory.remember(f"finding {i} about the orders table")
    (tmp_path / "link").symlink_to(store_dir)
    monkeypatch.chdir(store_dir)
    for target in (store_dir / "memory.duckdb.wal", store_dir / "memory.duckdb",
                   "vectors.usearch", tmp_path / "link" / "keywords.index"):
        with pytest.raises(InvalidInput, match=r"^Cannot export to .*: the store keeps its "
                                               r"database and indexes in that directory \(.*\), "
                                               r"and an export there must not take one's place\. "
                                               r"Name it \*\.jsonl, or give a path outside it\.$"):
            memory.export_jsonl(target)
    memory.remember("written after the refused exports")
    assert memory.status()["notes"] == 4
    memory.export_jsonl("backup.jsonl")  # a store kept in a project's folder (--store .)
    memory.export_jsonl(tmp_path / "beside.jsonl")
    assert (store_dir / "backup.jsonl").is_file() and (tmp_path / "beside.jsonl").is_file()


def test_a_vector_of_another_length_is_embedded_again_not_imported(tmp_path):
    """A damaged or hand-edited export with one short vector, or one made by a model of the
    same name with other dimensions, was half imported, then no command could open the
    store (its index could not be built): such vectors are left out and their texts
    embedded again."""
    import base64
    import json

    with Memory.open(tmp_path / "source", embedder=HashEmbedder()) as source:
        source.remember_many([f"vendor v{i} ships on day {i}" for i in range(20)])
        source.export_jsonl(tmp_path / "all.jsonl")
    lines = (tmp_path / "all.jsonl").read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if '"table": "embeddings"' in line)
    record = json.loads(lines[at])
    record["row"]["vector"] = base64.b64encode(
        base64.b64decode(record["row"]["vector"])[:36]).decode()  # 16 numbers, not 64
    lines[at] = json.dumps(record)
    (tmp_path / "short.jsonl").write_text("\n".join(lines) + "\n")
    with Memory.open(tmp_path / "small", embedder=HashEmbedder(dims=32)) as small:
        small.remember("cron c1 runs nightly")
        small.export_jsonl(tmp_path / "dims32.jsonl")
    for name, file, embedded in (("here", "short.jsonl", 1), ("other", "dims32.jsonl", 1)):
        with Memory.open(tmp_path / name, embedder=HashEmbedder()) as mem:
            mem.remember("cron c2 runs at noon")
            assert mem.import_jsonl(tmp_path / file)["embedded"] == embedded
            assert mem.status()["vectors"] == mem.status()["notes"]
        with Memory.open(tmp_path / name, embedder=HashEmbedder()) as mem:  # and it opens
            assert mem.status()["model"] == "hash:64"
            assert mem.recall("cron c1 runs nightly" if name == "other" else "vendor v3",
                              mode="dense", k=1)


def test_a_restore_that_brings_every_vector_needs_no_model(tmp_path):
    """Checking the file's vector lengths loaded the model first: a restore on a machine
    without it failed, where the file brings every vector it needs."""
    from nbmemory.errors import ModelUnavailable

    class NotHere(HashEmbedder):
        loaded = False

        @property
        def dims(self):
            raise ModelUnavailable("the model acme is not on this machine")

        def encode(self, texts):
            raise ModelUnavailable("the model acme is not on this machine")

    with Memory.open(tmp_path / "source", embedder=HashEmbedder(name="acme")) as source:
        source.remember_many([f"vendor v{i} ships on day {i}" for i in range(5)])
        source.export_jsonl(tmp_path / "all.jsonl")
    with Memory.open(tmp_path / "restored", embedder=NotHere(name="acme")) as mem:
        assert mem.import_jsonl(tmp_path / "all.jsonl") == {
            "restored": 5, "snapshots": 0, "embedded": 0}
        assert mem.status()["vectors"] == 5


def test_a_file_saved_with_a_byte_order_mark_imports(memory, tmp_path):
    """Windows editors save UTF-8 with a BOM: it is not part of the first line."""
    memory.remember("exports are gzipped")
    memory.export_jsonl(tmp_path / "e.jsonl")
    (tmp_path / "bom.jsonl").write_bytes(b"\xef\xbb\xbf" + (tmp_path / "e.jsonl").read_bytes())
    with Memory.open(tmp_path / "other", embedder=HashEmbedder()) as other:
        other.import_jsonl(tmp_path / "bom.jsonl")
        assert [n.text for n in other.notes().notes] == ["exports are gzipped"]


def test_an_export_from_before_tags_were_composed_still_imports(memory, tmp_path):
    """Tags were once kept as typed: an é typed as e and an accent, a full-width comma
    inside one tag. Such an export is not damaged."""
    memory.remember("the caf\u00e9 data is monthly", tags=["caf\u00e9", "收入，退款"])
    memory.export_jsonl(tmp_path / "e.jsonl")
    text = (tmp_path / "e.jsonl").read_text(encoding="utf-8")
    assert "caf\\u00e9" in text  # the export is ASCII-escaped
    (tmp_path / "old.jsonl").write_text(text.replace("caf\\u00e9\"", "cafe\\u0301\""),
                                        encoding="utf-8")
    with Memory.open(tmp_path / "other", embedder=HashEmbedder()) as other:
        other.import_jsonl(tmp_path / "old.jsonl")
        assert other.notes().notes[0].tags == ("cafe\u0301", "收入，退款")


def test_a_huge_line_or_binary_file_is_refused_without_reading_it_whole(memory, tmp_path, monkeypatch):
    from nbmemory import export_file

    monkeypatch.setattr(export_file, "MAX_LINE", 1000)
    long_line = tmp_path / "one-line.jsonl"
    long_line.write_text("x" * 5000)  # no newline at all
    with pytest.raises(InvalidInput, match=r"line 1 is longer than 1,000 characters"):
        memory.import_jsonl(long_line)
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(InvalidInput, match="is not UTF-8 text: not an nbmemory export"):
        memory.import_jsonl(binary)
    deep = tmp_path / "deep.jsonl"
    deep.write_text("[" * 200_000 + "\n")
    monkeypatch.setattr(export_file, "MAX_LINE", 1 << 20)
    with pytest.raises(InvalidInput, match="line 1 is not JSON"):
        memory.import_jsonl(deep)
    assert memory.status()["journal_position"] == 0


def test_an_import_resumed_after_a_crash_counts_every_text_it_embedded(tmp_path):
    from nbmemory.embed import HashEmbedder

    with Memory.open(tmp_path / "source", embedder=HashEmbedder(64, name="other")) as source:
        source.remember_many([{"text": f"finding {i} about module m{i % 9}"} for i in range(600)])
        source.export_jsonl(tmp_path / "all.jsonl")
    with Memory.open(tmp_path / "store", embedder=HashEmbedder()) as mem:
        mem.remember("a note that was there before")
        calls = []

        def crash_after_the_first_chunk(done, total):
            calls.append(done)
            if len(calls) == 1:
                raise KeyboardInterrupt  # as if the owner died while embedding

        with pytest.raises(KeyboardInterrupt):
            mem.import_jsonl(tmp_path / "all.jsonl", request_id="import-1",
                             progress=crash_after_the_first_chunk)
        summary = mem.import_jsonl(tmp_path / "all.jsonl", request_id="import-1")
        assert (summary["added"], summary["embedded"]) == (600, 600)
        assert mem.status()["vectors"] == 601


def test_a_file_from_before_half_precision_vectors_imports_them_as_written(memory, tmp_path):
    """Version 1 files hold float32 vectors; they are kept as they are, not re-embedded."""
    note = memory.remember("the loader retries a parquet read three times")
    memory.export_jsonl(tmp_path / "new.jsonl")
    full = HashEmbedder().encode([note.text])[0].astype(np.float32)
    lines = []
    for line in (tmp_path / "new.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["type"] == "header":
            record.update(format_version=1, schema=3)
        elif record["type"] == "row" and record["table"] == "embeddings":
            record["row"]["vector"] = base64.b64encode(full.tobytes()).decode()
        lines.append(json.dumps(record))
    (tmp_path / "old.jsonl").write_text("\n".join(lines) + "\n")
    with Memory.open(tmp_path / "copy", embedder=HashEmbedder()) as copy:
        assert copy.import_jsonl(tmp_path / "old.jsonl") == {"restored": 1, "snapshots": 0, "embedded": 0}
        store = copy._backend.engine.store
        np.testing.assert_array_equal(store.vectors("hash")[1][0], full)
        assert [h.note.text for h in copy.recall("loader retries parquet")] == [note.text]


def test_an_older_file_brings_no_vector_of_a_note_purged_here(tmp_path):
    """A backup taken before a purge, imported again (skipped: the note is here, purged),
    brought the purged text's vector back, and every later export carried it."""
    with Memory.open(tmp_path / "a", embedder=HashEmbedder()) as a:
        a.remember("alpha: exports land at 02:00")
        secret = a.remember("beta: the vault code is 0451")
        a.export_jsonl(tmp_path / "before.jsonl")
        a.purge(secret.id)
        store = a._backend.engine.store
        assert store.con.execute("SELECT count(*) FROM embeddings").fetchone()[0] == 1
        summary = a.import_jsonl(tmp_path / "before.jsonl")
        assert (summary["added"], summary["skipped"]) == (0, 2)
        assert store.con.execute("SELECT count(*) FROM embeddings").fetchone()[0] == 1


def test_a_store_whose_notes_are_all_purged_reindexes_and_restores(tmp_path):
    """With no vector left, rebuilding the vector index crashed, and so did restoring such
    a store's export, after which no command could open the store."""
    with Memory.open(tmp_path / "a", embedder=HashEmbedder()) as a:
        a.purge(a.remember("beta: the vault code is 0451").id)
        assert a.reindex()["vectors"] == 0
        a.export_jsonl(tmp_path / "a.jsonl")
    with Memory.open(tmp_path / "b", embedder=HashEmbedder()) as b:
        b.import_jsonl(tmp_path / "a.jsonl")
    with Memory.open(tmp_path / "b", embedder=HashEmbedder()) as b:
        note = b.remember("alpha: exports land at 02:00")
        assert [h.note.id for h in b.recall("exports land")] == [note.id]


def test_an_export_with_blank_lines_after_it_imports(tmp_path):
    """An editor's blank line at the end made a whole export 'not JSON'."""
    with Memory.open(tmp_path / "a", embedder=HashEmbedder()) as a:
        a.remember("alpha: exports land at 02:00")
        a.export_jsonl(tmp_path / "a.jsonl")
    with open(tmp_path / "a.jsonl", "a", encoding="utf-8") as handle:
        handle.write("\n  \n")
    with Memory.open(tmp_path / "b", embedder=HashEmbedder()) as b:
        assert b.import_jsonl(tmp_path / "a.jsonl")["restored"] == 1


def test_markdown_pages_say_how_a_question_was_answered(memory, tmp_path):
    question = memory.remember("does the loader retry?", kind="question", tags=["loader"])
    memory.confirm(question.id, "checked the loader")
    memory.export_markdown(tmp_path / "md")
    page = (tmp_path / "md" / "loader.md").read_text(encoding="utf-8")
    assert "- [CONFIRMED: checked the loader]" in page
