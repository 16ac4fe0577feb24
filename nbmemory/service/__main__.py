"""``python -m nbmemory.service --store DIR [--idle-timeout S] [--model M] [--transport T]``:
run an owner."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path
import traceback

from .protocol import (DEFAULT_IDLE_TIMEOUT, EXIT_LOCKED, EXIT_UNREACHABLE, IDLE_TIMEOUT_ENV,
                       default_idle_timeout, record_start_error, unwritable)

# Tests only: while the file this names exists, the owner holds every call before
# computing it, as if its model were still loading (tests/test_reliability.py).
HOLD_ENV = "NBMEMORY_TEST_HOLD"


def say(message: str) -> None:
    """A line on stderr (owner.log) that cannot fail: the disk may be full."""
    try:
        print(message, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m nbmemory.service",
        description="Own an nbmemory store and serve it to other processes on a unix socket "
                    "or on loopback TCP with a secret. Clients start this on demand.")
    parser.add_argument("--store", default=None,
                        help="store directory (default: NBMEMORY_HOME, the nearest .nbmemory/, "
                             "the git root or the working directory)")
    parser.add_argument("--idle-timeout", type=float, default=None, metavar="S",
                        help=f"exit after S seconds without requests; 0 never (default: "
                             f"{IDLE_TIMEOUT_ENV} or {DEFAULT_IDLE_TIMEOUT:g})")
    parser.add_argument("--model", default=None,
                        help="embedding model (default: the one the store's vectors were made "
                             "with, else all-MiniLM-L6-v2)")
    parser.add_argument("--transport", choices=("unix", "tcp"), default=None,
                        help="unix socket (peers checked) or loopback TCP (a secret in "
                             "owner.key); default: NBMEMORY_TRANSPORT, else unix where the "
                             "platform can check a socket's peer")
    args = parser.parse_args(argv)

    from ..config import locate_store
    from ..errors import NbMemoryError, StoreLocked, StoreUnreachable
    from .owner import serve

    try:
        store = locate_store(args.store).path
    except NbMemoryError as exc:  # refused (a store above the working directory), or a
        say(f"nbmemory: {exc}")  # team store's server away: the client may start another
        if args.store:
            record_start_error(Path(args.store), exc)
        return EXIT_UNREACHABLE if isinstance(exc, StoreUnreachable) else 2
    try:
        idle = default_idle_timeout() if args.idle_timeout is None else args.idle_timeout
        serve(store, model=args.model, idle_timeout=idle, transport=args.transport,
              hold=os.environ.get(HOLD_ENV) or None)
    except StoreLocked as exc:
        say(f"nbmemory: {exc}")
        return EXIT_LOCKED
    except NbMemoryError as exc:
        say(f"nbmemory: {exc}")
        record_start_error(store, exc)  # the client raises the same class, in one line
        return EXIT_UNREACHABLE if isinstance(exc, StoreUnreachable) else 2
    except PermissionError as exc:  # e.g. a read-only directory: said in words, not a traceback
        error = unwritable(store, exc)
        say(f"nbmemory: {error}")
        record_start_error(store, error)
        return 2
    except Exception as exc:  # noqa: BLE001 - the traceback goes to owner.log
        say(traceback.format_exc().rstrip())
        record_start_error(store, exc)
        return 1
    return 0


def leave(code: int) -> None:
    """Exit without the interpreter's shutdown once :func:`main` has returned (the store
    closed, the lock released): a model still loading on the warm-up thread, as after a
    stop soon after the first call, made the shutdown abort in the model runtime's native
    code ("terminate called without an active exception", exit -6; 6 owners in 12)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # the disk may be full
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    leave(main())
