"""``nbmemory doctor``: check an installation end to end, and say how to fix each problem.

The store is inspected read-only (DuckDB opened ``read_only``, the vector index
memory-mapped), under the owner lock so that nothing opens it meanwhile. Nothing is
migrated, rebuilt or repaired here: each failed check names the command that does it.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterator

from ._version import __version__


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # ok | warn | fail | skip
    detail: str
    fix: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_checks(store: str | None, model: str, *, skip: set[str] = frozenset()) -> list[Check]:
    """Every check, in the order a person would fix them."""
    checks = [Check("nbmemory", "ok", f"nbmemory {__version__}, Python {sys.version.split()[0]}, "
                                       f"{sys.executable}")]
    if "model" not in skip:
        checks.append(check_model(model))
    checks.extend(check_store(store, model))
    if "jupyter" not in skip:
        checks.append(check_server_extension())
        checks.append(check_labextension())
    return checks


# -- the model --------------------------------------------------------------------------


def check_model(model: str) -> Check:
    from .embed import make_embedder
    from .errors import ModelUnavailable

    started = time.perf_counter()
    try:
        embedder = make_embedder(model)
        vectors = embedder.encode(["nbmemory doctor checks that the model embeds offline"])
    except ModelUnavailable as exc:
        return Check("model", "fail", f"{model!r} cannot be loaded offline", str(exc))
    engine = getattr(embedder, "engine", None)
    runs = f", on {'ONNX Runtime' if engine == 'onnx' else 'torch'}" if engine else ""
    if getattr(embedder, "runtime_note", None):
        return Check("model", "warn", f"{model} loads offline ({vectors.shape[1]} dims{runs}, "
                                      f"{time.perf_counter() - started:.1f} s), but "
                                      f"{embedder.runtime_note}",
                     "Set NBMEMORY_MODEL_CACHE to a directory this user can write (or unset "
                     "it): the model's ONNX export is kept there and loads in under a second.")
    return Check("model", "ok", f"{model} loads offline ({vectors.shape[1]} dims{runs}, "
                                f"{time.perf_counter() - started:.1f} s)")


# -- the store --------------------------------------------------------------------------


def check_store(store: str | None, model: str) -> Iterator[Check]:
    from .config import locate_store
    from .embed import model_name
    from .lock import LOCK_FILENAME, OwnerLock, read_owner, world_writable
    from .store import DB_FILENAME, lost_database
    from .store.schema import unreadable_advice

    location = locate_store(store)
    directory = location.path
    opt = f" --store {location.address or directory}" if store else ""
    if directory.exists() and not directory.is_dir():
        yield Check("store", "fail", f"{directory} is a file, not a store",
                    "Point NBMEMORY_HOME (or --store) at a directory.")
        return
    if not directory.is_dir():
        yield Check("store", "warn", f"no store yet at {location}",
                    "It is created by the first remember (nbmemory remember ..., %remember).")
        return
    if world_writable(directory.stat().st_mode):
        yield Check("store", "fail", f"{directory} is writable by every user",
                    f"Restrict it: chmod 700 {directory}")
        return
    if not os.access(directory, os.W_OK | os.X_OK):
        read_only = bool(getattr(os, "statvfs", None)) and bool(
            os.statvfs(directory).f_flag & getattr(os, "ST_RDONLY", 1))
        yield Check("store", "fail", f"{directory} cannot be written by this user, so no "
                                     "command can open the store",
                    "Its file system is mounted read-only: mount it read-write, or copy the "
                    "store to a disk you can write." if read_only else
                    f"Give it back: chmod u+rwx {directory}")
        return
    yield Check("store", "ok", str(location))

    lock = OwnerLock(directory)
    if (directory / LOCK_FILENAME).exists() and not lock.try_acquire():
        from .service import owner_info

        info = owner_info(directory)
        if info and info.get("mode") == "service" and "state" in info:
            yield from check_live_owner(directory, info, model, opt)
            if location.address:  # the server, schema and grants: asked directly, as below
                yield from check_team(location.address, opt)
            return
        if location.address:
            yield from check_team(location.address, opt)
            return
        if info and info.get("mode") == "service":
            yield Check("owner", "warn", f"an owner (pid {info['pid']}) is starting",
                        "Run doctor again in a moment.")
            return
        pid, service = read_owner(directory)
        # nbmemory stop refuses a process that opened the store in-process: not advised then.
        yield Check("owner", "warn", f"the store is open in process {pid}; the database checks "
                                     "need it closed",
                    f"Close that process (a script or kernel that opened it in-process); then "
                    f"run doctor again." if not service else
                    f"Run: nbmemory stop{opt}; then run doctor again.")
        return
    try:
        if not lock.held:
            lock.try_acquire()
        yield Check("owner", "ok", f"no process has the store open; {next_transport()}")
        if location.address:
            yield from check_team(location.address, opt)
            return
        database = directory / DB_FILENAME
        if not database.exists():
            lost = lost_database(directory, 0)
            yield (Check("database", "fail", f"{DB_FILENAME} is missing from {directory}", lost)
                   if lost else Check("database", "warn", f"no {DB_FILENAME} yet in {directory}",
                                      "It is created by the first remember."))
            return
        import duckdb

        try:
            con = duckdb.connect(str(database), read_only=True)
        except duckdb.Error as exc:
            yield Check("database", "fail", f"{database} is unreadable ({' '.join(str(exc).split())})",
                        unreadable_advice(database, str(exc)))
            return
        try:
            yield Check("database", "ok", f"{database} opens read-only (DuckDB {duckdb.__version__})")
            schema = check_schema(con, opt)
            yield schema
            if schema.status == "fail" or schema.detail.startswith("empty"):
                return
            yield from check_contents(con, directory, model_name, model, opt)
        except duckdb.Error as exc:  # opens, then a read fails: a truncated or damaged file
            yield Check("database", "fail", f"{database} is damaged ({str(exc).splitlines()[0]})",
                        f"Restore {DB_FILENAME} from a backup, or move it and {DB_FILENAME}.wal "
                        "away together to start a new store (nbmemory import brings back an "
                        "export).")
        finally:
            con.close()
    finally:
        lock.release()


def check_team(url: str, opt: str) -> Iterator[Check]:
    """A team store: the server reachable with libpq's credentials, its schema, the grants
    (read only, never creating anything)."""
    from .address import Address

    try:
        import psycopg
    except ImportError:
        yield Check("team", "fail", "psycopg is not installed", "pip install 'nbmemory[team]'")
        return
    from .store.postgres import no_usage_message, refused_connection, without_usage

    address = Address.parse(url)
    try:
        con = psycopg.connect(address.conninfo, autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        why = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        if refused_connection(str(exc)):  # it answered: no such database, user or password
            yield Check("server", "fail", f"{url} refused this connection ({why})",
                        "Check the address, and that ~/.pgpass, PGPASSWORD or PGSERVICE give "
                        "this user access.")
        else:
            yield Check("server", "fail", f"{url} is unreachable ({why})",
                        "Check that the server runs, and that ~/.pgpass, PGPASSWORD or "
                        "PGSERVICE give this user access.")
        return
    with con:
        version = con.info.server_version
        yield Check("server", "ok", f"PostgreSQL {version // 10000}.{version % 10000} as "
                                    f"{con.info.user}, schema {address.schema}")
        if without_usage(con, address.schema):
            yield Check("schema", "fail", f"{con.info.user} may not use schema "
                                          f"{address.schema}", no_usage_message(
                                              url, address.schema, con.info.user))
            return
        con.execute(f"SET search_path TO {address.schema}")
        schema = check_schema(con, opt, f"WHERE table_schema = '{address.schema}'")
        if schema.detail.startswith("empty") and not _may_create(con, address.schema):
            schema = Check("schema", "fail", f"empty store (no schema yet), and {con.info.user} "
                                             f"may not create it (schema {address.schema})",
                           "Ask the database's owner to open it once, or to grant CREATE on "
                           "the database.")
        yield schema
        if schema.status == "fail" or schema.detail.startswith("empty"):
            return
        counts = dict(con.execute("SELECT status, count(*) FROM notes GROUP BY status").fetchall())
        yield Check("notes", "ok", ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
                    or "none yet")
        if not con.execute("SELECT has_table_privilege('notes', 'INSERT')").fetchone()[0]:
            yield Check("grants", "warn", f"{con.info.user} may read this team store, not write",
                        "Ask its owner: GRANT INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "
                        f"{address.schema} TO {con.info.user}")
        else:
            yield Check("grants", "ok", f"{con.info.user} may read and write")


def check_live_owner(directory: Path, info: dict, model: str, opt: str) -> Iterator[Check]:
    """The store is served by an owner process: ask it rather than open the file."""
    yield Check("owner", "ok", f"owner service pid {info.get('pid')}, nbmemory "
                               f"{info.get('version')}, model {info.get('model')}, "
                               f"up {info.get('uptime_s', 0):.0f} s, queue {info.get('queue', 0)}")
    yield check_transport(directory, info, opt)
    from .memory import Memory

    try:
        # As the owner serves it: not NBMEMORY_MODEL's, which would replace this owner.
        with Memory.open(directory, mode="service", model=info.get("model") or None) as mem:
            status = mem.status()
    except Exception as exc:  # the owner answered its info but not a request
        yield Check("owner", "fail", f"the owner did not answer a status request ({exc})",
                    f"Restart it: nbmemory stop{opt}; the next use starts a new one.")
        return
    indexed = sum(v for k, v in status.get("by_status", {}).items() if k != "purged")
    detail = (f"{status['vectors']} vectors and {status['lexical_docs']} keyword entries for "
              f"{indexed} indexed notes (index: {status['index']})")
    from .embed import model_name

    if status.get("mismatch") or model_name(status["model"]) != model_name(model):
        yield Check("embedder", "fail", f"the store's vectors were made with {status['model']}, "
                                        f"the configured model is {model}",
                    f"Re-embed the notes: nbmemory reindex --model {model}{opt}")
    elif status["vectors"] == status["lexical_docs"] == indexed:
        yield Check("index", "ok", detail)
    elif status["vectors"] + status.get("unembedded", 0) == status["lexical_docs"] == indexed:
        yield Check("index", "ok", f"{detail}; {status['unembedded']} waiting for the model, "
                                   "which is loading")
    else:
        yield Check("index", "fail", detail, f"Rebuild the indexes: nbmemory reindex{opt}")


def next_transport() -> str:
    """What the next owner will serve on, and what would protect it."""
    from .errors import InvalidInput
    from .service import transport

    try:
        chosen = transport.choose()
    except InvalidInput as exc:
        return str(exc)
    if chosen == "unix":
        return (f"an owner starts on a unix socket whose peers' uid it checks "
                f"({transport.peer_check()}); {transport.TRANSPORT_ENV}=tcp for loopback TCP")
    why = "" if transport.default_transport() == "tcp" else f" ({transport.TRANSPORT_ENV}=tcp)"
    return f"an owner starts on loopback TCP{why}, its requests carrying a secret"


def check_transport(directory: Path, info: dict, opt: str) -> Check:
    """How the live owner is reached, and whether its peer check or secret is in place."""
    from .lock import POSIX_PERMISSIONS
    from .service import transport

    detail = transport.describe(info)
    restart = f"Restart the owner: nbmemory stop{opt}; the next use starts a new one."
    if info.get("transport") == "tcp":
        key = directory / transport.SECRET_NAME
        if transport.read_secret(directory) is None:
            return Check("transport", "fail", f"{detail}, but {key} is missing or not yours",
                         restart)
        if POSIX_PERMISSIONS and key.stat().st_mode & 0o077:
            return Check("transport", "fail", f"{detail}, but other users may read {key}",
                         f"chmod 600 {key}; then restart the owner: nbmemory stop{opt}")
        return Check("transport", "ok", detail)
    if not info.get("socket") or not transport.peer_check():
        return Check("transport", "fail", f"{detail}, which this Python cannot reach or check",
                     restart)
    return Check("transport", "ok", detail)


def _may_create(con, schema: str) -> bool:
    """Whether this PostgreSQL role can create the store's tables (and their schema)."""
    exists = con.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", [schema]).fetchone()
    query = ("SELECT has_schema_privilege(%s, 'CREATE')" if exists
             else "SELECT has_database_privilege(current_database(), 'CREATE')")
    return con.execute(query, [schema] if exists else []).fetchone()[0]


