"""Core latency, build time and size, side by side with what a user would use instead.

    python bench/bench_core.py [--sizes 1000,10000,100000] [--queries 100]

For each size N the same real MiniLM vectors (docstrings of installed packages, see
corpus.py) go into: nbmemory (DuckDB + usearch + BM25), exact numpy search, ChromaDB,
and DuckDB ``ILIKE`` keyword search. Stores are bulk-loaded straight into DuckDB (a
setup step, not measured); the first open then builds both indexes (measured until the
graph, built in the background, is saved; bench_scale.py shows what answers meanwhile). Prints
a Markdown table. Run it on a quiet machine: every number is wall-clock time.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import corpus  # noqa: E402

from nbmemory.config import Settings  # noqa: E402
from nbmemory.embed import SentenceTransformerEmbedder  # noqa: E402
from nbmemory.engine import Engine, content_hash  # noqa: E402
from nbmemory.store import Store  # noqa: E402
from nbmemory.store.rows import encode_vector  # noqa: E402


class CachedEmbedder:
    """The real model, but texts embedded before are looked up: "recall without embedding"."""

    def __init__(self, inner, known: dict[str, np.ndarray]):
        self.inner, self.known, self.name = inner, known, inner.name

    @property
    def dims(self):
        return self.inner.dims

    @property
    def identity(self):
        return self.inner.identity

    def encode(self, texts):
        if all(t in self.known for t in texts):
            return np.vstack([self.known[t] for t in texts])
        return self.inner.encode(texts)


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return (statistics.median(ordered) * 1000,
            ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))] * 1000)


def timed(fn, items) -> list[float]:
    out = []
    for item in items:
        start = time.perf_counter()
        fn(item)
        out.append(time.perf_counter() - start)
    return out


def size_of(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def bulk_load(directory: Path, texts: list[str], vectors: np.ndarray, model: str,
              legacy: bool = False) -> None:
    """Write N notes straight into a fresh store, as an import would. ``legacy``: float32
    vectors and no half-precision marker, as a store written before it, which older
    revisions open too (each needs its own copy: opening it with this tree adds the marker)."""
    import pandas as pd

    directory.mkdir(parents=True, mode=0o700)
    store = Store(directory)
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    n = len(texts)
    ids = np.arange(1, n + 1)
    hashes = [content_hash(t) for t in texts]
    priorities = np.array(["high", "medium", "low"])[ids % 3]
    frames = {
        "notes": pd.DataFrame({"id": ids, "uid": [uuid.uuid4().hex for _ in ids], "status": "active",
                               "version": 1, "supersedes": pd.array([None] * n, dtype="Int64"),
                               "created_at": now, "updated_at": now, "text": texts,
                               "content_hash": hashes, "kind": "finding", "priority": priorities,
                               "tags": [[f"t{i % 20}"] for i in ids], "author": "bench",
                               "provenance": "{}"}),
        "note_versions": pd.DataFrame({"note_id": ids, "version": 1, "text": texts,
                                       "content_hash": hashes, "kind": "finding",
                                       "priority": priorities,
                                       "tags": [[f"t{i % 20}"] for i in ids], "author": "bench",
                                       "created_at": now, "provenance": "{}", "seq": ids}),
        "embeddings": pd.DataFrame({"content_hash": hashes, "model": model.rsplit(":", 1)[0],
                                    "vector": [v.astype(np.float32).tobytes() if legacy
                                               else encode_vector(v) for v in vectors]}),
        "events": pd.DataFrame({"seq": ids, "occurred_at": now, "note_id": ids, "type": "created",
                                "actor": "bench", "request_id": None, "data": None}),
    }
    with store.transaction():
        for table, frame in frames.items():
            store.con.register("frame", frame)
            columns = ", ".join(frame.columns)
            store.con.execute(f"INSERT INTO {table} ({columns}) SELECT {columns} FROM frame")
            store.con.unregister("frame")
        store.con.execute("INSERT OR REPLACE INTO meta VALUES ('embedder', ?)", [model])
        if legacy:  # a store that revisions from before half-precision vectors open too
            store.con.execute("DELETE FROM migrations WHERE name = 'm004_half_precision_vectors'")
    store.close()


def bench_chroma(directory: Path, vectors: np.ndarray, queries: np.ndarray, k: int):
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    client = chromadb.PersistentClient(path=str(directory),
                                       settings=ChromaSettings(anonymized_telemetry=False))
    collection = client.create_collection("bench", metadata={"hnsw:space": "cosine"},
                                          embedding_function=None)
    start = time.perf_counter()
    batch = 5000
    for i in range(0, len(vectors), batch):
        collection.add(ids=[str(j) for j in range(i, min(i + batch, len(vectors)))],
                       embeddings=vectors[i:i + batch])
    build = time.perf_counter() - start
    samples = timed(lambda q: collection.query(query_embeddings=[q], n_results=k), queries)
    return build, samples, size_of(directory)


def recall_at_k(approx: list[np.ndarray], exact: list[np.ndarray], k: int) -> float:
    return float(np.mean([len(set(a[:k]) & set(e[:k])) / k for a, e in zip(approx, exact)]))


def load_ext_seconds(runs: int = 5) -> float:
    code = ("import time\nfrom IPython.core.interactiveshell import InteractiveShell\n"
            "ip = InteractiveShell.instance()\nt = time.perf_counter()\n"
            "ip.run_line_magic('load_ext', 'nbmemory')\nprint(time.perf_counter() - t)")
    times = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                  check=True).stdout) for _ in range(runs)]
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--no-chroma", action="store_true")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    k, nq = 10, args.queries

    embedder = SentenceTransformerEmbedder()
    all_texts = corpus.texts(max(sizes) + 2 * nq)
    notes, held_out = all_texts[:max(sizes)], all_texts[max(sizes):]
    query_texts = [" ".join(t.split()[:8]) for t in held_out[:nq]]
    new_notes = held_out[nq:2 * nq]
    print(f"embedding {len(notes)} notes (cached after the first run)...", file=sys.stderr)
    matrix = corpus.vectors(embedder, notes, "notes",
                            progress=lambda d, t: print(f"  {d}/{t}", file=sys.stderr))
    qvecs = embedder.encode(query_texts)
    known = dict(zip(query_texts, qvecs))
    model = f"{embedder.name}:{matrix.shape[1]}"

    rows, quality = [], []
    for n in sizes:
        work = Path(tempfile.mkdtemp(prefix=f"nbm-bench-{n}-"))
        try:
            vectors = matrix[:n]
            bulk_load(work / "store", notes[:n], vectors, model)
            settings = Settings()
            start = time.perf_counter()
            engine = Engine(work / "store", settings=settings, embedder=CachedEmbedder(embedder, known))
            engine.vectors.wait()  # a large graph is built in the background: until it is saved
            build = time.perf_counter() - start
            engine.close()
            start = time.perf_counter()
            engine = Engine(work / "store", settings=settings, embedder=CachedEmbedder(embedder, known))
            reopen = time.perf_counter() - start
            engine.vectors.wait()  # the rows are copied in the background: measure after
            disk = size_of(work / "store")  # the database, the graph, the keyword index, the cards

            embedder.encode(["warm up"])
            engine.recall(query_texts[0])
            engine.embedder.known = {}  # every query is embedded by the model
            with_embed = timed(lambda q: engine.recall(q, k=k), query_texts)
            engine.embedder.known = known
            without_embed = timed(lambda q: engine.recall(q, k=k), query_texts)
            # Dense channel quality: usearch vs exact on the same N vectors (before remember adds more).
            index = engine.vectors
            ann = [index.search(q, k, exact=False)[0] for q in qvecs]
            exact_ids = []
            for q in qvecs:
                sims = vectors @ q
                exact_ids.append(np.argsort(-sims)[:k] + 1)
            ann_time = timed(lambda q: index.search(q, k, exact=False), qvecs)
            remember = timed(lambda t: engine.remember(t, tags="bench"), new_notes)
            rows += [(n, "nbmemory recall (hybrid, incl. query embedding)", *percentiles(with_embed)),
                     (n, "nbmemory recall (hybrid, query vector given)", *percentiles(without_embed)),
                     (n, "nbmemory remember (incl. embedding, commit)", *percentiles(remember))]
            rows.append((n, "usearch HNSW search only", *percentiles(ann_time)))

            engine.close()

            numpy_time = timed(lambda q: np.argpartition(-(vectors @ q), k)[:k], qvecs)
            rows.append((n, "exact numpy search", *percentiles(numpy_time)))

            import duckdb

            con = duckdb.connect(str(work / "store" / "memory.duckdb"), read_only=True)
            words = [max(q.split(), key=len) for q in query_texts]
            like = timed(lambda w: con.execute(
                "SELECT note_id FROM note_versions WHERE text ILIKE ? LIMIT 10",
                [f"%{w}%"]).fetchall(), words)
            con.close()
            rows.append((n, "DuckDB ILIKE keyword search", *percentiles(like)))

            chroma_build = chroma_disk = None
            if not args.no_chroma:
                chroma_build, chroma_q, chroma_disk = bench_chroma(work / "chroma", vectors, qvecs, k)
                rows.append((n, "ChromaDB query (vector given)", *percentiles(chroma_q)))
            quality.append((n, recall_at_k(ann, exact_ids, k), build, reopen, disk,
                            chroma_build, chroma_disk))
        finally:
            shutil.rmtree(work, ignore_errors=True)

    print(f"\n{os.cpu_count()} cores; model {model}; {nq} queries; k={k}\n")
    print("| notes | operation | p50 ms | p95 ms |\n|---:|---|---:|---:|")
    for n, name, p50, p95 in rows:
        print(f"| {n:,} | {name} | {p50:.2f} | {p95:.2f} |")
    print("\n| notes | usearch recall@10 vs exact | nbmemory first open (builds indexes) s "
          "| reopen s | nbmemory disk MB | ChromaDB build s | ChromaDB disk MB |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n, r, build, reopen, disk, cb, cd in quality:
        print(f"| {n:,} | {r:.3f} | {build:.2f} | {reopen:.2f} | {disk / 1e6:.1f} | "
              f"{'-' if cb is None else f'{cb:.2f}'} | {'-' if cd is None else f'{cd / 1e6:.1f}'} |")
    print(f"\n%load_ext nbmemory: {load_ext_seconds() * 1000:.0f} ms (median of 5 fresh processes)")
    print(json.dumps({"rows": rows, "quality": quality}), file=sys.stderr)


if __name__ == "__main__":
    main()
