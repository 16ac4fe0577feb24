import numpy as np
import pytest

from nbmemory.lexical import LexicalIndex, tokenize


def test_identifiers_are_kept_whole_and_split():
    tokens = tokenize("PyObject_GC_Del frees orders.amount in src/app/db.py")
    assert "pyobject_gc_del" in tokens
    assert {"gc", "del", "object"} <= set(tokens)
    assert "orders.amount" in tokens and "amount" in tokens
    assert "src/app/db.py" in tokens


def test_stemming_and_stopwords():
    assert tokenize("The databases are running") == ["databas", "run"]


def test_words_in_every_script_are_terms():
    """Only ASCII letters counted: "Straße" gave stra and e, Cyrillic, Greek, Hebrew and
    CJK gave nothing, so a note in those words had no keyword match at all."""
    assert tokenize("Umsatz_März is in Cent") == ["umsatz_marz", "umsatz", "marz", "cent"]
    assert tokenize("UmsatzMärz Straße") == ["umsatzmarz", "umsatz", "marz", "strass"]
    assert tokenize("сумма в копейках") == ["сумм", "в", "копейк"]
    assert tokenize("数据的金额单位是分") == ["数据", "据的", "的金", "金额", "额单", "单位", "位是", "是分"]
    assert tokenize("data/données.csv") == ["data/donnees.csv", "data", "donne", "csv"]
    # A letter's combining marks are part of its word (\\w leaves them out: ह, न, द) ...
    assert tokenize("हिन्दी भाषा") == ["हिन्द", "भाष"]
    # ... and an accent typed as its own character is the same word as the composed one.
    assert tokenize("cafe\u0301") == tokenize("caf\u00e9") == ["cafe"]
    index = LexicalIndex()
    index.add(1, "数据的金额单位是分")
    index.add(2, "сумма в копейках до 2021 года")
    index.add(3, "orders.amount is in cents")
    assert index.score("金额单位")[0].tolist() == [1]
    assert index.score("в копейках")[0].tolist() == [2]


def test_an_identifier_written_into_chinese_or_japanese_text_is_kept_whole():
    """CJK text holds code without spaces around it: the whole run was one token, so the
    identifier was indexed only in pieces and a note about acquire_lock ranked below
    notes that merely say "acquire" and "lock"."""
    assert tokenize("在acquire_lock之前必须先调用init_db") == [
        "在", "acquire_lock", "acquir", "lock", "之前", "前必", "必须", "须先", "先调", "调用",
        "init_db", "init", "db"]
    assert "orders.amount" in tokenize("注文テーブルのorders.amountは銭単位です")
    assert tokenize("数据/订单.csv") == ["数据/订单.csv", "数据", "订单", "csv"]  # a path stays one
    index = LexicalIndex()
    index.add(1, "acquire a lock before writing, then release the lock")
    index.add(2, "在acquire_lock之前必须先调用init_db")
    index.add(3, "we acquire the lock in the watcher")
    assert index.score("acquire_lock")[0].tolist()[0] == 2


def test_emoji_are_terms_and_their_selectors_and_skin_tones_are_not():
    """An emoji-style selector alone was a term (every ⚠️ note matched every other), and
    an emoji none at all."""
    assert tokenize("dep_time → HHMM ⚠️ 👩‍💻 ✅ done 👍🏽") == [
        "dep_time", "dep", "time", "hhmm", "done", "⚠", "👩", "💻", "✅", "👍"]


