"""The dense index: usearch HNSW over normalised vectors, keyed by note id.

It knows nothing of DuckDB or of the embedder. It is a projection: the caller rebuilds
it from the vectors kept in DuckDB whenever the file is missing, corrupt or behind.
Files are written to a temporary name and renamed over the old one, never in place.
"""

from __future__ import annotations

import atexit
import json
import threading
import weakref
from pathlib import Path

import numpy as np

from .dense_rows import DenseRows  # first: it loads what usearch must not load before
from .files import atomic_write
from usearch.index import Index  # noqa: I001


def _insert(index: Index, keys: np.ndarray, vectors: np.ndarray) -> None:
    """Add to a graph on one thread: usearch's parallel insertion leaves about one vector in
    a thousand out of its own top 10 (measured at 8 and 384 dimensions; hnswlib's issue #579
    reports the same of its own). One thread still inserts 2,600 vectors/s at 384."""
    index.add(keys, np.asarray(vectors, np.float32), threads=1)


def _flagged(flags: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """For each key, its flag in ``flags`` (a bool array by key; False beyond its end)."""
    out = np.zeros(len(keys), bool)
    inside = (keys >= 0) & (keys < len(flags))
    out[inside] = flags[keys[inside]]
    return out


def _matches(index: Index, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Keys and estimated cosines of ``index``'s ``k`` nearest to ``query``."""
    if not k:
        return np.empty(0, np.int64), np.empty(0, np.float32)
    found = index.search(query, k)
    return (np.asarray(found.keys, dtype=np.int64),
            1.0 - np.asarray(found.distances, dtype=np.float32))


class VectorIndexError(Exception):
    """The index file cannot be used; rebuild it."""


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
    key's row is there, :meth:`get` reads it when asked for and :meth:`similarities`
    estimates it from the graph while the background copy runs.

    A loaded graph, and a saved one of at least ``VIEW_FROM`` vectors, is a read-only view
    of its file: the notes added since are in a small graph beside it, and the keys removed
    or replaced since are left out of its answers, until the next save writes one graph
    again. A smaller graph is kept in memory after a save: it takes little, and folding
    changes in at each save would add them to a graph twice.
    """

    VIEW_FROM = 20_000

    def __init__(self, ndim: int, *, connectivity: int = 16, expansion_add: int = 128,
                 expansion_search: int = 96, dtype: str = "i8", _index: Index | None = None,
                 fill_below: int = 20_000, source=None, source_all=None):
        self.ndim = ndim
        self._index = _index if _index is not None else Index(
            ndim=ndim, metric="cos", dtype=dtype, connectivity=connectivity,
            expansion_add=expansion_add, expansion_search=expansion_search)
        self._index.expansion_search = expansion_search
        self._viewed: Path | None = None  # the file the graph is a read-only view of
        # While the graph is a view, changes go to a small graph beside it (_delta) and
        # the keys they replace or remove in the view are marked dead; a save folds them in.
        self._delta: Index | None = None
        self._dead = np.zeros(0, bool)  # by key
        self._n_dead = 0
        self._source, self._source_all = source, source_all
        self._exact_graph = self._index.dtype.name == "F32"  # its vectors are the rows'
        # Room to double: the pages of rows not yet written take no memory, and growing
        # copies every row (5 s at 1M notes here, at the first remember after a reopen).
        self.rows = DenseRows(ndim, capacity=max(1024, len(self._index)), room=2)
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
            _WORKING.add(self)
            self._filler.start()

    def _fill(self, keys: np.ndarray) -> None:
        """Copy the rows of those of ``keys`` not yet copied. The vectors are read outside
        the lock (a read from the store takes tens of milliseconds for a chunk: searches
        would wait on it); a key added or removed meanwhile keeps what that did."""
        if not self._n_unfilled:  # every row copied: the common case, checked cheaply
            return
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
            still = _flagged(self._unfilled, found)
            self.rows.put(found[still], np.asarray(matrix)[still])
            self._unfilled[found[still]] = False
            self._n_unfilled -= int(still.sum())

    def _unfilled_of(self, keys: np.ndarray) -> np.ndarray:
        with self._lock:
            keys = np.asarray(keys, np.int64)
            return np.unique(keys[self._pending(keys)])

    def _pending(self, keys: np.ndarray) -> np.ndarray:
        """For each key, whether it is in the graph but not yet in the rows (hold the lock)."""
        return _flagged(self._unfilled, keys)

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
        if not len(keys):  # every note purged: the store has no vector of any width
            return index
        index.rows.put(keys, vectors)
        if len(keys) <= background_above:
            _insert(index._index, keys, vectors)
            if progress:
                progress(len(keys), len(keys))
            return index
        index.built = (0, len(keys))
        index._builder = threading.Thread(target=index._build, args=(done, progress),
                                          name="nbmemory-vector-graph", daemon=True)
        _WORKING.add(index)
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
            _insert(fresh, chunk, vectors)
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
                    _insert(fresh, held, self.rows.get(held))
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
                held |= self._pending(keys)
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
            if self._viewed is not None:
                self._drop_beside_view(present)
                _insert(self._delta_graph(), keys, vectors)
            else:
                if len(present):
                    self._index.remove(present)
                    self._forget_unfilled(present)
                _insert(self._index, keys, vectors)
            self.rows.put(keys, vectors)

    def _delta_graph(self) -> Index:
        if self._delta is None:
            main = self._index
            self._delta = Index(ndim=self.ndim, metric="cos", dtype=main.dtype,
                                connectivity=main.connectivity,
                                expansion_add=main.expansion_add,
                                expansion_search=main.expansion_search)
        return self._delta

    def _drop_beside_view(self, keys: np.ndarray) -> None:
        """Take ``keys`` (held) out of a viewed index: from the delta, or marked dead."""
        if not len(keys):
            return
        delta = self._delta
        in_delta = (np.array([k in delta for k in keys.tolist()], bool) if delta is not None
                    else np.zeros(len(keys), bool))
        if in_delta.any():
            delta.remove(keys[in_delta])
        dead = keys[~in_delta]
        if len(dead) and dead.max() >= len(self._dead):
            grown = np.zeros(max(int(dead.max()) + 1, 2 * len(self._dead)), bool)
            grown[:len(self._dead)] = self._dead
            self._dead = grown
        self._n_dead += int((~self._dead[dead]).sum())
        self._dead[dead] = True
        self._forget_unfilled(dead)

    def _forget_unfilled(self, keys: np.ndarray) -> None:
        if self._n_unfilled:
            dropped = np.unique(keys[_flagged(self._unfilled, keys)])
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
                if self._viewed is not None:
                    self._drop_beside_view(keys)
                else:
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
        """Cosine similarity of ``query`` to each of ``keys``, from the rows. While a large
        index's rows are being copied in the background, a key not copied yet is scored
        from the graph's own int8 vector instead: reading it from the store scans (0.4-1 s
        a recall at 1M notes), the estimate is within 0.015 of the exact cosine (0.003 on
        average; real MiniLM vectors at 100k), and the copy takes seconds."""
        keys = np.asarray(keys, dtype=np.int64)
        filler = self._filler
        if filler is not None and filler.is_alive() and not self._exact_graph:
            return self._estimated(query, keys)
        self._fill(keys)  # outside the lock, which the background copy needs meanwhile
        with self._lock:
            return self.rows.similarities(query, keys)

    def _estimated(self, query: np.ndarray, keys: np.ndarray) -> np.ndarray:
        with self._lock:
            pending = self._pending(keys)
            sims = np.empty(len(keys), np.float32)
            if (~pending).any():
                sims[~pending] = self.rows.similarities(query, keys[~pending])
            if pending.any():
                graph = np.vstack(self._index.get(keys[pending], np.float32))
                norms = np.linalg.norm(graph, axis=1)
                norms[norms == 0] = 1.0
                sims[pending] = (graph @ np.asarray(query, np.float32)) / norms
        return sims

    def search(self, query: np.ndarray, k: int, *, exact: bool = False,
               scored: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Keys and cosine similarities of the ``k`` nearest vectors, best first.

        ``scored`` False, for a caller that scores the keys from the rows itself: the
        graph's candidates unordered, ``k`` of its own and up to ``k`` from the graph
        beside a view, with the graph's int8 estimates of their cosines.
        """
        if not len(self) or k <= 0:
            return np.empty(0, np.int64), np.empty(0, np.float32)
        if exact or self._builder is not None:
            with self._lock:
                if self._n_unfilled:
                    self._fill(np.flatnonzero(self._unfilled))
                return self.rows.search(query, k)
        query = np.asarray(query, dtype=np.float32)
        with self._lock:
            main, delta, dead = self._index, self._delta, self._dead if self._n_dead else None
        count = min(k, len(main))
        while True:  # past the dead keys of a viewed graph, to k living ones
            keys, sims = _matches(main, query, count)
            if dead is None:
                break
            living = ~_flagged(dead, keys)
            keys, sims = keys[living], sims[living]
            if len(keys) >= k or count >= len(main):
                break
            count = min(2 * count, len(main))
        if delta is not None and len(delta):
            more = _matches(delta, query, min(k, len(delta)))
            keys, sims = np.concatenate([keys, more[0]]), np.concatenate([sims, more[1]])
        if not scored:
            return keys, sims
        sims = self.similarities(query, keys)  # exact: the graph's are int8 estimates
        order = np.argsort(-sims, kind="stable")[:k]
        return keys[order], sims[order]

    def save(self, path: Path, meta: dict) -> None:
        """Write index and its metadata (journal position, embedder) atomically. Changes
        made beside a view are folded in here; then a large graph is a view of the new file
        (its pages are the file's, not the process's: 533 MB at 1M notes)."""
        with self._lock:
            self._writable()  # and the view of the old file is let go before the rename
            atomic_write(path, lambda tmp: self._index.save(str(tmp)))
            if len(self._index) >= self.VIEW_FROM:
                self._view(path)
        meta_path = path.with_name(path.name + ".json")
        atomic_write(meta_path, lambda tmp: tmp.write_text(json.dumps(meta)))

    def _writable(self) -> None:
        """Read a graph loaded as a view into memory, with the changes made beside it.

        Changes are not made to the view's copy when they come: the graph beside it takes
        them. At 1M notes (engine without the model) the first remember after opening took
        0.89 s (reading the graph) and now 0.03 s; the peak RSS through 10,000 more notes
        2,492 -> 2,226 MB. Until the save a search asks both graphs: with those 10,000
        beside it, 0.36 ms more for the small graph and twice the rows to score."""
        if self._viewed is None:
            return
        try:
            index = Index.restore(str(self._viewed))
        except Exception as exc:  # the file went away or was damaged since the open
            raise VectorIndexError(f"{self._viewed}: {exc}") from exc
        if index is None or len(index) != len(self._index):
            raise VectorIndexError(f"{self._viewed} changed since it was opened")
        index.expansion_search = self._index.expansion_search
        if self._n_dead:
            index.remove(np.flatnonzero(self._dead))
        if self._delta is not None and len(self._delta):
            keys = np.asarray(self._delta.keys, dtype=np.int64)
            _insert(index, keys, self.rows.get(keys))
        self._index, self._viewed, self._delta = index, None, None
        self._dead, self._n_dead = np.zeros(0, bool), 0

    def _view(self, path: Path) -> None:
        try:
            index = Index.restore(str(path), view=True)
        except Exception as exc:
            raise VectorIndexError(f"{path}: {exc}") from exc
        if index is None or len(index) != len(self._index):
            raise VectorIndexError(f"{path}: not the graph just written")
        index.expansion_search = self._index.expansion_search
        self._index, self._viewed = index, Path(path)

    @classmethod
    def load(cls, path: Path, *, expansion_search: int = 96, source=None, source_all=None,
             fill_below: int = 20_000) -> tuple[VectorIndex, dict]:
        """The index in ``path``, its graph as a view of the file (memory-mapped, read-only:
        it opens in a millisecond, where reading 533 MB at 1M notes took 0.8-1.2 s); changes
        go to a small graph beside it until a save folds them in (see :meth:`_writable`)."""
        try:
            meta = read_meta(path)
            index = Index.restore(str(path), view=True)
        except Exception as exc:  # missing, truncated or foreign file
            raise VectorIndexError(f"{path}: {exc}") from exc
        if index is None:
            raise VectorIndexError(f"{path}: not a usearch index")
        loaded = cls(index.ndim, expansion_search=expansion_search, _index=index,
                     source=source, source_all=source_all, fill_below=fill_below)
        loaded._viewed = Path(path)
        return loaded, meta


def read_meta(path: Path) -> dict:
    """What the index file ``path`` says of itself (``NAME.json`` beside it: the journal
    position it reflects, its embedder, its store); ValueError for JSON of another shape."""
    meta_path = path.with_name(path.name + ".json")
    meta = json.loads(meta_path.read_text())
    if not isinstance(meta, dict) or not isinstance(meta.get("seq", 0), int):
        raise ValueError(f"{meta_path.name} is not this index's description")
    return meta


_WORKING: weakref.WeakSet = weakref.WeakSet()  # indexes with a thread started, maybe running


@atexit.register
def _stop_working() -> None:
    """At exit, stop the threads of indexes nobody closed (a script that never closed its
    store), as close does: usearch's own threads, killed mid-insert, abort the process
    ("terminate called without an active exception"). The notes are in the database."""
    for index in list(_WORKING):
        index.close()
