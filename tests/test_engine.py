"""The engine through the Memory facade, with real DuckDB and usearch and the hash embedder."""

import contextlib
import json
import os
import re
import threading
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from nbmemory.cards import BLOCK
from nbmemory.config import Settings
from nbmemory.embed import HashEmbedder
from nbmemory.engine import CARDS_FILENAME, KEYWORDS_FILENAME, VECTOR_FILENAME, content_hash
from nbmemory.errors import (Conflict, EmbedderMismatch, InvalidInput, ModelUnavailable, NotFound, StoreLocked,
                             NbMemoryError, StoreTooNew, StoreUnavailable)
from nbmemory.display import hits_text, status_display
from nbmemory.memory import Memory
from nbmemory.models import PRIORITIES, Provenance
from nbmemory.ranking import KEYWORD_WEIGHT, LIFT_BELOW
from nbmemory.store import Filters, Store
from nbmemory.store.rows import as_stored
from cosines import shown_dense
from waiting import holding_chunks, ran_while_held


def snapshot_of(store_dir):
    """Everything canonical in the store, to check a failed call changed nothing.

    Reads the file directly, so an owner process serving the store is stopped first.
    """
    from nbmemory.service import stop

    stop(store_dir)
    mem_engine_tables = ["notes", "note_versions", "events", "embeddings", "snapshots"]
    store = Store(store_dir)
    try:
        return {t: store.con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall()
                for t in mem_engine_tables}
    finally:
        store.close()


def test_remember_then_get_and_recall(memory):
    note = memory.remember("orders.amount is in cents before 2021", priority="high",
                           tags="Orders, units", kind="gotcha")
    assert note.id == 1
    assert (note.kind, note.priority, note.tags, note.status) == ("gotcha", "high",
                                                                 ("orders", "units"), "active")
    assert memory.get(1).text == "orders.amount is in cents before 2021"
    hits = memory.recall("orders.amount")
    assert [h.note.id for h in hits] == [1]


def test_ids_are_sequential_integers(memory):
    ids = [memory.remember(f"finding number {i}").id for i in range(5)]
    assert ids == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("kwargs, message", [
    (dict(text="   "), "The note is empty"),
    (dict(text="x", kind="idea"), "Unknown kind 'idea'; use one of: finding, gotcha"),
    (dict(text="x", priority="urgent"), "Unknown priority 'urgent'; use one of: high, medium, low"),
    (dict(text="x", tags="two words"), "Tag 'two words' contains a space"),
    (dict(text="x", tags=",,"), "Tags ',,' name no tag; separate tags with commas, e.g. orders"),
])
def test_bad_input_is_refused_and_store_unchanged(memory, store_dir, kwargs, message):
    memory.remember("a first note")
    engine = memory._backend.engine
    before = {t: engine.store.con.execute(f"SELECT count(*) FROM {t}").fetchone()
              for t in ("notes", "events", "note_versions")}
    with pytest.raises(InvalidInput, match=message):
        memory.remember(**kwargs)
    after = {t: engine.store.con.execute(f"SELECT count(*) FROM {t}").fetchone()
             for t in ("notes", "events", "note_versions")}
    assert before == after


def test_unknown_id_errors(memory):
    with pytest.raises(NotFound, match=r"No note #42\. Recall or list notes to find their ids\."):
        memory.get(42)
    with pytest.raises(NotFound, match="No note #42"):
        memory.forget(42)


def test_forget_hides_and_reinstate_restores(memory):
    a = memory.remember("the watcher races acquire_lock")
    memory.remember("unrelated finding about parquet files")
    memory.forget(a.id)
    hits = memory.recall("watcher acquire_lock")
    assert a.id not in [h.note.id for h in hits]
    assert [h.note.id for h in hits.previously] == [a.id]
    assert memory.get(a.id).status == "revoked"
    with pytest.raises(Conflict, match=r"^Note #\d+ is already forgotten; Memory.reinstate"):
        memory.forget(a.id)
    memory.reinstate(a.id)
    assert memory.recall("watcher acquire_lock")[0].note.id == a.id
    # Forgotten, then written again as it was: believed, not "previously believed".
    memory.forget(a.id)
    again = memory.remember("The watcher races  acquire_lock.")
    hits = memory.recall("watcher acquire_lock")
    assert [h.note.id for h in hits][:1] == [again.id] and list(hits.previously) == []


def test_a_store_duckdb_cannot_open_is_called_damaged_only_when_nothing_else_explains_it(
        store_dir, monkeypatch):
    """A bad NBMEMORY_DUCKDB_MEMORY or a read-only disk was worded as a damaged store, with
    the advice to move its file away."""
    import duckdb

    import nbmemory.store.duckdb as duckdb_store
    from nbmemory.store.schema import cannot_open

    store_dir.mkdir()
    Store(store_dir).close()
    monkeypatch.setenv("NBMEMORY_DUCKDB_MEMORY", "lots")
    monkeypatch.setattr(duckdb_store, "MEMORY_LIMIT", "lots")
    with pytest.raises(StoreUnavailable, match="^NBMEMORY_DUCKDB_MEMORY='lots' is not a memory "
                                               "limit DuckDB takes .*: give one like 512MB or "
                                               "2GB, or unset it.$"):
        Store(store_dir)
    monkeypatch.delenv("NBMEMORY_DUCKDB_MEMORY")
    said = cannot_open(store_dir / "memory.duckdb", duckdb.IOException(
        'IO Error: Cannot open file "memory.duckdb": Read-only file system'))
    assert said.endswith("Make it and its folder writable by this user, or use a store "
                         "elsewhere.") and "damaged" not in said
    assert "It may be damaged" in cannot_open(store_dir / "memory.duckdb", duckdb.IOException(
        "IO Error: The file is not a valid DuckDB database file!"))


def test_since_and_until_take_a_date_or_iso_text_as_well(memory):
    memory.remember("orders.amount is in cents")
    today = datetime.now().date()
    midnight = datetime.combine(today, datetime.min.time())
    for since in (today, today.isoformat(), midnight):
        assert len(memory.recall("orders amount", since=since)) == 1
    assert memory.notes(until=midnight).total == 0
    for until in (today, today.isoformat()):  # a day, as in the CLI: all of it
        assert memory.notes(until=until).total == 1
    assert memory.notes(since=(today + timedelta(days=1)).isoformat()).total == 0


def test_a_store_opened_twice_in_one_process_or_named_by_a_number_is_said_so(store_dir):
    with pytest.raises(InvalidInput, match="^A store is a directory or a postgresql:// "
                                           "address, not int 5$"):
        Memory.open(5)
    with Memory.open(store_dir, embedder=HashEmbedder(), settings=None, mode="local"):
        with pytest.raises(StoreLocked, match=r"is already open in this process: use the "
                                              r"Memory opened first"):
            Memory.open(store_dir, embedder=HashEmbedder(), settings=None, mode="local")


def test_a_closed_memory_says_so_rather_than_answer_from_memory(store_dir):
    memory = Memory.open(store_dir, embedder=HashEmbedder(), settings=None)
    memory.remember("teapots are kept in the attic")
    memory.close()
    for call in (lambda: memory.recall("teapots"), lambda: memory.remember("more"),
                 memory.status):
        with pytest.raises(StoreUnavailable, match="^This Memory is closed; open the store "
                                                   "again.$"):
            call()


def test_forget_many_is_all_or_nothing(memory):
    a = memory.remember("first")
    with pytest.raises(NotFound):
        memory.forget([a.id, 99])
    assert memory.get(a.id).status == "active"


def test_forget_and_reinstate_many_write_one_event_each_in_the_order_given(memory):
    ids = [memory.remember(f"bulk note {i} about widgets").id for i in range(40)][::-1]
    other = memory.remember("a note that stays")
    assert [n.id for n in memory.forget(ids)] == ids
    assert [n.note.id for n in memory.recall("widgets", k=50)] == []
    last = [memory.history(i)[-1] for i in ids]
    assert {e.type for e in last} == {"revoked"}
    assert [e.seq for e in last] == list(range(last[0].seq, last[0].seq + 40))
    with pytest.raises(Conflict, match=rf"^Cannot reinstate note #{other.id}: it is active"):
        memory.reinstate(ids + [other.id])
    assert memory.notes().total == 1  # none came back
    back = memory.reinstate(ids)
    assert [(n.id, n.status) for n in back] == [(i, "active") for i in ids]
    assert set(ids) <= {h.note.id for h in memory.recall("widgets", k=50, min_score=-1)}
    assert [e.type for e in memory.history(ids[0])] == ["created", "revoked", "reinstated"]


def test_a_note_and_its_forgotten_correction_are_not_reinstated_together(memory):
    """Each may come back alone; together they made two versions of one belief active."""
    old = memory.remember("orders.amount is in dollars")
    new = memory.supersede(old.id, "orders.amount is in cents")
    memory.forget(new.id)
    with pytest.raises(Conflict, match=rf"^Cannot reinstate #{old.id} and #{new.id} together: "
                                       rf"#{new.id} replaced #{old.id}. Reinstate the one you "
                                       rf"believe.$"):
        memory.reinstate([old.id, new.id])
    assert memory.notes().total == 0  # neither came back
    assert memory.reinstate(new.id).status == "active"


def test_retried_write_is_applied_once(memory):
    first = memory.remember("only once please", request_id="req-1")
    again = memory.remember("only once please", request_id="req-1")
    assert first.id == again.id
    assert memory.notes().total == 1


def test_a_resent_edit_answers_with_the_version_it_wrote(memory):
    """An edit resent after its owner died answered with the note as it was now: two
    writers were each told their edit was version 3, one of them someone else's."""
    note = memory.remember("the export runs at 01:00")
    mine = memory.edit(note.id, text="the export runs at 02:00", request_id="edit-1")
    theirs = memory.edit(note.id, text="the export runs at 03:00", request_id="edit-2")
    again = memory.edit(note.id, text="the export runs at 02:00", request_id="edit-1")
    assert (mine.version, theirs.version) == (2, 3)
    assert (again.version, again.text) == (2, "the export runs at 02:00")
    assert memory.get(note.id).version == 3  # nothing written again


