"""BM25 with stemming: a projection of the note texts kept in a file, caught up from the
journal on open like the vector index.

Identifiers are kept whole as well as split into stemmed parts, so ``PyObject_GC_Del``
and ``orders.amount`` match exactly and by their pieces.

The index is a *segment* (many documents in flat arrays: per term its postings, per
document its terms; see lexical_segment.py) plus the documents added since in dictionaries (the *delta*). A removed segment document is marked
dead and its terms' document frequencies are counted again among the living when next
used, so scores are exactly those of an index built from scratch (tests/test_lexical).
``save`` folds the delta in and writes one file; ``load`` reads its arrays back. At 100k
notes (bench corpus, 2 busy cores): tokenizing every note took 6.5-7.3 s on each open,
loading the file about 0.19 s; the file was 8.5 MB with the postings alone (85 bytes a note;
92 MB at 1M); the per-document direction took it to 15.3 MB at 100k (load 13 -> 20 ms), and
each note's share of asking (dense_weight.asking: ranking reads it) adds 4 bytes a note.
Tantivy was not tried: its tokenizer would have to keep identifiers whole and stem their
parts as this one does, and the arrays already make an open a matter of reading a file.
"""

from __future__ import annotations

from array import array
from pathlib import Path
from typing import Iterable

import numpy as np

from .arrays import ArraysFileError, read_arrays, write_arrays
from . import dense_weight
from .lexical_segment import TF_CAP, Segment, SegmentError, term_counts  # noqa: F401  (TF_CAP: imported from here too)
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


class LexicalIndexError(Exception):
    """The keyword index file cannot be used; rebuild it."""


_MAGIC = b"NBMKW1\n\x00"