@pytest.mark.parametrize("note, query", [
    ("Die Straße ist gesperrt", "strasse"),  # ß case-folds to ss
    ("Umsätze im März", "Umsatz"),  # accents folded, then stemmed as English words are
    ("le café est fermé", "cafe ferme"),
    ("Τα ποσά σε λεπτά", "ΠΟΣΑ"),  # Greek capitals are written without their accents
    ("сумма заказа в копейках", "суммы заказов"),  # Russian words stemmed
    ("المبلغ بالقروش", "مبلغ قروش"),  # Arabic prefixes (al-, bi-) stemmed away
    ("価格はＥＵＲで保存", "EUR"),  # full-width letters are the ASCII ones
    ("金额单位是分", "分"),  # one character alone finds the runs holding it
    ("ยอดขายเดือนมีนาคม", "เดือน"),  # Thai: a word inside a sentence with no spaces
    ("the ﬁle is large", "file"),  # a ligature is its letters
    ("ÉTLJob runs nightly", "job"),  # split as ETLJob is
    ("мо́локо скисло", "молоко"),  # a stress mark shown in a textbook
    ("שָׁלוֹם עוֹלָם", "שלום"),  # Hebrew vowel points
    ("עמודת הסכום נשמרת באגורות", "אגורות"),  # in-agorot: a prefix joined to the word
    ("והסכום שולם", "סכום"),  # and-the-amount: two of them
    ("🔥 hot path: orders.amount summed per row", "🔥"),  # an emoji is a term
    ("⚠️ the export drops nulls", "⚠"),  # with or without its emoji-style selector
    ("⚠ the export drops nulls", "⚠️"),
    ("reviewed 👍🏽 by the data team", "👍"),  # a skin tone is not part of the term
    ("Versi\u00adcherungs\u00adnummer fehlt", "Versicherungsnummer"),  # soft hyphens (a PDF)
    ("die Kunden\u200bnummer fehlt", "Kundennummer"),  # a zero-width space (the web)
    ("Umsatz in Łódź", "lodz"),  # a letter with a stroke, typed as the plain one
    ("kırmızı etiket", "kirmizi"),  # a dotless i
    ("giá bằng đồng", "dong"),
    ("smørrebrød på menuen", "smorrebrod"),
    # The same thing written a little differently (an analyst's question weeks later):
    ("orderTotal is net of refunds", "ordertotal"),  # case-folded, as promised
    ("the pageviews column counts bots too", "PageViews"),
    ("refunds above $1,200 need a second approval", "1200"),  # thousands separators
    ("a budget of 1200000 for the year", "1,200,000"),
    ("Adelie mass on Biscoe: 3,709.7 g", "3709.7"),
    ("retry thresholds are 100,250,500 ms", "250"),  # or a list: its numbers still count
    ("価格1,200円で販売", "1200"),  # a price written into Japanese text
    ("NULLs in the join key drop rows", "null"),  # an acronym's plural
    ("the KPIs dashboard refreshes hourly", "kpi"),
    ("timestamps are stored without a time-zone", "timezone"),  # hyphenated in the note
    # British and American spellings, Greek and Latin plurals (nbmemory.spellings):
    ("we normalise the amounts per store", "normalize"),
    ("the normalization step runs first", "normalisation"),
    ("analysed churn by cohort", "analysis"),
    ("two analyses disagree on churn", "analysis"),
    ("the model's behaviour on nulls", "behavior"),
    ("the cost centre column is free text", "center"),
    ("the data catalogue lists owners", "catalog"),
    ("the licence is Apache-2.0", "license"),
    ("indices are rebuilt nightly", "index"),
    ("share the axes between subplots", "axis"),
    ("two hypotheses about the dip", "hypothesis"),
])
def test_a_word_is_found_however_it_is_typed(note, query):
    """A reviewer writing in other languages searched with what people type: no accents,
    capitals, another inflection, full-width letters, one character, a word inside an
    unspaced sentence; each found nothing by keyword before."""
    index = LexicalIndex()
    index.add(1, note)
    index.add(2, "orders.amount is in cents")
    assert index.score(query)[0].tolist() == [1]


def test_the_spellings_of_one_word_are_one_term_and_of_others_are_not():
    """The spelling rules catch words that are not variants too (precise); as queries go
    through them as notes do, only the words they join matter: none that differ."""
    pairs = [("normalise", "normalize"), ("colours", "color"), ("analyses", "analysing"),
             ("catalogues", "catalog"), ("centres", "center"), ("vertices", "vertex"),
             ("parenthesis", "parentheses"), ("diagnosis", "diagnose"), ("grey", "gray"),
             ("analyser", "analyzer"), ("maxima", "maximum"), ("crises", "crisis"),
             ("practise", "practice"), ("sceptic", "skeptic")]
    for a, b in pairs:
        assert tokenize(a) == tokenize(b), (a, b)
    apart = [("advise", "advice"), ("raise", "rise"), ("supervised", "supervisor"),
             ("precise", "price"), ("crisis", "cries"), ("bases", "basis"), ("four", "for"),
             ("hour", "her"), ("genre", "gender"), ("centre", "central"), ("rogue", "rog"),
             ("axe", "axis"), ("genesis", "genes"), ("timbre", "timber"), ("entre", "enter")]
    for a, b in apart:
        assert tokenize(a) != tokenize(b), (a, b)


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


