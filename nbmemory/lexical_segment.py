"""The keyword index's documents in flat arrays, in both directions: per term its postings
(what a query's terms score), per document its terms (what keyword feedback reads).

The per-document direction had been dropped to save memory, when only removals and merges
used it. Keyword feedback (ranking.py) now reads it on every hybrid recall: the best
notes' terms, then every candidate's terms matched against the fifteen feedback terms. At
100k notes (bench_scale's corpus, 2 cores) that took the feedback inside a recall from 0.94 ms
(the notes read and tokenized again, each term's postings searched for every candidate) to
0.40, same results; 200 feedback calls alone, their texts at hand: 0.33-0.35 -> 0.24 ms.
The direction adds 5 bytes an entry and 8 a document id: the file 8.6 -> 15.3 MB at 100k.
"""

from __future__ import annotations

from array import array
from typing import Iterable

import numpy as np

from . import dense_weight
from .tokenizer import tokenize

# A term's frequency in one document counts up to this (one byte a posting). BM25 has long
# saturated there: at k1=1.2 a term 255 times in a 300-word note scores 0.6% below 1,000 times.
TF_CAP = 255


class SegmentError(Exception):
    """The arrays do not make a segment."""


def term_counts(text: str) -> tuple[dict[str, int], int]:
    """Each term of ``text`` with how often it occurs (at most TF_CAP), and its length."""
    terms = tokenize(text, document=True)
    counts: dict[str, int] = {}
    for term in terms:
        counts[term] = counts.get(term, 0) + 1
    if len(terms) > TF_CAP:
        counts = {t: min(n, TF_CAP) for t, n in counts.items()}
    return counts, len(terms)


