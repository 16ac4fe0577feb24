"""Hybrid ranking: a lexical (BM25) and a dense (cosine) channel, fused.

Both channels propose their best ``pool`` candidates; every candidate then gets an
exact score from both, so fusion compares like with like. The lexical score is
divided by the score of a note matching every query term once (and capped at 1), so
it reads as the idf-weighted share of the query that the note matches; query terms no
note contains count too (see :meth:`LexicalIndex.max_score`).

The fusion (:func:`fuse`) is a convex mix whose keyword weight is set per query by how
much of the query its best keyword match covers. Why, measured with ``python eval/run.py``
on eval/ (2,029 notes; recall@10 with all-MiniLM-L6-v2):

- The rule it replaced gave keyword evidence only above half of the query's weight per
  note. On natural questions that share some of their words with their note it ignored
  the keyword channel, which cost nothing while the dense channel was the stronger one
  (here: 0.859, dense 0.850) and lost to keywords alone where it was not (held out:
  0.558 against BM25's 0.656; here, with the cosines weakened, 0.682 against 0.749).
- Any fixed mix, normalised per query (z-score, min-max) or not, that helps natural
  questions wrecks the paraphrase slice, where every keyword match is a wrong note
  sharing an everyday word: z-score at keyword weight 0.6 took paraphrase recall@10 from
  0.58 to 0.03.
- Wrong notes matched that way cover at most 0.34 of the query in 9 paraphrase queries
  of 10; the notes that answer natural questions cover 0.44 (median). So the keyword
  weight starts at ``TRUST_FROM`` of the query covered and reaches ``KEYWORD_WEIGHT`` at
  ``TRUST_FULL``.
- The three constants were chosen by ``python eval/tune.py``: 5-fold cross-validation
  over 144 settings, each judged by its worst margin over the better single channel on
  any slice, with the cosines as they are and weakened. Held out, it scores recall@10
  0.852 on natural questions (dense 0.850, BM25 0.749), 0.996 on identifiers (BM25
  0.988) and exactly dense's 0.633 on paraphrases; with the cosines weakened, 0.765 on
  natural questions against BM25's 0.749 and dense's 0.655. Of the soft-OR rules with a
  lower floor, none kept both margins: each lost to one channel somewhere.

The start and full were chosen again, 0.4 / 0.55 -> 0.35 / 0.45, once eval/ also kept a store
per project and per conversation (``eval/run.py --stores``: as nbmemory keeps stores by default
and as the held-out set keeps its notes, in ten stores) and BM25's ``b`` went to 0.1 (see
:class:`LexicalIndex`). In a small store of alike notes an answer's keyword match covers less of
its question (the chats' best match: median 0.55 of the query in one store, 0.41 in their own),
so the old start left keywords out where the cosine was weak: with the cosines weakened and a
store per conversation, hybrid scored 0.686 on the chats against BM25's 0.724. ``eval/tune.py``
now keeps only the settings that hold tests/test_eval.py's rule as measured in both layouts and
takes the best worst margin among them; four folds of five chose (0.7, 0.35, 0.45). Recall@10
before -> after (with ``b``), ``eval/run.py``: one store 0.849 -> 0.851 (chats 0.852 -> 0.866,
paraphrases 0.622 -> 0.612: one query), a store per source 0.873 -> 0.886 (chats 0.823 ->
0.852); with the cosines weakened (tune.py) 0.738 -> 0.779 and 0.745 -> 0.786 (the chats, one
store each: 0.686 -> 0.747; BM25 alone 0.757).

Below the start, and while the keyword weight rises from it to full, keywords lift notes under
the ones kept in their places: see keyword_lift.py.

Keyword feedback (:func:`with_feedback`). Where keywords count (w > 0), the ``FEEDBACK_TERMS``
words that best characterise the ``FEEDBACK_NOTES`` best notes of that first pass (their
share of each note's words times idf, the query's own words left out) are looked up in
every candidate, and a candidate's keyword share becomes ``1 - FEEDBACK_WEIGHT`` of its own
plus ``FEEDBACK_WEIGHT`` of how well it matches them (against the best candidate); the notes
they came from keep their share. A note that answers the question in its neighbours' words
rather than the query's rises (pseudo-relevance feedback, as in RM3, with the first pass
ranked by both channels). Measured with ``python eval/run.py``: natural questions recall@10
0.850 -> 0.861, recall@5 0.758 -> 0.774, recall@1 and MRR within 0.004 (0.623 -> 0.619,
0.723 -> 0.720); paraphrases unchanged; identifiers 0.996 -> 0.992 (one query). With the
cosines weakened: natural questions 0.765 -> 0.786 (BM25 0.749). The three constants were
chosen by ``eval/tune.py`` after the fusion's: 5-fold cross-validation over 72 settings and
none, each judged by its recall@10 in the worse of the two conditions among those losing
at most 0.005 of MRR on any slice; the folds chose 3 notes, 10-20 words and weight 0.5-0.7,
and held out they score 0.856 and 0.781 on natural questions. Blending the notes the words
came from as well cost 4 points of recall@1 (they are reshuffled among themselves).

The numbers above are from eval/ before it held chats (701 queries). On the 300 questions about
its five chats added since (850 messages, one a note): recall@10 0.816 (without feedback
0.766), dense 0.748, BM25 0.682; on all 1,001 queries hybrid 0.839, dense 0.801.

The feedback's constants were chosen again once ``eval/tune.py`` ranked as recall does (the
context below applied, the chats a slice of their own): its folds chose 5 notes, 15 words
(one fold 20) and weight 0.4 over the 3 / 15 / 0.5 chosen before. On all 1,001 queries as
measured recall@10 0.853 either way, MRR 0.663 -> 0.665, chats 0.855 -> 0.858, recall@5
0.764 -> 0.756; with the cosines weakened 0.746 -> 0.755 (chats 0.746 -> 0.761).

Context from the note before (:func:`with_context`). A note written right after another by
the same author (within ``NEIGHBOUR_GAP_S``) is read in its light: if it matches the query
itself, its keyword share becomes its own plus ``CONTEXT_WEIGHT`` of that note's, but never
more than that note's own; the notes written right after the keyword channel's best that
match the query join the candidates with their own scores. A chat message often answers in
its neighbour's words ("Callum? just passive aggressive notes on the fridge" after "how are
things with Callum since the row about the bills?"); an analyst's finding mostly stands
alone, and the cap keeps a note's keyword share from passing the one it follows on
borrowed words (it may reach it: then the cosine decides between the two, as for a chat's
answer it should).
Measured with ``python eval/run.py`` (1,001 queries; the notes are written in file order, so
each follows the one before it): chats recall@10 0.816 -> 0.855, the other natural questions
0.856 -> 0.862, identifiers and paraphrases unchanged, all 0.839 -> 0.853. Chosen on the same
set (scripts outside the repo, exact scoring): adding the neighbour's share uncapped lifted
the chats as much (0.862 at 0.35) but cost the other natural questions' MRR 0.029 at 0.35 and
0.158 at 1.0; taking only the larger of the two shares gained at most 1.7 points on the chats;
capped, 0.35, 0.5 and 1.0 scored 0.848, 0.855 and 0.848 on the chats, 0.860, 0.856 and 0.858
on the other natural questions, the same with or without requiring the note's own match.
Without that requirement a note sharing no word with the query surfaced on its neighbour's
alone (a panel test caught "the nightly export..." shown for "acquire_lock"). Cross-validated
by ``eval/tune.py`` (5 folds, weights 0-1, judged as the feedback is, the chats a slice of their
own): with the feedback of 3 notes the folds split between 0.35 and 0.1, the other natural
questions' MRR falling 0.716 -> 0.711; with the feedback of 5 notes every fold chose 0.35. Cost
at 100k notes, all linked: 0.16 ms a recall when measured; the followers are now looked up among
the query's keyword matches (0.05 ms).

How much of its cosine a note keeps by its form (a note of few words, one that ends asking):
see dense_weight.py. How far below its place by keywords alone a trusted keyword match may
fall: see keyword_places.py.
"""

