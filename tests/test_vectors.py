"""The exact rows beside the vector index: lookups by key, deletes, compaction."""

import numpy as np
import pytest

from nbmemory.dense_rows import DenseRows, one_blas_thread, widened
from nbmemory.vectors import VectorIndexError


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


def test_a_large_matrix_is_held_in_half_precision_and_searched_alike(monkeypatch):
    monkeypatch.setattr(DenseRows, "HALF_ABOVE", 2048)
    rng = np.random.default_rng(3)
    vectors = unit(rng, 5000, 64)
    rows = DenseRows(64, capacity=1024)
    rows.put(np.arange(2000), vectors[:2000])
    assert rows._matrix.dtype == np.float32  # small: full precision
    rows.put(np.arange(2000, 5000), vectors[2000:])  # grown past HALF_ABOVE
    assert rows._matrix.dtype == np.float16 and rows._matrix.itemsize == 2
    assert np.abs(rows.get(np.arange(5000)) - vectors).max() < 1e-3
    assert rows.get(np.arange(3)).dtype == np.float32
    rows.delete([7, 8])
    query = vectors[7]
    ids, sims = rows.search(query, 10)
    exact = [i for i in np.argsort(-(vectors @ query)).tolist() if i not in (7, 8)][:10]
    assert ids.tolist() == exact
    assert np.abs(sims - (vectors @ query)[exact]).max() < 1e-3
    assert np.array_equal(sims, rows.similarities(query, ids))  # one score per key


def test_half_precision_rows_are_widened_to_the_very_same_floats():
    halves = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    finite = halves[np.isfinite(halves)].reshape(-1, 8)  # zeros, subnormals, both signs
    assert np.array_equal(widened(finite).view(np.uint32),
                          finite.astype(np.float32).view(np.uint32))
    assert widened(finite).dtype == np.float32 and widened(finite).shape == finite.shape


def test_one_blas_thread_leaves_results_alone():
    rng = np.random.default_rng(2)
    m, q = unit(rng, 300, 64), unit(rng, 1, 64)[0]
    with one_blas_thread():
        inside = m @ q
    assert np.allclose(inside, m @ q, atol=1e-6)


def test_a_loaded_index_estimates_from_its_graph_until_its_rows_are_copied(tmp_path):
    import threading

    from nbmemory.vectors import VectorIndex

    rng = np.random.default_rng(1)
    keys = np.arange(1, 4001, dtype=np.int64)
    vectors = unit(rng, len(keys))
    built = VectorIndex(8)  # an int8 graph: its exact rows come from the source
    copying = threading.Event()

    def source(wanted):
        if threading.current_thread().name == "nbmemory-vector-rows":
            assert copying.wait(30)  # the background copy waits until the test lets it go
        wanted = np.asarray(wanted, np.int64)
        return wanted, vectors[wanted - 1]

    built.add(keys, vectors)
    built.save(tmp_path / "v.usearch", {"seq": 1})
    now, _ = VectorIndex.load(tmp_path / "v.usearch", source=source)
    now.start_filling()  # below fill_below: copied at once
    assert now.filled
    later, _ = VectorIndex.load(tmp_path / "v.usearch", source=source, fill_below=10)
    later.start_filling()  # copied in the background, held back
    later.remove([5, 6])  # changes while the copy runs
    later.add([7, 9000], unit(rng, 2))
    now.remove([5, 6])
    now.add([7, 9000], later.get(np.array([7, 9000])))  # get reads a row on demand: exact
    query = unit(rng, 1)[0]
    assert len(later) == len(now) == 3999 and 5 not in later and 9000 in later
    assert later.holds(np.array([5, 7, 9000, 10**6])).tolist() == [False, True, True, False]
    estimated, exact = later.similarities(query, keys[10:50]), now.similarities(query, keys[10:50])
    assert not np.array_equal(estimated, exact) and np.abs(estimated - exact).max() < 0.05
    assert np.array_equal(later.similarities(query, np.array([7, 9000])),
                          now.similarities(query, np.array([7, 9000])))  # rows: exact
    copying.set()
    assert later.wait(30) and later.filled
    assert np.array_equal(later.similarities(query, keys[10:50]), exact)
    assert [a.tolist() for a in later.search(query, 10, exact=True)] == \
           [a.tolist() for a in now.search(query, 10, exact=True)]
    later.close()
    assert later.keys().tolist() == now.keys().tolist()


def test_every_vector_added_in_one_batch_is_found_by_the_graph():
    from nbmemory.vectors import VectorIndex

    rng = np.random.default_rng(4)
    keys = np.arange(1, 3001, dtype=np.int64)
    vectors = unit(rng, len(keys))
    added = VectorIndex(8, dtype="f32")
    added.add(keys, vectors)  # a bulk remember into a graph (parallel insertion lost ~4)
    built = VectorIndex.build(8, keys[:2000], vectors[:2000], dtype="f32")  # a small rebuild
    for index, n in ((added, 3000), (built, 2000)):
        assert not index.building
        lost = [k for k, v in zip(keys[:n].tolist(), vectors[:n])
                if index.search(v, 1)[0].tolist() != [k]]
        assert lost == []