def ranges(offsets: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The positions ``offsets[i]`` up to ``offsets[i + 1]`` for each ``i`` of ``at``, in
    order, and for each position the place in ``at`` of the range it is in."""
    starts = offsets[at]
    sizes = offsets[at + 1] - starts
    ends = np.cumsum(sizes)
    where = np.repeat(starts - (ends - sizes), sizes) + np.arange(int(ends[-1]) if len(ends) else 0)
    return where, np.repeat(np.arange(len(at)), sizes)


class Segment:
    """Many documents in flat arrays, immutable once built: per term its postings (document
    ids ascending, term frequencies), per document id its length, how much of it asks
    (dense_weight.asking) and its entries (term numbers in first-occurrence order, term
    frequencies)."""

    def __init__(self, terms: list[str], docs: np.ndarray, lengths: np.ndarray,
                 asking: np.ndarray, offsets: np.ndarray, post_docs: np.ndarray,
                 post_tfs: np.ndarray, fwd_offsets: np.ndarray, fwd_terms: np.ndarray,
                 fwd_tfs: np.ndarray):
        self.terms = terms
        self.term_ids = {t: i for i, t in enumerate(terms)}
        self.docs = docs  # ids of its documents, ascending (int64)
        self.lengths = lengths  # by document id (float32; 0 where absent)
        self.asking = asking  # by document id (float32; 0 where absent)
        self.offsets = offsets  # by term: its postings' range
        self.post_docs, self.post_tfs = post_docs, post_tfs  # int32, uint8
        self.fwd_offsets = fwd_offsets  # by document id: its entries' range (int64)
        self.fwd_terms, self.fwd_tfs = fwd_terms, fwd_tfs  # int32, uint8

    @classmethod
    def empty(cls) -> Segment:
        return cls.assemble([], np.empty(0, np.int64), np.zeros(0, np.float32),
                            np.zeros(0, np.float32), np.empty(0, np.int32),
                            np.empty(0, np.int64), np.empty(0, np.uint8))

    @classmethod
    def build(cls, docs: Iterable[tuple[int, str]]) -> Segment:
        """Tokenize ``docs`` (id, text; a repeated id: the last text) straight into arrays."""
        vocab: dict[str, int] = {}
        ids, sizes, lengths, shares = [], [], [], []
        entry_terms, entry_tfs = array("i"), array("B")
        for doc_id, text in sorted(dict(docs).items()):
            if doc_id < 0:
                raise ValueError("document ids must be non-negative")
            counts, length = term_counts(text)
            ids.append(doc_id)
            sizes.append(len(counts))
            lengths.append(length)
            shares.append(dense_weight.asking(text))
            entry_terms.extend([vocab.setdefault(t, len(vocab)) for t in counts])
            entry_tfs.extend(counts.values())
        return cls.assemble(list(vocab), np.array(ids, np.int64), np.array(lengths, np.float32),
                            np.array(shares, np.float32), np.frombuffer(entry_terms, np.int32),
                            np.array(sizes, np.int64), np.frombuffer(entry_tfs, np.uint8))

    @classmethod
    def assemble(cls, terms: list[str], ids: np.ndarray, lengths: np.ndarray,
                 asking: np.ndarray, fwd_terms: np.ndarray, sizes: np.ndarray,
                 fwd_tfs: np.ndarray,
                 postings: tuple[np.ndarray, np.ndarray] | None = None) -> Segment:
        """From documents ``ids`` (ascending) of ``lengths``, ``asking`` and ``sizes`` (how many
        entries each) and their entries (term number, term frequency) in that order.
        ``postings`` (the same entries' ids and frequencies in term order, each term's ids
        ascending), when the caller has them, else sorted out of the entries. Terms no entry
        holds are dropped."""
        fwd_terms = np.asarray(fwd_terms, np.int32)
        counts = np.bincount(fwd_terms, minlength=len(terms))
        if postings is None:
            order = np.argsort(fwd_terms, kind="stable")  # keeps each term's ids ascending
            entry_docs = np.repeat(ids.astype(np.int32), sizes)
            postings = (entry_docs[order], np.asarray(fwd_tfs)[order])
        if not counts.all():
            held = counts > 0
            terms = [t for t, keep in zip(terms, held.tolist()) if keep]
            fwd_terms = (np.cumsum(held, dtype=np.int32) - 1)[fwd_terms]
            counts = counts[held]
        offsets = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])
        top = int(ids[-1]) + 1 if len(ids) else 0
        by_id, asking_by_id = np.zeros(top, np.float32), np.zeros(top, np.float32)
        by_id[ids], asking_by_id[ids] = lengths, asking
        size_by_id = np.zeros(top, np.int64)
        size_by_id[ids] = sizes
        fwd_offsets = np.concatenate([[0], np.cumsum(size_by_id)])
        return cls(terms, ids, by_id, asking_by_id, offsets,
                   postings[0].astype(np.int32, copy=False),
                   postings[1].astype(np.uint8, copy=False), fwd_offsets, fwd_terms,
                   np.asarray(fwd_tfs).astype(np.uint8, copy=False))

    def entries(self, doc_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions in the entries of ``doc_ids`` (segment documents), in order, and for
        each the position in ``doc_ids`` it belongs to."""
        return ranges(self.fwd_offsets, np.asarray(doc_ids, np.int64))

    def arrays(self) -> dict[str, np.ndarray]:
        blob = "\n".join(self.terms).encode("utf-8")
        return {"terms": np.frombuffer(blob, np.uint8), "docs": self.docs,
                "lengths": self.lengths, "asking": self.asking, "offsets": self.offsets,
                "post_docs": self.post_docs, "post_tfs": self.post_tfs,
                "fwd_offsets": self.fwd_offsets, "fwd_terms": self.fwd_terms,
                "fwd_tfs": self.fwd_tfs}

    @classmethod
    def from_arrays(cls, a: dict[str, np.ndarray]) -> Segment:
        if "asking" not in a:  # older layouts too: each is rebuilt from the notes' texts
            raise SegmentError("written before notes that ask were told apart")
        blob = a["terms"].tobytes().decode("utf-8")
        terms = blob.split("\n") if blob else []
        if (len(terms) + 1 != len(a["offsets"]) or len(a["post_docs"]) != len(a["post_tfs"])
                or len(a["fwd_offsets"]) != len(a["lengths"]) + 1
                or len(a["asking"]) != len(a["lengths"])
                or not len(a["fwd_terms"]) == len(a["fwd_tfs"]) == len(a["post_docs"])):
            raise SegmentError("arrays of inconsistent sizes")
        return cls(terms, a["docs"], a["lengths"], a["asking"], a["offsets"], a["post_docs"],
                   a["post_tfs"], a["fwd_offsets"], a["fwd_terms"], a["fwd_tfs"])