from __future__ import annotations

import re
from typing import Container, NamedTuple, Sequence

import numpy as np

from .dense_search import beside, nearest
from .dense_weight import asking_weight, short_note_weight
from .keyword_lift import LIFT_BELOW, LIFT_EASE, ease_under, lift  # noqa: F401
from .keyword_places import KEYWORD_SLACK, keep_places
from .lexical import LexicalIndex, top_positions
from .tokenizer import tokenize
from .vectors import VectorIndex

# Chosen by eval/tune.py (cross-validated on eval/; see the module docstring).
KEYWORD_WEIGHT = 0.6
TRUST_FROM = 0.35
TRUST_FULL = 0.45
# Keyword feedback from the first pass's best notes (see the module docstring).
FEEDBACK_NOTES = 5
FEEDBACK_TERMS = 15
FEEDBACK_WEIGHT = 0.4
FUSION = (KEYWORD_WEIGHT, TRUST_FROM, TRUST_FULL)
FEEDBACK = (FEEDBACK_NOTES, FEEDBACK_TERMS, FEEDBACK_WEIGHT)
# A query word that names a thing (orders.amount, df_2021, data/raw): its terms are not plain
# words a note shares by chance (own_terms).
_IDENTIFIER = re.compile(r"\w[._/]\w|\d")
# Context from the note written just before (see the module docstring; the gap that makes
# two notes neighbours is store.filters.NEIGHBOUR_GAP_S).
CONTEXT_WEIGHT = 0.35


