"""What anchors and stale checks cost: recall over 10k notes, 2k of them anchored.

Two stores hold the same 10k note texts. In one, 2k notes mention files that exist in
its workspace (so they are anchored: 1,900 source files and 100 CSV files that DuckDB
fingerprints); in the other the same paths do not exist, so nothing is anchored. Every
query targets an anchored note, so each recall checks the anchors of its hits.

The embedder is the hash embedder (``hash:64``): the model is irrelevant to what is
measured here and its cost would be the same in both stores.

    .venv/bin/python bench/bench_stale.py [--notes 10000] [--anchored 2000] [--queries 300]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nbmemory.embed import HashEmbedder  # noqa: E402
from nbmemory.engine import content_hash  # noqa: E402
from nbmemory.memory import Memory  # noqa: E402
from nbmemory.models import Provenance, utcnow  # noqa: E402
from nbmemory.provenance import capture  # noqa: E402

WORDS = ("lock watcher resolver cache retry timeout orders amount cents currency join "
         "schema column index partition shard replica queue worker batch token session "
         "parser lexer planner metric latency budget quota region tenant invoice refund "
         "ledger ingest export import snapshot vector embed rank fusion filter").split()


def texts(n: int, anchored: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        words = " ".join(rng.choice(WORDS) for _ in range(12))
        if i < anchored:
            path = f"data/part{i}.csv" if i % 20 == 0 else f"src/mod{i}.py"
            out.append(f"topic{i} {path} {words}")
        else:
            out.append(f"topic{i} {words}")
    return out


def make_files(root: Path, anchored: int) -> None:
    (root / "src").mkdir(parents=True)
    (root / "data").mkdir()
    for i in range(anchored):
        if i % 20 == 0:
            rows = "\n".join(f"{j},{j * 100},EUR" for j in range(200))
            (root / "data" / f"part{i}.csv").write_text("id,amount,currency\n" + rows + "\n")
        else:
            (root / "src" / f"mod{i}.py").write_text(f"def f{i}():\n    return {i}\n" * 20)


def fill(store: Path, notes: list[str]) -> float:
    """Write the notes in one transaction through the store's own methods (remember one
    by one costs 15-45 ms each on a loaded 2-core machine, and the fill is not what is
    measured); anchors come from the engine's checker exactly as in remember. The
    indexes are rebuilt from DuckDB when the store is opened again."""
    start = time.perf_counter()
    with Memory.open(store, embedder=HashEmbedder()) as mem:
        engine = mem._backend.engine
        vectors = engine.embedder.encode(notes)
        at = utcnow()
        with engine.store.transaction():
            for text, vector in zip(notes, vectors):
                note_id = engine.store.next_note_id()
                engine.store.insert_note(note_id, uid=uuid.uuid4().hex, at=at)
                seq = engine.store.append_event("created", note_id, actor="bench", at=at)
                digest = content_hash(text)
                engine.store.insert_version(note_id, text=text, content_hash=digest,
                                            kind="finding", priority="medium", tags=(),
                                            author="bench", provenance=Provenance(), at=at, seq=seq)
                anchors = engine.checker.build(text, None, Provenance())
                engine.store.insert_anchors(note_id, list(enumerate(anchors)), seq=seq, at=at)
                engine._put_vector(digest, vector)
    return time.perf_counter() - start


def time_calls(fn, args_list) -> list[float]:
    out = []
    for args in args_list:
        start = time.perf_counter()
        fn(*args)
        out.append((time.perf_counter() - start) * 1000)
    return out


def row(name: str, values: list[float]) -> tuple[str, float, float, float]:
    values = sorted(values)
    p95 = values[min(len(values) - 1, int(0.95 * len(values)))]
    return name, statistics.median(values), statistics.mean(values), p95


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--anchored", type=int, default=2_000)
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()
    notes = texts(args.notes, args.anchored)
    rng = random.Random(1)
    queries = [f"topic{i} " + " ".join(notes[i].split()[2:5])
               for i in rng.sample(range(args.anchored), min(args.queries, args.anchored))]

    with tempfile.TemporaryDirectory() as tmp:
        plain_ws, anchored_ws = Path(tmp) / "plain", Path(tmp) / "anchored"
        plain_ws.mkdir()
        make_files(anchored_ws, args.anchored)
        fill_plain = fill(plain_ws / ".nbmemory", notes)
        fill_anchored = fill(anchored_ws / ".nbmemory", notes)

        results, extra = [], []
        mems = {"plain": Memory.open(plain_ws / ".nbmemory", embedder=HashEmbedder()),
                "anchored": Memory.open(anchored_ws / ".nbmemory", embedder=HashEmbedder())}
        try:
            count = mems["anchored"]._backend.engine.store.con.execute(
                "SELECT count(DISTINCT note_id) FROM anchors").fetchone()[0]
            for mem in mems.values():  # warm both (first recall loads lazily-built state)
                time_calls(lambda q: mem.recall(q, k=5), [(q,) for q in queries[:20]])
            # Interleave the two stores so machine load hits both alike.
            timings = {"plain": [], "anchored": []}
            for q in queries:
                for name, mem in mems.items():
                    timings[name] += time_calls(lambda q: mem.recall(q, k=5), [(q,)])
            hit_anchored = sum(1 for q in queries[:50]
                               for h in mems["anchored"].recall(q, k=5) if h.note.anchors)
            results.append(row("recall k=5, no anchors", timings["plain"]))
            results.append(row(f"recall k=5, {args.anchored:,} anchored", timings["anchored"]))
            anchored = mems["anchored"]
            results.append(row("recall --fresh (checks all anchored)",
                               time_calls(lambda q: anchored.recall(q, k=5, stale=False),
                                          [(q,) for q in queries[:50]])))
            results.append(row("%memory stale (all anchored)",
                               time_calls(lambda: anchored.stale(limit=100), [()] * 20)))
            # 100 files change: the first check after a change hashes and re-reads them.
            changed = [anchored_ws / "src" / f"mod{i}.py" for i in range(1, 101)]
            changed = [path for path in changed if path.exists()]
            for path in changed:
                path.write_text(path.read_text() + "# changed\n")
            first = time_calls(lambda: anchored.stale(limit=100), [()])
            again = time_calls(lambda: anchored.stale(limit=100), [()] * 5)
            stale_total = anchored.stale(limit=1).total
            results.append(row(f"%memory stale, first after {len(changed)} files changed", first))
            results.append(row("%memory stale, again (cached)", again))
            results.append(row("remember, text naming no file",
                               time_calls(lambda i: anchored.remember(f"plain note {i} lock"),
                                          [(i,) for i in range(50)])))
            results.append(row("remember, text naming a CSV (DuckDB fingerprint)",
                               time_calls(lambda i: anchored.remember(f"note {i} data/part0.csv"),
                                          [(i,) for i in range(50)])))
        finally:
            for mem in mems.values():
                mem.close()
        subprocess.run(["git", "init", "-q", str(anchored_ws)], check=True)
        subprocess.run(["git", "-C", str(anchored_ws), "add", "-A"], check=True)
        results.append(row(f"provenance capture (git repo, {args.anchored:,} files)",
                           time_calls(lambda: capture(None, cwd=anchored_ws), [()] * 30)))

    print(f"nbmemory stale-check benchmark: {args.notes:,} notes, {count:,} anchored, "
          f"{len(queries)} queries, hash:64 embedder, {os.cpu_count()} cores")
    print(f"filling the stores: {fill_plain:.1f} s without anchors, {fill_anchored:.1f} s with")
    print(f"{hit_anchored} of the first 50 queries' hits were anchored notes; "
          f"{stale_total} notes stale after the change")
    print()
    print(f"{'operation':<52} {'median ms':>10} {'mean ms':>9} {'p95 ms':>8}")
    for name, median, mean, p95 in results:
        print(f"{name:<52} {median:>10.2f} {mean:>9.2f} {p95:>8.2f}")
    base, anchored_row = results[0], results[1]
    overhead = 100 * (anchored_row[1] / base[1] - 1)
    verdict = "OK" if overhead <= 20 else "OVER BUDGET"
    print()
    print(f"recall overhead of anchors (median): {overhead:+.1f}% (budget 20%): {verdict}")


if __name__ == "__main__":
    main()
