"""The owner service, measured: throughput, latency, cold start and kernel memory.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/bench_service.py

Everything runs in one go on a fresh temporary store with the real model (embedding
included in every remember). Writers and clients are separate processes, as kernels are.
Prints one table; the machine's load average is printed too, since the cores are shared.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from nbmemory import Memory
from nbmemory.service import owner_info, stop

WRITER = textwrap.dedent("""
    import json, os, sys, time
    from nbmemory import Memory
    store, w, n, go = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    mem = Memory.open(store, mode="service")
    mem.get(1)  # connected; the model is already loaded in the owner
    while not os.path.exists(go):
        time.sleep(0.001)
    start = time.time()
    for i in range(n):
        mem.remember(TEXT.format(w=w, i=i))
    print(json.dumps({"start": start, "end": time.time()}))
""")
WRITER_TEXT = ("writer {w} found that column c{i} of table t{w}_{i} is stored in cents before "
               "release {i} and in euros after it; convert before summing")

FIRST_RECALL = textwrap.dedent("""
    # A new kernel: IPython is already up; time %load_ext, %config and the first %recall.
    import json, sys, time
    from IPython.core.interactiveshell import InteractiveShell
    ip = InteractiveShell.instance(history_length=0)
    t0 = time.perf_counter()
    ip.run_line_magic("load_ext", "nbmemory")
    ip.run_line_magic("config", f"NbMemory.store = {sys.argv[1]!r}")
    hits = ip.run_line_magic("recall", "what unit is the order total stored in")
    print(json.dumps({"first_recall_s": time.perf_counter() - t0, "hits": len(hits)}))
""")

KERNEL_RSS = textwrap.dedent("""
    import json, sys, time
    def rss_mb():
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    from IPython.core.interactiveshell import InteractiveShell
    ip = InteractiveShell.instance(history_length=0)
    before = rss_mb()
    t = time.perf_counter()
    ip.run_line_magic("load_ext", "nbmemory")
    load_ext = time.perf_counter() - t
    ip.run_line_magic("config", f"NbMemory.store = {sys.argv[1]!r}")
    ip.run_line_magic("config", f"NbMemory.mode = {sys.argv[2]!r}")
    for i in range(20):
        ip.run_line_magic("remember", f"kernel note {i}: the watcher thread races acquire_lock")
        ip.run_line_magic("recall", f"who races acquire_lock {i}")
    heavy = [m for m in ("torch", "sentence_transformers", "duckdb") if m in sys.modules]
    print(json.dumps({"load_ext_s": load_ext, "growth_mb": rss_mb() - before, "heavy": heavy}))