class Scored(NamedTuple):
    note_id: int
    score: float
    lexical: float
    dense: float


class Ranked(NamedTuple):
    """The candidates of one query and their scores, one array each, in id order; in hybrid
    mode also the query's keyword weight, how much of it its best keyword match covers, how
    many notes closest in meaning kept their places while keywords lifted the others
    (:func:`lifted`; 0: the mix ranked them all), and how many keyword matches were moved up
    to keep a place near their place by keywords (:mod:`.keyword_places`)."""

    ids: np.ndarray
    score: np.ndarray
    lexical: np.ndarray
    dense: np.ndarray
    weight: float = 0.0
    covered: float = 0.0
    kept: int = 0
    placed: int = 0

    def rows(self) -> list[Scored]:
        return [Scored(int(i), float(s), float(lx), float(d))
                for i, s, lx, d in zip(self.ids, self.score, self.lexical, self.dense)]


_EMPTY = Ranked(np.empty(0, np.int64), np.empty(0, np.float32), np.empty(0, np.float32),
                np.empty(0, np.float32))


def keyword_weight(lexical: np.ndarray, weight: float = KEYWORD_WEIGHT,
                   start: float = TRUST_FROM, full: float = TRUST_FULL) -> float:
    """How much of a query's score comes from keywords: ``weight`` times how far the
    query's best keyword match (its normalised lexical score) is from ``start`` to
    ``full``, clipped to 0..1."""
    best = float(np.max(lexical)) if len(lexical) else 0.0
    return weight * min(1.0, max(0.0, (best - start) / (full - start)))


def fuse(lexical: np.ndarray, dense: np.ndarray, weight: float = KEYWORD_WEIGHT,
         start: float = TRUST_FROM, full: float = TRUST_FULL) -> np.ndarray:
    """A convex mix of meaning and keywords whose keyword weight is set per query.

    score = (1 - w) * cosine + w * keyword share, both on 0..1 scales, where w =
    :func:`keyword_weight`: 0 while the query's best keyword match covers less than
    ``start`` of it (idf-weighted), rising to ``weight`` once one covers ``full``. So a
    question in other words than its note, whose only keyword matches are one or two
    everyday words in wrong notes, is ranked by meaning and scores its cosine (in recall,
    its keyword matches may still rise, but only below the notes closest in meaning:
    :func:`lifted`); a question sharing some of its words with a note mixes both; an
    identifier lookup is mostly keywords, and the cosine orders the notes holding it.

    One w per query keeps the score absolute (0..1, the same scale for every query), so
    ``min_score`` means the same whatever the query; a per-note weight or per-query
    normalisation of the channels would not.
    """
    return mix(lexical, dense, keyword_weight(lexical, weight, start, full))


