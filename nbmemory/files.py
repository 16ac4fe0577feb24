"""Writing a file so that a crash leaves either the old file or the new one, never half; and
telling a full disk from other write errors."""

from __future__ import annotations

import errno
import hashlib
import os
import time
from pathlib import Path
from typing import Callable


def identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of ``path`` itself (a link not followed), or None if it is gone."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def code_stamp() -> str:
    """Names the code of the installed nbmemory (each module's path, size and time): it
    changes when nbmemory is upgraded or edited under a running process."""
    package = Path(__file__).parent
    stamp = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        info = path.stat()
        stamp.update(f"{path.relative_to(package)}\0{info.st_size}\0{info.st_mtime_ns}\0"
                     .encode())
    return stamp.hexdigest()[:16]


def replace(tmp: Path, path: Path) -> None:
    """``os.replace``, tried again for up to half a second where a file being read cannot
    be replaced (Windows: a client reading ``owner.json`` right now)."""
    for attempt in range(50):
        try:
            os.replace(tmp, path)
            return
        except PermissionError:
            if os.name != "nt" or attempt == 49:
                raise
            time.sleep(0.01)


def atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """``write(tmp)`` a temporary file beside ``path``, flush it to disk, rename it over
    ``path`` and flush the directory (where the platform can). The file is the owner's
    alone (0600), as everything in a store is."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        if os.name != "nt":
            os.chmod(tmp, 0o600)
        with open(tmp, "r+b") as handle:  # Windows flushes only a handle open for writing
            os.fsync(handle.fileno())
        replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    if os.name == "nt":  # a directory cannot be opened to flush it there
        return
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


FULL = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))


def disk_full(exc: BaseException) -> str | None:
    """The words of a "disk full" error anywhere in ``exc``'s chain (DuckDB says it in its
    message, Python in errno), or None."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in FULL:
            return exc.strerror or str(exc)
        for words in ("No space left on device", "Disk quota exceeded"):
            if words in str(exc):
                return words
        exc = exc.__cause__ or exc.__context__
    return None
