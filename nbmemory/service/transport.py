"""How other processes reach a store's owner: a unix socket whose peers are checked, or
loopback TCP with a secret. Standard library only: kernels import this.

**Which one.** ``NBMEMORY_TRANSPORT`` = ``auto`` (the default), ``unix`` or ``tcp``, read
by whoever starts an owner (a client passes its choice to the owner it spawns).

- ``unix`` where the platform has ``AF_UNIX`` *and* a call that names the peer's user:
  Linux ``SO_PEERCRED``; macOS and FreeBSD ``LOCAL_PEERCRED`` (``getsockopt(SOL_LOCAL=0,
  LOCAL_PEERCRED=1)`` gives a ``struct xucred``, the call ``getpeereid`` makes). The socket
  is mode 0600 in an owner-only directory and the owner drops peers of other users.
- ``tcp`` everywhere else (Windows, whose CPython has no ``AF_UNIX``; other platforms
  without a peer check): 127.0.0.1, a port the OS picks, and a fresh 256-bit secret per
  owner in ``owner.key`` (mode 0600 in the owner-only store directory) that every request
  carries in ``X-NbMemory-Secret``; the owner compares it in constant time. Jupyter's
  kernel connection files work the same way.

**Long paths.** A unix socket path holds at most 107 bytes on Linux and 103 on macOS, whose
temporary and home directories are long. ``owner.sock`` lives in the store directory
when that path is at most :data:`MAX_SOCKET_PATH` bytes; otherwise in a private runtime
directory, named by a hash of the store's path: ``$XDG_RUNTIME_DIR/nbmemory/`` (per user,
0700, from systemd) or ``<tempdir>/nbmemory-<uid>/`` (macOS's temporary directory is per
user already), created 0700 and used only if it is a real directory of ours that nobody
else may enter. When even that is too long the owner serves TCP instead. Not taken:
``/proc/self/fd/N/`` (Linux only) and ``chdir`` plus a relative path (the working
directory belongs to the whole process: not safe in a threaded kernel or server).

The owner writes what it serves into ``owner.json`` (``transport``, ``socket`` or ``port``,
``auth``); clients read the address there, so nothing has to be computed twice.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import socket
import stat
import struct
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InvalidInput, StoreUnavailable
from ..files import replace
from ..lock import POSIX_PERMISSIONS, open_private, read_private
from .protocol import holder_pid, read_info

TRANSPORT_ENV = "NBMEMORY_TRANSPORT"
TRANSPORTS = ("unix", "tcp")
SOCKET_NAME = "owner.sock"
SECRET_NAME = "owner.key"
HEADER_SECRET = "X-NbMemory-Secret"
LOOPBACK = "127.0.0.1"
# The longest socket path used: under both the Linux (107) and the macOS (103) limits.
MAX_SOCKET_PATH = 100

# macOS and FreeBSD: getsockopt(fd, SOL_LOCAL, LOCAL_PEERCRED) -> struct xucred, which
# starts with u_int cr_version (XUCRED_VERSION, 0) and uid_t cr_uid.
SOL_LOCAL = 0
LOCAL_PEERCRED = 0x001
XUCRED_VERSION = 0
XUCRED_BUFFER = 256  # larger than any struct xucred; the kernel copies what it has


def peer_check() -> str | None:
    """The call this platform names a unix socket peer's user with, or None."""
    if not hasattr(socket, "AF_UNIX"):
        return None
    if sys.platform.startswith("linux"):
        return "SO_PEERCRED"
    if sys.platform == "darwin" or sys.platform.startswith("freebsd"):
        return "LOCAL_PEERCRED"
    return None


def parse_xucred(data: bytes) -> int:
    """The peer's uid from a ``struct xucred`` (macOS, FreeBSD)."""
    if len(data) < 8:
        raise OSError(f"LOCAL_PEERCRED returned {len(data)} bytes, not a struct xucred")
    version, uid = struct.unpack_from("=II", data)
    if version != XUCRED_VERSION:
        raise OSError(f"LOCAL_PEERCRED returned struct xucred version {version}")
    return uid


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of the unix socket ``sock``."""
    check = peer_check()
    if check == "SO_PEERCRED":
        option = getattr(socket, "SO_PEERCRED", 17)
        data = sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
        return struct.unpack("3i", data)[1]  # struct ucred: pid, uid, gid
    if check == "LOCAL_PEERCRED":
        option = getattr(socket, "LOCAL_PEERCRED", LOCAL_PEERCRED)
        return parse_xucred(sock.getsockopt(SOL_LOCAL, option, XUCRED_BUFFER))
    raise OSError(f"no peer check on {sys.platform}")


def default_transport() -> str:
    return "unix" if peer_check() else "tcp"


def choose(environ=None) -> str:
    """``unix`` or ``tcp``, from ``NBMEMORY_TRANSPORT`` and what the platform offers."""
    environ = os.environ if environ is None else environ
    value = (environ.get(TRANSPORT_ENV) or "").strip().lower()
    default = default_transport()
    if value in ("", "auto"):
        return default
    if value == "unix" and default != "unix":
        raise InvalidInput(
            f"{TRANSPORT_ENV}=unix, but this Python ({sys.platform}) has no unix sockets "
            f"with a peer check; unset it (the default here is tcp) or set it to tcp.")
    if value not in TRANSPORTS:
        raise InvalidInput(f"{TRANSPORT_ENV}={value!r} is not a transport; set it to unix or "
                           f"tcp, or unset it for this platform's default ({default}).")
    return value


def auth_of(transport: str) -> str:
    """How the owner tells its user's processes from others on ``transport``."""
    if transport == "unix":
        return f"peer uid ({peer_check() or 'unchecked'})"
    return f"secret ({SECRET_NAME})"