def test_the_best_n_are_the_head_of_a_stable_sort_ties_by_position():
    import numpy as np

    from nbmemory.lexical import top_positions

    rng = np.random.default_rng(3)
    for size in (1, 7, 200):
        scores = rng.integers(0, 5, size).astype(np.float32)  # many ties
        stable = np.argsort(-scores, kind="stable")
        for n in (1, 3, size, size + 5):
            assert top_positions(scores, n).tolist() == stable[:n].tolist()
    assert top_positions(np.array([], np.float32), 3).tolist() == []


def test_scores_summed_densely_or_sparsely_are_the_same_numbers():
    import numpy as np

    from nbmemory.lexical import _sum_by_id

    rng = np.random.default_rng(5)
    ids = [np.sort(rng.choice(1000, n, replace=False)) for n in (300, 40, 900)]
    scores = [rng.random(len(i)).astype(np.float32) for i in ids]
    dense = _sum_by_id(ids, scores, None)  # many matches: summed by id into an array
    sparse = _sum_by_id([i * 97 for i in ids], scores, None)  # few for the id range
    assert np.array_equal(dense[0] * 97, sparse[0]) and np.array_equal(dense[1], sparse[1])
    candidates = np.arange(0, 1000, 3)
    dense = _sum_by_id(ids, scores, candidates)
    sparse = _sum_by_id([i * 97 for i in ids], scores, candidates[::-1] * 97)  # unsorted too
    assert set(dense[0].tolist()) <= set(candidates.tolist())
    assert np.array_equal(dense[0] * 97, sparse[0]) and np.array_equal(dense[1], sparse[1])


def test_a_limit_keeps_the_best_in_the_order_of_the_whole_ranking():
    import numpy as np

    index = LexicalIndex()
    for i in range(1, 60):
        index.add(i, "lock " * (i % 4 + 1) + ("watcher" if i % 5 == 0 else "other words here"))
    ids, scores = index.score("lock watcher")
    for limit in (1, 5, 12):
        top_ids, top_scores = index.score("lock watcher", limit=limit)
        assert top_ids.tolist() == ids[:limit].tolist()
        assert np.array_equal(top_scores, scores[:limit])
    ranked = sorted(zip(ids.tolist(), scores.tolist()), key=lambda p: (-p[1], p[0]))
    assert ids.tolist() == [i for i, _ in ranked]  # ties: lower id first


def test_writes_after_scoring_give_the_scores_of_an_index_built_afresh():
    import numpy as np

    words = "lock watcher race order amount cents session client retry socket".split()
    rng = np.random.default_rng(7)
    docs = {i: " ".join(rng.choice(words, 6)) for i in range(1, 80)}
    index = LexicalIndex()
    index.add_many(docs.items())
    queries = ["lock race", "order amount cents", "client retry socket watcher"]
    for q in queries:
        index.score(q)  # builds the per-term arrays that the writes below extend or drop
    for i in range(80, 120):
        docs[i] = " ".join(rng.choice(words, 5))
        index.add(i, docs[i])
    for i in (3, 50, 81):
        docs[i] = "lock lock cents"  # an edit
        index.add(i, docs[i])
    for i in (7, 90):
        del docs[i]
        index.remove(i)
    fresh = LexicalIndex()
    fresh.add_many(sorted(docs.items()))
    for q in queries:
        got, want = index.score(q), fresh.score(q)
        assert dict(zip(got[0].tolist(), got[1].tolist())) == \
            dict(zip(want[0].tolist(), want[1].tolist()))


def test_an_empty_index_saves_and_loads(tmp_path):
    """A store whose notes were all purged, or a session killed before its first note: its
    file was refused on every open ("offset must be non-negative") and rebuilt."""
    emptied = LexicalIndex.build([(1, "orders amount")])
    emptied.remove(1)
    for index in (LexicalIndex.build([]), emptied):
        index.save(tmp_path / "keywords.index", {"seq": 7})
        loaded, meta = LexicalIndex.load(tmp_path / "keywords.index")
        assert (len(loaded), meta) == (0, {"seq": 7})
        assert len(loaded.doc_ids()) == 0


