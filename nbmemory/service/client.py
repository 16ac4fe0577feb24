"""The client side: a ``Memory`` backend that sends each call to the store's owner.

It finds the owner's address in ``owner.json`` (a unix socket, or a loopback TCP port whose
requests carry the secret from ``owner.key``: see :mod:`.transport`), starts an owner when
there is none
(detached, so a kernel restart does not stop it) and waits for it with a deadline,
replaces an owner of another nbmemory version or model, and sends a request once more
after the owner died (writes carry a request id, so that never applies one twice).
Only the standard library and nbmemory's light modules are imported here: no torch,
no DuckDB, no numpy.
"""

from __future__ import annotations

import http.client
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
from typing import Any, Iterator

from .. import __version__, errors
from ..errors import NbMemoryError, StoreLocked, StoreUnavailable
from ..lock import prepare_directory, try_lock, unlock
from . import codec, transport as transports
from ..operations import operation as lookup
from .protocol import (EXIT_LOCKED, HEADER_MODEL, HEADER_PROTOCOL, HEADER_VERSION, LOG_NAME,
                       PROTOCOL, SPAWN_LOCK_NAME, check_private_directory,
                       default_idle_timeout, lock_held, lock_holder, read_info,
                       read_start_error)

# An owner outlives the kernel that started it: a session of its own on POSIX, a process
# group of its own and no console window on Windows.
DETACHED: dict[str, Any] = (
    {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP | subprocess.CREATE_NO_WINDOW}
    if os.name == "nt" else {"start_new_session": True})
STARTUP_TIMEOUT = 120.0
REQUEST_TIMEOUT = 600.0
PROGRESS_POLL = 0.25  # seconds between progress questions during long work
# How often a request that may have reached a dying owner is sent again (only requests
# that carry a request id, which every write from Memory does, or only read; others are
# reported instead).
MAX_RESENDS = 2


class _NotSent(Exception):
    """The request never reached an owner: sending it again is always safe."""


class _Lost(Exception):
    """The owner went away after the request was sent: it may or may not have been applied."""


class _Refused(Exception):
    """A TCP listener refused the request's secret (403): nothing was done."""

    def __init__(self, payload: dict[str, Any]):
        super().__init__(payload.get("message", "refused"))
        self.pid = payload.get("pid")


class _Connection(http.client.HTTPConnection):
    """HTTP to one owner at ``address``; every request carries the address's secret."""

    def __init__(self, address: transports.Address, timeout: float | None):
        super().__init__("nbmemory", timeout=timeout)
        self.address = address

    def connect(self) -> None:
        self.sock = self.address.connect(self.timeout)


def _connect(directory: Path, timeout: float | None) -> _Connection:
    address = transports.find(directory)
    if address is None:
        raise _NotSent("no owner address in owner.json")
    conn = _Connection(address, timeout)
    try:
        conn.connect()
    except (FileNotFoundError, ConnectionError, BlockingIOError) as exc:
        conn.close()  # BlockingIOError: the listen backlog is full
        raise _NotSent(str(exc)) from exc
    return conn


