"""The dense index: usearch HNSW over normalised vectors, keyed by note id.

It knows nothing of DuckDB or of the embedder. It is a projection: the caller rebuilds
it from the vectors kept in DuckDB whenever the file is missing, corrupt or behind.
Files are written to a temporary name and renamed over the old one, never in place.
"""

from __future__ import annotations

import json
import threading
from contextlib import nullcontext
from pathlib import Path

import numpy as np
from usearch.index import Index, MetricKind
from usearch.index import search as usearch_search

from .files import atomic_write


class VectorIndexError(Exception):
    """The index file cannot be used; rebuild it."""


_blas = None


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

    def __init__(self, ndim: int, capacity: int = 1024):
        self.ndim = ndim
        self._matrix = np.zeros((capacity, ndim), self._dtype_for(capacity))
        self._row_keys = np.zeros(capacity, np.int64)
        self._alive = np.zeros(capacity, bool)
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
        size = max(1024, 2 * len(self._matrix))
        self._matrix = np.resize(self._matrix, (size, self.ndim)).astype(
            self._dtype_for(size), copy=False)
        self._row_keys = np.resize(self._row_keys, size)
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
        return self._matrix[rows].astype(np.float32, copy=False)

    def similarities(self, query: np.ndarray, keys: np.ndarray) -> np.ndarray:
        if not len(keys):
            return np.empty(0, np.float32)
        vectors = self.get(keys)
        with one_blas_thread():
            return vectors @ np.asarray(query, dtype=np.float32)

    def search(self, query: np.ndarray, k: int, *, exact: bool = True) -> tuple[np.ndarray, np.ndarray]:
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
            sims = self._matrix[rows].astype(np.float32) @ query
        best = np.argsort(-sims, kind="stable")[:k]
        return self._row_keys[rows[best]], sims[best]


