"""Owner election: an exclusive OS lock on ``owner.lock`` in the store directory.

The OS releases the lock when the owning process dies, so a crash never leaves a
store blocked; the pid written into the file only names the owner in messages.
"""

from __future__ import annotations

import fcntl
import os
import stat
from pathlib import Path

from .config import find_git_root
from .errors import StoreLocked, StoreUnavailable

LOCK_FILENAME = "owner.lock"


def prepare_directory(directory: Path) -> None:
    """Create the store directory (owner-only) and keep it out of git."""
    created = not directory.exists()
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    mode = directory.stat().st_mode
    if mode & stat.S_IWOTH and not mode & stat.S_ISVTX:
        raise StoreUnavailable(
            f"The store directory {directory} is writable by every user; refusing to use it. "
            f"Restrict it with: chmod 700 {directory}"
        )
    if created and find_git_root(directory.parent) is not None:
        (directory / ".gitignore").write_text("# nbmemory's store: never commit it\n*\n")


def read_owner_pid(directory: Path) -> int | None:
    try:
        return int((directory / LOCK_FILENAME).read_text().strip() or 0) or None
    except (OSError, ValueError):
        return None


class OwnerLock:
    """Held for as long as this process owns the store."""

    def __init__(self, directory: Path):
        self.path = Path(directory) / LOCK_FILENAME
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def try_acquire(self) -> bool:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return True

    def acquire(self) -> None:
        if not self.try_acquire():
            pid = read_owner_pid(self.path.parent)
            raise StoreLocked(
                f"The store {self.path.parent} is owned by another process (pid {pid}). "
                "Use it through that owner (the default for magics, CLI and server), "
                f"or stop it first: nbmemory stop --store {self.path.parent}",
                pid=pid,
            )

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