def mix(lexical: np.ndarray, dense: np.ndarray, w: float) -> np.ndarray:
    """(1 - w) * cosine (clipped to 0..1) + w * keyword share."""
    return (1.0 - w) * np.clip(np.asarray(dense, np.float32), 0.0, 1.0) + \
        w * np.asarray(lexical, np.float32)


def query_terms(query: str) -> set[str]:
    """Every term a note holding the query's words holds for them (its CJK characters
    alone too): none of them is a word feedback may add."""
    return set(tokenize(query, document=True))


def feedback_terms(ids: Sequence[int], weights: np.ndarray, lexical: LexicalIndex,
                   exclude: Container[str], n: int = FEEDBACK_TERMS) -> dict[str, float]:
    """The ``n`` terms that best characterise the notes ``ids`` (each of ``weights``) apart
    from ``exclude``, with weights summing to 1: per term, the sum over the notes of the
    note's share of ``weights`` times the term's share of the note's terms, times its idf.
    The notes' terms are the keyword index's (a note's own text is not tokenized again)."""
    shares = np.asarray(weights, np.float64)
    shares = shares / shares.sum() if shares.sum() > 0 else np.full(len(shares), 1 / len(shares))
    totals: dict[str, float] = {}
    for doc_id, share in zip(ids, shares.tolist()):
        length = lexical.length(doc_id)
        for term, count in lexical.terms_of(doc_id).items():
            if term not in exclude:
                totals[term] = totals.get(term, 0.0) + share * count / length
    terms = list(totals)
    values = np.array([totals[t] for t in terms]) * lexical.idfs(terms)
    scored = sorted(zip((-values).tolist(), terms))  # ties: by term
    best = [(t, -v) for v, t in scored[:n] if v < 0]
    total = sum(v for _, v in best)
    return {t: v / total for t, v in best}


def with_feedback(query: str, lexical: LexicalIndex, ids: np.ndarray, first: np.ndarray,
                  keyword: np.ndarray, drop: Container[int] = (), notes: int = FEEDBACK_NOTES,
                  terms: int = FEEDBACK_TERMS, weight: float = FEEDBACK_WEIGHT) -> np.ndarray:
    """``keyword`` (the candidates' keyword shares) blended with how well each candidate
    matches the :func:`feedback_terms` (``terms`` of them) of the ``notes`` best by
    ``first`` (not in ``drop``): (1 - ``weight``) * share + ``weight`` * feedback score /
    the best candidate's, so still on 0..1. The notes the terms came from keep their
    share: blended, they matched their own terms best and were reshuffled among
    themselves, which cost recall@1 4 points on eval/'s natural questions."""
    # A few more than ``notes``, so that inactive notes among the best do not leave none.
    best = [at for at in top_positions(first, notes + 8).tolist()
            if int(ids[at]) not in drop][:notes]
    if not best:
        return keyword
    words = feedback_terms([int(ids[at]) for at in best], first[best], lexical,
                           query_terms(query), terms)
    extra = lexical.score_at(words, ids) if words else np.zeros(0, np.float32)
    top = float(extra.max()) if len(extra) else 0.0
    if top <= 0:
        return keyword
    blended = ((1.0 - weight) * np.asarray(keyword, np.float32) +
               weight * extra / top).astype(np.float32)
    blended[best] = keyword[best]
    return blended


