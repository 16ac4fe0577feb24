"""The canonical store: one DuckDB file holding notes, versions, vectors and the journal.

Schema changes are named migrations applied each in its own transaction together with
its record. A store that records a migration this version does not know was written by
a newer nbmemory and is refused untouched.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Sequence

import duckdb
import numpy as np

from . import __version__
from .errors import StoreTooNew, StoreUnavailable
from .events import EFFECTS, KEEP, status_sql
from .models import Anchor, Event, Note, Provenance, Snapshot

DB_FILENAME = "memory.duckdb"
COMPACT_FILENAME = "memory.compact.duckdb"

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
]
SCHEMA_VERSION = len(MIGRATIONS)


def _naive(value: datetime) -> datetime:
    return value.astimezone(timezone.utc).replace(tzinfo=None)


def _aware(value: datetime | None) -> datetime | None:
    return value.replace(tzinfo=timezone.utc) if value is not None else None


@dataclass(frozen=True)
class Filters:
    """Narrow a listing or a recall. Every given filter must hold (tags: all of them)."""

    tags: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    priorities: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None
    statuses: tuple[str, ...] = ("active",)
    ids: tuple[int, ...] | None = None  # only these notes (e.g. the stale ones)

    @property
    def narrows(self) -> bool:
        """True when the filter excludes some active notes."""
        return bool(self.tags or self.kinds or self.priorities or self.since or self.until
                    or set(self.statuses) != {"active"} or self.ids is not None)

    def matches(self, note: Note) -> bool:
        """The same test as :meth:`sql`, for notes already in memory."""
        return ((not self.statuses or note.status in self.statuses)
                and set(self.tags) <= set(note.tags)
                and (not self.kinds or note.kind in self.kinds)
                and (not self.priorities or note.priority in self.priorities)
                and (self.since is None or note.created_at >= self.since)
                and (self.until is None or note.created_at < self.until)
                and (self.ids is None or note.id in self.ids))

    def sql(self) -> tuple[str, list[Any]]:
        clauses, params = [], []
        if self.statuses:
            clauses.append("n.status IN (SELECT unnest(?))")
            params.append(list(self.statuses))
        if self.tags:
            clauses.append("list_has_all(n.tags, ?)")
            params.append(list(self.tags))
        if self.kinds:
            clauses.append("n.kind IN (SELECT unnest(?))")
            params.append(list(self.kinds))
        if self.priorities:
            clauses.append("n.priority IN (SELECT unnest(?))")
            params.append(list(self.priorities))
        if self.since:
            clauses.append("n.created_at >= ?")
            params.append(_naive(self.since))
        if self.until:
            clauses.append("n.created_at < ?")
            params.append(_naive(self.until))
        if self.ids is not None:
            clauses.append("n.id IN (SELECT unnest(?::BIGINT[]))")
            params.append(list(self.ids))
        return (" AND ".join(clauses) or "TRUE"), params


# How events set a note's status, folded in SQL for past states (events.EFFECTS).
_STATUS_EVENTS, _STATUS_AFTER, _ACTIVE_AFTER = status_sql("last_type")
_RESOLUTION_EVENTS = ", ".join(f"'{t}'" for t, e in EFFECTS.items() if e.resolution != KEEP)

_NOTE_COLUMNS = """
    n.id, n.text, n.kind, n.priority, n.tags, n.status, n.version, n.created_at,
    n.updated_at, n.author, n.provenance, n.supersedes, n.resolution, n.resolution_reason
