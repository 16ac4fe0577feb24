"""HTTP to one owner: connecting, one exchange, and what can go wrong on the way.

Shared by the client (:mod:`.client`) and the control functions (:mod:`.control`).
Standard library only.
"""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from typing import Any

from ..errors import StoreUnavailable
from . import transport as transports


class NotSent(Exception):
    """The request never reached an owner: sending it again is always safe."""


class Lost(Exception):
    """The owner went away after the request was sent: it may or may not have been applied."""


class Refused(Exception):
    """A TCP listener refused the request's secret (403): nothing was done."""

    def __init__(self, payload: dict[str, Any]):
        super().__init__(payload.get("message", "refused"))
        self.pid = payload.get("pid")


class Connection(http.client.HTTPConnection):
    """HTTP to one owner at ``address``; every request carries the address's secret."""

    def __init__(self, address: transports.Address, timeout: float | None,
                 directory: Path | None = None):
        super().__init__("nbmemory", timeout=timeout)
        self.address = address
        self.directory = directory

    def connect(self) -> None:
        self.sock = self.address.connect(self.timeout)


def connect(directory: Path, timeout: float | None) -> Connection:
    address = transports.find(directory)
    if address is None:
        raise NotSent("no owner address in owner.json")
    conn = Connection(address, timeout, directory)
    try:
        conn.connect()
    except (FileNotFoundError, ConnectionError, BlockingIOError, TimeoutError) as exc:
        conn.close()  # BlockingIOError, or over TCP a timeout: the listen backlog is full
        raise NotSent(str(exc) or "the connection timed out") from exc
    return conn


def exchange(conn: Connection, method: str, path: str, body: bytes | None,
             headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    headers = {**headers, **conn.address.headers()}
    try:
        conn.request(method, path, body=body, headers=headers)
    except (ConnectionError, FileNotFoundError) as exc:
        raise NotSent(str(exc)) from exc
    try:
        response = conn.getresponse()
        data = response.read()
    except (http.client.RemoteDisconnected, http.client.IncompleteRead,
            http.client.BadStatusLine, ConnectionError) as exc:
        raise Lost(str(exc)) from exc
    if response.will_close:
        conn.close()
    try:
        payload = json.loads(data or b"{}")
    except ValueError:
        payload = None
    if not isinstance(payload, dict):
        conn.close()
        where = conn.address.socket or f"{transports.LOOPBACK}:{conn.address.port}"
        raise StoreUnavailable(
            f"Something that is not an nbmemory owner answered at {where} (status "
            f"{response.status}, not JSON). Stop whatever listens there, or remove "
            f"{directory_of(conn)}owner.json, then try again.")
    if response.status == 403 and (payload.get("error") or {}).get("type") == "Unauthorized":
        raise Refused(payload["error"])
    return response.status, payload


def directory_of(conn: Connection) -> str:
    return f"{conn.directory}/" if conn.directory else ""
