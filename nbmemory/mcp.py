"""The MCP server: ``nbmemory mcp`` serves a store to agents over stdio.

Built on the official MCP Python SDK (``pip install 'nbmemory[mcp]'``). A composition
root like the CLI: it opens the store through :func:`nbmemory.cli.open_memory` on the
first tool call and keeps it for the session. Tool descriptions teach good use; every
note it returns carries its id, stale reasons and provenance. A :class:`Session` counts
calls, errors and empty recalls per tool, and once the notes returned pass a size (or a
number of calls) it appends one line reminding the agent that they can be fetched again
by id, so it need not re-read files just in case (mcp_calls.py).
"""

from __future__ import annotations

import inspect
import json
import os
import threading
from contextlib import contextmanager
from typing import Annotated, Any, Iterator, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import TextContent, ToolAnnotations
from pydantic import Field

from ._version import __version__
from . import syntax
from .mcp_calls import Session, _middleware
from .mcp_wire import mend_stdin
from .anchors import pointer_only
from .config import configured_model
from .display import LONG_NOTE, long_note_hint
from .wording import pointer_hint
from .engine.validate import check_text
from .errors import InvalidInput, NbMemoryError, NotFound, OutcomeUnknown

ANCHOR_WORDS = {"data": "data file", "dir": "directory"}  # "data data/orders.csv" read as a typo
Kind = Literal["finding", "gotcha", "decision", "question", "reference", "procedure"]
Priority = Literal["high", "medium", "low"]

INSTRUCTIONS = """\
nbmemory is the long-term memory an analyst keeps in Jupyter, shared with you. Notes are
findings about a codebase or dataset ("orders.amount is in cents before 2021").
- Before reading code or data you may have studied before, recall: the answer may be stored.
- Pair each search with a note: when an investigation teaches you something, remember the
  finding itself, self-contained and specific, not a pointer ("see utils.py").
- A note marked stale may no longer hold (its file changed, or it was superseded): verify it
  (list_notes with stale=true lists them).
- Notes you have seen can be fetched again by id with show; you need not re-read files to be safe.
"""

class LazyMemory:
    """Opens the store on first use and keeps it; a failed open is retried next call."""

    def __init__(self, store: str | None, model: str | None):
        self.store, self.model = store, model
        self._memory = None
        self._lock = threading.Lock()

    def get(self, *, creating: bool = False):
        """The store; one that does not exist yet is created only by a write that
        ``creating`` (an agent reading a mistyped store would be told nothing is there)."""
        with self._lock:
            if self._memory is None:
                from .cli_args import CommandError, require_store
                from .memory import Memory

                try:
                    require_store(self.store, creating=creating, how="the remember tool")
                except CommandError as exc:
                    raise InvalidInput(str(exc)) from None
                self._memory = Memory.open(self.store or None,
                                           model=configured_model(self.model))
            return self._memory

    def none_yet(self, named: bool = False) -> str | None:
        """Where the project's store will be, when none was made there yet (the first
        remember makes it), else None. Not for a store named by --store or NBMEMORY_HOME
        unless ``named`` (a remember creating it): reading one that is not there is a
        mistyped configuration, and says so."""
        from .config import locate_store
        from .store import DB_FILENAME, lost_database

        if self._memory is not None or not named and (self.store or
                                                      os.environ.get("NBMEMORY_HOME")):
            return None
        location = locate_store(self.store or None)
        path = location.path
        if (location.address is not None or (path / DB_FILENAME).exists()
                or (path.exists() and not path.is_dir()) or lost_database(path, 0)):
            return None  # there, or an error get() says in its own words
        return str(location)

    def close(self) -> None:
        with self._lock:
            if self._memory is not None:
                self._memory.close()
                self._memory = None