def _exchange(conn: _Connection, method: str, path: str, body: bytes | None,
              headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    headers = {**headers, **conn.address.headers()}
    try:
        conn.request(method, path, body=body, headers=headers)
    except (ConnectionError, FileNotFoundError) as exc:
        raise _NotSent(str(exc)) from exc
    try:
        response = conn.getresponse()
        data = response.read()
    except (http.client.RemoteDisconnected, http.client.IncompleteRead,
            http.client.BadStatusLine, ConnectionError) as exc:
        raise _Lost(str(exc)) from exc
    if response.will_close:
        conn.close()
    payload = json.loads(data or b"{}")
    if response.status == 403 and (payload.get("error") or {}).get("type") == "Unauthorized":
        raise _Refused(payload["error"])
    return response.status, payload


def _error(payload: dict[str, Any], details: str = "") -> NbMemoryError:
    """The owner's error as the same NbMemoryError subclass (``details`` appended)."""
    return errors.from_dict(payload, details)


def _last_log_line(directory: Path, offset: int = 0) -> str:
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


def _start_error(directory: Path, proc: subprocess.Popen, log_offset: int) -> NbMemoryError:
    """Why an owner we started exited: the error it recorded, as the same class, in one
    line that names the log for the details."""
    details = f"(details: {directory / LOG_NAME})"
    recorded = read_start_error(directory, proc.pid)
    if recorded:
        cls = getattr(errors, str(recorded.get("type")), None)
        if isinstance(cls, type) and issubclass(cls, NbMemoryError):
            return _error(recorded, details)
        return StoreUnavailable(f"The store's owner process could not start: "
                                f"{recorded.get('type')}: {recorded.get('message', '')} {details}")
    last = _last_log_line(directory, log_offset)
    return StoreUnavailable(f"The store's owner process could not start (exit status "
                            f"{proc.returncode}){': ' + last if last else ''} {details}")


def _is_service(directory: Path, pid: int) -> bool:
    info = read_info(directory)
    return bool(info) and info.get("pid") == pid


class ServiceBackend:
    """A :class:`~nbmemory.memory.Backend` talking to the owner of ``directory``."""

    def __init__(self, directory: str | os.PathLike, *, model: str | None = None,
                 idle_timeout: float | None = None, min_score: float | None = None,
                 startup_timeout: float = STARTUP_TIMEOUT,
                 request_timeout: float | None = REQUEST_TIMEOUT):
        self.directory = Path(directory).expanduser().resolve()
        self.model = model
        self.transport = transports.choose()  # for the owners this client starts
        self.idle_timeout = default_idle_timeout() if idle_timeout is None else idle_timeout
        self.min_score = min_score
        self.startup_timeout = startup_timeout
        self.request_timeout = request_timeout
        self._headers = {"Content-Type": "application/json", HEADER_VERSION: __version__,
                         HEADER_PROTOCOL: str(PROTOCOL)}
        if model:
            self._headers[HEADER_MODEL] = model
        self._idle: list[_Connection] = []
        self._pool = threading.Lock()
        self._starting = threading.Lock()
        self._starting_owner: subprocess.Popen | None = None  # started, not yet answering
        self._children: list[subprocess.Popen] = []
        self._log_offset = 0
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
                    conn = _connect(self.directory, self.request_timeout)
                    try:
                        _, state = _exchange(conn, "GET", f"/v{PROTOCOL}/progress/{token}",
                                             None, self._headers)
                    finally:
                        conn.close()
                except (_NotSent, _Lost, _Refused, OSError, NbMemoryError):
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
        lost, replaced = 0, False
        for _ in range(6):
            try:
                status, payload = self._send(body, timeout)
            except _NotSent:
                self._drop_connections()
                self.ensure_owner()
                continue
            except _Refused as exc:  # nothing was done
                self._drop_connections()
                refusal = transports.refused_by_owner(self.directory, exc.pid)
                if refusal is not None:
                    raise refusal from None
                self.ensure_owner()
                continue
            except _Lost as exc:
                self._drop_connections()
                if lost >= MAX_RESENDS or not resend_safe:
                    raise StoreUnavailable(
                        f"The store's owner stopped while handling {operation} ({exc}); it may "
                        f"or may not have been applied. Check, then try again. "
                        f"Owner log: {self.directory / LOG_NAME}") from None
                lost += 1
                self.ensure_owner()
                continue
            error = payload.get("error")
            if error is None:
                return codec.decode(payload["result"])
            if error.get("type") == "OwnerExiting":
                self._drop_connections()
                self.ensure_owner()
                continue
            if error.get("type") == "OwnerMismatch" and not replaced:
                replaced = True
                self._replace_owner(error)
                continue
            raise _error(error)
        raise StoreUnavailable(f"Could not reach the owner of {self.directory}; see "
                               f"{self.directory / LOG_NAME}")

    def close(self) -> None:
        self.closed = True
        self._drop_connections()
        self._reap()

    # -- connections ----------------------------------------------------------------------

    def _send(self, body: bytes, timeout: float | None) -> tuple[int, dict[str, Any]]:
        with self._pool:
            if self._pid != os.getpid():  # forked: the connections belong to the parent
                self._idle, self._pid = [], os.getpid()
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = _connect(self.directory, self.request_timeout)
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        try:
            status, payload = _exchange(conn, "POST", f"/v{PROTOCOL}/call", body, self._headers)
        except (_NotSent, _Lost, _Refused):
            conn.close()
            raise
        except TimeoutError:
            conn.close()
            raise StoreUnavailable(
                f"The store's owner did not answer within {timeout:g} s. It may be stuck: see "
                f"{self.directory / LOG_NAME}, or stop it (nbmemory stop --store "
                f"{self.directory}).") from None
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
            conn = _connect(self.directory, 5.0)
            try:
                status, hello = _exchange(conn, "GET", "/hello", None, {})
            finally:
                conn.close()
        except _Refused as exc:
            refusal = transports.refused_by_owner(self.directory, exc.pid)
            if refusal is not None:
                raise refusal from None
            return False
        except (_NotSent, _Lost, OSError):
            return False
        return status == 200 and hello.get("state") == "serving"

    # -- finding or starting the owner ----------------------------------------------------

    def ensure_owner(self) -> None:
        """Return once an owner accepts connections; start one if there is none."""
        with self._starting:
            self._ensure_owner()

    def _ensure_owner(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        delay = 0.005
        foreign_since = None
        while True:
            if self._ping():
                self._starting_owner = None  # whatever happens to it now is not a failed start
                return
            check_private_directory(self.directory)
            self._check_starting_owner()
            holder = lock_holder(self.directory)
            if holder is not None and holder > 0 and not _is_service(self.directory, holder):
                # The lock is held by a process that is not (yet) an owner service.
                foreign_since = foreign_since or time.monotonic()
                if time.monotonic() - foreign_since > 0.5:
                    raise StoreLocked(
                        f"The store {self.directory} is owned by another process (pid {holder}) "
                        "that does not serve other processes: it opened the store in-process "
                        "(a script, or a front end in local mode). Close it, then try again.",
                        pid=holder)
            elif holder is None and self._starting_owner is None:
                foreign_since = None
                self._spawn(deadline)
            if time.monotonic() > deadline:
                last = _last_log_line(self.directory, self._log_offset)
                raise StoreUnavailable(
                    f"No owner of {self.directory} answered within {self.startup_timeout:g} s"
                    f"{' (its log ends: ' + last + ')' if last else ''}; try again, or stop it "
                    f"with: nbmemory stop --store {self.directory} "
                    f"(details: {self.directory / LOG_NAME})")
            time.sleep(delay)
            delay = min(delay * 1.5, 0.1)

    def _spawn(self, deadline: float) -> None:
        """Start an owner unless another client is doing so (``spawn.lock``)."""
        prepare_directory(self.directory)  # as the engine would: 0700, .gitignore in git
        check_private_directory(self.directory)
        fd = os.open(self.directory / SPAWN_LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
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
        if log_path.exists() and log_path.stat().st_size > 1_000_000:
            try:
                os.replace(log_path, log_path.with_name(LOG_NAME + ".old"))
            except PermissionError:  # Windows: the last owner's log is still open
                pass
        command = [sys.executable, "-m", "nbmemory.service", "--store", str(self.directory),
                   "--idle-timeout", str(self.idle_timeout), "--transport", self.transport]
        if self.model:
            command += ["--model", self.model]
        log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._log_offset = os.fstat(log_fd).st_size
        try:
            proc = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log_fd, stderr=log_fd,
                cwd=self.directory, close_fds=True, **DETACHED,
                env={**os.environ, "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1")})
        finally:
            os.close(log_fd)
        self._starting_owner = proc
        self._children.append(proc)
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
        if proc.returncode not in (0, EXIT_LOCKED):
            raise _start_error(self.directory, proc, self._log_offset)

    def _reap(self) -> None:
        """Collect owners we started that have exited since (no zombies in the kernel)."""
        self._children = [p for p in self._children if p.poll() is None]

    def _replace_owner(self, error: dict[str, Any]) -> None:
        """Ask an owner of another version or model to exit, then start a matching one."""
        reason = (f"client pid {os.getpid()} runs nbmemory {__version__}"
                  + (f" with model {self.model}" if self.model else "")
                  + f": {error.get('message', '')}")
        self._drop_connections()
        with self._starting:
            try:
                conn = _connect(self.directory, 10.0)
                try:
                    _exchange(conn, "POST", "/shutdown", json.dumps({"reason": reason}).encode(),
                              {"Content-Type": "application/json"})
                finally:
                    conn.close()
            except (_NotSent, _Lost, _Refused):
                pass
            wait_for_exit(self.directory, self.startup_timeout)
            self._ensure_owner()


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
    ``state``, ``uptime_s``, ``queue`` when it answers) and "local" for a process that
    opened the store in-process.
    """
    directory = Path(store).expanduser().resolve()
    pid = lock_holder(directory)
    if pid is None:
        return None
    info = read_info(directory)
    if not info or info.get("pid") != pid:
        return {"mode": "local", "pid": pid, "store": str(directory)}
    out = {"mode": "service", **info}
    try:
        conn = _connect(directory, 2.0)
        try:
            status, hello = _exchange(conn, "GET", "/hello", None, {})
        finally:
            conn.close()
        if status == 200:
            out.update(hello)
    except (_NotSent, _Lost, _Refused, OSError, NbMemoryError):
        pass
    return out


def stop(store: str | os.PathLike, *, timeout: float = 30.0) -> bool:
    """Ask the owner of ``store`` to exit and wait until it has; False if none was running.

    An owner that does not answer is sent SIGTERM. Raises :class:`StoreLocked` when the
    store is open in-process by a script (that is not ours to stop).
    """
    directory = Path(store).expanduser().resolve()
    info = owner_info(directory)
    if info is None:
        return False
    if info["mode"] == "local":
        raise StoreLocked(f"The store {directory} is open in-process by pid {info['pid']}, "
                          "not by an owner service; close that program instead.",
                          pid=info["pid"])
    try:
        conn = _connect(directory, 5.0)
        try:
            _exchange(conn, "POST", "/shutdown",
                      json.dumps({"reason": f"stop requested by pid {os.getpid()}"}).encode(),
                      {"Content-Type": "application/json"})
        finally:
            conn.close()
    except (_NotSent, _Lost, _Refused, OSError, NbMemoryError):
        _terminate(info["pid"])
    if not wait_for_exit(directory, timeout):
        _terminate(info["pid"])
        if not wait_for_exit(directory, 10.0):
            raise StoreUnavailable(f"The owner of {directory} (pid {info['pid']}) did not stop; "
                                   f"kill it with: kill -9 {info['pid']}")
    return True


def _terminate(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