def test_an_edit_to_the_same_text_typed_another_way_writes_no_version(memory):
    """The same words with é as e and a combining accent (NFD, as a Mac may send them) were
    a new version whose text looked exactly like the old one's."""
    note = memory.remember("Le caf\u00e9 est ferm\u00e9")
    same = memory.edit(note.id, text="Le cafe\u0301 est ferme\u0301")
    assert (same.version, same.text) == (1, "Le caf\u00e9 est ferm\u00e9")
    assert [e.type for e in memory.history(note.id)] == ["created"]


def test_edit_makes_a_new_version_and_keeps_history(memory):
    note = memory.remember("amount is in dollars", tags="orders")
    edited = memory.edit(note.id, text="amount is in cents", priority="high")
    assert (edited.id, edited.version, edited.priority) == (note.id, 2, "high")
    assert memory.recall("cents")[0].note.text == "amount is in cents"
    assert [e.type for e in memory.history(note.id)] == ["created", "edited"]
    versions = memory._backend.engine.store.con.execute(
        "SELECT version, text FROM note_versions WHERE note_id = ? ORDER BY version",
        [note.id]).fetchall()
    assert versions == [(1, "amount is in dollars"), (2, "amount is in cents")]


def test_supersede_links_and_marks_the_old_note(memory):
    old = memory.remember("the cache is never invalidated", tags="cache")
    new = memory.supersede(old.id, "the cache is invalidated on every commit")
    assert new.id != old.id and new.tags == ("cache",)
    stale = memory.get(old.id)
    assert stale.status == "superseded"
    assert [str(r) for r in stale.stale] == [f"superseded #{new.id}"]
    assert [h.note.id for h in memory.recall("cache invalidated")] == [new.id]
    with pytest.raises(Conflict, match="it is superseded"):
        memory.supersede(old.id, "again")


def test_a_replaced_note_comes_back_once_its_replacement_is_purged_or_forgotten(memory):
    """Purging a mistaken correction must not leave the belief it replaced out of reach."""
    old = memory.remember("the churn window is 30 days", tags="churn")
    new = memory.supersede(old.id, "the churn window is 45 days (wrong)")
    with pytest.raises(Conflict, match=f"Cannot reinstate note #{old.id}: it is superseded by "
                                       f"#{new.id}, which is active; forget #{new.id} first"):
        memory.reinstate(old.id)
    with pytest.raises(Conflict, match=f"it is superseded by #{new.id}, the note to correct: "
                                        rf"Memory.supersede\({new.id}, <the corrected finding>\)"):
        memory.forget(old.id)
    memory.snapshot("corrected")
    memory.purge(new.id)
    # Not "correct #new" (purged: it cannot be superseded) but bring the old one back.
    with pytest.raises(Conflict, match=rf"Cannot edit note #{old.id}: it is superseded by "
                                       rf"#{new.id}, which was purged; bring it back first with "
                                       rf"Memory.reinstate\({old.id}\)\.$"):
        memory.edit(old.id, text="the churn window is 30 days, checked")
    back = memory.reinstate(old.id)
    assert (back.status, back.stale) == ("active", ())
    assert [h.note.id for h in memory.recall("churn window")] == [old.id]
    assert [(c.change, c.note.id) for c in memory.snapshot_diff("corrected").changes] == [
        ("reinstated", old.id), ("purged", new.id)]
    newer = memory.supersede(old.id, "the churn window is 60 days")
    memory.forget(newer.id)
    assert memory.reinstate(old.id).status == "active"
    # Never two active versions of one belief: not through a chain, not by an undo.
    with pytest.raises(Conflict, match=f"Cannot reinstate note #{newer.id}: the note it "
                                       f"replaced, #{old.id}, is active again; forget "
                                       f"#{old.id} first"):
        memory.reinstate(newer.id)
    second = memory.supersede(old.id, "the churn window is 90 days")
    third = memory.supersede(second.id, "the churn window is 120 days")
    with pytest.raises(Conflict, match=f"it is superseded by #{third.id}, which is active"):
        memory.reinstate(old.id)


def test_a_notes_author_is_who_wrote_it_and_each_version_keeps_its_editor(memory):
    """A colleague fixing a typo must not take the note out of its writer's "mine"."""
    note = memory.remember("the ledger closes on day 3", author="ada")
    edited = memory.edit(note.id, text="the ledger closes on day 4", author="bo")
    assert edited.author == "ada"
    assert [n.id for n in memory.notes(author="ada").notes] == [note.id]
    assert memory.notes(author="bo").total == 0
    assert [(v.version, v.author) for v in memory.versions(note.id)] == [(1, "ada"), (2, "bo")]


def test_filters_apply_before_ranking(memory):
    memory.remember("lock ordering matters", tags="locks", kind="gotcha", priority="high")
    memory.remember("lock files live in /tmp", tags="fs", kind="finding", priority="low")
    assert [h.note.tags for h in memory.recall("lock", tags="locks")] == [("locks",)]
    assert [h.note.kind for h in memory.recall("lock", kind="finding")] == ["finding"]
    assert [h.note.priority for h in memory.recall("lock", priority="high")] == ["high"]
    assert len(memory.recall("lock", tags="nothing-has-this")) == 0


def test_priority_breaks_near_ties(memory):
    low = memory.remember("retry budget is three attempts", priority="low")
    high = memory.remember("retry budget is three attempts", priority="high")
    assert [h.note.id for h in memory.recall("retry budget")] == [high.id, low.id]


def test_threshold_counts_what_it_hides(memory):
    memory.remember("alpha beta gamma")
    memory.remember("completely different words here")
    hits = memory.recall("alpha", min_score=0.99)
    assert len(hits) == 0 and hits.filtered_out >= 1
    hits = memory.recall("alpha", min_score=0.0)
    assert hits.filtered_out == 0 and len(hits) == 2


def test_priority_does_not_decide_what_the_threshold_shows(memory):
    high = memory.remember("retry budget is three attempts", priority="high")
    low = memory.remember("retry budget is three attempts", priority="low")
    scores = {h.note.id: h.score for h in memory.recall("retry budget", min_score=-1)}
    fused = (scores[high.id] + scores[low.id]) / 2  # each is the fused score -+ 0.02
    hits = memory.recall("retry budget", min_score=fused + 0.01)
    assert len(hits) == 0 and hits.filtered_out == 2  # the bonus does not lift #1 over it
    hits = memory.recall("retry budget", min_score=fused - 0.01)
    assert [h.note.id for h in hits] == [high.id, low.id]  # nor the penalty sink #2 under it


def test_explain_gives_channel_scores(memory):
    memory.remember("PyObject_GC_Del frees GC memory")
    hit = memory.recall("PyObject_GC_Del", explain=True)[0]
    assert hit.lexical > 0.5 and -1 <= hit.dense <= 1
    assert memory.recall("PyObject_GC_Del")[0].lexical is None


def test_explain_says_how_each_score_was_made(memory):
    """The per-hit channel scores, the keyword weight and the priority bonus give back the
    score shown: the scale min_score cuts on is one a user can check."""
    memory.remember("the nightly export moved to Airflow in March")
    memory.remember("Airflow retries a failed task twice", priority="high")
    memory.remember("a note about penguins", priority="low")
    hits = memory.recall("when did the nightly export move to Airflow", explain=True,
                         min_score=-1)
    fusion = hits.fusion
    assert fusion["covered"] > 0.45 and fusion["weight"] == pytest.approx(KEYWORD_WEIGHT)
    bonus = {"high": fusion["priority"], "medium": 0.0, "low": -fusion["priority"]}
    for hit in hits:
        made = ((1 - fusion["weight"]) * max(hit.dense, 0.0) + fusion["weight"] * hit.lexical
                + bonus[hit.note.priority])
        assert abs(hit.score - made) < 1e-3, (hit, fusion)
    w = KEYWORD_WEIGHT
    assert (f"score = {1 - w:.2f} x dense + {w:.2f} x lexical (+0.02 high priority, -0.02 low). "
            f"Keyword weight {w:.2f}: the best keyword match covers") in hits_text(hits)
    quiet = memory.recall("penguins that wander", explain=True, min_score=-1)
    assert quiet.fusion["weight"] == 0.0 and "score = dense (+0.02" in hits_text(quiet)
    assert all(abs(h.score - max(h.dense, 0.0) - bonus[h.note.priority]) < 1e-3 for h in quiet)
    assert memory.recall("Airflow").fusion is None  # not asked to explain
    lexical = memory.recall("Airflow", explain=True, mode="lexical")
    assert lexical.fusion is None and lexical[0].dense is None  # no cosine was computed
    assert f"     lexical {lexical[0].lexical:.3f}\n" in hits_text(lexical)
    assert "dense" not in hits_text(lexical)
    assert "<td>—</td>" in lexical._repr_html_()


def test_below_the_start_keywords_lift_notes_under_the_closest_in_meaning(memory):
    """A question sharing one telling word with a note, too little of it to mix keywords in:
    the LIFT_BELOW notes closest in meaning keep their places and scores, the note with the
    word rises to just under them (it was last by meaning), and explain says so."""
    n = LIFT_BELOW
    for i in range(n + 2):
        memory.remember(f"what did they do about the car on the way home {i}")
    memory.remember("what they did about the old lighthouse keeper")
    query = "what did they say about the lighthouse on the hill"
    hits = memory.recall(query, explain=True, min_score=-1, k=n + 3)
    fusion = hits.fusion
    assert fusion["covered"] < fusion["from"] and fusion["below"] == n and fusion["weight"] > 0
    assert hits[n].note.text == "what they did about the old lighthouse keeper"
    assert all(abs(h.score - h.dense) < 1e-6 for h in hits[:n])  # as by meaning alone
    assert hits[n - 1].score > hits[n].score > hits[n + 1].score
    assert hits[n].dense == min(h.dense for h in hits)  # last by meaning
    assert (f"score = dense for the {n} notes closest in meaning; for the others dense + "
            in hits_text(hits))
    assert f"kept below those {n} (+0.02 high priority" in hits_text(hits)
    assert ("under the 35% from which keywords are mixed in (fully from 45%). Lexical includes "
            "the words of the best notes, fed back.") in hits_text(hits)


