"""BM25 with stemming: a projection of the note texts kept in a file, caught up from the
journal on open like the vector index.

Identifiers are kept whole as well as split into stemmed parts, so ``PyObject_GC_Del``
and ``orders.amount`` match exactly and by their pieces.

The index is a *segment* (many documents in flat arrays: per term its postings) plus the
documents added since in dictionaries (the *delta*). A removed segment document is marked
dead and its terms' document frequencies are counted again among the living when next
used, so scores are exactly those of an index built from scratch (tests/test_lexical).
``save`` folds the delta in and writes one file; ``load`` reads its arrays back. At 100k
notes (bench corpus, 2 busy cores): tokenizing every note took 6.5-7.3 s on each open,
loading the file about 0.19 s; the file is 8.5 MB (85 bytes a note; 92 MB at 1M).
Tantivy was not tried: its tokenizer would have to keep identifiers whole and stem their
parts as this one does, and the arrays already make an open a matter of reading a file.
"""

from __future__ import annotations

import math
from array import array
from pathlib import Path
from typing import Iterable

import numpy as np

from .arrays import ArraysFileError, read_arrays, write_arrays
from .tokenizer import TOKENIZER, tokenize  # noqa: F401  (tokenize: imported from here too)


def top_positions(scores: np.ndarray, n: int) -> np.ndarray:
    """Positions of the ``n`` largest ``scores``, best first, ties by position: the first
    ``n`` of a stable descending argsort, in time linear in ``len(scores)``."""
    if n <= 0 or not len(scores):
        return np.empty(0, np.int64)
    if n >= len(scores):
        return np.argsort(-scores, kind="stable")
    part = np.argpartition(-scores, n - 1)[:n]
    cut = scores[part].min()
    above = np.flatnonzero(scores > cut)
    tied = np.flatnonzero(scores == cut)[:n - len(above)]
    chosen = np.concatenate([above, tied])
    return chosen[np.lexsort((chosen, -scores[chosen]))]


def _counts(text: str) -> tuple[dict[str, int], int]:
    """Each term of ``text`` with how often it occurs (at most TF_CAP), and its length."""
    terms = tokenize(text)
    counts: dict[str, int] = {}
    for term in terms:
        counts[term] = counts.get(term, 0) + 1
    if len(terms) > TF_CAP:
        counts = {t: min(n, TF_CAP) for t, n in counts.items()}
    return counts, len(terms)


class LexicalIndexError(Exception):
    """The keyword index file cannot be used; rebuild it."""


# A term's frequency in one document counts up to this (one byte a posting). BM25 has long
# saturated there: at k1=1.2 a term 255 times in a 300-word note scores 0.6% below 1,000 times.
TF_CAP = 255
_MAGIC = b"NBMKW1\n\x00"