def with_context(ids: np.ndarray, keyword: np.ndarray, before: np.ndarray,
                 drop: Container[int] = (), weight: float = CONTEXT_WEIGHT) -> np.ndarray:
    """``keyword`` (the keyword shares of the candidates ``ids``, ascending) where a note that
    matches the query itself also gets ``weight`` of the share of the note it follows
    (``before``, by id; -1: none), but never more from it than that note's own share: a
    message that answers in its neighbour's words rises, never above the neighbour, and a
    note that shares no word with the query is not lifted by its neighbour's. A note whose
    predecessor is not among the candidates, or is in ``drop`` (forgotten, superseded),
    keeps its share."""
    keyword = np.asarray(keyword, np.float32)
    previous = np.full(len(ids), -1, np.int64)
    known = ids < len(before)
    previous[known] = before[ids[known]]
    at = np.minimum(np.searchsorted(ids, previous), len(ids) - 1)
    found = (previous >= 0) & (ids[at] == previous) & (keyword > 0)
    if drop:
        found &= np.fromiter((i not in drop for i in previous.tolist()), bool, len(ids))
    theirs = np.zeros(len(ids), np.float32)
    theirs[found] = keyword[at[found]]
    return np.maximum(keyword, np.minimum(keyword + weight * theirs, theirs))


def _followers(ids: np.ndarray, after: np.ndarray, drop: Container[int] = ()) -> np.ndarray:
    """The notes written right after ``ids`` not in ``drop`` (``after``, by id; -1: none)."""
    ids = ids[ids < len(after)]
    if drop:
        ids = ids[np.fromiter((i not in drop for i in ids.tolist()), bool, len(ids))]
    following = after[ids]
    return following[following >= 0]


def _add_followers(pooled: np.ndarray, matched: np.ndarray, after: np.ndarray,
                   vectors: VectorIndex, drop: Container[int]) -> None:
    """Add to the keyword channel's candidates (``pooled``: a flag for each of the query's
    ``matched`` notes, ascending) the notes written right after them that match the query
    too: a reply that shares one word with the question may rank below the pool on its own
    (:func:`with_context`)."""
    following = _followers(matched[pooled], after, drop)
    if len(following):
        at = np.minimum(np.searchsorted(matched, following), len(matched) - 1)
        at = at[matched[at] == following]
        pooled[at[vectors.holds(matched[at])]] = True


def rank(query: str, qvec: np.ndarray | None, lexical: LexicalIndex, vectors: VectorIndex, *,
         candidates: np.ndarray | None, pool: int, exact_below: int,
         drop: Container[int] = (), mode: str = "hybrid",
         feedback: bool = False, neighbours=None) -> list[Scored]:
    """Candidates scored by both channels, unsorted (see :func:`rank_arrays`)."""
    return rank_arrays(query, qvec, lexical, vectors, candidates=candidates, pool=pool,
                       exact_below=exact_below, drop=drop, mode=mode, feedback=feedback,
                       neighbours=neighbours).rows()


