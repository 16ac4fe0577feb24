"""A team's store on PostgreSQL: the same tables and the same interface as the DuckDB store.

:class:`PostgresStore` keeps the canonical data and the journal (vectors included) in one
schema of a PostgreSQL database; each member's engine keeps its indexes locally and
catches up from the journal (``shared`` is True, see ``Engine.catch_up``).

Positions never skip a committed event: every write transaction first takes a
transaction-level advisory lock on the store, so appends are serialised and commit in
position order. A reader that has seen position 11 has seen 10 too (the classic trap, 11
committing before 10, cannot happen). ``tests/test_team.py`` commits writers in
overlapping transactions and checks that no member misses one.

Most SQL is the DuckDB store's (inherited); what the two spell differently (``arg_max``,
``QUALIFY``, ``list_has_all``, JSON functions, upserts, bulk inserts) is overridden here.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from .. import __version__
from ..errors import ReadOnlyStore, StoreTooNew, StoreUnavailable, StoreUnreachable
from ..models import Anchor, Note
from . import schema
from ..address import Address
from .duckdb import Store
from .filters import (_BY_AUTHOR, _FOLLOWS, _NOTE_COLUMNS, _NOTE_FROM, _PRIORITY_CODE,
                      _RESOLUTION_EVENTS,
                      _STATUS_AFTER,
                      _STATUS_EVENTS, _ACTIVE_AFTER, EVENT_WORDS, Filters, _naive, _note, _now,
                      _split_resolution)

# DuckDB's type names for PostgreSQL's, so an export reads the same from either store.
_TYPES = {"bigint": "BIGINT", "integer": "INTEGER", "character varying": "VARCHAR",
          "text": "VARCHAR", "bytea": "BLOB", "jsonb": "JSON", "json": "JSON",
          "timestamp without time zone": "TIMESTAMP", "boolean": "BOOLEAN"}
# The tables that can hold a note's text, rewritten after a purge.
COMPACTED = ("notes", "note_versions", "events", "embeddings", "anchors", "snapshots",
             "recall_log")


def postgres_sql(duckdb_sql: str) -> str:
    """A migration written for DuckDB, in PostgreSQL's words (the schemas stay one)."""
    return (duckdb_sql.replace("DEFAULT []", "DEFAULT '{}'").replace(" BLOB", " BYTEA")
            .replace(" JSON", " JSONB"))


def _placeholders(sql: str, params: Sequence[Any]) -> str:
    """DuckDB's ``?`` as psycopg's ``%s``. psycopg sends a Python str untyped (so that it
    can fill a JSON column) and a list of them as an untyped array, which ``unnest``
    cannot take: those are typed here (an empty list is one of note ids)."""
    parts = sql.replace("%", "%%").split("?")
    out = [parts[0]]
    for part, value in zip(parts[1:], params):
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            out.append("%s::varchar[]" if value else "%s::bigint[]")
        else:
            out.append("%s")
        out.append(part)
    return "".join(out)


class _Connection:
    """psycopg behind the DuckDB connection's calls: ``?`` placeholders, ``execute``
    returning something to fetch from, PostgreSQL's errors as nbmemory's."""

    def __init__(self, store: PostgresStore):
        self.store = store
        self.raw = store._connect()

    def execute(self, sql: str, params: Sequence[Any] | None = None):
        with self.store.errors():
            if params is None:
                return self.raw.execute(sql)
            return self.raw.execute(_placeholders(sql, params), params)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            with self.store.errors(), self.raw.cursor() as cursor:
                cursor.executemany(_placeholders(sql, rows[0]), rows)