"""
_NOTE_FROM = "notes n"


def _id_list(ids: Sequence[int]) -> str:
    """Ids inlined as a literal list: DuckDB looks these up far faster than a parameter list."""
    return ", ".join(str(int(i)) for i in ids) or "NULL"


def _note(row: tuple) -> Note:
    return Note(
        id=row[0], text=row[1], kind=row[2], priority=row[3], tags=tuple(row[4]),
        status=row[5], version=row[6], created_at=_aware(row[7]), updated_at=_aware(row[8]),
        author=row[9], provenance=Provenance.from_dict(json.loads(row[10]) if row[10] else None),
        supersedes=row[11], resolution=row[12], resolution_reason=row[13],
    )


def _split_resolution(value: str | None) -> tuple[str | None, str | None]:
    """``refuted:why`` -> (refuted, why); reopened or nothing -> (None, None)."""
    kind, _, reason = (value or "").partition(":")
    return (kind, reason or None) if kind in ("confirmed", "refuted") else (None, None)


class Store:
    """Owns one DuckDB connection. Not thread-safe: the engine serialises calls."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self._anchor_cache: dict[int, list[tuple[int, Anchor]] | None] = {}
        self._anchors_upto: int | None = None
        self.commits = 0
        self._types: dict[str, dict[str, str]] = {}  # column types by table, for insert_rows
        self.path = self.directory / DB_FILENAME
        (self.directory / COMPACT_FILENAME).unlink(missing_ok=True)  # an interrupted compact
        try:
            self.con = duckdb.connect(str(self.path))
        except duckdb.Error as exc:
            if "lock" in str(exc).lower():
                raise StoreUnavailable(
                    f"The store {self.path} is open in another process that does not use "
                    f"nbmemory's owner lock ({exc}). Close that process and try again."
                ) from exc
            raise StoreUnavailable(
                f"The store {self.path} is unreadable ({exc}). It may be damaged or written "
                "by another DuckDB version: use the nbmemory version that wrote it, or move "
                "the file away to start a new store."
            ) from exc
        try:
            self._migrate()
        except BaseException:
            self.con.close()
            raise

    def close(self) -> None:
        self.con.close()

    def compact(self) -> None:
        """Rewrite the file so that no free block still holds erased text (after a purge).

        DuckDB reuses freed blocks but does not wipe them; copying every table into a
        new file and renaming it over the old one leaves nothing behind. A crash before
        the rename leaves the old file intact and a leftover that the next open removes.
        """
        fresh = self.path.with_name(COMPACT_FILENAME)
        fresh.unlink(missing_ok=True)
        name = self.con.execute("SELECT current_database()").fetchone()[0]
        self.con.execute("CHECKPOINT")
        self.con.execute(f"ATTACH '{fresh}' AS compacted")
        try:
            self.con.execute(f'COPY FROM DATABASE "{name}" TO compacted')
        finally:
            self.con.execute("DETACH compacted")
        self.con.close()
        os.replace(fresh, self.path)
        self.con = duckdb.connect(str(self.path))

    # -- schema -------------------------------------------------------------------------

    def _migrate(self) -> None:
        self.con.execute(
            "CREATE TABLE IF NOT EXISTS migrations (name VARCHAR PRIMARY KEY, applied_at TIMESTAMP NOT NULL)"
        )
        applied = {row[0] for row in self.con.execute("SELECT name FROM migrations").fetchall()}
        known = {name for name, _ in MIGRATIONS}
        unknown = sorted(applied - known)
        if unknown:
            raise StoreTooNew(
                f"The store {self.path} was written by a newer nbmemory (it has migration "
                f"{unknown[-1]}; this is nbmemory {__version__} with schema {SCHEMA_VERSION}). "
                "Upgrade nbmemory (pip install -U nbmemory); the store was not touched."
            )
        for name, sql in MIGRATIONS:
            if name in applied:
                continue
            with self.transaction():
                for statement in filter(str.strip, sql.split(";")):
                    self.con.execute(statement)
                self.con.execute("INSERT INTO migrations VALUES (?, ?)", [name, _naive(_now())])
                self._set_meta("schema_version", str(SCHEMA_VERSION))
                self._set_meta("written_by", __version__)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Every write to notes, anchors and the journal runs in one of these; ``commits``
        counts them, so a cache keyed on it is current without a query."""
        self.con.begin()
        try:
            yield
        except BaseException:
            self.con.rollback()
            raise
        else:
            self.con.commit()
            self.commits += 1

    # -- meta ---------------------------------------------------------------------------

    def meta(self, key: str, default: str | None = None) -> str | None:
        row = self.con.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
        return row[0] if row else default

    def _set_meta(self, key: str, value: str) -> None:
        self.con.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", [key, value])

    def set_meta(self, key: str, value: str) -> None:
        self._set_meta(key, value)

    # -- journal ------------------------------------------------------------------------

    def append_event(self, type: str, note_id: int | None, *, actor: str | None,
                     at: datetime, request_id: str | None = None,
                     data: dict | None = None) -> int:
        seq = self.position() + 1  # the engine serialises writers
        self.con.execute(
            "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?)",
            [seq, _naive(at), note_id, type, actor, request_id,
             json.dumps(data) if data else None],
        )
        return seq

    def event(self, seq: int) -> Event:
        return next(iter(self.events(after=seq - 1, until=seq)))

    def position(self) -> int:
        return self.con.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0]

    def request_note(self, request_id: str) -> int | None:
        """The note a request already wrote, so a retried write is applied once."""
        row = self.con.execute(
            "SELECT note_id FROM events WHERE request_id = ? ORDER BY seq LIMIT 1", [request_id]
        ).fetchone()
        return row[0] if row else None

    def request_event(self, request_id: str) -> Event | None:
        """The first journal entry a request wrote (a snapshot's has no note), or None."""
        row = self.con.execute(
            "SELECT min(seq) FROM events WHERE request_id = ?", [request_id]).fetchone()
        return self.event(row[0]) if row and row[0] is not None else None

    def request_result(self, request_id: str) -> dict[str, Any] | None:
        """What a bulk request (import, reembed, reindex) answered, kept in ``meta`` so a
        resent one gets the same answer; meta is not exported."""
        value = self.meta(f"request:{request_id}")
        return json.loads(value) if value else None

    def record_request(self, request_id: str, result: dict[str, Any]) -> None:
        self._set_meta(f"request:{request_id}", json.dumps(result))

    def request_notes(self, request_ids: Sequence[str]) -> dict[str, int]:
        """:meth:`request_note` for many request ids in one query."""
        if not request_ids:
            return {}
        rows = self.con.execute(
            "SELECT request_id, arg_min(note_id, seq) FROM events "
            "WHERE request_id IN (SELECT unnest(?)) GROUP BY request_id", [list(request_ids)]
        ).fetchall()
        return {r[0]: r[1] for r in rows}

    def events(self, note_id: int | None = None, *, after: int = 0,
               until: int | None = None) -> list[Event]:
        where, params = "seq > ?", [after]
        if until is not None:
            where += " AND seq <= ?"
            params.append(until)
        if note_id is not None:
            where += " AND note_id = ?"
            params.append(note_id)
        rows = self.con.execute(
            f"SELECT seq, occurred_at, note_id, type, actor, data FROM events WHERE {where} ORDER BY seq",
            params,
        ).fetchall()
        return [Event(r[0], _aware(r[1]), r[2], r[3], r[4], json.loads(r[5]) if r[5] else {})
                for r in rows]

    def changed_since(self, seq: int) -> list[int]:
        rows = self.con.execute(
            "SELECT DISTINCT note_id FROM events WHERE seq > ? AND note_id IS NOT NULL", [seq]
        ).fetchall()
        return [r[0] for r in rows]

    # -- notes --------------------------------------------------------------------------

    def next_note_id(self) -> int:
        return self.con.execute("SELECT coalesce(max(id), 0) + 1 FROM notes").fetchone()[0]

    def allocate(self, count: int) -> tuple[list[int], list[int]]:
        """The next ``count`` note ids and event seqs (the engine serialises writers)."""
        note, seq = self.con.execute(
            "SELECT (SELECT coalesce(max(id), 0) FROM notes), "
            "(SELECT coalesce(max(seq), 0) FROM events)").fetchone()
        return list(range(note + 1, note + 1 + count)), list(range(seq + 1, seq + 1 + count))

    def insert_rows(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]],
                    chunk: int = 2048) -> None:
        """Insert ``rows`` (values in ``columns`` order), one column list per parameter:
        ``INSERT ... SELECT unnest(?), ...``. One statement per row cost about a
        millisecond a row, a multi-row ``VALUES`` 0.06 ms; this 0.013 ms (256 rows of
        notes). Call inside a transaction."""
        if not rows:
            return
        types = self._column_types(table)
        select = ", ".join(f"unnest(?::{types[c]}[])" for c in columns)
        for start in range(0, len(rows), chunk):
            part = rows[start:start + chunk]
            self.con.execute(f"INSERT INTO {table} ({', '.join(columns)}) SELECT {select}",
                             [list(values) for values in zip(*part)])

    def _column_types(self, table: str) -> dict[str, str]:
        if table not in self._types:
            self._types[table] = dict(self.con.execute(
                "SELECT column_name, data_type FROM information_schema.columns "
                "WHERE table_schema = 'main' AND table_name = ?", [table]).fetchall())
        return self._types[table]

    def create_notes(self, rows: Sequence[dict[str, Any]]) -> None:
        """Insert new notes (version 1) with their ``created`` events: three statements.

        Each row has note_id, uid, seq, at, text, content_hash, kind, priority, tags, author,
        provenance, request_id and supersedes. Call inside :meth:`transaction`.
        """
        if not rows:
            return
        provenance = [json.dumps(r["provenance"].to_dict()) for r in rows]
        self.insert_rows("notes", ("id", "uid", "status", "version", "supersedes", "created_at",
                                   "updated_at", "text", "content_hash", "kind", "priority",
                                   "tags", "author", "provenance"),
                         [[r["note_id"], r["uid"], "active", 1, r["supersedes"], _naive(r["at"]),
                           _naive(r["at"]), r["text"], r["content_hash"], r["kind"],
                           r["priority"], list(r["tags"]), r["author"], prov]
                          for r, prov in zip(rows, provenance)])
        self.insert_rows("events", ("seq", "occurred_at", "note_id", "type", "actor",
                                    "request_id", "data"),
                         [[r["seq"], _naive(r["at"]), r["note_id"], "created", r["author"],
                           r["request_id"], json.dumps({"supersedes": r["supersedes"]})
                           if r["supersedes"] is not None else None] for r in rows])
        self.insert_rows("note_versions", ("note_id", "version", "text", "content_hash", "kind",
                                           "priority", "tags", "author", "created_at",
                                           "provenance", "seq"),
                         [[r["note_id"], 1, r["text"], r["content_hash"], r["kind"],
                           r["priority"], list(r["tags"]), r["author"], _naive(r["at"]), prov,
                           r["seq"]] for r, prov in zip(rows, provenance)])

    def insert_note(self, note_id: int, *, uid: str, at: datetime, status: str = "active",
                    supersedes: int | None = None) -> None:
        """A new note row; its content arrives with :meth:`insert_version`."""
        self.con.execute(
            "INSERT INTO notes (id, uid, status, version, supersedes, created_at, updated_at) "
            "VALUES (?, ?, ?, 0, ?, ?, ?)",
            [note_id, uid, status, supersedes, _naive(at), _naive(at)],
        )

    def insert_version(self, note_id: int, *, text: str, content_hash: str, kind: str,
                       priority: str, tags: Sequence[str], author: str | None,
                       provenance: Provenance, at: datetime, seq: int) -> int:
        version = self.con.execute(
            "SELECT coalesce(max(version), 0) + 1 FROM note_versions WHERE note_id = ?", [note_id]
        ).fetchone()[0]
        self.con.execute(
            "INSERT INTO note_versions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [note_id, version, text, content_hash, kind, priority, list(tags), author,
             _naive(at), json.dumps(provenance.to_dict()), seq],
        )
        self.con.execute(
            "UPDATE notes SET version = ?, updated_at = ?, text = ?, content_hash = ?, kind = ?, "
            "priority = ?, tags = ?, author = ?, provenance = ? WHERE id = ?",
            [version, _naive(at), text, content_hash, kind, priority, list(tags), author,
             json.dumps(provenance.to_dict()), note_id])
        return version

    def set_status(self, note_id: int, status: str) -> None:
        self.con.execute("UPDATE notes SET status = ? WHERE id = ?", [status, note_id])

    def purge_text(self, note_id: int) -> None:
        """Erase a note's text, provenance and vectors in every version (privacy)."""
        self.con.execute(
            "DELETE FROM embeddings WHERE content_hash IN (SELECT content_hash FROM note_versions "
            "WHERE note_id = ?) AND content_hash NOT IN (SELECT content_hash FROM note_versions "
            "WHERE note_id <> ?)", [note_id, note_id])
        for table, key in (("note_versions", "note_id"), ("notes", "id")):
            self.con.execute(f"UPDATE {table} SET text = '', content_hash = 'purged', "
                             f"provenance = NULL WHERE {key} = ?", [note_id])

    def set_resolution(self, note_id: int, resolution: str | None, reason: str | None) -> None:
        self.con.execute("UPDATE notes SET resolution = ?, resolution_reason = ? WHERE id = ?",
                         [resolution, reason, note_id])

    def superseded_by(self, note_id: int) -> int | None:
        row = self.con.execute("SELECT id FROM notes WHERE supersedes = ?", [note_id]).fetchone()
        return row[0] if row else None

    def status_of(self, note_id: int) -> str | None:
        row = self.con.execute("SELECT status FROM notes WHERE id = ?", [note_id]).fetchone()
        return row[0] if row else None

    def get_notes(self, ids: Sequence[int]) -> dict[int, Note]:
        if not len(ids):
            return {}
        rows = self.con.execute(
            f"SELECT {_NOTE_COLUMNS} FROM {_NOTE_FROM} WHERE n.id IN ({_id_list(ids)})"
        ).fetchall()
        return {row[0]: _note(row) for row in rows}

    def list_notes(self, filters: Filters, *, offset: int = 0, limit: int = 50,
                   order: str = "newest") -> tuple[list[Note], int]:
        where, params = filters.sql()
        order_by = {"newest": "n.updated_at DESC, n.id DESC", "oldest": "n.id ASC",
                    "priority": "CASE n.priority WHEN 'high' THEN 0 WHEN 'medium' THEN 1 ELSE 2 END, n.id DESC"}[order]
        total = self.con.execute(f"SELECT count(*) FROM {_NOTE_FROM} WHERE {where}", params).fetchone()[0]
        rows = self.con.execute(
            f"SELECT {_NOTE_COLUMNS} FROM {_NOTE_FROM} WHERE {where} ORDER BY {order_by} "
            "LIMIT ? OFFSET ?", params + [limit, offset],
        ).fetchall()
        return [_note(r) for r in rows], total

    def note_ids(self, filters: Filters) -> np.ndarray:
        where, params = filters.sql()
        rows = self.con.execute(
            f"SELECT n.id FROM {_NOTE_FROM} WHERE {where} ORDER BY n.id", params
        ).fetchnumpy()
        return np.asarray(rows["id"], dtype=np.int64)

    def priorities(self, ids: Sequence[int]) -> dict[int, str]:
        if not len(ids):
            return {}
        rows = self.con.execute(
            f"SELECT n.id, n.priority FROM {_NOTE_FROM} WHERE n.id IN ({_id_list(ids)})").fetchall()
        return dict(rows)

    def index_rows(self, statuses: Sequence[str]) -> list[tuple[int, str, str, str]]:
        """(id, text, priority, status) of every note in ``statuses``: what the indexes need."""
        return self.con.execute(
            f"SELECT n.id, n.text, n.priority, n.status FROM {_NOTE_FROM} "
            "WHERE n.status IN (SELECT unnest(?)) ORDER BY n.id", [list(statuses)]).fetchall()

    def texts(self, ids: Sequence[int] | None = None) -> list[tuple[int, str]]:
        """(id, current text) of active notes, or of ``ids``."""
        if ids is None:
            sql, params = f"SELECT n.id, n.text FROM {_NOTE_FROM} WHERE n.status = 'active'", []
        else:
            sql = f"SELECT n.id, n.text FROM {_NOTE_FROM} WHERE n.id IN (SELECT unnest(?))"
            params = [[int(i) for i in ids]]
        return self.con.execute(sql, params).fetchall()

    def counts(self) -> dict[str, int]:
        rows = self.con.execute("SELECT status, count(*) FROM notes GROUP BY status").fetchall()
        return dict(rows)

    def notes_at(self, seq: int) -> list[tuple[Note, str]]:
        """Every note as it stood at journal position ``seq``, with its content hash.

        Status and version are folded from the journal, so this is exact for any past
        position (purged text is gone for good, by design).
        """
        rows = self.con.execute(f"""
            WITH last AS (
                SELECT note_id, arg_max(type, seq) AS last_type FROM events
                WHERE seq <= ? AND note_id IS NOT NULL AND type IN ({_STATUS_EVENTS})
                GROUP BY note_id),
            ver AS (
                SELECT note_id, max(version) AS version FROM note_versions
                WHERE seq <= ? GROUP BY note_id)
            SELECT n.id, v.text, v.kind, v.priority, v.tags, {_STATUS_AFTER}, v.version,
                   n.created_at, v.created_at, v.author, v.provenance, n.supersedes,
                   (SELECT arg_max(type || ':' || coalesce(data->>'reason', ''), seq) FROM events e
                    WHERE e.note_id = n.id AND e.seq <= ? AND
                          e.type IN ({_RESOLUTION_EVENTS})),
                   NULL, v.content_hash
            FROM last JOIN ver USING (note_id)
            JOIN note_versions v ON v.note_id = ver.note_id AND v.version = ver.version
            JOIN notes n ON n.id = ver.note_id
            ORDER BY n.id""", [seq, seq, seq]).fetchall()
        return [(_note(r[:12] + _split_resolution(r[12])), r[14]) for r in rows]

    def _by_hash(self, columns: str, model: str, hashes: Sequence[str]) -> list[tuple]:
        """Rows of ``embeddings`` for ``hashes`` and ``model``, through the hash index.

        Only ``content_hash IN (?, ...)`` uses the index; a predicate on ``model`` in the same
        query makes DuckDB scan, so the model is checked here.
        """
        hashes = list(dict.fromkeys(hashes))
        rows: list[tuple] = []
        for start in range(0, len(hashes), 500):
            chunk = hashes[start:start + 500]
            rows += self.con.execute(
                f"SELECT model, {columns} FROM embeddings WHERE content_hash IN "
                f"({', '.join('?' * len(chunk))})", chunk).fetchall()
        return [row[1:] for row in rows if row[0] == model]

    def vectors_by_hash(self, model: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        return {h: np.frombuffer(v, dtype=np.float32)
                for h, v in self._by_hash("content_hash, vector", model, hashes)}

    # -- vectors ------------------------------------------------------------------------

    def put_embeddings(self, model: str, items: Sequence[tuple[str, np.ndarray]]) -> None:
        items = list({h: (h, v) for h, v in reversed(items)}.values())  # one row per hash
        # INSERT OR IGNORE checks the composite key by scanning (6 ms at 100k rows): skip
        # the hashes already stored through the index, then insert plainly.
        stored = {h for (h,) in self._by_hash("content_hash", model, [h for h, _ in items])}
        items = [(h, v) for h, v in items if h not in stored]
        # Multi-row statements: executemany costs a statement per row.
        for start in range(0, len(items), 500):
            chunk = items[start:start + 500]
            self.con.execute(
                "INSERT INTO embeddings VALUES " + ", ".join(["(?, ?, ?)"] * len(chunk)),
                [x for h, v in chunk for x in (h, model, np.asarray(v, dtype=np.float32).tobytes())],
            )

    def has_embedding(self, model: str, content_hash: str) -> bool:
        return bool(self._by_hash("content_hash", model, [content_hash]))

    def vectors(self, model: str, ids: Sequence[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Ids and current vectors of active notes (or of ``ids``) for ``model``."""
        sql = (f"SELECT n.id, e.vector FROM {_NOTE_FROM} "
               "JOIN embeddings e ON e.content_hash = n.content_hash AND e.model = ? ")
        params: list[Any] = [model]
        if ids is None:
            sql += "WHERE n.status = 'active'"
        else:
            sql += "WHERE n.id IN (SELECT unnest(?))"
            params.append([int(i) for i in ids])
        rows = self.con.execute(sql + " ORDER BY n.id", params).fetchall()
        if not rows:
            return np.empty(0, np.int64), np.empty((0, 0), np.float32)
        keys = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32)
        return keys, matrix.reshape(len(rows), -1)

    def texts_missing_embedding(self, model: str) -> list[tuple[str, str]]:
        """(content_hash, text) of every kept version with no vector for ``model``.

        Past versions count too, so recall as of a snapshot works after a model change.
        """
        return self.con.execute(
            "SELECT DISTINCT v.content_hash, v.text FROM note_versions v "
            "JOIN notes n ON n.id = v.note_id WHERE n.status <> 'purged' "
            "AND NOT EXISTS (SELECT 1 FROM embeddings e "
            "WHERE e.content_hash = v.content_hash AND e.model = ?) ORDER BY 1", [model]
        ).fetchall()

    def models(self) -> list[str]:
        return [r[0] for r in self.con.execute("SELECT DISTINCT model FROM embeddings").fetchall()]

    # -- snapshots ----------------------------------------------------------------------

    def add_snapshot(self, name: str, *, seq: int, at: datetime, message: str,
                     author: str | None, stale: dict) -> None:
        self.con.execute("INSERT INTO snapshots VALUES (?, ?, ?, ?, ?, ?)",
                         [name, seq, _naive(at), message, author, json.dumps(stale)])

    def snapshot_stale(self, name: str) -> dict:
        """The stale flags recorded when snapshot ``name`` was sealed: {note id: [reason dicts]}."""
        row = self.con.execute("SELECT stale FROM snapshots WHERE name = ?", [name]).fetchone()
        return json.loads(row[0]) if row and row[0] else {}

    def snapshots(self, name: str | None = None) -> list[Snapshot]:
        where, params = ("WHERE name = ?", [name]) if name is not None else ("", [])
        rows = self.con.execute(
            f"SELECT name, seq, sealed_at, message, author FROM snapshots {where} ORDER BY seq, name",
            params).fetchall()
        return [Snapshot(r[0], r[1], _aware(r[2]), r[3], r[4], self.count_active_at(r[1]))
                for r in rows]

    def count_active_at(self, seq: int) -> int:
        return self.con.execute(
            "SELECT count(*) FROM (SELECT note_id, arg_max(type, seq) AS last_type FROM events "
            f"WHERE seq <= ? AND note_id IS NOT NULL AND type IN ({_STATUS_EVENTS}) "
            f"GROUP BY note_id) WHERE last_type IN ({_ACTIVE_AFTER})",
            [seq]).fetchone()[0]

    # -- recall log ---------------------------------------------------------------------

    def log_recalls(self, entries: Sequence[dict]) -> None:
        """Append recall log entries (at, query, k, returned, lexical, dense, filtered_out)."""
        self.con.executemany(
            "INSERT INTO recall_log VALUES (?, ?, ?, ?, ?, ?, ?)",
            [[_naive(e["at"]), e["query"], e["k"], e["returned"], e["lexical"], e["dense"],
              e["filtered_out"]] for e in entries])

    def recall_stats(self) -> dict[str, int]:
        total, empty = self.con.execute(
            "SELECT count(*), count(*) FILTER (WHERE returned = 0) FROM recall_log").fetchone()
        return {"recalls": total, "empty_recalls": empty}

    # -- anchors ------------------------------------------------------------------------
    # Reads are served from memory (a recall must not pay a query for them). The first
    # read loads the anchors of every note up to the highest id then; a note above that
    # id is read when first asked for. Rows of existing notes change only through
    # insert_anchors and purge_anchors, which mark the note to be read again (safe even
    # if the transaction rolls back); an import only adds notes with new, higher ids.

    def insert_anchors(self, note_id: int, anchors: Sequence[tuple[int, Anchor]], *,
                       seq: int, at: datetime) -> None:
        """Record fingerprints of ``(position, anchor)`` taken at journal position ``seq``."""
        self._anchor_cache[note_id] = None
        if anchors:
            self.con.executemany(
                "INSERT INTO anchors VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [[note_id, position, a.kind, a.target, a.origin, seq, _naive(at),
                  json.dumps(a.fingerprint)] for position, a in anchors])

    def anchors(self, note_ids: Sequence[int]) -> dict[int, list[tuple[int, Anchor]]]:
        """The current ``(position, anchor)`` list of each note (the latest fingerprint)."""
        cache = self._anchor_cache
        if self._anchors_upto is None:
            self._anchors_upto = self.con.execute(
                "SELECT coalesce(max(id), 0) FROM notes").fetchone()[0]
            cache.clear()
            self._read_anchors(None)
        ids = [int(i) for i in note_ids]
        upto = self._anchors_upto
        stale = [i for i in ids if (i in cache and cache[i] is None) or (i > upto and i not in cache)]
        if stale:
            self._read_anchors(stale)
        return {i: cache[i] for i in ids if cache.get(i)}

    def anchors_at(self, note_ids: Sequence[int], seq: int) -> dict[int, list[tuple[int, Anchor]]]:
        """The ``(position, anchor)`` list of each note as of journal position ``seq``."""
        rows = self.con.execute(
            "SELECT note_id, position, kind, target, origin, fingerprint FROM anchors "
            "WHERE note_id IN (SELECT unnest(?)) AND seq <= ? "
            "QUALIFY row_number() OVER (PARTITION BY note_id, position ORDER BY seq DESC) = 1 "
            "ORDER BY note_id, position", [[int(i) for i in note_ids], seq]).fetchall()
        out: dict[int, list[tuple[int, Anchor]]] = {}
        for note_id, position, kind, target, origin, fingerprint in rows:
            fingerprint = json.loads(fingerprint)
            if not fingerprint.get("dropped"):
                out.setdefault(note_id, []).append((position, Anchor(kind, target, fingerprint, origin)))
        return out

    def _read_anchors(self, ids: list[int] | None) -> None:
        where, params = ("WHERE note_id IN (SELECT unnest(?)) ", [ids]) if ids is not None else ("", [])
        rows = self.con.execute(
            "SELECT note_id, position, kind, target, origin, fingerprint FROM anchors " + where +
            "QUALIFY row_number() OVER (PARTITION BY note_id, position ORDER BY seq DESC) = 1 "
            "ORDER BY note_id, position", params).fetchall()
        cache = self._anchor_cache
        for note_id in ids or ():
            cache[note_id] = []
        for note_id, position, kind, target, origin, fingerprint in rows:
            fingerprint = json.loads(fingerprint)
            if not fingerprint.get("dropped"):  # no longer mentioned after an edit
                cache.setdefault(note_id, []).append(
                    (position, Anchor(kind, target, fingerprint, origin)))

    def next_anchor_position(self, note_id: int) -> int:
        return self.con.execute("SELECT coalesce(max(position) + 1, 0) FROM anchors "
                                "WHERE note_id = ?", [note_id]).fetchone()[0]

    def purge_anchors(self, note_id: int) -> None:
        """Erase what a purged note was about (paths, fingerprints), with its text."""
        self._anchor_cache[note_id] = None
        self.con.execute("DELETE FROM anchors WHERE note_id = ?", [note_id])

    def anchored_note_ids(self, statuses: Sequence[str] = ("active",)) -> list[int]:
        rows = self.con.execute(
            "SELECT DISTINCT a.note_id FROM anchors a JOIN notes n ON n.id = a.note_id "
            "WHERE n.status IN (SELECT unnest(?)) ORDER BY a.note_id", [list(statuses)]).fetchall()
        return [r[0] for r in rows]

    def variable_targets(self, scope: str) -> list[str]:
        """Names of variables that active notes are anchored to in ``scope`` (a notebook)."""
        rows = self.con.execute(
            "SELECT DISTINCT a.target FROM anchors a JOIN notes n ON n.id = a.note_id "
            "WHERE n.status = 'active' AND a.kind = 'variable' "
            "AND coalesce(json_extract_string(a.fingerprint, '$.scope'), '') = ? "
            "ORDER BY a.target", [scope]).fetchall()
        return [r[0] for r in rows]


def _now() -> datetime:
    return datetime.now(timezone.utc)
