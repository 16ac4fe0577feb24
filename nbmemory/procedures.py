"""Procedures: the code of cells that worked, kept as a note and put back into a notebook."""

from __future__ import annotations

import re

_FENCE = re.compile(r"```(?:python)?\n(.*?)\n```", re.S)
_OWN_MAGIC = re.compile(r"^\s*%{1,2}(remember|recall|forget|snapshot|memory|load_ext|reload_ext)\b")
MAX_CELLS = 1000


def parse_cells(spec: str) -> list[int]:
    """``3-7`` or ``3,5,8-9`` -> execution counts, in order, without repeats."""
    counts: list[int] = []
    for part in filter(None, (p.strip() for p in (spec or "").split(","))):
        match = re.fullmatch(r"(\d+)(?:\s*-\s*(\d+))?", part)
        if not match:
            raise ValueError(f"Cannot read the cells {spec!r}; use e.g. --cells 3-7 or --cells 3,5,8-9")
        first = int(match.group(1))
        last = int(match.group(2) or first)
        if last < first:
            raise ValueError(f"The range {part!r} runs backwards; write it as {last}-{first}")
        if last - first >= MAX_CELLS:
            raise ValueError(f"The range {part!r} spans {last - first + 1:,} cells; a procedure "
                             f"takes at most {MAX_CELLS:,}")
        counts.extend(range(first, last + 1))
    if not counts:
        raise ValueError("Say which cells: --cells 3-7 (execution counts, as in In [3])")
    return list(dict.fromkeys(counts))


def cell_ranges(counts: list[int]) -> str:
    """``[2, 3, 4, 7]`` -> ``2-4, 7``."""
    runs: list[list[int]] = []
    for count in sorted(set(counts)):
        if runs and count == runs[-1][1] + 1:
            runs[-1][1] = count
        else:
            runs.append([count, count])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def is_bookkeeping(source: str) -> bool:
    """A cell that only runs nbmemory's own magics is not part of a procedure."""
    lines = [line for line in source.splitlines() if line.strip()]
    return bool(lines) and all(_OWN_MAGIC.match(line) for line in lines)


def procedure_text(name: str, sources: list[str], description: str = "") -> str:
    """The note: its name and what it is for first (what a list of notes shows of it), then
    the code."""
    code = "\n\n".join(s.strip("\n") for s in sources)
    said = f"\n{description.strip()}" if description.strip() else ""
    return f"Procedure: {name}{said}\n\n```python\n{code}\n```"


def procedure_code(text: str) -> str | None:
    """The code block of a procedure note, or None if it has none."""
    match = _FENCE.search(text)
    return match.group(1) if match else None