def test_explain_says_a_short_or_asking_notes_dense_score_is_part_of_its_cosine(memory):
    """A note of few keyword terms, or one that ends asking, keeps only part of its cosine;
    explain shows that part as "dense" and says so, or a user comparing it with another
    tool's cosine is misled."""
    memory.remember("Theo: What?")
    memory.remember("Theo said the quarterly revenue numbers were revised downward on Friday")
    hits = memory.recall("what did Theo say", explain=True, min_score=-1, mode="hybrid")
    short = next(h for h in hits if h.note.text == "Theo: What?")
    query, note = HashEmbedder().encode(["what did Theo say", "Theo: What?"])
    cosine = float(np.dot(query, note))
    # 1 term (theo), the query's: none of its own; and it only asks
    assert short.dense == pytest.approx(cosine * 0.5 * 0.5, abs=1e-3)
    assert ("Dense is a note's cosine; a note of fewer than 4 keyword terms of its own (not the "
            "query's) keeps part of it (50% at none), one that ends asking too (50% if it only "
            "asks).") in hits_text(hits)


@pytest.mark.parametrize("gone", ["superseded", "forgotten"])
def test_a_note_forgotten_or_replaced_does_not_steer_how_the_others_rank(tmp_path, gone):
    """Notes no longer active are scored only to say what was previously believed: the
    others rank as in a store that never held them. A superseded note that matched most of
    the query set its keyword weight and took a place kept for the closest in meaning,
    which hid the notes that answer it below the threshold."""
    others = ["males are heavier than females in every species",
              "Gentoo are the heaviest species, 5076 g on average",
              "bill depth splits the species better than bill length",
              "flipper length tracks body mass within each species",
              "Chinstrap and Adelie overlap in body mass",
              "the island decides the species mix of a sample",
              "three birds have no sex recorded",
              "Gentoo are the largest penguins: 5.1 kg"]
    query = "which birds weigh the most"
    ranks = []
    for old in (None, "Gentoo penguins weigh the most of the birds"):
        with Memory.open(tmp_path / f"s{len(ranks)}", embedder=HashEmbedder(),
                         settings=None) as mem:
            for text in others[:-1]:
                mem.remember(text)
            if old:
                first = mem.remember(old)
                if gone == "superseded":
                    mem.remember(others[-1], supersedes=first.id)
                else:
                    mem.remember(others[-1])
                    mem.forget(first.id)
            else:
                mem.remember(others[-1])
            hits = mem.recall(query, k=10, min_score=-1)
            ranks.append(([(h.note.text, h.score) for h in hits], hits.previously))
    (alone, _), (beside, previously) = ranks
    # The same order and, but for the old note's words counting in each word's rarity, scores.
    assert [t for t, _ in beside] == [t for t, _ in alone]
    assert [s for _, s in beside] == pytest.approx([s for _, s in alone], abs=0.005)
    assert [h.note.text for h in previously] == ["Gentoo penguins weigh the most of the birds"]


def test_empty_recalls_are_counted(memory):
    memory.remember("something")
    memory.recall("something")
    memory.recall("zzz qqq", min_score=0.9)
    status = memory.status()
    assert (status["recalls"], status["empty_recalls"]) == (2, 1)



def test_the_recall_log_counts_what_each_channel_found(memory):
    memory.remember("orders.amount is in cents before 2021")
    memory.remember("the watcher races acquire_lock")
    memory.recall("orders.amount cents")
    memory.recall("zebra quokka")
    engine = memory._backend.engine
    engine._flush_recall_log()
    rows = engine.store.con.execute(
        "SELECT query, returned, lexical, dense FROM recall_log ORDER BY logged_at").fetchall()
    assert rows == [("orders.amount cents", 1, 1, 1), ("zebra quokka", 0, 0, 0)]

def test_notes_pages_and_totals(memory):
    for i in range(7):
        memory.remember(f"note {i}", tags="even" if i % 2 == 0 else "odd")
    page = memory.notes(limit=3, offset=3, order="oldest")
    assert [n.text for n in page.notes] == ["note 3", "note 4", "note 5"]
    assert page.total == 7
    assert memory.notes(tags="even").total == 4
    with pytest.raises(InvalidInput, match="Unknown order"):
        memory.notes(order="random")


def test_hits_convert_to_a_dataframe(memory):
    memory.remember("one finding", tags="a")
    frame = memory.recall("finding").to_dataframe()
    assert list(frame["id"]) == [1] and frame.loc[0, "tags"] == ["a"]
    # The channels' scores only when asked for (they were columns of None).
    assert "dense" not in frame.columns
    frame = memory.recall("finding", explain=True).to_dataframe()
    assert frame.loc[0, "lexical"] > 0 and frame.loc[0, "dense"] > 0
    assert memory.recall("nothing like it", min_score=1).to_dataframe().columns[:2].tolist() == [
        "id", "score"]


def test_a_page_of_notes_converts_to_a_dataframe(memory):
    memory.remember("one finding", tags="a,b", priority="high")
    memory.remember("another finding")
    frame = memory.notes(limit=1, order="oldest").to_dataframe()
    assert len(frame) == 1 and frame.loc[0, "id"] == 1
    assert (frame.loc[0, "text"], frame.loc[0, "priority"], frame.loc[0, "tags"]) == \
        ("one finding", "high", ["a", "b"])
    assert frame.loc[0, "status"] == "active" and frame.loc[0, "stale"] == ""
    empty = memory.notes(tags="nothing-has-this").to_dataframe()
    assert empty.empty and "text" in empty.columns  # same columns, no rows


def test_similar_notes_are_shown_not_merged(memory):
    a = memory.remember("the watcher thread races acquire_lock on startup")
    b = memory.remember("acquire_lock races the watcher thread at startup")
    memory.remember("parquet files are partitioned by day")
    assert [h.note.id for h in memory.similar(b.id)] == [a.id]
    assert memory.notes().total == 3


def test_snapshot_names_are_unique(memory):
    memory.remember("x")
    snap = memory.snapshot("before-refactor", message="start")
    assert (snap.name, snap.note_count, snap.message) == ("before-refactor", 1, "start")
    with pytest.raises(Conflict, match="A snapshot named 'before-refactor' already exists"):
        memory.snapshot("before-refactor")
    with pytest.raises(InvalidInput, match="without spaces"):
        memory.snapshot("two words")


def test_reopen_keeps_everything_and_loads_the_index(store_dir):
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        for i in range(20):
            mem.remember(f"finding {i} about topic {i % 3}")
        mem.forget(3)
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        assert mem.status()["index"] == "loaded"
        assert mem.notes().total == 19
        assert mem.recall("finding 7 about topic 1")[0].note.id == 8


def test_index_catches_up_after_unsaved_writes(store_dir):
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        mem.remember("saved on close")
    with Memory.open(store_dir, embedder=HashEmbedder(), settings=Settings(save_every=10**6)) as mem:
        engine = mem._backend.engine
        mem.remember("written after the last save")
        engine.store.close()  # simulate a crash: no save on close
        engine._owner.release()
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        assert mem.status()["index"] == "loaded, caught up 1 note"
        assert mem.recall("written after the last save")[0].note.id == 2


@pytest.mark.parametrize("damage", ["delete", "truncate", "garbage"])
@pytest.mark.parametrize("filename, state", [(VECTOR_FILENAME, "index"),
                                              (KEYWORDS_FILENAME, "keywords"),
                                              (CARDS_FILENAME, "cards")])
def test_missing_or_corrupt_index_file_is_rebuilt(store_dir, damage, filename, state):
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        for i in range(30):
            mem.remember(f"note about subject{i}")
    path = store_dir / filename
    if damage == "delete":
        path.unlink()
    elif damage == "truncate":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    else:
        path.write_bytes(b"not an index" * 20)
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        assert mem.status()[state].startswith("rebuilt (")
        assert mem.recall("note about subject17")[0].note.id == 18
        assert [h.note.id for h in mem.recall("subject17", mode="lexical")] == [18]


@pytest.mark.parametrize("damage", ["flipped bit", "meta a list", "seq a word"])
@pytest.mark.parametrize("filename, state", [(KEYWORDS_FILENAME, "keywords"),
                                              (CARDS_FILENAME, "cards")])
def test_an_index_file_damaged_inside_is_rebuilt(store_dir, damage, filename, state):
    """A bit flipped in a keyword index loaded, then every recall failed (IndexError; the
    cards: a zlib error) and doctor saw nothing; a header of another shape stopped the
    owner. The arrays now carry a checksum, and any damage rebuilds the file."""
    import json
    import struct

    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        for i in range(30):
            mem.remember(f"note about subject{i}")
    path = store_dir / filename
    data = bytearray(path.read_bytes())
    if damage == "flipped bit":
        data[-40] ^= 0x10
    else:
        start = data.index(b'{"meta"')
        (size,) = struct.unpack_from("<Q", data, start - 8)
        header = json.loads(data[start:start + size])
        header["meta"] = [] if damage == "meta a list" else {**header["meta"], "seq": "x"}
        text = json.dumps(header, separators=(",", ":")).encode()
        assert len(text) <= size  # spaces after it: the arrays stay where they are
        data[start:start + size] = text.ljust(size)
    path.write_bytes(bytes(data))
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        assert mem.status()[state].startswith("rebuilt (")
        assert mem.recall("note about subject17")[0].note.id == 18
        assert [h.note.id for h in mem.recall("subject17", mode="lexical")] == [18]


