"""The facade every front end uses: remember, recall, forget, snapshot and friends.

A ``Memory`` talks to a backend with one method, ``call(operation, **arguments)``. The
local backend runs the engine in this process; the service client (another module)
sends the same call to the store's owner process. Either way the caller gets domain
objects back, and write operations carry a request id so a retry is applied once.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from contextlib import contextmanager
from datetime import date, datetime
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from . import checks as evaluation
from .about_here import about_here as _about, with_check as _with_check
from .backends import Backend, LocalBackend
from .config import Settings, StoreLocation, current_user, locate_store
from .display import ShownHits
from .errors import DiskFull, InvalidInput, NbMemoryError, NotFound, OutcomeUnknown, from_dict
from .operations import operation as lookup
from .when import parse_since, parse_until
from .models import Anchor, Event, Hit, Hits, Note, Provenance, Snapshot, SnapshotDiff

Progress = Callable[[int, int], None]


def _local_time(when, *, end: bool = False):
    """A time given as a day or as text read here, as the CLI reads it (7d, 2w, 2026-12-05 as
    this machine's day; as an ``until``, all of it): the owner may run in another zone.
    Text it cannot read goes on as it is, for the engine to say why."""
    if isinstance(when, date) and not isinstance(when, datetime):
        when = when.isoformat()
    if not isinstance(when, str):
        return when
    try:
        return (parse_until if end else parse_since)(when)
    except InvalidInput:
        return when


def _listed(note_ids, *, always: bool = False):
    """Several ids as a list (sendable to the owner), one id as itself unless ``always``;
    the engine says what is wrong with them."""
    many = hasattr(note_ids, "__iter__") and not isinstance(note_ids, (str, bytes, dict))
    return list(note_ids) if many else [note_ids] if always else note_ids


class Memory:
    """A store of findings.

    >>> mem = Memory.open("/tmp/demo-store")          # doctest: +SKIP
    >>> note = mem.remember("orders.amount is in cents before 2021", tags="orders")
    >>> mem.recall("what unit is the order total in?")[0].note.id == note.id
    True
    """

    def __init__(self, backend: Backend, location: StoreLocation | None = None):
        self._backend = backend
        self.location = location

    @classmethod
    def open(cls, path: str | os.PathLike | None = None, *, settings: Settings | None = None,
             model: str | None = None, embedder=None, progress: Progress | None = None,
             mode: str = "auto", idle_timeout: float | None = None,
             announce: Callable[[str], None] | None = None) -> Memory:
        """Open (creating if needed) the store at ``path`` or where :func:`locate_store` finds it.

        ``mode="service"`` talks to the store's owner process, starting one if none runs
        (the model then lives there, never in this process; ``idle_timeout`` is how long a
        started owner waits for requests before exiting, by default ``NBMEMORY_IDLE_TIMEOUT``
        or 1800 s, 0 never; only an explicit ``model`` is
        asked of it, else it keeps the store's), so notebooks, the panel, the CLI and
        scripts can all use a store at once. ``mode="local"`` runs the engine in this
        process, which owns the store while the Memory is open and fails with the other
        owner's pid if there is one. ``mode="auto"`` (the default) is the service unless an
        ``embedder`` object is given (it cannot cross processes: tests pass one).
        ``announce(message)`` is told when this process starts an owner, so a front end can
        say why the first call waits. ``model`` defaults to ``NBMEMORY_MODEL`` when it is
        set, as in the CLI and the magics.
        """
        if mode not in ("auto", "service", "local"):
            raise InvalidInput(f"Unknown mode {mode!r}; use auto, service or local")
        location = locate_store(path)
        model = model or (os.environ.get("NBMEMORY_MODEL") or "").strip() or None
        if mode == "auto":
            mode = "local" if embedder is not None else "service"
        if mode == "service":
            if embedder is not None:
                raise InvalidInput("An embedder object cannot be sent to the store's owner "
                                   "process: pass model='name', or use mode='local'.")
            from .service.client import ServiceBackend

            backend = ServiceBackend(location.path, model=model, idle_timeout=idle_timeout,
                                     min_score=settings.min_score if settings else None,
                                     announce=announce)
            backend.ensure_owner()
            return cls(backend, location)

        from .engine import Engine

        settings = settings or Settings()
        if model:
            settings = Settings(**{**settings.__dict__, "model": model})
        engine = Engine(location.path, settings=settings, embedder=embedder, progress=progress)
        return cls(LocalBackend(engine), location)

    def close(self) -> None:
        self._backend.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextmanager
    def quickly(self) -> Iterator[None]:
        """Calls made within give up at once, not send again, while the owner or a team
        store's server is away: for what nobody asked for (the line under a cell)."""
        patience = getattr(self._backend, "resend_timeout", None)
        if patience is None:  # in this process: nothing is sent
            yield
            return
        self._backend.resend_timeout = 0.0
        try:
            yield
        finally:
            self._backend.resend_timeout = patience

    def _call(self, operation: str, **arguments: Any) -> Any:
        if lookup(operation).writes and not arguments.get("request_id"):
            arguments["request_id"] = uuid.uuid4().hex  # so that a resent write applies once
        return self._backend.call(operation, **arguments)

    # -- writes -------------------------------------------------------------------------

    def remember(self, text: str, *, kind: str = "finding", priority: str = "medium",
                 tags: str | Iterable[str] | None = None, author: str | None = None,
                 provenance: Provenance | None = None, supersedes: int | None = None,
                 request_id: str | None = None,
                 about: Iterable[str | Anchor | dict] | None = None,
                 check: str | None = None, namespace: Mapping[str, Any] | None = None,
                 budget: float = evaluation.DEFAULT_BUDGET) -> Note:
        """Store a finding. ``tags`` is a list or a comma-separated string.

        ``about`` anchors the note to paths, directories or globs (relative ones are looked
        up in this process's working directory, then the workspace) and to variable anchors
        made with :func:`nbmemory.values.variable_fingerprint`; paths the text mentions are
        anchored too. The note is flagged stale when they change.

        ``check``: a Python expression that must hold, evaluated here in ``namespace``
        (e.g. ``globals()``) within ``budget`` seconds; the note is refused, with the
        value it got, when it does not. Re-check later with :meth:`check`.
        """
        about = _with_check(_about(about), check, namespace, budget)
        note = self._call("remember", text=text, kind=kind, priority=priority, tags=tags,
                          author=author, provenance=provenance, supersedes=supersedes,
                          request_id=request_id, about=about)
        return self._trusting(note, check, request_id)

    def _trusting(self, note: Note, check: str | None, request_id: str | None) -> Note:
        """Who writes a check here has just seen it hold: they trust it."""
        if check is None:
            return note
        return self.trust(note.id, checks=[check.strip()],
                          request_id=f"{request_id}/trust" if request_id else None)

    def checks(self, *, actor: str | None = None) -> list[dict[str, Any]]:
        """Every check of an active note, with its latest outcome and whether ``actor``
        (by default who runs this) trusts it; see :meth:`check`."""
        return self._call("checks", actor=actor or current_user())

    def record_checks(self, outcomes: Sequence[dict[str, Any]], *, actor: str | None = None,
                      request_id: str | None = None) -> list[Note]:
        """Journal outcomes of checks evaluated here (see :meth:`check`)."""
        return self._call("record_checks", outcomes=list(outcomes),
                          actor=actor or current_user(), request_id=request_id)

    def trust(self, note_id: int, *, checks: Sequence[str] | None = None,
              actor: str | None = None, request_id: str | None = None) -> Note:
        """Let this user's checks run the check of a note someone else wrote: ``checks``,
        the expressions read (refused if they changed since), else every check it has."""
        return self._call("trust", note_id=note_id, checks=checks,
                          actor=actor or current_user(), request_id=request_id)

    def check(self, namespace: Mapping[str, Any], note_ids: Iterable[int] | None = None, *,
              budget: float = evaluation.DEFAULT_BUDGET) -> list[tuple[dict, evaluation.Outcome]]:
        """Re-evaluate the checks of ``note_ids`` (default: all) here, in ``namespace``,
        each within ``budget`` seconds, and journal the outcomes. A check someone else
        wrote is not run until trusted (:meth:`trust`); one whose names are not in
        ``namespace`` is skipped. Returns (check, outcome) pairs; a check's ``recorded``
        is False when a read-only team store kept no outcome."""
        from .checks_here import run_checks

        return run_checks(self, namespace, note_ids, budget)

    def remember_with_similar(self, text: str, *, supersedes: int | None = None,
                              similar: int = 3, **options: Any) -> tuple[Note, list[Hit]]:
        """Remember ``text`` (replacing note ``supersedes`` if given), and the ``similar``
        active notes closest to it, leaving out the one it replaces: what a front end
        shows after a remember, so the writer sees near duplicates (never merged). A kind,
        priority or tags of None is the default for a new note, the old note's for one that
        supersedes it."""
        if supersedes is not None:
            check, namespace, budget = (options.pop(k, None)
                                        for k in ("check", "namespace", "budget"))
            options["about"] = _with_check(_about(options.get("about")), check, namespace,
                                           budget or evaluation.DEFAULT_BUDGET)
            note = self._trusting(self.supersede(supersedes, text, **options), check,
                                  options.get("request_id"))
        else:
            given = {name: value for name, value in options.items()
                     if value is not None or name not in ("kind", "priority")}
            note = self.remember(text, **given)
        near = self.similar(note.id, k=similar) if similar > 0 else []
        return note, [h for h in near if h.note.id != supersedes]

    def remember_many(self, notes: Iterable[dict[str, Any] | str], *, progress: Progress | None = None,
                      request_id: str | None = None) -> list[Note]:
        """Store many findings at the model's speed (imports, scripts): each a text, or a
        dict of :meth:`remember`'s arguments, e.g. ``{"text": ..., "tags": "a,b"}``.

        Every note is checked first: one bad note raises :class:`InvalidInput` naming it, and
        nothing is stored. They are written 256 at a time (``progress(done, total)`` is told):
        a retry with the same ``request_id`` (a string of yours) writes only those missing.
        """
        if not isinstance(notes, (str, bytes, dict)) and hasattr(notes, "__iter__"):
            notes = [dict(n, about=_about(n.get("about"))) if isinstance(n, dict)
                     and "about" in n else n for n in notes]
        mine, done = request_id or uuid.uuid4().hex, [0]

        def told(n: int, total: int) -> None:
            done[0] = max(done[0], n)
            if progress:
                progress(n, total)

        try:
            return self._call("remember_many", notes=notes, progress=told, request_id=mine)
        except NbMemoryError as exc:  # an owner lost past its resend window, a full disk...
            # Chunks written before it stay: sent again as a new call, they were stored twice.
            if request_id or "request_id=" in str(exc) or not (
                    done[0] or isinstance(exc, (OutcomeUnknown, DiskFull))):
                raise
            raise from_dict(exc.to_dict(), f"Some of the notes may have been written before "
                            f"it: to write only those missing, send the call again with "
                            f"request_id={mine!r}.") from None

    def supersede(self, note_id: int, text: str, *, kind: str | None = None,
                  priority: str | None = None, tags: str | Iterable[str] | None = None,
                  author: str | None = None, provenance: Provenance | None = None,
                  about: Iterable[str | Anchor | dict] | None = None,
                  request_id: str | None = None) -> Note:
        """Store ``text`` as a new note replacing ``note_id`` (which stays in history);
        kind, priority, tags and ``about`` left out are the old note's (its files, data
        and globs, fingerprinted now)."""
        return self._call("supersede", note_id=note_id, text=text, kind=kind, priority=priority,
                          tags=tags, author=author, provenance=provenance, about=_about(about),
                          request_id=request_id)

    def edit(self, note_id: int, *, text: str | None = None, kind: str | None = None,
             priority: str | None = None, tags: str | Iterable[str] | None = None,
             author: str | None = None, request_id: str | None = None,
             version: int | None = None) -> Note:
        """Write a new version of a note with the given fields changed; with ``version``,
        only if the note is still at that version (else Conflict)."""
        return self._call("edit", note_id=note_id, text=text, kind=kind, priority=priority,
                          tags=tags, author=author, request_id=request_id, version=version)

    def forget(self, note_ids: int | Iterable[int], *, actor: str | None = None,
               request_id: str | None = None) -> list[Note]:
        """Revoke notes: hidden from recall, kept in history, undone by :meth:`reinstate`."""
        return self._call("forget", note_ids=_listed(note_ids, always=True), actor=actor,
                          request_id=request_id)

    def reinstate(self, note_id: int | Iterable[int], *, actor: str | None = None,
                  request_id: str | None = None) -> Note | list[Note]:
        """Bring back a forgotten (revoked) note, or several (a list back; all or none)."""
        return self._call("reinstate", note_id=_listed(note_id), actor=actor,
                          request_id=request_id)

    def purge(self, note_id: int, *, actor: str | None = None,
              request_id: str | None = None) -> Note:
        """Erase a note's text and vectors for good (privacy). Cannot be undone."""
        return self._call("purge", note_id=note_id, actor=actor,
                          request_id=request_id)

    def confirm(self, note_id: int, reason: str = "", *, actor: str | None = None,
                request_id: str | None = None) -> Note:
        """Mark a question or hypothesis as confirmed (it stays active)."""
        return self._call("confirm", note_id=note_id, reason=reason, actor=actor,
                          request_id=request_id)

    def refute(self, note_id: int, reason: str, *, actor: str | None = None,
               request_id: str | None = None) -> Note:
        """Mark a hypothesis as refuted; recall shows it only as "previously believed"."""
        return self._call("refute", note_id=note_id, reason=reason, actor=actor,
                          request_id=request_id)

    def reopen(self, note_id: int, *, actor: str | None = None,
               request_id: str | None = None) -> Note:
        """Undo a confirm or refute."""
        return self._call("reopen", note_id=note_id, actor=actor, request_id=request_id)

    def open_questions(self, *, limit: int = 50, tags=None, priority=None, since=None,
                       until=None, author=None, stale: bool | None = None) -> list[Note]:
        """Unresolved questions, newest first; the filters are :meth:`notes`'s."""
        return self._call("open_questions", limit=limit, tags=tags, priority=priority,
                          since=_local_time(since), until=_local_time(until, end=True),
                          author=author, stale=stale)

    def snapshot(self, name: str, *, message: str = "", author: str | None = None,
                 request_id: str | None = None, variables: dict | None = None) -> Snapshot:
        """Seal the current state under ``name`` (cheap: it records a journal position)."""
        return self._call("snapshot", name=name, message=message, author=author,
                          request_id=request_id, variables=variables)

    def reembed(self, progress: Progress | None = None, *,
                request_id: str | None = None) -> dict[str, Any]:
        """Re-embed every note with the configured model and switch the store to it."""
        return self._call("reembed", progress=progress, request_id=request_id)

    def export_jsonl(self, path: str | os.PathLike, *, progress: Progress | None = None,
                     ids: Sequence[int] | None = None) -> dict[str, int]:
        """Write the whole store (notes, versions, vectors, journal, snapshots) to ``path``,
        or only the notes ``ids`` with their history and vectors."""
        return self._call("export_jsonl", path=os.path.abspath(path), progress=progress,
                          ids=None if ids is None else [int(i) for i in ids])

    def share(self, ids: Sequence[int], to: str | os.PathLike, *, replace: bool = False,
              **open_options) -> dict[str, int]:
        """Copy notes (history, authors, vectors) to another store, as a rule a team store,
        opened with ``open_options``; a note there already stays as it is unless ``replace``."""
        target = locate_store(os.fspath(to))
        if target.address is None and not target.path.parent.is_dir():  # a typo: no new store
            raise InvalidInput(f"Cannot share with {to}: {target.path.parent} does not exist.")
        if self.location is not None and target.path.resolve() == self.location.path.resolve():
            raise InvalidInput(f"Cannot share with {to}: it is this store. Give another one, "
                               "as a rule the team store's address.")
        with tempfile.TemporaryDirectory(prefix="nbmemory-share-") as tmp:
            path = os.path.join(tmp, "shared.jsonl")  # the directory is owner-only
            try:
                self.export_jsonl(path, ids=ids)
            except NotFound as exc:
                raise NotFound(str(exc).replace("Nothing was exported.", "Nothing was shared.")
                               ) from None
            purged = [i for i in dict.fromkeys(ids) if self.get(i).status == "purged"]
            if purged:  # it would arrive as a note with no text
                raise InvalidInput(f"Note #{purged[0]} was purged: its text is erased, so there "
                                   "is nothing to share. Nothing was shared.")
            with Memory.open(to, **open_options) as other:
                return other.import_jsonl(path, merge=True,
                                          on_conflict="replace" if replace else "skip")

    def import_jsonl(self, path: str | os.PathLike, *, on_conflict: str = "skip",
                     actor: str | None = None, progress: Progress | None = None,
                     request_id: str | None = None, merge: bool = False) -> dict[str, int]:
        """Import an export file. ``on_conflict``: skip, replace or keep-both for notes
        already in this store (importing a file again changes nothing). Into an empty store
        it is restored exactly, unless ``merge`` (ids are then this store's). Returns counts:
        ``added``, ``skipped`` (``differ``: of them in another version here), ``replaced``,
        ``unchanged``, ``snapshots``, ``snapshots_skipped`` (their name is taken here),
        ``embedded``; a restore gives ``restored``, ``snapshots`` and ``embedded``."""
        return self._call("import_jsonl", path=os.path.abspath(path), on_conflict=on_conflict,
                          actor=actor, progress=progress, request_id=request_id, merge=merge)

    def export_markdown(self, directory: str | os.PathLike, *, by: str = "tag") -> list[str]:
        """Readable Markdown pages, one per tag (or kind), deterministic so they diff well."""
        return self._call("export_markdown", directory=os.path.abspath(directory), by=by)

    def reindex(self, progress: Progress | None = None, *,
                request_id: str | None = None) -> dict[str, Any]:
        """Rebuild the indexes from the store (re-embedding if the configured model changed)."""
        return self._call("reindex", progress=progress, request_id=request_id)

    # -- reads --------------------------------------------------------------------------

    def recall(self, query: str, *, k: int = 5, tags: str | Iterable[str] | None = None,
               kind: str | Sequence[str] | None = None, priority: str | Sequence[str] | None = None,
               since: datetime | None = None, until: datetime | None = None,
               explain: bool = False, min_score: float | None = None,
               as_of: str | None = None, mode: str = "hybrid", stale: bool | None = None,
               variables: dict | None = None,
               author: str | Sequence[str] | None = None, open_only: bool = False) -> Hits:
        """Hybrid (keyword + semantic) recall of the ``k`` best active notes.

        ``as_of`` names a snapshot: search the notes as they were when it was sealed.
        ``stale=True`` recalls only stale notes, ``False`` only fresh ones. ``mode``
        "lexical" or "dense" ranks by one channel alone (to compare them). ``author``:
        only notes written by one of these (a team store's members). ``open_only``: only
        the questions neither confirmed nor refuted. ``since`` and ``until``: a datetime, a
        date or text as the CLI takes it (``7d``, ``2026-12-05``: a day of this machine's).
        """
        # open_only only when asked: an owner of the code before it still answers the rest.
        return ShownHits(self._call(
            "recall", query=query, k=k, tags=tags, kind=kind, priority=priority,
            since=_local_time(since), until=_local_time(until, end=True),
            explain=explain, min_score=min_score, as_of=as_of, mode=mode, stale=stale,
            variables=variables, author=author, **({"open_only": True} if open_only else {})))

    def recall_terms(self, terms: Sequence[str], *, k: int = 5, scope: str | None = None,
                     cwd: str | None = None, variables: dict | None = None,
                     stale: bool | None = None,
                     author: str | Sequence[str] | None = None) -> Hits:
        """Notes anchored to or naming any of ``terms``: names, columns or paths alive in a
        kernel (variable anchors in notebook ``scope``; relative paths read from ``cwd``;
        ``variables``: the kernel's fingerprints of anchored variables, as for recall;
        ``stale`` and ``author`` as for recall)."""
        given = {n: v for n, v in (("stale", stale), ("author", author)) if v is not None}
        return ShownHits(self._call("recall_terms", terms=list(terms), k=k, scope=scope,
                                    cwd=cwd or os.getcwd(), variables=variables, **given))

    def get(self, note_id: int) -> Note:
        return self._call("get", note_id=note_id)

    def written_by(self, request_id: str) -> Note | None:
        """The note a write with ``request_id`` made, as it is now; None if none did."""
        return self._call("written_by", request_id=request_id)

    def notes(self, *, tags=None, kind=None, priority=None, since: datetime | None = None,
              until: datetime | None = None, status: str | Sequence[str] = "active",
              offset: int = 0, limit: int = 50, order: str = "newest",
              stale: bool | None = None, variables: dict | None = None,
              author: str | Sequence[str] | None = None):
        """A page of notes (``.notes``, ``.total``), newest first by default. ``stale``
        True lists only stale notes, False only fresh ones (``total`` counts those);
        ``author``: written by one of these."""
        return self._call("notes", tags=tags, kind=kind, priority=priority,
                          since=_local_time(since), until=_local_time(until, end=True),
                          status=status, offset=offset, limit=limit, order=order, stale=stale,
                          variables=variables, author=author)

    def stale(self, *, offset: int = 0, limit: int = 50, variables: dict | None = None):
        """A page of the active notes that are stale, each with its reasons."""
        return self._call("stale", offset=offset, limit=limit, variables=variables)

    def verify(self, note_id: int, *, actor: str | None = None, variables: dict | None = None,
               request_id: str | None = None) -> Note:
        """Re-take a note's fingerprints once you have checked it still holds."""
        return self._call("verify", note_id=note_id, actor=actor, variables=variables,
                          request_id=request_id)

    def variable_anchors(self, scope: str = "") -> list[str]:
        """Names of the variables notes are anchored to in ``scope`` (a notebook path)."""
        return self._call("variable_anchors", scope=scope)

    def anchor_targets(self, scope: str = "") -> dict[str, Any]:
        """What notes are about, for a kernel to check its cells against by itself:
        ``position`` (journal), ``workspace``, ``paths``, ``globs``, ``terms`` (file names
        in note text), ``variables`` (anchored in ``scope``) and ``gotchas`` (a count)."""
        return self._call("anchor_targets", scope=scope)

    def notes_about(self, *, paths: Sequence[str] = (), cwd: str | None = None,
                    variables: dict | None = None, error: str | None = None,
                    k: int = 5) -> dict[str, Any]:
        """Notes about what one cell touched: files it read (absolute ``paths``), anchored
        ``variables`` it used (``{"scope", "values": {name: fingerprint}}``) and the
        ``error`` it raised (``"KeyError: 'amount'"``, matched against gotcha notes).
        Returns ``{"position", "paths": {target: Hits}, "variables": {name: Hits},
        "error": Hits or None, "agreement": [[cosine of gotcha i and j]]}``."""
        paths = paths if isinstance(paths, str) else [os.fspath(p) for p in paths]
        return self._call("notes_about", paths=paths, cwd=cwd, variables=variables,
                          error=error, k=k)

    def similar(self, note_id: int, *, k: int = 3, min_similarity: float = 0.5) -> list[Hit]:
        """Active notes whose meaning is closest to ``note_id``'s (cosine at least
        ``min_similarity``)."""
        return self._call("similar", note_id=note_id, k=k, min_similarity=min_similarity)

    def history(self, note_id: int) -> list[Event]:
        return self._call("history", note_id=note_id)

    def versions(self, note_id: int) -> list[Note]:
        """Every version of a note, oldest first (``version``, ``text``..., ``updated_at``
        when it was written): what it said before each edit."""
        return self._call("versions", note_id=note_id)

    def chain(self, note_id: int) -> list[Note]:
        """The notes that superseded one another through ``note_id``, oldest first."""
        return self._call("chain", note_id=note_id)

    def snapshots(self) -> list[Snapshot]:
        return self._call("snapshots")

    def snapshot_diff(self, a: str, b: str | None = None, *,
                      variables: dict | None = None) -> SnapshotDiff:
        """What changed from snapshot ``a`` to snapshot ``b`` (default: now)."""
        return self._call("snapshot_diff", a=a, b=b, variables=variables)

    @property
    def mode(self) -> str:
        """"service" (through the owner process) or "local" (engine in this process)."""
        return "local" if isinstance(self._backend, LocalBackend) else "service"

    def status(self) -> dict[str, Any]:
        status = self._call("status")
        status.setdefault("mode", self.mode)
        if self.location is not None:
            status["store_reason"] = self.location.reason
        return status
