"""Hybrid ranking: a lexical (BM25) and a dense (cosine) channel, fused.

Both channels propose their best ``pool`` candidates; every candidate then gets an
exact score from both, so fusion compares like with like. The lexical score is
divided by the score of a document matching every query term once (and capped at 1),
which keeps it on an absolute scale instead of "best of this query = 1".
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .lexical import LexicalIndex
from .vectors import VectorIndex

MODES = ("hybrid", "lexical", "dense")
LEXICAL_WEIGHT = 0.7


class Scored(NamedTuple):
    note_id: int
    score: float
    lexical: float
    dense: float


def fuse(lexical: np.ndarray, dense: np.ndarray, weight: float = LEXICAL_WEIGHT) -> np.ndarray:
    """Soft OR of the two channels: 1 - (1 - dense)(1 - weight * lexical).

    A note found by meaning alone keeps its cosine as its score, so one threshold works
    for both channels; a keyword match lifts it toward 1 without swamping the meaning.
    """
    dense = np.clip(dense, 0.0, 1.0)
    return 1.0 - (1.0 - dense) * (1.0 - weight * lexical)


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
        if candidates is None and len(vectors) > exact_below:
            dense_ids, _ = vectors.search(qvec, pool + skip)
        else:
            keys = candidates if candidates is not None else vectors.keys()
            sims = vectors.similarities(qvec, keys)
            dense_ids = keys[np.argsort(-sims, kind="stable")[:pool + skip]]
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
