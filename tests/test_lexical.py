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


def test_qualified_names_also_match_their_segments():
    assert "retryerror" in tokenize("requests.exceptions.RetryError is raised")
    assert "dep_time" in tokenize("flights.dep_time is HHMM")
    index = LexicalIndex()
    index.add(1, "flights.dep_time is an HHMM integer")
    index.add(2, "dep is short for departure; time zones differ")
    ids, _ = index.score("dep_time")
    assert ids[0] == 1


def test_query_terms_no_note_contains_still_count_in_the_scale():
    index = LexicalIndex()
    index.add(1, "the session client reuses sockets")
    index.add(2, "orders.amount is stored in cents")
    assert index.max_score("client zebra quasar") > index.max_score("client")
    ids, scores = index.score("client zebra quasar")
    assert list(ids) == [1]
    # One common word out of three is a small share of the query, not a full match.
    assert scores[0] / index.max_score("client zebra quasar") < 0.5
    ids, scores = index.score("orders.amount")
    assert scores[0] / index.max_score("orders.amount") > 0.8
