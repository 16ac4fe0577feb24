"""The REST API through a real Jupyter server (pytest-jupyter), with token auth on."""

import inspect
import json
from datetime import datetime
import os
import re
import subprocess
import sys
import textwrap
import urllib.parse

import pytest
import tornado.httpclient
import tornado.web
from jupyter_server.auth.authorizer import Authorizer
from jupyter_server.auth.identity import IdentityProvider, User

from nbmemory.ranking import KEYWORD_WEIGHT
from nbmemory import __version__
from nbmemory.server.handlers import NbMemoryHandler, http_status, lab_path
from nbmemory.errors import (Conflict, EmbedderMismatch, InvalidInput, ModelUnavailable,
                             NotFound, ReadOnlyStore, StoreLocked, StoreUnavailable)

XSS = "<img src=x onerror=alert(1)>"


class NamedUser(IdentityProvider):
    """A server whose users have names (as on JupyterHub): every token request is Ana."""

    async def get_user(self, handler):
        user = super().get_user(handler)
        if inspect.isawaitable(user):
            user = await user
        return None if user is None else User("ana", name="Ana Analyst")


@pytest.fixture
def jp_server_config(store_dir, request):
    store = (request.getfixturevalue("team_url") if request.node.get_closest_marker("team")
             else str(store_dir))
    config = {
        "ServerApp": {"jpserver_extensions": {"nbmemory.server": True}},
        # The hash embedder: these tests are about the API, not about ranking quality.
        "NbMemoryExtension": {"store": store, "model": "hash:64"},
    }
    extra = getattr(request, "param", None)  # parametrize(..., indirect=True)
    if isinstance(extra, dict):
        config["ServerApp"].update(extra)
    elif extra is not None:
        config["ServerApp"]["identity_provider_class"] = extra
    return config


@pytest.fixture
def api(jp_fetch):
    """Call /nbmemory/...: returns (status, json) and never raises on HTTP errors."""

    async def call(path, method="GET", body=None, headers=None, **params):
        kwargs = {"method": method, "raise_error": False, "headers": headers or {}}
        if params:
            kwargs["params"] = {k: str(v) for k, v in params.items()}
        if body is not None or method in ("POST", "PATCH", "PUT"):
            kwargs["body"] = body if isinstance(body, (str, bytes)) else json.dumps(body or {})
        response = await jp_fetch("nbmemory", *path.split("/"), **kwargs)
        text = response.body.decode() if response.body else ""
        return response.code, (json.loads(text) if text else None)

    return call


async def remember(api, text, **fields):
    code, note = await api("notes", "POST", {"text": text, **fields})
    assert code == 201, note
    return note


async def position(api):
    code, status = await api("status")
    assert code == 200, status
    return status["journal_position"]


# -- version and status ----------------------------------------------------------------------


async def test_version_reports_nbmemory_version(api):
    code, data = await api("version")
    assert code == 200 and data["version"] == __version__ and data["api"] == 1


async def test_status_names_store_model_and_owner(api, store_dir):
    code, status = await api("status")
    assert code == 200
    assert status["store"] == str(store_dir)
    assert status["notes"] == 0
    assert status["model"].startswith("hash")
    assert status["owner"] and status["server_version"] == __version__


def test_labextension_version_matches_python_package():
    from pathlib import Path

    package = json.loads((Path(__file__).parents[1] / "labextension" / "package.json").read_text())
    assert package["version"] == __version__, "keep labextension/package.json in step with _version.py"


# -- notes ---------------------------------------------------------------------------------


async def test_remember_list_and_page(api):
    for i in range(5):
        await remember(api, f"finding number {i} about orders", tags="orders" if i % 2 else "ops",
                       priority="high" if i == 4 else "medium")
    code, page = await api("notes", limit=2)
    assert code == 200 and page["total"] == 5 and page["limit"] == 2
    assert [n["text"] for n in page["notes"]] == ["finding number 4 about orders",
                                                 "finding number 3 about orders"]
    code, page = await api("notes", limit=2, offset=4)
    assert [n["text"] for n in page["notes"]] == ["finding number 0 about orders"]
    code, page = await api("notes", tags="orders")
    assert page["total"] == 2 and all(n["tags"] == ["orders"] for n in page["notes"])
    code, page = await api("notes", priority="high")
    assert [n["id"] for n in page["notes"]] == [5]
    code, page = await api("notes", kind="gotcha")
    assert page["total"] == 0


async def test_stale_filter_separates_superseded_notes(api):
    old = await remember(api, "the watcher starts after the lock")
    code, new = await api(f"notes/{old['id']}/supersede", "POST",
                          {"text": "the watcher starts before the lock"})
    assert code == 201 and new["id"] != old["id"]
    code, page = await api("notes", status="active,superseded", stale="stale")
    assert [n["id"] for n in page["notes"]] == [old["id"]]
    assert page["notes"][0]["stale"][0]["reason"] == "superseded"
    code, page = await api("notes", status="active,superseded", stale="fresh")
    assert [n["id"] for n in page["notes"]] == [new["id"]]


async def test_get_note_with_history_and_edit_makes_new_version(api):
    note = await remember(api, "amount is in cents", tags="orders")
    code, edited = await api(f"notes/{note['id']}", "PATCH",
                             {"text": "amount is in cents before 2021", "priority": "high",
                              "tags": ["orders", "units"]})
    assert code == 200, edited
    assert edited["version"] == 2 and edited["priority"] == "high"
    assert edited["tags"] == ["orders", "units"]
    code, detail = await api(f"notes/{note['id']}")
    assert code == 200
    assert detail["note"]["text"] == "amount is in cents before 2021"
    assert [e["type"] for e in detail["history"]] == ["created", "edited"]


