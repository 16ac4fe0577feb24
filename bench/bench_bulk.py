"""Bulk writes, measured against the model's own encode rate in the same run.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/bench_bulk.py [--notes N]

The notes are the analyst notes of eval/notes.jsonl, repeated with a counter when N is
larger, in two lengths: as written (about 21 words) and cut to their first 12 words (short
notes). For each, every row writes all N into a fresh store with the real model and prints
notes per second:

- the model alone, as the bulk path calls it (chunks of the engine's BULK_CHUNK through the
  thread tuner) and as one call on one thread (the embedder's interactive setting); once it
  runs on ONNX Runtime, also on torch (how it ran before, nbmemory/onnx_model.py);
- ``Engine.remember_many`` in this process, and ``Memory.remember_many`` through the owner;
- ``Memory.forget`` and ``Memory.reinstate`` of all N in one call, through the owner;
- ``Memory.remember`` one note at a time through the owner (what a loop in a script does);
- ``Memory.import_jsonl`` of an export into an empty store (vectors travel with the file) and
  into a store of another model's notes (every text embedded again).

The machine's load average is printed too: the two cores are shared.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from nbmemory import Memory  # noqa: E402
from nbmemory.embed import SentenceTransformerEmbedder, ThreadTuner  # noqa: E402
from nbmemory.engine import BULK_CHUNK  # noqa: E402
from nbmemory.service import stop  # noqa: E402


def load_notes(n: int, words: int | None = None) -> list[dict]:
    with open(ROOT / "eval" / "notes.jsonl") as lines:
        base = [json.loads(line) for line in lines if line.strip()]
    out = []
    for i in range(n):
        note = base[i % len(base)]
        text = " ".join(note["text"].split()[:words]) if words else note["text"]
        text = text if i < len(base) else f"{text} (copy {i // len(base)})"
        out.append({"text": text, "kind": note["kind"], "priority": note["priority"],
                    "tags": note["tags"]})
    return out


def rate(count: int, seconds: float) -> str:
    return f"{count / seconds:7.0f}"


def timed(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--notes", type=int, default=1000)
    args = parser.parse_args()
    print(f"all-MiniLM-L6-v2 on {os.cpu_count()} cores; load average "
          f"{os.getloadavg()[0]:.2f} at start")
    for words in (None, 12):
        measure(load_notes(args.notes, words))
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end")


def measure(notes: list[dict]) -> None:
    texts = [n["text"] for n in notes]
    words = sum(len(t.split()) for t in texts) / len(texts)
    print(f"\n{len(notes)} notes of {words:.1f} words on average")
    rows = []
    inner = SentenceTransformerEmbedder()
    inner.encode(["warm up"])  # loads (or exports) the model outside the timings
    tuned = ThreadTuner(inner)
    # The tuner learns which thread count is faster for bulk chunks: let it try both.
    for _ in range(2):
        tuned.encode(texts[:BULK_CHUNK])
    seconds = timed(lambda: [tuned.encode(texts[i:i + BULK_CHUNK])
                             for i in range(0, len(texts), BULK_CHUNK)])
    rows.append(("model alone, bulk chunks (the tuned thread count)", len(texts), seconds))
    seconds = timed(lambda: inner.encode(texts))
    rows.append(("model alone, one call on one thread", len(texts), seconds))
    if inner.engine == "onnx":  # the same model on torch, as it ran before the export
        on_torch = ThreadTuner(SentenceTransformerEmbedder(runtime="torch"))
        for _ in range(2):
            on_torch.encode(texts[:BULK_CHUNK])
        seconds = timed(lambda: [on_torch.encode(texts[i:i + BULK_CHUNK])
                                 for i in range(0, len(texts), BULK_CHUNK)])
        rows.append(("model alone on torch, bulk chunks (the tuned thread count)",
                     len(texts), seconds))

    with tempfile.TemporaryDirectory(prefix="nbmemory-bench-bulk-") as tmp:
        tmp = Path(tmp)
        with Memory.open(tmp / "local", embedder=tuned, mode="local") as mem:
            engine = mem._backend.engine
            seconds = timed(lambda: engine.remember_many(notes))
        rows.append(("Engine.remember_many, in this process", len(notes), seconds))

        service = tmp / "service"
        try:
            with Memory.open(service, mode="service") as mem:
                mem.remember("warm up the owner's model")
                # ... and its thread record for bulk chunks (one chunk on each thread count)
                mem.remember_many([dict(n, text=f"warm-up: {n['text']}") for n in notes[:2 * BULK_CHUNK]])
                written = []
                seconds = timed(lambda: written.extend(mem.remember_many(notes)))
                rows.append(("Memory.remember_many, through the owner", len(notes), seconds))
                ids = [note.id for note in written]
                seconds = timed(lambda: mem.forget(ids))
                rows.append(("Memory.forget of all of them in one call", len(ids), seconds))
                seconds = timed(lambda: mem.reinstate(ids))
                rows.append(("Memory.reinstate of all of them in one call", len(ids), seconds))
                few = notes[:300]
                seconds = timed(lambda: [mem.remember(**n) for n in few])
                rows.append(("Memory.remember one at a time, through the owner", len(few), seconds))
                mem.export_jsonl(tmp / "all.jsonl")
        finally:
            stop(service)

        restore = tmp / "restore"
        try:
            with Memory.open(restore, mode="service") as mem:
                mem.status()
                seconds = timed(lambda: mem.import_jsonl(tmp / "all.jsonl"))
                count = mem.status()["notes"]
            rows.append(("Memory.import_jsonl into an empty store (vectors in the file)",
                         count, seconds))
        finally:
            stop(restore)

        hashed, other = tmp / "hashed", tmp / "other"
        with Memory.open(hashed, model="hash:64", mode="local") as mem:
            mem._backend.engine.remember_many(notes)
            mem.export_jsonl(tmp / "hashed.jsonl")
        try:
            with Memory.open(other, mode="service") as mem:
                mem.remember("a note that was there before, so the import merges and embeds")
                seconds = timed(lambda: mem.import_jsonl(tmp / "hashed.jsonl"))
                count = mem.status()["notes"] - 1
            rows.append(("Memory.import_jsonl, every text embedded again", count, seconds))
        finally:
            stop(other)

    width = max(len(name) for name, _, _ in rows)
    print(f"{'':<{width}}  notes   seconds  notes/s")
    for name, count, seconds in rows:
        print(f"{name:<{width}}  {count:5d}  {seconds:8.2f}  {rate(count, seconds)}")


if __name__ == "__main__":
    main()
