"""A team store on PostgreSQL beside the local DuckDB store, in one run.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/bench_team.py [--notes 10000]

Starts a PostgreSQL 15 server in a temporary directory (as tests/postgres.py does; as root
it runs as the postgres user), fills a local store and a team store with the same notes
through ``remember_many`` (real MiniLM vectors of real docstrings, bench/corpus.py), then
prints one table: recall latency with and without the query embedding, remember latency
(embedding included), how long a colleague's note takes to reach another member's indexes,
and how long a member who was away takes to catch up on 1,000 notes (reopening, and live
through LISTEN/NOTIFY). The machine's load average is printed too: the cores are shared.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))

import corpus  # noqa: E402
from bench_core import CachedEmbedder, percentiles  # noqa: E402
from postgres import Server  # noqa: E402

from nbmemory.embed import SentenceTransformerEmbedder  # noqa: E402
from nbmemory.engine import Engine  # noqa: E402

QUERIES = 200
AWAY = 1_000


def fill(engine: Engine, texts: list[str]) -> float:
    start = time.perf_counter()
    for i in range(0, len(texts), 500):
        engine.remember_many([{"text": t} for t in texts[i:i + 500]])
    return time.perf_counter() - start


def latencies(fn, items) -> tuple[float, float]:
    out = []
    for item in items:
        start = time.perf_counter()
        fn(item)
        out.append(time.perf_counter() - start)
    return percentiles(out)


def team_engine(url: str, cache: Path, embedder) -> Engine:
    os.environ["NBMEMORY_CACHE_DIR"] = str(cache)
    from nbmemory.config import locate_store

    return Engine(locate_store(url).path, embedder=embedder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=10_000)
    args = parser.parse_args()
    n = args.notes
    model = SentenceTransformerEmbedder()
    texts = corpus.texts(n + 2 * AWAY + QUERIES)
    notes, away, queries = texts[:n], texts[n:n + 2 * AWAY], texts[n + 2 * AWAY:]
    queries = [q[: len(q) // 2] for q in queries]  # half a paragraph: a partial match
    known = dict(zip(texts, corpus.vectors(model, texts, "team")))
    known.update(zip(queries, model.encode(queries)))
    cached = CachedEmbedder(model, known)

    # Killed (timeout, kill), it still stops its PostgreSQL and removes its files.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    server = Server()
    base = Path(tempfile.mkdtemp(prefix="nbmemory-bench-team-"))
    rows = []
    try:
        url = server.url(server.new_database())
        local = Engine(base / "local", embedder=cached)
        team = team_engine(url, base / "cache-ada", cached)
        fills = {name: fill(e, notes) for name, e in (("local", local), ("team", team))}
        for name, engine in (("local", local), ("team", team)):
            engine.embedder = cached
            with_vec = latencies(lambda q: engine.recall(q, k=10, log=False), queries)
            engine.embedder = model
            with_model = latencies(lambda q: engine.recall(q, k=10, log=False), queries[:50])
            remember = latencies(lambda i: engine.remember(f"bench note {i}: {queries[i]}"),
                                 range(50))
            rows.append((name, fills[name], with_vec, with_model, remember))

        # A colleague's note reaching another member's indexes (woken by NOTIFY).
        bo = team_engine(url, base / "cache-bo", cached)
        team.embedder = cached
        reach = []
        for i in range(30):
            seen = len(bo.lexical)
            team.remember(f"colleague note {i}: {queries[i]}")
            start = time.perf_counter()  # acknowledged
            while True:
                with bo.lock:
                    if len(bo.lexical) > seen:
                        break
                time.sleep(0.0005)
            reach.append(time.perf_counter() - start)

        # A member away while 1,000 notes are written: reopening, then live.
        bo.close()
        fill(team, away[:AWAY])
        start = time.perf_counter()
        bo = team_engine(url, base / "cache-bo", cached)
        reopen = time.perf_counter() - start
        target = len(bo.lexical) + AWAY
        start = time.perf_counter()
        fill(team, away[AWAY:])
        while True:
            with bo.lock:
                if len(bo.lexical) >= target:
                    break
            time.sleep(0.001)
        live = time.perf_counter() - start
        for engine in (local, team, bo):
            engine.close()
    finally:
        server.close()
        shutil.rmtree(base, ignore_errors=True)

    print(f"\n{n:,} notes; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores\n")
    print("| store | fill (remember_many) | recall p50/p95, vector given | recall p50/p95, "
          "with embedding | remember p50/p95 |")
    print("|---|---:|---:|---:|---:|")
    for name, fill_s, vec, emb, rem in rows:
        print(f"| {name} | {fill_s:.1f} s ({n / fill_s:,.0f}/s) | {vec[0]:.1f} / {vec[1]:.1f} ms "
              f"| {emb[0]:.1f} / {emb[1]:.1f} ms | {rem[0]:.1f} / {rem[1]:.1f} ms |")
    p50, p95 = percentiles(reach)
    print(f"\ncolleague's note in another member's indexes: p50 {p50:.1f} ms, p95 {p95:.1f} ms "
          f"(after remember returned, NOTIFY-woken)")
    print(f"member away while {AWAY:,} notes were written: reopen {reopen:.2f} s (caught up)")
    print(f"member open while {AWAY:,} more were written: indexes caught up {live:.2f} s after "
          f"the writes began (the writes themselves took part of it)")


if __name__ == "__main__":
    main()