async def test_an_edit_from_an_older_read_is_refused_when_it_names_its_version(api):
    note = await remember(api, "exports run at 02:00")
    code, b = await api(f"notes/{note['id']}", "PATCH", {"text": "at 03:00", "version": 1})
    assert (code, b["version"]) == (200, 2)
    code, a = await api(f"notes/{note['id']}", "PATCH", {"text": "at 04:00", "version": 1})
    assert code == 409 and a["message"] == (
        f"Note #{note['id']} is at version 2, not 1: it was edited since it was read. Nothing "
        "was written; read it again and edit version 2.")
    code, detail = await api(f"notes/{note['id']}")
    assert (detail["note"]["text"], detail["note"]["version"]) == ("at 03:00", 2)


async def test_since_and_until_read_as_people_type_them(api):
    await remember(api, "written today")
    today = datetime.now().date().isoformat()  # a day is this machine's (as in the CLI)
    for params, total in (({"until": today}, 1),  # a bare date takes that day in
                          ({"since": "7d"}, 1), ({"since": today}, 1),
                          ({"until": "2000-01-01"}, 0)):
        code, page = await api("notes", **params)
        assert (code, page["total"]) == (200, total), (params, page)


async def test_a_list_of_statuses_reads_as_the_cli_reads_it(api):
    """'active, revoked' (a space after the comma) and a trailing comma were refused."""
    await remember(api, "exports run at 02:00")
    for status in ("active, revoked", "active,revoked,", " active "):
        code, page = await api("notes", status=status)
        assert (code, page["total"]) == (200, 1), (status, page)


async def test_a_note_that_supersedes_keeps_what_it_does_not_say(api):
    await remember(api, "exports run at 02:00", kind="gotcha", priority="high", tags=["export"])
    code, note = await api("notes", "POST", {"text": "exports run at 03:00", "supersedes": 1})
    assert code == 201, note
    assert (note["kind"], note["priority"], note["tags"]) == ("gotcha", "high", ["export"])
    code, old = await api("notes/1")
    assert old["note"]["status"] == "superseded"


async def test_forget_then_reinstate(api):
    note = await remember(api, "the cache is warmed at boot")
    code, forgotten = await api(f"notes/{note['id']}/forget", "POST")
    assert code == 200 and forgotten["status"] == "revoked"
    code, page = await api("notes")
    assert page["total"] == 0
    code, again = await api(f"notes/{note['id']}/forget", "POST")
    assert code == 409 and again["message"] == (
        "Note #1 is already forgotten; POST /nbmemory/notes/1/reinstate brings it back.")
    # The panel asks for the magics' words: its users are in a notebook.
    code, worded = await api(f"notes/{note['id']}/forget", "POST",
                             headers={"X-NbMemory-Words": "magic"})
    assert (code, worded["commands"]) == (409, [["reinstate", [1]]])
    assert worded["message"] == "Note #1 is already forgotten; %memory reinstate 1 brings it back."
    code, back = await api(f"notes/{note['id']}/reinstate", "POST")
    assert code == 200 and back["status"] == "active"
    code, page = await api("notes")
    assert [n["id"] for n in page["notes"]] == [note["id"]]


async def test_recall_finds_notes_and_applies_filters(api):
    await remember(api, "orders.amount is in cents before 2021", tags="orders")
    await remember(api, "acquire_lock must run before touching workspace metadata", tags="locks")
    code, hits = await api("recall", query="acquire_lock", k=5)
    assert code == 200 and hits["query"] == "acquire_lock"
    assert hits["hits"][0]["note"]["tags"] == ["locks"]
    code, hits = await api("recall", query="acquire_lock", tags="orders", min_score=0)
    assert all(h["note"]["tags"] == ["orders"] for h in hits["hits"])
    assert hits["fusion"] is None
    code, hits = await api("recall", query="acquire_lock", explain="true")
    assert hits["hits"][0]["lexical"] > 0
    assert hits["fusion"]["weight"] == hits["fusion"]["most"] == KEYWORD_WEIGHT


async def test_stale_listing_and_verify(api, store_dir):
    """A note anchored to a file goes stale when the file changes; verify re-takes it."""
    data = store_dir.parent / "inputs"  # the workspace is the store's parent here (no git)
    data.mkdir()
    (data / "orders.csv").write_text("id,amount\n1,100\n")
    note = await remember(api, "amounts in inputs/orders.csv are in cents")
    await remember(api, "a note about nothing in particular")
    code, page = await api("notes", stale="stale")
    assert code == 200 and page["total"] == 0
    (data / "orders.csv").write_text("id,amount\n1,100\n2,250\n")
    code, page = await api("notes", stale="stale")
    assert [n["id"] for n in page["notes"]] == [note["id"]]
    assert {r["target"] for r in page["notes"][0]["stale"]} == {"inputs/orders.csv"}
    code, page = await api("notes", stale="fresh")
    assert [n["text"] for n in page["notes"]] == ["a note about nothing in particular"]
    code, hits = await api("recall", query="a note about orders.csv", stale="stale", min_score=-1)
    assert [h["note"]["id"] for h in hits["hits"]] == [note["id"]]
    code, hits = await api("recall", query="a note about orders.csv", stale="fresh", min_score=-1)
    assert [h["note"]["text"] for h in hits["hits"]] == ["a note about nothing in particular"]

    code, verified = await api(f"notes/{note['id']}/verify", "POST")
    assert code == 200, verified
    assert verified["id"] == note["id"] and verified["stale"] == []
    code, page = await api("notes", stale="stale")
    assert page["total"] == 0
    code, detail = await api(f"notes/{note['id']}")
    assert detail["history"][-1]["type"] == "verified"

    code, data_ = await api("notes/999/verify", "POST")
    assert code == 404
    await api(f"notes/{note['id']}/forget", "POST")
    code, data_ = await api(f"notes/{note['id']}/verify", "POST")
    assert code == 409 and "reinstate it first" in data_["message"]


