"""Recall over a store where most of what matches is no longer active: the hits are the
active notes, the work stays bounded (the channels do not ask for every revoked note)."""

from nbmemory.ranking import rank_arrays


def test_revoked_notes_do_not_crowd_out_the_active_ones(memory, monkeypatch):
    ids = [memory.remember(f"the watcher races acquire_lock in worker {i}").id for i in range(80)]
    memory.forget(ids[:75])
    engine = memory._backend.engine
    asked = []
    search = type(engine.vectors).search
    monkeypatch.setattr(type(engine.vectors), "search",
                        lambda self, q, n, **kw: (asked.append(n), search(self, q, n, **kw))[1])
    hits = memory.recall("watcher races acquire_lock", k=3, min_score=-1)
    assert len(hits) == 3 and {h.note.id for h in hits} <= set(ids[75:])
    assert len(hits.previously) <= 3
    assert {h.note.id for h in hits.previously} <= set(ids[:75])
    assert asked and max(asked) <= len(engine.vectors)


def test_names_in_a_namespace_find_active_notes_past_revoked_ones(memory):
    ids = [memory.remember(f"orders_total is computed twice, copy {i}").id for i in range(12)]
    memory.forget(ids[:10])
    hits = memory.recall_terms(["orders_total"], k=2)
    assert sorted(h.note.id for h in hits) == ids[10:]


def test_ranked_candidates_are_the_union_of_both_channels_in_id_order(memory):
    for text in ("orders.amount is in cents", "the watcher races the lock", "cents and dollars"):
        memory.remember(text)
    engine = memory._backend.engine
    qvec = engine.embedder.encode(["orders.amount cents"])[0]
    ranked = rank_arrays("orders.amount cents", qvec, engine.lexical, engine.vectors,
                         candidates=None, pool=2, exact_below=100)
    assert ranked.ids.tolist() == sorted(ranked.ids.tolist())
    assert len(ranked.ids) == len(ranked.score) == len(ranked.lexical) == len(ranked.dense)
    assert 1 in ranked.ids.tolist() and ranked.lexical[ranked.ids.tolist().index(1)] > 0.5


def test_similar_notes_are_found_past_revoked_ones(memory):
    ids = [memory.remember(f"the watcher races acquire_lock in worker {i}").id for i in range(30)]
    memory.forget(ids[1:28])
    similar = memory.similar(ids[0], k=3, min_similarity=-1)
    assert sorted(h.note.id for h in similar) == ids[28:]

