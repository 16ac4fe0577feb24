"""Thin REST handlers: parse the request, call Memory on the worker thread, answer JSON.

Every verb is ``@tornado.web.authenticated`` and ``@authorized`` (resource ``nbmemory``);
every engine error goes through :func:`http_status` once. The API is documented in
``docs/rest-api.md``.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import os
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import tornado.web
from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler

from .. import __version__
from ..errors import (Conflict, InvalidInput, ModelUnavailable, NbMemoryError, NotFound,
                      StoreUnavailable)
from ..models import Note, Provenance
from ..syntax import REST, message as render_message
from .shared import HOST_KEY, MAX_PAGE, NAMESPACE

STATUS_FOR = ((InvalidInput, 400), (NotFound, 404), (Conflict, 409),
              (StoreUnavailable, 503), (ModelUnavailable, 503))
# jupyter_server's made-up user for a shared token: a uuid4 hex id named "Anonymous <moon>".
ANONYMOUS_ID = re.compile(r"[0-9a-f]{32}")
# What the panel may say about where a note written in it comes from.
PROVENANCE_FIELDS = ("notebook", "cell_id", "execution_count", "cell_source")
# Looking for a renamed notebook: at most this many notebooks, none larger than this.
MAX_SCANNED_NOTEBOOKS = 2000
MAX_SCANNED_BYTES = 20 * 2**20
SKIPPED_DIRS = {"node_modules", "__pycache__", "site-packages", ".ipynb_checkpoints"}


def http_status(exc: NbMemoryError) -> int:
    """The HTTP status for an engine error (the one error mapper)."""
    for cls, status in STATUS_FOR:
        if isinstance(exc, cls):
            return status
    return 500


def missing_feature(name: str) -> tornado.web.HTTPError:
    return tornado.web.HTTPError(
        501, f"This nbmemory ({__version__}) cannot {name} yet; upgrade nbmemory.")


def api(method: Callable) -> Callable:
    """Authenticate, authorize, and turn engine errors into JSON error replies."""

    @functools.wraps(method)
    async def wrapper(self: NbMemoryHandler, *args, **kwargs):
        try:
            return await method(self, *args, **kwargs)
        except NbMemoryError as exc:
            self.reply_error(http_status(exc), render_message(exc, REST), type(exc).__name__,
                             commands=[c.to_list() for c in exc.commands])

    return tornado.web.authenticated(authorized(wrapper))


class NbMemoryHandler(APIHandler):
    auth_resource = NAMESPACE

    @property
    def host(self):
        return self.settings[HOST_KEY]

    def note(self, note) -> dict[str, Any]:
        """A note as JSON, with ``lab_path``: its notebook relative to the server root."""
        data = note.to_dict() if hasattr(note, "to_dict") else dict(note)
        data["lab_path"] = lab_path(data.get("provenance", {}).get("notebook"),
                                    self.settings.get("server_root_dir"))
        return data

    def hits(self, hits) -> dict[str, Any]:
        data = hits.to_dict()
        for hit in (*data["hits"], *data["previously"]):
            hit["note"] = self.note(hit["note"])
        return data

    async def call(self, operation: Callable, name: str = "") -> Any:
        return await self.host.run(operation, name)

    def reply(self, data: Any, status: int = 200) -> None:
        self.set_status(status)
        self.finish(json.dumps(data))

    def reply_error(self, status: int, message: str, error: str, commands=()) -> None:
        self.set_status(status)
        body = {"message": message, "error": error}
        if commands:
            body["commands"] = list(commands)
        self.finish(json.dumps(body))

    # -- who is asking ------------------------------------------------------------------

    def user(self) -> str | None:
        """The Jupyter user making the request, as notes and events name their author.

        ``None`` (the store then names the server's own user) for the anonymous user
        jupyter_server makes up for each token-authenticated browser: a random id is no
        author, and on a single-user server that person is the server's user.
        """
        user = self.current_user
        if user is None:
            return None
        username = getattr(user, "username", None) or (user if isinstance(user, str) else None)
        name = getattr(user, "name", "") or ""
        if not username or (ANONYMOUS_ID.fullmatch(username) and name.startswith("Anonymous ")):
            return None
        return username

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(exc, tornado.web.HTTPError) and exc.log_message:
            message = exc.log_message % exc.args if exc.args else exc.log_message
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps({"message": message, "error": "HTTPError"}))
        else:
            super().write_error(status_code, **kwargs)

    # -- notes written in the panel -----------------------------------------------------

    def provenance_fields(self, value: Any) -> dict[str, Any]:
        """Check the ``provenance`` the panel sends: a notebook under the server root (as
        JupyterLab names it), the cell's id, execution count and source."""
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise InvalidInput("Field 'provenance' must be an object such as "
                               '{"notebook": "analysis.ipynb", "cell_id": "..."}.')
        unknown = sorted(set(value) - set(PROVENANCE_FIELDS))
        if unknown:
            raise InvalidInput(f"Unknown provenance field(s) {', '.join(unknown)}; allowed: "
                               f"{', '.join(PROVENANCE_FIELDS)}.")
        for name in ("notebook", "cell_id", "cell_source"):
            if value.get(name) is not None and not isinstance(value[name], str):
                raise InvalidInput(f"Provenance field {name!r} must be a string.")
        count = value.get("execution_count")
        if count is not None and (not isinstance(count, int) or isinstance(count, bool)):
            raise InvalidInput("Provenance field 'execution_count' must be a whole number.")
        fields = {k: v for k, v in value.items() if v not in (None, "")}
        if "notebook" in fields:
            fields["notebook"] = self.server_path(fields["notebook"])
        elif "cell_id" in fields or "cell_source" in fields:
            raise InvalidInput("Provenance names a cell but not its notebook; add 'notebook'.")
        return fields

    def server_path(self, lab: str) -> str:
        """The absolute path of ``lab`` (a path JupyterLab shows), refused outside the root."""
        root = Path(self.settings.get("server_root_dir") or os.getcwd()).expanduser().resolve()
        relative = Path(lab)
        path = (root / relative).resolve()
        if relative.is_absolute() or not path.is_relative_to(root):
            raise InvalidInput(f"The notebook {lab!r} is not under the Jupyter server's root "
                               "directory; give its path as JupyterLab shows it.")
        return str(path)

    def panel_provenance(self, where: dict[str, Any], author: str | None) -> Provenance:
        """Provenance of a note written in the panel: git state of the notebook's folder
        (or the server root), the user, and the notebook cell when the panel names one."""
        from ..provenance import MAX_SOURCE, capture, source_hash

        notebook = where.get("notebook")
        root = self.settings.get("server_root_dir") or os.getcwd()
        cwd = Path(notebook).parent if notebook else Path(root).expanduser()
        fields = capture(None, cwd=cwd if cwd.is_dir() else root, source="panel").to_dict()
        fields.update({k: v for k, v in where.items() if k != "cell_source"})
        source = where.get("cell_source")
        if source and source.strip():
            fields["cell_hash"] = source_hash(source)
            fields["cell_source"] = source[:MAX_SOURCE]
        if author:
            fields["author"] = author
        return Provenance.from_dict(fields)

    # -- request parsing ---------------------------------------------------------------

    def body(self, allowed: tuple[str, ...], required: tuple[str, ...] = ()) -> dict[str, Any]:
        """The JSON object in the body, with only ``allowed`` keys and all ``required`` ones."""
        raw = self.request.body or b"{}"
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise InvalidInput("The request body is not valid JSON; send a JSON object such "
                               'as {"text": "..."}.') from None
        if not isinstance(data, dict):
            raise InvalidInput("The request body must be a JSON object, not "
                               f"{type(data).__name__}.")
        unknown = sorted(set(data) - set(allowed))
        if unknown:
            raise InvalidInput(f"Unknown field(s) {', '.join(unknown)}; allowed: "
                               f"{', '.join(allowed) or 'none'}.")
        absent = [name for name in required if data.get(name) in (None, "")]
        if absent:
            raise InvalidInput(f"Missing field(s) {', '.join(absent)}.")
        for name in ("text", "kind", "priority", "name", "message", "query"):
            if name in data and data[name] is not None and not isinstance(data[name], str):
                raise InvalidInput(f"Field {name!r} must be a string.")
        tags = data.get("tags")
        if tags is not None and not isinstance(tags, str):  # a string is comma-separated
            if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
                raise InvalidInput("Field 'tags' must be a list of strings or a "
                                   "comma-separated string.")
        return data

    def arg(self, name: str, default: str | None = None) -> str | None:
        value = self.get_query_argument(name, default)
        return value if value not in ("",) else default

    def int_arg(self, name: str, default: int, low: int = 0, high: int | None = None) -> int:
        value = self.arg(name)
        if value is None:
            return default
        try:
            number = int(value)
        except ValueError:
            raise InvalidInput(f"Query parameter {name} must be a whole number, got {value!r}.") from None
        if number < low or (high is not None and number > high):
            bound = f"between {low} and {high}" if high is not None else f"at least {low}"
            raise InvalidInput(f"Query parameter {name} must be {bound}, got {number}.")
        return number

    def float_arg(self, name: str) -> float | None:
        value = self.arg(name)
        if value is None:
            return None
        try:
            return float(value)
        except ValueError:
            raise InvalidInput(f"Query parameter {name} must be a number, got {value!r}.") from None

    def time_arg(self, name: str) -> datetime | None:
        value = self.arg(name)
        if value is None:
            return None
        try:
            when = datetime.fromisoformat(value)
        except ValueError:
            raise InvalidInput(f"Query parameter {name} must be an ISO date or time, "
                               f"e.g. 2026-01-31, got {value!r}.") from None
        return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def lab_path(notebook: str | None, root: str | None) -> str | None:
    """The notebook's path as JupyterLab names it (relative to ``root``), if it is under it."""
    if not notebook:
        return None
    path = Path(notebook)
    if not path.is_absolute():
        return path.as_posix()
    if not root:
        return None
    try:
        return path.resolve().relative_to(Path(root).expanduser().resolve()).as_posix()
    except ValueError:
        return None


def note_id(value: str) -> int:
    return int(value)  # the route only matches digits


class VersionHandler(NbMemoryHandler):
    """The version handshake: cheap, never opens the store. ``owner_running`` tells the
    panel whether its first request will have to start the store's owner (slow)."""

    @api
    async def get(self):
        state = await asyncio.get_running_loop().run_in_executor(None, self.host.owner_state)
        self.reply({"version": __version__, "api": 1, "namespace": NAMESPACE,
                    "owner_running": state["running"] and not state["opening"]})


def stale_digest(memory) -> dict[str, Any]:
    """The stale set in a few bytes: which active notes are stale and why.

    The panel compares it between polls, so a file changing on disk (which writes nothing
    to the journal) still refreshes the badges.
    """
    entries, offset = [], 0
    while True:
        page = memory.stale(offset=offset, limit=MAX_PAGE)
        entries += [[n.id, n.version, sorted([r.reason, r.target, r.detail] for r in n.stale)]
                    for n in page.notes]
        offset += MAX_PAGE
        if offset >= page.total:
            break
    entries.sort()
    digest = hashlib.sha1(json.dumps(entries).encode()).hexdigest()[:16]
    return {"stale": len(entries), "stale_digest": digest}


class StatusHandler(NbMemoryHandler):
    @api
    async def get(self):
        """The store's status and stale digest. ``start=false`` (the panel's poll) starts
        no owner: with none running it answers ``{"running": false, ...}`` at once."""
        start = (self.arg("start") or "true").lower() not in ("0", "false", "no")
        if not start:
            state = await asyncio.get_running_loop().run_in_executor(None, self.host.owner_state)
            if not state["running"]:
                self.reply(self.host.not_running())
                return

        def status(memory):
            return {**self.host.status(memory), **stale_digest(memory)}

        self.reply(await self.call(status, "status"))


class OwnerHandler(NbMemoryHandler):
    """Who serves the store and what the server waits for: never queued behind the worker,
    never starts an owner. The panel asks while a request is slow, to say why."""

    @api
    async def get(self):
        state = await asyncio.get_running_loop().run_in_executor(None, self.host.owner_state)
        self.reply(state)


STALE_CHOICES = ("stale", "fresh")


class NotesHandler(NbMemoryHandler):
    @api
    async def get(self):
        """A page of notes, newest first, filtered by tags, kind, priority, status, staleness."""
        offset = self.int_arg("offset", 0)
        limit = self.int_arg("limit", 50, low=1, high=MAX_PAGE)
        stale = self.arg("stale")
        if stale is not None and stale not in STALE_CHOICES:
            raise InvalidInput(f"Query parameter stale must be stale or fresh, got {stale!r}.")
        status = self.arg("status", "active")
        filters = dict(tags=self.arg("tags"), kind=self.arg("kind"),
                       priority=self.arg("priority"), since=self.time_arg("since"),
                       until=self.time_arg("until"), order=self.arg("order", "newest"),
                       status=status.split(",") if "," in status else status)

        def listing(memory):
            if stale is None:
                page = memory.notes(offset=offset, limit=limit, **filters)
                return {"notes": [self.note(n) for n in page.notes], "total": page.total,
                        "offset": offset, "limit": limit}
            # Staleness is computed per note, so filter the whole listing, then page it.
            wanted = stale == "stale"
            matched, start = [], 0
            while True:
                page = memory.notes(offset=start, limit=MAX_PAGE, **filters)
                matched += [n for n in page.notes if n.is_stale == wanted]
                start += MAX_PAGE
                if start >= page.total:
                    break
            return {"notes": [self.note(n) for n in matched[offset:offset + limit]],
                    "total": len(matched), "offset": offset, "limit": limit}

        self.reply(await self.call(listing, "notes"))

    @api
    async def post(self):
        """Remember a note written in the panel, from a notebook's cell if it says which."""
        data = self.body(("text", "kind", "priority", "tags", "supersedes", "provenance"),
                         required=("text",))
        supersedes = data.pop("supersedes", None)
        if supersedes is not None and not isinstance(supersedes, int):
            raise InvalidInput("Field 'supersedes' must be a note id (a number).")
        where = self.provenance_fields(data.get("provenance"))
        author = self.user()

        def remember(memory):
            return memory.remember(
                data["text"], kind=data.get("kind") or "finding",
                priority=data.get("priority") or "medium", tags=data.get("tags"),
                supersedes=supersedes, author=author,
                provenance=self.panel_provenance(where, author))

        note = await self.call(remember, "remember")
        self.reply(self.note(note), status=201)


class NoteHandler(NbMemoryHandler):
    @api
    async def get(self, ident: str):
        """One note (any status) with its history."""
        def detail(memory):
            note = memory.get(note_id(ident))
            return {"note": self.note(note),
                    "history": [e.to_dict() for e in memory.history(note.id)]}

        self.reply(await self.call(detail, "get"))

    @api
    async def patch(self, ident: str):
        """Edit: write a new version with the given fields changed."""
        data = self.body(("text", "kind", "priority", "tags"))
        if not data:
            raise InvalidInput("Nothing to change; send text, kind, priority or tags.")
        author = self.user()
        note = await self.call(lambda m: m.edit(note_id(ident), author=author, **data), "edit")
        self.reply(self.note(note))


class SourceHandler(NbMemoryHandler):
    @api
    async def get(self, ident: str):
        """Where the notebook a note came from is now: ``exists``, and when it is gone,
        ``moved_to``: notebooks under the root that hold the note's cell (a rename)."""
        note = await self.call(lambda m: self.note(m.get(note_id(ident))), "get")
        path = note.get("lab_path")
        root = self.settings.get("server_root_dir")
        cell_id = note.get("provenance", {}).get("cell_id")
        if not path or not root:
            self.reply({"lab_path": path, "exists": False, "moved_to": []})
            return
        exists = (Path(root).expanduser() / path).is_file()
        moved: list[str] = []
        if not exists and cell_id:
            moved = await asyncio.get_running_loop().run_in_executor(
                None, find_cell_notebooks, Path(root).expanduser(), cell_id)
        self.reply({"lab_path": path, "exists": exists, "moved_to": moved})


def find_cell_notebooks(root: Path, cell_id: str) -> list[str]:
    """Notebooks under ``root`` (as JupyterLab names them) with a cell of id ``cell_id``,
    newest first. Hidden folders, checkpoints and environments are skipped; at most
    :data:`MAX_SCANNED_NOTEBOOKS` are read."""
    found: list[tuple[float, str]] = []
    scanned = 0
    needle = f'"{cell_id}"'
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in SKIPPED_DIRS]
        for name in files:
            if not name.endswith(".ipynb"):
                continue
            scanned += 1
            if scanned > MAX_SCANNED_NOTEBOOKS:
                break
            path = Path(folder) / name
            try:
                if path.stat().st_size > MAX_SCANNED_BYTES:
                    continue
                text = path.read_text(encoding="utf-8")
                if needle not in text:
                    continue
                cells = json.loads(text).get("cells") or []
            except (OSError, ValueError, AttributeError):
                continue
            if any(isinstance(c, dict) and c.get("id") == cell_id for c in cells):
                found.append((path.stat().st_mtime, path.relative_to(root).as_posix()))
    return [p for _, p in sorted(found, reverse=True)]


