"""The client side: a ``Memory`` backend that sends each call to the store's owner.

It finds the owner's address in ``owner.json`` (a unix socket, or a loopback TCP port whose
requests carry the secret from ``owner.key``: see :mod:`.transport`), starts an owner when
there is none (detached, so a kernel restart does not stop it) and waits for it with a
deadline, replaces an owner of another nbmemory version (or model, when no other client
is connected to it), and sends a request again after the owner died, until a deadline
(writes carry a request id, so that never applies one twice). Only the standard library
and nbmemory's light modules are imported here: no torch, no DuckDB, no numpy.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from .. import __version__, errors
from ..errors import (ModelUnavailable, NbMemoryError, OutcomeUnknown, StoreLocked,
                      StoreTooNew, StoreUnavailable, StoreUnreachable)
from ..lock import open_private, prepare_directory, try_lock, unlock
from ..operations import QUICK_TIMEOUT_S, operation as lookup
from . import codec, transport as transports
from .control import owner_info, stop, wait_for_exit  # noqa: F401 - re-exported
from .protocol import (EXIT_LOCKED, HEADER_CLIENT, HEADER_MODEL, HEADER_PROTOCOL,
                       HEADER_VERSION, LOG_NAME, PROTOCOL, SPAWN_LOCK_NAME, START_TOKEN_ENV,
                       check_private_directory, default_idle_timeout, default_request_timeout,
                       default_resend_timeout, is_service, lock_held, lock_holder, newer,
                       unwritable)
from .startup import last_log_line, start_error
from .wire import Connection, Lost, NotSent, Refused, connect, exchange

# An owner outlives the kernel that started it: a session of its own on POSIX, a process
# group of its own and no console window on Windows.
DETACHED: dict[str, Any] = (
    {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP | subprocess.CREATE_NO_WINDOW}
    if os.name == "nt" else {"start_new_session": True})
STARTUP_TIMEOUT = 120.0
PROGRESS_POLL = 0.25  # seconds between progress questions during long work
SLOW_NOTICE_S = 30.0  # then a call still unanswered says so (an owner stopped or stuck)
# Owners are started again this long while a team store's server is away and this machine
# has no copy to serve: a server's restart, not a first contact with a wrong address.
NO_COPY_PATIENCE_S = 10.0
# Exit statuses (POSIX: minus the signal) of an owner stopped from outside while it
# started (kill -9, a stop): not a failure to start; the client starts another one.
STOPPED_FROM_OUTSIDE = {-getattr(signal, name) for name in
                        ("SIGKILL", "SIGTERM", "SIGINT", "SIGHUP") if hasattr(signal, name)}
if os.name == "nt":  # os.kill(pid, SIGTERM) there is TerminateProcess with exit code 15
    STOPPED_FROM_OUTSIDE.add(signal.SIGTERM)


def _say(message: str) -> None:
    """One line on stderr: seen under a notebook cell, in a terminal and in the Jupyter
    server's log, and never mixed into stdout (the CLI's --json, MCP's stdio)."""
    try:
        print(f"nbmemory: {message}", file=sys.stderr, flush=True)
    except (OSError, ValueError, AttributeError):
        pass


def _this_code() -> str:
    """PYTHONPATH for an owner: the caller's own, then this nbmemory's folder (a kernel in
    a source checkout imports the checkout's from its working directory, and its owner,
    started in the store's directory, would import the one installed: another version,
    refused at once). An installed nbmemory is found anyway, and its folder is not put
    ahead of the standard library."""
    here = Path(__file__).resolve().parent.parent.parent
    mine = [] if here.name in ("site-packages", "dist-packages") else [str(here)]
    return os.pathsep.join(list(filter(None, [os.environ.get("PYTHONPATH")])) + mine)


def _client_id() -> str:
    """Who this client is, for the owner (which keeps an owner others are connected to)."""
    return f"{os.getpid()}-{uuid.uuid4().hex[:12]}"


def _error(payload: dict[str, Any], details: str = "") -> NbMemoryError:
    """The owner's error as the same NbMemoryError subclass (``details`` appended)."""
    return errors.from_dict(payload, details)


