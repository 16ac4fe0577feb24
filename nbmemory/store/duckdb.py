"""The canonical store: one DuckDB file holding notes, versions, vectors and the journal.

:class:`Store` is what the engine and the exchange format use: appending events, reading and
writing notes, versions, anchors, vectors by content hash, snapshots and meta. Vectors,
snapshots, anchors, the recall log and whole-table rows are in :class:`.rows.Rows`.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager, suppress
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterator, Sequence

import duckdb
import numpy as np

from .. import __version__
from ..errors import StoreTooNew, StoreUnavailable
from ..models import Anchor, Event, Note, Provenance
from . import schema
from .filters import (_BY_AUTHOR, _FOLLOWS, _NOTE_COLUMNS, _NOTE_FROM, _PRIORITY_CODE,
                      _RESOLUTION_EVENTS, _STATUS_AFTER, _STATUS_EVENTS, Filters, _aware,
                      _id_list, _naive, _note, _now, _split_resolution, EVENT_WORDS)
from .rows import Rows
from .schema import COMPACT_FILENAME, DB_FILENAME, SCHEMA_VERSION

FEW_ROWS = 16  # up to this many, insert_rows writes VALUES (see there)
# DuckDB keeps what it read cached up to 80% of RAM by default: at 1M notes the vectors read
# once to fill the in-memory rows stayed, 1.6 GB. After such a pass it keeps less (_Reader).
MEMORY_LIMIT, AFTER_FULL_READ = os.environ.get("NBMEMORY_DUCKDB_MEMORY", "512MB"), "128MB"
# _NOTE_COLUMNS with the times as microseconds since the epoch (exact, and quick to read).
_CARD_COLUMNS = _NOTE_COLUMNS.replace("n.created_at", "epoch_us(n.created_at)").replace(
    "n.updated_at", "epoch_us(n.updated_at)")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def note_from_line(line: bytes | str) -> Note:
    """The note in a line of :meth:`Store.note_lines`, as :meth:`Store.get_notes` reads it."""
    row = json.loads(line)
    for at in (7, 8):
        if row[at] is not None:
            row[at] = _EPOCH + timedelta(microseconds=row[at])
    return _note(row, row[10] or {})


class Store(Rows):
    """Owns one DuckDB connection. Not thread-safe: the engine serialises calls."""

    shared = False  # only this process writes it (a team store is shared: postgres.py)
    store_id: str | None = None  # see schema.identify (a team store's caches go unchecked)
    note_from_line = staticmethod(note_from_line)
    # What the SQL dialects spell differently (postgres.py has PostgreSQL's).
    _FILTER_SQL = {"each_tag": "list_contains(n.tags, ?)", "one_of": "list_contains(?, {})"}
    _CONTAINS = "contains({}, {})"
    _WITHOUT_WORDS = "data".join(("json_remove(" * len(EVENT_WORDS), "".join(f", '$.{w}')" for w in EVENT_WORDS)))

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self._anchor_cache: dict[int, list[tuple[int, Anchor]] | None] = {}
        self._anchors_upto: int | None = None
        self.commits = 0
        self._types: dict[str, dict[str, str]] = {}  # column types by table, for insert_rows
        self.path = self.directory / DB_FILENAME
        (self.directory / COMPACT_FILENAME).unlink(missing_ok=True)  # an interrupted compact
        try:
            self.con = duckdb.connect(str(self.path), config={"memory_limit": MEMORY_LIMIT})
        except duckdb.Error as exc:
            raise StoreUnavailable(schema.cannot_open(self.path, exc)) from exc
        try:
            self._migrate()
            self.store_id = schema.identify(self)
        except BaseException:
            self.con.close()
            raise

    def close(self, *, checkpoint: bool = True) -> None:
        """Checkpoint, then close: after a clean close every note is in the main file. Not
        when the files at this path are no longer this store's: DuckDB would remove the
        write-ahead log of the store that replaced it (by name) on closing."""
        with suppress(duckdb.Error):  # a read-only or failing disk: still release the file
            self.con.execute("CHECKPOINT" if checkpoint else "PRAGMA disable_checkpoint_on_shutdown")
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
        self.con.execute("ATTACH '" + str(fresh).replace("'", "''") + "' AS compacted")
        try:
            self.con.execute(f'COPY FROM DATABASE "{name}" TO compacted')
        finally:
            self.con.execute("DETACH compacted")
        self.con.close()
        os.replace(fresh, self.path)
        self.con = duckdb.connect(str(self.path), config={"memory_limit": MEMORY_LIMIT})

    # -- schema -------------------------------------------------------------------------

    def _migrate(self) -> None:
        self.con.execute(
            "CREATE TABLE IF NOT EXISTS migrations (name VARCHAR PRIMARY KEY, applied_at TIMESTAMP NOT NULL)"
        )
        applied = {row[0] for row in self.con.execute("SELECT name FROM migrations").fetchall()}
        known = {name for name, _ in schema.MIGRATIONS}
        unknown = sorted(applied - known)
        if unknown:
            raise StoreTooNew(
                f"The store {self.path} was written by a newer nbmemory (it has migration "
                f"{unknown[-1]}; this is nbmemory {__version__} with schema {SCHEMA_VERSION}). "
                "Upgrade nbmemory (pip install -U nbmemory); the store was not touched."
            )
        for name, sql in schema.MIGRATIONS:
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
        return self.append_events(type, [note_id], actor=actor, at=at, request_id=request_id,
                                  data=data)

    def append_events(self, type: str, note_ids: Sequence[int | None], *, actor: str | None,
                      at: datetime, request_id: str | None = None,
                      data: dict | None = None) -> int:
        """One event of ``type`` per note, in one statement; returns the first's position."""
        first = self.position() + 1  # the engine serialises writers
        data = json.dumps(data) if data else None
        self.insert_rows("events", ("seq", "occurred_at", "note_id", "type", "actor",
                                    "request_id", "data"),
                         [[first + i, _naive(at), note_id, type, actor, request_id, data]
                          for i, note_id in enumerate(note_ids)])
        return first

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

    def check_events(self, note_ids: Sequence[int]) -> dict[int, list[Event]]:
        """What decides the checks of ``note_ids``: their outcomes, trust and what
        imports changed, oldest first, by note."""
        if not note_ids:
            return {}
        rows = self.con.execute(
            "SELECT seq, occurred_at, note_id, type, actor, data FROM events "
            f"WHERE note_id IN ({_id_list(note_ids)}) AND (type LIKE 'check_%' OR type IN "
            "('trusted', 'edited', 'verified', 'revoked', 'reinstated')) "
            "ORDER BY seq").fetchall()
        out: dict[int, list[Event]] = {}
        for r in rows:
            out.setdefault(r[2], []).append(
                Event(r[0], _aware(r[1]), r[2], r[3], r[4], json.loads(r[5]) if r[5] else {}))
        return out

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
        notes). For a few rows (one remember) ``VALUES`` is cheaper: unnesting typed lists
        cost 0.65 ms more per statement. Call inside a transaction."""
        if not rows:
            return
        if len(rows) <= FEW_ROWS:
            marks = "(" + ", ".join("?" * len(columns)) + ")"
            self.con.execute(f"INSERT INTO {table} ({', '.join(columns)}) VALUES "
                             + ", ".join([marks] * len(rows)), [v for row in rows for v in row])
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
            "VALUES (?, ?, ?, 0, ?, ?, ?)", [note_id, uid, status, supersedes, _naive(at), _naive(at)])

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
        self.con.execute(  # the note's author stays who wrote it; a version's, who edited
            "UPDATE notes SET version = ?, updated_at = ?, text = ?, content_hash = ?, kind = ?, "
            "priority = ?, tags = ?, provenance = ? WHERE id = ?",
            [version, _naive(at), text, content_hash, kind, priority, list(tags),
             json.dumps(provenance.to_dict()), note_id])
        return version

    def set_status(self, note_ids: int | Sequence[int], status: str) -> None:
        ids = [note_ids] if isinstance(note_ids, int) else note_ids
        self.con.execute(f"UPDATE notes SET status = ? WHERE id IN ({_id_list(ids)})", [status])

    def purge_text(self, note_id: int) -> None:
        """Erase a note's text, provenance and vectors in every version (privacy), and what
        repeated it: recall queries that held it (or that it holds, 12 characters or
        more), its occurrences in snapshot messages, the reasons given when it was
        confirmed or refuted."""
        texts = [r[0] for r in self.con.execute(
            "SELECT DISTINCT text FROM note_versions WHERE note_id = ? AND text <> ''",
            [note_id]).fetchall()]
        contains = self._CONTAINS
        for text in texts:
            self.con.execute(
                f"DELETE FROM recall_log WHERE {contains.format('lower(query)', 'lower(?)')} "
                f"OR (length(query) >= 12 AND {contains.format('lower(?)', 'lower(query)')})",
                [text, text])
            self.con.execute("UPDATE snapshots SET message = replace(message, ?, '[purged]') "
                             f"WHERE {contains.format('message', '?')}", [text, text])
        self.con.execute(f"UPDATE events SET data = {self._WITHOUT_WORDS} "
                         "WHERE note_id = ? AND data IS NOT NULL", [note_id])
        self.con.execute("UPDATE notes SET resolution_reason = NULL WHERE id = ?", [note_id])
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
        row = self.con.execute("SELECT id FROM notes WHERE supersedes = ? ORDER BY id DESC LIMIT 1",
                               [note_id]).fetchone()  # the newest, if it was replaced again
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

    def note_lines(self, blocks: Sequence[int] | None, size: int) -> tuple[np.ndarray, list[str]]:
        """Ids (ascending) and rows as lines of JSON (:func:`note_from_line` reads them) of
        the notes whose ``id // size`` is in ``blocks`` (None: every note); for the cards."""
        where = "" if blocks is None else (  # the range first: DuckDB skips row groups outside it
            f"WHERE n.id BETWEEN {min(blocks) * size} AND {(max(blocks) + 1) * size - 1} "
            f"AND n.id // {int(size)} IN ({_id_list(blocks)})")
        cols = self.con.execute(
            f"SELECT n.id, json_array({_CARD_COLUMNS}) AS line FROM {_NOTE_FROM} {where} "
            "ORDER BY n.id").fetchnumpy()
        return np.asarray(cols["id"], np.int64), cols["line"].tolist()

    def list_notes(self, filters: Filters, *, offset: int = 0, limit: int = 50,
                   order: str = "newest") -> tuple[list[Note], int]:
        where, params = filters.sql(**self._FILTER_SQL)
        order_by = {"newest": "n.updated_at DESC, n.id DESC", "oldest": "n.id ASC",
                    "priority": "CASE n.priority WHEN 'high' THEN 0 WHEN 'medium' THEN 1 ELSE 2 END, n.id DESC"}[order]
        total = self.con.execute(f"SELECT count(*) FROM {_NOTE_FROM} WHERE {where}", params).fetchone()[0]
        rows = self.con.execute(
            f"SELECT {_NOTE_COLUMNS} FROM {_NOTE_FROM} WHERE {where} ORDER BY {order_by} "
            "LIMIT ? OFFSET ?", params + [limit, offset],
        ).fetchall()
        return [_note(r) for r in rows], total

    def note_ids(self, filters: Filters) -> np.ndarray:
        where, params = filters.sql(**self._FILTER_SQL)
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

    def note_states(self, statuses: Sequence[str]
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Ids (ascending), priorities (indexes into ``PRIORITIES``), whether inactive, and
        the note each follows (``_FOLLOWS``), of every note in ``statuses``, as arrays."""
        follows = _FOLLOWS.format(seconds="epoch(created_at) - epoch(lag(created_at) OVER w)")
        cols = self.con.execute(
            f"SELECT id, {_PRIORITY_CODE} AS priority, status <> 'active' AS inactive, "
            f"{follows} AS follows FROM notes WHERE status IN (SELECT unnest(?)) "
            f"{_BY_AUTHOR} ORDER BY id", [list(statuses)]).fetchnumpy()
        return (np.asarray(cols["id"], dtype=np.int64), np.asarray(cols["priority"], np.int8),
                np.asarray(cols["inactive"], dtype=bool), np.asarray(cols["follows"], np.int64))

    def reader(self) -> Rows:
        """Reads of vectors on a connection of their own, for a thread beside the one that
        writes (a DuckDB connection serves one call at a time; it sees what is committed)."""
        reader = _Reader()
        reader.con = self.con.cursor()
        return reader

    def index_rows(self, statuses: Sequence[str],
                   ids: Sequence[int] | None = None) -> list[tuple[int, str, str, str]]:
        """(id, text, priority, status) of every note in ``statuses`` (of ``ids`` only, if
        given): what the indexes need."""
        where = f" AND n.id IN ({_id_list(ids)})" if ids is not None else ""
        return self.con.execute(
            f"SELECT n.id, n.text, n.priority, n.status FROM {_NOTE_FROM} "
            f"WHERE n.status IN (SELECT unnest(?)){where} ORDER BY n.id",
            [list(statuses)]).fetchall()

    def forget_cached(self, note_ids: Sequence[int]) -> None:
        """Read ``note_ids`` afresh next time (another writer changed them)."""
        for note_id in note_ids:
            self._anchor_cache[int(note_id)] = None
        self.commits += 1

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


class _Reader(Rows):
    """Rows on a cursor of their own (:meth:`Store.reader`). After a pass over every vector,
    a moment's lower limit makes DuckDB let go of the pages it read (at 1M notes 0.4 GB of the
    owner's memory; 31 ms); while a bulk write holds more, DuckDB refuses it ("could not free
    up enough memory"), which ended the copy of the rows before its last step."""

    def vector_chunks(self, *args, **kwargs) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        try:
            yield from super().vector_chunks(*args, **kwargs)
        finally:
            with suppress(duckdb.Error):
                self.con.execute(f"SET memory_limit = '{AFTER_FULL_READ}'")
            self.con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
