"""Fusion of the lexical and dense channels (numbers only; eval/ measures the ranking)."""

import os

import numpy as np
import pytest

from nbmemory.ranking import (KEYWORD_WEIGHT, LIFT_EASE, TRUST_FROM, TRUST_FULL, ease_under, fuse,
                              keyword_weight, lifted)


def test_a_query_whose_keywords_match_little_is_ranked_by_meaning_alone():
    dense = np.array([0.0, 0.31, 0.8])
    assert np.allclose(fuse(np.zeros(3), dense), dense)
    weak = np.array([0.0, TRUST_FROM - 0.01, 0.1])  # one or two everyday words
    assert np.allclose(fuse(weak, dense), dense)


def test_a_partial_keyword_match_counts_once_the_query_is_covered_enough():
    dense = np.array([0.4, 0.4])
    lexical = np.array([0.0, (TRUST_FROM + TRUST_FULL) / 2])
    fused = fuse(lexical, dense)
    assert fused[1] > fused[0]
    w = keyword_weight(lexical)
    assert 0 < w < KEYWORD_WEIGHT
    assert fused == pytest.approx((1 - w) * dense + w * lexical)


def test_eased_scores_keep_their_order_and_stay_under_the_cap():
    scores = np.array([0.1, 0.5 - LIFT_EASE, 0.47, 0.5, 0.9, 3.0], np.float32)
    eased = ease_under(scores, 0.5)
    assert eased[:2].tolist() == pytest.approx(scores[:2].tolist())  # below the knee: as they are
    assert np.all(np.diff(eased) > 0) and eased.max() < 0.5


def test_below_the_start_the_closest_in_meaning_keep_their_places():
    """Keyword shares lift notes, in the mix's order, to just under the cosine's n-th best;
    those n keep their cosines (no index: no keyword feedback)."""
    dense = np.array([0.9, 0.8, 0.7, 0.2, 0.3, 0.25], np.float32)
    keyword = np.array([0.0, 0.0, 0.0, 0.5, 0.0, 0.1], np.float32)
    score, shares = lifted("q", None, np.arange(6), keyword, dense, 0.6, 2, feedback=None)
    assert score[:2].tolist() == pytest.approx([0.9, 0.8])
    assert np.argsort(-score).tolist() == [0, 1, 3, 2, 5, 4]  # 3 lifted past 2, never past 1
    assert score[3] < 0.8 and shares.tolist() == keyword.tolist()
    assert score[4] == pytest.approx(0.3)  # no keyword, not near the cap: its cosine


def test_keywords_lift_notes_as_much_just_over_the_start_as_just_under_it():
    """A best keyword match covering a hair over the start mixed keywords in at a weight of
    almost nothing, where a hair under it lifted keyword matches under the six best: a note
    sharing the question's one telling word fell from third to last as the best match grew.
    While the weight rises, the notes under the mix's best are lifted as at the start."""
    from nbmemory.ranking import hybrid

    dense = np.array([0.9, 0.8, 0.5, 0.45, 0.2], np.float32)
    orders = []
    for best in (TRUST_FROM - 0.005, TRUST_FROM + 0.005, TRUST_FULL - 0.005):
        keyword = np.array([best, 0.0, 0.0, 0.0, 0.3], np.float32)
        score, shares, w, covered, kept, _ = hybrid("q", None, np.arange(5), keyword, dense,
                                                    feedback=None, lift=2, slack=None)
        assert kept == 2 and covered == pytest.approx(best) and shares.tolist() == keyword.tolist()
        assert score[4] < min(score[:2])  # under the two kept
        orders.append(np.argsort(-score).tolist())
        if best > TRUST_FROM:
            assert 0 < w < KEYWORD_WEIGHT
            assert score[:2] == pytest.approx(fuse(keyword, dense)[:2])  # the mix's best keep it
    assert orders == [[0, 1, 4, 2, 3]] * 3
    keyword = np.array([TRUST_FULL + 0.05, 0.0, 0.0, 0.0, 0.3], np.float32)  # the mix alone
    score, _, w, _, kept, _ = hybrid("q", None, np.arange(5), keyword, dense, feedback=None,
                                     lift=2, slack=None)
    assert (w, kept) == (KEYWORD_WEIGHT, 0) and score == pytest.approx(fuse(keyword, dense))