async def test_snapshots_list_create_and_diff(api):
    await remember(api, "first finding")
    code, snap = await api("snapshots", "POST", {"name": "before", "message": "why"})
    assert code == 201 and snap["name"] == "before"
    await remember(api, "second finding")
    code, data = await api("snapshots")
    assert [s["name"] for s in data["snapshots"]] == ["before"]
    code, dup = await api("snapshots", "POST", {"name": "before"})
    assert code == 409 and "already exists" in dup["message"]
    code, diff = await api("snapshots/diff", **{"from": "before"})
    assert code == 200, diff
    assert (diff["a"], diff["b"]) == ("before", "now")
    assert [(c["change"], c["note"]["text"]) for c in diff["changes"]] == [("added", "second finding")]
    await api("snapshots", "POST", {"name": "after"})
    code, diff = await api("snapshots/diff", **{"from": "before", "to": "after"})
    assert code == 200 and diff["b"] == "after" and len(diff["changes"]) == 1
    code, missing = await api("snapshots/diff", **{"from": "nope"})
    assert code == 404 and "nope" in missing["message"]
    code, hits = await api("recall", query="finding", as_of="before", min_score=0)
    assert code == 200 and [h["note"]["text"] for h in hits["hits"]] == ["first finding"]
    code, missing = await api("recall", query="finding", as_of="nope")
    assert code == 404 and "No snapshot named 'nope'" in missing["message"]


# -- errors ----------------------------------------------------------------------------------


async def test_missing_note_is_404_with_message(api):
    code, data = await api("notes/4242")
    assert code == 404 and data["message"].startswith("No note #4242")
    code, data = await api("notes/4242", "PATCH", {"text": "x"})
    assert code == 404
    for path, method in (("notes/abc", "GET"), ("notes/1/explode", "POST"), ("nope", "GET")):
        code, data = await api(path, method, {} if method == "POST" else None)
        assert code == 404 and data["message"].startswith(f"No nbmemory endpoint {method} /")
        assert f"/nbmemory/{path}; the routes are listed in docs/rest-api.md" in data["message"]
    code, data = await api("notes/" + "9" * 5000)  # more digits than Python reads: no note
    assert code == 404 and data["message"].startswith("No note #1000"), data


class ReadOnly(Authorizer):
    """An authorizer that lets users read, not write."""

    def is_authorized(self, handler, user, action, resource):
        return action == "read"


@pytest.mark.parametrize("jp_server_config", [{"authorizer_class": ReadOnly}], indirect=True)
async def test_each_verb_is_authorized_as_itself(api):
    code, data = await api("nope", "DELETE")
    assert code == 403, data
    code, data = await api("nope")  # checked as a read, not as the write before it
    assert code == 404 and data["message"].startswith("No nbmemory endpoint GET /"), data
    code, data = await api("notes", "POST", {"text": "not allowed"})
    assert code == 403, data
    code, data = await api("notes")
    assert code == 200 and data["total"] == 0


