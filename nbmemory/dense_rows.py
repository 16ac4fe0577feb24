"""Vectors by key in memory, for exact search and fast lookups (:class:`DenseRows`): the
exact rows beside the vector index's graph, and the vectors of a view of the past."""

from __future__ import annotations

import ctypes
import sys
from contextlib import nullcontext

if sys.platform.startswith("linux"):
    # usearch's compiled module carries its own copy of libstdc++'s unique symbols: loaded
    # before the system libstdc++, it made a later `import onnxruntime` (the model) die of
    # SIGSEGV in std::codecvt (`import usearch.index; import onnxruntime`, every time).
    # The system library loaded first, globally, serves both.
    try:
        ctypes.CDLL("libstdc++.so.6", mode=ctypes.RTLD_GLOBAL)
    except OSError:  # pragma: no cover - a system without it has nothing to clash with
        pass

import numpy as np  # noqa: E402
from usearch.index import MetricKind  # noqa: E402
from usearch.index import search as usearch_search  # noqa: E402

_blas = None


def widened(matrix: np.ndarray) -> np.ndarray:
    """``matrix`` as float32, the same values (float16 widened exactly, through its bits).

    numpy's float16 -> float32 cast converts element by element: for a recall's ~180 rows
    of 384 it took 128 us here, the bit shifts below 67 (every finite half gives the very
    same float32; rows hold no infinities or NaNs).
    """
    if matrix.dtype != np.float16:
        return matrix.astype(np.float32, copy=False)
    bits = matrix.view(np.uint16).astype(np.uint32)
    # Exponent and mantissa moved into float32's place, rebiased by 2**112 (subnormals too).
    magnitude = ((bits & 0x7FFF) << 13).view(np.float32) * np.float32(2.0 ** 112)
    return (magnitude.view(np.uint32) | ((bits & 0x8000) << 16)).view(np.float32)


def one_blas_thread():
    """A context in which numpy's BLAS runs on one thread.

    Measured here on 2 cores (10k x 384 float32 times one query): two OpenBLAS threads take
    0.36 ms on a quiet machine but 4-8 ms at p95 as soon as one other process is busy, as
    the call waits for its second thread to be scheduled, and that thread then spins on the
    core recall's own work needs. One thread takes 0.65-1.0 ms either way. A recall is a
    single query: predictable beats the quiet-machine best. A no-op without threadpoolctl
    (which sentence-transformers brings, through scikit-learn).
    """
    global _blas
    if _blas is None:
        try:
            from threadpoolctl import ThreadpoolController

            _blas = ThreadpoolController().select(user_api="blas")
        except Exception:  # pragma: no cover - absent or unusable: leave BLAS as it is
            _blas = False
    return _blas.limit(limits=1) if _blas else nullcontext()


