"""A corpus of real technical sentences for benchmarks: docstrings of installed packages.

Paragraphs of 40-400 characters are taken from the docstrings of every module, class
and function under site-packages and the standard library (parsed with ``ast``, never
imported), deduplicated and shuffled with a fixed seed. Vectors are cached under
``bench/.cache`` so later runs skip the embedding.
"""

from __future__ import annotations

import ast
import random
import re
import sys
import sysconfig
from pathlib import Path

import numpy as np

CACHE = Path(__file__).parent / ".cache"
_SPACE = re.compile(r"\s+")


def _docstrings(path: Path):
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="ignore"))
    except (SyntaxError, ValueError, RecursionError):
        return
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=True)
            if doc:
                yield doc


def texts(n: int, seed: int = 7) -> list[str]:
    """``n`` distinct paragraphs (raises if the machine has fewer)."""
    cache = CACHE / f"corpus-{n}-{seed}.txt"
    if cache.exists():
        return cache.read_text(encoding="utf-8").split("\n")
    roots = {Path(sysconfig.get_paths()["stdlib"]), Path(sysconfig.get_paths()["purelib"])}
    seen: set[str] = set()
    for root in sorted(roots):
        for path in sorted(root.rglob("*.py")):
            for doc in _docstrings(path):
                for para in doc.split("\n\n"):
                    para = _SPACE.sub(" ", para).strip()
                    if 40 <= len(para) <= 400 and not para.startswith((">>>", "..", "-", "=")):
                        seen.add(para)
            if len(seen) > n * 1.3:
                break
    out = sorted(seen)
    if len(out) < n:
        sys.exit(f"Only {len(out)} paragraphs found; cannot make a corpus of {n}.")
    random.Random(seed).shuffle(out)
    CACHE.mkdir(exist_ok=True)
    cache.write_text("\n".join(out[:n]), encoding="utf-8")
    return out[:n]


def vectors(embedder, items: list[str], name: str, progress=None) -> np.ndarray:
    """Embeddings of ``items``, cached by name, model and count."""
    cache = CACHE / f"vectors-{name}-{embedder.name}-{len(items)}.npy"
    if cache.exists():
        return np.load(cache)
    CACHE.mkdir(exist_ok=True)
    out = []
    chunk = 10240  # saved as it goes: embedding 100k texts takes minutes
    for start in range(0, len(items), chunk):
        part = CACHE / f"{cache.stem}.part{start}.npy"
        if part.exists():
            out.append(np.load(part))
        else:
            out.append(embedder.encode(items[start:start + chunk]).astype(np.float32))
            np.save(part, out[-1])
        if progress:
            progress(min(start + chunk, len(items)), len(items))
    matrix = np.vstack(out)
    np.save(cache, matrix)
    for part in CACHE.glob(f"{cache.stem}.part*.npy"):
        part.unlink()
    return matrix
