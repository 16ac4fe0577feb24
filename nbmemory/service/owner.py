"""The owner process: holds the store's lock, engine and model, and serves other processes.

JSON over HTTP/1.1 on a unix socket (mode 0600, peers of other users refused) or on
loopback TCP with a per-owner secret: see :mod:`.transport` for which and why. Engine
calls are serialised by the engine's own lock; concurrent remembers are batched into one
embedding call and one transaction. The owner exits after ``idle_timeout`` seconds
without requests, on ``POST /shutdown`` or on SIGTERM.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import queue
import re
import signal
import socket
import socketserver
import sys
import threading
import time
import traceback
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from typing import Any

from .. import __version__
from ..config import Settings
from ..errors import NbMemoryError, StoreLocked
from ..lock import OwnerLock, locking_name, prepare_directory, read_owner_pid
from ..operations import operation as lookup
from . import codec, transport as transports
from .protocol import (DEFAULT_IDLE_TIMEOUT, ERROR_NAME, HEADER_MODEL, HEADER_PROTOCOL,
                       HEADER_VERSION, INFO_NAME, LOG_NAME, PROTOCOL,
                       STATUS_BY_ERROR, check_private_directory, read_info,
                       same_model, write_info)

MAX_BATCH = 64
# A batch waits up to LINGER seconds for clients that sent remembers lately (each has at
# most one in flight) and are probably about to send the next: 4 writers then share one
# embedding call and one transaction instead of alternating batches of 1 and 3.
LINGER = 0.005
RECENT = 0.5
SHUTDOWN_GRACE = 60.0
CALL_ROUTE = re.compile(r"/v(\d+)/call")  # fullmatch: any protocol number, then the handshake


def log(message: str) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    print(f"{stamp} nbmemory owner {os.getpid()}: {message}", file=sys.stderr, flush=True)


def serve(store: str | os.PathLike, *, model: str | None = None,
          idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT, settings: Settings | None = None,
          lock_wait: float = 1.0, transport: str | None = None) -> None:
    """Own the store at ``store`` and serve it until idle, asked to stop, or signalled.

    ``model`` None keeps the model the store's vectors were made with (the default model
    for a new store). ``idle_timeout`` None or <= 0 never exits for idleness.
    ``transport`` ("unix" or "tcp") None: ``NBMEMORY_TRANSPORT``, else the platform's
    default. Raises :class:`StoreLocked` when another process owns the store.
    """
    transport = transports.choose(
        None if transport is None else {transports.TRANSPORT_ENV: transport})
    directory = Path(store).expanduser().resolve()
    prepare_directory(directory)
    check_private_directory(directory)
    lock = OwnerLock(directory)
    deadline = time.monotonic() + lock_wait
    while not lock.try_acquire():  # a client probing the lock holds it for microseconds
        if time.monotonic() > deadline:
            pid = read_owner_pid(directory)
            raise StoreLocked(f"The store {directory} already has an owner (pid {pid}).", pid=pid)
        time.sleep(0.02)
    (directory / ERROR_NAME).unlink(missing_ok=True)  # an earlier owner's failure to start
    started = time.time()
    info = {"pid": os.getpid(), "version": __version__, "protocol": PROTOCOL,
            "state": "starting", "started": started, "store": str(directory),
            "transport": transport, "lock": locking_name(), "log": str(directory / LOG_NAME),
            "idle_timeout": idle_timeout, "model": model}
    engine = None
    try:
        write_info(directory, info)
        engine, model = _open_engine(directory, lock, model, settings)
        info["model"] = model
        Owner(directory, engine, model=model, idle_timeout=idle_timeout, info=info).run()
        log("stopped")
    finally:
        current = read_info(directory)
        if current and current.get("pid") == os.getpid():
            with contextlib.suppress(PermissionError):  # Windows: a client reads it
                (directory / INFO_NAME).unlink(missing_ok=True)
        try:
            if engine is not None:
                engine.close()
        finally:
            lock.release()  # the last thing: whoever waits for the lock may start now


def _open_engine(directory: Path, lock: OwnerLock, model: str | None,
                 settings: Settings | None):
    from ..embed import make_embedder, model_name
    from ..engine import Engine
    from ..store import Store

    settings = settings or Settings()
    if model is None:
        store = Store(directory)  # the lock is ours: nobody else opens the file
        try:
            stored = store.meta("embedder")
        finally:
            store.close()
        model = settings.model
        if stored:
            model = stored if stored.startswith("hash:") else model_name(stored)
    embedder = make_embedder(model)
    engine = Engine(directory, settings=replace(settings, model=model), embedder=embedder,
                    owner_lock=lock)
    return engine, model


class RememberBatcher:
    """Collects concurrent remembers and writes them with :meth:`Engine.remember_batch`."""

    def __init__(self, engine):
        self.engine = engine
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self.batches = 0
        self.remembered = 0
        self.busy = 0.0  # seconds spent in remember_batch
        self._thread = threading.Thread(target=self._run, name="nbmemory-remember", daemon=True)
        self._thread.start()

    def submit(self, arguments: dict[str, Any], client: Any = None):
        """Remember through the next batch; ``client`` identifies the sender's connection."""
        future: Future = Future()
        self._queue.put((arguments, future, client))
        return future.result()

    def stop(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=SHUTDOWN_GRACE)

    def _run(self) -> None:
        recent: dict[Any, float] = {}
        while True:
            item = self._queue.get()
            if item is None:
                return
            start = time.monotonic()
            recent = {c: t for c, t in recent.items() if start - t < RECENT}
            recent[item[2]] = start
            expected, deadline = len(recent), start + LINGER
            batch = [item]
            while len(batch) < MAX_BATCH:
                wait = deadline - time.monotonic() if len(batch) < expected else 0
                try:
                    item = self._queue.get(timeout=wait) if wait > 0 else self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    self._queue.put(None)
                    break
                batch.append(item)
                recent[item[2]] = start
            self.batches += 1
            self.remembered += len(batch)
            began = time.perf_counter()
            try:
                results = self.engine.remember_batch([arguments for arguments, _, _ in batch])
            except BaseException as exc:  # noqa: BLE001 - handed to every waiting request
                results = [exc] * len(batch)
            self.busy += time.perf_counter() - began
            for (_, future, _), result in zip(batch, results):
                if isinstance(result, BaseException):
                    future.set_exception(result)
                else:
                    future.set_result(result)


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    """On a unix socket path (``secret`` None) or on loopback TCP (``address`` a tuple)."""

    allow_reuse_address = False
    daemon_threads = True
    block_on_close = False
    request_queue_size = 128

    def __init__(self, address, owner: Owner, secret: str | None = None):
        self.owner = owner
        self.secret = secret
        self.address_family = socket.AF_INET if isinstance(address, tuple) else socket.AF_UNIX
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        exclusive = getattr(socket, "SO_EXCLUSIVEADDRUSE", None)  # Windows: no port sharing
        if exclusive is not None and self.address_family == socket.AF_INET:
            self.socket.setsockopt(socket.SOL_SOCKET, exclusive, 1)
        # HTTPServer.server_bind would look up a host name (slow for TCP, none for unix).
        socketserver.TCPServer.server_bind(self)
        port = self.server_address[1] if isinstance(self.server_address, tuple) else 0
        self.server_name, self.server_port = "nbmemory", port


