"""The URL of every nbmemory route and the handler that serves it."""

from __future__ import annotations

from .checks import ChecksHandler
from .handlers import NoRouteHandler
from .notes import (ForgetHandler, NoteHandler, NotesHandler, ReinstateHandler,
                    SupersedeHandler, VerifyHandler)
from .recall import RecallHandler
from .shared import NAMESPACE
from .snapshots import SnapshotDiffHandler, SnapshotsHandler
from .source import SourceHandler
from .status import OwnerHandler, StatusHandler, VersionHandler


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
        (f"{prefix}/checks", ChecksHandler),
        (f"{prefix}/snapshots", SnapshotsHandler),
        (f"{prefix}/snapshots/diff", SnapshotDiffHandler),
        (f"{prefix}/(?P<path>.*)", NoRouteHandler),  # last: anything else is a JSON 404
    ]