@pytest.mark.parametrize("description", ["[1, 2]", '{"seq": null}', '"seq"'])
def test_an_index_description_of_the_wrong_shape_is_rebuilt(store_dir, description):
    """Valid JSON that is not the index's description: the owner could not start."""
    from nbmemory import doctor

    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        for i in range(30):
            mem.remember(f"note about subject{i}")
    (store_dir / (VECTOR_FILENAME + ".json")).write_text(description)
    [check] = [c for c in doctor.run_checks(str(store_dir), "hash:64", skip={"jupyter"})
               if c.name == "index"]
    assert (check.status, check.detail) == ("fail", (
        f"{VECTOR_FILENAME} is unreadable (ValueError: {VECTOR_FILENAME}.json is not this "
        "index's description)"))
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        assert mem.status()["index"].startswith("rebuilt (")
        assert mem.recall("note about subject17")[0].note.id == 18


def test_an_index_whose_keys_disagree_with_the_store_is_rebuilt(store_dir):
    """An index file holding a note the store does not index (a team store's copy behind
    the file, at an owner's start while the server was away): rebuilt. The rebuild failed
    with AttributeError (closing the index had dropped its identity), and the owner too."""
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        for i in range(5):
            mem.remember(f"note about subject{i}")
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        dense = mem._backend.engine.dense
        identity = dense.identity
        assert dense.open(identity, np.array([1, 2, 4, 5])) == (
            "rebuilt (keys disagree with the store)")
        assert dense.identity == identity and dense.index is not None


def test_reopen_loads_the_keyword_index_and_catches_it_up(store_dir):
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        assert mem.status()["keywords"] == "new"  # an empty store: nothing was repaired
        for i in range(20):
            mem.remember(f"finding {i} about topic {i % 3}")
        mem.edit(5, text="the zephyr module retries twice")
        mem.edit(5, text="the quokka module retries twice")
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        assert mem.status()["keywords"] == "loaded"
        assert [h.note.id for h in mem.recall("quokka", mode="lexical")] == [5]
        assert list(mem.recall("zephyr", mode="lexical")) == []
        engine = mem._backend.engine
        mem.remember("written after the keyword file, a wombat")
        mem.edit(7, text="the numbat module retries once")
        engine.store.close()  # a crash: nothing saved on close
        engine._owner.release()
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        assert mem.status()["keywords"] == "loaded, caught up 2 notes"
        assert [h.note.id for h in mem.recall("wombat", mode="lexical")] == [21]
        assert [h.note.id for h in mem.recall("numbat", mode="lexical")] == [7]
        assert 7 not in [h.note.id for h in mem.recall("finding 6 about topic", mode="lexical")]


def test_a_cards_file_of_another_block_size_is_built_again(store_dir):
    """Files written before the blocks shrank to BLOCK are rebuilt on open, not misread."""
    from nbmemory.arrays import read_arrays, write_arrays
    from nbmemory.cards import _MAGIC

    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        for i in range(3 * BLOCK):
            mem.remember(f"finding {i} about the connection pool")
    path = store_dir / CARDS_FILENAME
    meta, arrays = read_arrays(path, _MAGIC, "cards")
    write_arrays(path, _MAGIC, {**meta, "block": 2 * BLOCK}, dict(arrays))
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        assert mem.status()["cards"] == f"rebuilt (blocks of {2 * BLOCK}, this version uses {BLOCK})"
        hits = mem.recall(f"finding {BLOCK + 1} about the connection pool", k=1)
        assert [h.note.text for h in hits] == [f"finding {BLOCK + 1} about the connection pool"]