class ServiceBackend:
    """A :class:`~nbmemory.memory.Backend` talking to the owner of ``directory``."""

    def __init__(self, directory: str | os.PathLike, *, model: str | None = None,
                 idle_timeout: float | None = None, min_score: float | None = None,
                 startup_timeout: float = STARTUP_TIMEOUT,
                 request_timeout: float | None = None,
                 resend_timeout: float | None = None,
                 announce: Callable[[str], None] | None = None):
        self.directory = Path(directory).expanduser().resolve()
        self.announce = announce  # told when this client starts an owner (a wait follows)
        self.model = model
        self.transport = transports.choose()  # for the owners this client starts
        self.idle_timeout = default_idle_timeout() if idle_timeout is None else idle_timeout
        self.min_score = min_score
        self.startup_timeout = startup_timeout
        self.request_timeout = (default_request_timeout() if request_timeout is None
                                else request_timeout or None)  # 0: no limit
        self.resend_timeout = (default_resend_timeout() if resend_timeout is None
                               else resend_timeout)
        self._headers = {"Content-Type": "application/json", HEADER_VERSION: __version__,
                         HEADER_PROTOCOL: str(PROTOCOL), HEADER_CLIENT: _client_id()}
        if model:
            self._headers[HEADER_MODEL] = model
        self._idle: list[Connection] = []
        self._pool = threading.Lock()
        self._starting = threading.Lock()
        self._starting_owner: subprocess.Popen | None = None  # started, not yet answering
        self._unreachable_since: float | None = None  # owners failed to reach a team store
        self._told_unreachable = False
        self._last_unreachable: StoreUnreachable | None = None  # why, to say when giving up
        self._children: list[subprocess.Popen] = []
        self._log_offset = 0
        self._start_token = ""  # names the owner this client started last (see protocol)
        self._pid = os.getpid()
        self.progress_poll = PROGRESS_POLL
        self.closed = False

    # -- the Backend protocol -------------------------------------------------------------

    def call(self, operation: str, **arguments: Any) -> Any:
        if self.closed:
            raise StoreUnavailable("This Memory is closed; open the store again.")
        if operation == "recall" and arguments.get("min_score") is None \
                and self.min_score is not None:
            arguments["min_score"] = self.min_score
        request = {"operation": operation, "arguments": codec.encode_arguments(arguments)}
        progress = arguments.get("progress")
        if callable(progress) and lookup(operation).progress:
            request["progress_token"] = uuid.uuid4().hex
            with self._progress_reporter(request["progress_token"], progress):
                return self._call(operation, arguments, json.dumps(request).encode())
        return self._call(operation, arguments, json.dumps(request).encode())

    @contextmanager
    def _progress_reporter(self, token: str, progress) -> Iterator[None]:
        """Poll the owner for the progress of ``token`` on a connection of its own."""
        done = threading.Event()
        last = None

        def poll() -> None:
            nonlocal last
            while not done.wait(self.progress_poll):
                try:
                    conn = connect(self.directory, self.request_timeout)
                    try:
                        _, state = exchange(conn, "GET", f"/v{PROTOCOL}/progress/{token}",
                                             None, self._headers)
                    finally:
                        conn.close()
                except (NotSent, Lost, Refused, OSError, NbMemoryError):
                    continue
                if state and (state["done"], state["total"]) != last:
                    last = (state["done"], state["total"])
                    progress(*last)

        thread = threading.Thread(target=poll, name="nbmemory-progress", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()
        if last is not None and last[0] != last[1]:
            progress(last[1], last[1])  # finished between two polls

    def _call(self, operation: str, arguments: dict[str, Any], body: bytes) -> Any:
        op = lookup(operation)
        resend_safe = op.read or bool(arguments.get("request_id"))
        timeout = None if op.long else self.request_timeout
        if op.quick:  # nobody asked: a stuck owner holds the user's cell for seconds only
            timeout = min(QUICK_TIMEOUT_S, timeout or QUICK_TIMEOUT_S)
        replaced, lost, tries, deadline = False, 0, 0, None
        told = False  # the user was told that this call waits for a new owner
        while True:
            tries += 1
            try:
                status, payload = self._send(body, timeout)
            except TimeoutError:
                applied = "" if op.read else (f" What it was asked ({op.words}) may or may not "
                                              "have been applied: check before sending it again.")
                raise (StoreUnavailable if op.read else OutcomeUnknown)(
                    f"The store's owner did not answer within {timeout:g} s. It may be stuck: "
                    f"see {self.directory / LOG_NAME}, or stop it (nbmemory stop --store "
                    f"{self.directory}).{applied}") from None
            except (NotSent, Refused, Lost) as exc:
                self._drop_connections()
                if isinstance(exc, Refused):  # nothing was done
                    refusal = transports.refused_by_owner(self.directory, exc.pid)
                    if refusal is not None:
                        raise refusal from None
                if isinstance(exc, Lost):
                    if not resend_safe:
                        raise OutcomeUnknown(
                            f"The store's owner stopped while handling {op.words} ({exc}); "
                            f"it may or may not have been applied. Check, then try again. "
                            f"Owner log: {self.directory / LOG_NAME}") from None
                    lost += 1
                deadline = deadline or time.monotonic() + self.resend_timeout
                told = self._resend_or_give_up(operation, lost, tries, deadline, told)
                continue
            error = payload.get("error")
            if error is None:
                return codec.decode(payload["result"])
            if error.get("type") == "OwnerExiting":
                self._drop_connections()
                deadline = deadline or time.monotonic() + self.resend_timeout
                told = self._resend_or_give_up(operation, lost, tries, deadline, told)
                continue
            if error.get("type") == "StoreUnreachable" and resend_safe:
                deadline = deadline or time.monotonic() + self.resend_timeout
                if time.monotonic() >= deadline:  # at once when resend_timeout is 0
                    raise _error(error, f"(still unreachable after {self.resend_timeout:g} s)")
                if not told:
                    _say(f"the team store is unreachable; retrying {op.words} for up to "
                         f"{self.resend_timeout:g} s (sending it again is safe: it is applied once)")
                    told = True
                time.sleep(min(2.0, 0.1 * tries))  # back off while the server is away
                continue
            if error.get("type") == "OwnerMismatch" and error.get("protocol") != PROTOCOL \
                    and newer(str(error.get("version")), __version__):
                raise StoreTooNew(  # stopped, it would stop this one's owner in turn
                    f"The store {self.directory} is served by nbmemory {error['version']} "
                    f"(protocol {error['protocol']}), newer than this nbmemory {__version__} "
                    f"(protocol {PROTOCOL}), which cannot talk to it. It was left running and "
                    "nothing was done: upgrade nbmemory here (pip install -U nbmemory), then "
                    "restart the kernel.")
            if error.get("type") == "OwnerMismatch" and not replaced:
                replaced = True
                self._replace_owner(error)
                continue
            if error.get("type") == "OwnerMismatch":  # replaced, and replaced again meanwhile
                raise StoreUnavailable(
                    f"{error.get('message')} Another nbmemory (another version or model) "
                    f"keeps starting an owner of {self.directory}: use one nbmemory for a "
                    f"store, or stop the other. Nothing was done.")
            raise _error(error)

    def _resend_or_give_up(self, operation: str, lost: int, tries: int,
                           deadline: float, told: bool) -> bool:
        """Wait for an owner to send the request to again; raise once ``deadline`` passed
        (after two tries at least). Once an owner was lost with the request, say on stderr
        (once: ``told``) that this call waits. Returns whether the user was told."""
        if time.monotonic() > deadline and (lost or tries > 2):
            op = lookup(operation)
            if lost:
                # Sent again by this call with one request id, it is applied once at most; a
                # new call is a new request, so the caller must check before sending it.
                applied = "" if op.read else (": it may or may not have been applied, check "
                                              "before sending it again")
                raise (StoreUnavailable if op.read else OutcomeUnknown)(
                    f"The store's owner stopped {lost} time(s) while handling {op.words}, "
                    f"over {self.resend_timeout:g} s of sending it again{applied}. See "
                    f"{self.directory / LOG_NAME}.")
            raise StoreUnavailable(f"Could not reach the owner of {self.directory} within "
                                   f"{self.resend_timeout:g} s; see {self.directory / LOG_NAME}")
        if lost and not told:
            _say(f"the store's owner stopped while handling {lookup(operation).words}; "
                 "waiting for a new "
                 f"owner to send it again (up to {self.resend_timeout:g} s; it is applied once)")
            told = True
        self.ensure_owner()
        return told

    def close(self) -> None:
        self.closed = True
        self._drop_connections()
        self._reap()

    # -- connections ----------------------------------------------------------------------

    def _send(self, body: bytes, timeout: float | None) -> tuple[int, dict[str, Any]]:
        with self._pool:
            if self._pid != os.getpid():  # forked: the connections belong to the parent
                self._idle, self._pid = [], os.getpid()
                self._headers[HEADER_CLIENT] = _client_id()  # and so does its identity
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = connect(self.directory, self.request_timeout)
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        notice = threading.Timer(SLOW_NOTICE_S, _say, [
            f"still waiting for the store's owner after {SLOW_NOTICE_S:g} s: long work, or it "
            f"is stuck (see {self.directory / LOG_NAME}; nbmemory stop --store "
            f"{self.directory} stops it)"])
        notice.daemon = True
        if timeout is not None:  # long work has no timeout, and shows its progress
            notice.start()
        try:
            status, payload = exchange(conn, "POST", f"/v{PROTOCOL}/call", body, self._headers)
        except (NotSent, Lost, Refused):
            conn.close()
            raise
        except TimeoutError:
            conn.close()
            raise
        finally:
            notice.cancel()
        if conn.sock is not None:
            with self._pool:
                self._idle.append(conn)
        return status, payload

    def _drop_connections(self) -> None:
        with self._pool:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _ping(self) -> bool:
        """True when an owner answers ``/hello`` and is not stopping.

        Connecting is not enough: a listener whose process is being killed still accepts.
        """
        try:
            conn = connect(self.directory, 5.0)
            try:
                status, hello = exchange(conn, "GET", "/hello", None, {})
            finally:
                conn.close()
        except Refused as exc:
            refusal = transports.refused_by_owner(self.directory, exc.pid)
            if refusal is not None:
                raise refusal from None
            return False
        except (NotSent, Lost, OSError):
            return False
        return status == 200 and hello.get("state") == "serving"

    # -- finding or starting the owner ----------------------------------------------------

    def ensure_owner(self) -> None:
        """Return once an owner accepts connections; start one if there is none."""
        with self._starting:
            self._ensure_owner()

    def _ensure_owner(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        self._unreachable_since = self._last_unreachable = None  # this wait's own
        delay = 0.005
        foreign_since, started, told = None, time.monotonic(), False
        while True:
            if self._ping():
                self._starting_owner = None  # whatever happens to it now is not a failed start
                self._unreachable_since = None
                return
            if not told and time.monotonic() - started > SLOW_NOTICE_S:  # not in silence
                _say(f"still waiting for an owner of {self.directory} to answer after "
                     f"{time.monotonic() - started:.0f} s (up to {self.startup_timeout:g} s; see "
                     f"{self.directory / LOG_NAME})")
                told = True
            check_private_directory(self.directory)
            self._check_starting_owner()
            holder = lock_holder(self.directory)
            if holder is not None and holder.pid and not is_service(self.directory, holder):
                foreign_since = foreign_since or time.monotonic()
                if time.monotonic() - foreign_since > 0.5:  # owner.json may lag an old owner
                    raise StoreLocked(
                        f"The store {self.directory} is owned by another process "
                        f"(pid {holder.pid}) that does not serve other processes: it opened "
                        "the store in-process (a script, or a front end in local mode). Close "
                        "it, then try again.", pid=holder.pid)
            elif holder is None and self._starting_owner is None:
                foreign_since = None
                self._spawn(deadline)
            if time.monotonic() > deadline:
                if self._unreachable_since is not None and self._last_unreachable is not None:
                    raise _error(self._last_unreachable.to_dict(), f"(still unreachable after "
                                 f"{time.monotonic() - self._unreachable_since:.0f} s)")
                last = last_log_line(self.directory, self._log_offset)
                raise StoreUnavailable(
                    f"No owner of {self.directory} answered within {self.startup_timeout:g} s"
                    f"{' (its log ends: ' + last + ')' if last else ''}; try again, or stop it "
                    f"with: nbmemory stop --store {self.directory} "
                    f"(details: {self.directory / LOG_NAME})")
            time.sleep(delay)
            delay = min(delay * 1.5, 0.1)

    def _spawn(self, deadline: float) -> None:
        """Start an owner unless another client is doing so (``spawn.lock``)."""
        try:
            prepare_directory(self.directory)  # as the engine would: 0700, .gitignore in git
            check_private_directory(self.directory)
            fd = open_private(self.directory / SPAWN_LOCK_NAME, os.O_RDWR | os.O_CREAT)
        except PermissionError as exc:
            raise unwritable(self.directory, exc) from None
        try:
            if not try_lock(fd):
                return  # someone else is starting one; keep polling
            try:
                if not (lock_held(self.directory) or self._ping()):
                    self._start_owner(deadline)
            finally:
                unlock(fd)
        finally:
            os.close(fd)

    def _start_owner(self, deadline: float) -> None:
        """Start ``python -m nbmemory.service`` detached; return once it holds the store's
        lock, has exited, or ``deadline`` passed (the caller holds ``spawn.lock``)."""
        self._reap()
        log_path = self.directory / LOG_NAME
        if log_path.is_file() and log_path.stat().st_size > 1_000_000:
            try:
                os.replace(log_path, log_path.with_name(LOG_NAME + ".old"))
            except PermissionError:  # Windows: the last owner's log is still open
                pass
        command = [sys.executable, "-m", "nbmemory.service", "--store", str(self.directory),
                   "--idle-timeout", str(self.idle_timeout), "--transport", self.transport]
        if self.model:
            command += ["--model", self.model]
        log_fd = open_private(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        # At its end for the owner too: Windows' C runtime appends for this process's
        # descriptor only, and the owner's handle would write over the log from its start.
        self._log_offset = os.lseek(log_fd, 0, os.SEEK_END)
        self._start_token = uuid.uuid4().hex
        try:
            proc = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log_fd, stderr=log_fd,
                cwd=self.directory, close_fds=True, **DETACHED,
                env={**os.environ, "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1"),
                     START_TOKEN_ENV: self._start_token, "PYTHONPATH": _this_code()})
        finally:
            os.close(log_fd)
        self._starting_owner = proc
        self._children.append(proc)
        if self.announce is not None and self._unreachable_since is None:  # once a wait
            self.announce(f"starting the memory service for {self.directory} (it loads the "
                          "embedding model once: a few seconds)")
        # Hold spawn.lock until the new owner holds the store lock (or gave up), so
        # that other clients do not start owners of their own meanwhile.
        while (proc.poll() is None and not lock_held(self.directory)
               and time.monotonic() < deadline):
            time.sleep(0.005)

    def _check_starting_owner(self) -> None:
        proc = self._starting_owner
        if proc is None or proc.poll() is None:
            return
        self._starting_owner = None
        if proc.returncode not in (0, EXIT_LOCKED, *STOPPED_FROM_OUTSIDE):
            error = start_error(self.directory, proc, self._log_offset, self._start_token)
            if not isinstance(error, StoreUnreachable):
                raise error
            self._last_unreachable = error
            # An owner gives up on a team store's server only with no copy to serve: start
            # another after a pause (the server may be restarting), for a while.
            now = time.monotonic()
            self._unreachable_since = self._unreachable_since or now
            patience = min(self.resend_timeout, NO_COPY_PATIENCE_S)
            if now - self._unreachable_since > patience:
                raise _error(error.to_dict(), f"(still unreachable after "
                             f"{now - self._unreachable_since:.0f} s)")
            if not self._told_unreachable:
                _say(f"the team store is unreachable; starting its owner again for up to "
                     f"{patience:g} s")
                self._told_unreachable = True
            time.sleep(min(2.0, 0.2 + 0.5 * (now - self._unreachable_since)))

    def _reap(self) -> None:
        """Collect owners we started that have exited since (no zombies in the kernel)."""
        self._children = [p for p in self._children if p.poll() is None]

    def _replace_owner(self, error: dict[str, Any]) -> None:
        """Ask an owner of another version or model to exit, then start a matching one; not
        for a model this machine does not have (the owner would be stopped for nothing)."""
        from ..embed import DEFAULT_ALIASES, findable

        serving = error.get("model")
        if self.model and serving and self.model != serving and not findable(self.model):
            unset = " (or leave it unset)" if serving in DEFAULT_ALIASES else ""
            raise ModelUnavailable(
                f"The embedding model {self.model!r} is not on this machine to load offline "
                f"(a typo, or not in the Hugging Face cache), so the store's owner keeps "
                f"{serving!r} and nothing was done. Give a model this machine has (as "
                f"{serving!r} is){unset}, or put the model in the local Hugging Face cache "
                f"first.")
        reason = (f"client pid {os.getpid()} runs nbmemory {__version__}"
                  + (f" with model {self.model}" if self.model else "")
                  + f": {error.get('message', '')}")
        self._drop_connections()
        with self._starting:
            try:
                conn = connect(self.directory, 10.0)
                try:
                    exchange(conn, "POST", "/shutdown", json.dumps({"reason": reason}).encode(),
                              {"Content-Type": "application/json"})
                finally:
                    conn.close()
            except (NotSent, Lost, Refused):
                pass
            wait_for_exit(self.directory, self.startup_timeout)
            self._ensure_owner()
