"""Where the store lives and the settings the engine is built with.

Only composition roots (magics, server extension, CLI, MCP) call :func:`locate_store`
and build :class:`Settings`; everything below receives them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

STORE_DIRNAME = ".nbmemory"
DEFAULT_MODEL = "all-MiniLM-L6-v2"


@dataclass(frozen=True)
class StoreLocation:
    path: Path
    reason: str

    def __str__(self) -> str:
        return f"{self.path} ({self.reason})"


def find_git_root(start: Path) -> Path | None:
    for directory in (start, *start.parents):
        if (directory / ".git").exists():
            return directory
    return None


def locate_store(explicit: str | os.PathLike | None = None, *, cwd: Path | None = None,
                 environ: dict | None = None) -> StoreLocation:
    """Explicit path > ``NBMEMORY_HOME`` > nearest ``.nbmemory/`` above cwd > git root > cwd."""
    environ = os.environ if environ is None else environ
    cwd = (cwd or Path.cwd()).resolve()
    if explicit:
        return StoreLocation(Path(explicit).expanduser().resolve(), "given explicitly")
    if environ.get("NBMEMORY_HOME"):
        return StoreLocation(Path(environ["NBMEMORY_HOME"]).expanduser().resolve(),
                             "from NBMEMORY_HOME")
    for directory in (cwd, *cwd.parents):
        if (directory / STORE_DIRNAME).is_dir():
            return StoreLocation(directory / STORE_DIRNAME,
                                 f"nearest {STORE_DIRNAME}/ above {cwd}")
    root = find_git_root(cwd)
    if root is not None:
        return StoreLocation(root / STORE_DIRNAME, f"git root of {cwd}")
    return StoreLocation(cwd / STORE_DIRNAME, "working directory (no git repository)")


def configured_model(explicit: str | None = None, *, environ: dict | None = None) -> str:
    """The embedding model a front end asks for: explicit (``--model``, ``NbMemory.model``)
    > ``NBMEMORY_MODEL`` > the default model."""
    environ = os.environ if environ is None else environ
    return explicit or environ.get("NBMEMORY_MODEL") or DEFAULT_MODEL


@dataclass(frozen=True)
class Settings:
    """Engine tuning. Defaults are measured choices; see bench/ and eval/."""

    model: str = DEFAULT_MODEL
    # Below this many candidates the dense channel is searched exactly.
    exact_below: int = 20_000
    connectivity: int = 16
    expansion_add: int = 128
    expansion_search: int = 96
    # Fused scores below this are dropped (and counted as filtered out). A score is 0..1:
    # the cosine for a query no note matches by keywords, up to 0.3 cosine + 0.7 keyword
    # share for one a note matches well (ranking.fuse). 0.2 hid 1 of 828 relevant hits in
    # the top 10 on eval/ and 137 of 6,182 others.
    min_score: float = 0.2
    # Save the vector index after this many writes (it is also saved on close).
    save_every: int = 500
