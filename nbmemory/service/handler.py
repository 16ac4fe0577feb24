"""The owner's HTTP side: the listening server and the handler of one connection.

Routes (docs/service-protocol.md): ``GET /hello``, ``POST /shutdown``, ``POST /v<N>/call``
(the handshake first, whatever ``N``), ``GET /v<N>/progress/TOKEN``. Each connection
says which client it belongs to (``X-NbMemory-Client``), so that the owner knows who is
connected when a client asks for another model (:meth:`Owner.others_connected`).
"""

from __future__ import annotations

import http.server
import json
import os
import re
import socket
import socketserver
import sys
import traceback
from typing import Any

from .. import __version__
from ..embed import DEFAULT_ALIASES
from ..errors import Command, EmbedderMismatch, NbMemoryError, StoreUnavailable
from ..files import disk_full
from ..operations import disk_full_error
from . import codec, transport as transports
from .log import log
from .protocol import HEADER_CLIENT, HEADER_MODEL, PROTOCOL, STATUS_BY_ERROR, OwnerGone

Owner = Any  # the owner.Owner serving this server (not imported: owner imports this)

CALL_ROUTE = re.compile(r"/v(\d+)/call")  # fullmatch: any protocol number, then the handshake
# Operations that switch the store to the client's model: a client asking for one may
# replace the owner even while others use it (they follow the store's new model).
SWITCHES_MODEL = ("reembed", "reindex")
UNPROVEN_TIMEOUT_S = 30  # a TCP connection's wait for its first request with the secret


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    """On a unix socket path (``secret`` None) or on loopback TCP (``address`` a tuple)."""

    allow_reuse_address = False
    daemon_threads = True
    block_on_close = False
    request_queue_size = 128

    def __init__(self, address, owner: Owner, secret: str | None = None):
        self.owner = owner
        self.secret = secret
        self.address_family = socket.AF_INET if isinstance(address, tuple) else socket.AF_UNIX
        super().__init__(address, Handler)

    def handle_error(self, request, client_address) -> None:
        """A client gone before its answer (it gave up waiting) is one line in the log, not
        a traceback per call (a resumed owner wrote 82 of them, which buried the log)."""
        exc = sys.exc_info()[1]
        if isinstance(exc, (BrokenPipeError, ConnectionResetError)):
            log(f"a client left before its answer ({type(exc).__name__})")
            return
        super().handle_error(request, client_address)

    def server_bind(self) -> None:
        exclusive = getattr(socket, "SO_EXCLUSIVEADDRUSE", None)  # Windows: no port sharing
        if exclusive is not None and self.address_family == socket.AF_INET:
            self.socket.setsockopt(socket.SOL_SOCKET, exclusive, 1)
        # HTTPServer.server_bind would look up a host name (slow for TCP, none for unix).
        socketserver.TCPServer.server_bind(self)
        port = self.server_address[1] if isinstance(self.server_address, tuple) else 0
        self.server_name, self.server_port = "nbmemory", port


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = f"nbmemory/{__version__}"
    server: Server

    def address_string(self) -> str:
        return "local"

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - stdlib signature
        pass

    def handle(self) -> None:
        problem = transports.check_peer(self.connection, self.client_address, self.server.secret)
        if problem:
            log(f"refused {problem}")
            return
        if self.server.secret is not None:
            # Any local process may connect over TCP: one that sends no request with the
            # secret does not hold a thread for long (an authorized connection may idle).
            self.connection.settimeout(UNPROVEN_TIMEOUT_S)
        try:
            super().handle()
        finally:
            self.server.owner.disconnected(id(self))

    def _refused(self) -> bool:
        """TCP: answer 403 (and log it) unless the request carries this owner's secret."""
        what = transports.check_secret(self.headers.get(transports.HEADER_SECRET),
                                       self.server.secret)
        if what is None:
            self.connection.settimeout(None)
            client = self.headers.get(HEADER_CLIENT)
            if client:
                self.server.owner.connected(id(self), client)
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
        body = json.loads(self.rfile.read(length) or b"{}")
        return body if isinstance(body, dict) else {}

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
            kind, what = mismatch
            if kind == "model" and request.get("operation") not in SWITCHES_MODEL:
                refusal = self._model_in_use(owner)
                if refusal:
                    return self._reply(409, {"error": refusal})
            return self._reply(409, {"error": {
                "type": "OwnerMismatch", "message": f"The client wants {what}.",
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

    def _model_in_use(self, owner: Owner) -> dict[str, Any] | None:
        """The error for a client that wants another model while other clients are
        connected (the owner is theirs too), or None when it may replace the owner."""
        others = owner.others_connected(self.headers.get(HEADER_CLIENT))
        if not others:
            return None
        wanted = self.headers.get(HEADER_MODEL)
        log(f"kept the model {owner.model}: a client asked for {wanted} while {others} other "
            f"client(s) are connected")
        # Unset means the default model (or NBMEMORY_MODEL): advice only when that is it.
        unset = ", or leave it unset" if owner.model in DEFAULT_ALIASES else ""
        error = EmbedderMismatch(
            f"The store's owner (pid {os.getpid()}) uses the model {owner.model} and serves "
            f"{others} other client(s) right now; this client is configured with {wanted}, "
            f"and will not stop it for them. Use the store's model (set the model to "
            f"{owner.model!r}{unset}), or switch the store to {wanted} for "
            f"everyone with {{0}} with the model set to {wanted}.", Command("reembed"))
        return {**error.to_dict(), "pid": os.getpid()}

    def _call(self, owner: Owner, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        operation = request.get("operation")
        try:
            arguments = codec.decode(request.get("arguments") or {})
            result = owner.call(operation, arguments, id(self.connection),
                                progress_token=request.get("progress_token"))
            return 200, {"result": codec.encode(result)}
        except OwnerGone as exc:  # the client sends it again, to the next owner
            return 503, {"error": {"type": "OwnerExiting",
                                   "message": f"The store's owner is stopping ({exc})."}}
        except NbMemoryError as exc:
            return STATUS_BY_ERROR.get(type(exc).__name__, 400), {"error": exc.to_dict()}
        except Exception as exc:  # noqa: BLE001 - reported to the client, logged here
            log(f"{operation} failed:\n{traceback.format_exc()}")
            full = disk_full(exc)
            if full:
                error = disk_full_error(operation, owner.directory, full)
                return 503, {"error": {**error.to_dict(), "pid": os.getpid()}}
            return 500, {"error": {"type": type(exc).__name__, "message": str(exc)}}
