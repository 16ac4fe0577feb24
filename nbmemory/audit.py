"""The audit hook of ambient recall: the files a cell opens for reading, through variables
too (:func:`sys.addaudithook`). Python cannot remove an audit hook, so it is installed on
first use and does nothing but one global lookup per audit event while no cell records.

A ``.py`` counts when the cell reads it (a source file a note is about), not when an import
or a traceback opens it."""

from __future__ import annotations

import os
import sys

MAX_READS = 256  # paths the audit hook keeps per cell

_reads: set | None = None  # paths opened for reading while a cell runs; None: not recording
_installed = False
_SKIP_SUFFIXES = (".pyc", ".pyo", ".so", ".pyd", ".pth")
# Where a .py is opened without the cell reading it: an import, a traceback's source lines
# (linecache; IPython's traceback also counts a file's lines itself).
_MACHINERY = ("importlib._bootstrap_external>", "linecache.py", "tbtools.py", "ultratb.py")


def _machinery() -> bool:
    """Whether this open of a .py is an import's or linecache's (a traceback), not the cell's."""
    frame = sys._getframe(2)
    while frame is not None and not frame.f_code.co_filename.endswith(_MACHINERY):
        frame = frame.f_back
    return frame is not None


def _audit(event: str, args: tuple) -> None:
    # Called for every audit event of the process (imports, exec, sockets...): the first
    # test must be cheap, and nothing here may raise.
    if _reads is None or event != "open":
        return
    try:
        path, mode = args[0], args[1]
        if mode is None:  # os.open: (path, None, flags)
            if args[2] & 3 == os.O_WRONLY:
                return
        elif "r" not in mode and "+" not in mode:
            return
        if not isinstance(path, str):
            if not isinstance(path, os.PathLike):
                return  # a file descriptor or bytes
            path = os.fspath(path)
            if not isinstance(path, str):
                return
        if len(_reads) < MAX_READS and not path.endswith(_SKIP_SUFFIXES) \
                and not (path.endswith(".py") and _machinery()):
            _reads.add(path)
    except Exception:  # an odd argument: ignore this event
        pass


def install_hook() -> None:
    """Install the audit hook once per process (it can never be removed)."""
    global _installed
    if not _installed:
        sys.addaudithook(_audit)
        _installed = True


def start_recording() -> None:
    global _reads
    _reads = set()


def stop_recording() -> set:
    global _reads
    reads, _reads = _reads, None
    return reads or set()
