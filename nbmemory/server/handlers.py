"""The base of every nbmemory handler: authentication, the one error mapper, JSON replies.

Every verb is wrapped in :func:`api`: ``@tornado.web.authenticated`` and ``@authorized``
(resource ``nbmemory``), and every engine error goes through :func:`http_status` once, its
message written in the REST API's syntax (``syntax.REST``). The routes live in
``notes.py``, ``recall.py``, ``snapshots.py``, ``source.py`` and ``status.py``; the API is
documented in ``docs/rest-api.md``.
"""

from __future__ import annotations

import functools
import json
import os
import re
from pathlib import Path
from typing import Any, Callable

import tornado.web
from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler

from .. import __version__, syntax
from ..config import current_user
from ..errors import (Conflict, InvalidInput, ModelUnavailable, NbMemoryError, NotFound,
                      ReadOnlyStore, StoreUnavailable)
from .params import RequestParsing
from .shared import HOST_KEY, NAMESPACE

STATUS_FOR = ((InvalidInput, 400), (ReadOnlyStore, 403), (NotFound, 404), (Conflict, 409),
              (StoreUnavailable, 503), (ModelUnavailable, 503))
# A client that words what to run next in another front end's terms (the panel: the magics).
WORDS_HEADER = "X-NbMemory-Words"
WORDS = {"rest": syntax.REST, "magic": syntax.MAGIC, "cli": syntax.CLI}
# jupyter_server's made-up user for a shared token: a uuid4 hex id named "Anonymous <moon>".
ANONYMOUS_ID = re.compile(r"[0-9a-f]{32}")


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
            words = WORDS.get(self.request.headers.get(WORDS_HEADER, "").lower(), syntax.REST)
            self.reply_error(http_status(exc), syntax.message(exc, words),
                             type(exc).__name__, commands=[c.to_list() for c in exc.commands])

    return tornado.web.authenticated(authorized(wrapper))


def note_id(value: str) -> int:
    """The route's digits as a note id; more digits than any id has name no note (the
    store says so: Python will not even read a number of 5,000 digits)."""
    return int(value) if len(value) <= 20 else 10**20


def lab_path(notebook: str | None, root: str | None) -> str | None:
    """The notebook's path as JupyterLab names it (relative to ``root``), if it is under it.

    Under it as JupyterLab sees it: the path normalised, not resolved, so a notebook in a
    folder that links elsewhere (``root/data -> ../shared``) keeps its ``data/...`` path."""
    if not notebook:
        return None
    path = Path(notebook)
    if not path.is_absolute():  # an imported or shared note's: never a way out of the root
        inside = Path(os.path.normpath(path))
        return None if inside.parts[:1] == ("..",) or inside.is_absolute() else inside.as_posix()
    if not root:
        return None
    given = Path(os.path.normpath(path))
    top = Path(os.path.abspath(Path(root).expanduser()))
    pairs = [(given, top)]
    try:  # the root as the store records it (resolved); a note written before, resolved
        pairs += [(given, top.resolve()), (path.resolve(), top.resolve())]
    except (OSError, RuntimeError):  # a loop of links, a name longer than the system takes
        pass
    for candidate, base in pairs:
        if candidate.is_relative_to(base):
            return candidate.relative_to(base).as_posix()
    return None


class NbMemoryHandler(RequestParsing, APIHandler):
    auth_resource = NAMESPACE

    @property
    def host(self):
        return self.settings[HOST_KEY]

    @property
    def root(self) -> str | None:
        """The Jupyter server's root directory, which notebook paths are relative to."""
        return self.settings.get("server_root_dir")

    async def call(self, operation: Callable, name: str = "") -> Any:
        self.refuse_unknown_args()
        return await self.host.run(operation, name)

    # -- answers ------------------------------------------------------------------------

    def note(self, note) -> dict[str, Any]:
        """A note as JSON, with ``lab_path``: its notebook relative to the server root."""
        data = note.to_dict() if hasattr(note, "to_dict") else dict(note)
        data["lab_path"] = lab_path(data.get("provenance", {}).get("notebook"), self.root)
        return data

    def hits(self, hits) -> dict[str, Any]:
        data = hits.to_dict()
        for hit in (*data["hits"], *data["previously"]):
            hit["note"] = self.note(hit["note"])
        return data

    def reply(self, data: Any, status: int = 200) -> None:
        self.refuse_unknown_args()  # routes that never call the store check here
        self.set_status(status)
        self.finish(json.dumps(data))

    def reply_error(self, status: int, message: str, error: str, commands=()) -> None:
        self.set_status(status)
        body = {"message": message, "error": error}
        if commands:
            body["commands"] = list(commands)
        self.finish(json.dumps(body))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(exc, tornado.web.HTTPError) and exc.log_message:
            message = exc.log_message % exc.args if exc.args else exc.log_message
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps({"message": message, "error": "HTTPError"}))
        else:
            super().write_error(status_code, **kwargs)

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

    def author_arg(self) -> str | None:
        """``author=a,b`` or ``mine=1`` (this request's user, as notes name their author)."""
        author = self.arg("author")
        if self.flag("mine", default=False):
            if author:
                raise InvalidInput("Give mine or author, not both.")
            return self.user() or current_user()
        return author


class NoRouteHandler(NbMemoryHandler):
    """Any other path under /nbmemory: a JSON 404 (to a signed-in client only), not
    Jupyter's HTML page."""

    async def _missing(self, path: str):
        raise NotFound(f"No nbmemory endpoint {self.request.method} {self.request.path}; "
                       "the routes are listed in docs/rest-api.md (e.g. GET nbmemory/notes, "
                       "GET nbmemory/notes/12, GET nbmemory/recall?query=...).")

    # One wrapper each: jupyter_server's @authorized keeps the action (read or write) it
    # works out on a wrapper's first call, so a shared one would check every verb as the first.
    get, post, patch = api(_missing), api(_missing), api(_missing)
    put, delete = api(_missing), api(_missing)