def test_a_saved_and_loaded_index_scores_exactly_as_one_built_from_scratch(tmp_path):
    import random

    import numpy as np

    words = "lock watcher orders.amount PyObject_GC_Del retries cache kernel owner flights".split()
    rng = random.Random(3)
    texts = {}
    index = LexicalIndex.build((i, f"first text {i}") for i in range(1, 200))
    texts.update({i: f"first text {i}" for i in range(1, 200)})
    for step in range(600):
        doc = rng.randrange(1, 300)
        if rng.random() < 0.7:
            texts[doc] = " ".join(rng.choices(words, k=rng.randrange(1, 8)))
            index.add(doc, texts[doc])
        else:
            texts.pop(doc, None)
            index.remove(doc)
        if step == 300:  # half the changes before the save, half in the loaded index's delta
            index.save(tmp_path / "kw", {"seq": 7})
            index, meta = LexicalIndex.load(tmp_path / "kw")
            assert meta == {"seq": 7}
    fresh = LexicalIndex.build(texts.items())
    index.save(tmp_path / "again", {})  # the removals and the delta folded in
    again, _ = LexicalIndex.load(tmp_path / "again")
    for got_index in (index, again):
        assert len(got_index) == len(fresh) and got_index.doc_ids().tolist() == sorted(texts)
        assert got_index.terms() == fresh.terms()
        for query in words + ["watcher lock cache", "first text 12", "nothing here"]:
            got, want = got_index.score(query), fresh.score(query)
            assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
            assert got_index.max_score(query) == fresh.max_score(query)
            assert sorted(got_index.docs_with(query.lower())) == \
                sorted(fresh.docs_with(query.lower()))
        # each note's own terms, read back for keyword feedback, whichever way they got there
        from nbmemory.lexical import term_counts
        for doc in range(0, 305):
            assert got_index.terms_of(doc) == term_counts(texts.get(doc, ""))[0]
            assert got_index.length(doc) == fresh.length(doc)
        weights = {t: 1.0 / (n + 1) for n, t in enumerate(sorted(fresh.terms())[:9] + ["absent"])}
        every = np.arange(0, 305)  # removed, never added and beyond the last id as well
        assert np.array_equal(got_index.score_at(weights, every), fresh.score_at(weights, every))
        holding = [d for d in every.tolist() if set(fresh.terms_of(d)) & set(weights)]
        assert np.flatnonzero(got_index.score_at(weights, every)).tolist() == holding != []


def test_a_keyword_file_from_before_notes_that_ask_is_rebuilt_with_their_shares(store_dir):
    """A file without each note's share of asking would rank a chat's echoed question as if
    it answered: it is not trusted but rebuilt from the notes' texts on open."""
    from nbmemory import Memory
    from nbmemory.arrays import read_arrays, write_arrays
    from nbmemory.embed import HashEmbedder
    from nbmemory.engine.indexes import KEYWORDS_FILENAME
    from nbmemory.lexical import _MAGIC, LexicalIndexError

    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        mem.remember("Jonah: Did you see whales?")
        mem.remember("Priya: Three gray whales on the boat tour.")
    path = store_dir / KEYWORDS_FILENAME
    meta, arrays = read_arrays(path, _MAGIC, "keyword index")
    del arrays["asking"]
    write_arrays(path, _MAGIC, meta, arrays)
    with pytest.raises(LexicalIndexError, match="written before notes that ask were told apart"):
        LexicalIndex.load(path)
    with Memory.open(store_dir, embedder=HashEmbedder()) as mem:
        assert mem.status()["keywords"] == (
            f"rebuilt ({path}: written before notes that ask were told apart)")
        assert mem._backend.engine.lexical.asking(np.array([1, 2, 3])).tolist() == [1.0, 0.0, 0.0]


def test_a_term_counts_at_most_tf_cap_times_in_one_note(tmp_path):
    import numpy as np

    from nbmemory.lexical import TF_CAP

    long = "flaky " * (TF_CAP + 100) + "test"
    capped = "flaky " * TF_CAP + "test"
    added = LexicalIndex()
    added.add(1, "other words")
    added.add(2, long)
    added.add(3, "flaky once")
    built = LexicalIndex.build([(1, "other words"), (2, long), (3, "flaky once")])
    built.save(tmp_path / "kw", {})
    loaded, _ = LexicalIndex.load(tmp_path / "kw")
    scores = [dict(zip(*(a.tolist() for a in i.score("flaky")))) for i in (added, built, loaded)]
    assert scores[0] == scores[1] == scores[2] and set(scores[0]) == {2, 3}
    # the note's length is its whole length; only the term's count stops at the cap
    assert LexicalIndex.build([(2, long)])._lengths[2] == TF_CAP + 101
    assert LexicalIndex.build([(2, capped)])._seg.post_tfs.tolist()[0] == TF_CAP


