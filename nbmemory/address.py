"""Team store addresses: a libpq URL (``postgresql://host/db``), checked before use.

An address names a database and, optionally, one of several team stores in it
(``?store=NAME``, a schema of its own). Credentials never travel in it: libpq finds them
in its usual places (``PGPASSWORD``, ``~/.pgpass``, ``PGSERVICE``), so an address can be
shown, logged and exported safely.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .errors import InvalidInput

SCHEMES = ("postgresql://", "postgres://")
# In a team store's local directory: the address it stands for (read by the engine).
ADDRESS_FILENAME = "team-store.address"
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


def is_address(value: object) -> bool:
    return isinstance(value, str) and value.lower().startswith(SCHEMES)


@dataclass(frozen=True)
class Address:
    """A checked team store address: what libpq connects to and the schema the store is in."""

    url: str  # as given, minus nothing secret (a password is refused)
    conninfo: str  # what libpq is given (without nbmemory's own ``store`` parameter)
    schema: str

    @classmethod
    def parse(cls, url: str) -> Address:
        parts = urlsplit(url)
        if parts.password is not None:
            raise InvalidInput(
                "The store address holds a password; nbmemory never keeps credentials. "
                "Give the address without it and put the password in ~/.pgpass or "
                "PGPASSWORD (or name a PGSERVICE).")
        query = parse_qsl(parts.query, keep_blank_values=True)
        if any(k == "password" for k, _ in query):
            raise InvalidInput(
                "The store address holds a password (password=...); nbmemory never keeps "
                "credentials. Put it in ~/.pgpass or PGPASSWORD instead.")
        names = [v for k, v in query if k == "store"]
        name = names[-1] if names else ""
        if name and not _NAME.match(name):
            raise InvalidInput(
                f"The team store name {name!r} is not usable: use lower-case letters, digits "
                "and _ (at most 40, starting with a letter), e.g. ?store=analytics.")
        rest = urlencode([(k, v) for k, v in query if k != "store"])
        conninfo = urlunsplit((parts.scheme, parts.netloc, parts.path, rest, parts.fragment))
        return cls(url, conninfo, f"nbmemory_{name}" if name else "nbmemory")

    def cache_directory(self, environ: dict | None = None) -> Path:
        """Where this machine keeps the store's projections, owner lock and sockets: one
        directory per address under :func:`cache_root`."""
        digest = hashlib.sha256(self.url.encode()).hexdigest()[:16]
        return cache_root(environ) / f"team-{digest}"

    def link(self, environ: dict | None = None) -> Path:
        """The local directory, created owner-only, holding this address (so that an owner
        started for the directory knows which store it is)."""
        directory = self.cache_directory(environ)
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = directory / ADDRESS_FILENAME
        if not path.exists() or path.read_text(encoding="utf-8").strip() != self.url:
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
            fd = os.open(path, flags | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0),
                         0o600)
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
                handle.write(self.url + "\n")
        return directory


def cache_root(environ: dict | None = None) -> Path:
    """Where nbmemory keeps this machine's caches: ``NBMEMORY_CACHE_DIR``, by default
    ~/.cache/nbmemory (or below ``XDG_CACHE_HOME``)."""
    environ = os.environ if environ is None else environ
    base = environ.get("NBMEMORY_CACHE_DIR") or os.path.join(
        environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "nbmemory")
    return Path(base).expanduser().resolve()


def linked_address(directory: Path) -> Address | None:
    """The team store a local directory stands for, or None (a DuckDB store)."""
    try:
        text = (Path(directory) / ADDRESS_FILENAME).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    return Address.parse(text)