BAD_REQUESTS = [
    # (path, method, body, params, message fragment)
    ("notes", "POST", "{not json", {}, "not valid JSON"),
    ("notes", "POST", "[1, 2]", {}, "must be a JSON object"),
    ("notes", "POST", {"text": "   "}, {}, "The note is empty"),
    ("notes", "POST", {}, {}, "Missing field(s) text"),
    ("notes", "POST", {"text": 5}, {}, "'text' must be a string"),
    ("notes", "POST", {"text": "ok", "kind": "rumour"}, {}, "Unknown kind 'rumour'"),
    ("notes", "POST", {"text": "ok", "priority": "urgent"}, {}, "Unknown priority 'urgent'"),
    ("notes", "POST", {"text": "ok", "tags": "two words"}, {}, "contains a space"),
    ("notes", "POST", {"text": "ok", "tags": [1]}, {}, "list of strings"),
    ("notes", "POST", {"text": "ok", "colour": "red"}, {}, "Unknown field(s) colour"),
    ("notes", "POST", {"text": "ok", "supersedes": "1"}, {}, "must be a note id"),
    ("notes", "POST", {"text": "ok", "supersedes": True}, {},
     "Field 'supersedes' must be a note id, a whole number such as 12, not true."),
    ("notes", "POST", {"text": "ok", "supersedes": 1.0}, {},
     "Field 'supersedes' must be a note id, a whole number such as 12, not 1.0."),
    ("recall", "GET", None, {"query": "amount " * 571 + "cents"},  # 4,002 characters
     "The query has 4,002 characters; recall takes at most 4,000. Shorten it to the words "
     "that matter."),
    ("notes/1", "PATCH", {}, {}, "Nothing to change"),
    ("notes/1", "PATCH", {"text": ""}, {}, "The note is empty"),
    ("notes/1", "PATCH", {"priority": "urgent"}, {}, "Unknown priority"),
    ("notes/1", "PATCH", {"id": 7}, {}, "Unknown field(s) id"),
    ("notes/1", "PATCH", {"text": None, "tags": None}, {},
     "Field(s) tags, text are null; leave out a field to keep it as it is."),
    ("notes/1", "PATCH", {"version": 1}, {}, "Nothing to change"),
    ("notes/1", "PATCH", {"text": "x", "version": "1"}, {}, "Field 'version' is the version"),
    ("recall", "GET", None, {"query": "x", "explain": "maybe"},
     "explain is yes or no (1/true/yes, 0/false/no), not 'maybe'."),
    ("notes/1/supersede", "POST", {"kind": "gotcha"}, {}, "Missing field(s) text"),
    ("notes/1/forget", "POST", {"reason": "x"}, {}, "Unknown field(s) reason"),
    ("notes", "GET", None, {"limit": "lots"}, "limit must be a whole number"),
    ("notes", "GET", None, {"limit": "0"}, "limit must be between 1 and 500"),
    ("notes", "GET", None, {"stale": "maybe"}, "stale must be stale or fresh"),
    ("notes", "GET", None, {"order": "random"}, "Unknown order 'random'"),
    ("notes", "GET", None, {"since": "last tuesday"}, "ISO date"),
    ("recall", "GET", None, {}, "Give a query"),
    ("recall", "GET", None, {"query": "x", "stale": "yes"}, "stale must be stale or fresh"),
    ("recall", "GET", None, {"query": "x", "k": "0"}, "k must be between 1 and 500"),
    ("recall", "GET", None, {"query": "x", "min_score": "high"}, "min_score must be a number"),
    ("notes", "GET", None, {"tag": "orders"},  # a typo of tags: it listed every note
     "Unknown query parameter(s) tag; allowed: author, kind, limit, mine, offset, order, "
     "priority, since, stale, status, tags, until. Nothing was done."),
    ("recall", "GET", None, {"query": "x", "as_ofs": "before"}, "Unknown query parameter(s) as_ofs"),
    ("notes/1/forget", "POST", {}, {"reason": "x"}, "Unknown query parameter(s) reason"),
    ("notes", "GET", None, {"mine": "1", "author": "bob"}, "Give mine or author, not both."),
    ("status", "GET", None, {"start": "false", "verbose": "1"},  # a route not calling the store
     "Unknown query parameter(s) verbose; allowed: start."),
    ("snapshots", "POST", {"name": "has space"}, {}, "without spaces"),
    ("snapshots", "POST", {"message": "no name"}, {}, "Missing field(s) name"),
    ("snapshots/diff", "GET", None, {}, "Give the snapshot to compare from"),
    ("notes", "POST", {"text": "ok", "provenance": "nb.ipynb"}, {}, "must be an object"),
    ("notes", "POST", {"text": "ok", "provenance": {"kernel": "x"}}, {},
     "Unknown provenance field(s) kernel"),
    ("notes", "POST", {"text": "ok", "provenance": {"notebook": "../../etc/nb.ipynb"}}, {},
     "not under the Jupyter server's root"),
    ("notes", "POST", {"text": "ok", "provenance": {"notebook": "/etc/nb.ipynb"}}, {},
     "not under the Jupyter server's root"),
    # What Windows reads as a drive or a root: out of the root there, refused everywhere.
    ("notes", "POST", {"text": "ok", "provenance": {"notebook": "C:nb.ipynb"}}, {},
     "not under the Jupyter server's root"),
    ("notes", "POST", {"text": "ok", "provenance": {"notebook": "\\etc\\nb.ipynb"}}, {},
     "not under the Jupyter server's root"),
    ("notes", "POST", {"text": "ok", "provenance": {"cell_id": "abc"}}, {},
     "names a cell but not its notebook"),
    # A CSV or a folder as the notebook: its cell was looked for there, and the panel's
    # source link opened it as a notebook.
    ("notes", "POST", {"text": "ok", "provenance": {"notebook": "data/orders.csv",
                                                    "cell_id": "abc"}}, {},
     "Provenance field 'notebook' must name a notebook (*.ipynb), not 'data/orders.csv'."),
    ("notes", "POST", {"text": "ok", "provenance": {"notebook": "a.ipynb",
                                                    "execution_count": "3"}}, {},
     "'execution_count' must be a whole number"),
    ("notes", "POST", {"text": "ok", "provenance": {"notebook": "a\u0000.ipynb"}}, {},
     "Provenance field 'notebook' holds a NUL or a character that is not valid Unicode"),
    ("notes", "POST", {"text": "ok", "provenance": {"notebook": "a.ipynb",
                                                    "cell_id": "\ud800"}}, {},
     "Provenance field 'cell_id' holds a NUL"),
    ("notes", "POST", {"text": "ok", "provenance": {"notebook": "a.ipynb",
                                                    "cell_id": "c" * 10_000}}, {},
     "Provenance field 'cell_id' has 10,000 characters; at most 200."),
    ("notes", "POST", {"text": "ok", "provenance": {"notebook": "a.ipynb",
                                                    "execution_count": -5}}, {},
     "'execution_count' must be a whole number from 0"),
    ("notes", "POST", {"text": "ok", "provenance": {"notebook": "d/" * 3000 + ".ipynb"}}, {},
     "Provenance field 'notebook' has 6,006 characters; at most 4,096."),
    ("notes", "POST", "[" * 200_000 + "]" * 200_000, {}, "not valid JSON"),
    # A cell's source of 40 MB: read whole, it took 1.6 GB of the server's memory.
    ("notes", "POST", {"text": "ok", "provenance": {"notebook": "a.ipynb",
                                                    "cell_source": "x" * 40 * 2**20}}, {},
     "The request body has 41,943,1"),  # 40 MB of source and the JSON around it
    ("notes", "POST", {"text": "ok", "tags": ["a,b"]}, {}, "Tag 'a,b' contains a comma"),
    ("snapshots", "POST", {"name": "nul\u0001x"}, {}, "without spaces, quotes or control"),
    ("snapshots", "POST", {"name": "nul\u0000x"}, {}, "contains a NUL character (U+0000)"),
    ("notes", "GET", None, {"since": "9999-12-31T23:59:59-23:59"}, "since is out of range"),
    ("recall", "GET", None, {"query": "x", "since": "0001-01-01T00:00:00+23:59"},
     "since is out of range"),
]


@pytest.mark.parametrize("path,method,body,params,fragment", BAD_REQUESTS,
                         ids=[f"{m} {p} {f}" for p, m, _, _, f in BAD_REQUESTS])
async def test_bad_requests_are_clear_400s_and_change_nothing(api, path, method, body, params,
                                                              fragment):
    note = await remember(api, "the original note", tags="keep")
    assert note["id"] == 1
    before = await position(api)
    code, data = await api(path, method, body, **params)
    assert code == 400, data
    assert fragment in data["message"]
    assert await position(api) == before
    code, detail = await api("notes/1")
    assert detail["note"]["text"] == "the original note" and detail["note"]["version"] == 1
    code, page = await api("notes")
    assert page["total"] == 1


