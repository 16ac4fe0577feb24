"""The exact rows beside the vector index: lookups by key, deletes, compaction."""

import numpy as np
import pytest

from nbmemory.vectors import DenseRows, one_blas_thread


def unit(rng, n, d=8):
    m = rng.standard_normal((n, d)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_rows_are_found_by_key_after_deletes_and_compaction():
    rng = np.random.default_rng(0)
    rows = DenseRows(8, capacity=4)
    keys = np.arange(1, 3001, dtype=np.int64) * 3  # gaps, growth past the capacity
    vectors = unit(rng, len(keys))
    rows.put(keys, vectors)
    assert len(rows) == 3000 and 3 in rows and 4 not in rows and 10**9 not in rows
    gone = keys[: 2000]
    rows.delete(gone.tolist())  # fewer than half alive: compacted
    assert len(rows) == 1000 and rows.keys().tolist() == keys[2000:].tolist()
    assert np.array_equal(rows.get(keys[2500:2510]), vectors[2500:2510])
    assert rows.holds(np.array([3, keys[2500], -1, 10**9])).tolist() == [False, True, False, False]
    with pytest.raises(KeyError):
        rows.get(np.array([keys[0]]))
    rows.put(keys[:1], vectors[:1])  # back again
    assert np.allclose(rows.similarities(vectors[0], keys[:1]), [1.0], atol=1e-6)


def test_exact_search_ranks_live_rows_only():
    rng = np.random.default_rng(1)
    vectors = unit(rng, 50)
    rows = DenseRows.from_matrix(np.arange(50), vectors)
    rows.delete([0])
    ids, sims = rows.search(vectors[0], 5)
    expected = [i for i in np.argsort(-(vectors @ vectors[0])).tolist() if i != 0][:5]
    assert ids.tolist() == expected
    assert np.allclose(sims, (vectors @ vectors[0])[expected], atol=1e-6)


def test_one_blas_thread_leaves_results_alone():
    rng = np.random.default_rng(2)
    m, q = unit(rng, 300, 64), unit(rng, 1, 64)[0]
    with one_blas_thread():
        inside = m @ q
    assert np.allclose(inside, m @ q, atol=1e-6)
