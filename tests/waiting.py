"""Waiting on a condition (never a sleep as synchronisation) and telling live processes."""

import os
import re
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
    assert type(pid) is int and pid > 1 and pid not in (os.getpid(), os.getppid()), \
        f"refusing to signal pid {pid!r}"
    os.kill(pid, sig)


def served(store):
    """(pid, idle timeout) of each owner that served ``store``, from its log: unlike
    ``owner_info`` still there once a short-lived owner has gone idle and exited."""
    log = (store / "owner.log").read_text()
    return [(int(pid), idle) for pid, idle in
            re.findall(r"nbmemory owner (\d+): serving .*?idle timeout (\S+) s\)", log)]


def holding_chunks(embedder_class, embedding, go_on):
    """``embedder_class`` whose encodes of more than one text (a chunk of a bulk remember,
    an import or a re-embed; not a query or one note) set the event ``embedding``, then
    wait for ``go_on``."""
    class Held(embedder_class):
        def encode(self, texts):
            if len(texts) > 1:
                embedding.set()
                assert go_on.wait(30)
            return super().encode(texts)

    return Held


def ran_while_held(work, release, *held) -> bool:
    """Run ``work`` on a thread while the threads ``held`` wait for the event ``release``,
    then release them: whether ``work`` finished within 30 s, not waiting for them."""
    import threading

    beside = threading.Thread(target=work)
    beside.start()
    beside.join(30)
    finished = not beside.is_alive()
    release.set()
    for thread in (*held, beside):
        thread.join(30)
    return finished
