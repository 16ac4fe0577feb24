"""The owner process: holds the store's lock, engine and model, and serves other processes.

JSON over HTTP/1.1 on a unix socket (mode 0600, peers of other users refused) or on
loopback TCP with a per-owner secret: see :mod:`.transport` for which and why, and
:mod:`.handler` for the routes. Engine calls are serialised by the engine's own lock;
concurrent remembers are batched (:mod:`.batcher`). The owner exits after
``idle_timeout`` seconds without requests, on ``POST /shutdown``, on SIGTERM (within a
second or two: what it acknowledged is committed already), and once its store directory,
lock file or socket is removed or replaced (a deleted scratch store must not keep a
process and its model alive).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from .. import __version__
from ..config import Settings
from ..errors import NbMemoryError, StoreLocked
from ..files import code_stamp, disk_full, identity
from ..lock import OwnerLock, locking_name, prepare_directory, read_owner_pid
from ..operations import operation as lookup
from . import transport as transports
from .batcher import RememberBatcher
from .handler import Server
from .log import log
from .protocol import (DEFAULT_IDLE_TIMEOUT, ERROR_NAME, HEADER_PROTOCOL, HEADER_MODEL,
                       HEADER_VERSION, INFO_NAME, LOG_NAME, PROTOCOL, OwnerGone, read_info,
                       replaces, remove_leftovers, same_model, write_info)

SHUTDOWN_GRACE = 60.0  # asked to stop: calls in flight may finish for this long
SIGNAL_GRACE = 1.0  # signalled: for this long (a batch in its transaction), then go
CLOSE_ON_SIGNAL = 1.5  # signalled: closing the store may take this long, then exit anyway
WATCH_INTERVAL = 1.0  # how often the owner checks its files (and its idle time)


def serve(store: str | os.PathLike, *, model: str | None = None,
          idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT, settings: Settings | None = None,
          lock_wait: float = 1.0, transport: str | None = None,
          hold: str | os.PathLike | None = None) -> None:
    """Own the store at ``store`` and serve it until idle, asked to stop, or signalled.

    ``model`` None keeps the model the store's vectors were made with (the default model
    for a new store). ``idle_timeout`` None or <= 0 never exits for idleness.
    ``transport`` ("unix" or "tcp") None: ``NBMEMORY_TRANSPORT``, else the platform's
    default. ``hold`` (tests): while that file exists, every call waits before it is
    computed, as if the model were still loading. Raises :class:`StoreLocked` when another
    process owns the store.

    Everything the owner and its engine create (the database, its WAL, the vector index,
    owner.json...) is created owner-only: the umask is 077 while it serves.
    """
    transport = transports.choose(
        None if transport is None else {transports.TRANSPORT_ENV: transport})
    directory = Path(store).expanduser().resolve()
    old_umask = os.umask(0o077)
    try:
        _serve(directory, model, idle_timeout, settings, lock_wait, transport,
               Path(hold) if hold else None)
    finally:
        os.umask(old_umask)


def _serve(directory: Path, model, idle_timeout, settings, lock_wait, transport, hold):
    prepare_directory(directory)  # refuses a directory other users own or can write to
    lock = OwnerLock(directory, service=True)
    deadline = time.monotonic() + lock_wait
    while not lock.try_acquire():  # a client probing the lock holds it for microseconds
        if time.monotonic() > deadline:
            pid = read_owner_pid(directory)
            raise StoreLocked(f"The store {directory} already has an owner (pid {pid}).", pid=pid)
        time.sleep(0.02)
    (directory / ERROR_NAME).unlink(missing_ok=True)  # an earlier owner's failure to start
    leftovers = remove_leftovers(directory)
    info = {"pid": os.getpid(), "version": __version__, "protocol": PROTOCOL,
            "state": "starting", "started": time.time(), "store": str(directory),
            "transport": transport, "lock": locking_name(), "log": str(directory / LOG_NAME),
            "idle_timeout": idle_timeout, "model": model}
    engine = owner = None
    try:
        if leftovers:
            log(f"removed {', '.join(leftovers)}, left by an owner that died writing them")
        write_info(directory, info)
        engine, model = _open_engine(directory, lock, model, settings)
        info["model"] = model
        owner = Owner(directory, engine, lock=lock, model=model, idle_timeout=idle_timeout,
                      info=info, hold=hold)
        owner.run()
    finally:
        with contextlib.suppress(OSError):  # Windows: a client reads it; or it is gone
            current = read_info(directory)
            if current and current.get("pid") == os.getpid():
                (directory / INFO_NAME).unlink(missing_ok=True)
        try:
            if engine is not None:
                _close(engine, owner)
        finally:
            lock.release()  # the last thing: whoever waits for the lock may start now
    log("stopped")


def _close(engine, owner: Owner | None) -> None:
    """Close the engine (save the vector index, close the database). A failure is logged,
    not raised: the journal is committed, and the next owner rebuilds what is missing.
    Once signalled (before or during the close), give it :data:`CLOSE_ON_SIGNAL` seconds,
    then exit without it. The close runs on a thread of its own so that the main thread
    stays free to take a signal while DuckDB checkpoints."""
    def close() -> None:
        try:
            engine.close()
        except Exception as exc:  # noqa: BLE001 - reported in the log
            full = disk_full(exc)
            log(f"could not close the store cleanly ({'disk full: ' + full if full else exc}); "
                f"everything acknowledged is committed, and the next owner rebuilds the vector "
                f"index from the store")

    closing = threading.Thread(target=close, name="nbmemory-close", daemon=True)
    began = time.monotonic()
    closing.start()
    while closing.is_alive():
        closing.join(0.05)
        if owner is None or owner.signalled is None:
            continue
        limit = max(began, owner.signalled) + CLOSE_ON_SIGNAL
        if closing.is_alive() and time.monotonic() > limit:
            log(f"stopped without closing the store (still busy {CLOSE_ON_SIGNAL:g} s after "
                f"the signal); what was acknowledged is committed, the next owner catches up")
            os._exit(0)


def _open_engine(directory: Path, lock: OwnerLock, model: str | None,
                 settings: Settings | None):
    from ..embed import make_embedder, model_name
    from ..engine import Engine
    from ..engine.away import close_store, open_or_away

    settings = settings or Settings()
    # Opened once, for the model's name and the engine: one connect timeout, not two.
    store = open_or_away(directory)  # the lock is ours: nobody else opens it
    try:
        stored = None if model else store.meta("embedder")
        if stored:
            model = stored if stored.startswith("hash:") else model_name(stored)
        model = model or settings.model
        embedder = make_embedder(model)
    except BaseException:
        close_store(store)
        raise
    return Engine(directory, settings=replace(settings, model=model), embedder=embedder,
                  owner_lock=lock, store=store), model  # it closes the store if it cannot open


class Owner:
    """The running service: socket, request bookkeeping, watchdog, shutdown."""

    def __init__(self, directory: Path, engine, *, model: str, idle_timeout: float | None,
                 info: dict[str, Any], lock: OwnerLock | None = None,
                 hold: Path | None = None, watch_interval: float = WATCH_INTERVAL):
        self.directory = directory
        self.transport = info.get("transport", "unix")
        self.engine = engine
        self.model = model
        self.idle_timeout = idle_timeout if idle_timeout and idle_timeout > 0 else None
        self.info = info
        self.lock = lock
        self.hold = hold
        self.watch_interval = watch_interval
        self.socket_path: Path | None = None  # unix only
        self._socket_inode: int | None = None
        self._directory_id = identity(directory)
        self._code = code_stamp()  # the code this process runs
        self.started = info["started"]
        self._state = threading.Lock()
        self.in_flight = 0  # requests not yet answered
        self.pending = 0  # requests not yet computed: the queue
        self.served = 0
        self.last_active = time.monotonic()
        self.stopping = False
        # When the first signal came (monotonic): from then on exit within a second or two.
        self.signalled: float | None = None
        self._signal: int | None = None  # its number, for the watch to act on
        self.stop_reason = ""
        self._wake = threading.Event()  # the watch: a signal came, or the owner stops
        self._info_broken = False
        self.connections: dict[int, str] = {}  # handler -> the client it says it is
        self.batcher = RememberBatcher(engine)
        self.server: Server | None = None
        self.progress: dict[str, tuple[int, int]] = {}  # token -> (done, total) of long work
        self._answered = threading.Event()  # a first call was answered (see _warm_up)

    # -- lifecycle --------------------------------------------------------------------------

    def run(self) -> None:
        self.server = self._listen()
        self.info.update(state="serving", ready=time.time(), transport=self.transport,
                         auth=transports.auth_of(self.transport), **self._address())
        write_info(self.directory, self.info)
        if threading.current_thread() is threading.main_thread():
            for name in ("SIGTERM", "SIGINT", "SIGHUP"):  # Windows has no SIGHUP
                if hasattr(signal, name):
                    signal.signal(getattr(signal, name), self._signalled)
        log(f"serving {self.directory} (nbmemory {__version__}, model {self.model}, "
            f"idle timeout {self.idle_timeout or 'none'} s) on "
            f"{transports.describe(self.info)}")
        self.engine.expect_model()
        threading.Thread(target=self._warm_up, name="nbmemory-warm-up", daemon=True).start()
        threading.Thread(target=self._watch, name="nbmemory-watch", daemon=True).start()
        try:
            self.server.serve_forever(poll_interval=0.2)
        finally:
            self._drain()

    def _signalled(self, number, _frame) -> None:
        """Runs on the main thread between two bytecodes, maybe while that thread holds a
        lock (the log's, the state's): so it takes none and writes nothing. It shortens
        the drain and the close (``signalled``) and wakes the watch, which stops the
        owner."""
        if self.signalled is not None:  # a second signal: go now (acknowledged = committed)
            os._exit(0)
        self.signalled = time.monotonic()
        self._signal = number
        self._wake.set()

    def _listen(self) -> Server:
        """The listening server: a unix socket if chosen and a short path exists, else TCP."""
        if self.transport == "unix":
            path = transports.socket_path(self.directory)
            if path is not None:
                path.unlink(missing_ok=True)  # we hold the lock: any socket file is stale
                old_umask = os.umask(0o177)
                try:
                    server = Server(str(path), self)
                finally:
                    os.umask(old_umask)
                os.chmod(path, 0o600)
                self.socket_path, self._socket_inode = path, os.stat(path).st_ino
                return server
            log(f"no socket path of at most {transports.MAX_SOCKET_PATH} bytes for "
                f"{self.directory} (nor in a private runtime directory): serving TCP instead")
            self.transport = "tcp"
        secret = transports.new_secret()
        server = Server((transports.LOOPBACK, 0), self, secret=secret)
        transports.write_secret(self.directory, secret)  # before owner.json names the port
        return server

    def _address(self) -> dict[str, Any]:
        if self.transport == "unix":
            return {"socket": str(self.socket_path), "port": None}
        return {"socket": None, "port": self.server.server_address[1]}

    def request_shutdown(self, reason: str) -> None:
        """Stop serving. Never raises: it must work whatever happened to the store's files
        (a full disk, a removed directory), from a request's thread or the watch's."""
        with self._state:
            if self.stopping:
                return
            self.stopping = True
            self.stop_reason = reason
        self._wake.set()
        log(f"stopping: {reason}")
        self._unlink_socket()  # new clients now find no owner and wait for the lock
        self.info.update(state="stopping", socket=None, port=None)  # nor an address
        try:
            write_info(self.directory, self.info)
        except (OSError, NbMemoryError) as exc:
            log(f"could not mark owner.json as stopping ({exc})")
        threading.Thread(target=self.server.shutdown, daemon=True).start()

    def _drain(self) -> None:
        """Answer what was accepted, wait for requests in flight, then let go. After a
        signal, calls still running after :data:`SIGNAL_GRACE` are abandoned: they were not
        acknowledged, and their clients send them again to the next owner."""
        server = self.server
        server.socket.setblocking(False)
        while True:  # connections already queued on the socket get "owner exiting"
            try:
                connection, address = server.socket.accept()
            except (BlockingIOError, OSError):
                break
            connection.setblocking(True)
            server.process_request(connection, address)
        began = time.monotonic()

        def deadline() -> float:  # a signal during a slow shutdown shortens it
            if self.signalled is None:
                return began + SHUTDOWN_GRACE
            return min(began + SHUTDOWN_GRACE, max(began, self.signalled) + SIGNAL_GRACE)

        while time.monotonic() < deadline():
            with self._state:
                if self.in_flight == 0:
                    break
            time.sleep(0.01)
        if not self.batcher.stop(max(0.1, deadline() - time.monotonic())):
            log("stopping with a remember batch still running (not acknowledged)")
        server.server_close()
        self._unlink_socket()
        self.forget_secret()

    def _unlink_socket(self) -> None:
        if self.socket_path is None:
            return
        try:
            if os.stat(self.socket_path).st_ino == self._socket_inode:
                self.socket_path.unlink()
        except OSError:
            pass

    def forget_secret(self) -> None:
        """Remove ``owner.key`` if it is still this owner's (TCP)."""
        secret = self.server.secret if self.server else None
        if secret and transports.read_secret(self.directory) == secret:
            with contextlib.suppress(OSError):
                (self.directory / transports.SECRET_NAME).unlink(missing_ok=True)

    def _warm_up(self) -> None:
        # Importing torch holds the interpreter for seconds: let the call that started this
        # owner (a user's first %recall) be answered first, from the keywords, or wait 1 s.
        self._answered.wait(1.0)
        try:
            if self.engine.warm_up():
                log(f"model {self.model} loaded")
            else:
                log(f"model {self.model} not loaded: the store's vectors need re-embedding")
        except Exception as exc:  # reported again to whoever needs the model
            log(f"could not load the model {self.model}: {exc}")

    # -- the watchdog -----------------------------------------------------------------------

    def _watch(self) -> None:
        """Exit when idle or when the store's files are no longer this owner's; keep
        owner.json naming this owner. A failure here is logged and the watch goes on."""
        interval = self.watch_interval
        if self.idle_timeout:
            interval = max(0.05, min(interval, self.idle_timeout / 10))
        while not self.stopping:
            self._wake.wait(interval)
            self._wake.clear()
            if self.stopping:
                return
            try:
                if self._signal is not None:
                    self.request_shutdown(f"signal {self._signal}")
                    return
                gone = self.files_gone() or self.upgraded()
                if gone:
                    self.request_shutdown(gone)
                elif self._idle():
                    self.request_shutdown(f"idle for {self.idle_timeout:g} s")
                else:
                    self._keep_info()
            except Exception as exc:  # noqa: BLE001 - the watch must not die
                log(f"watch: {type(exc).__name__}: {exc}")

    def files_gone(self) -> str | None:
        """Why this owner no longer owns the store's files, or None: its directory, its
        lock file (another process could lock a new one) or its socket (no client can
        reach it) was removed or replaced."""
        if identity(self.directory) != self._directory_id:
            return f"the store directory {self.directory} was removed or replaced"
        if self.lock is not None and not self.lock.intact():
            return f"its lock file {self.lock.path} was removed or replaced"
        if self.socket_path is not None:
            try:
                inode = os.lstat(self.socket_path).st_ino
            except OSError:
                inode = None
            if inode != self._socket_inode:
                return f"its socket {self.socket_path} was removed or replaced"
        return None

    def upgraded(self) -> str | None:
        """Why this owner's code is not nbmemory's as installed now, or None."""
        if code_stamp() != self._code:
            return "its nbmemory was upgraded or changed: the next call starts one of the new code"
        return None

    def _idle(self) -> bool:
        if not self.idle_timeout:
            return False
        with self._state:
            return (self.in_flight == 0
                    and time.monotonic() - self.last_active > self.idle_timeout)

    def _keep_info(self) -> None:
        """Write owner.json again if it no longer names this owner (clients find it there)."""
        current = read_info(self.directory)
        if current and current.get("pid") == os.getpid():
            self._info_broken = False
            return
        try:
            write_info(self.directory, self.info)
            log("owner.json was missing or not this owner's: written again")
            self._info_broken = False
        except (OSError, NbMemoryError) as exc:
            if not self._info_broken:
                log(f"owner.json is missing and cannot be written ({exc})")
            self._info_broken = True

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

    def connected(self, handler: int, client: str) -> None:
        with self._state:
            self.connections[handler] = client

    def disconnected(self, handler: int) -> None:
        with self._state:
            self.connections.pop(handler, None)

    def others_connected(self, client: str | None) -> int:
        """How many clients other than ``client`` hold a connection to this owner now."""
        with self._state:
            return len({c for c in self.connections.values() if c != client})

    def hello(self) -> dict[str, Any]:
        with self._state:
            queued, clients = self.pending, len(set(self.connections.values()))
        return {"service": "nbmemory", "version": __version__, "protocol": PROTOCOL,
                "pid": os.getpid(), "store": str(self.directory), "model": self.model,
                "state": "stopping" if self.stopping else "serving",
                "uptime_s": round(time.time() - self.started, 1), "queue": queued,
                "served": self.served, "clients": clients, "idle_timeout": self.idle_timeout,
                "remember_batches": self.batcher.batches, "remembered": self.batcher.remembered,
                "remember_busy_s": round(self.batcher.busy, 3)}

    def mismatch(self, headers, path_protocol: str | None = None) -> tuple[str, str] | None:
        """What differs between the client and this owner, as (``protocol``, ``version``
        (a client's not known to be older: it replaces this) or ``model``, words), or None.

        ``path_protocol`` is the N of ``/vN/call``: a client of another protocol is told so
        (409) rather than that the route does not exist, so it replaces the owner.
        """
        version, model = headers.get(HEADER_VERSION), headers.get(HEADER_MODEL)
        for wanted in (headers.get(HEADER_PROTOCOL), path_protocol):
            if wanted not in (None, str(PROTOCOL)):
                return "protocol", f"protocol {wanted} (owner speaks {PROTOCOL})"
        if version and replaces(version, __version__):
            return "version", f"nbmemory {version} (owner runs {__version__})"
        if model and not same_model(model, self.model):
            return "model", f"model {model} (owner uses {self.model})"
        return None

    def _held(self) -> None:
        """Tests: wait while the hold file exists (as if the model were loading, which
        does not stop when the owner does)."""
        while self.hold is not None and self.hold.exists():
            time.sleep(0.01)

    def call(self, operation: str, arguments: dict[str, Any], client: Any = None,
             progress_token: str | None = None) -> Any:
        """Do ``operation``; OwnerGone if the store's files are no longer this owner's,
        before or during it: the watch would see it within a second, while a write
        acknowledged meanwhile would be lost with the deleted files (the engine refuses
        to commit one)."""
        try:
            self._still_mine()
            try:
                return self._call(operation, arguments, client, progress_token)
            except Exception:
                self._still_mine()
                raise
        finally:
            self._answered.set()

    def _still_mine(self) -> None:
        gone = self.files_gone()
        if gone:
            self.request_shutdown(gone)
            raise OwnerGone(gone)

    def _call(self, operation: str, arguments: dict[str, Any], client: Any,
              progress_token: str | None) -> Any:
        op = lookup(operation)
        self._held()
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
