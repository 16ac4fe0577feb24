"""The store's file names and its named migrations, each applied in one transaction
together with its record; a store recording a migration this version does not know was
written by a newer nbmemory and is refused untouched."""

from __future__ import annotations

import json
import os
import re
import uuid
from pathlib import Path

from ..config import DB_FILENAME

COMPACT_FILENAME = "memory.compact.duckdb"
VECTOR_FILENAME = "vectors.usearch"  # the engine's index of the vectors, beside the database


def identify(store) -> str | None:
    """The store's random id, made at its first open and kept in ``meta``: its index files
    record it, so that one copied from another store is not taken for its own. None where
    it cannot be written (a read-only disk): nothing is checked then."""
    import duckdb

    try:
        if store.meta("store_id") is None:
            store.set_meta("store_id", uuid.uuid4().hex)
        return store.meta("store_id")
    except duckdb.Error:
        return None


def indexed_position(directory: Path) -> int:
    """The journal position the vector index in ``directory`` last saw (0: none): the
    evidence that a database missing or new there has lost what it held."""
    try:
        meta = json.loads((Path(directory) / f"{VECTOR_FILENAME}.json").read_text())
        return int(meta.get("seq", 0))
    except (OSError, ValueError, TypeError, AttributeError):
        return 0


def lost_database(directory: Path, position: int) -> str | None:
    """Why the store in ``directory`` must not be used as if new, or None: its database
    (at journal ``position``) holds less than its vector index saw, or is missing beside
    its write-ahead log (which DuckDB would delete on making a new one)."""
    log = Path(directory) / f"{DB_FILENAME}.wal"
    if not (Path(directory) / DB_FILENAME).exists() and log.is_file() and log.stat().st_size:
        return (f"The store {directory} has lost its database: {DB_FILENAME} is missing, and "
                f"its write-ahead log {log.name}, which may hold every note since its last "
                f"checkpoint, is still there. Nothing was changed. Put {DB_FILENAME} back "
                f"beside it; or, to start an empty store here, move {log.name} away first.")
    seen = indexed_position(directory)
    if seen <= position:
        return None
    return (f"The store {directory} has lost its database: its vector index saw journal "
            f"position {seen:,}, and {DB_FILENAME} is missing or holds less (position "
            f"{position:,}). Nothing was changed. Put {DB_FILENAME} back from a backup; or, to "
            f"start an empty store here, move {VECTOR_FILENAME}, {VECTOR_FILENAME}.json, "
            f"keywords.index and cards.index away first.")

def cannot_open(path: Path, exc: Exception) -> str:
    """Why DuckDB could not open the store's database ``path`` (``exc``), in words that
    call it damaged only when nothing else explains it."""
    said = str(exc)
    if "lock" in said.lower():
        return (f"The store {path} is open in another process that does not use nbmemory's "
                f"owner lock ({exc}). Close that process and try again.")
    if "NBMEMORY_DUCKDB_MEMORY" in os.environ and "memory" in said.lower():
        return (f"NBMEMORY_DUCKDB_MEMORY={os.environ['NBMEMORY_DUCKDB_MEMORY']!r} is not a "
                f"memory limit DuckDB takes ({exc}): give one like 512MB or 2GB, or unset it.")
    if "Read-only file system" in said or "Permission denied" in said:
        return (f"The store {path} cannot be opened for writing ({exc}). Make it and its "
                f"folder writable by this user, or use a store elsewhere.")
    return f"The store {path} is unreadable ({exc}). {unreadable_advice(path, said)}"


def unreadable_advice(path: Path, said: str) -> str:
    """What to do about the database ``path`` DuckDB will not open (its error ``said``):
    never to move the database away from its write-ahead log, which holds every write since
    the last checkpoint (a new store's first open deletes a log left behind)."""
    log = path.with_name(f"{path.name}.wal")
    if "WAL" not in said:
        return (f"It may be damaged or written by another DuckDB version: use the nbmemory "
                f"version that wrote it, or move {path.name} and {log.name} away together to "
                "start a new store.")
    at = re.search(r"byte position (\d+)", said)
    command = f"import os; os.truncate({str(log)!r}, {at.group(1)})" if at else ""
    cut = (f" DuckDB names where the damage starts: cutting the log there keeps every write "
           f"before it (python -c \"{command}\"), then open the store again." if at else "")
    return (f"Its write-ahead log {log.name} is damaged at its end (a write torn by a power "
            f"loss or a disk error). Nothing was changed. First copy {path.name} and {log.name} "
            f"somewhere safe, together: moving {path.name} away alone loses every note the log "
            f"holds.{cut}")


