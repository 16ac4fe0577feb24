"""Recall's own cost, side by side with an earlier version of the code, in one run.

    python bench/bench_recall.py [--sizes 10000,100000] [--queries 100] [--baseline main]
                                 [--rounds 2] [--profile]

For each size N the same real MiniLM vectors as bench_core.py (docstrings of installed
packages, see corpus.py) are bulk-loaded into one store. Then each version of the code
(``--baseline``, a git revision extracted to a temporary directory, and this working
tree) opens that store in a fresh process and times ``Engine.recall`` with the query
vector given (a lookup, no model in the child), so only recall's own work is measured:
keyword scoring, dense search, fusion, the store round trip for the hits and their
stale checks. Versions alternate ``--rounds`` times on the same store so that a change
of load on the machine hits both alike. The child also times each phase (wall-clock
time inside the functions it wraps, summed per recall) and, with ``--profile``, prints
a cProfile of the recalls. Prints Markdown tables and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
os.environ.setdefault("HF_HUB_OFFLINE", "1")

K = 10
# (label, recall keyword arguments): what a user does most, a filter that narrows the
# candidates (exact dense search over them), and a larger k.
CASES = (("hybrid k=10", dict(k=10)),
         ("hybrid k=10, tag filter (1/20)", dict(k=10, tags="t3")),
         ("hybrid k=50", dict(k=50)),
         ("lexical k=10", dict(k=10, mode="lexical")))
PHASED = 2  # the cases whose phases are timed
AFTER_WRITE = "hybrid k=10, just after a remember"
REVOKED = "hybrid k=10, 1 note in 5 revoked"


class LookupEmbedder:
    """The store's model by name, but queries are looked up: recall with the vector given."""

    name, dims, identity, loaded = "all-MiniLM-L6-v2", 384, "all-MiniLM-L6-v2:384", True

    def __init__(self, known: dict[str, np.ndarray]):
        self.known = known

    def encode(self, texts):
        return np.vstack([self.known[t] for t in texts])


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return (statistics.median(ordered) * 1000,
            ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))] * 1000)


# -- the child: one version of the code, one store ---------------------------------------

PHASES = (  # (label, module, attribute path): wrapped if the version has it
    ("keyword scoring", "nbmemory.lexical", "LexicalIndex.score"),
    ("keyword scoring", "nbmemory.lexical", "LexicalIndex.top"),
    ("dense search", "nbmemory.vectors", "VectorIndex.search"),
    ("dense search", "nbmemory.dense_rows", "DenseRows.search"),
    ("dense similarities", "nbmemory.vectors", "VectorIndex.similarities"),
    ("dense similarities", "nbmemory.dense_rows", "DenseRows.similarities"),
    ("rank (all channel work + fusion)", "nbmemory.engine.recall", "rank"),
    ("rank (all channel work + fusion)", "nbmemory.engine.recall", "rank_arrays"),
    ("store: candidates", "nbmemory.store.duckdb", "Store.note_ids"),
    ("store: get_notes", "nbmemory.store.duckdb", "Store.get_notes"),
    ("store: anchors", "nbmemory.store.rows", "Rows.anchors"),
    ("stale checks (with_stale)", "nbmemory.engine.staleness", "Staleness.with_stale"),
)


def _wrap_phases(totals: dict[str, float]) -> None:
    import importlib

    active: set[str] = set()
    for label, module_name, path in PHASES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        owner, _, attr = path.rpartition(".")
        target = getattr(module, owner, None) if owner else module
        if target is None or not hasattr(target, attr):
            continue
        inner = getattr(target, attr)
        if getattr(inner, "_timed", False):
            continue

        def timed(*args, __inner=inner, __label=label, **kwargs):
            if __label in active:  # nested (VectorIndex.search calls DenseRows.search)
                return __inner(*args, **kwargs)
            active.add(__label)
            start = time.perf_counter()
            try:
                return __inner(*args, **kwargs)
            finally:
                active.discard(__label)
                totals[__label] = totals.get(__label, 0.0) + time.perf_counter() - start

        timed._timed = True
        setattr(target, attr, timed)


def revoke_share(directory: Path, every: int) -> None:
    """Revoke one note in ``every`` straight in the store, with its journal events (as
    years of superseded and forgotten notes leave a store; far faster than forget)."""
    from nbmemory.store import Store

    store = Store(directory)
    try:
        with store.transaction():
            store.con.execute(
                "INSERT INTO events (seq, occurred_at, note_id, type, actor, request_id, data) "
                "SELECT (SELECT max(seq) FROM events) + row_number() OVER (ORDER BY id), "
                "now()::TIMESTAMP, id, 'revoked', 'bench', NULL, NULL FROM notes "
                f"WHERE status = 'active' AND id % {every} = 0")
            store.con.execute(f"UPDATE notes SET status = 'revoked' WHERE status = 'active' "
                              f"AND id % {every} = 0")
    finally:
        store.close()


