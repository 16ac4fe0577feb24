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
import re
import stat
from functools import lru_cache
from pathlib import Path

from .config import POSIX_PERMISSIONS, directory_problem, find_git_root
from .errors import StoreLocked, StoreUnavailable

LOCK_FILENAME = "owner.lock"
SERVICE_ROLE = b"service"  # owner.lock's second line, written by an owner service
# Where the Windows lock byte lies: past any pid, inside a 32-bit offset.
WINDOWS_LOCK_OFFSET = 1 << 30
# Files nbmemory creates in a store directory are never reached through a symbolic link:
# a link planted there could make this process (maybe root) truncate or append to a file
# elsewhere. Windows has no O_NOFOLLOW (links there need a privilege): checked by lstat.
O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
# Windows opens in text mode without it: "\n" written through os.fdopen became "\r\r\n".
O_BINARY = getattr(os, "O_BINARY", 0)
PRIVATE = 0o600
# The files nbmemory keeps in a store directory (and their temporary names): only these
# are made private, never whatever else a user keeps next to them.
STORE_FILE = re.compile(r"\.?(memory|vectors|keywords|cards|owner|spawn)\..*|\.gitignore")


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


_NO_LOCKS = {errno.ENOLCK, errno.ENOTSUP, getattr(errno, "EOPNOTSUPP", errno.ENOTSUP)}


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
        except OSError as exc:
            if exc.errno in _NO_LOCKS:  # a network file system without a lock service
                raise StoreUnavailable(
                    f"The store's file system cannot lock files ({exc.strerror}), and "
                    "nbmemory keeps writers apart with file locks. Keep the store on a local "
                    "disk (--store, NBMEMORY_HOME or NbMemory.store).") from None
            raise
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


def open_private(path: str | os.PathLike, flags: int, mode: int = PRIVATE) -> int:
    """``os.open`` that never follows a symbolic link at ``path``; a file it creates is
    ``mode`` (0600). A link there raises StoreUnavailable saying what to remove."""
    if not O_NOFOLLOW and os.path.islink(path):
        raise _planted(path)
    try:
        return os.open(path, flags | O_NOFOLLOW | O_BINARY, mode)
    except OSError as exc:  # ELOOP on Linux and macOS, EMLINK on FreeBSD
        if exc.errno in (errno.ELOOP, errno.EMLINK) and os.path.islink(path):
            raise _planted(path) from None
        raise


def _planted(path) -> StoreUnavailable:
    return StoreUnavailable(
        f"{path} is a symbolic link; nbmemory never follows links in a store directory "
        f"(someone may have planted it to make this process write elsewhere). Remove it "
        f"({'del' if os.name == 'nt' else 'rm'} {path}) and check who can write to "
        f"{Path(path).parent}.")


def read_private(path: str | os.PathLike, limit: int = 1 << 20) -> bytes:
    """The first ``limit`` bytes of ``path``, not followed if it is a link."""
    fd = open_private(path, os.O_RDONLY)
    with os.fdopen(fd, "rb") as handle:
        return handle.read(limit)


def _a_file(directory: Path) -> StoreUnavailable:
    blocker = next((p for p in (directory, *directory.parents) if p.is_file()), directory)
    return StoreUnavailable(f"Cannot open the store {directory}: {blocker} is a file, not a "
                            "directory. Give the directory that holds memory.duckdb (or where "
                            "one should be created).")


def check_store_directory(directory: Path) -> None:
    """Refuse a store directory that another user owns or can write to (sticky or not).

    POSIX only: on Windows the directory's ACL (a user profile is private) protects it."""
    try:
        info = os.lstat(directory)
    except NotADirectoryError:
        raise _a_file(directory) from None
    except OSError:  # not there (or no name the system can hold): nothing to check yet
        return
    if stat.S_ISREG(info.st_mode):
        raise _a_file(directory)
    problem = directory_problem(info)
    if problem is None:
        return
    if "another user" in problem:
        fix = ("Use a store of your own: pass --store DIR or set NBMEMORY_HOME (or, if the "
               f"directory is yours, give it back to yourself: chown -R {os.getuid()} "
               f"{directory}).")
    elif "writable" in problem:
        fix = f"Restrict it with: chmod 700 {directory}"
    else:
        fix = "Point nbmemory at a real directory of your own (--store DIR or NBMEMORY_HOME)."
    raise StoreUnavailable(f"The store directory {directory} cannot be used safely: {problem}, "
                           f"so another user could read what nbmemory writes there or plant "
                           f"links in it. {fix}")


