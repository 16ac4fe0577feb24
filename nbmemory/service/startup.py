"""Why an owner this client started did not start: the error it recorded, its exit
status, the last line of its log."""

from __future__ import annotations

import shutil
import signal
import subprocess
from pathlib import Path

from .. import errors
from ..errors import NbMemoryError, StoreUnavailable, StoreUnreachable
from .protocol import EXIT_UNREACHABLE, LOG_NAME, read_start_error


def disk_note(directory: Path) -> str:
    """" The disk ... is full: free some space." when it is (almost), else ""."""
    try:
        free = shutil.disk_usage(directory).free
    except OSError:
        return ""
    if free >= 1 << 20:
        return ""
    return f" The disk holding the store has {free} bytes free: free some space."


def last_log_line(directory: Path, offset: int = 0) -> str:
    """The last line of the owner log written since ``offset`` (where the last owner we
    started began), without its time stamp."""
    try:
        with open(directory / LOG_NAME, "rb") as handle:
            handle.seek(offset)
            text = handle.read().decode(errors="replace")
    except OSError:
        return ""
    lines = text.strip().splitlines()
    return lines[-1].strip() if lines else ""


def start_error(directory: Path, proc: subprocess.Popen, log_offset: int,
                 start: str) -> NbMemoryError:
    """Why an owner we started (with the token ``start``) exited: the error it recorded,
    as the same class, in one line that names the log for the details."""
    details = f"(details: {directory / LOG_NAME})"
    recorded = read_start_error(directory, proc.pid, start)
    if recorded:
        cls = getattr(errors, str(recorded.get("type")), None)
        if isinstance(cls, type) and issubclass(cls, NbMemoryError):
            return errors.from_dict(recorded, details)
        return StoreUnavailable(f"The store's owner process could not start: "
                                f"{recorded.get('type')}: {recorded.get('message', '')} {details}")
    last = last_log_line(directory, log_offset)
    if proc.returncode == EXIT_UNREACHABLE:  # its record overwritten by another's
        return StoreUnreachable(f"{last.removeprefix('nbmemory: ') or 'The team store is unreachable.'}"
                                f" {details}")
    status = f"exit status {proc.returncode}"
    if proc.returncode < 0:
        try:
            status = f"killed by {signal.Signals(-proc.returncode).name}"
        except ValueError:
            pass
    return StoreUnavailable(f"The store's owner process could not start ({status})"
                            f"{': ' + last if last else ''}.{disk_note(directory)} {details}")