class _Segment:
    """Many documents in flat arrays: per term its postings (document ids ascending, term
    frequencies), per document its length. Immutable once built.

    Only this direction is kept: the other (per document its terms) doubled the file and
    the memory (at 1M notes 210 MB, of which 102 MB were the per-document arrays) and only
    served removals and merges, which now work from the postings.
    """

    def __init__(self, terms: list[str], docs: np.ndarray, lengths: np.ndarray,
                 offsets: np.ndarray, post_docs: np.ndarray, post_tfs: np.ndarray):
        self.terms = terms
        self.term_ids = {t: i for i, t in enumerate(terms)}
        self.docs = docs  # ids of its documents, ascending (int64)
        self.lengths = lengths  # by document id (float32; 0 where absent)
        self.offsets = offsets  # by term: its postings' range
        self.post_docs, self.post_tfs = post_docs, post_tfs  # int32, uint8

    @classmethod
    def empty(cls) -> _Segment:
        return cls([], np.empty(0, np.int64), np.zeros(0, np.float32), np.zeros(1, np.int64),
                   np.empty(0, np.int32), np.empty(0, np.uint8))

    @classmethod
    def build(cls, docs: Iterable[tuple[int, str]]) -> _Segment:
        """Tokenize ``docs`` (id, text; a repeated id: the last text) straight into arrays."""
        vocab: dict[str, int] = {}
        ids, sizes, lengths = [], [], []
        entry_terms, entry_tfs = array("i"), array("B")
        for doc_id, text in sorted(dict(docs).items()):
            if doc_id < 0:
                raise ValueError("document ids must be non-negative")
            counts, length = _counts(text)
            ids.append(doc_id)
            sizes.append(len(counts))
            lengths.append(length)
            entry_terms.extend([vocab.setdefault(t, len(vocab)) for t in counts])
            entry_tfs.extend(counts.values())
        ids_array = np.array(ids, np.int64)
        entry_docs = np.repeat(ids_array.astype(np.int32), np.array(sizes, np.int64))
        return cls._from_entries(list(vocab), ids_array, np.array(lengths, np.float32),
                                 np.frombuffer(entry_terms, np.int32), entry_docs,
                                 np.frombuffer(entry_tfs, np.uint8))

    @classmethod
    def _from_entries(cls, terms: list[str], ids: np.ndarray, lengths: np.ndarray,
                      e_terms: np.ndarray, e_docs: np.ndarray, e_tfs: np.ndarray) -> _Segment:
        """From documents ``ids`` (ascending) of ``lengths`` and their entries (term,
        document, term frequency), each term's in ascending document order (a stable sort
        by term keeps it). Terms no entry holds are dropped."""
        order = np.argsort(e_terms, kind="stable")
        return cls.assemble(terms, np.bincount(e_terms, minlength=len(terms)), ids, lengths,
                            e_docs[order], e_tfs[order])

    @classmethod
    def assemble(cls, terms: list[str], counts: np.ndarray, ids: np.ndarray,
                 lengths: np.ndarray, post_docs: np.ndarray, post_tfs: np.ndarray) -> _Segment:
        """From each term's number of postings (``counts``), the postings in term order,
        and documents ``ids`` (ascending) of ``lengths``. Terms without postings are dropped."""
        if not counts.all():
            terms = [t for t, n in zip(terms, counts.tolist()) if n]
            counts = counts[counts > 0]
        offsets = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])
        by_id = np.zeros(int(ids[-1]) + 1 if len(ids) else 0, np.float32)
        by_id[ids] = lengths
        return cls(terms, ids, by_id, offsets, post_docs.astype(np.int32, copy=False),
                   post_tfs.astype(np.uint8, copy=False))

    def arrays(self) -> dict[str, np.ndarray]:
        blob = "\n".join(self.terms).encode("utf-8")
        return {"terms": np.frombuffer(blob, np.uint8), "docs": self.docs,
                "lengths": self.lengths, "offsets": self.offsets,
                "post_docs": self.post_docs, "post_tfs": self.post_tfs}

    @classmethod
    def from_arrays(cls, a: dict[str, np.ndarray]) -> _Segment:
        blob = a["terms"].tobytes().decode("utf-8")
        terms = blob.split("\n") if blob else []
        if len(terms) + 1 != len(a["offsets"]) or len(a["post_docs"]) != len(a["post_tfs"]):
            raise LexicalIndexError("arrays of inconsistent sizes")
        tfs = a["post_tfs"]
        if tfs.dtype != np.uint8:  # a file from before TF_CAP (it also holds arrays by document)
            tfs = np.minimum(tfs, TF_CAP).astype(np.uint8)
        return cls(terms, a["docs"], a["lengths"], a["offsets"], a["post_docs"], tfs)