MIGRATIONS: list[tuple[str, str]] = [
    (
        "m001_create_notes",
        """
        CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL);
        CREATE TABLE notes (
            id BIGINT PRIMARY KEY,
            uid VARCHAR NOT NULL UNIQUE,
            status VARCHAR NOT NULL,
            version INTEGER NOT NULL,
            supersedes BIGINT,
            created_at TIMESTAMP NOT NULL,
            updated_at TIMESTAMP NOT NULL,
            -- the current version, kept here so reads need no join (history is in note_versions)
            text VARCHAR NOT NULL DEFAULT '',
            content_hash VARCHAR NOT NULL DEFAULT '',
            kind VARCHAR NOT NULL DEFAULT 'finding',
            priority VARCHAR NOT NULL DEFAULT 'medium',
            tags VARCHAR[] NOT NULL DEFAULT [],
            author VARCHAR,
            provenance JSON,
            resolution VARCHAR,
            resolution_reason VARCHAR
        );
        CREATE TABLE note_versions (
            note_id BIGINT NOT NULL,
            version INTEGER NOT NULL,
            text VARCHAR NOT NULL,
            content_hash VARCHAR NOT NULL,
            kind VARCHAR NOT NULL,
            priority VARCHAR NOT NULL,
            tags VARCHAR[] NOT NULL,
            author VARCHAR,
            created_at TIMESTAMP NOT NULL,
            provenance JSON,
            seq BIGINT NOT NULL,
            PRIMARY KEY (note_id, version)
        );
        CREATE TABLE embeddings (
            content_hash VARCHAR NOT NULL,
            model VARCHAR NOT NULL,
            vector BLOB NOT NULL,
            PRIMARY KEY (content_hash, model)
        );
        CREATE TABLE events (
            seq BIGINT PRIMARY KEY,
            occurred_at TIMESTAMP NOT NULL,
            note_id BIGINT,
            type VARCHAR NOT NULL,
            actor VARCHAR,
            request_id VARCHAR,
            data JSON
        );
        CREATE INDEX events_by_request ON events (request_id);
        CREATE INDEX events_by_note ON events (note_id);
        CREATE TABLE snapshots (
            name VARCHAR PRIMARY KEY,
            seq BIGINT NOT NULL,
            sealed_at TIMESTAMP NOT NULL,
            message VARCHAR NOT NULL,
            author VARCHAR,
            stale JSON
        );
        CREATE TABLE recall_log (
            logged_at TIMESTAMP NOT NULL,
            query VARCHAR NOT NULL,
            k INTEGER NOT NULL,
            returned INTEGER NOT NULL,
            lexical INTEGER NOT NULL,
            dense INTEGER NOT NULL,
            filtered_out INTEGER NOT NULL
        );
        """,
    ),
    (
        # What a note is about, with the fingerprint taken at remember time. Verifying a
        # note adds rows (seq = the "verified" event); the current fingerprint of an
        # anchor is its row with the highest seq, so history is never overwritten.
        "m002_anchors",
        """
        CREATE TABLE anchors (
            note_id BIGINT NOT NULL,
            position INTEGER NOT NULL,
            kind VARCHAR NOT NULL,
            target VARCHAR NOT NULL,
            origin VARCHAR NOT NULL,
            seq BIGINT NOT NULL,
            taken_at TIMESTAMP NOT NULL,
            fingerprint JSON NOT NULL,
            PRIMARY KEY (note_id, position, seq)
        );
        CREATE INDEX anchors_by_note ON anchors (note_id);
        """,
    ),
    (
        # DuckDB looks up a composite primary key by scanning (2.5 ms at 100k embeddings,
        # twice per remember); a one-column index makes `content_hash IN (...)` a lookup.
        "m003_embeddings_by_hash",
        "CREATE INDEX embeddings_by_hash ON embeddings (content_hash);",
    ),
    (
        # No change to the tables: from here vectors are written in half precision
        # (store/rows.py), which an older nbmemory would misread, so it refuses the store.
        "m004_half_precision_vectors",
        "",
    ),
]
SCHEMA_VERSION = len(MIGRATIONS)