def check_schema(con, opt: str, where: str = "") -> Check:
    from .store import MIGRATIONS, SCHEMA_VERSION

    tables = {r[0] for r in con.execute(
        f"SELECT table_name FROM information_schema.tables {where}").fetchall()}
    if "migrations" not in tables:
        return Check("schema", "ok", "empty store (no schema yet); created on first use")
    applied = {r[0] for r in con.execute("SELECT name FROM migrations").fetchall()}
    known = [name for name, _ in MIGRATIONS]
    unknown = sorted(applied - set(known))
    if unknown:
        return Check("schema", "fail", f"written by a newer nbmemory (migration {unknown[-1]}; "
                                       f"this nbmemory {__version__} knows schema {SCHEMA_VERSION})",
                     "Upgrade nbmemory: pip install -U nbmemory. The store was not touched.")
    pending = [name for name in known if name not in applied]
    if pending:
        return Check("schema", "warn", f"older schema: {len(pending)} migration(s) pending "
                                       f"({pending[0]} ...)",
                     f"They are applied on the next open (nbmemory status{opt}).")
    return Check("schema", "ok", f"schema {SCHEMA_VERSION}, {len(applied)} migrations applied")


def check_contents(con, directory: Path, model_name, model: str, opt: str) -> Iterator[Check]:
    from .engine import INDEXED, VECTOR_FILENAME  # INDEXED: the statuses the vector index holds
    from .store import DB_FILENAME

    counts = dict(con.execute("SELECT status, count(*) FROM notes GROUP BY status").fetchall())
    yield Check("notes", "ok", ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "none yet")
    row = con.execute("SELECT value FROM meta WHERE key = 'embedder'").fetchone()
    stored = row[0] if row else None
    if stored is None:
        yield Check("index", "ok", "no vectors yet")
        return
    from .embed import make_embedder

    if model_name(stored) != make_embedder(model).name:  # constructing loads nothing
        keep = stored if stored.startswith("hash:") else model_name(stored)
        yield Check("embedder", "fail", f"the store's vectors were made with {stored}, the configured "
                                        f"model is {model!r}",
                    f"Re-embed with the configured model: nbmemory reindex --model {model}{opt}; "
                    f"or keep the store's: --model {keep} (or NBMEMORY_MODEL={keep}).")
    else:
        yield Check("embedder", "ok", f"{stored} (matches the configured model)")

    ids = {r[0] for r in con.execute(
        "SELECT id FROM notes WHERE status IN (SELECT unnest(?))", [list(INDEXED)]).fetchall()}
    position = con.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0]
    path = directory / VECTOR_FILENAME
    rebuild = f"Rebuild it from the database: nbmemory reindex{opt}"
    if not path.exists():  # an owner stopped while it was still building it, or deleted
        yield Check("index", "warn", f"{path.name} is missing ({len(ids)} notes need vectors): "
                                     "the next open rebuilds it", rebuild)
        return
    try:
        from .vectors import Index, read_meta  # usearch, loaded as dense_rows.py says

        meta = read_meta(path)
        index = Index.restore(str(path), view=True)
        if index is None:
            raise ValueError("not a usearch index")
        keys = {int(k) for k in index.keys}
    except Exception as exc:  # missing metadata, truncated or foreign file
        yield Check("index", "fail", f"{path.name} is unreadable ({type(exc).__name__}: {exc})", rebuild)
        return
    if meta.get("embedder") != stored:
        yield Check("index", "fail", f"{path.name} was built for {meta.get('embedder')}, the store "
                                     f"has {stored}", rebuild)
        return
    seen, unknown = int(meta.get("seq", 0)), keys - {r[0] for r in con.execute(
        "SELECT id FROM notes").fetchall()}
    if seen > position or unknown:  # as the engine refuses to open it (indexes.py)
        lost = (f"its vector index saw journal position {seen:,}, the database ends at "
                f"{position:,}" if seen > position else f"its vector index holds "
                f"{len(unknown):,} notes the database does not have (e.g. #{min(unknown)})")
        yield Check("database", "fail", f"the store has lost writes: {lost}",
                    f"Restore {DB_FILENAME} from a backup, or keep what the database has: move "
                    f"{path.name} and {path.name}.json away, then open the store again.")
        return
    behind = position - seen
    if behind > 0:
        changed = {r[0] for r in con.execute(
            "SELECT DISTINCT note_id FROM events WHERE seq > ? AND note_id IS NOT NULL",
            [int(meta.get("seq", 0))]).fetchall()}
        stray = (keys ^ ids) - changed
        if stray:
            yield Check("index", "fail", f"{path.name} disagrees with the database on "
                                         f"{len(stray)} notes (e.g. #{min(stray)})", rebuild)
        else:
            yield Check("index", "warn", f"{path.name} is {behind} events behind the journal "
                                         f"({len(changed)} notes); it catches up on the next open",
                        f"Nothing to do, or bring it up to date now: nbmemory reindex{opt}")
        return
    if keys != ids:
        missing, extra = ids - keys, keys - ids
        unembedded = {r[0] for r in con.execute(
            "SELECT id FROM notes n WHERE NOT EXISTS (SELECT 1 FROM embeddings e WHERE "
            "e.content_hash = n.content_hash AND e.model = ?)", [model_name(stored)]).fetchall()}
        if missing and not extra and missing <= unembedded:  # written while the model loaded
            yield Check("index", "warn", f"{len(missing)} notes have no vector yet (e.g. "
                                         f"#{min(missing)}); the next open embeds them",
                        f"Nothing to do, or embed them now: nbmemory reindex{opt}")
            return
        detail = ", ".join(part for part in (
            f"{len(missing)} notes have no vector (e.g. #{min(missing)})" if missing else "",
            f"{len(extra)} vectors have no note (e.g. #{min(extra)})" if extra else "") if part)
        yield Check("index", "fail", f"{path.name} disagrees with the database: {detail}", rebuild)
        return
    yield Check("index", "ok", f"{len(keys)} vectors, one per note, up to date with the journal")