def test_a_damaged_keyword_file_is_refused_with_its_path(tmp_path):
    import pytest

    from nbmemory.lexical import LexicalIndexError

    index = LexicalIndex.build([(1, "some words")])
    index.save(tmp_path / "kw", {})
    data = (tmp_path / "kw").read_bytes()
    (tmp_path / "kw").write_bytes(data[:len(data) // 2])
    with pytest.raises(LexicalIndexError, match="kw: "):
        LexicalIndex.load(tmp_path / "kw")
    (tmp_path / "kw").write_bytes(b"garbage" * 10)
    with pytest.raises(LexicalIndexError, match="not a keyword index file"):
        LexicalIndex.load(tmp_path / "kw")


def test_scoring_given_documents_gives_the_scores_of_a_search_for_them():
    """score_at (feedback terms on a recall's candidates) against score, on an index whose
    documents are in the segment, removed from it, re-added to the delta and only in it."""
    texts = {i: f"lock {'watcher ' * (i % 3)}races note {i} orders.amount" for i in range(40)}
    texts[7] = "nothing in common"
    index = LexicalIndex.build(texts.items())
    index.remove(3)
    index.add(5, "the watcher races the lock twice: lock lock")
    index.add(50, "a watcher only in the delta")
    ids = np.array([0, 1, 2, 3, 5, 7, 50, 39, 99], np.int64)
    for query in ("watcher", "lock", "orders.amount", "absent"):
        found = dict(zip(*(a.tolist() for a in index.score(query))))
        expected = [found.get(i, 0.0) for i in ids.tolist()]
        weights = dict.fromkeys(tokenize(query), 1.0)  # orders.amount: three terms
        assert index.score_at(weights, ids) == pytest.approx(expected, rel=1e-6), query
    both = index.score_at({"watcher": 0.25, "lock": 2.0}, ids)
    assert both == pytest.approx(0.25 * index.score_at({"watcher": 1.0}, ids) +
                                 2.0 * index.score_at({"lock": 1.0}, ids), rel=1e-6)
    assert both[3] == 0.0 and both[-1] == 0.0  # removed, never indexed
    assert index.idf("absent") > index.idf("watcher") > 0


def test_every_match_ascending_is_what_a_search_selects_from():
    """matches (where recall looks up the notes written after the keyword channel's best)
    holds every matching document once, ids ascending, with the score a search gives it;
    candidates restrict it as they restrict a search."""
    texts = {i: f"lock {'watcher ' * (i % 3)}races note {i}" for i in range(30)}
    texts[7] = "nothing in common"
    index = LexicalIndex.build(texts.items())
    index.remove(4)
    index.add(40, "a watcher only in the delta")
    for query, candidates in (("watcher races", None), ("lock", np.array([2, 4, 7, 9, 40])),
                              ("absent", None)):
        ids, scores = index.matches(query, candidates)
        found = dict(zip(*(a.tolist() for a in index.score(query, candidates))))
        assert ids.tolist() == sorted(found) and scores.tolist() == [found[i] for i in sorted(found)]
    ids, _ = index.matches("watcher")
    assert 4 not in ids.tolist() and 7 not in ids.tolist() and 40 in ids.tolist()
    assert index.matches("absent")[0].tolist() == []


def test_idfs_in_one_pass_count_the_documents_holding_each_term():
    """Keyword feedback takes a hundred idfs a recall in one pass: BM25's idf of the
    documents holding each term now, for terms of the segment, of documents removed from
    it, of the delta, and unknown."""
    import math

    texts = {i: f"lock {'watcher ' * (i % 3)}races note{i % 4}" for i in range(30)}
    index = LexicalIndex.build(texts.items())
    index.remove(2)
    index.remove(5)
    index.add(40, "a watcher only in the delta, with a brandnew word")
    terms = ["watcher", "lock", "note1", "brandnew", "absent", *tokenize("races")]
    n = len(index)
    expected = [math.log(1 + (n - len(index.docs_with(t)) + 0.5) / (len(index.docs_with(t)) + 0.5))
                for t in terms]
    assert index.idfs(terms).tolist() == pytest.approx(expected, rel=1e-12)
    assert [index.idf(t) for t in terms] == pytest.approx(expected, rel=1e-12)
    assert len(index.docs_with("watcher")) < 20 and index.docs_with("absent") == []
    assert index.idfs([]).tolist() == []
