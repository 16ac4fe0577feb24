"""Supersede, revoke, purge, snapshots, diffs and recall as of a snapshot."""

import json

import pytest

from nbmemory.cards import Cards
from nbmemory.display import diff_display
from nbmemory.embed import HashEmbedder
from nbmemory.engine import CARDS_FILENAME
from nbmemory.errors import Conflict, InvalidInput, NotFound
from nbmemory.memory import Memory
from nbmemory.models import Provenance

QUERIES = ["lock watcher", "orders amount cents", "parquet partition", "retry budget"]


def seed(memory):
    texts = ["the watcher thread races acquire_lock", "orders.amount is in cents",
             "parquet files are partitioned by day", "the retry budget is three attempts",
             "lock files live in /tmp and are never cleaned", "amount columns are summed per day"]
    return [memory.remember(t).id for t in texts]


def results(memory, **kwargs):
    return {q: [(h.note.id, h.score, h.note.text) for h in memory.recall(q, min_score=0.0, **kwargs)]
            for q in QUERIES}


def test_recall_as_of_returns_what_recall_returned_then(memory):
    ids = seed(memory)
    memory.snapshot("then")
    recorded = results(memory)
    memory.remember("a brand new note about the lock watcher and orders amount")
    memory.edit(ids[1], text="orders.amount is in euros since 2021")
    memory.forget(ids[0])
    memory.supersede(ids[2], "parquet files are partitioned by hour now")
    assert results(memory) != recorded
    assert results(memory, as_of="then") == recorded


def test_recall_as_of_never_reveals_a_purged_note(memory):
    ids = seed(memory)
    memory.snapshot("then")
    memory.purge(ids[3])
    hits = memory.recall("retry budget", min_score=0.0, k=10, as_of="then")
    assert ids[3] not in [h.note.id for h in hits]


def test_a_purge_cut_short_before_it_rewrote_the_files_is_finished_at_the_next_open(
        store_dir, monkeypatch):
    """Killed between its commit and rewriting the files, a purge was told "erased" when
    sent again while the text stayed in the database file."""
    from nbmemory.store import Store

    with Memory.open(store_dir, embedder=HashEmbedder()) as memory:
        note = memory.remember("the vault code is mauve77giraffe")
        memory.remember("the ledger closes on the 3rd working day")
    with Memory.open(store_dir, embedder=HashEmbedder()) as memory:  # in the file by now
        monkeypatch.setattr(Store, "compact", lambda self: (_ for _ in ()).throw(
            KeyboardInterrupt()))  # the owner dies here
        with pytest.raises(KeyboardInterrupt):
            memory.purge(note.id)
        monkeypatch.undo()
    with Memory.open(store_dir, embedder=HashEmbedder()) as memory:
        assert memory.get(note.id).status == "purged"
    for path in store_dir.iterdir():
        if path.is_file():
            assert b"mauve77giraffe" not in path.read_bytes(), path.name


def test_a_purge_whose_files_cannot_be_rewritten_says_it_is_recorded(store_dir, monkeypatch):
    from nbmemory.errors import StoreUnavailable
    from nbmemory.lexical import LexicalIndex

    with Memory.open(store_dir, embedder=HashEmbedder()) as memory:
        note = memory.remember("the vault code is mauve77giraffe")
        with monkeypatch.context() as full:
            full.setattr(LexicalIndex, "save", lambda *a, **k: (_ for _ in ()).throw(
                OSError(28, "No space left on device")))
            with pytest.raises(StoreUnavailable, match=(
                    r"^The purge is recorded, but the index files that may still hold its text "
                    r"could not be written again \(\[Errno 28\] No space left on device\)")):
                memory.purge(note.id)
        assert memory.get(note.id).status == "purged"
    with Memory.open(store_dir, embedder=HashEmbedder()) as memory:  # rewritten at the open
        assert memory.get(note.id).status == "purged"
    for path in store_dir.iterdir():
        if path.is_file():
            assert b"mauve77giraffe" not in path.read_bytes(), path.name


def test_a_diff_between_snapshots_shows_a_note_purged_since_as_erased(memory):
    memory.snapshot("before")
    note = memory.remember("the staging password is hunter2")
    memory.snapshot("after")
    memory.purge(note.id)
    assert "Added (1):\n  #1 (text erased)" in diff_display(memory.snapshot_diff("before", "after")).text


def test_a_snapshot_message_is_capped_and_a_name_never_reads_as_an_option(memory):
    with pytest.raises(InvalidInput, match=r"^The snapshot's message has 10,001 characters; "
                                           r"keep it under 10,000 \(the findings go in notes\)"):
        memory.snapshot("long", message="m" * 10_001)
    with pytest.raises(InvalidInput, match=r"^A snapshot's name may not start with a dash"):
        memory.snapshot("-x")
    assert memory.snapshots() == []


def test_as_of_unknown_snapshot_is_a_clear_error(memory):
    memory.remember("x")
    memory.snapshot("known")
    with pytest.raises(NotFound, match=r"No snapshot named 'nope' \(recent: known\)"):
        memory.recall("x", as_of="nope")