def test_a_full_keyword_match_lifts_a_note_but_cosine_still_orders_ties():
    fused = fuse(np.array([1.0, 1.0, 0.0]), np.array([0.1, 0.5, 0.9]))
    assert fused[0] > fused[2] and fused[1] > fused[0]
    assert fused[1] == pytest.approx((1 - KEYWORD_WEIGHT) * 0.5 + KEYWORD_WEIGHT)


def test_the_keyword_weight_rises_with_the_best_match_and_stops_at_its_maximum():
    weights = [keyword_weight(np.array([best]))
               for best in (0.0, TRUST_FROM, (TRUST_FROM + TRUST_FULL) / 2, TRUST_FULL, 1.0)]
    assert weights[:2] == [0.0, 0.0]
    assert 0.0 < weights[2] < weights[3] == weights[4] == KEYWORD_WEIGHT
    assert keyword_weight(np.array([])) == 0.0


def test_scores_stay_between_zero_and_one():
    fused = fuse(np.array([0.0, 1.0, 1.0]), np.array([-0.3, 1.0, 0.0]))
    assert fused[0] == 0.0 and fused[1] == pytest.approx(1.0)
    assert ((fused >= 0) & (fused <= 1)).all()


def test_the_dense_channel_looks_past_dropped_notes_without_asking_for_all_of_them():
    from nbmemory.dense_search import nearest
    from nbmemory.dense_rows import DenseRows

    rng = np.random.default_rng(4)
    vectors = rng.standard_normal((400, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    rows = DenseRows.from_matrix(np.arange(1, 401), vectors)
    query = vectors[0]
    order = (np.argsort(-(vectors @ query), kind="stable") + 1).tolist()
    drop = set(order[:30:2])  # 15 of the nearest 30 are gone
    asked = []
    search = rows.search
    rows.search = lambda q, n, exact=True, scored=True: (asked.append(n), search(q, n))[1]
    ids = nearest(rows, query, 10, True, drop)[0].tolist()
    kept = [i for i in ids if i not in drop]
    assert kept == [i for i in order if i not in drop][:10]
    assert ids == order[:len(ids)] and ids[-1] not in drop  # a prefix ending on the 10th kept
    assert max(asked) < 100
    assert nearest(rows, query, 10, True, set(order[:395]))[0].tolist() == order  # all of it


def _feedback_case(query):
    from nbmemory.dense_rows import DenseRows
    from nbmemory.lexical import LexicalIndex
    from nbmemory.ranking import rank_arrays

    texts = {1: "moved the nightly export from cron to the airflow scheduler",
             2: "the airflow scheduler retries a failed dag three times",  # no query word
             3: "the export of invoices runs weekly",
             4: "export to csv is slow for wide tables",
             5: "nightly backups are kept for a week",
             6: "penguin bill length by species",
             7: "the nightly build moved to a bigger runner",
             8: "export the notebook as html for the review"}
    lexical = LexicalIndex.build(texts.items())
    # Every cosine the same: the order is the keyword channel's.
    rows = DenseRows.from_matrix(np.array(list(texts)), np.ones((len(texts), 4), np.float32) / 2)
    qvec = np.ones(4, np.float32) / 2

    def ranked(feedback, mode="hybrid"):
        got = rank_arrays(query, qvec, lexical, rows, candidates=None, pool=10, exact_below=100,
                          mode=mode, feedback=feedback)
        return {int(i): (float(s), float(lx)) for i, s, lx in zip(got.ids, got.score, got.lexical)}
    return ranked


def test_keyword_feedback_lifts_a_note_sharing_the_best_notes_words_but_not_the_querys():
    from nbmemory.ranking import FEEDBACK_NOTES

    ranked = _feedback_case("when did we move the nightly export")
    before, after = ranked(False), ranked(True)
    assert before[2][1] == 0.0 < after[2][1]
    assert after[2][0] > before[2][0]
    first = sorted(before, key=lambda i: -before[i][0])[:FEEDBACK_NOTES]
    assert 1 in first and 2 not in first
    assert all(after[i][1] == before[i][1] for i in first)  # the notes it learnt from keep theirs
    assert all(0.0 <= s <= 1.0 and 0.0 <= lx <= 1.0 for s, lx in after.values())
    assert ranked(True, "lexical") == ranked(False, "lexical")  # the channels stay themselves


def test_no_keyword_feedback_for_a_query_ranked_by_meaning_alone():
    ranked = _feedback_case("which bird has the longest beak")  # shares no word with the notes
    assert ranked(True) == ranked(False)


def test_a_message_answering_in_its_predecessors_words_rises_but_never_above_it():
    from types import SimpleNamespace

    from nbmemory.dense_rows import DenseRows
    from nbmemory.lexical import LexicalIndex
    from nbmemory.ranking import rank_arrays

    texts = {1: "Maya: how are things with Callum since the row about the bills?",
             2: "Sam: Callum? just passive aggressive notes stuck on the fridge",  # follows 1
             3: "Sam: the fridge broke again last week",  # follows 2, shares no query word
             4: "Maya: Callum is coming to the wedding",
             5: "Sam: the bills are split three ways now"}
    lexical = LexicalIndex.build(texts.items())
    cosines = np.array([0.5, 0.3, 0.6, 0.6, 0.5], np.float32)  # meaning's best 2: 3 and 4
    vectors = np.zeros((len(texts), 4), np.float32)
    vectors[:, 0], vectors[:, 1] = cosines, np.sqrt(1 - cosines ** 2)
    rows = DenseRows.from_matrix(np.array(list(texts)), vectors)
    before, after = np.full(6, -1), np.full(6, -1)
    before[2], after[1], before[3], after[2] = 1, 2, 2, 3
    neighbours = SimpleNamespace(before=before, after=after)
    query, qvec = "how has Callum behaved since the bills row", np.eye(4, dtype=np.float32)[0]

    def ranked(mode="hybrid", with_neighbours=True, drop=()):
        got = rank_arrays(query, qvec, lexical, rows, candidates=None, pool=2, exact_below=100,
                          mode=mode, drop=drop, neighbours=neighbours if with_neighbours else None)
        return {int(i): (float(s), float(lx)) for i, s, lx in zip(got.ids, got.score, got.lexical)}

    alone, read_after = ranked(with_neighbours=False), ranked()
    assert 2 not in alone  # below the keyword pool on its one shared word, far in meaning
    assert read_after[1][0] > read_after[2][0] > read_after[4][0]  # rises, but not above 1
    assert read_after[2][1] > read_after[4][1]  # the same own word as 4, and 1's context
    assert read_after[3][1] == 0.0  # its neighbour's words do not lift a note sharing none
    assert read_after[1][1] == alone[1][1]  # the note it follows keeps its own share
    assert ranked("lexical") == ranked("lexical", False)  # the channels stay themselves
    assert 2 not in ranked(drop={1})  # a forgotten note lends its words to none


def test_context_never_gives_a_note_more_than_the_note_it_follows():
    from nbmemory.ranking import with_context

    ids = np.array([1, 2, 3, 7])
    before = np.array([-1, -1, 1, 2, -1, -1, -1, 5])  # 2 follows 1, 3 follows 2, 7 follows 5
    got = with_context(ids, np.array([0.5, 0.45, 0.1, 0.3], np.float32), before, weight=0.5)
    # 2: its own 0.45 plus half of 0.5 is capped at 0.5; 3: 0.1 plus half of 0.45; 7: 5 is
    # not a candidate, so it keeps its own.
    assert got.tolist() == pytest.approx([0.5, 0.5, 0.325, 0.3])
    assert with_context(ids, np.array([0.5, 0.45, 0.1, 0.3], np.float32), before, drop={2},
                        weight=0.5).tolist() == pytest.approx([0.5, 0.5, 0.1, 0.3])
    assert with_context(ids, np.array([0.5, 0.45, 0.0, 0.3], np.float32), before,
                        weight=0.5)[2] == 0.0  # a note sharing no query word borrows none


def test_the_dense_search_beside_the_keywords_hands_back_its_result_and_its_error():
    from nbmemory.dense_rows import DenseRows
    from nbmemory.lexical import LexicalIndex
    from nbmemory.dense_search import beside
    from nbmemory.ranking import rank_arrays

    assert beside(divmod, 7, 2).result() == (3, 1)
    rows = DenseRows.from_matrix(np.arange(1, 4), np.eye(3, 4, dtype=np.float32))
    lexical = LexicalIndex.build([(1, "nightly export"), (2, "airflow dag"), (3, "penguins")])

    def broken(*args, **kwargs):
        raise RuntimeError("the vector file is unreadable")
    rows.search = broken  # a failing search in the second thread reaches the one recalling
    with pytest.raises(RuntimeError, match="the vector file is unreadable"):
        rank_arrays("export", np.eye(1, 4, dtype=np.float32)[0], lexical, rows, candidates=None,
                    pool=10, exact_below=100)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_process_gets_its_own_second_thread():
    from nbmemory.dense_search import beside

    assert beside(os.getpid).result() == os.getpid()  # the parent's thread exists now
    child = os.fork()
    if child == 0:  # a thread does not survive a fork: waiting on the parent's would hang
        try:
            os._exit(0 if beside(os.getpid).result(timeout=30) == os.getpid() else 1)
        finally:
            os._exit(2)
    assert os.waitpid(child, 0)[1] == 0


def test_feedback_never_adds_the_querys_own_characters():
    """A note's CJK characters are terms alone as well: feedback from the notes that match
    "売上" took 売 and 上 as new words and lifted every note holding either."""
    from nbmemory.lexical import LexicalIndex
    from nbmemory.ranking import feedback_terms, query_terms

    index = LexicalIndex()
    index.add(1, "月次売上は税込")
    index.add(2, "上半期の集計")
    words = feedback_terms([1], np.array([1.0]), index, query_terms("売上"))
    assert not {"売", "上", "売上"} & set(words)
    assert "税込" in words  # what the note says besides the query's words


def _speaker_store(n=400):
    """Notes of a chat, most of them Theo's, naming him (as a chat's messages name their
    speaker); the last is the nearest in meaning to the query and matches only his name."""
    from nbmemory.dense_rows import DenseRows
    from nbmemory.lexical import LexicalIndex

    rng = np.random.default_rng(7)
    texts = {i: f"Theo: message {i}, about theo and the weekend" for i in range(1, 121)}
    texts.update({i: f"Theo: message {i} on the weekend " + "with many more words in it " * 8
                  for i in range(121, 250)})
    texts.update({i: f"Maya: message {i} on her weekend" for i in range(250, n)})
    texts.update({i: f"Theo: his job at the bakery, message {i}" for i in range(1, 4)})
    texts[n] = ("Theo: the company did a round of layoffs yesterday and my whole team was let "
                "go, so I am looking around for something new")
    vectors = rng.standard_normal((n, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return (LexicalIndex.build(texts.items()),
            DenseRows.from_matrix(np.arange(1, n + 1), vectors), vectors[n - 1])


def test_a_notes_score_does_not_depend_on_how_many_hits_were_asked_for():
    """-k 10 shows the first ten of -k 20: the keyword channel's pool grows with k, and a
    note below it kept a keyword share of 0, so it fell out of the ten it ranked in at 20."""
    from nbmemory.ranking import rank_arrays

    lexical, rows, qvec = _speaker_store()
    scores = []
    for pool in (100, 200):
        got = rank_arrays("When did Theo lose his job at the bakery?", qvec, lexical, rows,
                          candidates=None, pool=pool, exact_below=1000, mode="hybrid",
                          feedback=True)
        scores.append(dict(zip(got.ids.tolist(), got.score.tolist())))
    assert 400 in scores[0] and 100 < lexical.score("theo")[0].tolist().index(400) < 200
    assert {i: scores[1][i] for i in scores[0]} == pytest.approx(scores[0], abs=1e-6)
    best = [sorted(s, key=lambda i: -s[i])[:10] for s in scores]
    assert best[0] == best[1] and 400 in best[0]


def test_forgotten_notes_do_not_take_the_keyword_channels_places():
    """Sixty forgotten drafts matched a query better than the one note left: with the keyword
    channel's pool filled by them, keyword mode found nothing."""
    from nbmemory.dense_rows import DenseRows
    from nbmemory.lexical import LexicalIndex
    from nbmemory.ranking import rank_arrays

    texts = {i: f"draft {i}: acquire_lock before writing" for i in range(1, 61)}
    texts[61] = "acquire_lock is taken before the journal is written and released after commit"
    lexical = LexicalIndex.build(texts.items())
    rows = DenseRows.from_matrix(np.arange(1, 62), np.ones((61, 4), np.float32) / 2)
    got = rank_arrays("acquire_lock", None, lexical, rows, candidates=None, pool=50,
                      exact_below=1000, drop=set(range(1, 61)), mode="lexical")
    assert 61 in got.ids.tolist()
    assert got.score[got.ids.tolist().index(61)] > 0
    assert len(got.ids) == 51  # and the forgotten ones scoring above it, for "previously"


def test_a_note_of_a_few_words_keeps_part_of_its_cosine():
    """'Theo: What?' sat close to every question naming Theo and filled the top of chats'
    rankings by meaning; a note of four keyword terms or more keeps all of its cosine. The
    terms it shares with the question are not its own: 'Whoa! That's amazing, Priya.' sat
    close to every question naming Priya (keywords count that match already)."""
    from nbmemory.dense_rows import DenseRows
    from nbmemory.dense_weight import short_note_weight
    from nbmemory.lexical import LexicalIndex
    from nbmemory.ranking import own_terms, rank_arrays

    assert short_note_weight(np.array([0, 1, 2, 3, 4, 9])).tolist() == [
        0.5, 0.625, 0.75, 0.875, 1.0, 1.0]
    texts = {1: "Theo: Okay.",
             2: "Theo: the company did a round of layoffs and my team was let go"}
    lexical = LexicalIndex.build(texts.items())
    query = np.array([1.0, 0.0], np.float32)
    vectors = np.array([[0.9, np.sqrt(1 - 0.81)], [0.7, np.sqrt(1 - 0.49)]], np.float32)
    rows = DenseRows.from_matrix(np.array([1, 2]), vectors)
    got = rank_arrays("when did theo lose his job", query, lexical, rows, candidates=None,
                      pool=10, exact_below=100, mode="dense")
    assert lexical.length(1) == 2
    assert dict(zip(got.ids.tolist(), got.score.tolist())) == pytest.approx({1: 0.9 * 0.75,
                                                                              2: 0.7})
    # In hybrid mode the note's terms the question holds are not its own (keywords count
    # them): "theo" is the question's, one term its own. An identifier's are its own.
    got = rank_arrays("when did theo lose his job", query, lexical, rows, candidates=None,
                      pool=10, exact_below=100, mode="hybrid")
    assert dict(zip(got.ids.tolist(), got.dense.tolist())) == pytest.approx({1: 0.9 * 0.625,
                                                                              2: 0.7})
    named = LexicalIndex.build([(1, "orders.amount: cents"), (2, "Theo: Okay.")])
    assert own_terms("what unit is orders.amount stored in", named, np.array([1])).tolist() == [4]
    assert own_terms("what did Theo say", named, np.array([2])).tolist() == [1]


@pytest.mark.parametrize("text, share", [
    ("Did you see whales?", 1.0),
    ("Jonah: Whales! What kind?", 0.5),  # two words tell, two ask
    ("Why does the join drop rows? The key has nulls.", 0.0),  # it ends telling
    ("Is it? (not sure)", 0.0),
    ("see https://example.com/?q=1 for the query", 0.0),  # a "?" that ends no sentence
    ("他去哪里了？", 1.0),
    ("", 0.0), ("???", 0.0)])
def test_how_much_of_a_note_asks_is_the_share_of_its_words_in_the_questions_it_ends_with(
        text, share):
    from nbmemory.dense_weight import asking

    assert asking(text) == share


def test_a_note_that_ends_asking_keeps_part_of_its_cosine():
    """In a chat the message closest in meaning to a question about it is often the same
    question, asked at the time, and the answer is the reply: "Did you see whales?" came
    above "Three gray whales on the boat tour" by meaning. A note that asks keeps half its
    cosine, one that only partly asks more; keywords still find it."""
    from nbmemory.dense_rows import DenseRows
    from nbmemory.lexical import LexicalIndex
    from nbmemory.ranking import rank_arrays

    texts = {1: "Jonah: Did you see any whales on the trip?",
             2: "Priya: Three gray whales on the boat tour, one came up really close to us.",
             3: "Jonah: So many whales near Tofino this week! Did you go out on a boat?"}
    lexical = LexicalIndex.build(texts.items())
    query = np.array([1.0, 0.0], np.float32)
    cosines = [0.8, 0.6, 0.7]
    vectors = np.array([[c, np.sqrt(1 - c * c)] for c in cosines], np.float32)
    rows = DenseRows.from_matrix(np.array([1, 2, 3]), vectors)
    got = rank_arrays("Did Priya see whales on her trip?", query, lexical, rows,
                      candidates=None, pool=10, exact_below=100, mode="dense")
    assert got.ids[np.argsort(-got.score)].tolist() == [2, 3, 1]
    asks = 7 / 15  # "Did you go out on a boat?" of the fifteen words
    assert dict(zip(got.ids.tolist(), got.dense.tolist())) == pytest.approx(
        {1: 0.8 * 0.5, 2: 0.6, 3: 0.7 * (1 - 0.5 * asks)})
    found = rank_arrays("whales trip", None, lexical, rows, candidates=None, pool=10,
                        exact_below=100, mode="lexical")
    assert found.ids[np.argmax(found.score)] == 1  # keywords find the question as before


def test_a_trusted_keyword_match_keeps_a_place_near_its_place_by_keywords():
    """Twelve notes close in meaning pushed the best keyword match (a conversation's answer
    sharing a name and a word with the question) out of the first ten."""
    from nbmemory.keyword_places import KEYWORD_SLACK, keep_places

    ids = np.arange(14)
    score = np.linspace(0.9, 0.5, 14).astype(np.float32)  # fused: 0 best, 13 last
    dense = np.full(14, 0.6, np.float32)
    keyword = np.zeros(14, np.float32)
    keyword[[13, 12]] = [0.4, 0.38]  # the best two by keywords, the last two by the fusion
    placed, moved = keep_places(score, keyword, dense, ids, TRUST_FROM)
    assert moved == 2
    order = np.lexsort((ids, -placed)).tolist()
    assert order.index(13) == KEYWORD_SLACK and order.index(12) == KEYWORD_SLACK + 1
    assert [i for i in order if i < 12] == list(range(12))  # the others keep their order
    assert placed[:12].tolist() == score[:12].tolist()  # and their scores
    # Each between the two notes it now sits between.
    assert score[KEYWORD_SLACK - 1] > placed[13] > placed[12] > score[KEYWORD_SLACK]
    # Under the fusion's start, or far from the query in meaning, a match keeps its place.
    assert keep_places(score, keyword * 0.8, dense, ids, TRUST_FROM)[0].tolist() == score.tolist()
    far = dense.copy()
    far[[12, 13]] = 0.29  # under half the best cosine
    assert_unmoved(keep_places(score, keyword, far, ids, TRUST_FROM), score)
    # Only the notes that can be shown count as places: forgotten ones do not take them.
    shown = np.arange(2, 14)
    order = np.lexsort((ids, -keep_places(score, keyword, dense, ids, TRUST_FROM, shown)[0]))
    assert [i for i in order.tolist() if i >= 2].index(13) == KEYWORD_SLACK


def test_explain_says_how_many_keyword_matches_kept_their_places():
    """Their scores were raised between their new neighbours': the formula alone no longer
    gives them, so explain says why."""
    from nbmemory.wording import fusion_line

    fusion = {"weight": 0.28, "covered": 0.39, "from": TRUST_FROM, "full": TRUST_FULL,
              "most": KEYWORD_WEIGHT, "below": 0, "priority": 0.02, "placed": 2, "slack": 5}
    assert fusion_line(fusion).endswith(
        "fed back. 2 keyword match(es) covering 35% moved up to 5 places below their place by "
        "lexical alone.")
    assert "moved up" not in fusion_line({**fusion, "placed": 0})


def test_explain_says_how_keywords_lift_notes_while_their_weight_rises():
    from nbmemory.wording import fusion_line

    fusion = {"weight": 0.28, "covered": 0.39, "from": 0.35, "full": 0.45, "most": 0.7,
              "below": 6, "priority": 0.02, "placed": 0, "slack": 3}
    assert fusion_line(fusion) == (
        "score = 0.72 x dense + 0.28 x lexical for the 6 best by it; for the others 0.72 x "
        "(dense + 2.33 x lexical), kept below those 6 (+0.02 high priority, -0.02 low). "
        "Keyword weight 0.28: the best keyword match covers 39% of the query's weighted words, "
        "between the 35% from which keywords are mixed in and the 45% from which fully. Lexical "
        "includes the words of the best notes, fed back.")


def test_explain_rebuilds_each_score_while_the_weight_rises():
    """The lexical share shown is the one each score was made of: the lifted notes' shares
    come from a feedback pass of their own, and showing the mix's misled (review)."""
    from nbmemory.lexical import LexicalIndex
    from nbmemory.ranking import hybrid

    texts = ["moved the nightly export from cron to the airflow scheduler",
             "the airflow scheduler retries a failed dag three times",
             "the export of invoices runs weekly", "export to csv is slow for wide tables",
             "nightly backups are kept for a week", "penguin bill length by species",
             "the nightly build moved to a bigger runner",
             "export the notebook as html for the review"]
    lexical = LexicalIndex.build(enumerate(texts, 1))
    ids = np.arange(1, 9)
    keyword = np.array([0.4, 0.1, 0.3, 0.2, 0.0, 0.05, 0.25, 0.15], np.float32)
    dense = np.array([0.5, 0.45, 0.4, 0.35, 0.3, 0.28, 0.2, 0.1], np.float32)
    score, shares, w, _, kept, _ = hybrid("nightly export airflow", lexical, ids, keyword,
                                          dense, lift=2, slack=None)
    assert 0 < w < KEYWORD_WEIGHT and kept == 2
    order = np.argsort(-score)
    ratio, cap = KEYWORD_WEIGHT / (1 - KEYWORD_WEIGHT), score[order[1]]
    for at in order[:2]:
        assert score[at] == pytest.approx((1 - w) * dense[at] + w * shares[at], abs=1e-6)
    for at in order[2:]:
        made = (1 - w) * (dense[at] + ratio * shares[at])
        assert score[at] < cap
        assert score[at] == pytest.approx(made, abs=1e-6) or made > cap - LIFT_EASE  # eased


def test_keyword_ties_are_placed_by_the_fusion_not_by_age():
    """Short notes holding a one-word query all share 1: ranked among themselves by id, the
    oldest took places 4 to 10 with scores they never had, and -k 20 showed another ten."""
    from nbmemory.keyword_places import keep_places

    ids = np.arange(12)
    score = np.linspace(0.5, 0.95, 12).astype(np.float32)  # the newest best by the fusion
    keyword, dense = np.ones(12, np.float32), np.full(12, 0.6, np.float32)
    assert_unmoved(keep_places(score, keyword, dense, ids, TRUST_FROM), score)
    # Uncapped, the shares say which match is best by keywords; ties still by the fusion.
    uncapped = np.where(ids == 2, 1.4, 1.0).astype(np.float32)
    placed, moved = keep_places(score, keyword, dense, ids, TRUST_FROM, bm25=uncapped)
    assert moved == 1 and np.lexsort((ids, -placed)).tolist().index(2) == 3


def test_a_match_already_within_its_places_keeps_its_score():
    """It was counted as moved (explain said so) and scored between its neighbours, which
    could put it under min_score."""
    from nbmemory.keyword_places import keep_places

    ids = np.arange(6)
    score = np.array([0.9, 0.8, 0.22, 0.21, 0.10, 0.05], np.float32)
    keyword = np.array([0, 0, 0, 0.4, 0, 0], np.float32)  # 4th: within three of first
    assert_unmoved(keep_places(score, keyword, np.full(6, 0.6, np.float32), ids, TRUST_FROM),
                   score)


def assert_unmoved(result, score):
    """keep_places moved nothing: no note counted, every score as it was (compared by value,
    not by the array returned)."""
    placed, moved = result
    assert moved == 0 and placed.tolist() == score.tolist()
