"""What ambient recall costs per cell, at 10k notes, against the extension not loaded.

One store holds 10k notes: 600 mention data files that exist (so they are anchored by
their text), 20 mention src files, 300 are gotchas about errors, one is anchored to
``data/orders.csv`` and one to the DataFrame ``orders``. Cells run through
``InteractiveShell.run_cell``: first with the extension never loaded, then, loaded, in
three conditions that take turns cell by cell (so the load of a shared machine drifts
over all of them alike): "unloaded" (its callbacks removed, as ``%unload_ext`` does; the
audit hook, once installed, cannot be removed and stays, recording nothing), ambient
recall off, and on. Cells whose line would be held back as a repeat carry a counter in a
comment, so each run shows the line.

"hook alone" is the time of the post-run hook itself (the timer behind
``%memory ambient status``), without the noise of the rest of ``run_cell``.

    .venv/bin/python bench/bench_ambient.py [--notes 10000] [--model all-MiniLM-L6-v2|hash:64]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from corpus import vectors  # noqa: E402
from nbmemory.embed import make_embedder  # noqa: E402
from nbmemory.engine import content_hash  # noqa: E402
from nbmemory.memory import Memory  # noqa: E402
from nbmemory.models import Anchor, Provenance, utcnow  # noqa: E402

WORDS = ("lock watcher resolver cache retry timeout orders amount cents currency join "
         "schema column index partition shard replica queue worker batch token session "
         "parser lexer planner metric latency budget quota region tenant invoice refund "
         "ledger ingest export import snapshot vector embed rank fusion filter").split()
ERRORS = ["KeyError", "ValueError", "TypeError", "IndexError", "AttributeError",
          "UnicodeDecodeError", "MemoryError", "ConnectionError", "TimeoutError", "OSError"]
GOTCHA = ("KeyError 'amount_eur' after the 2021 migration: the column was renamed from amount; "
          "use amount_cents and divide by 100.")


def texts(n: int, seed: int = 7) -> list[tuple[str, str]]:
    """(kind, text) pairs."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        words = " ".join(rng.choice(WORDS) for _ in range(12))
        if i < 600:
            out.append(("finding", f"topic{i} data/part{i % 100}.csv {words}"))
        elif i < 620:
            out.append(("finding", f"topic{i} src/mod{i}.py {words}"))
        elif i < 920:
            error = rng.choice(ERRORS)
            out.append(("gotcha", f"{error} in step{i} when the {words}"))
        else:
            out.append(("finding", f"topic{i} {words}"))
    out[-1] = ("gotcha", GOTCHA)
    return out


def make_files(root: Path) -> None:
    (root / "data").mkdir(parents=True)
    (root / "src").mkdir()
    (root / ".git").mkdir()  # marks the workspace root
    rows = "\n".join(f"{j},{j * 100},EUR" for j in range(200))
    for i in range(100):
        (root / "data" / f"part{i}.csv").write_text("id,amount,currency\n" + rows + "\n")
    for i in range(600, 620):
        (root / "src" / f"mod{i}.py").write_text(f"def f{i}():\n    return {i}\n")
    (root / "data" / "orders.csv").write_text("id,amount\n" + rows + "\n")
    (root / "data" / "other.csv").write_text("id,amount\n" + rows + "\n")