class DenseRows:
    """Vectors by key in one growable matrix, for exact search and fast lookups.

    usearch's own ``get`` costs about a microsecond per key in Python, too slow for the
    exact search of a few thousand candidates on every recall; a matrix row is free. Keys
    (note ids: small non-negative integers) map to rows through an array, so looking up
    many keys is one numpy operation rather than a dictionary lookup each (at 100k notes
    a recall filtered to 5k candidates spent about 10 ms on those lookups).

    Past ``HALF_ABOVE`` rows the matrix is float16: a million MiniLM vectors take 0.77 GB,
    not 1.54, and a cosine moves by at most about 3e-5 (measured on 1M unit vectors).
    Below, float32 keeps the exact search of small stores (``exact_below``) at numpy's
    speed: measured here over 10k / 100k / 1M rows, numpy on float32 took 0.86 / 12.8 /
    145 ms, usearch's float16 kernel 2.5 / 30 / 235 ms (numpy over float16 1.3 s at 1M).
    A large store searches all its rows only while its graph is built. Rows are widened
    to float32 for scoring, and an exact search scores its best rows as
    :meth:`similarities` does, so a key gets one score whichever way it is found.
    """

    HALF_ABOVE = 1 << 17

    def __init__(self, ndim: int, capacity: int = 1024, *, room: int = 1):
        """Rows for about ``capacity`` vectors (its size sets the precision), with space
        for ``room`` times as many before the matrix is copied to grow."""
        self.ndim = ndim
        self._matrix = np.zeros((capacity * room, ndim), self._dtype_for(capacity))
        self._row_keys = np.zeros(capacity * room, np.int64)
        self._alive = np.zeros(capacity * room, bool)
        self._row_of = np.full(capacity, -1, np.int64)  # key -> row, -1 if absent
        self._count = 0
        self._used = 0
        self._keys: np.ndarray | None = None

    @classmethod
    def _dtype_for(cls, capacity: int):
        return np.float16 if capacity > cls.HALF_ABOVE else np.float32

    @classmethod
    def from_matrix(cls, keys: np.ndarray, matrix: np.ndarray) -> DenseRows:
        """Rows for a fixed set of vectors (views of the past)."""
        matrix = np.asarray(matrix, dtype=np.float32)
        rows = cls(matrix.shape[1] if matrix.ndim == 2 and matrix.shape[1] else 1,
                   capacity=max(1, len(keys)))
        if len(keys):
            rows.put(np.asarray(keys, dtype=np.int64), matrix.reshape(len(keys), -1))
        return rows

    def __len__(self) -> int:
        return self._count

    def __contains__(self, key: int) -> bool:
        key = int(key)
        return 0 <= key < len(self._row_of) and self._row_of[key] >= 0

    def rows_of(self, keys) -> np.ndarray:
        """The row of each key, -1 for a key not held."""
        keys = np.asarray(keys, dtype=np.int64)
        inside = (keys >= 0) & (keys < len(self._row_of))
        out = np.full(len(keys), -1, np.int64)
        out[inside] = self._row_of[keys[inside]]
        return out

    def holds(self, keys) -> np.ndarray:
        """For each key, whether it has a vector here."""
        return self.rows_of(keys) >= 0

    def keys(self) -> np.ndarray:
        """Live keys, sorted (cached until the next change)."""
        if self._keys is None:
            self._keys = np.sort(self._row_keys[:self._used][self._alive[:self._used]])
        return self._keys

    def put(self, keys: np.ndarray, vectors: np.ndarray) -> None:
        """Add or replace the vectors of ``keys`` (a repeated key: its last vector), in
        array operations: 100k vectors take about 0.1 s, not 0.7 s one key at a time."""
        self._keys = None
        keys = np.asarray(keys, dtype=np.int64)
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(keys), self.ndim)
        if not len(keys):
            return
        if keys.min() < 0:
            raise ValueError("vector keys must be non-negative")
        last = len(keys) - 1 - np.unique(keys[::-1], return_index=True)[1]
        keys, vectors = keys[last], vectors[last]
        if keys.max() >= len(self._row_of):
            grown = np.full(max(int(keys.max()) + 1, 2 * len(self._row_of)), -1, np.int64)
            grown[:len(self._row_of)] = self._row_of
            self._row_of = grown
        rows = self._row_of[keys]
        new = rows < 0
        count = int(new.sum())
        while self._used + count > len(self._matrix):
            self._grow()
        rows[new] = np.arange(self._used, self._used + count)
        self._row_of[keys[new]] = rows[new]
        self._row_keys[rows[new]], self._alive[rows[new]] = keys[new], True
        self._used += count
        self._count += count
        self._matrix[rows] = vectors

    def delete(self, keys) -> None:
        self._keys = None
        for key in keys:
            key = int(key)
            if key in self:
                self._alive[self._row_of[key]] = False
                self._row_of[key] = -1
                self._count -= 1
        if self._used > 1024 and self._count < self._used // 2:
            self._compact()

    def _grow(self) -> None:
        # New zeroed arrays, the used rows copied in: np.resize filled the new half with
        # copies of the old (12 s, and every page of 1.5 GB touched, when the rows of a 1M
        # store doubled at its first remember); untouched zero pages take no memory.
        size = max(1024, 2 * len(self._matrix))
        half = self._matrix.dtype == np.float16  # once half, always half
        matrix = np.zeros((size, self.ndim), np.float16 if half else self._dtype_for(size))
        matrix[:self._used] = self._matrix[:self._used]
        keys = np.zeros(size, np.int64)
        keys[:self._used] = self._row_keys[:self._used]
        self._matrix, self._row_keys = matrix, keys
        self._alive = np.concatenate([self._alive, np.zeros(size - len(self._alive), bool)])

    def _compact(self) -> None:
        live = np.flatnonzero(self._alive[:self._used])
        self._matrix[:len(live)] = self._matrix[live]
        self._row_keys[:len(live)] = self._row_keys[live]
        self._alive[:] = False
        self._alive[:len(live)] = True
        self._used = len(live)
        self._row_of[:] = -1
        self._row_of[self._row_keys[:self._used]] = np.arange(self._used)

    def get(self, keys: np.ndarray) -> np.ndarray:
        rows = self.rows_of(keys)
        if len(rows) and rows.min() < 0:
            raise KeyError(int(np.asarray(keys)[np.argmin(rows)]))
        return widened(self._matrix[rows])

    def similarities(self, query: np.ndarray, keys: np.ndarray) -> np.ndarray:
        if not len(keys):
            return np.empty(0, np.float32)
        vectors = self.get(keys)
        with one_blas_thread():
            return vectors @ np.asarray(query, dtype=np.float32)

    def search(self, query: np.ndarray, k: int, *, exact: bool = True,
               scored: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Keys and cosines of the ``k`` nearest rows, best first (always exact, as
        :meth:`VectorIndex.search` with ``scored``)."""
        k = min(k, self._count)
        if k <= 0:
            return np.empty(0, np.int64), np.empty(0, np.float32)
        query = np.asarray(query, dtype=np.float32)
        if self._matrix.dtype == np.float32:
            with one_blas_thread():
                sims = self._matrix[:self._used] @ query
            if self._count < self._used:
                sims[~self._alive[:self._used]] = -np.inf
            top = np.argpartition(-sims, k - 1)[:k]
            top = top[np.argsort(-sims[top], kind="stable")]
            return self._row_keys[top], sims[top]
        found = usearch_search(self._matrix[:self._used], query.astype(np.float16),
                               min(k + self._used - self._count, self._used), MetricKind.Cos,
                               exact=True, threads=1)
        rows = np.asarray(found.keys, dtype=np.int64).reshape(-1)
        rows = rows[(rows >= 0) & (rows < self._used)]
        rows = rows[self._alive[rows]]
        with one_blas_thread():
            sims = widened(self._matrix[rows]) @ query
        best = np.argsort(-sims, kind="stable")[:k]
        return self._row_keys[rows[best]], sims[best]
