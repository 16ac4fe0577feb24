"""Where the store lives and the settings the engine is built with.

Only composition roots (magics, server extension, CLI, MCP) call :func:`locate_store`
and build :class:`Settings`; everything below receives them.
"""

from __future__ import annotations

import getpass
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from .address import Address, is_address
from .errors import InvalidInput, StoreUnavailable

STORE_DIRNAME = ".nbmemory"
DB_FILENAME = "memory.duckdb"  # a local store's database, in its directory
DEFAULT_MODEL = "all-MiniLM-L6-v2"
# Mode bits and uids mean nothing on Windows (a directory reports 0o777 there): the
# checks that rely on them apply where they exist.
POSIX_PERMISSIONS = os.name != "nt"


def current_user(environ: dict | None = None) -> str:
    """Who is writing: the JupyterHub user when there is one, else the login name.
    Notes, events and the trust of checks are attributed to it."""
    environ = os.environ if environ is None else environ
    if environ.get("JUPYTERHUB_USER"):
        return environ["JUPYTERHUB_USER"]
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no passwd entry in some containers
        return "unknown"


def this_machine() -> str:
    """``ada@laptop``: whose files a team store's cell anchor and sealed flags are about."""
    import socket

    return f"{current_user()}@{socket.gethostname()}"


@dataclass(frozen=True)
class StoreLocation:
    path: Path  # the local directory (a team store's projections, lock and sockets)
    reason: str
    address: str | None = None  # a team store's postgresql:// address

    def __str__(self) -> str:
        return f"{self.address or self.path} ({self.reason})"

    @property
    def exists(self) -> bool:
        """Whether the store was created (a team store's server is not asked)."""
        return self.address is not None or (self.path / DB_FILENAME).exists()


def find_git_root(start: Path) -> Path | None:
    for directory in (start, *start.parents):
        if (directory / ".git").exists():
            return directory
    return None


def workspace_of(directory: Path) -> Path:
    """Where a local store's anchored paths are relative to: the git root above the store,
    or the store's parent (never a process's cwd: the owner may run elsewhere)."""
    parent = Path(directory).parent.resolve()
    return find_git_root(parent) or parent


def locate_store(explicit: str | os.PathLike | None = None, *, cwd: Path | None = None,
                 environ: dict | None = None) -> StoreLocation:
    """Explicit path > ``NBMEMORY_HOME`` > nearest ``.nbmemory/`` above cwd > git root > cwd.

    A ``postgresql://`` address (explicit or in ``NBMEMORY_HOME``) is a team store: its
    local directory is created under the cache directory (see :mod:`.address`).
    """
    if explicit is not None and not isinstance(explicit, (str, os.PathLike)):
        raise InvalidInput(f"A store is a directory or a postgresql:// address, not "
                           f"{type(explicit).__name__} {explicit!r}")
    environ = os.environ if environ is None else environ
    cwd = (cwd or Path.cwd()).resolve()
    for given, why in ((explicit, "team store, given explicitly"),
                       (environ.get("NBMEMORY_HOME"), "team store, from NBMEMORY_HOME")):
        if given:
            if is_address(given):
                address = Address.parse(str(given))
                return StoreLocation(address.link(environ), why, address.url)
            break
    if explicit:
        return StoreLocation(Path(explicit).expanduser().resolve(), "given explicitly")
    if environ.get("NBMEMORY_HOME"):
        return StoreLocation(Path(environ["NBMEMORY_HOME"]).expanduser().resolve(),
                             "from NBMEMORY_HOME")
    for directory in (cwd, *cwd.parents):
        if (directory / STORE_DIRNAME).is_dir():
            found = directory / STORE_DIRNAME
            problem = foreign(found)
            if problem:  # e.g. one planted in /tmp by another user
                mine = (f" If it is yours, make it private: chmod 700 {found}"
                        if "writable" in problem else "")
                raise StoreUnavailable(
                    f"Found the store {found} above {cwd}, but {problem}: another user may "
                    f"have put it there, so nbmemory will not use it. Remove it if it is not "
                    f"yours, or name your own store with --store DIR or NBMEMORY_HOME "
                    f"(%config NbMemory.store in a notebook).{mine}")
            return StoreLocation(found, f"nearest {STORE_DIRNAME}/ above {cwd}")
    root = find_git_root(cwd)
    if root is not None:
        return StoreLocation(root / STORE_DIRNAME, f"git root of {cwd}")
    return StoreLocation(cwd / STORE_DIRNAME, "working directory, no git repository")


def directory_problem(info: os.stat_result) -> str | None:
    """Why a store directory with this ``lstat`` must not be used, as the end of a sentence
    ("it belongs to another user (uid 1001)"), or None. POSIX only.

    Another user must not own it, nor be able to write in it: sticky or not, they could
    plant a link named ``owner.lock`` or ``owner.log`` where this process would follow it,
    or read what it writes.
    """
    if not POSIX_PERMISSIONS:
        return None
    if stat.S_ISLNK(info.st_mode):
        return "it is a symbolic link"
    if not stat.S_ISDIR(info.st_mode):
        return "it is not a directory"
    if info.st_uid != os.getuid():
        return f"it belongs to another user (uid {info.st_uid})"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        who = "every user" if info.st_mode & stat.S_IWOTH else "its group"
        sticky = "; the sticky bit does not make that safe" if info.st_mode & stat.S_ISVTX else ""
        return f"it is writable by {who} (mode {stat.S_IMODE(info.st_mode):o}{sticky})"
    return None


def foreign(found: Path) -> str | None:
    """Why ``found`` (a store found above the working directory) is not this user's own, or
    None: the entry itself (it may be a link someone else made) and what it leads to."""
    try:
        entry = os.lstat(found)
        if stat.S_ISLNK(entry.st_mode):
            if POSIX_PERMISSIONS and entry.st_uid != os.getuid():
                return f"it is a symbolic link made by another user (uid {entry.st_uid})"
            entry = os.stat(found)
    except OSError:
        return None
    return directory_problem(entry)


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
    # How the HNSW graph holds its vectors; candidates are scored exactly (vectors.py).
    vector_dtype: str = "i8"
    expansion_add: int = 128
    expansion_search: int = 96
    # Fused scores below this are dropped (and counted as filtered out). A score is 0..1:
    # the cosine for a query no note matches by keywords, up to 0.4 cosine + 0.6 keyword
    # share for one a note matches well (ranking.fuse). 0.2 hid 1 of 828 relevant hits in
    # the top 10 on eval/ and 137 of 6,182 others.
    min_score: float = 0.2
    # Save the vector index after this many writes (it is also saved on close).
    save_every: int = 500