def test_recall_reads_its_hits_from_the_cards_exactly_as_the_store_has_them(store_dir):
    def everything(mem):
        engine = mem._backend.engine
        ids = engine.store.note_ids(Filters(statuses=()))
        from_store = engine.store.get_notes(ids.tolist())
        found, missing = engine.cards.cards.lines(ids.tolist())
        return from_store, {i: engine.store.note_from_line(x) for i, x in found.items()}, missing

    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        for i in range(40):
            mem.remember(f"finding {i}: it's \"quoted\", on\ntwo lines, é ✓ 漢字",
                         tags=f"t{i % 3}, shared", kind="gotcha" if i % 2 else "finding",
                         priority="high" if i % 5 == 0 else "medium",
                         author=None if i % 4 else f"ana{i}")
        (store_dir.parent / "cache.py").write_text("KEY = 'x'\n")
        mem.remember("the cache key ignores the locale", about="cache.py",
                     provenance=Provenance(notebook="/w/explore.ipynb", cell_id="c1",
                                                execution_count=7, cell_source="df.head()"))
        mem.edit(3, text="finding 3, edited: the retry count is five")
        mem.forget(4)
        mem.purge(6)
        question = mem.remember("does the nightly job skip weekends?", kind="question")
        mem.confirm(question.id, "yes, since March")
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        assert mem.status()["cards"] == "loaded"
        from_store, from_cards, missing = everything(mem)
        assert missing == [] and from_cards == from_store
        assert len(from_store) == 42 and from_cards[6].text == ""
        assert from_cards[42].resolution == "confirmed" and from_cards[41].provenance == from_store[41].provenance
        # A change since the file: the note is read from the store, and recall shows it.
        mem.edit(8, text="finding 8 now says the pool holds twelve connections")
        from_store, from_cards, missing = everything(mem)
        assert missing == [i for i in range(1, 43) if i // BLOCK == 8 // BLOCK]  # 8's block
        assert [h.note.text for h in mem.recall("pool holds twelve connections")][:1] == [
            "finding 8 now says the pool holds twelve connections"]
        from_store, from_cards, missing = everything(mem)  # that recall read the block again
        assert missing == [] and from_cards == from_store
        engine = mem._backend.engine
        mem.remember("written after the cards were saved: a wombat")
        engine.store.close()  # a crash: nothing saved on close
        engine._owner.release()
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        assert mem.status()["cards"] == "loaded, 2 notes read again"
        assert mem.recall("wombat")[0].note.text == "written after the cards were saved: a wombat"
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:  # closing wrote them
        from_store, from_cards, missing = everything(mem)
        assert missing == [] and from_cards == from_store and len(from_store) == 43


def test_an_index_saved_when_due_holds_the_whole_write_it_was_due_in(store_dir):
    """A save falls due in the middle of a write's changes (forget #9 and #17: due at #9).
    Saved there, the files said they held the whole write, and after a crash recall showed
    #17 as it was before (the store was right, and doctor saw nothing)."""
    settings = Settings(save_every=5)
    with Memory.open(store_dir, embedder=HashEmbedder(), settings=settings) as mem:
        for i in range(1, 31):
            mem.remember("acquire_lock runs before the watcher" if i == 17 else f"finding {i}")
    mem = Memory.open(store_dir, embedder=HashEmbedder(), settings=settings)
    for i in range(4):  # unsaved: 4 of the 5 that make a save due
        mem.remember(f"filler {i}")
    mem.forget([9, 17])
    engine = mem._backend.engine
    engine.store.close()  # a crash: nothing saved on close
    engine._owner.release()
    with Memory.open(store_dir, embedder=HashEmbedder(), settings=settings) as mem:
        hits = mem.recall("acquire_lock runs before the watcher")
        assert [h.note.id for h in hits.previously] == [17]
        assert hits.previously[0].note.status == "revoked"
        assert 9 not in [h.note.id for h in mem.recall("finding 9", min_score=-1)]


def test_indexes_behind_a_purge_catch_up_on_open(store_dir):
    """A crash between a purge's commit and the index files' save: the next open reads the
    changes since the files (every note a purge scrubbed among them) and opens."""
    cell = "%remember the vault code is 0451\n%remember audits run on Fridays"
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        mem.remember("exports land in the warehouse at 02:00")
        secret = mem.remember("the vault code is 0451")
        mem.remember("audits run on Fridays", provenance=Provenance(
            notebook="/w/a.ipynb", cell_id="c1", execution_count=3, cell_source=cell))
    names = (VECTOR_FILENAME, VECTOR_FILENAME + ".json", KEYWORDS_FILENAME, CARDS_FILENAME)
    saved = {name: (store_dir / name).read_bytes() for name in names}
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        mem.purge(secret.id)
    for name, data in saved.items():  # as if the files were never saved after the purge
        (store_dir / name).write_bytes(data)
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        assert [h.note.text for h in mem.recall("vault code 0451", min_score=-1)] == [
            "audits run on Fridays", "exports land in the warehouse at 02:00"]
        assert mem.recall("0451", mode="lexical") == []
        audit = mem.get(3)
        assert "0451" not in audit.provenance.cell_source and "[purged]" in audit.provenance.cell_source


def test_recalls_after_writes_read_their_hits_from_the_cards_not_the_store(store_dir, monkeypatch):
    """The first recall that needs a block written since the cards file reads every such
    block again, in one query; the recalls after it read none. Before, every recall read
    such hits from the store until the file was due (500 changes, or a twentieth of it)."""
    from nbmemory.store.duckdb import Store

    reads, recalling = [], []
    get_notes = Store.get_notes
    monkeypatch.setattr(Store, "get_notes", lambda self, ids: (
        reads.append(list(ids)) if recalling and len(ids) else None) or get_notes(self, ids))

    def first_hit(mem, query):
        recalling.append(query)
        try:
            return mem.recall(query, mode="lexical")[0].note.text
        finally:
            recalling.pop()

    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        mem.remember_many([{"text": f"finding {i} about subject{i}"} for i in range(40)])
        mem.remember_many([{"text": f"imported {i}: a wombat in burrow{i}"} for i in range(40)])
        for i in (3, 17, 29):
            assert first_hit(mem, f"burrow{i}") == f"imported {i}: a wombat in burrow{i}"
        assert not mem._backend.engine.cards.cards.out_of_date
        mem.edit(45, text="imported 4: the wombat moved to burrow99")
        for _ in range(3):
            assert first_hit(mem, "burrow99") == "imported 4: the wombat moved to burrow99"
    assert reads == []


def test_a_large_index_copies_its_rows_from_the_store_in_one_pass(store_dir, monkeypatch):
    from nbmemory.engine.indexes import Dense

    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        for i in range(60):
            mem.remember(f"finding {i} about subject{i}")
        mem.forget(3)
        before = {i: [h.note.id for h in mem.recall(f"subject{i}", mode="dense")] for i in (5, 40)}
    monkeypatch.setattr(Dense, "_fill_below", 10)  # as for a store of more than 20k notes
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        index = mem._backend.engine.vectors
        index._filler.join(30)
        assert index.filled and len(index.rows) == 60  # a forgotten note keeps its vector
        assert {i: [h.note.id for h in mem.recall(f"subject{i}", mode="dense")]
                for i in (5, 40)} == before
        # The pass let DuckDB evict what it read by lowering its memory limit for a
        # moment: the limit is back.
        con = mem._backend.engine.store.con
        assert con.execute("SELECT current_setting('memory_limit')").fetchone()[0] == "488.2 MiB"


def test_the_copy_of_the_rows_survives_duckdb_refusing_to_let_go_of_its_pages(store_dir, monkeypatch):
    """At 1M notes a bulk write beside the copy made DuckDB refuse the moment's lower limit
    ("could not free up enough memory"); that ended the copy's thread with an exception."""
    from nbmemory.engine.indexes import Dense
    from nbmemory.store import duckdb as duckdb_store

    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        for i in range(30):
            mem.remember(f"finding {i} about subject{i}")
    monkeypatch.setattr(Dense, "_fill_below", 10)
    monkeypatch.setattr(duckdb_store, "AFTER_FULL_READ", "a limit DuckDB refuses")
    failures = []
    monkeypatch.setattr(threading, "excepthook", failures.append)
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        index = mem._backend.engine.vectors
        index._filler.join(30)
        assert failures == [] and index.filled and len(index.rows) == 30
        assert [h.note.text for h in mem.recall("subject7", mode="dense")][:1] == [
            "finding 7 about subject7"]
        con = mem._backend.engine.store.con
        assert con.execute("SELECT current_setting('memory_limit')").fetchone()[0] == "488.2 MiB"


class LoadingEmbedder(HashEmbedder):
    """A model that takes until ``ready`` is set to load, as the real one takes seconds."""

    def __init__(self):
        super().__init__()
        self.ready = threading.Event()
        self.asked = threading.Event()

    @property
    def loaded(self) -> bool:
        return self.ready.is_set()

    @property
    def dims(self) -> int:
        self.asked.set()
        self.ready.wait(60)
        return super().dims

    def encode(self, texts):
        assert self.ready.is_set(), "encoded before the model was loaded"
        return super().encode(texts)


@contextlib.contextmanager
def model_loading(store_dir, model):
    """The store opened with ``model`` while warm_up is loading it (until model.ready)."""
    with Memory.open(store_dir, embedder=model) as mem:
        warming = threading.Thread(target=mem._backend.engine.warm_up)
        warming.start()
        assert model.asked.wait(60)
        try:
            yield mem, warming
        finally:
            model.ready.set()
            warming.join(60)


def test_recall_answers_from_the_keywords_while_the_model_loads(store_dir):
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        mem.remember("the nightly export moved to Airflow in March")
        mem.remember("orders.amount is stored in cents")
    model = LoadingEmbedder()
    with model_loading(store_dir, model) as (mem, warming):
        hits = mem.recall("when did the export move to Airflow?")
        assert [h.note.id for h in hits] == [1]
        assert hits.behind == ("Keyword matches only: the model is still loading. Ask again "
                               "in a few seconds for the full search.")
        assert mem.status()["model_loading"] is True
        assert list(mem.recall("Airflow", mode="lexical")) and \
            mem.recall("Airflow", mode="lexical").behind is None
        model.ready.set()
        warming.join(60)
        hits = mem.recall("when did the export move to Airflow?", explain=True)
        assert hits.behind is None and hits[0].note.id == 1 and hits[0].dense is not None
        assert mem.status()["model_loading"] is False


def test_notes_written_while_the_model_loads_are_embedded_once_it_has(store_dir):
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        mem.remember("the nightly export moved to Airflow in March")
    model = LoadingEmbedder()
    with model_loading(store_dir, model) as (mem, warming):
        engine = mem._backend.engine
        note = mem.remember("the wombat census runs on Tuesdays", tags=["wal"])  # no wait
        assert note.id == 2
        assert [h.note.id for h in mem.recall("wombat census")] == [2]
        assert [h.note.id for h in mem.recall("wombat census", tags="wal")] == [2]
        assert (mem.status()["unembedded"], mem.status()["vectors"]) == (1, 1)
        shown = status_display(mem.status()).text
        assert "(loading: recall answers from keywords meanwhile); 1 new note waits for its vector" in shown
        model.ready.set()
        warming.join(60)
        assert (mem.status()["unembedded"], mem.status()["vectors"]) == (0, 2)
        hit = mem.recall("wombat census", explain=True)[0]
        # Embedded: its cosine, of which it keeps part (wombat and census are the query's)
        assert hit.note.id == 2 and hit.dense == pytest.approx(shown_dense(
            "wombat census", "the wombat census runs on Tuesdays"), abs=1e-3) and hit.dense > 0
        # Written while loading, then a crash before the model came: embedded after reopening.
        model = LoadingEmbedder()
        engine.embedder = model
        engine.model_loading = True
        mem.remember("the platypus survey moved to Fridays")
        engine.store.close()
        engine._owner.release()
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        assert (mem.status()["unembedded"], mem.status()["vectors"]) == (1, 2)
        hit = mem.recall("platypus survey", explain=True)[0]
        assert hit.note.id == 3 and hit.dense == pytest.approx(shown_dense(
            "platypus survey", "the platypus survey moved to Fridays"), abs=1e-3) and hit.dense > 0
        assert (mem.status()["unembedded"], mem.status()["vectors"]) == (0, 3)
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        assert mem.status()["index"] == "loaded" and mem.status()["vectors"] == 3


def test_a_note_edited_before_its_first_vector_keeps_the_vector_of_its_new_text(store_dir):
    """Written while the model loaded, then edited (which embeds at once): the vector still
    to make, of the first text, replaced the edit's, so recall found it by the old text."""
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        mem.remember("the nightly export moved to Airflow in March")
        engine = mem._backend.engine
        engine.model_loading = True  # as while it loads: the note waits for its vector
        note = mem.remember("orders.amount is stored in cents before 2021")
        assert mem.status()["unembedded"] == 1
        mem.edit(note.id, text="kittens like to sleep in cardboard boxes")
        engine.model_loading = False
        hits = mem.recall("kittens sleep in cardboard boxes", mode="dense", explain=True)
        assert hits[0].note.id == note.id and hits[0].dense == pytest.approx(shown_dense(
            "kittens sleep in cardboard boxes", "kittens like to sleep in cardboard boxes",
            mode="dense"), abs=1e-3) and hits[0].dense > 0.3
        old = mem.recall("orders.amount is stored in cents before 2021", mode="dense",
                         explain=True)
        assert [h.dense for h in old if h.note.id == note.id] < [0.5]
        assert mem.status()["unembedded"] == 0


def test_a_snapshot_recalls_the_notes_embedded_after_its_first_recall(store_dir):
    """A snapshot's view, built while a note still waited for its vector, left it out until
    the owner restarted."""
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        mem.remember("the nightly export moved to Airflow in March")
        engine = mem._backend.engine
        engine.model_loading = True
        note = mem.remember("the wombat census runs on Tuesdays")
        mem.snapshot("before")
        assert [h.note.id for h in mem.recall("wombat census", as_of="before")] == []
        engine.model_loading = False
        assert [h.note.id for h in mem.recall("wombat census")] == [note.id]  # embeds it
        assert [h.note.id for h in mem.recall("wombat census", as_of="before")] == [note.id]


def test_a_write_whose_index_update_fails_says_it_was_written(store_dir, monkeypatch):
    """The vector index failed to take a committed note (out of memory): the error read as
    if nothing was stored, so a retry wrote it twice, and recall then failed on KeyError."""
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        mem.remember("the nightly export moved to Airflow in March")
        dense = mem._backend.engine.dense

        def fail(changes):
            raise MemoryError("no room for the vector")
        monkeypatch.setattr(dense, "apply_many", fail)
        with pytest.raises(NbMemoryError, match=re.escape(
                "This was written, but this process's indexes could not take it (MemoryError: "
                "no room for the vector), so recall may miss it: rebuild them with "
                "Memory.reindex(), or open the store again. Do not send it again.")):
            mem.remember("orders.amount is stored in cents before 2021")
        monkeypatch.undo()
        assert [n.id for n in mem.notes().notes] == [2, 1]
        assert [h.note.id for h in mem.recall("orders amount stored in cents")] == [2]
        mem.reindex()
        hit = mem.recall("orders amount stored in cents", explain=True)[0]
        assert hit.note.id == 2 and hit.dense == pytest.approx(shown_dense(
            "orders amount stored in cents", "orders.amount is stored in cents before 2021"),
            abs=1e-3) and hit.dense > 0


def test_a_large_store_without_its_vector_file_answers_while_the_graph_builds(store_dir):
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        mem.remember_many([{"text": f"finding {i} about subsystem s{i}"} for i in range(2500)])
    (store_dir / VECTOR_FILENAME).unlink()
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        engine = mem._backend.engine
        builder = engine.vectors._builder
        assert builder is not None and mem.status()["index"].startswith("building ")
        assert mem.status()["index"].endswith(
            " (no index file) (recall searches exactly meanwhile)")  # why it is built
        assert mem.recall("finding 1234 about subsystem s1234")[0].note.id == 1235
        mem.remember("written while the graph is built: the kelpie module")
        assert engine.vectors.wait(120)
        assert mem.status()["index"] == "rebuilt (no index file)"
        assert (store_dir / VECTOR_FILENAME).exists()
        assert mem.recall("the kelpie module")[0].note.id == 2501
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        assert mem.status()["index"] == "loaded" and mem.status()["vectors"] == 2501


def test_vector_file_is_replaced_atomically(store_dir):
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        mem.remember("x")
    leftovers = [p for p in os.listdir(store_dir) if p.endswith(".tmp")]
    assert leftovers == []
    meta = json.loads((store_dir / (VECTOR_FILENAME + ".json")).read_text())
    assert meta["embedder"] == "hash:64" and meta["count"] == 1


def test_model_change_is_detected_and_reembed_switches(store_dir):
    with Memory.open(store_dir, embedder=HashEmbedder(64)) as mem:
        mem.remember("orders.amount is in cents")
    with Memory.open(store_dir, embedder=HashEmbedder(32, name="other")) as mem:
        with pytest.raises(EmbedderMismatch, match=r"made with hash:64, but the configured model "
                                                   r"is 'other'.*Memory.reembed\(\)"):
            mem.recall("cents")
        with pytest.raises(EmbedderMismatch):
            mem.remember("new note")
        assert mem.notes().total == 1
        seen = []
        result = mem.reembed(progress=lambda done, total: seen.append((done, total)))
        assert result == {"from": "hash:64", "to": "other:32", "embedded": 1}
        assert seen == [(1, 1)]
        assert mem.recall("cents")[0].note.id == 1
    with Memory.open(store_dir, embedder=HashEmbedder(32, name="other")) as mem:
        assert mem.status()["model"] == "other:32"


def test_a_reembed_leaves_the_store_answering_while_it_embeds(store_dir):
    """A re-embed held the engine's lock from the first text to the last: on a large store
    the panel's status and lists, and every other call, waited for minutes."""
    with Memory.open(store_dir, embedder=HashEmbedder(64)) as mem:
        mem.remember_many([f"finding {i} about module m{i}" for i in range(40)])
    embedding, go_on = threading.Event(), threading.Event()
    Held = holding_chunks(HashEmbedder, embedding, go_on)
    with Memory.open(store_dir, embedder=Held(32, name="other")) as mem:
        results, answers = [], {}
        switching = threading.Thread(target=lambda: results.append(mem.reembed()))
        switching.start()
        assert embedding.wait(30)

        def meanwhile():
            status = mem.status()
            answers["status"] = (status["notes"], status["model"], status["mismatch"])
            answers["listed"] = mem.notes(limit=1).notes[0].id

        assert ran_while_held(meanwhile, go_on, switching), "the status waited for the re-embed"
        assert answers == {"status": (40, "hash:64", True), "listed": 40}
        assert results == [{"from": "hash:64", "to": "other:32", "embedded": 40}]
        assert mem.recall("finding 7 about module m7")[0].note.id == 8


def test_a_note_purged_while_a_reembed_embeds_gets_no_vector_back(store_dir):
    """The re-embed read the texts, then wrote their vectors once embedded: a note purged
    meanwhile (its text and vectors erased for good) had its vector written back, and a
    full export carried it."""
    with Memory.open(store_dir, embedder=HashEmbedder(64)) as mem:
        mem.remember_many([f"finding {i} about module m{i}" for i in range(5)])
        secret = mem.remember("the API key is sk-SECRET-123")
    embedding, go_on = threading.Event(), threading.Event()
    Held = holding_chunks(HashEmbedder, embedding, go_on)
    with Memory.open(store_dir, embedder=Held(32, name="other")) as mem:
        switching = threading.Thread(target=mem.reembed)
        switching.start()
        assert embedding.wait(30)
        mem.purge(secret.id)
        go_on.set()
        switching.join(30)
        store = mem._backend.engine.store
        assert store.con.execute("SELECT count(*) FROM embeddings WHERE content_hash NOT IN "
                                 "(SELECT content_hash FROM note_versions)").fetchone() == (0,)
        assert mem.status()["vectors"] == 5


def test_two_reembeds_at_once_embed_each_text_once(store_dir):
    """While one re-embed runs the store still says its model differs, and status says to
    re-embed: a second one encoded every text again, and both said they had."""
    with Memory.open(store_dir, embedder=HashEmbedder(64)) as mem:
        mem.remember_many([f"finding {i} about module m{i}" for i in range(300)])
    encoded = []

    class Counting(HashEmbedder):
        def encode(self, texts):
            if len(texts) > 1:
                encoded.append(len(texts))
            return super().encode(texts)

    with Memory.open(store_dir, embedder=Counting(32, name="other"), mode="local") as mem:
        results = []
        both = [threading.Thread(target=lambda: results.append(mem.reembed())) for _ in "ab"]
        for thread in both:
            thread.start()
        for thread in both:
            thread.join(60)
        assert sorted(r["embedded"] for r in results) == [0, 300] and sum(encoded) == 300


def test_store_from_a_newer_version_is_refused_untouched(store_dir):
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        mem.remember("keep me")
    store = Store(store_dir)
    store.con.execute("INSERT INTO migrations VALUES ('m999_from_the_future', now())")
    store.close()
    before = (store_dir / "memory.duckdb").read_bytes()
    with pytest.raises(StoreTooNew, match="written by a newer nbmemory.*m999_from_the_future"):
        Memory.open(store_dir, embedder=HashEmbedder())
    assert (store_dir / "memory.duckdb").read_bytes() == before


def test_unreadable_store_gives_a_clear_error(store_dir):
    store_dir.mkdir()
    (store_dir / "memory.duckdb").write_bytes(b"this is not a database" * 100)
    from nbmemory.errors import StoreUnavailable

    with pytest.raises(StoreUnavailable, match="is unreadable"):
        Memory.open(store_dir, embedder=HashEmbedder())


def test_exact_and_approximate_dense_search_agree(store_dir):
    """Above exact_below the dense channel uses the HNSW graph; results stay the same."""
    texts = [f"topic {i} concerns module m{i} and function f{i * 7}" for i in range(300)]
    results = []
    for exact_below in (10**6, 10):
        directory = store_dir.parent / f"s{exact_below}"
        with Memory.open(directory, embedder=HashEmbedder(),
                         settings=Settings(exact_below=exact_below)) as mem:
            mem.remember_many(texts)
            results.append([h.note.id for h in mem.recall("module m42 function", k=3)])
    assert results[0] == results[1]
    assert results[0][0] == 43


def test_vectors_match_the_embedder(engine):
    note_text = "vectors are normalised"
    engine.remember(note_text)
    keys, matrix = engine.store.vectors("hash", [1])
    expected = HashEmbedder().encode([note_text])[0]
    # Kept in half precision: within float16's rounding of the embedder's vector, and
    # exactly what the index was given, so a rebuilt index scores as the live one.
    np.testing.assert_allclose(matrix[0], expected, atol=1e-3)
    np.testing.assert_array_equal(matrix[0], as_stored(expected))
    (blob,) = engine.store.con.execute("SELECT vector FROM embeddings").fetchone()
    assert len(blob) == 4 + 2 * len(expected)


def test_vectors_written_in_full_precision_before_still_read(engine):
    """A store from before half precision holds float32 rows; new rows sit beside them."""
    texts = ["written before half precision", "written after it"]
    for text in texts:
        engine.remember(text)
    old = HashEmbedder().encode(texts[:1])[0]
    engine.store.con.execute("UPDATE embeddings SET vector = ? WHERE content_hash = ?",
                             [old.astype(np.float32).tobytes(), content_hash(texts[0])])
    keys, matrix = engine.store.vectors("hash")
    assert keys.tolist() == [1, 2]
    np.testing.assert_array_equal(matrix[0], old)
    np.testing.assert_array_equal(matrix[1], as_stored(HashEmbedder().encode(texts[1:])[0]))
    chunks = list(engine.store.vector_chunks("hash", ["active"]))
    assert sorted(k for keys, _ in chunks for k in keys.tolist()) == [1, 2]
    np.testing.assert_array_equal(
        engine.store.vectors_by_hash("hash", [content_hash(texts[0])])[content_hash(texts[0])], old)


def test_same_model_name_with_other_dims_is_a_mismatch(store_dir):
    with Memory.open(store_dir, embedder=HashEmbedder(64)) as mem:
        mem.remember("x")
    with Memory.open(store_dir, embedder=HashEmbedder(32)) as mem:
        with pytest.raises(EmbedderMismatch, match="made with hash:64, but the configured model is 'hash:32'"):
            mem.recall("x")
        status = mem.status()  # both as name:dims ("hash" alone named neither)
        assert (status["model"], status["configured_model"], status["mismatch"]) == (
            "hash:64", "hash:32", True)


def test_a_model_this_machine_lacks_is_not_advised_to_reembed_with(store_dir):
    with Memory.open(store_dir, embedder=HashEmbedder(64)) as mem:
        mem.remember("x")
    with Memory.open(store_dir, model="no-such-model", mode="local") as mem:
        with pytest.raises(ModelUnavailable) as caught:
            mem.recall("x")
    assert str(caught.value) == (
        "This store's vectors were made with hash:64, and the configured model 'no-such-model' "
        "is not on this machine to load offline (a typo, or not in the Hugging Face cache). "
        "Set the model back to 'hash'.")  # the test embedder's name


def test_store_location_precedence_and_reason(tmp_path):
    from nbmemory.config import locate_store

    repo = tmp_path / "repo"
    deep = repo / "analysis" / "q3"
    deep.mkdir(parents=True)
    plain = tmp_path / "plain"
    plain.mkdir()
    (repo / ".git").mkdir()
    home = {"NBMEMORY_HOME": str(tmp_path / "shared")}

    def where(cwd, explicit=None, environ=None):
        location = locate_store(explicit, cwd=cwd, environ=environ or {})
        return location.path, location.reason

    assert where(plain) == (plain / ".nbmemory", "working directory, no git repository")
    assert where(deep) == (repo / ".nbmemory", f"git root of {deep}")
    (repo / "analysis" / ".nbmemory").mkdir()
    assert where(deep) == (repo / "analysis" / ".nbmemory", f"nearest .nbmemory/ above {deep}")
    assert where(deep, environ=home) == (tmp_path / "shared", "from NBMEMORY_HOME")
    assert where(deep, tmp_path / "mine", home) == (tmp_path / "mine", "given explicitly")


def test_a_store_created_in_a_git_repository_is_ignored_by_git(tmp_path):
    import subprocess

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    with Memory.open(tmp_path / ".nbmemory", embedder=HashEmbedder(), mode="local") as mem:
        mem.remember("orders.amount is in cents")
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"],
                            cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert status == ""


@pytest.mark.parametrize("call, message", [
    (lambda m: m.recall("hi", k=3_000_000_000), "k must be at least 1 and at most 1,000"),
    (lambda m: m.recall("hi", k=True), "k must be a whole number from 1 to 1,000"),
    (lambda m: m.recall("hi", k="5"), "k must be a whole number"),
    (lambda m: m.notes(offset=2**63), "offset must be at least 0 and at most"),
    (lambda m: m.notes(limit=0), "limit must be at least 1"),
    (lambda m: m.notes(limit=2**31), "limit must be at least 1 and at most 1,000,000"),
    (lambda m: m.similar(1, k=10**9), "k must be at least 1 and at most 1,000"),
])
def test_counts_out_of_range_are_refused_and_the_store_keeps_working(memory, call, message):
    memory.remember("one finding")
    with pytest.raises(InvalidInput, match=message):
        call(memory)
    assert memory.status()["notes"] == 1 and len(memory.recall("finding")) == 1


def test_index_files_of_another_store_are_never_taken_for_this_ones(tmp_path):
    """Two stores number their notes alike: an index file copied from one into the other
    matched its ids and journal position and was used, so recall read one store's notes
    by the other's words and vectors. The keyword index and the cards are rebuilt; the
    vector index, the evidence a database was replaced, is refused untouched."""
    import shutil

    from nbmemory.errors import StoreDamaged

    here, there = tmp_path / "here", tmp_path / "there"
    for store, topic in ((here, "penguin bill length"), (there, "flight departure delay")):
        with Memory.open(store, embedder=HashEmbedder()) as mem:
            for i in range(3):
                mem.remember(f"{topic} finding {i}")
    for name in ("keywords.index", "cards.index"):
        shutil.copy(there / name, here / name)
    with Memory.open(here, embedder=HashEmbedder()) as mem:
        status = mem.status()
        assert status["keywords"].startswith("rebuilt (written for another store (")
        assert status["cards"].startswith("rebuilt (written for another store (")
        hits = mem.recall("penguin", mode="lexical")
        assert [h.note.text for h in hits][:1] == ["penguin bill length finding 0"]
        assert not mem.recall("flight departure", mode="lexical", min_score=0)

    shutil.copy(there / "memory.duckdb", here / "memory.duckdb")  # the wrong database back
    before = (here / "vectors.usearch").read_bytes()
    with pytest.raises(StoreDamaged, match=r"has a vector index written for another store "
                                           r"\(\w{8}; this one is \w{8}\)\. Nothing was changed\. "
                                           r"If memory.duckdb was replaced by another store's, "
                                           r"put this store's back"):
        Memory.open(here, embedder=HashEmbedder())
    assert (here / "vectors.usearch").read_bytes() == before
    for name in ("vectors.usearch", "vectors.usearch.json"):
        (here / name).rename(tmp_path / name)
    with Memory.open(here, embedder=HashEmbedder()) as mem:  # this database, as it is
        assert [h.note.text for h in mem.recall("flight departure", mode="dense")][:1] == \
            ["flight departure delay finding 0"]


def test_a_database_that_lost_what_its_index_saw_is_refused_untouched(store_dir):
    import shutil

    from nbmemory.errors import StoreDamaged

    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        for i in range(3):
            mem.remember(f"finding {i} kept in both files")
    shutil.copy(store_dir / "memory.duckdb", store_dir.parent / "older.duckdb")
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        for i in range(3):
            mem.remember(f"finding {i} that only the index will remember")
    # The database goes back to its older copy (a damaged write-ahead log loses the same).
    shutil.copy(store_dir.parent / "older.duckdb", store_dir / "memory.duckdb")
    before = {p.name: p.read_bytes() for p in store_dir.iterdir() if p.is_file()
              and p.suffix != ".lock"}
    with pytest.raises(StoreDamaged, match=r"has lost writes: its vector index saw journal "
                                           r"position 6, the database ends at 3\. Nothing was "
                                           r"changed\..*moving vectors.usearch"):
        Memory.open(store_dir, embedder=HashEmbedder())
    after = {p.name: p.read_bytes() for p in store_dir.iterdir() if p.is_file()
             and p.suffix != ".lock"}
    assert after == before  # the evidence is intact
    (store_dir / "vectors.usearch").rename(store_dir.parent / "evidence.usearch")
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        assert mem.status()["notes"] == 3 and mem.status()["vectors"] == 3


@pytest.mark.parametrize("call, message", [
    (lambda m: m.forget(None), "A note id is a whole number like 12, not None"),
    (lambda m: m.forget(1.0), "A note id is a whole number like 12, not 1.0"),
    (lambda m: m.forget([True]), "not True"),
    (lambda m: m.get("1"), "not '1'"),
    (lambda m: m.reinstate(0), "No note #0: note ids start at 1"),
    (lambda m: m.remember("fine", tags=[f"t{i}" for i in range(101)]),
     "101 tags; a note or a filter takes at most 100"),
    (lambda m: m.recall("fine", tags=",".join(f"t{i}" for i in range(5000))),
     "5,000 tags; a note or a filter takes at most 100"),
    (lambda m: m.notes(tags=[f"t{i}" for i in range(5000)]), "5,000 tags"),
    (lambda m: m.remember("fine", tags=[f"t{i}" for i in range(100_000)]), "100,000 tags"),
    (lambda m: m.remember("fine", tags=["a,b"]),
     "Tag 'a,b' contains a comma; give each tag as its own item"),
    (lambda m: m.remember("fine", tags=["t\x01"]),
     "contains a control character; tags are words"),
    (lambda m: m.snapshot("nul\x01x"), "a name without spaces, quotes or control characters"),
    (lambda m: m.remember("fine", provenance=Provenance(cell_id="c\ud800")),
     "Provenance field 'cell_id' holds characters that are not valid Unicode"),
    (lambda m: m.recall("x", since=datetime(9999, 12, 31, 23, 59, tzinfo=timezone(
        -timedelta(hours=23, minutes=59)))), "since 9999-12-31T23:59:00-23:59 is out of range"),
    (lambda m: m.recall(b"orders"), "^The query is bytes; decode it to text first"),
    (lambda m: m.recall(42), "^The query must be text, not int$"),
    (lambda m: m.recall("x", stale="no"), "^stale is True \\(only stale notes\\), False \\(only "
                                          "fresh ones\\) or None \\(both\\), not 'no'$"),
    (lambda m: m.notes(stale=1.5), "^stale is True"),
    (lambda m: m.remember("fine", author=5), "^An author is a user name of at most"),
    (lambda m: m.recall("x", since=5), "^since is a datetime, a date or text like 2024-03-01, "
                                         "not int 5$"),
    (lambda m: m.notes(until="last tuesday"), "^until is a date or time like 2024-03-01 or "
                                              "2024-03-01T14:30, not 'last tuesday'$"),
    (lambda m: m.remember(b"x"), "The note is bytes; decode it to text first"),
    (lambda m: m.remember(42), "The note must be text, not int"),
    (lambda m: m.remember("ok \ud800 text"), "not valid Unicode"),
    (lambda m: m.remember("fine", tags=["\udcff"]), "A tag is not UTF-8"),
    (lambda m: m.remember("fine", tags=7), "Tags are a list or a comma-separated string"),
    (lambda m: m.remember("fine", kind=3), "The kind must be text"),
    (lambda m: m.remember("fine", supersedes=True), "A note id is a whole number"),
    (lambda m: m.recall("q \ud83d"), "The query holds characters"),
    (lambda m: m.snapshot("x" * 1_000_000), "keep it under 200"),
    (lambda m: m.snapshot("s\udc80"), "The snapshot's name is not UTF-8"),
    (lambda m: m.snapshot_diff("\udc80"), "A snapshot's name is not UTF-8"),
    # Bytes Python could not read as UTF-8 (a Latin-1 terminal or file): said in words.
    (lambda m: m.remember("caf\udce9"), "^The note is not UTF-8: it reads as text in another "
                                         "encoding \\(Latin-1 or cp1252, say\\). Convert it to "
                                         "UTF-8 first, e.g. iconv -f cp1252 -t utf-8$"),
    (lambda m: m.remember("\ufeff\u200b \u200b"), "^The note is empty"),  # nothing visible
    (lambda m: m.remember("\x00\x01\x1b \u00ad"), "^The note is empty"),  # control characters
    (lambda m: m.edit(1, text="\x00"), "^The note is empty"),
])
def test_wrong_types_get_our_own_clear_error_and_change_nothing(memory, call, message):
    memory.remember("one finding")
    before = memory.status()["journal_position"]
    with pytest.raises(InvalidInput, match=message):
        call(memory)
    assert memory.status()["journal_position"] == before


def test_min_score_is_any_number_from_minus_one_to_one(memory):
    memory.remember("orders.amount is in cents")
    assert len(memory.recall("orders amount", min_score=np.float32(0.1))) == 1
    for wrong in (1.5, -2, "0.2", True):
        with pytest.raises(InvalidInput, match=f"min_score is a score from -1 to 1 .*, not "
                                               f"{re.escape(repr(wrong))}$"):
            memory.recall("orders amount", min_score=wrong)


def test_an_id_past_any_store_is_not_found_like_any_other(memory):
    for call in (memory.forget, memory.get, memory.reinstate):
        with pytest.raises(NotFound, match=f"^No note #{10**23}. Recall or list notes"):
            call(10**23)


def test_note_priorities_read_like_the_dict_they_replace():
    from nbmemory.engine.state import Priorities

    priorities = Priorities(np.array([2, 5, 9]), np.array([0, 1, 2], np.int8))
    assert (len(priorities), priorities.get(2), priorities.get(5), priorities.get(9)) == (
        3, "high", "medium", "low")
    assert priorities.get(3, "medium") == "medium" and priorities.get(10**6) is None
    assert 5 in priorities and 3 not in priorities and -1 not in priorities
    priorities[12] = "high"  # past the end: grows
    priorities[5] = "low"  # replaced, not counted twice
    assert (len(priorities), priorities.get(12), priorities.get(5)) == (4, "high", "low")
    assert priorities.pop(2) == "high" and priorities.pop(2, "gone") == "gone"
    assert len(priorities) == 3 and 2 not in priorities
    codes = priorities.codes([5, 2, 12, 10**6, -3, 9])
    assert [PRIORITIES[c] for c in codes] == ["low", "medium", "high", "medium", "medium", "low"]


def test_text_tags_and_snapshot_names_are_read_as_typed_on_any_keyboard(memory):
    """A file's byte order mark and zero-width spaces at the ends are not the note; tags
    typed with a full-width or ideographic comma are several; an accent typed as its own
    character (macOS) names the same tag and snapshot as the composed one."""
    note = memory.remember("\ufeffUmsätze in Cent\u200b", tags="收入，退款、cafe\u0301")
    assert note.text == "Umsätze in Cent"
    assert note.tags == ("收入", "退款", "caf\u00e9")
    assert memory.notes(tags="caf\u00e9").total == memory.notes(tags="cafe\u0301").total == 1
    memory.snapshot("e\u0301tat")
    assert [s.name for s in memory.snapshots()] == ["\u00e9tat"]
    assert memory.snapshot_diff("\u00e9tat").a == memory.snapshot_diff("e\u0301tat").a


NUL_REFUSED = re.escape("contains a NUL character (U+0000), which a store cannot keep; remove it "
                        "and try again") + "$"


@pytest.mark.parametrize("call, what", [
    (lambda m, q: m.remember("orders\x00amount is in cents"), "The note"),
    (lambda m, q: m.edit(q, text="now in\x00 euros"), "The note"),
    (lambda m, q: m.remember("fine", tags=["t\x00"]), "A tag"),
    (lambda m, q: m.remember("fine", author="ada\x00"), "The author"),
    (lambda m, q: m.remember("fine", provenance=Provenance(notebook="a\x00.ipynb")),
     "Provenance field 'notebook'"),
    (lambda m, q: m.recall("orders\x00"), "The query"),
    (lambda m, q: m.recall("orders", author="ada\x00"), "The author"),
    (lambda m, q: m.notes(author="ada\x00"), "The author"),
    (lambda m, q: m.snapshot("nul\x00x"), "The snapshot's name"),
    (lambda m, q: m.snapshot("sealed", message="before\x00 the fix"), "The snapshot's message"),
    (lambda m, q: m.snapshot("sealed", author="ada\x00"), "The author"),
    (lambda m, q: m.snapshot_diff("nul\x00x"), "A snapshot's name"),
    (lambda m, q: m.confirm(q, "checked\x00"), "The reason"),
    (lambda m, q: m.refute(q, "the join\x00"), "The reason"),
    (lambda m, q: m.forget(q, actor="bo\x00"), "The author"),
])
def test_a_nul_character_is_refused_in_any_text_the_same_in_every_store(memory, call, what):
    """PostgreSQL's text cannot hold NUL: it is refused up front, with one message, whichever
    store; the store keeps working (a NUL in a query once broke every later status)."""
    question = memory.remember("does the join drop the nulls?", kind="question").id
    before = memory.status()["journal_position"]
    with pytest.raises(InvalidInput, match=f"^{re.escape(what)} {NUL_REFUSED}"):
        call(memory, question)
    assert memory.status()["journal_position"] == before
    assert [h.note.id for h in memory.recall("join nulls")] == [question]


def test_a_filter_of_several_tags_keeps_the_notes_holding_all_of_them(memory):
    both = memory.remember("amount is in cents", tags="orders,units").id
    orders = memory.remember("amount is summed per order", tags="orders").id
    units = memory.remember("amount units differ by year", tags="units,legacy").id
    assert [h.note.id for h in memory.recall("amount", tags="orders,units", min_score=-1)] == [both]
    assert {h.note.id for h in memory.recall("amount", tags="units", min_score=-1)} == {both, units}
    assert {n.id for n in memory.notes(tags="orders").notes} == {both, orders}
    assert [n.id for n in memory.notes(tags="orders,units").notes] == [both]
    assert len(memory.recall("amount", tags="orders,legacy", min_score=-1)) == 0


def test_a_note_follows_its_authors_previous_one_whether_written_now_or_read_on_open(memory, engine):
    from datetime import datetime, timedelta, timezone

    from nbmemory.engine.state import Neighbours
    from nbmemory.store.filters import NEIGHBOUR_GAP_S

    memory_ids = [memory.remember(text, author=who).id for text, who in [
        ("the nightly export moved to airflow", "ana"), ("it retries a failed dag three times", "ana"),
        ("penguin bills are longest in gentoos", "ben"), ("and the export now runs at 02:00", "ana")]]
    first, second, other, fourth = memory_ids
    written = engine.state.neighbours
    expected = {first: -1, second: first, other: -1, fourth: second}
    assert {i: int(written.before[i]) for i in memory_ids} == expected
    assert int(written.after[first]) == second and int(written.after[other]) == -1
    engine.open_indexes()  # the same links, read from the store
    read = engine.state.neighbours
    assert {i: int(read.before[i]) for i in memory_ids} == expected
    assert {i: int(read.after[i]) for i in memory_ids} == {first: second, second: fourth,
                                                           other: -1, fourth: -1}
    # A note written after a longer gap follows none.
    later = Neighbours()
    start = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)
    later.created(1, "ana", start)
    later.created(2, "ana", start + timedelta(seconds=NEIGHBOUR_GAP_S))
    later.created(3, "ana", start + timedelta(seconds=2 * NEIGHBOUR_GAP_S + 1))
    assert later.before[1:4].tolist() == [-1, 1, -1]