class LexicalIndex:
    """An inverted index with Okapi BM25 scoring (k1=1.2, b=0.75): a segment of many
    documents in arrays, plus the documents added since in dictionaries (the delta)."""

    k1 = 1.2
    b = 0.75

    def __init__(self, segment: _Segment | None = None) -> None:
        self._install(segment or _Segment.empty())

    def _install(self, segment: _Segment) -> None:
        self._seg = segment
        self._alive = np.zeros(len(segment.lengths), bool)  # segment documents not removed
        self._alive[segment.docs] = True
        self._seg_count, self._seg_removed = len(segment.docs), 0
        self._seg_df: dict[int, int] = {}  # by term: its living segment documents, once
        # segment documents were removed (counted on first use after each removal)
        self._postings: dict[str, dict[int, int]] = {}
        # Per delta term, its postings as arrays (ids, term frequencies), built on first
        # use and then extended by the documents added since (_pending), not rebuilt:
        # rebuilding a common term's arrays from the dictionary after every write cost the
        # next recall 3-4 ms at 100k notes. A removal (edit, purge) drops the term's arrays.
        self._arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._pending: dict[str, list[tuple[int, int]]] = {}
        self._doc_terms: dict[int, dict[str, int]] = {}
        self._lengths = np.zeros(max(1024, len(segment.lengths)), np.float32)  # by id
        self._lengths[:len(segment.lengths)] = segment.lengths
        self._total_len = int(segment.lengths.sum(dtype=np.float64))

    @classmethod
    def build(cls, docs: Iterable[tuple[int, str]]) -> LexicalIndex:
        """An index of ``docs`` (id, text), tokenized straight into a segment: about a
        third of the memory and time of adding them one by one."""
        return cls(_Segment.build(docs))

    def __len__(self) -> int:
        return self._seg_count + len(self._doc_terms)

    def __contains__(self, doc_id: int) -> bool:
        return doc_id in self._doc_terms or self._in_segment(doc_id)

    def _in_segment(self, doc_id: int) -> bool:
        return 0 <= doc_id < len(self._alive) and bool(self._alive[doc_id])

    def doc_ids(self) -> np.ndarray:
        """Ids of the indexed documents, ascending."""
        if not self._doc_terms:
            return np.flatnonzero(self._alive)
        held = np.zeros(max(len(self._alive), max(self._doc_terms) + 1), bool)
        held[:len(self._alive)] = self._alive
        held[np.fromiter(self._doc_terms, np.int64, len(self._doc_terms))] = True
        return np.flatnonzero(held)

    def add(self, doc_id: int, text: str) -> None:
        """Index ``text`` as document ``doc_id`` (a non-negative integer: a note id)."""
        doc_id = int(doc_id)
        if doc_id < 0:
            raise ValueError("document ids must be non-negative")
        if doc_id in self:
            self.remove(doc_id)
        counts, length = _counts(text)
        self._doc_terms[doc_id] = counts
        if doc_id >= len(self._lengths):
            grown = np.zeros(max(doc_id + 1, 2 * len(self._lengths)), np.float32)
            grown[:len(self._lengths)] = self._lengths
            self._lengths = grown
        self._lengths[doc_id] = length
        self._total_len += length
        for term, tf in counts.items():
            self._postings.setdefault(term, {})[doc_id] = tf
            if term in self._arrays:
                self._pending.setdefault(term, []).append((doc_id, tf))

    def add_many(self, docs: Iterable[tuple[int, str]]) -> None:
        if not len(self):
            self._install(_Segment.build(docs))
            return
        for doc_id, text in docs:
            self.add(doc_id, text)

    def remove(self, doc_id: int) -> None:
        doc_id = int(doc_id)
        if self._in_segment(doc_id):
            self._alive[doc_id] = False
            self._seg_count -= 1
            self._seg_removed += 1
            self._seg_df.clear()
            self._total_len -= int(self._lengths[doc_id])
            self._lengths[doc_id] = 0
            return
        counts = self._doc_terms.pop(doc_id, None)
        if counts is None:
            return
        self._total_len -= int(self._lengths[doc_id])
        self._lengths[doc_id] = 0
        for term in counts:
            posting = self._postings[term]
            del posting[doc_id]
            if not posting:
                del self._postings[term]
            self._arrays.pop(term, None)
            self._pending.pop(term, None)

    def _df(self, term: str) -> int:
        at = self._seg.term_ids.get(term)
        return (self._seg_df_of(at) if at is not None else 0) + len(self._postings.get(term, ()))

    def _seg_df_of(self, at: int) -> int:
        if not self._seg_removed:
            return int(self._seg.offsets[at + 1] - self._seg.offsets[at])
        df = self._seg_df.get(at)
        if df is None:  # counted, not gathered: keyword feedback asks for many terms' idf
            seg = self._seg
            df = self._seg_df[at] = int(np.count_nonzero(
                self._alive[seg.post_docs[seg.offsets[at]:seg.offsets[at + 1]]]))
        return df

    def docs_with(self, term: str) -> list[int]:
        """Ids of the documents holding ``term`` exactly (a term as :func:`tokenize` makes it)."""
        out = []
        if term in self._seg.term_ids:
            out = self._segment_postings(self._seg.term_ids[term])[0].tolist()
        return out + list(self._postings.get(term, ()))

    def terms(self) -> set[str]:
        """Every term some document holds."""
        living = self._living_counts()
        return {t for t, n in zip(self._seg.terms, living.tolist()) if n}.union(self._postings)

    def _living_counts(self) -> np.ndarray:
        """Per segment term, how many of its postings are of documents not removed."""
        seg = self._seg
        if not self._seg_removed:
            return np.diff(seg.offsets)
        alive = np.concatenate([[0], np.cumsum(self._alive[seg.post_docs], dtype=np.int64)])
        return alive[seg.offsets[1:]] - alive[seg.offsets[:-1]]

    def _segment_postings(self, at: int) -> tuple[np.ndarray, np.ndarray]:
        seg = self._seg
        start, stop = seg.offsets[at], seg.offsets[at + 1]
        ids = seg.post_docs[start:stop].astype(np.int64)
        tfs = seg.post_tfs[start:stop].astype(np.float32)
        if self._seg_removed:
            keep = self._alive[ids]
            ids, tfs = ids[keep], tfs[keep]
            self._seg_df[at] = len(ids)
        return ids, tfs

    def _delta_postings(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        arrays = self._arrays.get(term)
        if arrays is None:
            posting = self._postings[term]
            arrays = (np.fromiter(posting.keys(), dtype=np.int64, count=len(posting)),
                      np.fromiter(posting.values(), dtype=np.float32, count=len(posting)))
            self._pending.pop(term, None)
        elif term in self._pending:
            added = self._pending.pop(term)
            arrays = (np.concatenate([arrays[0], np.fromiter((d for d, _ in added), np.int64, len(added))]),
                      np.concatenate([arrays[1], np.fromiter((t for _, t in added), np.float32, len(added))]))
        self._arrays[term] = arrays
        return arrays

    def _posting_parts(self, term: str) -> list[tuple[np.ndarray, np.ndarray]]:
        """(ids, term frequencies) of the documents holding ``term``: the segment's, the delta's."""
        parts = []
        at = self._seg.term_ids.get(term)
        if at is not None and (not self._seg_removed or self._seg_df.get(at, 1)):
            ids, tfs = self._segment_postings(at)
            if len(ids):
                parts.append((ids, tfs))
        if term in self._postings:
            parts.append(self._delta_postings(term))
        return parts

    def score(self, query: str, candidates: np.ndarray | None = None,
              limit: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Ids and BM25 scores of matching documents, best first (ties: lower id first).

        ``candidates`` (int64 ids) restricts the result to those documents; ``limit``
        keeps the best ``limit``. The scores are summed into an array indexed by id and
        the best are selected, not sorted: at 100k notes (bench/bench_recall.py's corpus,
        about 10k postings per query) a recall's ``limit=100`` took 0.45-0.7 ms against
        1.1-1.5 ms when every match was sorted (np.unique, then argsort), same results.
        """
        n_docs = len(self)
        matched = [p for p in map(self._posting_parts, dict.fromkeys(tokenize(query))) if p]
        if not n_docs or not matched:
            return np.empty(0, np.int64), np.empty(0, np.float32)
        avg_len = self._total_len / n_docs
        id_parts, score_parts = [], []
        for parts in matched:
            df = sum(len(ids) for ids, _ in parts)
            idf = math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))
            for ids, tfs in parts:
                norm = self.k1 * (1.0 - self.b + self.b * self._lengths[ids] / avg_len)
                id_parts.append(ids)
                score_parts.append(idf * tfs * (self.k1 + 1.0) / (tfs + norm))
        unique, totals = _sum_by_id(id_parts, score_parts, candidates)
        if not len(unique):
            return np.empty(0, np.int64), np.empty(0, np.float32)
        order = (np.argsort(-totals, kind="stable") if limit is None
                 else top_positions(totals, limit))
        return unique[order], totals[order]

    def idf(self, term: str) -> float:
        """BM25's inverse document frequency of ``term`` (a term as :func:`tokenize` makes it)."""
        df = self._df(term)
        return math.log(1.0 + (len(self) - df + 0.5) / (df + 0.5))

    def score_at(self, weights: dict[str, float], ids: np.ndarray) -> np.ndarray:
        """The BM25 score of each of ``ids`` (indexed documents) for the terms of
        ``weights``, each term's part times its weight; 0 for a document holding none.

        Each document is looked up in the term's postings, so the cost grows with
        ``len(ids)`` and the number of terms, not with how many documents hold them (the
        feedback terms of ranking.py are scored this way on a recall's candidates).
        """
        ids = np.asarray(ids, np.int64)
        terms = list(weights)
        if not len(self) or not len(ids) or not terms:
            return np.zeros(len(ids), np.float32)
        lengths = np.zeros(len(ids), np.float32)
        known = ids < len(self._lengths)
        lengths[known] = self._lengths[ids[known]]
        norm = self.k1 * (1.0 - self.b + self.b * lengths / (self._total_len / len(self)))
        in_segment = np.zeros(len(ids), bool)
        inside = ids < len(self._alive)
        in_segment[inside] = self._alive[ids[inside]]
        id_list = ids.tolist()
        seg = self._seg
        # Searched as the postings' own type: int64 ids made every search convert the
        # term's whole posting list first (16 us a term at 100k notes instead of 2).
        keys = ids.astype(seg.post_docs.dtype)
        tfs = np.zeros((len(terms), len(ids)), np.float32)  # only lookups in the loop
        for row, term in enumerate(terms):
            at = seg.term_ids.get(term)
            if at is not None:
                start, stop = int(seg.offsets[at]), int(seg.offsets[at + 1])
                docs = seg.post_docs[start:stop]
                where = np.minimum(docs.searchsorted(keys), stop - start - 1)
                found = in_segment & (docs[where] == keys)
                tfs[row, found] = seg.post_tfs[start + where[found]]
            posting = self._postings.get(term)
            if posting:  # the delta's documents (none of them is alive in the segment)
                tfs[row] += np.fromiter((posting.get(i, 0) for i in id_list), np.float32,
                                        len(ids))
        factor = np.array([weights[t] * self.idf(t) for t in terms], np.float64)[:, None]
        return (factor * tfs * (self.k1 + 1.0) / (tfs + norm)).sum(axis=0).astype(np.float32)

    def max_score(self, query: str) -> float:
        """The score of a document of average length holding each query term once.

        Dividing by it puts scores on a scale where 1 means "every term matched". A term
        no document contains still counts, at the idf of a term in no document: a note
        that shares one common word with a long query has matched a small part of it.
        """
        n_docs = len(self)
        if not n_docs:
            return 0.0
        total = 0.0
        for term in dict.fromkeys(tokenize(query)):
            df = self._df(term)
            total += math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))
        return total

    # -- persistence -------------------------------------------------------------------

    def merged(self) -> _Segment:
        """One segment of every document, the delta folded in (the index is unchanged).

        The delta's postings are inserted among the segment's living ones: nothing of the
        segment's size is sorted. At 1M notes after 10,000 removals and 6,000 additions:
        0.32-0.34 s and 292 MB at the peak, where sorting every posting took 2.1-3.9 s, 659 MB.
        """
        seg = self._seg
        terms, vocab = list(seg.terms), dict(seg.term_ids)
        docs, tfs, counts = seg.post_docs, seg.post_tfs, self._living_counts()
        if self._seg_removed:
            keep = self._alive[docs]
            docs, tfs = docs[keep], tfs[keep]
        d_terms, d_docs, d_tfs = array("i"), array("i"), array("B")
        for doc_id, doc_counts in self._doc_terms.items():
            for term, tf in doc_counts.items():
                at = vocab.get(term)
                if at is None:
                    at = vocab[term] = len(terms)
                    terms.append(term)
                d_terms.append(at)
                d_docs.append(doc_id)
                d_tfs.append(tf)
        counts = np.concatenate([counts, np.zeros(len(terms) - len(counts), np.int64)])
        if d_terms:
            new_terms, new_docs = np.frombuffer(d_terms, np.int32), np.frombuffer(d_docs, np.int32)
            order = np.lexsort((new_docs, new_terms))
            new_terms, new_docs = new_terms[order], new_docs[order]
            starts = np.concatenate([[0], np.cumsum(counts)])
            where = np.empty(len(order), np.int64)
            groups = np.flatnonzero(np.diff(new_terms)) + 1
            for lo, hi in zip([0, *groups.tolist()], [*groups.tolist(), len(order)]):
                start, stop = starts[new_terms[lo]], starts[new_terms[lo] + 1]
                where[lo:hi] = start + np.searchsorted(docs[start:stop], new_docs[lo:hi])
            docs = np.insert(docs, where, new_docs)
            tfs = np.insert(tfs, where, np.frombuffer(d_tfs, np.uint8)[order])
            counts += np.bincount(new_terms, minlength=len(terms))
        ids = self.doc_ids()
        return _Segment.assemble(terms, counts, ids, self._lengths[ids], docs, tfs)

    def save(self, path: Path, meta: dict) -> None:
        """Fold the delta in and write the index, with ``meta``, to ``path`` atomically."""
        segment = self.merged()
        write_arrays(path, _MAGIC, {**meta, "tokenizer": TOKENIZER}, segment.arrays())
        self._install(segment)

    @classmethod
    def load(cls, path: Path) -> tuple[LexicalIndex, dict]:
        """The index in ``path`` and the ``meta`` it was saved with."""
        try:
            meta, arrays = read_arrays(path, _MAGIC, "keyword index")
            made_by = meta.pop("tokenizer", None)
            if made_by != TOKENIZER:
                raise LexicalIndexError(f"made by tokenizer {made_by}, this is {TOKENIZER}")
            return cls(_Segment.from_arrays(arrays)), meta
        except (ArraysFileError, LexicalIndexError, KeyError, ValueError) as exc:
            raise LexicalIndexError(f"{path}: {exc}") from None


