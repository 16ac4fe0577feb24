"""What recall shows as a note's dense score, worked out from the test embedder's cosine, for
tests asking whether a note has its vector."""

import numpy as np

from nbmemory.dense_weight import asking_weight, short_note_weight
from nbmemory.embed import HashEmbedder
from nbmemory.lexical import LexicalIndex
from nbmemory.ranking import own_terms


def cosine(query: str, text: str) -> float:
    """The test embedder's cosine of two texts."""
    return float(np.dot(*HashEmbedder().encode([query, text])))


def shown_dense(query: str, text: str, mode: str = "hybrid") -> float:
    """The part of its cosine a note of ``text`` keeps in a recall of ``query``: a short note,
    or one that ends asking, keeps part of it (dense_weight); 0 means no vector."""
    lexical, ids = LexicalIndex.build([(1, text)]), np.array([1])
    terms = own_terms(query, lexical, ids) if mode == "hybrid" else lexical.lengths(ids)
    kept = short_note_weight(terms) * asking_weight(lexical.asking(ids))
    return cosine(query, text) * float(kept[0])
