"""The engine: one process's view of a store, coordinating its parts.

It owns the store's lock, the store, the journal and its projections (each note's state,
the keyword index, the vector index) and the model, and hands each operation to the part
that does it: :mod:`.writes`, :mod:`.reads`, :mod:`.recall`, :mod:`.staleness`,
:mod:`.about`, :mod:`.snapshots`, :mod:`.upkeep`. It never imports IPython, tornado,
jupyter_server or the MCP library.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from .. import __version__
from ..config import Settings, workspace_of
from ..embed import Embedder, lacks_model, make_embedder, model_name
from ..errors import (Command, EmbedderMismatch, ModelUnavailable, StoreDamaged,
                      StoreUnavailable, StoreUnreachable)
from ..events import INDEXED
from ..lock import OwnerLock, prepare_directory
from ..models import utcnow
from ..operations import OPERATIONS
from ..repos import Repositories
from ..stale import StaleChecker
from ..store import SCHEMA_VERSION, lost_database
from ..vectors import VectorIndex
from .about import About
from .away import AwayStore, close_store, open_or_away, reconnect
from .checking import Checking
from .indexes import Dense, Keywords, NoteCards
from .journal import Entry, Journal
from .mirror import Mirror, from_mirror
from .part import Progress
from .questions import Questions
from .reads import Reads
from .recall import Recall
from .snapshots import Snapshots
from .state import NoteState
from .staleness import Staleness
from .upkeep import Upkeep
from .validate import content_hash
from .writes import Writes

POSITION_FILENAME = "journal.position"  # in a team store's directory (see _changed)
REPOSITORIES_FILENAME = "repositories.json"  # its checkouts on this machine (repos.py)
NOT_IN_THE_COPY = ("snapshots", "recalls", "empty_recalls")  # a status unknown while away

# Reads a team store's member answers from its mirror while the server is away: those of
# notes and anchors, which it copies (the magics ask for the anchored variables and files
# before each recall and listing).
MIRRORED = {"recall", "recall_terms", "notes", "get", "variable_anchors", "anchor_targets",
            "notes_about", "stale", "written_by"}  # (the copy has no events: a write follows)


def _by(part: str, function):
    """An engine operation done by ``function`` of one of its parts (same signature)."""
    @functools.wraps(function)
    def operation(self, *args, **kwargs):
        try:
            try:
                self.catch_up()
                return function(getattr(self, part), *args, **kwargs)
            except StoreUnreachable:
                if not (function.__name__ in MIRRORED and _broken(self.store)):
                    raise
                # Its connection ended (a server restart, a session ended by its admin)
                # while the server may be up: a read asks once more, on a new connection,
                # before it answers from this machine's copy, which may be behind.
                self.catch_up()
                return function(getattr(self, part), *args, **kwargs)
        except StoreUnreachable as exc:
            if self.mirror is None or function.__name__ not in MIRRORED:
                op = OPERATIONS.get(function.__name__)
                if self.mirror is not None and op is not None and op.read:
                    raise StoreUnavailable(  # no use waiting for it: said now
                        f"{exc} This machine's copy holds the notes, what they are about and "
                        f"their vectors, not what {op.words} needs: try again once the "
                        "server is back.") from None
                raise
            return from_mirror(self, lambda: function(getattr(self, part), *args, **kwargs))
    return operation


def _broken(store) -> bool:
    """Whether a team store's connection is known to have ended (the next call makes one)."""
    return bool(getattr(store, "con_broken", lambda: False)())


