"""Owner election: an exclusive OS lock on ``owner.lock`` in the store directory.

The OS releases the lock when the owning process dies, so a crash never leaves a
store blocked; the pid written into the file only names the owner in messages.

Locks come from the standard library: ``fcntl.flock`` where the platform has it (Linux,
macOS, BSD), else ``msvcrt.locking`` (Windows). Windows locks are mandatory, so there the
lock covers one byte far past the pid, which other processes can still read. Both modules
are imported on first use, never when this module is imported: importing nbmemory works
on any platform, and only taking a lock needs one of them. (``filelock`` and
``portalocker`` were not taken: the project does not depend on them, and ``filelock``
cannot tell whether another process holds a lock without taking it.)
"""

from __future__ import annotations

import errno
import os
import stat
from functools import lru_cache
from pathlib import Path

from .config import find_git_root
from .errors import StoreLocked, StoreUnavailable

LOCK_FILENAME = "owner.lock"
# Where the Windows lock byte lies: past any pid, inside a 32-bit offset.
WINDOWS_LOCK_OFFSET = 1 << 30
# Mode bits and uids mean nothing on Windows (a directory reports 0o777 there): the
# checks that rely on them apply where they exist.
POSIX_PERMISSIONS = os.name != "nt"


@lru_cache(maxsize=None)
def _locking():
    """("fcntl", module) or ("msvcrt", module); raises when the platform has neither."""
    try:
        import fcntl

        return "fcntl", fcntl
    except ImportError:
        pass
    try:
        import msvcrt

        return "msvcrt", msvcrt
    except ImportError:
        raise StoreUnavailable(
            "This Python offers no file locks (neither fcntl nor msvcrt), so nbmemory cannot "
            "make sure only one process owns a store. Use a CPython build for Linux, macOS "
            "or Windows.") from None


def locking_name() -> str:
    """Which lock this platform uses ("fcntl" or "msvcrt"), for doctor and tests."""
    return _locking()[0]


def try_lock(fd: int, *, shared: bool = False) -> bool:
    """Take the lock on open file ``fd`` without waiting; False when someone holds it.

    ``shared`` (a probe) is honoured with fcntl; msvcrt has only exclusive locks, so a
    probe there holds the lock for the microseconds it takes to release it again.
    """
    kind, module = _locking()
    if kind == "fcntl":
        try:
            module.flock(fd, (module.LOCK_SH if shared else module.LOCK_EX) | module.LOCK_NB)
        except BlockingIOError:
            return False
        return True
    os.lseek(fd, WINDOWS_LOCK_OFFSET, os.SEEK_SET)
    try:
        module.locking(fd, module.LK_NBLCK, 1)
    except OSError as exc:
        if isinstance(exc, PermissionError) or exc.errno == errno.EDEADLK:
            return False
        raise
    return True


def unlock(fd: int) -> None:
    kind, module = _locking()
    if kind == "fcntl":
        module.flock(fd, module.LOCK_UN)
        return
    os.lseek(fd, WINDOWS_LOCK_OFFSET, os.SEEK_SET)
    module.locking(fd, module.LK_UNLCK, 1)


def held_elsewhere(path: Path) -> bool:
    """True while some process holds the lock on ``path`` (probed, not kept)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        if not try_lock(fd, shared=True):
            return True
        unlock(fd)
        return False
    finally:
        os.close(fd)


def world_writable(mode: int) -> bool:
    """Writable by every user and not sticky (never on Windows, whose modes are made up)."""
    return POSIX_PERMISSIONS and bool(mode & stat.S_IWOTH) and not mode & stat.S_ISVTX


def prepare_directory(directory: Path) -> None:
    """Create the store directory (owner-only) and keep it out of git."""
    created = not directory.exists()
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    if world_writable(directory.stat().st_mode):
        raise StoreUnavailable(
            f"The store directory {directory} is writable by every user; refusing to use it. "
            f"Restrict it with: chmod 700 {directory}"
        )
    if created and find_git_root(directory.parent) is not None:
        (directory / ".gitignore").write_text("# nbmemory's store: never commit it\n*\n")


def read_owner_pid(directory: Path) -> int | None:
    try:
        with open(Path(directory) / LOCK_FILENAME, "rb") as handle:
            return int(handle.read(32).split(b"\n")[0].strip() or 0) or None
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
            if not try_lock(fd):
                os.close(fd)
                return False
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
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
            try:
                unlock(self._fd)
            finally:
                os.close(self._fd)
                self._fd = None