def fill(store: Path, notes: list[tuple[str, str]], model: str, frame) -> float:
    """Write the notes in one transaction through the store's own methods (the fill is not
    what is measured); anchors come from the engine's checker as in remember."""
    from nbmemory.values import variable_fingerprint

    start = time.perf_counter()
    embedder = make_embedder(model)
    matrix = vectors(embedder, [t for _, t in notes], f"ambient-{len(notes)}")
    orders = Anchor("variable", "orders", {**variable_fingerprint(frame), "scope": ""})
    with Memory.open(store, embedder=embedder) as mem:
        engine = mem._backend.engine
        at = utcnow()
        with engine.store.transaction():
            for n, ((kind, text), vector) in enumerate(zip(notes, matrix)):
                about = {0: ["data/orders.csv"], 1: [orders.to_dict()]}.get(n)
                note_id = engine.store.next_note_id()
                engine.store.insert_note(note_id, uid=uuid.uuid4().hex, at=at)
                seq = engine.store.append_event("created", note_id, actor="bench", at=at)
                digest = content_hash(text)
                engine.store.insert_version(note_id, text=text, content_hash=digest, kind=kind,
                                            priority="medium", tags=(), author="bench",
                                            provenance=Provenance(), at=at, seq=seq)
                anchors = engine.checker.build(text, about, Provenance())
                engine.store.insert_anchors(note_id, list(enumerate(anchors)), seq=seq, at=at)
                engine._put_vector(digest, vector)
    return time.perf_counter() - start


CELLS = [  # (label, source; {i} makes each run a new cell, N)
    ("plain Python, touches nothing", "x = sum(range(100))", 300),
    ("reads a CSV no note is about", "t = pd.read_csv('data/other.csv')", 200),
    ("1000 open() of a file no note is about",
     "for _ in range(1000):\n    open('data/other.csv').close()", 60),
    ("reads an anchored CSV (line shown)", "t = pd.read_csv('data/orders.csv')  # {i}", 100),
    ("reads an anchored CSV again (held back)", "t = pd.read_csv('data/orders.csv')", 100),
    ("uses an anchored DataFrame (line shown)", "orders.shape  # {i}", 100),
    ("raises an error a gotcha describes (shown)", "raise KeyError('amount_eur')  # {i}", 60),
    ("raises an unrelated error (gate quiet)", "[][1]  # {i}", 60),
]


def percentiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def run_alone(shell) -> dict[str, list[float]]:
    """Wall time of run_cell (ms) per cell kind, the extension never loaded."""
    from IPython.utils.capture import capture_output

    out = {}
    for label, source, n in CELLS:
        with capture_output():
            for i in range(5):  # warm up
                shell.run_cell(source.format(i=f"warm{i}"))
            out[label] = []
            for i in range(n):
                start = time.perf_counter()
                shell.run_cell(source.format(i=i))
                out[label].append((time.perf_counter() - start) * 1000)
    return out


def run_interleaved(shell, magics) -> dict[str, dict[str, list[float]]]:
    """Per condition and cell kind, wall times (ms); the conditions take turns cell by cell,
    so the machine's load drifts over all of them alike. "hook" holds the post-run hook's
    own time in the "on" runs."""
    from IPython.utils.capture import capture_output

    ambient = magics._ambient
    callbacks = [("post_run_cell", magics._record_outcome), ("pre_run_cell", ambient.before),
                 ("post_run_cell", ambient.after)]

    def condition(name: str) -> None:
        loaded = name != "unloaded"
        for event, callback in callbacks:
            present = callback in shell.events.callbacks[event]
            if loaded and not present:
                shell.events.register(event, callback)
            elif not loaded and present:
                shell.events.unregister(event, callback)
        magics.ambient = name == "ambient on"

    names = ("unloaded", "ambient off", "ambient on")
    out = {name: {} for name in (*names, "hook")}
    for label, source, n in CELLS:
        for name in names:
            out[name][label] = []
        out["hook"][label] = []
        with capture_output():
            for i in range(-5, n):  # five rounds of warm-up
                for name in names:
                    condition(name)
                    ambient.timings.clear()
                    start = time.perf_counter()
                    shell.run_cell(source.format(i=f"{name[-3:]}{i}"))
                    wall = (time.perf_counter() - start) * 1000
                    if i >= 0:
                        out[name][label].append(wall)
                        if name == "ambient on":
                            out["hook"][label] += list(ambient.timings)
    condition("ambient on")
    return out