# -- Jupyter ----------------------------------------------------------------------------


def check_server_extension() -> Check:
    name = "nbmemory.server"
    try:
        from jupyter_core.paths import jupyter_config_path
        from jupyter_server.extension.config import ExtensionConfigManager
        from jupyter_server.extension.manager import ExtensionPackage
    except ImportError:
        return Check("server extension", "skip", "jupyter_server is not installed",
                     "For the JupyterLab panel: pip install 'nbmemory[lab]'")
    enabled = ExtensionConfigManager(read_config_path=jupyter_config_path()).get_jpserver_extensions()
    if not enabled.get(name):
        state = "disabled" if name in enabled else "not enabled"
        return Check("server extension", "fail", f"{name} is {state}",
                     f"jupyter server extension enable {name}")
    try:
        ok = ExtensionPackage(name=name, enabled=True).validate()
        problem = "" if ok else "it has no extension points"
    except Exception as exc:  # the module is missing or fails to import
        ok, problem = False, f"{type(exc).__name__}: {exc}"
    if not ok:
        return Check("server extension", "fail", f"{name} is enabled but does not load ({problem})",
                     "Reinstall: pip install --force-reinstall --no-deps 'nbmemory[lab]'")
    return Check("server extension", "ok", f"{name} is enabled and loads")