class SupersedeHandler(NbMemoryHandler):
    @api
    async def post(self, ident: str):
        """Store a new note replacing this one (kept in history, marked superseded)."""
        data = self.body(("text", "kind", "priority", "tags"), required=("text",))
        text = data.pop("text")
        options = {k: v for k, v in data.items() if v is not None}
        author = self.user()
        note = await self.call(lambda m: m.supersede(
            note_id(ident), text, author=author, provenance=self.panel_provenance({}, author),
            **options), "supersede")
        self.reply(self.note(note), status=201)



class ForgetHandler(NbMemoryHandler):
    @api
    async def post(self, ident: str):
        """Revoke a note (reversible with reinstate)."""
        self.body(())
        actor = self.user()
        notes = await self.call(lambda m: m.forget(note_id(ident), actor=actor), "forget")
        self.reply(self.note(notes[0]))


class ReinstateHandler(NbMemoryHandler):
    @api
    async def post(self, ident: str):
        """Undo forget."""
        self.body(())
        actor = self.user()
        note = await self.call(lambda m: m.reinstate(note_id(ident), actor=actor), "reinstate")
        self.reply(self.note(note))


class VerifyHandler(NbMemoryHandler):
    @api
    async def post(self, ident: str):
        """Re-take the note's anchor fingerprints and clear stale flags that no longer hold."""
        self.body(())
        actor = self.user()

        def verify(memory):
            if not hasattr(memory, "verify"):
                raise missing_feature("verify notes")
            result = memory.verify(note_id(ident), actor=actor)
            if isinstance(result, Note):
                return self.note(result)
            return result.to_dict() if hasattr(result, "to_dict") else result

        self.reply(await self.call(verify, "verify"))