def test_a_loaded_graph_stays_a_view_of_its_file_changes_go_beside_it_until_a_save(tmp_path,
                                                                                   monkeypatch):
    from nbmemory.vectors import VectorIndex

    rng = np.random.default_rng(4)
    keys = np.arange(1, 3001, dtype=np.int64)
    vectors = unit(rng, len(keys))
    built = VectorIndex(8, dtype="f32")
    built.add(keys, vectors)
    path = tmp_path / "v.usearch"
    built.save(path, {"seq": 1})
    assert built._viewed is None  # a small graph stays in memory after a save
    loaded, _ = VectorIndex.load(path)
    loaded.start_filling()
    assert loaded._viewed == path  # memory-mapped: nothing read yet
    assert loaded.search(vectors[41], 1)[0].tolist() == [42]
    loaded.remove([42])
    loaded.add([5000], vectors[41:42])
    fresh = unit(rng, 2)
    loaded.add([7], fresh[:1])  # replaces a key of the view
    loaded.add([7], fresh[1:])  # and again, in the graph beside it
    loaded.add([6], vectors[5:6])  # the same vector as before
    assert loaded._viewed == path  # still nothing read
    assert loaded.search(vectors[41], 1)[0].tolist() == [5000] and 42 not in loaded
    assert loaded.search(fresh[1], 1)[0].tolist() == [7]
    assert 7 not in loaded.search(vectors[6], 3)[0].tolist() + loaded.search(fresh[0], 3)[0].tolist()
    assert loaded.search(vectors[5], 1)[0].tolist() == [6]
    assert len(loaded) == 3000 and loaded.keys().tolist() == sorted({*keys.tolist(), 5000} - {42})
    for key in keys[100:500].tolist():  # more dead than a search asks for
        loaded.remove([key])
    found = loaded.search(vectors[41], 50)[0]
    assert len(found) == 50 and found[0] == 5000 and not set(found.tolist()) & set(range(101, 501))
    # Unscored (recall scores the union of both channels itself): both graphs' candidates.
    proposed, estimated = loaded.search(vectors[41], 50, scored=False)
    assert 5000 in proposed.tolist() and len(set(proposed.tolist()) - {5000}) >= 50
    assert not set(proposed.tolist()) & {42, *range(101, 501)}
    assert np.allclose(estimated, loaded.similarities(vectors[41], proposed), atol=1e-3)
    monkeypatch.setattr(VectorIndex, "VIEW_FROM", 1000)  # as a large graph is
    loaded.save(path, {"seq": 2})  # over the file the view was of, then a view of the new one
    assert loaded._viewed == path and loaded._delta is None and not loaded._n_dead
    again, _ = VectorIndex.load(path)
    again.start_filling()
    for index in (loaded, again):
        assert index.search(vectors[41], 1)[0].tolist() == [5000] and len(index) == 2600
        assert index.search(fresh[1], 1)[0].tolist() == [7] and 42 not in index
    damaged = tmp_path / "damaged"  # replaced (not written in place: it is mapped) by a damaged file
    damaged.write_bytes(path.read_bytes()[:1000])
    damaged.replace(path)
    again.add([6000], vectors[:1])
    with pytest.raises(VectorIndexError, match="v.usearch"):
        again.save(path, {"seq": 3})  # the changes are folded in at the save


def test_rows_copied_in_one_pass_keep_the_changes_made_during_the_copy(tmp_path):
    import threading

    from nbmemory.vectors import VectorIndex

    rng = np.random.default_rng(3)
    keys = np.arange(1, 3001, dtype=np.int64)
    vectors = unit(rng, len(keys))
    built = VectorIndex(8)
    built.add(keys, vectors)
    built.save(tmp_path / "v.usearch", {"seq": 1})
    changed = threading.Event()

    def source(wanted):
        wanted = np.asarray(wanted, np.int64)
        return wanted, vectors[wanted - 1]

    def source_all():  # the store as it was when the pass began, in no particular order
        yield keys[1000:1100], vectors[1000:1100]
        assert changed.wait(30)
        yield keys[:1000][::-1], vectors[:1000][::-1]  # 5 and 6 removed, 7 replaced since
        yield keys[1100:], vectors[1100:]

    index, _ = VectorIndex.load(tmp_path / "v.usearch", source=source, source_all=source_all,
                                fill_below=10)
    index.start_filling()
    new = unit(rng, 2)
    index.remove([5, 6])
    index.add([7, 9000], new)
    changed.set()
    index._filler.join(30)
    assert index.filled and len(index) == 2999 and 5 not in index and 9000 in index
    assert np.array_equal(index.get(np.array([7, 9000, 2000])),
                          np.vstack([new, vectors[1999:2000]]))
    assert index.search(new[0], 1, exact=True)[0].tolist() == [7]
    index.close()


def test_an_index_built_in_the_background_searches_exactly_until_its_graph_is_ready():
    import threading

    from nbmemory.vectors import VectorIndex

    rng = np.random.default_rng(2)
    keys = np.arange(1, 3001, dtype=np.int64)
    vectors = unit(rng, len(keys))
    ready = threading.Event()
    index = VectorIndex.build(8, keys, vectors, background_above=100,
                              done=lambda built: ready.set())
    assert index.building and len(index) == 3000
    # Changes while the graph is built reach it once it is done.
    index.remove([10, 11])
    extra = unit(rng, 2)
    index.add([12, 5000], extra)
    top, sims = index.search(extra[1], 1)  # exact meanwhile
    assert top.tolist() == [5000] and sims[0] == pytest.approx(1.0, abs=1e-5)
    assert ready.wait(120)
    assert not index.building and index.built[0] == index.built[1] >= 2998
    assert len(index) == 2999 and 10 not in index and 5000 in index
    for key, vector in [(5000, extra[1]), (12, extra[0]), (400, vectors[399])]:
        top, _ = index.search(vector, 1)  # the graph now
        assert top.tolist() == [key]
    assert 10 not in index.search(vectors[9], 50)[0].tolist()
    index.close()


def test_the_model_runtime_loads_after_the_vector_index():
    import subprocess
    import sys

    # usearch first, as an owner that opens its store before loading the model does: a
    # library clash made this die of SIGSEGV.
    code = "import nbmemory.vectors, onnxruntime; print(onnxruntime.get_device())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.strip() == "CPU"