def rank_arrays(query: str, qvec: np.ndarray | None, lexical: LexicalIndex,
                vectors: VectorIndex, *, candidates: np.ndarray | None, pool: int,
                exact_below: int, drop: Container[int] = (), mode: str = "hybrid",
                feedback: bool = False, neighbours=None) -> Ranked:
    """The best ``pool`` candidates of each channel, each scored by both, in id order.

    ``candidates`` (sorted ids) restricts the search and makes the dense channel exact.
    ``drop``: ids the caller will leave out (notes no longer active); the dense channel
    looks further, until it has ``pool`` others, so that they do not crowd them out.
    ``feedback``: keyword feedback (:func:`with_feedback`) in hybrid mode.
    ``neighbours`` (``before`` and ``after``: which note each follows, both ways, by id):
    context from the note written just before (:func:`with_context`) in hybrid mode.

    The work grows with ``pool``, not with the store: each channel keeps its best
    ``pool`` by selection (no sort of every match) and only the union of the two is
    fused.
    """
    if candidates is not None and mode != "lexical":  # keywords need no vector: a note
        candidates = candidates[vectors.holds(candidates)]  # waiting for one is found too
        if not len(candidates):
            return _EMPTY
    searching = None
    if (mode == "dense" or qvec is not None) and candidates is None:
        # Unscored: the union's cosines are computed below, once.
        searching = beside(nearest, vectors, qvec, pool, len(vectors) <= exact_below, drop,
                           scored=False)
    matched, bm25 = lexical.matches(query, candidates)
    pooled = np.zeros(len(matched), bool)  # the keyword channel's candidates among them
    pooled[_keyword_pool(matched, bm25, pool, drop)] = True
    if neighbours is not None and mode == "hybrid" and len(matched):
        _add_followers(pooled, matched, neighbours.after, vectors, drop)
    lex_ids = matched[pooled]
    if searching is not None:
        dense_ids, _ = searching.result()
    elif mode == "dense" or qvec is not None:
        sims = vectors.similarities(qvec, candidates)
        dense_ids = candidates[top_positions(sims, pool)]
    else:
        dense_ids = np.empty(0, np.int64)
    if mode == "lexical":
        union = np.sort(lex_ids)
    elif mode == "dense":
        union = np.sort(dense_ids)
    else:
        union = np.unique(np.concatenate([lex_ids, dense_ids]))
    if not len(union):
        return _EMPTY
    dense = np.zeros(len(union), np.float32)
    if qvec is not None:  # a note whose vector an index update failed to add scores 0
        held = vectors.holds(union)
        dense[held] = vectors.similarities(qvec, union[held])
        # Hybrid: the terms a note shares with the query count by its keyword match.
        terms = own_terms(query, lexical, union) if mode == "hybrid" else lexical.lengths(union)
        dense *= short_note_weight(terms) * asking_weight(lexical.asking(union))
    lex = np.zeros(len(union), np.float32)
    scale = lexical.max_score(query)
    if scale > 0 and len(matched):
        # Every candidate's own share, in the keyword channel's pool or not: the pool grows
        # with k, and a note's score must not (-k 10 shows the first ten of -k 20).
        at = np.minimum(np.searchsorted(matched, union), len(matched) - 1)
        found = matched[at] == union
        lex[found] = bm25[at[found]]
        lex /= scale
    uncapped, lex = lex, np.minimum(lex, 1.0)
    if mode != "hybrid":
        return Ranked(union, {"lexical": lex, "dense": dense}[mode], lex, dense)
    score, lex, weight, covered, kept, placed = hybrid(
        query, lexical, union, lex, dense, neighbours.before if neighbours is not None else None,
        drop, feedback=FEEDBACK if feedback else None, uncapped=uncapped)
    return Ranked(union, score, lex, dense, weight, covered, kept, placed)


def own_terms(query: str, lexical: LexicalIndex, ids: np.ndarray) -> np.ndarray:
    """Each note's number of terms but the query's words it holds; not an identifier's
    terms (orders.amount, 2021-03: a note naming the same thing is about it)."""
    named = {term for word in query.split() if _IDENTIFIER.search(word)
             for term in tokenize(word, document=True)}
    shared = lexical.counts_at(sorted(query_terms(query) - named), ids).sum(axis=0)
    return np.maximum(lexical.lengths(ids) - shared, 0.0)


def _keyword_pool(matched: np.ndarray, bm25: np.ndarray, pool: int,
                  drop: Container[int]) -> np.ndarray:
    """Positions of the best ``pool`` of the ``matched`` notes not in ``drop``, and of the
    dropped ones scoring among them (at most ``pool``): forgotten notes must not take the
    places of the notes that can be shown."""
    if not drop or not len(matched):
        return top_positions(bm25, pool)
    gone = np.isin(matched, np.fromiter(drop, np.int64, len(drop)))
    live, dead = np.flatnonzero(~gone), np.flatnonzero(gone)
    best = live[top_positions(bm25[live], pool)]
    if len(best) == pool:
        dead = dead[bm25[dead] >= bm25[best[-1]]]
    return np.concatenate([best, dead[top_positions(bm25[dead], pool)]])