def child(args) -> None:
    sys.path.insert(0, str(Path(args.code).resolve()))
    from nbmemory.config import Settings
    from nbmemory.engine import Engine

    queries = json.loads(Path(args.queries_file).read_text())
    qvecs = np.load(args.vectors_file)
    known = dict(zip(queries, qvecs))
    start = time.perf_counter()
    engine = Engine(Path(args.store), settings=Settings(), embedder=LookupEmbedder(known))
    opened = time.perf_counter() - start
    if engine.vectors is not None:  # recall on the graph, not the exact search meanwhile:
        engine.vectors.wait()  # the first open builds it in the background, then saves it
    out = {"open_s": opened, "cases": {}, "phases": {}}
    for q in queries[:5]:  # warm up
        engine.recall(q, k=K, log=False)
    results = {}
    for label, kwargs in CASES:
        samples = []
        for q in queries:
            t = time.perf_counter()
            hits = engine.recall(q, log=False, **kwargs)
            samples.append(time.perf_counter() - t)
            results.setdefault(label, []).append([h.note.id for h in hits])
        out["cases"][label] = samples
    out["hits"] = results
    totals: dict[str, float] = {}
    _wrap_phases(totals)
    for label, kwargs in CASES[:PHASED]:
        totals.clear()
        for q in queries:
            engine.recall(q, log=False, **kwargs)
        out["phases"][label] = {name: total / len(queries) for name, total in totals.items()}
    if args.profile:
        import cProfile
        import io
        import pstats

        profile = cProfile.Profile()
        profile.enable()
        for q in queries:
            engine.recall(q, k=K, log=False)
        profile.disable()
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(25)
        out["profile"] = text.getvalue()
    engine.close()
    # A recall just after a remember (the keyword index has changed under the query's
    # terms), on a copy of the store: the store itself is shared by every version.
    copy = Path(tempfile.mkdtemp(prefix="nbm-bench-write-")) / "store"
    try:
        shutil.copytree(args.store, copy)
        engine = Engine(copy, settings=Settings(), embedder=LookupEmbedder(known))
        for q in queries[:5]:
            engine.recall(q, k=K, log=False)
        samples = []
        for q in queries:
            engine.remember(q)
            t = time.perf_counter()
            hits = engine.recall(q, k=K, log=False)
            samples.append(time.perf_counter() - t)
            results.setdefault(AFTER_WRITE, []).append([h.note.id for h in hits])
        out["cases"][AFTER_WRITE] = samples
        engine.close()
        revoke_share(copy, 5)
        engine = Engine(copy, settings=Settings(), embedder=LookupEmbedder(known))
        for q in queries[:5]:
            engine.recall(q, k=K, log=False)
        samples = []
        for q in queries:
            t = time.perf_counter()
            hits = engine.recall(q, k=K, log=False)
            samples.append(time.perf_counter() - t)
            results.setdefault(REVOKED, []).append(
                [h.note.id for h in hits] + [-h.note.id for h in hits.previously])
        out["cases"][REVOKED] = samples
        engine.close()
    finally:
        shutil.rmtree(copy.parent, ignore_errors=True)
    print(json.dumps(out))


# -- the parent: stores, versions, tables ------------------------------------------------