def test_as_of_filters_use_the_notes_as_they_were(memory):
    note = memory.remember("lock ordering matters", tags="locks")
    memory.snapshot("s1")
    memory.edit(note.id, tags="other")
    assert [h.note.id for h in memory.recall("lock", tags="locks", as_of="s1")] == [note.id]
    assert len(memory.recall("lock", tags="locks")) == 0


def test_diff_lists_every_kind_of_change(memory):
    ids = seed(memory)
    memory.forget(ids[5])
    memory.snapshot("a")
    added = memory.remember("a new finding")
    memory.edit(ids[1], text="orders.amount is in euros")
    new = memory.supersede(ids[2], "partitioned by hour")
    memory.forget(ids[0])
    memory.reinstate(ids[5])
    memory.purge(ids[3])
    memory.snapshot("b")
    memory.remember("after b")
    diff = memory.snapshot_diff("a", "b")
    kinds = {c.change: [c.note.id for c in diff.changes if c.change == c.change]
             for c in diff.changes}
    got = {c.change: [] for c in diff.changes}
    for c in diff.changes:
        got[c.change].append(c.note.id)
    assert got == {"added": [added.id, new.id], "edited": [ids[1]], "superseded": [ids[2]],
                   "revoked": [ids[0]], "reinstated": [ids[5]], "purged": [ids[3]]}
    assert next(c.detail for c in diff.changes if c.change == "superseded") == f"by #{new.id}"
    assert kinds  # every change is listed under its kind
    assert [c.note.text for c in memory.snapshot_diff("b").changes] == ["after b"]


def test_diff_with_unknown_snapshot(memory):
    memory.snapshot("a")
    with pytest.raises(NotFound, match="No snapshot named 'zz'"):
        memory.snapshot_diff("a", "zz")


def test_superseding_unknown_or_revoked_ids_fails_and_changes_nothing(memory):
    note = memory.remember("x")
    with pytest.raises(NotFound, match="No note #99"):
        memory.supersede(99, "y")
    memory.forget(note.id)
    with pytest.raises(Conflict, match="Cannot supersede note #1: it is forgotten"):
        memory.supersede(note.id, "y")
    assert memory.notes(status=("active", "revoked", "superseded")).total == 1


def test_history_shows_every_event_with_actor(memory):
    note = memory.remember("x", author="ana")
    memory.edit(note.id, priority="high", author="ben")
    memory.forget(note.id, actor="ana")
    memory.reinstate(note.id, actor="ben")
    events = memory.history(note.id)
    assert [(e.type, e.actor) for e in events] == [("created", "ana"), ("edited", "ben"),
                                                   ("revoked", "ana"), ("reinstated", "ben")]
    assert events[1].data == {"changed": ["priority"]}


def test_each_version_in_a_history_says_its_kind_priority_and_tags(memory):
    """Edits of the tags alone showed versions that read the same."""
    from nbmemory.display import history_display

    note = memory.remember("orders.amount is in euros", tags="orders")
    memory.edit(note.id, tags="")
    memory.edit(note.id, tags="orders,units", priority="high")
    shown = history_display(note.id, memory.history(note.id),
                            versions=memory.versions(note.id)).text
    heads = [line for line in shown.splitlines() if line.startswith("v")]
    assert [h.split(" (", 1)[1] for h in heads] == [
        "finding, medium, orders):", "finding, medium):", "finding, high, orders, units):"]


def test_a_check_written_over_lines_keeps_each_history_row_on_one_line(memory):
    from nbmemory.display import history_display

    note = memory.remember("orders are positive", check="(orders\n  > 0)",
                           namespace={"orders": 3})
    shown = history_display(note.id, memory.history(note.id)).text.splitlines()
    assert shown[-1].split()[3] == "trusted" and shown[-1].endswith("checks=(orders > 0)")
    assert len(shown) == 1 + 1 + len(memory.history(note.id))  # title, header, one per event


def test_purge_erases_text_and_vectors_but_keeps_the_fact(memory, store_dir):
    secret = "the staging password is hunter2-violet"
    note = memory.remember(secret)
    memory.remember("an unrelated note")
    memory.edit(note.id, text=secret + " (rotated monthly)")
    purged = memory.purge(note.id)
    assert (purged.status, purged.text) == ("purged", "")
    assert [e.type for e in memory.history(note.id)][-1] == "purged"
    assert all(h.note.id != note.id for h in memory.recall("staging password", min_score=0))
    engine = memory._backend.engine
    assert engine.store.con.execute(
        "SELECT count(*) FROM note_versions WHERE text LIKE '%hunter2%'").fetchone()[0] == 0
    assert engine.store.vectors("hash", [note.id])[0].tolist() == []
    assert note.id not in engine.vectors
    with pytest.raises(Conflict, match="already purged"):
        memory.purge(note.id)
    memory.close()
    assert b"hunter2" not in (store_dir / "memory.duckdb").read_bytes()