AUDIT = """
import os, sys, tempfile, time
sys.path.insert(0, {root!r})
from nbmemory import ambient
scratch = tempfile.TemporaryDirectory()  # removed when this process ends
path = os.path.join(scratch.name, "f.csv")
open(path, "w").close()
if {mode!r} != "none":
    ambient.install_hook()
if {mode!r} == "recording":
    ambient.start_recording()
def loop(event):
    best = float("inf")
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(20_000):
            event()
        best = min(best, time.perf_counter() - start)
    return best / 20_000 * 1e6


print(loop(lambda: sys.audit("open", path, "r", 0)), loop(lambda: open(path).close()))
"""


def audit_cost() -> dict[str, tuple[float, float]]:
    """Microseconds per audit event and per open() in a fresh process: no hook, the hook
    installed but idle (no cell recording), the hook recording."""
    import subprocess

    root = str(Path(__file__).resolve().parents[1])
    out = {}
    for mode in ("none", "idle", "recording"):
        code = AUDIT.format(root=root, mode=mode)
        text = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=True).stdout
        out[mode] = tuple(float(x) for x in text.split())
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    args = parser.parse_args()

    import pandas as pd
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        make_files(root)
        os.chdir(root)
        frame = pd.read_csv("data/orders.csv")
        fill_s = fill(root / ".nbmemory", texts(args.notes), args.model, frame)

        shell = InteractiveShell.instance(history_length=0)
        shell.run_cell("import pandas as pd\norders = pd.read_csv('data/orders.csv')")
        never = run_alone(shell)
        shell.run_line_magic("load_ext", "nbmemory")
        shell.run_line_magic("config", f"NbMemory.store = {str(root / '.nbmemory')!r}")
        shell.run_line_magic("config", f"NbMemory.model = {args.model!r}")
        magics = shell.magics_manager.registry["NbMemory"]
        with capture_output():
            shell.run_cell("orders.shape")  # opens the store, fetches the targets
            shell.run_cell("raise KeyError('amount_eur')")  # loads the model
        results = run_interleaved(shell, magics)
        counts = dict(magics._ambient.counts)
        targets = magics._ambient.targets
        magics.close()
        os.chdir(tmp)
        InteractiveShell.clear_instance()
    os.chdir(Path(__file__).parent)

    print(f"nbmemory ambient-recall benchmark: {args.notes:,} notes ({len(targets.paths)} "
          f"anchored paths, {len(targets.terms)} file names in note text, "
          f"{len(targets.variables)} anchored variable, {targets.gotchas} gotchas), model "
          f"{args.model}, {os.cpu_count()} cores, Python {sys.version.split()[0]}")
    print(f"filling the store: {fill_s:.1f} s")
    print()
    conditions = ["unloaded", "ambient off", "ambient on", "hook"]
    print(f"{'ms per cell: p50 / p95':<46}{'never loaded':>16}"
          + "".join(f"{c if c != 'hook' else 'hook alone':>16}" for c in conditions)
          + f"{'on - unloaded':>15}")
    for label, _, n in CELLS:
        row = [percentiles(never[label])] + [percentiles(results[c][label]) for c in conditions]
        delta = row[3][0] - row[1][0]
        print(f"{label + f' (n={n})':<46}" + "".join(f"{a:>8.2f} /{b:>6.2f}" for a, b in row)
              + f"{delta:>+15.2f}")
    audit = audit_cost()
    print()
    print("audit hook in a fresh process (us, best of 7 x 20k):"
          f"{'no hook':>10}{'idle':>10}{'recording':>11}")
    for i, what in enumerate(("per audit event (sys.audit)", "per open().close()")):
        print(f"  {what:<47}" + "".join(f"{audit[m][i]:>10.3f}" for m in ("none", "idle"))
              + f"{audit['recording'][i]:>11.3f}")
    print("ambient on, all runs: " + ", ".join(f"{v} {k}" for k, v in counts.items())
          + f"; load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