def extract(rev: str, into: Path) -> Path:
    """The package as it is at ``rev`` (git archive: the working tree is left alone)."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(HERE.parent), "archive", rev, "nbmemory"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def run_child(code: Path, store: Path, queries_file: Path, vectors_file: Path,
              profile: bool) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), "--child", "--code", str(code),
               "--store", str(store), "--queries-file", str(queries_file),
               "--vectors-file", str(vectors_file)] + (["--profile"] if profile else [])
    env = dict(os.environ, PYTHONPATH=str(code))
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode:
        sys.exit(f"child failed ({code}):\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--baseline", default="main", help="git revision to compare with ('' for none)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--code", help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    parser.add_argument("--queries-file", help=argparse.SUPPRESS)
    parser.add_argument("--vectors-file", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)

    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(HERE.parent))
    import corpus
    from bench_core import bulk_load
    from nbmemory.embed import SentenceTransformerEmbedder

    sizes = [int(s) for s in args.sizes.split(",")]
    embedder = SentenceTransformerEmbedder()
    base = max(max(sizes), 100_000)  # the corpus bench_core.py caches at its default sizes
    all_texts = corpus.texts(base + 2 * args.queries)
    notes, held_out = all_texts[:base], all_texts[base:]
    query_texts = [" ".join(t.split()[:8]) for t in held_out[:args.queries]]
    matrix = corpus.vectors(embedder, notes, "notes")
    model = f"{embedder.name}:{matrix.shape[1]}"

    work = Path(tempfile.mkdtemp(prefix="nbm-bench-recall-"))
    try:
        queries_file, vectors_file = work / "queries.json", work / "qvecs.npy"
        queries_file.write_text(json.dumps(query_texts))
        np.save(vectors_file, embedder.encode(query_texts).astype(np.float32))
        versions = {"this tree": HERE.parent}
        if args.baseline:
            rev = subprocess.run(["git", "-C", str(HERE.parent), "rev-parse", "--short",
                                  args.baseline], check=True, capture_output=True,
                                 text=True).stdout.strip()
            label = f"baseline {args.baseline}" + ("" if rev.startswith(args.baseline) else f" ({rev})")
            versions = {label: extract(args.baseline, work / "base"),
                        **versions}
        loads, results = [], {}
        for n in sizes:
            # One copy of the same store per revision, in a format every revision reads.
            stores = {name: work / f"store-{n}-{i}" for i, name in enumerate(versions)}
            first = next(iter(stores.values()))
            bulk_load(first, notes[:n], matrix[:n], model, legacy=len(versions) > 1)
            for store in list(stores.values())[1:]:
                shutil.copytree(first, store)
            print(f"{n:,} notes: first open builds the indexes...", file=sys.stderr)
            for name, code in versions.items():  # not measured
                run_child(code, stores[name], queries_file, vectors_file, False)
            for r in range(args.rounds):
                loads.append(os.getloadavg()[0])
                for name, code in versions.items():
                    print(f"  round {r + 1}: {name}", file=sys.stderr)
                    got = run_child(code, stores[name], queries_file, vectors_file,
                                    args.profile and r == 0)
                    slot = results.setdefault((n, name), {"cases": {}, "phases": [], "hits": got["hits"],
                                                          "profile": None})
                    for label, samples in got["cases"].items():
                        slot["cases"].setdefault(label, []).extend(samples)
                    slot["phases"].append(got["phases"])
                    slot["profile"] = slot["profile"] or got.get("profile")
            loads.append(os.getloadavg()[0])
            shutil.rmtree(store, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    names = list(versions)
    print(f"\n{os.cpu_count()} cores; model {model}; {args.queries} queries x {args.rounds} rounds "
          f"per version, alternating; 1-min load average during the run "
          f"{min(loads):.2f}-{max(loads):.2f}\n")
    print("Recall with the query vector given, p50 / p95 ms:\n")
    print("| notes | case | " + " | ".join(names) + " |")
    print("|---:|---|" + "---:|" * len(names))
    for n in sizes:
        for label in [c for c, _ in CASES] + [AFTER_WRITE, REVOKED]:
            cells = [("%.2f / %.2f" % percentiles(results[(n, v)]["cases"][label])) for v in names]
            print(f"| {n:,} | {label} | " + " | ".join(cells) + " |")
    print("\nPhases of one recall, mean ms (time inside each; rank holds the channels):\n")
    print("| notes | case | phase | " + " | ".join(names) + " |")
    print("|---:|---|---|" + "---:|" * len(names))
    for n in sizes:
        for case, _ in CASES[:PHASED]:
            runs_of = {v: [run[case] for run in results[(n, v)]["phases"]] for v in names}
            labels = list(dict.fromkeys(p for v in names for run in runs_of[v] for p in run))
            for label in labels:
                cells = []
                for v in names:
                    runs = [run.get(label) for run in runs_of[v]]
                    cells.append("-" if None in runs else "%.2f" % (1000 * statistics.mean(runs)))
                print(f"| {n:,} | {case} | {label} | " + " | ".join(cells) + " |")
    if len(names) == 2:
        print("\nSame hits, in the same order, as the baseline (share of queries; with the notes "
              "shown as previously believed in the revoked case):\n")
        for n in sizes:
            a, b = (results[(n, v)]["hits"] for v in names)
            same = {label: np.mean([x == y for x, y in zip(a[label], b[label])])
                    for label in [c for c, _ in CASES] + [AFTER_WRITE, REVOKED]}
            print(f"- {n:,}: " + ", ".join(f"{label} {share:.2f}" for label, share in same.items()))
    for (n, name), slot in results.items():
        if slot["profile"]:
            print(f"\n### cProfile, {n:,} notes, {name} ({args.queries} hybrid recalls)\n")
            print("```\n" + slot["profile"].strip() + "\n```")


if __name__ == "__main__":
    main()