class PostgresStore(Store):
    """One team store: a schema in a PostgreSQL database, reached through libpq."""

    shared = True
    _FILTER_SQL = {"all_tags": "n.tags @> ?::varchar[]"}
    _CONTAINS = "strpos({}, {}) > 0"
    _WITHOUT_WORDS = f"data - '{{{','.join(EVENT_WORDS)}}}'::text[]"

    def __init__(self, address: Address):
        try:
            import psycopg
            from psycopg.types.string import TextLoader
        except ImportError:
            raise StoreUnavailable(
                "A team store on PostgreSQL needs psycopg 3: pip install 'nbmemory[team]'"
            ) from None
        self.address = address
        self.path = address.url
        self.directory = None
        self._anchor_cache: dict[int, list[tuple[int, Anchor]] | None] = {}
        self._anchors_upto: int | None = None
        self.commits = 0
        self._in_transaction = self._closed = False
        self._migrations: int | None = None  # how many this store had once opened
        self._psycopg, self._text_loader = psycopg, TextLoader
        self.con = _Connection(self)
        try:
            self._migrate()
        except BaseException:
            self.con.raw.close()
            raise

    def _connect(self):
        """A new connection to the store's schema (creating the schema if it can)."""
        psycopg, address = self._psycopg, self.address
        try:
            raw = psycopg.connect(address.conninfo, autocommit=True, connect_timeout=10,
                                  application_name="nbmemory")
        except psycopg.ProgrammingError as exc:  # libpq cannot read the address: a typo
            raise StoreUnavailable(
                f"The team store address {address.url} is not one PostgreSQL can use "
                f"({_first_line(exc)}). Check the address (docs/team.md shows its forms).") \
                from None
        except psycopg.Error as exc:
            if refused_connection(str(exc)):
                raise StoreUnavailable(
                    f"The team store {address.url} refused this connection "
                    f"({_first_line(exc).removeprefix('connection failed: ')}). Check the "
                    "address, and that ~/.pgpass, PGPASSWORD or PGSERVICE give this user "
                    "access.") from None
            raise StoreUnreachable(
                f"The team store {address.url} is unreachable ({_first_line(exc)}). Check "
                "that the server runs and that ~/.pgpass, PGPASSWORD or PGSERVICE give this "
                "user access.") from None
        for name in ("json", "jsonb"):  # JSON columns read back as text, as from DuckDB
            raw.adapters.register_loader(name, self._text_loader)
        try:
            if without_usage(raw, address.schema):
                user = raw.info.user
                raw.close()
                raise StoreUnavailable(no_usage_message(address.url, address.schema, user))
            if not raw.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s",
                               [address.schema]).fetchone():
                try:
                    raw.execute(f"CREATE SCHEMA IF NOT EXISTS {address.schema}")
                except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateSchema):
                    pass  # another member's owner created it at the same moment
            raw.execute(f"SET search_path TO {address.schema}")
        except psycopg.errors.InsufficientPrivilege:
            raw.close()
            raise StoreUnavailable(
                f"The team store {address.url} does not exist yet and this user may not "
                f"create it (schema {address.schema}): ask the database's owner to open it "
                "once, or to grant CREATE on the database.") from None
        return raw

    @contextmanager
    def errors(self) -> Iterator[None]:
        """PostgreSQL's errors as nbmemory's: a lost server is :class:`StoreUnreachable`
        (the next call reconnects), a missing grant :class:`ReadOnlyStore`."""
        psycopg = self._psycopg
        if self._closed:
            raise StoreUnavailable(f"The team store {self.address.url} was closed.")
        if self.con_broken():
            if self._in_transaction:
                raise self._unreachable("the connection broke inside a transaction")
            self.con.raw = self._connect()
        try:
            yield
        except psycopg.errors.InsufficientPrivilege as exc:
            raise ReadOnlyStore(
                f"{self.address.url} is a read-only team store for this user "
                f"({_first_line(exc)}); nothing was written. Ask its owner for write access."
            ) from None
        except psycopg.OperationalError as exc:
            raise self._unreachable(_first_line(exc)) from None

    def con_broken(self) -> bool:
        raw = getattr(self.con, "raw", None)
        return raw is None or raw.closed or raw.broken

    def _unreachable(self, why: str) -> StoreUnreachable:
        return StoreUnreachable(
            f"The team store {self.address.url} is unreachable ({why}); what was not "
            "acknowledged was not written, and sending it again is safe.")

    def close(self, *, checkpoint: bool = True) -> None:
        self._closed = True
        self.con.raw.close()

    def note_states(self, statuses: Sequence[str]
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        follows = _FOLLOWS.format(
            seconds="extract(epoch FROM created_at - lag(created_at) OVER w)")
        rows = self.con.execute(
            f"SELECT id, {_PRIORITY_CODE}, status <> 'active', {follows} FROM notes "
            f"WHERE status = ANY(?) {_BY_AUTHOR} ORDER BY id", [list(statuses)]).fetchall()
        return (np.array([r[0] for r in rows], dtype=np.int64),
                np.array([r[1] for r in rows], dtype=np.int8),
                np.array([r[2] for r in rows], dtype=bool),
                np.array([-1 if r[3] is None else r[3] for r in rows], dtype=np.int64))

    def reader(self) -> PostgresStore:
        """The store itself: the engine fills a team store's rows on the thread that opens
        it, never from a thread of their own."""
        return self

    def compact(self) -> None:
        """Rewrite the tables that held a purged note's text, so no dead row keeps it."""
        for table in COMPACTED:
            self.con.execute(f"VACUUM FULL {self.address.schema}.{table}")

    @property
    def data_errors(self) -> tuple[type[Exception], ...]:
        """What PostgreSQL raises for a row its schema refuses (an import edited by hand)."""
        return self._psycopg.DataError, self._psycopg.IntegrityError

    @property
    def purge_owners(self) -> list[str]:
        """The roles owning the tables :meth:`compact` rewrites, when this user cannot act as
        them: PostgreSQL then skips ``VACUUM FULL`` with a warning, and the text would stay
        in the server's files. Empty when this user may purge."""
        rows = self.con.execute(
            "SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = ? AND tablename IN "
            f"({', '.join('?' for _ in COMPACTED)}) AND NOT pg_has_role(tableowner, 'USAGE') "
            "AND NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) "
            "ORDER BY tableowner", [self.address.schema, *COMPACTED]).fetchall()
        return [row[0] for row in rows]

    # -- schema and transactions ----------------------------------------------------------

    def _migrate(self) -> None:
        with self.transaction():  # only a new store is created (a reader may not create)
            if self.con.execute("SELECT to_regclass('migrations')").fetchone()[0] is None:
                self.con.execute("CREATE TABLE migrations "
                                 "(name VARCHAR PRIMARY KEY, applied_at TIMESTAMP NOT NULL)")
            applied = {r[0] for r in self.con.execute("SELECT name FROM migrations").fetchall()}
            unknown = sorted(applied - {name for name, _ in schema.MIGRATIONS})
            if unknown:
                raise self._too_new(unknown[-1])
        for name, sql in schema.MIGRATIONS:
            with self.transaction():  # the lock makes a second member wait, then skip
                if self.con.execute("SELECT 1 FROM migrations WHERE name = ?",
                                    [name]).fetchone():
                    continue
                for statement in filter(str.strip, postgres_sql(sql).split(";")):
                    self.con.execute(statement)
                self.con.execute("INSERT INTO migrations VALUES (?, ?)", [name, _naive(_now())])
                self._set_meta("schema_version", str(schema.SCHEMA_VERSION))
                self._set_meta("written_by", __version__)
        self._migrations = len(schema.MIGRATIONS)

    def _too_new(self, migration: str) -> StoreTooNew:
        return StoreTooNew(
            f"The team store {self.address.url} was written by a newer nbmemory (it has "
            f"migration {migration}; this is nbmemory {__version__} with schema "
            f"{schema.SCHEMA_VERSION}). Upgrade nbmemory (pip install -U nbmemory); the store "
            "was not touched.")

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction holding the store's advisory lock: writers from every member
        are serialised, so positions commit in order."""
        with self.errors():
            raw = self.con.raw
            self._in_transaction = True
            try:
                with raw.transaction():
                    raw.execute("SELECT pg_advisory_xact_lock(hashtext(%s))",
                                [f"nbmemory:{self.address.schema}"])
                    if self._migrations is not None:  # a member's newer nbmemory since?
                        newer = raw.execute("SELECT max(name) FROM migrations HAVING "
                                            "count(*) > %s", [self._migrations]).fetchone()
                        if newer:
                            raise self._too_new(newer[0])
                    yield
                    raw.execute("SELECT pg_notify(%s, '')", [self.channel])  # sent on commit
            finally:
                self._in_transaction = False
        self.commits += 1

    @property
    def channel(self) -> str:
        return f"{self.address.schema}_journal"

    def listen(self, woken: Callable[[], None]) -> threading.Thread:
        """Call ``woken()`` (in a daemon thread) after each commit to this store, by any
        member, and after the connection to the server comes back (notifications sent
        meanwhile are lost). Ends when the store is closed."""
        def run() -> None:
            backoff = 0.5
            while not self._closed:
                try:
                    with self._psycopg.connect(self.address.conninfo, autocommit=True,
                                               connect_timeout=10) as con:
                        con.execute(f'LISTEN "{self.channel}"')
                        backoff = 0.5
                        woken()
                        while not self._closed:
                            for _ in con.notifies(timeout=1.0, stop_after=1):
                                woken()
                except Exception:  # noqa: BLE001 - a lost server: listen again later
                    if not self._closed:
                        time.sleep(backoff)
                        backoff = min(backoff * 2, 10.0)

        thread = threading.Thread(target=run, name="nbmemory-team-listener", daemon=True)
        thread.start()
        return thread

    @property
    def read_only(self) -> bool:
        """True when this user may read the store but not add notes (PostgreSQL grants)."""
        return not self.con.execute(
            "SELECT has_table_privilege('notes', 'INSERT')").fetchone()[0]

    # -- what PostgreSQL spells differently -------------------------------------------------

    def _set_meta(self, key: str, value: str) -> None:
        self.con.execute("INSERT INTO meta VALUES (?, ?) ON CONFLICT (key) "
                         "DO UPDATE SET value = excluded.value", [key, value])

    def log_recalls(self, entries: Sequence[dict]) -> None:
        try:
            super().log_recalls(entries)
        except ReadOnlyStore:
            pass  # statistics only: a reader's recalls are not counted

    def request_notes(self, request_ids: Sequence[str]) -> dict[str, int]:
        if not request_ids:
            return {}
        rows = self.con.execute(
            "SELECT DISTINCT ON (request_id) request_id, note_id FROM events "
            "WHERE request_id = ANY(?::varchar[]) ORDER BY request_id, seq",
            [list(request_ids)]).fetchall()
        return {r[0]: r[1] for r in rows}

    def insert_rows(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]],
                    chunk: int = 2048) -> None:
        """Insert ``rows`` with COPY (arrays of tags cannot be unnested per row here)."""
        if not rows:
            return
        with self.errors(), self.con.raw.cursor() as cursor:
            with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)

    def note_ids(self, filters: Filters) -> np.ndarray:
        where, params = filters.sql(**self._FILTER_SQL)
        rows = self.con.execute(
            f"SELECT n.id FROM {_NOTE_FROM} WHERE {where} ORDER BY n.id", params).fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    def notes_at(self, seq: int) -> list[tuple[Note, str]]:
        rows = self.con.execute(f"""
            WITH last AS (
                SELECT DISTINCT ON (note_id) note_id, type AS last_type FROM events
                WHERE seq <= ? AND note_id IS NOT NULL AND type IN ({_STATUS_EVENTS})
                ORDER BY note_id, seq DESC),
            ver AS (
                SELECT note_id, max(version) AS version FROM note_versions
                WHERE seq <= ? GROUP BY note_id)
            SELECT n.id, v.text, v.kind, v.priority, v.tags, {_STATUS_AFTER}, v.version,
                   n.created_at, v.created_at, v.author, v.provenance, n.supersedes,
                   (SELECT e.type || ':' || coalesce(e.data->>'reason', '') FROM events e
                    WHERE e.note_id = n.id AND e.seq <= ? AND
                          e.type IN ({_RESOLUTION_EVENTS}) ORDER BY e.seq DESC LIMIT 1),
                   NULL, v.content_hash
            FROM last JOIN ver USING (note_id)
            JOIN note_versions v ON v.note_id = ver.note_id AND v.version = ver.version
            JOIN notes n ON n.id = ver.note_id
            ORDER BY n.id""", [seq, seq, seq]).fetchall()
        return [(_note(r[:12] + _split_resolution(r[12])), r[14]) for r in rows]

    def count_active_at(self, seq: int) -> int:
        return self.con.execute(
            "SELECT count(*) FROM (SELECT DISTINCT ON (note_id) type AS last_type FROM events "
            f"WHERE seq <= ? AND note_id IS NOT NULL AND type IN ({_STATUS_EVENTS}) "
            f"ORDER BY note_id, seq DESC) last WHERE last_type IN ({_ACTIVE_AFTER})",
            [seq]).fetchone()[0]

    def _latest_anchors(self, where: str, params: list) -> list[tuple]:
        return self.con.execute(
            "SELECT * FROM (SELECT DISTINCT ON (note_id, position) note_id, position, kind, "
            f"target, origin, fingerprint FROM anchors {where} "
            "ORDER BY note_id, position, seq DESC) latest ORDER BY note_id, position",
            params).fetchall()

    def variable_targets(self, scope: str) -> list[str]:
        rows = self.con.execute(
            "SELECT DISTINCT a.target FROM anchors a JOIN notes n ON n.id = a.note_id "
            "WHERE n.status = 'active' AND a.kind = 'variable' "
            "AND coalesce(a.fingerprint->>'scope', '') = ? ORDER BY a.target", [scope]).fetchall()
        return [r[0] for r in rows]

    def tables(self) -> dict[str, dict[str, str]]:
        rows = self.con.execute(
            "SELECT table_name, column_name, data_type, udt_name FROM information_schema.columns "
            "WHERE table_schema = ? ORDER BY table_name, ordinal_position",
            [self.address.schema]).fetchall()
        tables: dict[str, dict[str, str]] = {}
        for table, column, kind, udt in rows:
            name = (_TYPES.get(udt[1:].replace("varchar", "character varying"), "VARCHAR") + "[]"
                    if kind == "ARRAY" else _TYPES.get(kind, kind.upper()))
            tables.setdefault(table, {})[column] = name
        return tables


# What a server says when the next attempt will be refused too (a wrong password, role or
# database); a server starting, stopping, recovering or full says other things, and those
# are retried.
_REFUSALS = ("authentication failed", "does not exist", "no password supplied",
             "no pg_hba.conf entry", "permission denied for database")


def without_usage(con, schema: str) -> bool:
    """Whether the store's schema exists but this role may not use it: PostgreSQL then
    skips it in the search path, and the first statement fails far from the cause."""
    row = con.execute("SELECT NOT has_schema_privilege(oid, 'USAGE') FROM pg_namespace "
                      "WHERE nspname = %s", [schema]).fetchone()
    return bool(row and row[0])


def no_usage_message(url: str, schema: str, user: str) -> str:
    return (f"{user} has no access to the team store {url} (schema {schema}): ask its owner "
            f"to GRANT USAGE ON SCHEMA {schema} TO {user}, with the table grants of "
            f"docs/team.md (Permissions).")


def refused_connection(message: str) -> bool:
    if "FATAL:" in message or "fe_sendauth:" in message:  # libpq's own: no password to send
        return any(refusal in message for refusal in _REFUSALS)
    return message.startswith("connection is bad: invalid ")  # a malformed option


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
