from nbmemory.lexical import LexicalIndex, tokenize


def test_identifiers_are_kept_whole_and_split():
    tokens = tokenize("PyObject_GC_Del frees orders.amount in src/app/db.py")
    assert "pyobject_gc_del" in tokens
    assert {"gc", "del", "object"} <= set(tokens)
    assert "orders.amount" in tokens and "amount" in tokens
    assert "src/app/db.py" in tokens


def test_stemming_and_stopwords():
    assert tokenize("The databases are running") == ["databas", "run"]


def test_bm25_prefers_the_document_with_the_rare_exact_identifier():
    index = LexicalIndex()
    index.add(1, "amount columns are summed per order")
    index.add(2, "orders.amount is stored in cents")
    index.add(3, "the order table has an amount")
    ids, scores = index.score("orders.amount")
    assert ids[0] == 2
    assert scores[0] > scores[1]


def test_remove_and_replace_update_scores():
    index = LexicalIndex()
    index.add(1, "watcher races the lock")
    index.add(2, "nothing to see")
    index.remove(1)
    assert list(index.score("watcher")[0]) == []
    index.add(2, "the watcher again")
    assert list(index.score("watcher")[0]) == [2]
    assert len(index) == 1


def test_candidates_restrict_results():
    index = LexicalIndex()
    for i in range(1, 6):
        index.add(i, f"lock number {i}")
    import numpy as np

    ids, _ = index.score("lock", candidates=np.array([2, 4]))
    assert sorted(ids.tolist()) == [2, 4]
