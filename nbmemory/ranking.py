"""Hybrid ranking: a lexical (BM25) and a dense (cosine) channel, fused.

Both channels propose their best ``pool`` candidates; every candidate then gets an
exact score from both, so fusion compares like with like. The lexical score is
divided by the score of a note matching every query term once (and capped at 1), so
it reads as the idf-weighted share of the query that the note matches; query terms no
note contains count too (see :meth:`LexicalIndex.max_score`).

How the two are fused, and why, is in :func:`fuse`; ``python eval/run.py`` measures it.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .lexical import LexicalIndex
from .vectors import VectorIndex

MODES = ("hybrid", "lexical", "dense")
# Measured on eval/ (python eval/run.py): any floor from 0.4 to 0.55 and any weight from
# 0.8 to 0.95 keeps hybrid at least as good as the better channel on both halves; a floor
# of 0.35 or less lets shared everyday words push wrong notes above paraphrase matches.
LEXICAL_WEIGHT = 0.9
LEXICAL_FLOOR = 0.5


class Scored(NamedTuple):
    note_id: int
    score: float
    lexical: float
    dense: float


def keyword_evidence(lexical: np.ndarray, floor: float = LEXICAL_FLOOR) -> np.ndarray:
    """The part of the normalised lexical score above ``floor``, rescaled to 0..1."""
    return np.clip((np.asarray(lexical, np.float32) - floor) / (1.0 - floor), 0.0, 1.0)


def fuse(lexical: np.ndarray, dense: np.ndarray, weight: float = LEXICAL_WEIGHT,
         floor: float = LEXICAL_FLOOR) -> np.ndarray:
    """Soft OR of meaning and keywords: 1 - (1 - dense)(1 - weight * keyword).

    ``keyword`` = max(0, (lexical - floor) / (1 - floor)): keyword evidence counts only
    for the part of the query a note matches beyond ``floor`` (half of it, weighted by
    idf). A note that shares one or two everyday words with a question ("client",
    "table") gets nothing and is ranked by meaning alone, because such overlaps are
    noise that outvotes the cosine margin between a paraphrase and its neighbours. A
    note holding the identifier, column, path or error string the query names matches
    nearly all of it and is lifted toward 1, because there the exact token is the
    answer and the embedding only blurs it; among several such notes the cosine still
    orders them (``weight`` < 1).

    A note found by meaning alone keeps its cosine as its score, so one threshold
    (``Settings.min_score``) reads the same for both channels.
    """
    dense = np.clip(dense, 0.0, 1.0)
    # = 1 - (1 - dense)(1 - weight * keyword), written so that keyword 0 gives dense exactly
    return dense + (1.0 - dense) * weight * keyword_evidence(lexical, floor)


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
