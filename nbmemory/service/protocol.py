"""What the owner and its clients share: file names, the protocol version, safety checks.

Light on purpose (stdlib only): kernels import it. See docs/service-protocol.md.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InvalidInput, StoreUnavailable
from ..files import replace
from ..lock import (LOCK_FILENAME, POSIX_PERMISSIONS, check_store_directory, held_elsewhere,
                    open_private, read_owner, read_private)

PROTOCOL = 1
INFO_NAME = "owner.json"
LOG_NAME = "owner.log"
# Names the start an owner.error.json answers: on Windows a venv's python.exe is a
# launcher, so the pid the client started is not the owner's.
START_TOKEN_ENV = "NBMEMORY_START_TOKEN"
ERROR_NAME = "owner.error.json"  # why the last owner that could not start did not
SPAWN_LOCK_NAME = "spawn.lock"
DEFAULT_IDLE_TIMEOUT = 1800.0
IDLE_TIMEOUT_ENV = "NBMEMORY_IDLE_TIMEOUT"

# Exit status of an owner that found another owner already in place.
EXIT_LOCKED = 3
# Exit status of an owner whose team store's server was unreachable: the client starts
# another after a pause. Said by the status too, as owners started at once by several
# processes share owner.error.json and one may overwrite another's before it is read.
EXIT_UNREACHABLE = 4

HEADER_VERSION = "X-NbMemory-Version"
HEADER_PROTOCOL = "X-NbMemory-Protocol"
HEADER_MODEL = "X-NbMemory-Model"
HEADER_CLIENT = "X-NbMemory-Client"  # one id per client (a Memory) in one process

STATUS_BY_ERROR = {
    "InvalidInput": 400,
    "NotFound": 404,
    "Conflict": 409,
    "EmbedderMismatch": 409,
    "StoreUnavailable": 503,
    "StoreLocked": 503,
    "StoreTooNew": 503,
    "ModelUnavailable": 503,
}


def unwritable(directory: Path, exc: OSError) -> StoreUnavailable:
    """A store directory this user cannot write, said in words (the owner's and the
    client's: either may be the first to try)."""
    return StoreUnavailable(
        f"The store directory {directory} cannot be written ({exc.strerror}: {exc.filename}); "
        f"nbmemory keeps its lock, owner and index files there, even to read. Make it writable "
        f"for this user, or work on a copy of the store in a directory you can write.")


class OwnerGone(Exception):
    """The store's files are no longer this owner's (deleted, or replaced by a new store):
    it stops, and its clients send the call again to the next owner."""

# How long a request that may have reached a dying owner is sent again, to each new
# owner, before the client gives up (only requests that carry a request id, which every
# write from Memory does, or only read; others are reported at once). A deadline, not a
# count: owners killed one after another before their model loaded used up a count of 2.
RESEND_TIMEOUT = 120.0
RESEND_TIMEOUT_ENV = "NBMEMORY_RESEND_TIMEOUT"
# How long a client waits for the owner's answer to one call (long work has no limit).
REQUEST_TIMEOUT = 600.0
REQUEST_TIMEOUT_ENV = "NBMEMORY_REQUEST_TIMEOUT"


def _env_seconds(environ, name: str, default: float, hint: str) -> float:
    """Seconds from the environment variable ``name``, else ``default``; anything but a
    finite number from 0 is refused, saying what to set it to (``hint``)."""
    environ = os.environ if environ is None else environ
    value = (environ.get(name) or "").strip()
    if not value:
        return default
    try:
        seconds = float(value)
    except ValueError:
        seconds = float("nan")
    if not 0 <= seconds < float("inf"):
        raise InvalidInput(f"{name}={value!r} is not a number of seconds; set it to {hint}.")
    return seconds


def default_resend_timeout(environ=None) -> float:
    """``NBMEMORY_RESEND_TIMEOUT`` seconds, else :data:`RESEND_TIMEOUT`."""
    return _env_seconds(environ, RESEND_TIMEOUT_ENV, RESEND_TIMEOUT,
                        "e.g. 120 (0 reports a lost request at once)")


def default_request_timeout(environ=None) -> float | None:
    """``NBMEMORY_REQUEST_TIMEOUT`` seconds (0: no limit), else :data:`REQUEST_TIMEOUT`.
    The MCP server sets 60: an agent's client gives up sooner, and says less."""
    return _env_seconds(environ, REQUEST_TIMEOUT_ENV, REQUEST_TIMEOUT,
                        "e.g. 60, or 0 for no limit") or None


def default_idle_timeout(environ=None) -> float:
    """Seconds a started owner waits for requests before exiting: ``NBMEMORY_IDLE_TIMEOUT``
    (0: never) or 1800. Read by every client that spawns owners and by the owner's command."""
    return _env_seconds(environ, IDLE_TIMEOUT_ENV, DEFAULT_IDLE_TIMEOUT,
                        "e.g. 600, or 0 for an owner that never exits when idle")


def same_model(a: str | None, b: str | None) -> bool:
    def plain(name):
        return name.removeprefix("sentence-transformers/") if name else name

    return plain(a) == plain(b)


def _compared(version: object, other: object) -> int | None:
    """-1, 0 or 1 as nbmemory ``version`` comes before, is, or comes after ``other`` in pip's
    order (PEP 440: ``0.10`` after ``0.9.1``; ``1.0`` is ``1.0.0``; ``0.2.dev1``, ``0.2a1``
    and ``0.2rc1`` before ``0.2``); None when either does not read as a version."""
    try:
        from packaging.version import InvalidVersion, Version
    except ImportError:  # packaging comes with jupyter_server and transformers
        return None if version != other else 0
    try:
        ours, theirs = Version(str(version)), Version(str(other))
    except InvalidVersion:
        return None if version != other else 0
    return (ours > theirs) - (ours < theirs)


def newer(version: object, than: object) -> bool:
    """Whether nbmemory ``version`` is known to come after ``than``."""
    return _compared(version, than) == 1


def replaces(version: object, owner: object) -> bool:
    """Whether a client of nbmemory ``version`` replaces an owner running ``owner``: unless it
    is known to be the same version or an older one (which the owner serves as it is)."""
    return _compared(version, owner) not in (0, -1)


def check_private_directory(directory: Path) -> None:
    """Refuse a store directory another user owns or can write to (sticky or not)."""
    check_store_directory(directory)


def lock_held(directory: Path) -> bool:
    """True while some process holds the store's owner lock (probed without taking it)."""
    return held_elsewhere(directory / LOCK_FILENAME)


@dataclass(frozen=True)
class Holder:
    """The process holding a store's owner lock, as ``owner.lock`` names it."""

    pid: int | None  # None for an instant: the lock is taken, the pid not written yet
    service: bool  # an owner service, not a process that opened the store in-process


def lock_holder(directory: Path) -> Holder | None:
    """Who holds the owner lock, or None when nobody does."""
    if not lock_held(directory):
        return None
    pid, service = read_owner(directory)
    return Holder(pid, service)


def holder_pid(directory: Path) -> int | None:
    """The pid holding the owner lock; None when nobody does or it is not written yet."""
    holder = lock_holder(directory)
    return holder.pid if holder else None


def is_service(directory: Path, holder: Holder) -> bool:
    """Whether ``holder`` is an owner service: its lock file says so or, for an owner of
    an older nbmemory that wrote only its pid there, its ``owner.json``."""
    if holder.service:
        return True
    info = read_info(directory)
    return bool(info) and holder.pid is not None and info.get("pid") == holder.pid


def read_info(directory: Path) -> dict[str, Any] | None:
    try:
        info = json.loads(read_private(directory / INFO_NAME))
    except (OSError, ValueError, StoreUnavailable):
        return None
    return info if isinstance(info, dict) else None


def write_info(directory: Path, info: dict[str, Any], name: str = INFO_NAME) -> None:
    """Write ``owner.json`` atomically (only the lock holder calls this).

    The temporary file is created afresh (O_EXCL, no link followed) and removed again when
    the write fails (a full disk), so none is left behind."""
    path = directory / name
    tmp = path.with_name(f".{name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)  # our own, from a write that was interrupted
    fd = open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        with os.fdopen(fd, "w", newline="\n") as handle:
            json.dump(info, handle)
        replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def remove_leftovers(directory: Path) -> list[str]:
    """Remove the temporary files of owners that died while writing one of the store's
    files (``owner.json``, ``owner.key``, an index: a vector index's can be large); only
    the lock holder calls this, before it writes any. Their names."""
    removed = []
    for path in directory.glob(".*.tmp"):
        try:
            path.unlink()
            removed.append(path.name)
        except OSError:
            pass
    return removed


def record_start_error(directory: Path, exc: BaseException) -> None:
    """Leave ``owner.error.json`` (pid, error class, one-line message) for the client that
    started this owner, which raises the same class. Best effort: the directory may be
    what could not be used, and one other users can write to gets nothing."""
    message = " ".join(str(exc).split()) or type(exc).__name__
    try:
        check_private_directory(directory)
        write_info(directory, {"pid": os.getpid(), "start": os.environ.get(START_TOKEN_ENV),
                               "type": type(exc).__name__, "message": message},
                   name=ERROR_NAME)
    except (OSError, StoreUnavailable):
        pass


def read_start_error(directory: Path, pid: int, start: str | None = None
                     ) -> dict[str, Any] | None:
    """What the owner process ``pid`` (or started with the token ``start``) recorded when
    it could not start, or None."""
    path = directory / ERROR_NAME
    try:
        if POSIX_PERMISSIONS and path.stat().st_uid != os.getuid():
            return None
        error = json.loads(read_private(path))
    except (OSError, ValueError, StoreUnavailable):
        return None
    if not isinstance(error, dict) or not (
            error.get("pid") == pid or start is not None and error.get("start") == start):
        return None
    return error