class LexicalIndex:
    """An inverted index with Okapi BM25 scoring (k1=1.2, b=0.1): a segment of many
    documents in arrays, plus the documents added since in dictionaries (the delta).

    ``b`` (how much a note's length discounts its matches, 0.75 in most engines) is low:
    notes are a line or a paragraph, and a shorter one is not more to the point for being
    shorter. Chosen by ``eval/tune.py`` on the keyword channel alone (five folds, all
    chose 0.1 of 0.1-0.75): recall@10 0.681 -> 0.695 with every note in one store, 0.732 ->
    0.743 with a store per project and per conversation (chats 0.697 -> 0.719 and 0.724 ->
    0.757), MRR 0.532 -> 0.554 and 0.577 -> 0.593, identifiers unchanged at recall@10.
    """

    k1 = 1.2
    b = 0.1

    def __init__(self, segment: Segment | None = None) -> None:
        self._install(segment or Segment.empty())

    def _install(self, segment: Segment) -> None:
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
        self._asking = np.zeros(len(self._lengths), np.float32)  # by id (dense_weight.asking)
        self._asking[:len(segment.asking)] = segment.asking
        self._total_len = int(segment.lengths.sum(dtype=np.float64))

    @classmethod
    def build(cls, docs: Iterable[tuple[int, str]]) -> LexicalIndex:
        """An index of ``docs`` (id, text), tokenized straight into a segment: about a
        third of the memory and time of adding them one by one."""
        return cls(Segment.build(docs))

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
        counts, length = term_counts(text)
        self._doc_terms[doc_id] = counts
        if doc_id >= len(self._lengths):
            grow = max(doc_id + 1, 2 * len(self._lengths)) - len(self._lengths)
            self._lengths = np.concatenate([self._lengths, np.zeros(grow, np.float32)])
            self._asking = np.concatenate([self._asking, np.zeros(grow, np.float32)])
        self._lengths[doc_id] = length
        self._asking[doc_id] = dense_weight.asking(text)
        self._total_len += length
        for term, tf in counts.items():
            self._postings.setdefault(term, {})[doc_id] = tf
            if term in self._arrays:
                self._pending.setdefault(term, []).append((doc_id, tf))

    def add_many(self, docs: Iterable[tuple[int, str]]) -> None:
        if not len(self):
            self._install(Segment.build(docs))
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
            self._lengths[doc_id] = self._asking[doc_id] = 0
            return
        counts = self._doc_terms.pop(doc_id, None)
        if counts is None:
            return
        self._total_len -= int(self._lengths[doc_id])
        self._lengths[doc_id] = self._asking[doc_id] = 0
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
        keeps the best ``limit``. The best are selected, not sorted: at 100k notes
        (bench/bench_recall.py's corpus, about 10k postings per query) a recall's
        ``limit=100`` took 0.45-0.7 ms against 1.1-1.5 ms when every match was sorted
        (np.unique, then argsort), same results.
        """
        ids, totals = self.matches(query, candidates)
        order = (np.argsort(-totals, kind="stable") if limit is None
                 else top_positions(totals, limit))
        return ids[order], totals[order]

    def matches(self, query: str,
                candidates: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Every document matching a term of ``query`` (of ``candidates``, when given),
        ids ascending, and its BM25 score: what :meth:`score` selects from, and where a
        caller looks up any other document's score (0 where it matches nothing)."""
        n_docs = len(self)
        matched = [p for p in map(self._posting_parts, dict.fromkeys(tokenize(query))) if p]
        if not n_docs or not matched:
            return np.empty(0, np.int64), np.empty(0, np.float32)
        avg_len = self._total_len / n_docs
        id_parts, score_parts = [], []
        for parts in matched:
            df = sum(len(ids) for ids, _ in parts)
            idf = _idf(n_docs, df)
            for ids, tfs in parts:
                norm = self.k1 * (1.0 - self.b + self.b * self._lengths[ids] / avg_len)
                id_parts.append(ids)
                score_parts.append(idf * tfs * (self.k1 + 1.0) / (tfs + norm))
        return _sum_by_id(id_parts, score_parts, candidates)

    def idf(self, term: str) -> float:
        """BM25's inverse document frequency of ``term`` (a term as :func:`tokenize` makes it)."""
        return float(_idf(len(self), self._df(term)))

    def idfs(self, terms: list[str]) -> np.ndarray:
        """:meth:`idf` of each of ``terms``, in array operations (keyword feedback asks for
        a hundred or more on every recall); a term no document holds has the idf of df 0."""
        seg = self._seg
        at = np.array([seg.term_ids.get(t, -1) for t in terms], np.int64)
        df = np.zeros(len(terms), np.float64)
        known = at >= 0
        if self._seg_removed:
            df[known] = [self._seg_df_of(a) for a in at[known].tolist()]
        else:
            df[known] = seg.offsets[at[known] + 1] - seg.offsets[at[known]]
        if self._postings:
            df += [len(self._postings.get(t, ())) for t in terms]
        return _idf(len(self), df)

    def terms_of(self, doc_id: int) -> dict[str, int]:
        """The terms of an indexed document with how often each occurs (at most TF_CAP);
        empty for a document not indexed."""
        counts = self._doc_terms.get(doc_id)
        if counts is not None or not self._in_segment(doc_id):
            return counts or {}
        seg, at = self._seg, int(doc_id)
        start, stop = int(seg.fwd_offsets[at]), int(seg.fwd_offsets[at + 1])
        return dict(zip(map(seg.terms.__getitem__, seg.fwd_terms[start:stop].tolist()),
                        seg.fwd_tfs[start:stop].tolist()))

    def lengths(self, ids: np.ndarray) -> np.ndarray:
        """Each note's number of terms (0 for an id this index does not hold)."""
        out = np.zeros(len(ids), np.float32)
        known = ids < len(self._lengths)
        out[known] = self._lengths[ids[known]]
        return out

    def asking(self, ids: np.ndarray) -> np.ndarray:
        """How much of each note asks (``dense_weight.asking``; 0 for an id not held)."""
        out = np.zeros(len(ids), np.float32)
        known = ids < len(self._asking)
        out[known] = self._asking[ids[known]]
        return out

    def length(self, doc_id: int) -> int:
        """How many terms the document has (0 if not indexed)."""
        return int(self._lengths[doc_id]) if 0 <= doc_id < len(self._lengths) else 0

    def score_at(self, weights: dict[str, float], ids: np.ndarray) -> np.ndarray:
        """The BM25 score of each of ``ids`` (indexed documents) for the terms of
        ``weights``, each term's part times its weight; 0 for a document holding none.

        Each document's own terms are matched against those of ``weights``, so the cost
        grows with ``len(ids)``, not with how many documents hold the terms (the feedback
        terms of ranking.py are scored this way on a recall's candidates: at 100k notes
        0.20 ms where searching each term's postings for every candidate took 0.33).
        """
        ids = np.asarray(ids, np.int64)
        terms = list(weights)
        if not len(self) or not len(ids) or not terms:
            return np.zeros(len(ids), np.float32)
        average = self._total_len / len(self)
        norm = self.k1 * (1.0 - self.b + self.b * self.lengths(ids) / average)
        tfs = self.counts_at(terms, ids)
        factor = (np.array([weights[t] for t in terms], np.float64) * self.idfs(terms))[:, None]
        return (factor * tfs * (self.k1 + 1.0) / (tfs + norm)).sum(axis=0).astype(np.float32)

    def counts_at(self, terms: list[str], ids: np.ndarray) -> np.ndarray:
        """How often each of ``terms`` occurs in each of ``ids`` (at most TF_CAP), by term
        and document; 0 for a document not indexed."""
        ids = np.asarray(ids, np.int64)
        tfs = np.zeros((len(terms), len(ids)), np.float32)
        if not len(self) or not len(ids) or not terms:
            return tfs
        seg = self._seg
        inside = ids < len(self._alive)
        at = np.flatnonzero(inside)
        at = at[self._alive[ids[at]]]
        numbers = np.array([seg.term_ids.get(t, -1) for t in terms], np.int64)
        known = numbers >= 0
        if len(at) and known.any():
            where, column = seg.entries(ids[at])
            # Each entry's row in ``tfs`` plus one (0: not a weighted term), looked up by
            # term number, not searched for among the terms (feedback's score_at at 100k
            # notes, ~190 candidates: 0.13 -> 0.09 ms).
            row_of = np.zeros(len(seg.terms), np.int32)
            row_of[numbers[known]] = np.flatnonzero(known) + 1
            row = row_of[seg.fwd_terms[where]]
            hit = row > 0
            tfs[row[hit] - 1, at[column[hit]]] = seg.fwd_tfs[where[hit]]
        if self._doc_terms:  # the delta's documents (none of them is alive in the segment)
            for column, doc_id in enumerate(ids.tolist()):
                counts = self._doc_terms.get(doc_id)
                if counts:
                    tfs[:, column] = [counts.get(t, 0) for t in terms]
        return tfs

    def max_score(self, query: str) -> float:
        """The score of a document of average length holding each query term once.

        Dividing by it puts scores on a scale where 1 means "every term matched". A term
        no document contains still counts, at the idf of a term in no document: a note
        that shares one common word with a long query has matched a small part of it.
        """
        if not len(self):
            return 0.0
        return sum(self.idf(term) for term in dict.fromkeys(tokenize(query)))

    # -- persistence -------------------------------------------------------------------

    def merged(self) -> Segment:
        """One segment of every document, the delta folded in (the index is unchanged).

        The delta's entries are inserted among the segment's living ones, in both
        directions: nothing of the segment's size is sorted. At 1M notes after 10,000
        removals and 6,000 additions (postings alone): 0.32-0.34 s and 292 MB at the
        peak, where sorting every posting took 2.1-3.9 s, 659 MB.
        """
        seg = self._seg
        terms, vocab = list(seg.terms), dict(seg.term_ids)
        docs, tfs, counts = seg.post_docs, seg.post_tfs, self._living_counts()
        fwd_terms, fwd_tfs, sizes = seg.fwd_terms, seg.fwd_tfs, np.diff(seg.fwd_offsets)
        if self._seg_removed:
            keep = self._alive[docs]
            docs, tfs = docs[keep], tfs[keep]
            keep = np.repeat(self._alive, sizes)
            fwd_terms, fwd_tfs = fwd_terms[keep], fwd_tfs[keep]
        living = np.flatnonzero(self._alive)
        size_of = np.zeros(len(self._lengths), np.int64)  # by id: its number of entries
        size_of[living] = sizes[living]
        added = sorted(self._doc_terms)
        d_terms, d_docs, d_tfs = array("i"), array("i"), array("B")
        for doc_id in added:
            doc_counts = self._doc_terms[doc_id]
            size_of[doc_id] = len(doc_counts)
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
            new_tfs = np.frombuffer(d_tfs, np.uint8)
            firsts = np.concatenate([[0], np.cumsum(sizes[living])])
            at_doc = firsts[np.searchsorted(living, np.array(added, np.int64))]
            where = np.repeat(at_doc, size_of[added])
            fwd_terms, fwd_tfs = np.insert(fwd_terms, where, new_terms), np.insert(fwd_tfs, where, new_tfs)
            order = np.lexsort((new_docs, new_terms))
            new_terms, new_docs = new_terms[order], new_docs[order]
            starts = np.concatenate([[0], np.cumsum(counts)])
            where = np.empty(len(order), np.int64)
            groups = np.flatnonzero(np.diff(new_terms)) + 1
            for lo, hi in zip([0, *groups.tolist()], [*groups.tolist(), len(order)]):
                start, stop = starts[new_terms[lo]], starts[new_terms[lo] + 1]
                where[lo:hi] = start + np.searchsorted(docs[start:stop], new_docs[lo:hi])
            docs = np.insert(docs, where, new_docs)
            tfs = np.insert(tfs, where, new_tfs[order])
        ids = self.doc_ids()
        return Segment.assemble(terms, ids, self._lengths[ids], self._asking[ids], fwd_terms,
                                size_of[ids], fwd_tfs, postings=(docs, tfs))

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
            return cls(Segment.from_arrays(arrays)), meta
        except (ArraysFileError, LexicalIndexError, SegmentError, KeyError, ValueError) as exc:
            raise LexicalIndexError(f"{path}: {exc}") from None


def _idf(n_docs: int, df):
    """BM25's inverse document frequency of a term ``df`` of ``n_docs`` documents hold (a
    number or an array of them)."""
    return np.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


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