@contextmanager
def tool_errors() -> Iterator[None]:
    """nbmemory's errors reach the agent as the tool's error message, nothing else.

    The engine validates a request completely before it writes, so a refused call
    changed nothing; the message says so, so the agent does not need to check. Not when
    the owner stopped or went silent with a write: then it may have been applied, and an
    agent told otherwise sends it again.
    """
    try:
        yield
    except NbMemoryError as exc:
        message = syntax.message(exc, syntax.MCP).rstrip()
        message = message.removesuffix(" The note was not stored.")  # said below
        end = "" if message.endswith((".", "!", "?")) else "."
        unchanged = "" if isinstance(exc, OutcomeUnknown) else " Nothing was changed."
        raise ToolError(f"{message}{end}{unchanged}") from None


def _excerpt(text: str, whole: str) -> tuple[str, str | None]:
    """A long text's start (cut at a space), and how to get the rest (``whole``)."""
    if len(text) <= LONG_NOTE:
        return text, None
    at = text.rfind(" ", LONG_NOTE // 2, LONG_NOTE)
    start = text[:at if at > 0 else LONG_NOTE]
    return start + " …", (f"the first {len(start):,} of {len(text):,} characters; "
                          f"{whole} gives the whole text")


def note_dict(note, *, score: float | None = None, excerpt: bool = False,
              as_of: str | None = None) -> dict[str, Any]:
    """A note for the agent; with ``excerpt``, a long text is cut (one note written with a
    whole file in it would otherwise fill the agent's context on every related recall).
    ``as_of``: the snapshot the note is as of (show gives its text now, not then)."""
    from .wording import age

    provenance = note.provenance.to_dict()
    provenance.pop("cell_source", None)  # long, and the notebook + cell id locate it
    out: dict[str, Any] = {"id": note.id}
    if score is not None:
        out["score"] = score
    whole = f"show(note_ids=[{note.id}])" + (f" (as the note is now, not at {as_of!r})"
                                              if as_of else "")
    text, cut = _excerpt(note.text, whole) if excerpt else (note.text, None)
    if cut:
        out["cut"] = cut
    out.update(text=text, kind=note.kind, priority=note.priority, tags=list(note.tags),
               status=note.status, version=note.version,
               created_at=note.created_at.isoformat() if note.created_at else None,
               age=age(note.created_at), stale=[str(r) for r in note.stale],
               provenance=provenance)
    if note.anchors:
        out["anchors"] = [f"{ANCHOR_WORDS.get(a.kind, a.kind)} {a.target}" for a in note.anchors]
    if note.supersedes is not None:
        out["supersedes"] = note.supersedes
    if note.resolution:
        out["resolution"] = note.resolution
        if note.resolution_reason:
            out["resolution_reason"] = note.resolution_reason
    return out


def reply(data: Any, hint: str | None = None) -> list[TextContent]:
    content = [TextContent(type="text", text=json.dumps(data, ensure_ascii=False, default=str))]
    if hint:
        content.append(TextContent(type="text", text=hint))
    return content


def nothing_yet(where: str) -> str:
    return (f"No notes yet: nothing was remembered in this project (its store, {where}, is "
            "made by the first remember). When you find something worth keeping, remember it.")


NoteId = Annotated[int, Field(ge=1, strict=True, description="a note id, e.g. 12")]
NoteIds = Annotated[list[Annotated[int, Field(ge=1, strict=True)]], Field(min_length=1, max_length=100,
                                                             description="note ids, e.g. [12, 15]")]


def build_server(store: str | None = None, model: str | None = None, *, hint_tokens: int = 4000,
                 hint_calls: int = 25) -> tuple[MCPServer, Session, LazyMemory]:
    """The MCP server over one store, with its session counters and store handle."""
    session = Session(hint_tokens, hint_calls)
    memory = LazyMemory(store, model)
    parameters: dict[str, set[str]] = {}
    server = MCPServer("nbmemory", instructions=INSTRUCTIONS, version=__version__,
                       log_level="WARNING", middleware=[_middleware(session, parameters)])

    def tool(description: str, *, read_only: bool = False, idempotent: bool = False):
        def register(fn):
            parameters[fn.__name__] = set(inspect.signature(fn).parameters)
            server.add_tool(fn, description=description, structured_output=False,
                            annotations=ToolAnnotations(read_only_hint=read_only,
                                                        destructive_hint=False,
                                                        idempotent_hint=idempotent or read_only))
            return fn
        return register

    def provenance():
        from .provenance import capture

        return capture(source="mcp")

    @tool("Store one finding so that you, other agents and the analyst in Jupyter can recall it "
          "later. Write the finding itself: self-contained and specific (names, files, columns, "
          "numbers, and why it matters), one finding per note: the content, not a pointer ('see "
          "utils.py', 'I looked at the lock code'), and not a transcript. Remember after every search or "
          "investigation that taught you something. If it corrects an earlier note, pass "
          "supersedes=<that note's id> so the old one is kept in history but no longer recalled. "
          "Returns the new note's id and similar existing notes (never merged).")
    def remember(
        text: Annotated[str, Field(min_length=1, max_length=100_000,
                                   description="the finding itself, in full sentences")],
        kind: Annotated[Kind | None, Field(description="finding (default), gotcha (a trap), "
                                                       "decision, question (open), reference or "
                                                       "procedure; with supersedes, default the "
                                                       "old note's")] = None,
        priority: Annotated[Priority | None, Field(description="high, medium (default) or low; "
                                                               "with supersedes, default the old "
                                                               "note's")] = None,
        tags: Annotated[list[str] | str | None, Field(description="short lowercase tags without "
                                                                  "spaces, e.g. ['orders', 'units']"
                                                                  "; with supersedes, default the "
                                                                  "old note's")] = None,
        supersedes: Annotated[int | None, Field(ge=1, strict=True, description="id of the note this one "
                                                                  "replaces; without about, the new "
                                                                  "note is about its files")] = None,
        about: Annotated[list[str] | str | None, Field(description="files, directories or globs the "
                                                             "finding is about (relative to the "
                                                             "project): the note is flagged stale "
                                                             "when they change. Paths named in the "
                                                             "text are anchored too")] = None,
    ) -> list[TextContent]:
        with tool_errors():
            check_text(text)  # before a store that does not exist yet is made for it
            created = memory.none_yet(named=True)
            if created and about:
                from .about_here import check_before_creating as check_about

                check_about(memory.store or None, about, provenance())
            mem = memory.get(creating=True)
            options = dict(kind=kind, priority=priority, tags=tags, provenance=provenance(),
                           about=about)
            note, similar = mem.remember_with_similar(text, supersedes=supersedes, **options)
        # The agent wrote the text: a long one comes back cut, as recall's hits do.
        data: dict[str, Any] = {"remembered": note.id, "note": note_dict(note, excerpt=True)}
        if created:
            data["created_store"] = created
        if similar:
            data["similar"] = [note_dict(h.note, score=h.score, excerpt=True) for h in similar]
            data["advice"] = ("Similar notes exist. If the new note replaces one, forget the old "
                              "one or next time pass supersedes=<id>.")
        advice = [data["advice"]] if similar else []
        if pointer_only(note.text):
            advice.append(pointer_hint(note.id, f"remember(text=<the finding>, "
                                                f"supersedes={note.id})."))
        if len(note.text) > LONG_NOTE:
            advice.append(long_note_hint(note))
        if advice:
            data["advice"] = " ".join(advice)
        # The note just written is the agent's own text; the similar ones are the store's.
        texts = [h["text"] for h in data.get("similar", [])]
        return reply(data, session.returned(texts) if texts else None)

    @tool("Recall notes by meaning and by keyword. Do it before reading code or data you may "
          "already have studied, and before answering questions about this project. Each hit "
          "has the note id, score, text, kind, tags, age, stale reasons and provenance (which "
          "notebook or tool it came from). A stale note may no longer hold: verify before relying "
          "on it. Pair each recall with a note: if nothing useful came back and you then find "
          "the answer, remember it.", read_only=True)
    def recall(
        query: Annotated[str, Field(min_length=1, max_length=10_000,
                                    description="what you want to know, in any words; "
                                                              "identifiers like acquire_lock match exactly")],
        k: Annotated[int, Field(ge=1, le=50, strict=True, description="how many notes at most")] = 5,
        tags: Annotated[list[str] | str | None, Field(description="only notes having all these tags")] = None,
        kind: Annotated[list[Kind] | Kind | None, Field(description="only notes of these kinds")] = None,
        priority: Annotated[list[Priority] | Priority | None, Field(description="only these priorities")] = None,
        as_of: Annotated[str | None, Field(min_length=1, description="a snapshot name: search the "
                                                                     "notes as they were when it was "
                                                                     "sealed")] = None,
        author: Annotated[list[str] | str | None, Field(description="only notes written by these "
                                                                    "members (a team store)")] = None,
        min_score: Annotated[float | None, Field(ge=0, le=1, description=(
            "hide hits scoring below this (default 0.2); 0 shows the weak matches a recall "
            "reports as filtered_out"))] = None,
    ) -> list[TextContent]:
        with tool_errors():
            where = memory.none_yet()
        if where is not None:
            session.count_empty("recall")
            return reply({"query": query, "hits": [], "advice": nothing_yet(where)})
        with tool_errors():
            hits = memory.get().recall(query, k=k, tags=tags, kind=kind, priority=priority,
                                       as_of=as_of, author=author, min_score=min_score)
        data: dict[str, Any] = {"query": hits.query, "hits": [
            note_dict(h.note, score=h.score, excerpt=True, as_of=as_of) for h in hits]}
        if as_of:
            data["as_of"] = as_of
        if hits.filtered_out:
            data["filtered_out"] = hits.filtered_out
        if hits.behind:  # keywords only (the model is loading or cannot read the question)
            data["behind"] = hits.behind
        if hits.previously:
            data["previously_believed"] = [note_dict(h.note, score=h.score, excerpt=True)
                                           for h in hits.previously]
        if not len(hits) and as_of:
            data["advice"] = (f"Nothing matched in the notes as they were at snapshot {as_of!r}; "
                              "recall without as_of searches the notes as they are now.")
        elif not len(hits) and any(f is not None for f in (tags, kind, priority, author)):
            data["advice"] = ("Nothing matched among the notes these filters keep; recall "
                              "without them searches every note.")
        elif not len(hits) and hits.filtered_out:
            data["advice"] = (f"{hits.filtered_out} note(s) matched only weakly (below the "
                              "score threshold; min_score=0 shows them): ask in the words such "
                              "a note would use. When you find the answer, remember the finding.")
        elif not len(hits):
            data["advice"] = ("Nothing stored matches. When you find the answer, remember the "
                              "finding so the next recall succeeds.")
        if not len(hits):
            session.count_empty("recall")
        texts = [h["text"] for h in data["hits"] + data.get("previously_believed", [])]
        return reply(data, session.returned(texts) if texts else None)

    @tool("Fetch notes again by id, in full (text, status, stale reasons, provenance). Cheaper "
          "and more precise than repeating a recall or re-reading the files a note is about.",
          read_only=True)
    def show(note_ids: NoteIds) -> list[TextContent]:
        with tool_errors():
            mem = memory.get()
            notes, missing = [], []
            for i in dict.fromkeys(note_ids):
                try:
                    notes.append(mem.get(i))
                except NotFound:  # the others are still worth having
                    missing.append(i)
            if not notes:
                mem.get(missing[0])  # none there: the store's own "No note #N" error
        data: dict[str, Any] = {"notes": [note_dict(n) for n in notes]}
        if missing:
            data["not_found"] = missing
        if any(n.behind for n in notes):
            data["behind"] = next(n.behind for n in notes if n.behind)
        return reply(data, session.returned([n.text for n in notes]))

    @tool("List notes newest first, a page at a time (text cut like recall's): to see what "
          "is known without a question, and with stale=true the notes whose file, data or "
          "cell changed since, to check and verify or supersede. Returns the total matched.",
          read_only=True)
    def list_notes(
        tags: Annotated[list[str] | str | None,
                        Field(description="only notes having all these tags")] = None,
        kind: Annotated[list[Kind] | Kind | None,
                        Field(description="only notes of these kinds")] = None,
        stale: Annotated[bool | None, Field(strict=True, description="true: only stale notes; false: only "
                                                        "fresh ones")] = None,
        offset: Annotated[int, Field(ge=0, strict=True, description="notes to skip (the next page)")] = 0,
        limit: Annotated[int, Field(ge=1, le=50, strict=True, description="notes in this page")] = 20,
    ) -> list[TextContent]:
        with tool_errors():
            where = memory.none_yet()
        if where is not None:
            return reply({"total": 0, "offset": offset, "notes": [],
                          "advice": nothing_yet(where)})
        with tool_errors():
            page = memory.get().notes(tags=tags, kind=kind, stale=stale, offset=offset,
                                      limit=limit)
        data: dict[str, Any] = {"total": page.total, "offset": page.offset,
                                "notes": [note_dict(n, excerpt=True) for n in page.notes]}
        if page.behind:
            data["behind"] = page.behind
        if page.offset + len(page.notes) < page.total:
            data["next"] = f"list_notes(offset={page.offset + len(page.notes)}, ...)"
        texts = [n["text"] for n in data["notes"]]
        return reply(data, session.returned(texts) if texts else None)

    @tool("Forget notes that are wrong or no longer useful: they are hidden from recall but kept "
          "in history, and reinstate undoes it. If a note is outdated rather than wrong, prefer "
          "remember(..., supersedes=id). All ids must exist and be active, or nothing changes.")
    def forget(note_ids: NoteIds) -> list[TextContent]:
        with tool_errors():
            notes = memory.get().forget(note_ids)
        return reply({"forgotten": [n.id for n in notes],
                      "undo": f"reinstate(note_id={notes[0].id})" if len(notes) == 1
                      else "reinstate(note_id=...) for each"})

    @tool("Undo forget: make a revoked note active again.", idempotent=False)
    def reinstate(note_id: NoteId) -> list[TextContent]:
        with tool_errors():
            note = memory.get().reinstate(note_id)
        data = {"reinstated": note.id, "note": note_dict(note, excerpt=True)}
        return reply(data, session.returned([data["note"]["text"]]))

    @tool("Seal what is known now under a name (e.g. before a refactor or a decision), so the "
          "state can be compared later. Names are unique and have no spaces.")
    def snapshot(
        name: Annotated[str, Field(min_length=1, max_length=200, pattern=r"^\S+$",
                                   description="e.g. before-refactor")],
        message: Annotated[str, Field(max_length=2000, description="why this moment matters")] = "",
    ) -> list[TextContent]:
        with tool_errors():
            snap = memory.get().snapshot(name, message=message)
        return reply({"snapshot": snap.to_dict()})

    @tool("List the sealed snapshots, oldest first, with how many notes were active in each.",
          read_only=True)
    def snapshot_list() -> list[TextContent]:
        with tool_errors():
            where = memory.none_yet()
        if where is not None:
            return reply({"snapshots": [], "advice": nothing_yet(where)})
        with tool_errors():
            snapshots = memory.get().snapshots()
        return reply({"snapshots": [s.to_dict() for s in snapshots]})

    @tool("After checking that a stale note still holds (read the changed file, rerun the "
          "query), verify it: its fingerprints are re-taken and the stale flag clears. If it no "
          "longer holds, remember the correction with supersedes=<id> instead.")
    def verify(note_id: NoteId) -> list[TextContent]:
        with tool_errors():
            mem = memory.get()
            note = mem.verify(note_id)
        data: dict[str, Any] = {"verified": note.id, "note": note_dict(note, excerpt=True)}
        gone = [a.target for a in note.anchors if a.fingerprint.get("exists") is False]
        if gone:  # verified as holding without it: say so, it is easy to miss
            data["advice"] = (f"{', '.join(gone)} {'is' if len(gone) == 1 else 'are'} missing: "
                              "the note is verified as holding without it, and goes stale "
                              "again if it comes back.")
        return reply(data, session.returned([data["note"]["text"]]))

    @tool("What changed in the notes from snapshot a to snapshot b (default: now): notes added, "
          "edited, superseded, forgotten, refuted, reinstated, purged, and those that became (or "
          "stopped being) stale. Use it to catch up on what the analyst learned since a point.",
          read_only=True)
    def snapshot_diff(
        a: Annotated[str, Field(min_length=1, description="the earlier snapshot's name")],
        b: Annotated[str | None, Field(min_length=1, description="the later snapshot's name; "
                                                                 "omit for now")] = None,
        offset: Annotated[int, Field(ge=0, strict=True, description="changes to skip (the "
                                                                    "next page)")] = 0,
        limit: Annotated[int, Field(ge=1, le=100, strict=True,
                                    description="changes in this page")] = 50,
    ) -> list[TextContent]:
        with tool_errors():
            diff = memory.get().snapshot_diff(a, b)
        page = diff.changes[offset:offset + limit]
        changes = [{"change": c.change, "detail": c.detail,
                    "note": note_dict(c.note, excerpt=True)} for c in page]
        data: dict[str, Any] = {"a": diff.a, "b": diff.b, "total": len(diff.changes),
                                "offset": offset, "changes": changes}
        if offset + len(page) < len(diff.changes):
            more = [f"a={a!r}", *([f"b={b!r}"] if b else []), f"offset={offset + len(page)}",
                    *([f"limit={limit}"] if limit != 50 else [])]
            data["next"] = f"snapshot_diff({', '.join(more)})"
        return reply(data, session.returned([c["note"]["text"] for c in changes])
                     if changes else None)

    @tool("The note and every event of its history (created, edited, superseded, revoked, "
          "reinstated...), with time and actor, and what each version said: use it to see "
          "why a note changed.", read_only=True)
    def history(note_id: NoteId) -> list[TextContent]:
        with tool_errors():
            mem = memory.get()
            note = mem.get(note_id)
            events = mem.history(note_id)
            versions = mem.versions(note_id)
        data: dict[str, Any] = {"note": note_dict(note), "events": [e.to_dict() for e in events]}
        if len(versions) > 1:  # what it said before each edit, each cut like recall's
            data["versions"] = []
            for v in versions:
                text, cut = _excerpt(v.text, f"nbmemory history {note_id} (in a shell)")
                data["versions"].append({"version": v.version, "at": v.updated_at.isoformat(),
                                         "author": v.author, "text": text,
                                         **({"cut": cut} if cut else {})})
        texts = [v["text"] for v in data.get("versions", [])] or [data["note"]["text"]]
        return reply(data, session.returned(texts))

    @tool("The store (where, how many notes, model, index) and this session's counters: calls "
          "and errors per tool, empty recalls, tokens of note content returned.", read_only=True)
    def status() -> list[TextContent]:
        with tool_errors():
            where = memory.none_yet()
        if where is not None:  # an agent's first call, often: not an error
            return reply({"store": {"store": where, "notes": 0}, "advice": nothing_yet(where),
                          "session": session.to_dict()})
        with tool_errors():
            store = memory.get().status()
        return reply({"store": store, "session": session.to_dict()})

    return server, session, memory


def serve(store: str | None = None, model: str | None = None, *, hint_tokens: int = 4000,
          hint_calls: int = 25) -> None:
    """Run the server on stdin/stdout until the client closes it; the store is closed after."""
    import signal
    import sys

    from .service.protocol import REQUEST_TIMEOUT_ENV

    # An agent's client gives up on a call long before the 600 s a notebook waits for a
    # stuck owner, and tells the agent only that it timed out: say why after 60 s.
    os.environ.setdefault(REQUEST_TIMEOUT_ENV, "60")
    server, _, memory = build_server(store, model, hint_tokens=hint_tokens, hint_calls=hint_calls)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    mend_stdin()
    try:
        server.run("stdio")
    finally:
        memory.close()
