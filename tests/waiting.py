"""Waiting on a condition (never a sleep as synchronisation) and telling live processes."""

import os
import signal
import time


def wait_for(condition, timeout=30.0, what="condition"):
    """Poll ``condition`` until it gives something true; fail naming ``what`` at the deadline."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (an owner this process started and has not reaped) counts as gone
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def signal_owner(pid, sig=signal.SIGKILL):
    """``os.kill`` for a pid read from a store's files. A store says -1 while a new owner
    has locked it but not yet written its pid, and ``os.kill(-1, SIGKILL)`` signals every
    process this user may signal (as root, the whole machine): refuse anything but
    another real process."""
    assert isinstance(pid, int) and pid > 0 and pid != os.getpid(), \
        f"refusing to signal pid {pid!r}"
    os.kill(pid, sig)