def test_recalls_and_writes_go_on_while_a_bulk_remember_embeds(tmp_path):
    """remember_many embedded each chunk holding the engine's lock, and took the lock back
    at once after each: a 5,000-note load kept the panel's status waiting 37 s and a
    kernel's recall past its 30 s notice. It embeds each chunk before taking the lock."""
    embedding, go_on = threading.Event(), threading.Event()
    Held = holding_chunks(HashEmbedder, embedding, go_on)
    with Memory.open(tmp_path / "store", embedder=Held()) as mem:
        mem.remember("the nightly export lands at 02:00")
        written, answers = [], {}
        loading = threading.Thread(target=lambda: written.extend(mem.remember_many(
            [f"finding {i} about module m{i}" for i in range(40)])))
        loading.start()
        assert embedding.wait(30)

        def meanwhile():
            answers["recalled"] = [h.note.text for h in mem.recall("nightly export")]
            answers["remembered"] = mem.remember("written while the bulk load embeds").id
            answers["notes"] = mem.status()["notes"]

        assert ran_while_held(meanwhile, go_on, loading), \
            "the recall, the write and the status waited for the bulk load"
        assert answers == {"recalled": ["the nightly export lands at 02:00"], "remembered": 2,
                           "notes": 2}
        assert [n.id for n in written] == list(range(3, 43))
        assert mem.recall("finding 7 about module m7")[0].note.id == 10
        assert mem.status()["vectors"] == 42