class RecallHandler(NbMemoryHandler):
    @api
    async def get(self):
        """Hybrid (keyword + semantic) recall."""
        query = self.arg("query")
        if query is None:
            raise InvalidInput("Give a query: /nbmemory/recall?query=what+unit+is+amount")
        k = self.int_arg("k", 10, low=1, high=MAX_PAGE)
        explain = (self.arg("explain") or "").lower() in ("1", "true", "yes")
        options = dict(tags=self.arg("tags"), kind=self.arg("kind"),
                       priority=self.arg("priority"), since=self.time_arg("since"),
                       until=self.time_arg("until"), min_score=self.float_arg("min_score"))
        hits = await self.call(lambda m: m.recall(query, k=k, explain=explain, **options),
                               "recall")
        self.reply(self.hits(hits))


class SnapshotsHandler(NbMemoryHandler):
    @api
    async def get(self):
        snapshots = await self.call(lambda m: m.snapshots(), "snapshots")
        self.reply({"snapshots": [s.to_dict() for s in snapshots]})

    @api
    async def post(self):
        """Seal a snapshot of the current state."""
        data = self.body(("name", "message"), required=("name",))
        author = self.user()
        snap = await self.call(lambda m: m.snapshot(data["name"], message=data.get("message") or "",
                                                    author=author), "snapshot")
        self.reply(snap.to_dict(), status=201)


