"""The owner's log: one time-stamped line per event on stderr, which is ``owner.log``.

Writing the log never fails a request or a shutdown: on a full disk (or a closed or
broken stream) the line is dropped and counted, and the next line that can be written
says how many were lost. (A failed log write inside a request used to drop the client's
connection, and the client then reported "owner stopped ... may or may not have been
applied" while the owner was alive.) Lines go straight to the file descriptor, unbuffered,
so a line that could not be written is not retried, half, before the next one.
"""

from __future__ import annotations

import io
import os
import sys
import threading
import time

_lock = threading.Lock()
_dropped = 0
_broken = False  # the last line was written in part: the next one starts on a new line


def log(message: str) -> bool:
    """Write ``message`` to the owner log; False when it could not be written."""
    global _dropped, _broken
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    with _lock:
        lost = f" ({_dropped} earlier log lines could not be written)" if _dropped else ""
        line = f"{stamp} nbmemory owner {os.getpid()}: {message}{lost}\n"
        try:
            partial = _write(("\n" if _broken else "") + line)
        except (OSError, ValueError, AttributeError):  # disk full, closed, no stderr
            _dropped += 1
            return False
        _broken = partial is not None
        _dropped = _dropped + 1 if _broken else 0  # a line cut short counts as lost
        return not _broken


def _write(line: str) -> OSError | None:
    """Write ``line``; the error that stopped it after part of it was written, or None.
    Raises when nothing could be written."""
    stream = sys.stderr
    try:
        fd = stream.fileno()
    except (AttributeError, ValueError, io.UnsupportedOperation):  # not a file: a test's
        stream.write(line)
        stream.flush()
        return None
    data = line.encode(errors="replace")
    written = 0
    while written < len(data):
        try:
            written += os.write(fd, data[written:])
        except OSError as exc:
            if not written:
                raise
            return exc
    return None