def describe(info: dict[str, Any]) -> str:
    """One line for doctor and status: what an owner serves, and what protects it."""
    if info.get("transport") == "unix":
        return (f"unix socket {info.get('socket')}; the owner refuses processes of other "
                f"users ({peer_check() or 'no peer check'})")
    where = f"{LOOPBACK}:{info['port']}" if info.get("port") else LOOPBACK
    return (f"loopback TCP {where}; every request carries the owner's secret from "
            f"{SECRET_NAME} (owner-only), compared in constant time")


# -- where the unix socket goes ------------------------------------------------------------

def _fits(path: Path) -> bool:
    return len(os.fsencode(str(path))) <= MAX_SOCKET_PATH


def _private_directory(directory: Path) -> Path | None:
    """``directory``, created 0700, if it is a real directory of ours closed to others."""
    try:
        directory.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(directory)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            return None
        if info.st_mode & 0o077:
            os.chmod(directory, 0o700)
    except OSError:
        return None
    return directory


def runtime_directories(environ=None) -> list[Path]:
    environ = os.environ if environ is None else environ
    candidates = []
    if environ.get("XDG_RUNTIME_DIR"):
        candidates.append(Path(environ["XDG_RUNTIME_DIR"]) / "nbmemory")
    candidates.append(Path(tempfile.gettempdir()) / f"nbmemory-{os.getuid()}")
    return candidates


def socket_path(directory: Path, environ=None) -> Path | None:
    """Where the owner of the store ``directory`` puts its unix socket; None when no
    short enough private place exists (the owner serves TCP then)."""
    path = directory / SOCKET_NAME
    if _fits(path):
        return path
    name = hashlib.sha256(os.fsencode(str(directory))).hexdigest()[:24] + ".sock"
    for candidate in runtime_directories(environ):
        if _fits(candidate / name) and _private_directory(candidate):
            return candidate / name
    return None


# -- the secret ----------------------------------------------------------------------------

def new_secret() -> str:
    return secrets.token_hex(32)