class Owner:
    """The running service: socket, request bookkeeping, idle timer, shutdown."""

    def __init__(self, directory: Path, engine, *, model: str,
                 idle_timeout: float | None, info: dict[str, Any]):
        self.directory = directory
        self.transport = info.get("transport", "unix")
        self.engine = engine
        self.model = model
        self.idle_timeout = idle_timeout if idle_timeout and idle_timeout > 0 else None
        self.info = info
        self.socket_path: Path | None = None  # unix only
        self._socket_inode: int | None = None
        self.started = info["started"]
        self._state = threading.Lock()
        self.in_flight = 0  # requests not yet answered
        self.pending = 0  # requests not yet computed: the queue
        self.served = 0
        self.last_active = time.monotonic()
        self.stopping = False
        self.stop_reason = ""
        self._stopped = threading.Event()
        self.batcher = RememberBatcher(engine)
        self.server: _Server | None = None
        self.progress: dict[str, tuple[int, int]] = {}  # token -> (done, total) of long work

    # -- lifecycle --------------------------------------------------------------------------

    def run(self) -> None:
        self.server = self._listen()
        self.info.update(state="serving", ready=time.time(), transport=self.transport,
                         auth=transports.auth_of(self.transport), **self._address())
        write_info(self.directory, self.info)
        if threading.current_thread() is threading.main_thread():
            for name in ("SIGTERM", "SIGINT", "SIGHUP"):  # Windows has no SIGHUP
                if hasattr(signal, name):
                    signal.signal(getattr(signal, name),
                                  lambda *_: self.request_shutdown("signal"))
        log(f"serving {self.directory} (nbmemory {__version__}, model {self.model}, "
            f"idle timeout {self.idle_timeout or 'none'} s) on "
            f"{transports.describe(self.info)}")
        threading.Thread(target=self._warm_up, name="nbmemory-warm-up", daemon=True).start()
        if self.idle_timeout:
            threading.Thread(target=self._watch_idle, name="nbmemory-idle", daemon=True).start()
        try:
            self.server.serve_forever(poll_interval=0.2)
        finally:
            self._drain()

    def _listen(self) -> _Server:
        """The listening server: a unix socket if chosen and a short path exists, else TCP."""
        if self.transport == "unix":
            path = transports.socket_path(self.directory)
            if path is not None:
                path.unlink(missing_ok=True)  # we hold the lock: any socket file is stale
                old_umask = os.umask(0o177)
                try:
                    server = _Server(str(path), self)
                finally:
                    os.umask(old_umask)
                os.chmod(path, 0o600)
                self.socket_path, self._socket_inode = path, os.stat(path).st_ino
                return server
            log(f"no socket path of at most {transports.MAX_SOCKET_PATH} bytes for "
                f"{self.directory} (nor in a private runtime directory): serving TCP instead")
            self.transport = "tcp"
        secret = transports.new_secret()
        server = _Server((transports.LOOPBACK, 0), self, secret=secret)
        transports.write_secret(self.directory, secret)  # before owner.json names the port
        return server

    def _address(self) -> dict[str, Any]:
        if self.transport == "unix":
            return {"socket": str(self.socket_path), "port": None}
        return {"socket": None, "port": self.server.server_address[1]}

    def request_shutdown(self, reason: str) -> None:
        with self._state:
            if self.stopping:
                return
            self.stopping = True
            self.stop_reason = reason
        log(f"stopping: {reason}")
        self._unlink_socket()  # new clients now find no owner and wait for the lock
        self.info.update(state="stopping", socket=None, port=None)  # nor an address
        write_info(self.directory, self.info)
        threading.Thread(target=self.server.shutdown, daemon=True).start()

    def _drain(self) -> None:
        """Answer what was accepted, wait for requests in flight, then let go."""
        server = self.server
        server.socket.setblocking(False)
        while True:  # connections already queued on the socket get "owner exiting"
            try:
                connection, address = server.socket.accept()
            except (BlockingIOError, OSError):
                break
            connection.setblocking(True)
            server.process_request(connection, address)
        deadline = time.monotonic() + SHUTDOWN_GRACE
        while time.monotonic() < deadline:
            with self._state:
                if self.in_flight == 0:
                    break
            time.sleep(0.01)
        self.batcher.stop()
        server.server_close()
        self._unlink_socket()
        self.forget_secret()

    def _unlink_socket(self) -> None:
        if self.socket_path is None:
            return
        try:
            if os.stat(self.socket_path).st_ino == self._socket_inode:
                self.socket_path.unlink()
        except FileNotFoundError:
            pass

    def forget_secret(self) -> None:
        """Remove ``owner.key`` if it is still this owner's (TCP)."""
        secret = self.server.secret if self.server else None
        if secret and transports.read_secret(self.directory) == secret:
            (self.directory / transports.SECRET_NAME).unlink(missing_ok=True)

    def _warm_up(self) -> None:
        try:
            if self.engine.warm_up():
                log(f"model {self.model} loaded")
            else:
                log(f"model {self.model} not loaded: the store's vectors need re-embedding")
        except Exception as exc:  # reported again to whoever needs the model
            log(f"could not load the model {self.model}: {exc}")

    def _watch_idle(self) -> None:
        interval = max(0.05, min(1.0, self.idle_timeout / 10))
        while not self.stopping:
            time.sleep(interval)
            with self._state:
                idle = (self.in_flight == 0
                        and time.monotonic() - self.last_active > self.idle_timeout)
            if idle:
                self.request_shutdown(f"idle for {self.idle_timeout:g} s")

    # -- requests ---------------------------------------------------------------------------

    def begin(self) -> bool:
        with self._state:
            if self.stopping:
                return False
            self.in_flight += 1
            self.pending += 1
            return True

    def computed(self) -> None:
        with self._state:
            self.pending -= 1

    def end(self) -> None:
        with self._state:
            self.in_flight -= 1
            self.served += 1
            self.last_active = time.monotonic()

    def hello(self) -> dict[str, Any]:
        with self._state:
            queued = self.pending
        return {"service": "nbmemory", "version": __version__, "protocol": PROTOCOL,
                "pid": os.getpid(), "store": str(self.directory), "model": self.model,
                "state": "stopping" if self.stopping else "serving",
                "uptime_s": round(time.time() - self.started, 1), "queue": queued,
                "served": self.served, "idle_timeout": self.idle_timeout,
                "remember_batches": self.batcher.batches, "remembered": self.batcher.remembered,
                "remember_busy_s": round(self.batcher.busy, 3)}

    def mismatch(self, headers, path_protocol: str | None = None) -> str | None:
        """What differs between the client and this owner, or None.

        ``path_protocol`` is the N of ``/vN/call``: a client of another protocol is told so
        (409) rather than that the route does not exist, so it replaces the owner.
        """
        version, model = headers.get(HEADER_VERSION), headers.get(HEADER_MODEL)
        for wanted in (headers.get(HEADER_PROTOCOL), path_protocol):
            if wanted not in (None, str(PROTOCOL)):
                return f"protocol {wanted} (owner speaks {PROTOCOL})"
        if version and version != __version__:
            return f"nbmemory {version} (owner runs {__version__})"
        if model and not same_model(model, self.model):
            return f"model {model} (owner uses {self.model})"
        return None

    def call(self, operation: str, arguments: dict[str, Any], client: Any = None,
             progress_token: str | None = None) -> Any:
        op = lookup(operation)
        if op.name == "remember":
            return self.batcher.submit(arguments, client)
        if progress_token and op.progress:
            def report(done: int, total: int) -> None:
                self.progress[progress_token] = (done, total)

            arguments["progress"] = report
        try:
            result = getattr(self.engine, operation)(**arguments)
        finally:
            if progress_token:
                self.progress.pop(progress_token, None)
        if operation == "status":
            hello = self.hello()
            result = {**result, "mode": "service", "queue": max(0, hello["queue"] - 1),
                      "owner_pid": hello["pid"], "transport": self.transport,
                      "socket": str(self.socket_path) if self.socket_path else None,
                      "port": self.info.get("port"),
                      "owner_log": str(self.directory / LOG_NAME),
                      "idle_timeout_s": self.idle_timeout, "served": hello["served"]}
        return result


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = f"nbmemory/{__version__}"
    server: _Server

    def address_string(self) -> str:
        return "local"

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - stdlib signature
        pass

    def handle(self) -> None:
        problem = transports.check_peer(self.connection, self.client_address, self.server.secret)
        if problem:
            log(f"refused {problem}")
            return
        super().handle()

    def _refused(self) -> bool:
        """TCP: answer 403 (and log it) unless the request carries this owner's secret."""
        what = transports.check_secret(self.headers.get(transports.HEADER_SECRET),
                                       self.server.secret)
        if what is None:
            return False
        host, port = self.client_address[:2]
        log(f"refused {self.command} {self.path} from {host}:{port} with {what} "
            f"({transports.HEADER_SECRET})")
        self._reply(403, {"error": transports.refusal(what, os.getpid())}, close=True)
        return True

    def _reply(self, status: int, payload: dict[str, Any], close: bool = False) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"{}")

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        if self._refused():
            return
        prefix = f"/v{PROTOCOL}/progress/"
        if self.path.startswith(prefix):
            done_total = self.server.owner.progress.get(self.path[len(prefix):])
            return self._reply(200, {"done": done_total[0], "total": done_total[1]}
                               if done_total else {})
        if self.path != "/hello":
            return self._reply(404, {"error": {"type": "NotFound", "message": self.path}})
        self._reply(200, self.server.owner.hello())

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        if self._refused():
            return
        owner = self.server.owner
        if self.path == "/shutdown":
            request = self._body()
            self._reply(200, {"stopping": True, "pid": os.getpid()}, close=True)
            owner.request_shutdown(str(request.get("reason") or "asked to stop"))
            return
        route = CALL_ROUTE.fullmatch(self.path)
        request = self._body()
        if route is None:
            return self._reply(404, {"error": {"type": "NotFound",
                                               "message": f"No route {self.path}"}})
        # The handshake comes before anything else, whatever protocol the path names.
        mismatch = owner.mismatch(self.headers, route.group(1))
        if mismatch:
            return self._reply(409, {"error": {
                "type": "OwnerMismatch", "message": f"The client wants {mismatch}.",
                "version": __version__, "protocol": PROTOCOL, "model": owner.model,
                "pid": os.getpid()}})
        if not owner.begin():
            return self._reply(503, {"error": {
                "type": "OwnerExiting",
                "message": f"The store's owner is stopping ({owner.stop_reason})."}}, close=True)
        try:
            try:
                status, payload = self._call(owner, request)
            finally:
                owner.computed()  # a client's next request sees an empty queue
            self._reply(status, payload)
        finally:
            owner.end()  # after replying: shutdown waits for this

    def _call(self, owner: Owner, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        operation = request.get("operation")
        try:
            arguments = codec.decode(request.get("arguments") or {})
            result = owner.call(operation, arguments, id(self.connection),
                                progress_token=request.get("progress_token"))
            return 200, {"result": codec.encode(result)}
        except NbMemoryError as exc:
            return STATUS_BY_ERROR.get(type(exc).__name__, 400), {"error": exc.to_dict()}
        except Exception as exc:  # noqa: BLE001 - reported to the client, logged here
            log(f"{operation} failed:\n{traceback.format_exc()}")
            return 500, {"error": {"type": type(exc).__name__, "message": str(exc)}}