def _sum_by_id(id_parts: list[np.ndarray], score_parts: list[np.ndarray],
               candidates: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Each id's summed score (float64 sums in term order, as float32), ids ascending.

    Ids are unique within a part. Unless the matches are very few for the id range they are
    summed into an array indexed by id (np.bincount), else by np.unique. Both add the same
    numbers in the same order, so the totals are identical. The matched ids are those whose
    sum is positive (every term's part is: its idf and term frequency are), found by one
    comparison over the array: 0.15 ms a query at 100k notes where sorting the matched ids
    took 0.45 (bench_scale's queries, about 10k matches; a recall 2.75 -> 2.44 ms), and in
    isolation 1-2 ms at 1M ids for 122k-400k matches where sorting took 8-32. At 1M notes
    (122k postings a query, under an eighth of the ids) the array took the keyword channel
    from 5.3-6.7 ms to 5.1-5.5 ms. Reading only the rare terms' postings whole (MaxScore)
    was measured slower at 100k and at 1M: 0.7-0.9 ms against 0.5, 7.6-8.4 against 5.1-5.5
    (it settled two queries in three at 1M, fewer at 100k).
    """
    top = max(int(ids.max()) for ids in id_parts if len(ids)) + 1
    matches = sum(len(ids) for ids in id_parts)
    if 64 * matches >= top:
        ids = np.concatenate(id_parts)
        total = np.bincount(ids, np.concatenate(score_parts), top)
        unique = np.flatnonzero(total > 0)
        if candidates is not None:
            candidates = np.asarray(candidates, np.int64)
            allowed = np.zeros(top, bool)
            allowed[candidates[(candidates >= 0) & (candidates < top)]] = True
            unique = unique[allowed[unique]]
        return unique, total[unique].astype(np.float32)
    ids, scores = np.concatenate(id_parts), np.concatenate(score_parts)
    if candidates is not None:
        candidates = np.asarray(candidates, np.int64)
        if len(candidates) > 1 and not (candidates[1:] >= candidates[:-1]).all():
            candidates = np.sort(candidates)
        at = np.minimum(np.searchsorted(candidates, ids), max(len(candidates) - 1, 0))
        keep = (candidates[at] == ids) if len(candidates) else np.zeros(len(ids), bool)
        ids, scores = ids[keep], scores[keep]
    if not len(ids):
        return np.empty(0, np.int64), np.empty(0, np.float32)
    unique, inverse = np.unique(ids, return_inverse=True)
    return unique, np.bincount(inverse, weights=scores).astype(np.float32)