async def test_jupyterlabs_cache_busting_parameter_is_not_refused(api):
    """JupyterLab's request helper adds ?<timestamp> to every GET: refusing it as an unknown
    parameter left the panel empty."""
    await remember(api, "orders.amount is in cents", tags="orders")
    code, page = await api("notes", **{"1796528408605": ""})
    assert (code, page["total"]) == (200, 1)
    code, hits = await api("recall", query="cents", **{"1796528408605": ""})
    assert code == 200 and hits["hits"][0]["note"]["text"] == "orders.amount is in cents"


async def test_note_text_with_html_comes_back_as_data(api, jp_fetch):
    note = await remember(api, XSS, tags="xss")
    response = await jp_fetch("nbmemory", "notes", str(note["id"]), method="GET")
    assert response.headers["Content-Type"].startswith("application/json")
    assert json.loads(response.body)["note"]["text"] == XSS
    code, hits = await api("recall", query="img onerror", min_score=0)
    assert hits["hits"][0]["note"]["text"] == XSS


async def test_lab_path_is_relative_to_the_server_root(jp_root_dir):
    assert lab_path("analysis/orders.ipynb", str(jp_root_dir)) == "analysis/orders.ipynb"
    assert lab_path(str(jp_root_dir / "a" / "b.ipynb"), str(jp_root_dir)) == "a/b.ipynb"
    assert lab_path("/elsewhere/b.ipynb", str(jp_root_dir)) is None
    assert lab_path(None, str(jp_root_dir)) is None
    # A relative path from an imported or shared note never leads out of the root.
    assert lab_path("../../../../etc/passwd", str(jp_root_dir)) is None
    assert lab_path("a/../../b.ipynb", str(jp_root_dir)) is None
    assert lab_path("a/./../b.ipynb", str(jp_root_dir)) == "b.ipynb"


def test_one_error_mapper():
    assert http_status(InvalidInput("x")) == 400
    assert http_status(ReadOnlyStore("x")) == 403
    assert http_status(NotFound("x")) == 404
    assert http_status(Conflict("x")) == 409
    assert http_status(EmbedderMismatch("x")) == 409
    assert http_status(StoreUnavailable("x")) == 503
    assert http_status(StoreLocked("x", pid=1)) == 503
    assert http_status(ModelUnavailable("x")) == 503


async def test_store_owned_elsewhere_is_a_503_that_says_so(api, jp_serverapp, store_dir):
    """The server opens the store lazily, so another owner shows as a clear 503."""
    from nbmemory.embed import HashEmbedder
    from nbmemory.memory import Memory
    from nbmemory.server.app import HOST_KEY

    host = jp_serverapp.web_app.settings[HOST_KEY]
    with Memory.open(store_dir, embedder=HashEmbedder()):
        code, data = await api("status")
    assert code == 503 and data["error"] == "StoreLocked"
    assert data["message"]
    code, data = await api("status")
    assert code == 200 and host.location.path == store_dir


# -- authentication ---------------------------------------------------------------------------


def nbmemory_routes(web_app):
    """Every (regex, handler class) registered by nbmemory, walking tornado's routers."""
    found = []

    def walk(router):
        for rule in getattr(router, "rules", []):
            target = rule.target
            if isinstance(target, type) and issubclass(target, tornado.web.RequestHandler):
                if target.__module__.startswith("nbmemory"):
                    found.append((rule.matcher.regex.pattern, target))
            else:
                walk(target)

    walk(web_app.default_router)
    return found


def implemented_verbs(handler):
    return [m for m in handler.SUPPORTED_METHODS
            if getattr(handler, m.lower()) is not tornado.web.RequestHandler._unimplemented_method
            and m not in ("OPTIONS", "HEAD")]


async def test_every_route_rejects_unauthenticated_requests(jp_serverapp, http_server_client,
                                                            jp_base_url, api):
    await remember(api, "a note so that routes with ids have something to find")
    routes = nbmemory_routes(jp_serverapp.web_app)
    assert len(routes) == 15, routes  # 14 and the JSON 404 for any other path
    assert all(issubclass(h, NbMemoryHandler) for _, h in routes)
    checked = 0
    for pattern, handler in routes:
        path = re.sub(r"\(\?P<ident>[^)]*\)", "1", pattern).rstrip("$")
        path = re.sub(r"\(\?P<path>[^)]*\)", "no-such-route", path)
        assert path.startswith(jp_base_url.rstrip("/") + "/nbmemory/"), path
        for verb in implemented_verbs(handler):
            for headers in ({}, {"Authorization": "token wrong-token"}):
                response = await http_server_client.fetch(
                    path + "?query=x&from=a", method=verb, headers=headers, raise_error=False,
                    body="{}" if verb in ("POST", "PATCH", "PUT") else None)
                assert response.code == 403, (verb, path, response.code)
                checked += 1
    assert checked == 2 * (17 + 5)
    code, page = await api("notes")
    assert page["total"] == 1


@pytest.mark.team
async def test_a_team_store_behind_the_server_refuses_anonymous_requests(
        http_server_client, jp_base_url, api):
    note = await remember(api, "the warehouse is rebuilt at 02:00 UTC")
    for path in ("notes", "recall?query=warehouse", f"notes/{note['id']}", "status"):
        response = await http_server_client.fetch(
            f"{jp_base_url.rstrip('/')}/nbmemory/{path}", raise_error=False)
        assert response.code == 403, path
    code, status = await api("status")
    assert code == 200 and status["store"].startswith("postgresql://")
    assert status["read_only"] is False


@pytest.mark.team
async def test_a_team_store_with_no_owner_yet_is_named_by_its_address(api, team_url):
    """The panel's poll asks without starting an owner: the store it names is the
    postgresql:// address, not the local cache directory."""
    code, status = await api("status", start="false")
    assert code == 200 and status["running"] is False
    assert status["store"] == team_url