def test_a_resent_bulk_remember_embeds_nothing_again(tmp_path):
    """A resent remember_many (the client sends a write again after its owner died) embedded
    every note of it again before finding them written: minutes of CPU for a large load."""
    encoded = []

    class Counting(HashEmbedder):
        def encode(self, texts):
            encoded.extend(texts)
            return super().encode(texts)

    notes = [f"finding {i} about module m{i}" for i in range(300)]
    with Memory.open(tmp_path / "store", embedder=Counting()) as mem:
        first = mem.remember_many(notes, request_id="load-1")
        assert len(encoded) == 300
        again = mem.remember_many(notes, request_id="load-1")
        assert [n.id for n in again] == [n.id for n in first] and len(encoded) == 300


@pytest.mark.parametrize("model, call, said", [
    ({}, lambda mem: mem.remember_many([f"note {i}" for i in range(10)]),
     "The store was closed during a bulk remember: 0 of 10 notes were remembered."),
    ({"dims": 32, "name": "other"}, lambda mem: mem.reembed(),
     "The store was closed while its notes were embedded: 0 of 2 texts were embedded and "
     "kept; run it again to finish."),
])
def test_a_store_closed_while_a_call_embeds_says_how_far_it_got(tmp_path, model, call, said):
    """The lock is free while a chunk is embedded, so a close may come meanwhile: the call
    then failed with DuckDB's "Connection already closed!"."""
    with Memory.open(tmp_path / "store", embedder=HashEmbedder(64)) as mem:
        mem.remember_many(["written before", "and this"])
    embedding, go_on = threading.Event(), threading.Event()
    Held = holding_chunks(HashEmbedder, embedding, go_on)
    mem = Memory.open(tmp_path / "store", embedder=Held(**model), mode="local")
    failed = []

    def work():
        try:
            call(mem)
        except Exception as exc:  # noqa: BLE001 - asserted below
            failed.append(exc)

    working = threading.Thread(target=work)
    working.start()
    assert embedding.wait(30)
    mem.close()
    go_on.set()
    working.join(30)
    assert [str(e) for e in failed] == [said]
    assert isinstance(failed[0], StoreUnavailable)
    with Memory.open(tmp_path / "store", embedder=HashEmbedder(64)) as again:
        assert again.status()["notes"] == 2
