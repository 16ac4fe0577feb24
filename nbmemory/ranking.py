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
  over 96 settings, each judged by its worst margin over the better single channel on
  any slice, with the cosines as they are and weakened. Held out, it scores recall@10
  0.852 on natural questions (dense 0.850, BM25 0.749), 0.996 on identifiers (BM25
  0.988) and exactly dense's 0.633 on paraphrases; with the cosines weakened, 0.765 on
  natural questions against BM25's 0.749 and dense's 0.655. Of the soft-OR rules with a
  lower floor, none kept both margins: each lost to one channel somewhere.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .lexical import LexicalIndex
from .vectors import VectorIndex

MODES = ("hybrid", "lexical", "dense")
# Chosen by eval/tune.py (cross-validated on eval/; see the module docstring).
KEYWORD_WEIGHT = 0.7
TRUST_FROM = 0.4
TRUST_FULL = 0.55


class Scored(NamedTuple):
    note_id: int
    score: float
    lexical: float
    dense: float


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
    everyday words in wrong notes, is ranked by meaning alone and scores its cosine; a
    question sharing some of its words with a note mixes both; an identifier lookup is
    mostly keywords, and the cosine orders the notes holding it.

    One w per query keeps the score absolute (0..1, the same scale for every query), so
    ``min_score`` means the same whatever the query; a per-note weight or per-query
    normalisation of the channels would not.
    """
    w = keyword_weight(lexical, weight, start, full)
    return (1.0 - w) * np.clip(np.asarray(dense, np.float32), 0.0, 1.0) + \
        w * np.asarray(lexical, np.float32)


def rank(query: str, qvec: np.ndarray | None, lexical: LexicalIndex, vectors: VectorIndex, *,
         candidates: np.ndarray | None, pool: int, exact_below: int, skip: int = 0,
         mode: str = "hybrid") -> list[Scored]:
    """Candidates scored by both channels, unsorted.

    ``candidates`` (sorted ids) restricts the search and makes the dense channel exact;
    ``skip`` widens the approximate search to make room for ids the caller will drop.
    """
    if candidates is not None:
        candidates = candidates[np.isin(candidates, vectors.keys())]
        if not len(candidates):
            return []
    lex_ids, lex_scores = lexical.score(query, candidates, limit=pool)
    if mode == "dense" or qvec is not None:
        if candidates is None:
            dense_ids, _ = vectors.search(qvec, pool + skip, exact=len(vectors) <= exact_below)
        else:
            sims = vectors.similarities(qvec, candidates)
            dense_ids = candidates[np.argsort(-sims, kind="stable")[:pool + skip]]
    else:
        dense_ids = np.empty(0, np.int64)
    if mode == "lexical":
        union = lex_ids
    elif mode == "dense":
        union = dense_ids
    else:
        union = np.unique(np.concatenate([lex_ids, dense_ids]))
    if not len(union):
        return []
    dense = vectors.similarities(qvec, union) if qvec is not None else np.zeros(len(union), np.float32)
    lex = np.zeros(len(union), np.float32)
    scale = lexical.max_score(query)
    if scale > 0 and len(lex_ids):
        by_id = dict(zip(lex_ids.tolist(), lex_scores.tolist()))
        lex = np.minimum(np.array([by_id.get(i, 0.0) for i in union.tolist()], np.float32) / scale, 1.0)
    score = {"hybrid": fuse(lex, dense), "lexical": lex, "dense": dense}[mode]
    return [Scored(int(i), float(s), float(lx), float(d))
            for i, s, lx, d in zip(union, score, lex, dense)]