def check_labextension() -> Check:
    name = "nbmemory"
    try:
        from jupyterlab.commands import AppOptions, get_app_info
    except ImportError:
        return Check("labextension", "skip", "JupyterLab is not installed",
                     "For the side panel: pip install 'nbmemory[lab]'")
    from jupyter_core.paths import jupyter_path

    # Without the path, get_app_info lists no prebuilt extension at all (JupyterLab 4).
    info = get_app_info(AppOptions(labextensions_path=jupyter_path("labextensions")))
    federated = info.get("federated_extensions") or {}
    if name not in federated:
        return Check("labextension", "fail", f"the {name} labextension is not installed in "
                                             f"{os.pathsep.join(jupyter_path('labextensions'))}",
                     "Reinstall: pip install --force-reinstall --no-deps 'nbmemory[lab]' (in a source "
                     "checkout: jupyter labextension develop . --overwrite)")
    disabled = info.get("disabled") or {}
    off = [key for key, value in disabled.items() if value and (key == name or key.startswith(name + ":"))]
    if off:
        return Check("labextension", "fail", f"disabled: {', '.join(sorted(off))}",
                     f"jupyter labextension enable {name}")
    version = federated[name].get("version", "")
    return Check("labextension", "ok", f"{name} {version} is installed and enabled".replace("  ", " "))
