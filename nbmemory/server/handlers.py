"""Thin REST handlers: parse the request, call Memory on the worker thread, answer JSON.

Every verb is ``@tornado.web.authenticated`` and ``@authorized`` (resource ``nbmemory``);
every engine error goes through :func:`http_status` once. The API is documented in
``docs/rest-api.md``.
"""

from __future__ import annotations

import functools
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import tornado.web
from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler

from .. import __version__
from .app import HOST_KEY
from ..errors import (Conflict, InvalidInput, ModelUnavailable, NbMemoryError, NotFound,
                      StoreUnavailable)
from ..models import Note, Provenance

NAMESPACE = "nbmemory"
STATUS_FOR = ((InvalidInput, 400), (NotFound, 404), (Conflict, 409),
              (StoreUnavailable, 503), (ModelUnavailable, 503))
MAX_PAGE = 500


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
            self.reply_error(http_status(exc), str(exc), type(exc).__name__)

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

    async def call(self, operation: Callable) -> Any:
        return await self.host.run(operation)

    def reply(self, data: Any, status: int = 200) -> None:
        self.set_status(status)
        self.finish(json.dumps(data))

    def reply_error(self, status: int, message: str, error: str) -> None:
        self.set_status(status)
        self.finish(json.dumps({"message": message, "error": error}))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(exc, tornado.web.HTTPError) and exc.log_message:
            message = exc.log_message % exc.args if exc.args else exc.log_message
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps({"message": message, "error": "HTTPError"}))
        else:
            super().write_error(status_code, **kwargs)

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
    """The version handshake: cheap, never opens the store."""

    @api
    async def get(self):
        self.reply({"version": __version__, "api": 1, "namespace": NAMESPACE})


class StatusHandler(NbMemoryHandler):
    @api
    async def get(self):
        self.reply(await self.call(self.host.status))


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

        self.reply(await self.call(listing))

    @api
    async def post(self):
        """Remember a note written in the panel."""
        data = self.body(("text", "kind", "priority", "tags", "supersedes"), required=("text",))
        supersedes = data.pop("supersedes", None)
        if supersedes is not None and not isinstance(supersedes, int):
            raise InvalidInput("Field 'supersedes' must be a note id (a number).")
        note = await self.call(lambda m: m.remember(
            data["text"], kind=data.get("kind") or "finding",
            priority=data.get("priority") or "medium", tags=data.get("tags"),
            supersedes=supersedes, provenance=Provenance(source="panel")))
        self.reply(self.note(note), status=201)


class NoteHandler(NbMemoryHandler):
    @api
    async def get(self, ident: str):
        """One note (any status) with its history."""
        def detail(memory):
            note = memory.get(note_id(ident))
            return {"note": self.note(note),
                    "history": [e.to_dict() for e in memory.history(note.id)]}

        self.reply(await self.call(detail))

    @api
    async def patch(self, ident: str):
        """Edit: write a new version with the given fields changed."""
        data = self.body(("text", "kind", "priority", "tags"))
        if not data:
            raise InvalidInput("Nothing to change; send text, kind, priority or tags.")
        note = await self.call(lambda m: m.edit(note_id(ident), **data))
        self.reply(self.note(note))


class SupersedeHandler(NbMemoryHandler):
    @api
    async def post(self, ident: str):
        """Store a new note replacing this one (kept in history, marked superseded)."""
        data = self.body(("text", "kind", "priority", "tags"), required=("text",))
        text = data.pop("text")
        options = {k: v for k, v in data.items() if v is not None}
        note = await self.call(lambda m: m.supersede(
            note_id(ident), text, provenance=Provenance(source="panel"), **options))
        self.reply(self.note(note), status=201)


class ForgetHandler(NbMemoryHandler):
    @api
    async def post(self, ident: str):
        """Revoke a note (reversible with reinstate)."""
        self.body(())
        notes = await self.call(lambda m: m.forget(note_id(ident)))
        self.reply(self.note(notes[0]))


class ReinstateHandler(NbMemoryHandler):
    @api
    async def post(self, ident: str):
        """Undo forget."""
        self.body(())
        note = await self.call(lambda m: m.reinstate(note_id(ident)))
        self.reply(self.note(note))


class VerifyHandler(NbMemoryHandler):
    @api
    async def post(self, ident: str):
        """Re-take the note's anchor fingerprints and clear stale flags that no longer hold."""
        self.body(())

        def verify(memory):
            if not hasattr(memory, "verify"):
                raise missing_feature("verify notes")
            result = memory.verify(note_id(ident))
            if isinstance(result, Note):
                return self.note(result)
            return result.to_dict() if hasattr(result, "to_dict") else result

        self.reply(await self.call(verify))


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
        hits = await self.call(lambda m: m.recall(query, k=k, explain=explain, **options))
        self.reply(self.hits(hits))


class SnapshotsHandler(NbMemoryHandler):
    @api
    async def get(self):
        snapshots = await self.call(lambda m: m.snapshots())
        self.reply({"snapshots": [s.to_dict() for s in snapshots]})

    @api
    async def post(self):
        """Seal a snapshot of the current state."""
        data = self.body(("name", "message"), required=("name",))
        snap = await self.call(lambda m: m.snapshot(data["name"], message=data.get("message") or ""))
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

        self.reply(await self.call(diff))


def routes() -> list[tuple[str, type]]:
    """URL patterns relative to the server's base URL."""
    prefix = f"/{NAMESPACE}"
    ident = r"(?P<ident>\d+)"
    return [
        (f"{prefix}/version", VersionHandler),
        (f"{prefix}/status", StatusHandler),
        (f"{prefix}/notes", NotesHandler),
        (f"{prefix}/notes/{ident}", NoteHandler),
        (f"{prefix}/notes/{ident}/supersede", SupersedeHandler),
        (f"{prefix}/notes/{ident}/forget", ForgetHandler),
        (f"{prefix}/notes/{ident}/reinstate", ReinstateHandler),
        (f"{prefix}/notes/{ident}/verify", VerifyHandler),
        (f"{prefix}/recall", RecallHandler),
        (f"{prefix}/snapshots", SnapshotsHandler),
        (f"{prefix}/snapshots/diff", SnapshotDiffHandler),
    ]