class SnapshotDiffHandler(NbMemoryHandler):
    @api
    async def get(self):
        """What changed between two snapshots (``to`` may be omitted: now)."""
        before = self.arg("from")
        if before is None:
            raise InvalidInput("Give the snapshot to compare from: "
                               "/nbmemory/snapshots/diff?from=NAME&to=NAME")
        after = self.arg("to")

        def diff(memory):
            if not hasattr(memory, "snapshot_diff"):
                raise missing_feature("diff snapshots")
            data = memory.snapshot_diff(before, after).to_dict()
            for change in data["changes"]:
                change["note"] = self.note(change["note"])
            return data

        self.reply(await self.call(diff, "snapshot_diff"))


def routes() -> list[tuple[str, type]]:
    """URL patterns relative to the server's base URL."""
    prefix = f"/{NAMESPACE}"
    ident = r"(?P<ident>\d+)"
    return [
        (f"{prefix}/version", VersionHandler),
        (f"{prefix}/status", StatusHandler),
        (f"{prefix}/owner", OwnerHandler),
        (f"{prefix}/notes", NotesHandler),
        (f"{prefix}/notes/{ident}", NoteHandler),
        (f"{prefix}/notes/{ident}/supersede", SupersedeHandler),
        (f"{prefix}/notes/{ident}/forget", ForgetHandler),
        (f"{prefix}/notes/{ident}/reinstate", ReinstateHandler),
        (f"{prefix}/notes/{ident}/verify", VerifyHandler),
        (f"{prefix}/notes/{ident}/source", SourceHandler),
        (f"{prefix}/recall", RecallHandler),
        (f"{prefix}/snapshots", SnapshotsHandler),
        (f"{prefix}/snapshots/diff", SnapshotDiffHandler),
    ]