class Engine:
    """Everything a store can do, for the one process that owns it (``store``: one
    :func:`open_or_away` opened already, which it then owns)."""

    def __init__(self, directory: str | os.PathLike, *, settings: Settings | None = None,
                 embedder: Embedder | None = None, progress: Progress | None = None,
                 owner_lock: OwnerLock | None = None, store=None):
        self.directory = Path(directory)
        self.settings = settings or Settings()
        self.embedder = embedder or make_embedder(self.settings.model)
        self.started = time.time()
        self.lock = threading.RLock()
        prepare_directory(self.directory)
        # The service takes the lock itself (to announce itself before the slow open).
        self._owner = owner_lock or OwnerLock(self.directory)
        if not self._owner.held:
            self._owner.acquire()
        try:  # a team store whose server is away: this machine's copy, until it is back
            self.store = store or open_or_away(self.directory)
        except BaseException:
            self._owner.release()
            raise
        self.away, self.shared = isinstance(self.store, AwayStore), self.store.shared
        # A team store's directory is a cache: its paths are relative to the home directory.
        self.workspace = (Path.home().resolve() if self.store.shared else
                          workspace_of(self.directory))
        self.checker = StaleChecker(
            self.workspace, exclude=[self.directory],
            repositories=Repositories(self.directory / REPOSITORIES_FILENAME)
            if self.store.shared else None)
        self.journal = Journal(self.store, committed=self._changed if self.store.shared else None)
        self.state = NoteState()
        self.keywords = Keywords(self.directory, self.settings, self.store,
                                 lambda: self.journal.position)
        self.dense = Dense(self.directory, self.settings, self.store,  # None: not ours now
                           lambda: self.journal.position if self._owner.intact() else None,
                           self.lock)
        self.cards = NoteCards(self.directory, self.settings, self.store,
                               lambda: self.journal.position)
        self.journal.projections = [self.state, self.keywords, self.dense, self.cards]
        self.writes, self.reads, self.recalls = Writes(self), Reads(self), Recall(self)
        self.staleness, self.about = Staleness(self), About(self)
        self.seals, self.upkeep = Snapshots(self), Upkeep(self)
        self.checking, self.questions = Checking(self), Questions(self)
        self._identity: str | None = None
        # While warm_up loads the model, recall answers from the keywords alone and new
        # notes wait here (id: text) for their vectors.
        self.model_loading = False
        self.unembedded: dict[int, str] = {}
        self._index_state = "empty"
        self.keywords_state = "empty"
        self.cards_state = "empty"
        try:
            self.open_indexes(progress)
            if not self.store.shared:
                self.writes.finish_purges()  # one a crash cut short
        except BaseException:  # a store that cannot be opened is left as it was, unlocked
            self.checker.close()
            close_store(self.store)
            self._owner.release()
            raise
        self.mirror: Mirror | None = self.store.mirror if self.away else None
        if self.store.shared and not self.away:  # others' writes are applied as they commit
            self.mirror = Mirror(self.directory, self.store)
            self.mirror.catch_up(self.journal.position, utcnow().isoformat(timespec="seconds"))
            self.store.listen(self._woken)

    # -- operations (nbmemory/operations.py lists them; tests check the signatures) -------

    remember = _by("writes", Writes.remember)
    remember_batch = _by("writes", Writes.remember_batch)
    remember_many = _by("writes", Writes.remember_many)
    supersede = _by("writes", Writes.supersede)
    edit = _by("writes", Writes.edit)
    forget = _by("writes", Writes.forget)
    reinstate = _by("writes", Writes.reinstate)
    purge = _by("writes", Writes.purge)
    confirm = _by("questions", Questions.confirm)
    refute = _by("questions", Questions.refute)
    reopen = _by("questions", Questions.reopen)
    get = _by("reads", Reads.get)
    written_by = _by("reads", Reads.written_by)
    notes = _by("reads", Reads.notes)
    history = _by("reads", Reads.history)
    chain = _by("reads", Reads.chain)
    versions = _by("reads", Reads.versions)
    open_questions = _by("reads", Reads.open_questions)
    recall = _by("recalls", Recall.recall)
    recall_terms = _by("recalls", Recall.recall_terms)
    similar = _by("recalls", Recall.similar)
    stale = _by("staleness", Staleness.stale)
    verify = _by("staleness", Staleness.verify)
    variable_anchors = _by("staleness", Staleness.variable_anchors)
    checks = _by("checking", Checking.checks)
    record_checks = _by("checking", Checking.record_checks)
    trust = _by("checking", Checking.trust)
    anchor_targets = _by("about", About.anchor_targets)
    notes_about = _by("about", About.notes_about)
    snapshot = _by("seals", Snapshots.snapshot)
    snapshots = _by("seals", Snapshots.snapshots)
    snapshot_diff = _by("seals", Snapshots.snapshot_diff)
    reembed = _by("upkeep", Upkeep.reembed)
    reindex = _by("upkeep", Upkeep.reindex)
    export_jsonl = _by("upkeep", Upkeep.export_jsonl)
    import_jsonl = _by("upkeep", Upkeep.import_jsonl)
    export_markdown = _by("upkeep", Upkeep.export_markdown)

    # -- lifecycle ----------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        """Not closed yet (a bulk remember embeds with the lock free, so a close may come)."""
        return self._owner.held

    def close(self) -> None:
        with self.lock:
            if self._owner.held:
                # A store directory deleted (and maybe made anew) while open: whatever this
                # engine wrote now would land in the files of the store at that path now.
                mine = self._owner.intact()
                try:
                    if mine:
                        self.recalls.flush_log()
                        self.keywords.save()
                        self.cards.save()
                        self.dense.save()
                finally:
                    self.dense.close()
                    self.checker.close()
                    self.store.close(checkpoint=mine)
                    if self.mirror is not None:
                        self.mirror.close(checkpoint=mine)
                    self._owner.release()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def expect_model(self) -> None:
        """Say the model is on its way (warm_up follows): recall answers from the keywords
        and new notes are queued rather than wait for it."""
        with self.lock:
            if not self.mismatch and not getattr(self.embedder, "loaded", True):
                self.model_loading = True

    def warm_up(self) -> bool:
        """Load the embedding model now rather than on the first remember or recall
        (not while the store needs re-embedding: then on the re-embed). True if loaded."""
        with self.lock:
            if self.mismatch:
                return False
            self.model_loading = not getattr(self.embedder, "loaded", True)
        try:
            getattr(self.embedder, "dims")  # loads the model; reads go on meanwhile
            with self.lock:
                self.embedder.encode(["warm up"])
                self.model_loading = False
                self.embed_pending()
        finally:
            self.model_loading = False
        return True

    def embed_pending(self) -> int:
        """Embed the notes written while the model loaded (or left without vectors by a
        crash then) and add them to the vector index; returns how many."""
        with self.lock:
            if not self.unembedded or self.mismatch or not self.stored_identity or self.away:
                return 0
            pending = {i: t for i, t in self.unembedded.items() if i in self.state.priority}
            self.unembedded = {}
            if not pending:
                return 0
            ids, texts = np.fromiter(pending, np.int64, len(pending)), list(pending.values())
            matrix = self.embed(texts)
            with self.store.transaction():
                self.store.put_embeddings(self.embedder.name,
                                          [(content_hash(t), v) for t, v in zip(texts, matrix)])
            self.dense.add(ids, matrix)
            self.recalls.forget_past()  # a snapshot's view left out the notes with no vector
            return len(ids)

    # -- the projections ------------------------------------------------------------------

    def open_indexes(self, progress: Progress | None = None, *, rebuild: bool = False) -> None:
        """Rebuild each note's state from the store, and load (or catch up, or rebuild)
        the keyword and vector indexes."""
        with self._moving_to(self.store.position()):  # read before the rows
            self._open_indexes(progress, rebuild)

    def _open_indexes(self, progress: Progress | None, rebuild: bool) -> None:
        ids, priorities, inactive, follows = self.store.note_states(INDEXED)
        self.state.rebuild(ids, priorities, inactive, follows)
        self._identity = None
        self.recalls.forget_past()
        self.dense.close()
        stored = self.stored_identity
        if not stored and not self.store.shared:  # new, or its database was deleted?
            lost = lost_database(self.directory, self.store.position())
            if lost:
                raise StoreDamaged(lost)
        if not stored or self.mismatch:
            self._index_state = "empty" if not stored else "needs re-embedding"
        else:  # first: it refuses, touching nothing, a store that has lost writes
            self._index_state = self.dense.open(stored, ids, progress, rebuild=rebuild)
            # Notes a crash left without vectors (written while the model loaded).
            missing = ids if self.dense.index is None else ids[~self.dense.index.holds(ids)]
            self.unembedded = dict(self.store.texts(missing.tolist())) if len(missing) else {}
        self.keywords_state = self.keywords.open(ids, rebuild=rebuild)
        self.cards_state = self.cards.open(len(ids), rebuild=rebuild)

    def catch_up(self) -> int:
        """Apply what other members of a team store committed since this process last
        looked; returns how many notes changed. Idempotent: a note is read again whole."""
        if not self.shared:  # not self.store's: a read from the mirror swaps it meanwhile
            return 0
        with self.lock:
            if self.away:
                reconnect(self)  # raises StoreUnreachable while the server is still away
            seen, now = self.journal.position, self.store.position()
            if now <= seen:
                return 0
            changed = self.store.changed_since(seen)
            with self._moving_to(now):
                self.resync(changed)
            self._changed()
            return len(changed)

    @contextmanager
    def _moving_to(self, position: int) -> Iterator[None]:
        """The journal position is ``position`` while the projections take the changes up
        to it (a file they save records it), and goes back if they fail half-way (the
        team store's server went away): the next call catches up from where it was."""
        previous = self.journal.position
        self.journal.position = position
        try:
            yield
        except BaseException:
            self.journal.position = previous
            raise

    def resync(self, changed: Sequence[int]) -> None:
        """Bring the projections in line with the store for the notes ``changed`` (written
        by another member, or by an import), reading each whole: idempotent."""
        with self.lock:
            rows = self.store.index_rows(INDEXED, changed)
            self.state.sync(changed, rows)
            self.keywords.sync(changed, rows)
            self.cards.sync(changed)
            self.store.forget_cached(changed)
            self._identity = None
            self.recalls.forget_past()
            if self.dense.index is None and self.stored_identity and not self.mismatch:
                self.open_indexes()  # the first vectors (another member's, or imported)
            else:
                self.dense.sync(changed)

    def _changed(self) -> None:
        """Rewrite the team store's position file: kernels watch it (as they watch a DuckDB
        store's file) to know the notes changed without asking; bring the mirror up."""
        if self.mirror is not None:
            try:
                self.mirror.catch_up(self.journal.position,
                                     utcnow().isoformat(timespec="seconds"))
            except StoreUnreachable:
                pass  # what is committed stays committed; the next commit copies it
        path = self.directory / POSITION_FILENAME
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(f"{self.journal.position}\n")
        os.replace(tmp, path)

    def _woken(self) -> None:
        try:
            self.catch_up()
        except Exception:  # noqa: BLE001 - closed or unreachable: the next call catches up
            pass

    @property
    def index_state(self) -> str:
        index = self.dense.index
        if index is not None and index.building:
            done, total = index.built
            why = self._index_state.removeprefix("rebuilt ")  # "(no index file)", ...
            why = f" {why}" if why.startswith("(") else ""
            return f"building {done:,}/{total:,}{why} (recall searches exactly meanwhile)"
        if self._index_state == "empty" and index is not None:
            return "new"
        return self._index_state

    @index_state.setter
    def index_state(self, value: str) -> None:
        self._index_state = value

    @property
    def lexical(self):
        return self.keywords.index

    @property
    def vectors(self) -> VectorIndex | None:
        return self.dense.index

    @contextmanager
    def writing(self, ndim: int | None = None) -> Iterator[Entry]:
        """A journal transaction; with ``ndim``, the first vectors of a new store also set
        its embedder identity, in the same transaction."""
        first = ndim is not None and not self.stored_identity
        try:
            with self.journal.write() as entry:
                if first:
                    self.set_identity(f"{self.embedder.name}:{ndim}")
                yield entry
                if not self._owner.intact():  # checked before the commit: else it is lost
                    raise StoreUnavailable(
                        f"The store directory {self.directory} was deleted or replaced while "
                        f"this process had it open, so this write was not kept. Open the "
                        f"store again (a new kernel, script or command) and repeat it.")
        except BaseException:
            self._identity = None  # set_meta may have been rolled back
            raise

    # -- the model ------------------------------------------------------------------------

    @property
    def stored_identity(self) -> str | None:
        """``model:dims`` of the vectors in the store, or None before the first note."""
        if self._identity is None:
            self._identity = self.store.meta("embedder") or ""
        return self._identity or None

    def set_identity(self, identity: str) -> None:
        self.store.set_meta("embedder", identity)
        self._identity = identity
        self.dense.identity = identity

    @property
    def mismatch(self) -> tuple[str, str] | None:
        """(stored identity, configured model) when they differ; dims are compared only
        once the model is loaded (loading it just to compare would slow every open)."""
        stored = self.stored_identity
        if not stored:
            return None
        if model_name(stored) != self.embedder.name:
            return stored, self.embedder.name
        if getattr(self.embedder, "loaded", True) and stored != self.embedder.identity:
            return stored, self.embedder.identity
        return None

    def check_embedder(self) -> None:
        mismatch = self.mismatch
        if mismatch:
            stored, configured = mismatch
            if lacks_model(self.embedder):
                raise ModelUnavailable(
                    f"This store's vectors were made with {stored}, and the configured model "
                    f"{configured!r} is not on this machine to load offline (a typo, or not "
                    f"in the Hugging Face cache). Set the model back to "
                    f"{model_name(stored)!r}.")
            raise EmbedderMismatch(
                f"This store's vectors were made with {stored}, but the configured model is "
                f"{configured!r}. Re-embed the notes with {{0}}, or set the model back to "
                f"{model_name(stored)!r}.", Command("reembed"))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.check_embedder()
        return self.embedder.encode(texts)

    def _put_vector(self, digest: str, vector: np.ndarray) -> None:
        """Store a vector by content hash (benchmarks fill stores this way)."""
        if not self.stored_identity:
            self.set_identity(f"{self.embedder.name}:{len(vector)}")
        self.store.put_embeddings(self.embedder.name, [(digest, vector)])

    # -- for tests and benchmarks -----------------------------------------------------------

    def _flush_recall_log(self) -> None:
        self.recalls.flush_log()

    def _about(self):
        return self.about.current()

    # -- status -----------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """What the store holds and how this process serves it. A team store whose server
        is away is described from this machine's copy, with ``unreachable`` set."""
        try:
            self.catch_up()
            return self._status()
        except StoreUnreachable as exc:
            if self.mirror is None:
                raise
            address = self.store.address.url
            return {**from_mirror(self, self._status), "store": address,
                    "journal_position": self.journal.position, "unreachable": str(exc),
                    "read_only": False, **dict.fromkeys(NOT_IN_THE_COPY)}

    def _status(self) -> dict[str, Any]:
        with self.lock:
            self.recalls.flush_log()
            counts = self.store.counts()
            stats = self.store.recall_stats()
            loaded = bool(getattr(self.embedder, "loaded", True))
            return {
                "store": self.store.address.url if self.store.shared else str(self.directory),
                "notes": counts.get("active", 0), "by_status": counts,
                "snapshots": len(self.store.snapshots()),
                "model": self.stored_identity or self.embedder.name,
                # As "model" reads (name:dims) once the dims are known, i.e. loaded.
                "configured_model": self.embedder.identity if loaded else self.embedder.name,
                "model_loaded": loaded,
                "model_loading": self.model_loading, "unembedded": len(self.unembedded),
                "mismatch": bool(self.mismatch),
                "index": self.index_state,
                "vectors": len(self.vectors) if self.vectors is not None else 0,
                "lexical_docs": len(self.lexical),
                "keywords": self.keywords_state, "cards": self.cards_state,
                "journal_position": self.store.position(),
                "read_only": bool(getattr(self.store, "read_only", False)),
                "schema_version": SCHEMA_VERSION, "version": __version__, "pid": os.getpid(),
                "uptime_s": round(time.time() - self.started, 1),
                **stats,
            }