def make_private(directory: Path) -> None:
    """The store directory 0700 and this user's files in it 0600 (POSIX).

    The directory's mode is what keeps other users out; the files' modes keep them out
    too when the directory is later opened up or copied. Only nbmemory's own files
    (:data:`STORE_FILE`) are touched; links and other users' files are left alone
    (check_store_directory refused a directory they could write to)."""
    if not POSIX_PERMISSIONS:
        return
    info = os.lstat(directory)
    if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and info.st_mode & 0o077:
        os.chmod(directory, 0o700)
    with os.scandir(directory) as entries:
        for entry in entries:
            try:
                if not (STORE_FILE.fullmatch(entry.name)
                        and entry.is_file(follow_symlinks=False)):
                    continue
                mode = entry.stat(follow_symlinks=False)
                if mode.st_uid == os.getuid() and mode.st_mode & 0o077:
                    os.chmod(entry.path, stat.S_IMODE(mode.st_mode) & 0o700)
            except FileNotFoundError:  # removed meanwhile (a temporary file)
                continue


def held_elsewhere(path: Path) -> bool:
    """True while some process holds the lock on ``path`` (probed, not kept)."""
    try:
        fd = open_private(path, os.O_RDONLY)
    except OSError as exc:  # no file, so no lock (nor one the system could name)
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ENAMETOOLONG):
            return False
        raise
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
    """Create the store directory (owner-only), refuse one other users could write to or
    that is theirs, make it and its files private, and keep it out of git."""
    created = not os.path.lexists(directory)
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):  # it, or a folder above it, is a file
        raise _a_file(directory) from None
    except OSError as exc:  # no permission, or a place that cannot hold one (/proc, a full disk)
        where = "" if Path(exc.filename or directory) == directory else f": {exc.filename}"
        raise StoreUnavailable(
            f"The store directory {directory} cannot be created ({exc.strerror}{where}). "
            "Give a directory this user can create and write.") from None
    check_store_directory(directory)
    if not os.access(directory, os.W_OK | os.X_OK):  # DuckDB would fail later, in its words
        raise StoreUnavailable(
            f"The store directory {directory} cannot be written by this user; nbmemory keeps "
            "its lock, write-ahead log and index files there, even to read. Make it writable "
            "for this user, or work on a copy of the store in a directory you can write.")
    make_private(directory)
    if created and find_git_root(directory.parent) is not None:
        fd = open_private(directory / ".gitignore", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        with os.fdopen(fd, "w", newline="\n") as handle:
            handle.write("# nbmemory's store: never commit it\n*\n")


def read_owner(directory: Path) -> tuple[int | None, bool]:
    """(pid, service) as ``owner.lock`` says: the holder's pid (None while a process that
    has just taken the lock writes it, or with no lock file) and whether it is an owner
    service rather than a process that opened the store in-process."""
    try:
        lines = read_private(Path(directory) / LOCK_FILENAME, 32).split(b"\n")
        return int(lines[0].strip() or 0) or None, lines[1:2] == [SERVICE_ROLE]
    except (OSError, ValueError, StoreUnavailable):
        return None, False


def read_owner_pid(directory: Path) -> int | None:
    return read_owner(directory)[0]


class OwnerLock:
    """Held for as long as this process owns the store. ``owner.lock`` holds its pid and,
    on a second line, ``service`` for an owner service (clients wait for one that is
    starting, and name a script holding the store at once)."""

    def __init__(self, directory: Path, *, service: bool = False):
        self.path = Path(directory) / LOCK_FILENAME
        self.service = service
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def try_acquire(self) -> bool:
        fd = open_private(self.path, os.O_RDWR | os.O_CREAT)
        try:
            if not try_lock(fd):
                os.close(fd)
                return False
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        role = SERVICE_ROLE + b"\n" if self.service else b""
        os.write(fd, f"{os.getpid()}\n".encode() + role)  # one write: pid and role together
        self._fd = fd
        return True

    def acquire(self) -> None:
        if not self.try_acquire():
            pid, service = read_owner(self.path.parent)
            if pid == os.getpid():
                raise StoreLocked(
                    f"The store {self.path.parent} is already open in this process: use the "
                    "Memory opened first, or close it before opening the store again.", pid=pid)
            # A script's serves nobody, and nbmemory stop refuses it (no pid yet: perhaps an
            # owner that is starting).
            if pid is not None and not service:
                raise StoreLocked(
                    f"The store {self.path.parent} is open in-process by another program (pid "
                    f"{pid}), which serves no other process: close that program (or its "
                    "Memory), then try again.", pid=pid)
            raise StoreLocked(
                f"The store {self.path.parent} is owned by another process (pid {pid}). "
                "Use it through that owner (the default for magics, CLI and server), "
                f"or stop it first: nbmemory stop --store {self.path.parent}",
                pid=pid,
            )

    def intact(self) -> bool:
        """True while ``owner.lock`` on disk is still the file this process locked: False
        once it (or the store directory) was removed or replaced, when another process
        could take a lock of its own there."""
        if self._fd is None:
            return False
        try:
            here, mine = os.lstat(self.path), os.fstat(self._fd)
        except OSError:
            return False
        return (here.st_dev, here.st_ino) == (mine.st_dev, mine.st_ino)

    def release(self) -> None:
        if self._fd is not None:
            try:
                try:  # files the engine created meanwhile (a WAL, an index) become 0600
                    make_private(self.path.parent)
                except OSError:
                    pass
                unlock(self._fd)
            finally:
                os.close(self._fd)
                self._fd = None
