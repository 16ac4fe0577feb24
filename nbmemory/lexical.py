"""BM25 with stemming, kept in memory and updated on every write.

It is a projection of the note texts in DuckDB, rebuilt when the store opens.
Identifiers are kept whole as well as split into stemmed parts, so
``PyObject_GC_Del`` and ``orders.amount`` match exactly and by their pieces.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import Iterable

import numpy as np

try:
    import Stemmer

    _stem_words = Stemmer.Stemmer("english").stemWord
except ImportError:  # pragma: no cover - PyStemmer is a declared dependency
    import snowballstemmer

    _stem_words = snowballstemmer.stemmer("english").stemWord

STOPWORDS = frozenset(
    """a an and are as at be been but by can could did do does for from had has have he her
    his how i if in into is it its me my no not of on or our she so than that the their them
    then there these they this those to too was we were what when where which while who why
    will with would you your""".split()
)

# An identifier-ish run: words joined by . _ :: / or -, e.g. orders.amount, PyObject_GC_Del.
_TOKEN = re.compile(r"[A-Za-z0-9]+(?:(?:::|[._/\-])[A-Za-z0-9]+)*")
_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
# Separators between the levels of a qualified name (module.attr, dir/file, ns::name).
_QUALIFIER = re.compile(r"::|[./]")


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


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    return _stem_words(word)


def tokenize(text: str) -> list[str]:
    """Lower-cased stemmed words, plus each compound identifier whole.

    A qualified name also yields its compound segments, so ``flights.dep_time`` and
    ``requests.exceptions.RetryError`` match queries for ``dep_time`` and ``RetryError``.
    """
    out: list[str] = []
    for match in _TOKEN.finditer(text):
        token = match.group()
        parts = _PART.findall(token)
        if len(parts) > 1:
            out.append(token.lower())
            segments = _QUALIFIER.split(token)
            if len(segments) > 1:
                out.extend(s.lower() for s in segments if len(_PART.findall(s)) > 1)
        for part in parts:
            word = part.lower()
            if word not in STOPWORDS:
                out.append(_stem(word))
    return out


class LexicalIndex:
    """An inverted index with Okapi BM25 scoring (k1=1.2, b=0.75)."""

    k1 = 1.2
    b = 0.75

    def __init__(self) -> None:
        self._postings: dict[str, dict[int, int]] = {}
        # Per term, its postings as arrays (ids, term frequencies), built on first use and
        # then extended by the documents added since (_pending), not rebuilt: rebuilding a
        # common term's arrays from the dictionary after every write cost the next recall
        # 3-4 ms at 100k notes. A removal (edit, purge) drops the term's arrays.
        self._arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._pending: dict[str, list[tuple[int, int]]] = {}
        self._doc_terms: dict[int, dict[str, int]] = {}
        self._doc_len: dict[int, int] = {}
        self._lengths = np.zeros(1024, np.float32)  # by document id, for scoring
        self._total_len = 0

    def __len__(self) -> int:
        return len(self._doc_terms)

    def __contains__(self, doc_id: int) -> bool:
        return doc_id in self._doc_terms

    def add(self, doc_id: int, text: str) -> None:
        """Index ``text`` as document ``doc_id`` (a non-negative integer: a note id)."""
        doc_id = int(doc_id)
        if doc_id < 0:
            raise ValueError("document ids must be non-negative")
        if doc_id in self._doc_terms:
            self.remove(doc_id)
        counts: dict[str, int] = {}
        for term in tokenize(text):
            counts[term] = counts.get(term, 0) + 1
        self._doc_terms[doc_id] = counts
        self._doc_len[doc_id] = length = sum(counts.values())
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
        for doc_id, text in docs:
            self.add(doc_id, text)

    def remove(self, doc_id: int) -> None:
        counts = self._doc_terms.pop(doc_id, None)
        if counts is None:
            return
        self._total_len -= self._doc_len.pop(doc_id)
        self._lengths[doc_id] = 0
        for term in counts:
            posting = self._postings[term]
            del posting[doc_id]
            if not posting:
                del self._postings[term]
            self._arrays.pop(term, None)
            self._pending.pop(term, None)

    def docs_with(self, term: str) -> list[int]:
        """Ids of the documents holding ``term`` exactly (a term as :func:`tokenize` makes it)."""
        return list(self._postings.get(term, ()))

    def terms(self):
        """Every term of the index (a view: do not write while iterating)."""
        return self._postings.keys()

    def _posting_arrays(self, term: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Ids (in the order they were added), term frequencies and lengths of the
        documents holding ``term``."""
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
        ids, tfs = arrays
        return ids, tfs, self._lengths[ids]

    def score(self, query: str, candidates: np.ndarray | None = None,
              limit: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Ids and BM25 scores of matching documents, best first (ties: lower id first).

        ``candidates`` (int64 ids) restricts the result to those documents; ``limit``
        keeps the best ``limit``. The scores are summed into an array indexed by id and
        the best are selected, not sorted: at 100k notes (bench/bench_recall.py's corpus,
        about 10k postings per query) a recall's ``limit=100`` took 0.45-0.7 ms against
        1.1-1.5 ms when every match was sorted (np.unique, then argsort), same results.
        """
        n_docs = len(self._doc_terms)
        terms = [t for t in dict.fromkeys(tokenize(query)) if t in self._postings]
        if not n_docs or not terms:
            return np.empty(0, np.int64), np.empty(0, np.float32)
        avg_len = self._total_len / n_docs
        id_parts, score_parts = [], []
        for term in terms:
            ids, tfs, lens = self._posting_arrays(term)
            df = len(ids)
            idf = math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))
            norm = self.k1 * (1.0 - self.b + self.b * lens / avg_len)
            id_parts.append(ids)
            score_parts.append(idf * tfs * (self.k1 + 1.0) / (tfs + norm))
        unique, totals = _sum_by_id(id_parts, score_parts, candidates)
        if not len(unique):
            return np.empty(0, np.int64), np.empty(0, np.float32)
        order = (np.argsort(-totals, kind="stable") if limit is None
                 else top_positions(totals, limit))
        return unique[order], totals[order]

    def max_score(self, query: str) -> float:
        """The score of a document of average length holding each query term once.

        Dividing by it puts scores on a scale where 1 means "every term matched". A term
        no document contains still counts, at the idf of a term in no document: a note
        that shares one common word with a long query has matched a small part of it.
        """
        n_docs = len(self._doc_terms)
        if not n_docs:
            return 0.0
        total = 0.0
        for term in dict.fromkeys(tokenize(query)):
            df = len(self._postings.get(term, ()))
            total += math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))
        return total


def _sum_by_id(id_parts: list[np.ndarray], score_parts: list[np.ndarray],
               candidates: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Each id's summed score (float64 sums in term order, as float32), ids ascending.

    Ids are unique within a part. When the matches are many for the id range they are
    summed into a dense array indexed by id (no sort); when they are few, by np.unique.
    Both add the same numbers in the same order, so the totals are identical.
    """
    top = max(int(ids.max()) for ids in id_parts if len(ids)) + 1
    matches = sum(len(ids) for ids in id_parts)
    if 8 * matches >= top:
        total = np.zeros(top, np.float64)
        seen = np.zeros(top, bool)
        for ids, scores in zip(id_parts, score_parts):
            total[ids] += scores
            seen[ids] = True
        if candidates is not None:
            candidates = np.asarray(candidates, np.int64)
            allowed = np.zeros(top, bool)
            allowed[candidates[(candidates >= 0) & (candidates < top)]] = True
            seen &= allowed
        unique = np.flatnonzero(seen)
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