def write_secret(directory: Path, secret: str) -> None:
    """``owner.key``, readable by its owner only, replaced atomically."""
    path = directory / SECRET_NAME
    tmp = path.with_name(f".{SECRET_NAME}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    fd = open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        if not POSIX_PERMISSIONS:  # restricted while empty: the secret is never readable
            os.close(fd)
            restrict_to_user(tmp)
            fd = os.open(tmp, os.O_WRONLY | getattr(os, "O_BINARY", 0))
        with os.fdopen(fd, "w", newline="\n") as handle:
            handle.write(secret + "\n")
        replace(tmp, path)  # clients read it at every connect
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def restrict_to_user(path: Path) -> None:
    """Windows: let only the current user read ``path`` (as Jupyter does for connection
    files). Best effort: the store directory in the user's profile is private anyway."""
    import subprocess

    user = os.environ.get("USERNAME")
    if user:
        subprocess.run(["icacls", str(path), "/inheritance:r", "/grant:r", f"{user}:F"],
                       capture_output=True, check=False,
                       creationflags=getattr(subprocess, "CREATE_NO_WINDOW", 0))


def read_secret(directory: Path) -> str | None:
    path = directory / SECRET_NAME
    try:
        if POSIX_PERMISSIONS and path.stat().st_uid != os.getuid():
            return None
        return read_private(path, 4096).decode().strip() or None
    except (OSError, ValueError, StoreUnavailable):
        return None


def secret_matches(given: str | None, expected: str) -> bool:
    return hmac.compare_digest((given or "").encode(), expected.encode())


# -- the owner's end -----------------------------------------------------------------------

def check_peer(connection: socket.socket, client_address: Any, secret: str | None) -> str | None:
    """Why the owner drops a new connection (a unix peer of another user, a TCP peer that
    is not loopback), or None."""
    if secret is None:  # a unix socket: ask the OS who is calling
        try:
            uid = peer_uid(connection)
        except OSError as exc:
            return f"a connection whose peer could not be checked ({exc})"
        return None if uid in (os.getuid(), 0) else f"a connection from uid {uid}"
    return None if client_address[0] == LOOPBACK else f"a connection from {client_address[0]}"


def check_secret(given: str | None, secret: str | None) -> str | None:
    """None when a request may go on (no secret needed, or the right one); else what was
    wrong with it ("no secret", "a wrong secret")."""
    if secret is None or (given is not None and secret_matches(given, secret)):
        return None
    return "a wrong secret" if given else "no secret"


def refusal(what: str, pid: int) -> dict[str, Any]:
    """The 403 error an owner answers a request with ``what`` (see :func:`check_secret`)."""
    return {"type": "Unauthorized", "pid": pid, "message": (
        f"The store's owner refused a request with {what}: every request must carry the "
        f"secret from {SECRET_NAME} in the store directory in the {HEADER_SECRET} header.")}


# -- the client's end ----------------------------------------------------------------------

@dataclass(frozen=True)
class Address:
    """Where one owner listens, and the secret its requests need (TCP)."""

    transport: str
    socket: str | None = None
    port: int | None = None
    secret: str | None = None

    def headers(self) -> dict[str, str]:
        return {HEADER_SECRET: self.secret} if self.secret else {}

    def connect(self, timeout: float | None) -> socket.socket:
        """A connected socket; FileNotFoundError or ConnectionRefusedError: no owner."""
        if self.transport == "tcp":
            return socket.create_connection((LOOPBACK, self.port), timeout=timeout)
        info = os.stat(self.socket)  # FileNotFoundError: no owner
        if POSIX_PERMISSIONS and info.st_uid != os.getuid():
            raise StoreUnavailable(f"The socket {self.socket} belongs to another user "
                                   f"(uid {info.st_uid}); refusing to talk to it.")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(self.socket)
        except BaseException:
            sock.close()
            raise
        return sock


def address_of(directory: Path, info: dict[str, Any] | None) -> Address | None:
    """The address in ``owner.json`` (``info``), or None while it names none this process
    can use (see :func:`unusable`)."""
    if not info:
        return None
    if info.get("transport") == "tcp":
        port, secret = info.get("port"), read_secret(directory)
        if not isinstance(port, int) or not secret:
            return None
        return Address("tcp", port=port, secret=secret)
    if not info.get("socket") or not hasattr(socket, "AF_UNIX"):
        return None
    return Address("unix", socket=info["socket"])


def find(directory: Path) -> Address | None:
    """The address of the owner of ``directory`` from ``owner.json``; None while it names
    none. Raises StoreUnavailable when the live owner's address cannot be used from here."""
    info = read_info(directory)
    address = address_of(directory, info)
    if address is not None and holder_pid(directory) != info.get("pid"):
        # Only the owner holding this store's lock is asked: a dead owner's port may be
        # anyone's now (its requests and secret are not sent there), and an owner.json
        # copied with a store names the owner of the store it was copied from.
        return None
    if address is None:
        problem = unusable(directory, info)
        if problem and info.get("state") == "serving" and holder_pid(directory) == info.get("pid"):
            raise StoreUnavailable(problem)
    return address


def refused_by_owner(directory: Path, pid: int | None) -> StoreUnavailable | None:
    """The error for a 403 from process ``pid``: if it is the store's live owner, our
    secret is not its own; if not, None (a port reused since our owner died)."""
    info = read_info(directory) or {}
    if pid is None or info.get("pid") != pid or holder_pid(directory) != pid:
        return None
    return StoreUnavailable(
        f"The owner of {directory} (pid {pid}) refused this process's requests: the secret "
        f"in {directory / SECRET_NAME} is not the one it was started with (was the file "
        f"changed?). Restart it: nbmemory stop --store {directory}; the next use starts a "
        f"new one.")


def unusable(directory: Path, info: dict[str, Any] | None) -> str | None:
    """Why the address ``info`` names cannot be used from this process, or None."""
    if not info:
        return None
    restart = (f"Restart it: nbmemory stop --store {directory}; the next use starts a new "
               f"one.")
    if info.get("transport") == "tcp" and info.get("port") and not read_secret(directory):
        return (f"The owner of {directory} (pid {info.get('pid')}) serves loopback TCP, but "
                f"its secret ({directory / SECRET_NAME}) is missing or not yours, so no "
                f"request can reach it. {restart}")
    if info.get("transport") != "tcp" and info.get("socket") and not hasattr(socket, "AF_UNIX"):
        return (f"The owner of {directory} (pid {info.get('pid')}) serves a unix socket, "
                f"which this Python cannot use (it has no AF_UNIX). {restart} An owner "
                f"started from here serves loopback TCP.")
    return None