def hybrid(query: str, lexical: LexicalIndex, ids: np.ndarray, keyword: np.ndarray,
           dense: np.ndarray, before: np.ndarray | None = None, drop: Container[int] = (), *,
           fusion: tuple[float, float, float] = FUSION,
           feedback: tuple[int, int, float] | None = FEEDBACK,
           context: float = CONTEXT_WEIGHT, lift: int | None = LIFT_BELOW,
           slack: int | None = KEYWORD_SLACK, uncapped: np.ndarray | None = None
           ) -> tuple[np.ndarray, np.ndarray, float, float, int, int]:
    """Hybrid scores of the candidates ``ids`` (ascending) from their keyword shares and
    cosines, their keyword shares as fused, the keyword weight, the best share it was set by,
    how many notes kept their places while keywords lifted the others (0: none), and how many
    keyword matches were moved up to keep theirs (:mod:`.keyword_places`): context
    from the note before (``before``; None: none), the fusion (:func:`fuse`'s weight, start,
    full), then keyword feedback (notes, terms, weight; None: none); below the start,
    keywords lift notes under the cosine's ``lift`` best (:func:`lifted`; None: they do not
    count); from it, a note's own keyword match keeps a place within ``slack`` of its place
    by keywords alone (:func:`~.keyword_places.keep_places`, by the ``uncapped`` shares if
    given; None: it does not). eval/tune.py varies the constants."""
    own = keyword
    if before is not None and context:
        keyword = with_context(ids, keyword, before, drop, context)
    # The notes that can be shown set the weight and keep their places: a forgotten or
    # superseded note must not steer the others. It scores as it would among them all, for
    # "previously believed" (its own keyword match still counts for it).
    shown = np.fromiter((i not in drop for i in ids.tolist()), bool, len(ids)) if drop else None
    fused = _fused(query, lexical, ids, keyword, dense, drop, fusion, feedback, lift,
                   np.flatnonzero(shown) if shown is not None else np.arange(len(ids)))
    if shown is not None and not shown.all():
        gone = ~shown
        fused[0][gone] = _fused(query, lexical, ids, keyword, dense, drop, fusion, feedback,
                                lift, np.arange(len(ids)))[0][gone]
    if slack is None:
        return (*fused, 0)
    placed, moved = keep_places(fused[0], own, dense, ids, fusion[1],
                                np.flatnonzero(shown) if shown is not None else None, slack,
                                uncapped)
    return (placed, *fused[1:], moved)


def _fused(query, lexical, ids, keyword, dense, drop, fusion, feedback, lift, active):
    """:func:`hybrid`'s scores, with ``active`` (positions) setting the weight and keeping
    the places below the start."""
    covered = float(np.max(keyword[active])) if len(active) else 0.0
    w = keyword_weight(keyword[active], *fusion)
    if w == 0 and covered > 0 and lift and len(active) > lift:
        weight, start, _ = fusion
        w = weight * min(1.0, covered / start) if start > 0 else weight
        return (*lifted(query, lexical, ids, keyword, dense, w, lift, drop, feedback, active),
                w, covered, lift)
    score, own = mix(keyword, dense, w), keyword
    if w > 0 and feedback is not None:
        notes, terms, weight = feedback
        keyword = with_feedback(query, lexical, ids, score, keyword, drop, notes, terms, weight)
        score = mix(keyword, dense, w)
    if 0 < w < fusion[0] and lift and len(active) > lift:  # the rise from the start to full
        kept = active[top_positions(score[active], lift)]
        score, shares = lifted(query, lexical, ids, own, dense, fusion[0], lift, drop, feedback,
                               active, first=score, scale=1.0 - w)
        shares = shares.copy()  # may be the caller's own array (no feedback words found)
        shares[kept] = keyword[kept]  # the shares each score was made of, for explain
        return score, shares, w, covered, lift
    return score, keyword, w, covered, 0


def lifted(query: str, lexical: LexicalIndex, ids: np.ndarray, keyword: np.ndarray,
           dense: np.ndarray, w: float, below: int, drop: Container[int] = (),
           feedback: tuple[int, int, float] | None = FEEDBACK,
           active: np.ndarray | None = None, first: np.ndarray | None = None,
           scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~.keyword_lift.lift` of the keyword shares after feedback (its first pass the
    mix at weight ``w``), and those shares."""
    if feedback is not None:
        notes, terms, weight = feedback
        keyword = with_feedback(query, lexical, ids, mix(keyword, dense, w), keyword, drop,
                                notes, terms, weight)
    return lift(keyword, dense, w, below, active, first, scale), keyword
