"""The dense index: usearch HNSW over normalised vectors, keyed by note id.

It knows nothing of DuckDB or of the embedder. It is a projection: the caller rebuilds
it from the vectors kept in DuckDB whenever the file is missing, corrupt or behind.
Files are written to a temporary name and renamed over the old one, never in place.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
from usearch.index import Index


class VectorIndexError(Exception):
    """The index file cannot be used; rebuild it."""


def _atomic_write(path: Path, write) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class VectorIndex:
    """Cosine HNSW index with f32 scalars and explicit graph parameters."""

    def __init__(self, ndim: int, *, connectivity: int = 16, expansion_add: int = 128,
                 expansion_search: int = 96, _index: Index | None = None):
        self.ndim = ndim
        self._index = _index if _index is not None else Index(
            ndim=ndim, metric="cos", dtype="f32", connectivity=connectivity,
            expansion_add=expansion_add, expansion_search=expansion_search)
        self._index.expansion_search = expansion_search

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, key: int) -> bool:
        return bool(self._index.contains(int(key)))

    def keys(self) -> np.ndarray:
        return np.asarray(self._index.keys, dtype=np.int64)

    def add(self, keys, vectors: np.ndarray) -> None:
        """Add or replace vectors (replacing keeps the call idempotent)."""
        keys = np.atleast_1d(np.asarray(keys, dtype=np.int64))
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(keys), self.ndim)
        present = [k for k in keys if self._index.contains(int(k))]
        if present:
            self._index.remove(np.asarray(present, dtype=np.int64))
        self._index.add(keys, vectors)

    def remove(self, keys) -> None:
        keys = [int(k) for k in np.atleast_1d(keys) if self._index.contains(int(k))]
        if keys:
            self._index.remove(np.asarray(keys, dtype=np.int64))

    def get(self, keys: np.ndarray) -> np.ndarray:
        """Vectors for ``keys`` (all must be present), one row each."""
        if not len(keys):
            return np.empty((0, self.ndim), np.float32)
        rows = self._index.get(np.asarray(keys, dtype=np.int64))
        if isinstance(rows, np.ndarray) and rows.ndim == 2:
            return rows.astype(np.float32, copy=False)
        return np.vstack(rows).astype(np.float32, copy=False)

    def search(self, query: np.ndarray, k: int, *, exact: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Keys and cosine similarities of the ``k`` nearest vectors, best first."""
        if not len(self._index) or k <= 0:
            return np.empty(0, np.int64), np.empty(0, np.float32)
        matches = self._index.search(np.asarray(query, dtype=np.float32), min(k, len(self._index)),
                                     exact=exact)
        return (np.asarray(matches.keys, dtype=np.int64),
                1.0 - np.asarray(matches.distances, dtype=np.float32))

    def similarities(self, query: np.ndarray, keys: np.ndarray) -> np.ndarray:
        """Exact cosine similarity of ``query`` to each of ``keys``."""
        return self.get(keys) @ np.asarray(query, dtype=np.float32)

    def save(self, path: Path, meta: dict) -> None:
        """Write index and its metadata (journal position, embedder) atomically."""
        _atomic_write(path, lambda tmp: self._index.save(str(tmp)))
        meta_path = path.with_name(path.name + ".json")
        _atomic_write(meta_path, lambda tmp: tmp.write_text(json.dumps(meta)))

    @classmethod
    def load(cls, path: Path, *, expansion_search: int = 96) -> tuple[VectorIndex, dict]:
        meta_path = path.with_name(path.name + ".json")
        try:
            meta = json.loads(meta_path.read_text())
            index = Index.restore(str(path))
        except Exception as exc:  # missing, truncated or foreign file
            raise VectorIndexError(f"{path}: {exc}") from exc
        if index is None:
            raise VectorIndexError(f"{path}: not a usearch index")
        return cls(index.ndim, expansion_search=expansion_search, _index=index), meta


class MatrixVectors:
    """Exact search over a fixed matrix, with the read interface of :class:`VectorIndex`.

    Used for views of the past (recall as of a snapshot), which are small and short-lived.
    """

    def __init__(self, keys: np.ndarray, matrix: np.ndarray):
        order = np.argsort(keys)
        self._keys = np.asarray(keys, dtype=np.int64)[order]
        matrix = np.asarray(matrix, dtype=np.float32)
        self._matrix = matrix.reshape(len(keys), -1)[order] if len(keys) else matrix

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: int) -> bool:
        i = np.searchsorted(self._keys, key)
        return bool(i < len(self._keys) and self._keys[i] == key)

    def keys(self) -> np.ndarray:
        return self._keys

    def get(self, keys: np.ndarray) -> np.ndarray:
        return self._matrix[np.searchsorted(self._keys, np.asarray(keys, dtype=np.int64))]

    def similarities(self, query: np.ndarray, keys: np.ndarray) -> np.ndarray:
        return self.get(keys) @ np.asarray(query, dtype=np.float32)

    def search(self, query: np.ndarray, k: int, *, exact: bool = True) -> tuple[np.ndarray, np.ndarray]:
        sims = self._matrix @ np.asarray(query, dtype=np.float32)
        top = np.argsort(-sims, kind="stable")[:k]
        return self._keys[top], sims[top]