""")


def python(code: str, *args, timeout: float = 600) -> dict:
    result = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True,
                            text=True, timeout=timeout,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if result.returncode != 0:
        raise RuntimeError(result.stderr)
    return json.loads(result.stdout.strip().splitlines()[-1])


def throughput(store: Path, writers: int, notes: int) -> float:
    go = store.parent / f"go-{writers}"
    code = f"TEXT = {WRITER_TEXT!r}\n" + WRITER
    procs = [subprocess.Popen([sys.executable, "-c", code, str(store), str(w), str(notes),
                               str(go)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "HF_HUB_OFFLINE": "1"})
             for w in range(writers)]
    time.sleep(3)  # let every writer connect
    go.touch()
    runs = []
    for proc in procs:
        out, _ = proc.communicate(timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"writer failed with status {proc.returncode}")
        runs.append(json.loads(out))
    elapsed = max(r["end"] for r in runs) - min(r["start"] for r in runs)
    return writers * notes / elapsed


def model_alone(batch: int = 4, seconds: float = 3.0) -> float:
    """Sentences/s of the model itself in batches of ``batch`` (one thread, as the owner)."""
    from nbmemory.embed import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder()
    embedder.encode(["warm up"])
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        embedder.encode([WRITER_TEXT.format(w=i, i=done) for i in range(batch)])
        done += batch
    return done / (time.perf_counter() - start)


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return (statistics.median(ordered) * 1000,
            ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] * 1000)


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes-1", type=int, default=200, help="remembers by the lone writer")
    parser.add_argument("--notes-4", type=int, default=150, help="remembers by each of 4 writers")
    parser.add_argument("--samples", type=int, default=200, help="latency samples")
    parser.add_argument("--repeats", type=int, default=3, help="cold starts of each kind")
    args = parser.parse_args()
    rows: list[tuple[str, str, str]] = []
    load_before = load()

    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store"
        with Memory.open(store, mode="service") as mem:  # starts the owner, loads the model
            mem.remember("orders.amount is stored in cents before 2021")
            mem.recall("warm up")

            alone = model_alone()
            one = throughput(store, 1, args.notes_1)
            before = owner_info(store)
            four = throughput(store, 4, args.notes_4)
            after = owner_info(store)
            batches = after["remember_batches"] - before["remember_batches"]
            batch = (after["remembered"] - before["remembered"]) / max(1, batches)
            busy = (after["remember_busy_s"] - before["remember_busy_s"]) / max(1, batches)
            rows += [("embedding alone, one thread, batches of 4", f"{alone:.0f} /s", ""),
                     ("remember throughput, 1 writer process", f"{one:.0f} /s", ""),
                     ("remember throughput, 4 writer processes", f"{four:.0f} /s", ">= 200 /s"),
                     ("  mean remembers per batch (4 writers)", f"{batch:.1f}", ""),
                     ("  owner time per batch (embed + write + index)", f"{busy * 1000:.1f} ms",
                      "")]

            remember, recall = [], []
            for i in range(args.samples):
                t = time.perf_counter()
                mem.remember(f"latency sample {i}: the watcher thread races acquire_lock "
                             f"in module m{i}")
                remember.append(time.perf_counter() - t)
                t = time.perf_counter()
                mem.recall(f"which thread races acquire_lock in m{i}?")
                recall.append(time.perf_counter() - t)
            notes = mem.notes(limit=1).total
            rows += [(f"remember latency p50 / p95 ({notes} notes)",
                      "{:.1f} / {:.1f} ms".format(*percentiles(remember)), ""),
                     (f"recall latency p50 / p95 ({notes} notes)",
                      "{:.1f} / {:.1f} ms".format(*percentiles(recall)), "")]

        warm = [python(FIRST_RECALL, store)["first_recall_s"] for _ in range(args.repeats)]
        rows.append(("first %recall in a new IPython kernel, warm owner",
                     f"{statistics.median(warm):.2f} s", "<= 0.5 s"))
        cold = []
        for _ in range(args.repeats):
            stop(store)
            cold.append(python(FIRST_RECALL, store)["first_recall_s"])
        rows.append(("first %recall in a new IPython kernel, no owner",
                     f"{statistics.median(cold):.2f} s", ""))

        kernel = python(KERNEL_RSS, store, "service")
        rows += [("%load_ext nbmemory", f"{kernel['load_ext_s'] * 1000:.0f} ms", "<= 300 ms"),
                 ("kernel RSS growth, service (20 remember+recall)",
                  f"{kernel['growth_mb']:.0f} MB", "<= 60 MB"),
                 ("  heavy modules in the kernel", ", ".join(kernel["heavy"]) or "none", "")]
        stop(store)
        local = python(KERNEL_RSS, store, "local")
        rows.append(("kernel RSS growth, local mode (for contrast)",
                     f"{local['growth_mb']:.0f} MB", ""))

    width = max(len(r[0]) for r in rows)
    words = len(WRITER_TEXT.format(w=0, i=0).split())
    print(f"nbmemory service benchmark: model all-MiniLM-L6-v2, notes of {words} words "
          f"(eval/notes.jsonl: 21 on average), {os.cpu_count()} cores, "
          f"load average {load_before} before, {load()} after")
    print(f"{'':{width}}  {'measured':>16}  target")
    for name, value, target in rows:
        print(f"{name:{width}}  {value:>16}  {target}")


if __name__ == "__main__":
    main()