@pytest.mark.team
@pytest.mark.parametrize("jp_server_config", [NamedUser], indirect=True)
async def test_a_team_store_behind_the_server_filters_by_author_and_mine(api):
    from nbmemory.memory import Memory

    note = await remember(api, "the churn model is retrained on Mondays")
    assert note["author"] == "ana"
    code, status = await api("status")
    with Memory.open(status["store"], model="hash:64") as colleague:
        colleague.remember("the churn dashboard refreshes hourly", author="bo")
    code, hits = await api("recall", query="churn", mine="true", min_score=0)
    assert [h["note"]["author"] for h in hits["hits"]] == ["ana"]
    code, page = await api("notes", author="bo")
    assert [n["text"] for n in page["notes"]] == ["the churn dashboard refreshes hourly"]


def test_jupyter_server_finds_no_unauthenticated_handler(tmp_path):
    """Jupyter's own check (as in the extension template): no JupyterServerAuthWarning."""
    script = textwrap.dedent(f"""
        import warnings
        from jupyter_server.serverapp import ServerApp
        from jupyter_server.utils import JupyterServerAuthWarning
        app = ServerApp(allow_unauthenticated_access=False, root_dir={str(tmp_path)!r},
                        jpserver_extensions={{"nbmemory.server": True}},
                        reraise_server_extension_failures=True)
        with warnings.catch_warnings(record=True) as records:
            warnings.simplefilter("always")
            app.initialize(argv=["--NbMemoryExtension.model=hash:64",
                                 "--NbMemoryExtension.store={tmp_path / 'store'}"],
                           find_extensions=False, new_httpserver=False)
        problems = [str(r.message) for r in records
                    if issubclass(r.category, JupyterServerAuthWarning)]
        loaded = [k for k in app.extension_manager.extensions if k.startswith("nbmemory")]
        print(loaded, problems)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "['nbmemory.server'] []"


@pytest.mark.parametrize("argv, model", [
    ([], "hash:64"),  # as the magics, the CLI and the MCP server choose
    (["--NbMemoryExtension.model=hash:32"], "hash:32"),
])
def test_the_server_takes_the_model_every_front_end_takes(tmp_path, argv, model):
    script = textwrap.dedent(f"""
        from jupyter_server.serverapp import ServerApp
        from nbmemory.server.shared import HOST_KEY
        app = ServerApp(root_dir={str(tmp_path)!r}, jpserver_extensions={{"nbmemory.server": True}},
                        reraise_server_extension_failures=True)
        app.initialize(argv=[*{argv!r}, "--NbMemoryExtension.store={tmp_path / 'store'}"],
                       find_extensions=False, new_httpserver=False)
        print(app.web_app.settings[HOST_KEY].model)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120, cwd=tmp_path,
                            env={**os.environ, "NBMEMORY_MODEL": "hash:64"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == model


async def test_store_work_runs_off_the_event_loop(api, jp_serverapp):
    """While the worker thread is busy (a slow recall, say), the server keeps answering."""
    import asyncio
    import threading

    from nbmemory.server.app import HOST_KEY

    host = jp_serverapp.web_app.settings[HOST_KEY]
    busy, release = threading.Event(), threading.Event()
    host.executor.submit(lambda: (busy.set(), release.wait(30)))
    assert busy.wait(10)
    status = asyncio.ensure_future(api("status"))  # queued behind the busy worker
    code, data = await asyncio.wait_for(api("version"), timeout=5)
    assert code == 200 and not status.done()
    release.set()
    code, data = await asyncio.wait_for(status, timeout=30)
    assert code == 200 and data["notes"] == 0


async def test_a_note_remembered_in_a_kernel_is_listed_at_once(api, store_dir):
    """Another process (a kernel, through the owner service) writes; the server sees it
    on its very next request, with no poll or refresh in between."""
    assert (await api("status"))[1]["notes"] == 0  # the server's owner is up
    kernel = textwrap.dedent(f"""
        from IPython.core.interactiveshell import InteractiveShell
        ip = InteractiveShell.instance(history_length=0)
        ip.run_line_magic("load_ext", "nbmemory")
        ip.run_line_magic("config", "NbMemory.store = {str(store_dir)!r}")
        ip.run_line_magic("config", "NbMemory.model = 'hash:64'")
        ip.run_line_magic("remember", "-t orders orders.amount is in cents before 2021")
    """)
    result = subprocess.run([sys.executable, "-c", kernel], capture_output=True, text=True,
                            timeout=120)
    assert "Remembered #1 (finding, medium) [orders]" in result.stdout, result.stderr
    code, page = await api("notes")
    assert code == 200 and [n["text"] for n in page["notes"]] == [
        "orders.amount is in cents before 2021"]
    code, hits = await api("recall", query="orders.amount", k=5)
    assert code == 200 and hits["hits"][0]["note"]["id"] == 1


# -- the panel's live view: stale digest, owner state, cold start ----------------------------


async def test_status_carries_a_stale_digest_that_moves_when_a_file_changes(api, store_dir):
    """A file changing writes nothing to the journal; the digest still changes, so a
    polling panel knows to refetch its badges."""
    data = store_dir.parent / "inputs"
    data.mkdir()
    (data / "orders.csv").write_text("id,amount\n1,100\n")
    await remember(api, "amounts in inputs/orders.csv are in cents")
    code, before = await api("status")
    assert code == 200 and before["stale"] == 0 and before["running"] is True
    (data / "orders.csv").write_text("id,amount,discount\n1,100,0\n")
    code, after = await api("status")
    assert after["journal_position"] == before["journal_position"]
    assert after["stale"] == 1 and after["stale_digest"] != before["stale_digest"]
    code, again = await api("status")
    assert again["stale_digest"] == after["stale_digest"]


async def test_status_without_start_names_no_dead_owner_and_starts_none(api, store_dir):
    from nbmemory.service import owner_info, stop

    code, status = await api("status", start="false")
    assert code == 200 and status["running"] is False  # nothing started the owner yet
    assert owner_info(store_dir) is None
    code, status = await api("status")
    assert code == 200 and status["running"] is True
    first = status["owner_pid"]
    code, state = await api("owner")
    assert code == 200 and state["running"] and state["pid"] == first
    assert state["state"] == "serving" and state["busy"] is None
    assert stop(store_dir)
    code, status = await api("status", start="false")
    assert code == 200 and status == {**status, "running": False, "owner": "not running"}
    assert "pid" not in status and "owner_pid" not in status
    assert owner_info(store_dir) is None, "a poll must not start an owner"
    code, state = await api("owner")
    assert state["running"] is False and state["pid"] is None
    code, status = await api("status")
    assert code == 200 and status["running"] and status["owner_pid"] != first


async def test_owner_route_answers_while_the_worker_is_busy(api, jp_serverapp):
    import asyncio
    import threading

    from nbmemory.server.app import HOST_KEY

    host = jp_serverapp.web_app.settings[HOST_KEY]
    await api("status")
    busy, release = threading.Event(), threading.Event()
    work = asyncio.ensure_future(host.run(lambda m: (busy.set(), release.wait(30)), "recall"))
    assert await asyncio.get_running_loop().run_in_executor(None, busy.wait, 10)
    code, state = await asyncio.wait_for(api("owner"), timeout=10)
    assert code == 200 and state["busy"] == "recall" and state["busy_s"] >= 0
    assert state["running"] and state["model_loaded"] in (True, None)
    release.set()
    await work
    code, state = await api("owner")
    assert state["busy"] is None


# -- notes written in the panel: provenance and authors ---------------------------------------


async def test_a_note_from_a_notebook_cell_keeps_its_provenance(api, jp_root_dir):
    (jp_root_dir / "work").mkdir()
    code, note = await api("notes", "POST", {
        "text": "the ledger closes at 02:00 UTC",
        "provenance": {"notebook": "work/ledger.ipynb", "cell_id": "c-1",
                       "execution_count": 4, "cell_source": "ledger.close_time()"}})
    assert code == 201, note
    p = note["provenance"]
    assert p["notebook"] == str((jp_root_dir / "work" / "ledger.ipynb").resolve())
    assert (p["cell_id"], p["execution_count"], p["source"]) == ("c-1", 4, "panel")
    assert p["cell_source"] == "ledger.close_time()" and len(p["cell_hash"]) == 32
    assert note["lab_path"] == "work/ledger.ipynb"


async def test_a_note_from_the_panel_runs_no_program_its_folders_repository_names(
        api, jp_root_dir, tmp_path):
    """git status runs a repository's file monitor and clean filters, which its own
    .git/config names: a note written in the panel about a notebook in an unpacked archive
    ran them on the server. Its provenance keeps the branch and commit, not the dirty flag."""
    ran = tmp_path / "ran"
    folder = jp_root_dir / "unpacked"
    folder.mkdir()
    run = ["git", "-c", "user.email=t@example.com", "-c", "user.name=T", "-C", str(folder)]
    subprocess.run([*run, "init", "-q", "-b", "main"], check=True)
    (folder / ".gitattributes").write_text("*.csv filter=evil\n")
    (folder / "a.csv").write_text("x\n")
    subprocess.run([*run, "add", "-A"], check=True)
    subprocess.run([*run, "commit", "-qm", "one"], check=True)
    for key, value in (("core.fsmonitor", f"touch {ran}; false"),
                       ("filter.evil.clean", f"touch {ran}; cat")):
        subprocess.run([*run, "config", key, value], check=True)
    (folder / "a.csv").write_text("y\n")
    code, note = await api("notes", "POST", {"text": "the ledger closes at 02:00 UTC",
                                             "provenance": {"notebook": "unpacked/x.ipynb"}})
    assert code == 201, note
    assert not ran.exists()
    assert note["provenance"]["git_branch"] == "main" and "git_dirty" not in note["provenance"]


async def test_a_notebook_in_a_linked_folder_under_the_root_keeps_its_lab_path(
        api, jp_root_dir, tmp_path):
    """root/data -> ../shared: JupyterLab lists and opens data/x.ipynb, so the panel may name
    it, and a note from it (panel or kernel) links back to it; '..' still climbs nowhere."""
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "x.ipynb").write_text("{}")
    (jp_root_dir / "data").symlink_to(shared, target_is_directory=True)
    code, note = await api("notes", "POST", {
        "text": "the shared folder's notebook", "provenance": {"notebook": "data/x.ipynb",
                                                              "cell_id": "c-1"}})
    assert code == 201, note
    assert note["lab_path"] == "data/x.ipynb"
    code, where = await api(f"notes/{note['id']}/source")
    assert (code, where) == (200, {"lab_path": "data/x.ipynb", "exists": True, "moved_to": []})
    assert lab_path(str(jp_root_dir / "data" / "x.ipynb"), str(jp_root_dir)) == "data/x.ipynb"
    code, data = await api("notes", "POST", {
        "text": "out of the root", "provenance": {"notebook": "data/../../shared/x.ipynb"}})
    assert code == 400
    assert data["message"] == ("The notebook 'data/../../shared/x.ipynb' is not under the "
                               "Jupyter server's root directory; give its path as JupyterLab "
                               "shows it.")


async def test_source_of_a_notebook_name_too_long_for_the_system_is_not_there(api):
    name = "a" * 300 + ".ipynb"  # one name past the 255 bytes a file system takes
    code, note = await api("notes", "POST", {
        "text": "a note from a notebook no file system can name",
        "provenance": {"notebook": name, "cell_id": "c-1"}})
    assert code == 201, note
    code, where = await api(f"notes/{note['id']}/source")
    assert (code, where) == (200, {"lab_path": name, "exists": False, "moved_to": []})


async def test_recall_takes_a_query_of_4000_characters(api):
    await remember(api, "orders.amount is in cents")
    code, hits = await api("recall", query=("cents " * 700)[:4000], k=1)
    assert code == 200 and hits["hits"][0]["note"]["text"] == "orders.amount is in cents"


async def test_the_author_of_a_token_request_is_the_servers_user(api):
    """jupyter_server makes up an anonymous user per token request: that is no author."""
    from nbmemory.provenance import author

    note = await remember(api, "written with the token alone")
    assert note["author"] == author()


@pytest.mark.parametrize("jp_server_config", [NamedUser], indirect=True)
async def test_panel_writes_are_attributed_to_the_jupyter_user(api):
    note = await remember(api, "the retry limit is 3")
    assert note["author"] == "ana" and note["provenance"]["author"] == "ana"
    code, _ = await api(f"notes/{note['id']}", "PATCH", {"text": "the retry limit is 5"})
    assert code == 200
    for action in ("forget", "reinstate", "verify"):
        code, data = await api(f"notes/{note['id']}/{action}", "POST")
        assert code == 200, data
    code, new = await api(f"notes/{note['id']}/supersede", "POST", {"text": "no retries"})
    assert code == 201 and new["author"] == "ana"
    code, detail = await api(f"notes/{note['id']}")
    events = [(e["type"], e["actor"]) for e in detail["history"]]
    assert events[:5] == [("created", "ana"), ("edited", "ana"), ("revoked", "ana"),
                          ("reinstated", "ana"), ("verified", "ana")], events
    code, snap = await api("snapshots", "POST", {"name": "by-ana"})
    assert code == 201 and snap["author"] == "ana"


async def test_errors_say_the_next_step_as_a_request_and_carry_the_command(api):
    note = await remember(api, "forget me twice")
    await api(f"notes/{note['id']}/forget", "POST")
    code, data = await api(f"notes/{note['id']}/forget", "POST")
    assert code == 409
    assert f"POST /nbmemory/notes/{note['id']}/reinstate" in data["message"]
    assert "%memory" not in data["message"] and "Memory." not in data["message"]
    assert data["commands"] == [["reinstate", [note["id"]]]]


# -- source links after a rename ---------------------------------------------------------------


async def test_source_of_a_renamed_notebook_points_to_where_its_cell_went(api, jp_root_dir):
    import nbformat

    notebook = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("ledger.close_time()")
    notebook.cells = [nbformat.v4.new_markdown_cell("# Ledger"), cell]
    nbformat.write(notebook, jp_root_dir / "Untitled.ipynb")
    code, note = await api("notes", "POST", {
        "text": "the ledger closes at 02:00 UTC",
        "provenance": {"notebook": "Untitled.ipynb", "cell_id": cell.id}})
    assert code == 201, note
    code, where = await api(f"notes/{note['id']}/source")
    assert code == 200 and where == {"lab_path": "Untitled.ipynb", "exists": True,
                                     "moved_to": []}
    (jp_root_dir / "reports").mkdir()
    os.rename(jp_root_dir / "Untitled.ipynb", jp_root_dir / "reports" / "sales-notes.ipynb")
    (jp_root_dir / ".hidden").mkdir()
    nbformat.write(notebook, jp_root_dir / ".hidden" / "copy.ipynb")  # hidden: not offered
    code, where = await api(f"notes/{note['id']}/source")
    assert code == 200 and where == {"lab_path": "Untitled.ipynb", "exists": False,
                                     "moved_to": ["reports/sales-notes.ipynb"]}
    code, where = await api("notes/999/source")
    assert code == 404


def test_the_search_for_a_renamed_notebook_stops_at_its_limits(tmp_path, monkeypatch):
    import nbformat

    from nbmemory.server import source

    notebook = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("ledger.close_time()")
    notebook.cells = [cell]
    for name in ("a", "b", "c"):
        nbformat.write(notebook, tmp_path / f"{name}.ipynb")
    for folder in range(5):
        (tmp_path / f"sub{folder}").mkdir()
        nbformat.write(notebook, tmp_path / f"sub{folder}" / "copy.ipynb")
    walked = []
    walk = os.walk

    def counted(*args, **kwargs):
        for entry in walk(*args, **kwargs):
            walked.append(entry[0])
            yield entry

    monkeypatch.setattr(source.os, "walk", counted)
    monkeypatch.setattr(source, "MAX_SCANNED_NOTEBOOKS", 2)
    assert len(source.find_cell_notebooks(tmp_path, cell.id)) == 2
    assert walked == [str(tmp_path)]  # not on through every folder below
    walked.clear()
    monkeypatch.setattr(source, "MAX_SCANNED_NOTEBOOKS", 100)
    monkeypatch.setattr(source, "MAX_SCANNED_FOLDERS", 2)
    assert len(source.find_cell_notebooks(tmp_path, cell.id)) == 4
    assert len(walked) == 2


# -- checks ----------------------------------------------------------------------------


async def test_checks_show_what_each_check_last_gave_and_never_run_here(api, store_dir):
    from nbmemory.embed import HashEmbedder
    from nbmemory.memory import Memory

    # A kernel writes the check and re-checks it (the server has no namespace to run it in).
    with Memory.open(store_dir, embedder=HashEmbedder(64), mode="local") as mem:
        note = mem.remember("under 5% nulls", check=f"share < 0.05 and {XSS!r} != ''",
                            namespace={"share": 0.01})
        mem.check({"share": 0.2})
        mem.remember("no check")
    code, body = await api("checks")
    [check] = body["checks"]
    assert code == 200
    assert (check["note_id"], check["expression"], check["names"], check["value"]) == (
        note.id, f"share < 0.05 and {XSS!r} != ''", ["share"], "True")  # a BoolOp: its value
    assert check["last"]["status"] == "failed" and check["trusted"] is True
    code, page = await api("notes", stale="stale")
    assert [n["id"] for n in page["notes"]] == [note.id]
    assert page["notes"][0]["stale"][0]["reason"] == "check_failed"