def test_supersede_chain(memory):
    a = memory.remember("v1 of the finding")
    b = memory.supersede(a.id, "v2 of the finding")
    c = memory.supersede(b.id, "v3 of the finding")
    for note_id in (a.id, b.id, c.id):
        assert [n.id for n in memory.chain(note_id)] == [a.id, b.id, c.id]
    assert [n.status for n in memory.chain(a.id)] == ["superseded", "superseded", "active"]


def test_recall_as_of_shows_the_stale_flags_and_fingerprints_of_then(tmp_path):
    import os
    import time

    from nbmemory.embed import HashEmbedder
    from nbmemory.memory import Memory

    data = tmp_path / "orders.csv"
    data.write_text("id,amount\n1,1000\n")
    with Memory.open(tmp_path / "store", embedder=HashEmbedder()) as memory:
        fresh = memory.remember("orders.csv amounts are in cents", about=[str(data)])
        old = memory.remember("orders.csv has one row per order", about=[str(data)])
        memory.supersede(old.id, "orders.csv has one row per order line")
        memory.snapshot("fresh")
        data.write_text("id,amount\n1,1000\n2,2500\n")
        later = time.time() + 2  # file clocks are coarse: make the change visible
        os.utime(data, (later, later))
        memory.snapshot("stale")
        now = memory.recall("orders.csv amounts cents", k=1, min_score=0)[0].note
        assert [r.reason for r in now.stale] == ["rows_changed"]
        then = memory.recall("orders.csv amounts cents", k=1, min_score=0, as_of="fresh")[0].note
        assert then.id == fresh.id and then.stale == ()
        assert then.anchors == fresh.anchors  # the fingerprint taken at remember time
        hits = memory.recall("one row per order", min_score=0, as_of="fresh")
        replaced = [h.note for h in hits.previously if h.note.id == old.id]
        assert [str(r) for r in replaced[0].stale] == [f"superseded #{old.id + 1}"]
        sealed = memory.recall("orders.csv amounts cents", k=1, min_score=0, as_of="stale")[0].note
        assert [r.reason for r in sealed.stale] == ["rows_changed"]
        memory.verify(fresh.id)
        sealed = memory.recall("orders.csv amounts cents", k=1, min_score=0, as_of="stale")[0].note
        assert [r.reason for r in sealed.stale] == ["rows_changed"]  # what it said then
        assert memory.recall("orders.csv amounts cents", k=1, min_score=0)[0].note.stale == ()


def test_purge_leaves_the_text_nowhere_in_the_store_or_a_later_export(memory, store_dir, tmp_path):
    secret = "the vendor contract renews on 2027-03-01 at 412k"
    namespace = {"fee": "412k"}
    note = memory.remember(secret, kind="question", check="fee == '412k'", namespace=namespace)
    memory.recall(secret)  # the query is logged
    memory.recall("renews on 2027-03-01")  # a query the note contains
    for i in range(8):  # the quoting note's card in another block of the cards file
        memory.remember(f"filler finding {i}")
    cell = f"for finding in [{secret!r}, 'the vendor is Acme']:\n    %remember {{finding}}"
    other = memory.remember("the vendor is Acme", provenance=Provenance(  # the same cell's
        notebook="/work/vendors.ipynb", cell_id="c1", cell_source=cell))
    memory.recall("who is the vendor")  # its card is read, and kept
    namespace["fee"] = "412k net"
    memory.check(namespace)  # the journal keeps the check and the value it saw
    memory.snapshot("before-renewal", message=f"knew that {secret}")  # sealed stale
    memory.verify(note.id)
    memory.refute(note.id, f"no: {secret} was a draft")
    memory.reopen(note.id)
    memory.purge(note.id)
    memory.export_jsonl(tmp_path / "after.jsonl")
    assert "412k" not in (tmp_path / "after.jsonl").read_text()
    assert memory.snapshots()[0].message == "knew that [purged]"
    assert memory.get(other.id).provenance.cell_source == (
        "for finding in ['[purged]', 'the vendor is Acme']:\n    %remember {finding}")
    [hit] = [h for h in memory.recall("the vendor is Acme", k=20) if h.note.id == other.id]
    assert "412k" not in hit.note.provenance.cell_source  # recall reads the cards
    # The snapshot still says the note was stale then, in no words of it.
    rows = [json.loads(line) for line in (tmp_path / "after.jsonl").read_text().splitlines()]
    [sealed] = [row["row"]["stale"] for row in rows if row.get("table") == "snapshots"]
    assert json.loads(sealed) == {str(note.id): [{"reason": "check_failed", "target": "",
                                                  "detail": ""}]}
    memory.close()
    for path in store_dir.iterdir():
        if path.is_file():
            assert b"412k" not in path.read_bytes(), path.name
    # The cards file is compressed: read what it holds.
    assert not [line for line in Cards.load(store_dir / CARDS_FILENAME)[0].every_line()
                if b"412k" in line]