class VectorIndex:
    """Cosine HNSW (usearch, explicit graph parameters) over the exact rows.

    The graph holds its vectors as int8 (``dtype``): it only proposes candidates, which
    are then scored from the rows (:class:`DenseRows`). On 30k real MiniLM vectors a query's
    true top 10 were in the graph's top 50 99.25% of the time with int8 against 99.35%
    with float32, for a file a third the size (15.9 MB against 50.2 MB) built faster
    (15.0 s against 19.5 s); recall asks the graph for at least 50.

    A loaded index copies its rows (:meth:`start_filling`), in a background thread when
    it holds more than ``fill_below``, from ``source(keys) -> (keys, matrix)`` (the store's
    float32 vectors) or, for a float32 graph, from usearch itself; the background copy
    reads ``source_all() -> iterator of (keys, matrix)`` in one pass if given. Until a
    key's row is there it is read when asked for, so every answer is the same as after
    the copy.
    """

    def __init__(self, ndim: int, *, connectivity: int = 16, expansion_add: int = 128,
                 expansion_search: int = 96, dtype: str = "i8", _index: Index | None = None,
                 fill_below: int = 20_000, source=None, source_all=None):
        self.ndim = ndim
        self._index = _index if _index is not None else Index(
            ndim=ndim, metric="cos", dtype=dtype, connectivity=connectivity,
            expansion_add=expansion_add, expansion_search=expansion_search)
        self._index.expansion_search = expansion_search
        self._source, self._source_all = source, source_all
        self._exact_graph = self._index.dtype.name == "F32"  # its vectors are the rows'
        self.rows = DenseRows(ndim, capacity=max(1024, len(self._index)))
        self._lock = threading.RLock()
        self._unfilled = np.zeros(0, bool)  # by key: in usearch, not yet in the rows
        self._n_unfilled = 0
        self._stop = False
        self._filler: threading.Thread | None = None
        self._builder: threading.Thread | None = None
        self._dirty: set[int] = set()  # keys changed while the graph was being built
        self.built = (0, 0)  # while building: vectors in the new graph, of how many
        if len(self._index):
            if not self._exact_graph and source is None:
                raise VectorIndexError(f"a {self._index.dtype} graph needs the exact vectors")
            keys = np.sort(np.asarray(self._index.keys, dtype=np.int64))
            self._unfilled = np.zeros(int(keys[-1]) + 1, bool)
            self._unfilled[keys] = True
            self._n_unfilled = len(keys)
        self._fill_below = fill_below

    def start_filling(self) -> None:
        """Copy the rows of a loaded graph: now, or in the background if there are many."""
        keys = np.flatnonzero(self._unfilled)
        if len(keys) < self._fill_below:
            self._fill(keys)
        elif len(keys) and self._filler is None:
            self._filler = threading.Thread(target=self._fill_all, args=(keys,),
                                            name="nbmemory-vector-rows", daemon=True)
            self._filler.start()

    def _fill(self, keys: np.ndarray) -> None:
        """Copy the rows of those of ``keys`` not yet copied. The vectors are read outside
        the lock (a read from the store takes tens of milliseconds for a chunk: searches
        would wait on it); a key added or removed meanwhile keeps what that did."""
        keys = self._unfilled_of(keys)
        if not len(keys):
            return
        if self._exact_graph:
            found, matrix = keys, np.vstack(self._index.get(keys, np.float32))
        else:
            found, matrix = self._source(keys)
            if len(found) != len(keys):
                missing = sorted(set(keys.tolist()) - set(np.asarray(found).tolist()))
                raise VectorIndexError(f"no stored vector for {missing[:5]}")
        self._put_unfilled(found, matrix)

    def _put_unfilled(self, found, matrix) -> None:
        with self._lock:
            found = np.asarray(found, np.int64)
            inside = found < len(self._unfilled)
            still = np.zeros(len(found), bool)
            still[inside] = self._unfilled[found[inside]]
            self.rows.put(found[still], np.asarray(matrix)[still])
            self._unfilled[found[still]] = False
            self._n_unfilled -= int(still.sum())

    def _unfilled_of(self, keys: np.ndarray) -> np.ndarray:
        with self._lock:
            keys = np.asarray(keys, np.int64)
            inside = keys[(keys >= 0) & (keys < len(self._unfilled))]
            return np.unique(inside[self._unfilled[inside]])

    def _fill_all(self, keys: np.ndarray) -> None:
        if self._source_all is not None and not self._exact_graph:
            chunks = self._source_all()
            try:
                for found, matrix in chunks:
                    if self._stop:
                        return
                    self._put_unfilled(found, matrix)
            finally:
                chunks.close()
            keys = self._unfilled_of(keys)  # any the pass did not hold
        for start in range(0, len(keys), 5_000):
            if self._stop:
                return
            self._fill(keys[start:start + 5_000])

    @property
    def filled(self) -> bool:
        """Whether every vector is in the exact rows."""
        return not self._n_unfilled

    @property
    def building(self) -> bool:
        """Whether the graph is being built (searches are exact over the rows meanwhile)."""
        return self._builder is not None

    @classmethod
    def build(cls, ndim: int, keys: np.ndarray, vectors: np.ndarray, *,
              background_above: int = 2_000, done=None, progress=None,
              **params) -> VectorIndex:
        """An index of ``vectors``. Above ``background_above`` it answers at once by exact
        search over its rows while a thread builds the graph, on one core so that the
        other stays free for the user, and calls ``done(index)`` once the graph is in use."""
        index = cls(ndim, **params)
        index.rows.put(keys, vectors)
        if len(keys) <= background_above:
            index._index.add(keys, np.asarray(vectors, np.float32))
            if progress:
                progress(len(keys), len(keys))
            return index
        index.built = (0, len(keys))
        index._builder = threading.Thread(target=index._build, args=(done, progress),
                                          name="nbmemory-vector-graph", daemon=True)
        index._builder.start()
        return index

    def _build(self, done, progress) -> None:
        fresh = self._index  # empty: nothing searches it until it is complete
        with self._lock:  # a concurrent add or remove would leave a key in it twice
            keys = self.rows.keys().copy()
        for start in range(0, len(keys), 1_000):
            if self._stop:
                return
            with self._lock:
                chunk = keys[start:start + 1_000]
                chunk = chunk[self.rows.holds(chunk)]
                vectors = self.rows.get(chunk)
            fresh.add(chunk, vectors, threads=1)
            self.built = (min(start + 1_000, len(keys)), len(keys))
            if progress:
                progress(*self.built)
        with self._lock:  # what changed meanwhile, then searches use the graph
            dirty = np.array(sorted(self._dirty), np.int64)
            if len(dirty):
                stale = [k for k in dirty.tolist() if k in fresh]
                if stale:
                    fresh.remove(np.array(stale, np.int64))
                held = dirty[self.rows.holds(dirty)]
                if len(held):
                    fresh.add(held, self.rows.get(held))
            self._dirty = set()
            self._builder = None
        if done is not None:
            done(self)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the background copy and build to finish; whether they have."""
        for thread in (self._filler, self._builder):
            if thread is not None:
                thread.join(timeout)
        return self.filled and not self.building

    @property
    def stopped(self) -> bool:
        return self._stop

    def close(self) -> None:
        """Stop copying rows and building (the index is being dropped)."""
        self._stop = True
        for thread in (self._filler, self._builder):
            if thread is not None and thread is not threading.current_thread():
                thread.join()

    def __len__(self) -> int:
        return len(self.rows) + self._n_unfilled

    def __contains__(self, key: int) -> bool:
        key = int(key)
        return key in self.rows or (0 <= key < len(self._unfilled) and bool(self._unfilled[key]))

    def keys(self) -> np.ndarray:
        with self._lock:
            if not self._n_unfilled:
                return self.rows.keys()
            held = self._unfilled.copy()
            rows = self.rows.keys()
            if len(rows) and rows[-1] >= len(held):
                held = np.concatenate([held, np.zeros(int(rows[-1]) + 1 - len(held), bool)])
            held[rows] = True
            return np.flatnonzero(held)

    def holds(self, keys) -> np.ndarray:
        """For each key, whether it has a vector here."""
        keys = np.asarray(keys, dtype=np.int64)
        with self._lock:
            held = self.rows.holds(keys)
            if self._n_unfilled:
                inside = (keys >= 0) & (keys < len(self._unfilled))
                held[inside] |= self._unfilled[keys[inside]]
            return held

    def add(self, keys, vectors: np.ndarray) -> None:
        """Add or replace vectors (replacing keeps the call idempotent)."""
        keys = np.atleast_1d(np.asarray(keys, dtype=np.int64))
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(keys), self.ndim)
        if len(np.unique(keys)) < len(keys):  # a key twice: its last vector
            last = len(keys) - 1 - np.unique(keys[::-1], return_index=True)[1]
            keys, vectors = keys[last], vectors[last]
        with self._lock:
            if self._builder is not None:
                self._dirty.update(keys.tolist())
                self.rows.put(keys, vectors)
                return
            present = keys[self.holds(keys)]
            if len(present):
                self._index.remove(present)
                self._forget_unfilled(present)
            self._index.add(keys, vectors)
            self.rows.put(keys, vectors)

    def _forget_unfilled(self, keys: np.ndarray) -> None:
        if self._n_unfilled:
            inside = keys[keys < len(self._unfilled)]
            dropped = np.unique(inside[self._unfilled[inside]])
            self._unfilled[dropped] = False
            self._n_unfilled -= len(dropped)

    def remove(self, keys) -> None:
        keys = np.atleast_1d(np.asarray(keys, dtype=np.int64))
        with self._lock:
            keys = np.unique(keys[self.holds(keys)])
            if len(keys) and self._builder is not None:
                self._dirty.update(keys.tolist())
                self.rows.delete(keys.tolist())
            elif len(keys):
                self._index.remove(keys)
                self._forget_unfilled(keys)
                self.rows.delete(keys.tolist())

    def get(self, keys: np.ndarray) -> np.ndarray:
        """Vectors for ``keys`` (all must be present), one row each."""
        keys = np.asarray(keys, dtype=np.int64)
        self._fill(keys)  # outside the lock, which the background copy needs meanwhile
        with self._lock:
            return self.rows.get(keys)

    def similarities(self, query: np.ndarray, keys: np.ndarray) -> np.ndarray:
        """Exact cosine similarity of ``query`` to each of ``keys``."""
        keys = np.asarray(keys, dtype=np.int64)
        self._fill(keys)  # outside the lock, which the background copy needs meanwhile
        with self._lock:
            return self.rows.similarities(query, keys)

    def search(self, query: np.ndarray, k: int, *, exact: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Keys and cosine similarities of the ``k`` nearest vectors, best first."""
        if not len(self) or k <= 0:
            return np.empty(0, np.int64), np.empty(0, np.float32)
        if exact or self._builder is not None:
            with self._lock:
                if self._n_unfilled:
                    self._fill(np.flatnonzero(self._unfilled))
                return self.rows.search(query, k)
        matches = self._index.search(np.asarray(query, dtype=np.float32), min(k, len(self)))
        keys = np.asarray(matches.keys, dtype=np.int64)
        sims = self.similarities(query, keys)  # exact: the graph's are int8 estimates
        order = np.argsort(-sims, kind="stable")
        return keys[order], sims[order]

    def save(self, path: Path, meta: dict) -> None:
        """Write index and its metadata (journal position, embedder) atomically."""
        atomic_write(path, lambda tmp: self._index.save(str(tmp)))
        meta_path = path.with_name(path.name + ".json")
        atomic_write(meta_path, lambda tmp: tmp.write_text(json.dumps(meta)))

    @classmethod
    def load(cls, path: Path, *, expansion_search: int = 96, source=None, source_all=None,
             fill_below: int = 20_000) -> tuple[VectorIndex, dict]:
        meta_path = path.with_name(path.name + ".json")
        try:
            meta = json.loads(meta_path.read_text())
            index = Index.restore(str(path))
        except Exception as exc:  # missing, truncated or foreign file
            raise VectorIndexError(f"{path}: {exc}") from exc
        if index is None:
            raise VectorIndexError(f"{path}: not a usearch index")
        return cls(index.ndim, expansion_search=expansion_search, _index=index, source=source,
                   source_all=source_all, fill_below=fill_below), meta
