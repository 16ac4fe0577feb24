"""Asking about and stopping a store's owner from outside: who owns a store, stop it,
wait for it to exit. Standard library only (kernels and the CLI import this).
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from ..errors import NbMemoryError, StoreLocked, StoreUnavailable
from .protocol import holder_pid, lock_held, lock_holder, read_info
from .wire import Lost, NotSent, Refused, connect, exchange


def wait_for_exit(directory: Path, timeout: float) -> bool:
    """Poll until no process holds the store's owner lock; False on timeout."""
    deadline = time.monotonic() + timeout
    delay = 0.005
    while lock_held(directory):
        if time.monotonic() > deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 1.5, 0.1)
    return True


def owner_info(store: str | os.PathLike) -> dict[str, Any] | None:
    """What is known about the process owning ``store``, or None when nobody owns it.

    ``mode`` is "service" for an owner process (with ``pid``, ``version``, ``model``,
    ``state``, ``uptime_s``, ``queue`` once it has written ``owner.json``, and the last
    three when it answers) and "local" for a process that opened the store in-process.
    ``pid`` is None in the instant after a process has locked the store and before it has
    written its pid.
    """
    directory = Path(store).expanduser().resolve()
    holder = lock_holder(directory)
    if holder is None:
        return None
    info = read_info(directory)
    if not info or info.get("pid") != holder.pid:  # a script, or an owner writing owner.json
        return {"mode": "service" if holder.service else "local", "pid": holder.pid,
                "store": str(directory)}
    out = {"mode": "service", **info}
    try:
        conn = connect(directory, 2.0)
        try:
            status, hello = exchange(conn, "GET", "/hello", None, {})
        finally:
            conn.close()
        if status == 200:
            out.update(hello)
    except (NotSent, Lost, Refused, OSError, NbMemoryError):
        pass
    return out


def stop(store: str | os.PathLike, *, timeout: float = 30.0) -> bool:
    """Ask the owner of ``store`` to exit and wait until it has; False if none was running.

    An owner that does not answer is sent SIGTERM. Raises :class:`StoreLocked` when the
    store is open in-process by a script (that is not ours to stop).
    """
    directory = Path(store).expanduser().resolve()
    info = owner_info(directory)
    deadline = time.monotonic() + 2.0
    while info is not None and info["pid"] is None and time.monotonic() < deadline:
        time.sleep(0.01)  # an owner has just taken the lock and is writing its pid
        info = owner_info(directory)
    if info is None:
        return False
    if info["pid"] is None:
        raise StoreLocked(f"The store {directory} is locked by a process that wrote no pid "
                          "into owner.lock (not nbmemory?); close it, then try again.")
    if info["mode"] == "local":
        raise StoreLocked(f"The store {directory} is open in-process by pid {info['pid']}, "
                          "not by an owner service; close that program instead.",
                          pid=info["pid"])
    try:
        conn = connect(directory, 5.0)
        try:
            exchange(conn, "POST", "/shutdown",
                      json.dumps({"reason": f"stop requested by pid {os.getpid()}"}).encode(),
                      {"Content-Type": "application/json"})
        finally:
            conn.close()
    except (NotSent, Lost, Refused, OSError, NbMemoryError):
        _terminate(directory, info["pid"])
    if not wait_for_exit(directory, timeout):
        _terminate(directory, info["pid"])
        if not wait_for_exit(directory, 10.0):
            kill = (f"taskkill /F /PID {info['pid']}" if os.name == "nt"
                    else f"kill -9 {info['pid']}")
            raise StoreUnavailable(f"The owner of {directory} (pid {info['pid']}) did not stop; "
                                   f"kill it with: {kill}")
    return True


def _terminate(directory: Path, pid: int) -> None:
    """SIGTERM ``pid`` if it still holds the store's lock: never a pid that has exited
    since it was read (it may be another program's by now)."""
    if holder_pid(directory) != pid:
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:  # exited meanwhile (Windows says so as a plain OSError or PermissionError)
        pass
