"""The engine: one process's view of a store (DuckDB + lexical + vector indexes).

It validates input, writes through the journal, keeps both indexes in step and ranks
recalls. It never imports IPython, tornado, jupyter_server or the MCP library.
"""

from __future__ import annotations

import fnmatch
import getpass
import hashlib
import os
import threading
import time
import uuid
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import duckdb
import numpy as np

from . import __version__, exchange
from .anchors import absolute, display_path, file_terms, is_file_term
from .config import Settings, find_git_root
from .embed import Embedder, make_embedder, model_name
from .errors import Command, Conflict, EmbedderMismatch, InvalidInput, NbMemoryError, NotFound
from .history import PastView, diff
from .lexical import LexicalIndex
from .ranking import MODES, rank
from .lock import OwnerLock, prepare_directory
from .models import (KINDS, PRIORITIES, Event, Hit, Hits, Note, Page, Provenance, Snapshot,
                     SnapshotDiff, StaleReason, utcnow)
from .stale import StaleChecker
from .store import SCHEMA_VERSION, Filters, Store
from .vectors import DenseRows, VectorIndex, VectorIndexError

Progress = Callable[[int, int], None]

VECTOR_FILENAME = "vectors.usearch"
PRIORITY_BONUS = {"high": 0.02, "medium": 0.0, "low": -0.02}
MAX_NOTE_CHARS = 100_000
# remember_many embeds and writes this many notes at a time (batches this big run at the
# model's full speed; the engine lock is free between them).
BULK_CHUNK = 256
# Revoked and superseded notes stay indexed so recall can say "previously believed".
INDEXED = ("active", "revoked", "superseded", "refuted")


def _no_note(note_id: int) -> str:
    return f"No note #{note_id}. Recall or list notes to find their ids."


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def default_author() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry in some containers
        return "unknown"


def normalise_tags(tags: str | Iterable[str] | None) -> tuple[str, ...]:
    if tags is None:
        return ()
    if isinstance(tags, str):
        tags = tags.split(",")
    out = []
    for tag in tags:
        tag = str(tag).strip().lower().lstrip("#")
        if not tag:
            continue
        if any(c.isspace() for c in tag):
            raise InvalidInput(f"Tag {tag!r} contains a space; separate tags with commas: -t a,b")
        if tag not in out:
            out.append(tag)
    return tuple(out)


def check_kind(kind: str) -> str:
    kind = (kind or "").strip().lower()
    if kind not in KINDS:
        raise InvalidInput(f"Unknown kind {kind!r}; use one of: {', '.join(KINDS)}")
    return kind


def check_priority(priority: str) -> str:
    value = (priority or "").strip().lower()
    value = {"h": "high", "m": "medium", "med": "medium", "l": "low"}.get(value, value)
    if value not in PRIORITIES:
        raise InvalidInput(f"Unknown priority {priority!r}; use one of: {', '.join(PRIORITIES)}")
    return value


def check_text(text: str) -> str:
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("The note is empty; write the finding itself, e.g. {0}",
                           Command("remember", ("orders.amount is in cents before 2021",)))
    text = text.strip()
    if len(text) > MAX_NOTE_CHARS:
        raise InvalidInput(f"The note has {len(text):,} characters; the limit is "
                           f"{MAX_NOTE_CHARS:,}. Store the finding, not the whole source.")
    return text


def filters_for(*, tags=None, kind=None, priority=None, since=None, until=None,
                statuses=("active",)) -> Filters:
    def many(value, check):
        if value is None:
            return ()
        values = value.split(",") if isinstance(value, str) else value
        return tuple(check(v) for v in values if str(v).strip())

    return Filters(tags=normalise_tags(tags), kinds=many(kind, check_kind),
                   priorities=many(priority, check_priority), since=since, until=until,
                   statuses=tuple(statuses))


@dataclass(frozen=True)
class _LiveView:
    """The current notes, read through the store and the in-memory indexes."""

    store: Store
    lexical: LexicalIndex
    vectors: VectorIndex | DenseRows
    inactive: set[int]
    priority: dict[int, str]

    def candidates(self, filters: Filters) -> np.ndarray:
        return self.store.note_ids(filters)

    def priorities(self, ids: Sequence[int]) -> dict[int, str]:
        return {i: self.priority.get(i, "medium") for i in ids}

    def get_notes(self, ids: Sequence[int]) -> dict[int, Note]:
        return self.store.get_notes(ids)


@dataclass(frozen=True)
class _About:
    """What active notes are about, at one journal position (for ambient recall)."""

    commits: int  # Store.commits when built
    position: int
    paths: dict[str, set[int]]  # file, data and dir anchor targets (workspace-relative)
    globs: dict[str, set[int]]
    variables: dict[tuple[str, str], set[int]]  # (scope, name)
    terms: frozenset[str]  # file-like terms of active notes' text
    gotchas: int


_NO_VECTORS = DenseRows.from_matrix(np.empty(0, np.int64), np.empty((0, 1), np.float32))


class Engine:
    """Everything a store can do, for the one process that owns it."""

    def __init__(self, directory: str | os.PathLike, *, settings: Settings | None = None,
                 embedder: Embedder | None = None, progress: Progress | None = None,
                 owner_lock: OwnerLock | None = None):
        self.directory = Path(directory)
        self.settings = settings or Settings()
        self.embedder = embedder or make_embedder(self.settings.model)
        self.started = time.time()
        self._lock = threading.RLock()
        prepare_directory(self.directory)
        # The service takes the lock itself (to announce itself before the slow open).
        self._owner = owner_lock or OwnerLock(self.directory)
        if not self._owner.held:
            self._owner.acquire()
        try:
            self.store = Store(self.directory)
        except BaseException:
            self._owner.release()
            raise
        # Anchored paths are relative to the workspace: the git root above the store, or
        # the store's parent (never this process's cwd: the owner may run elsewhere).
        self.workspace = find_git_root(self.directory.parent.resolve()) or self.directory.parent.resolve()
        self.checker = StaleChecker(self.workspace, exclude=[self.directory])
        self._writes_since_save = 0
        self._identity: str | None = None
        self._priority: dict[int, str] = {}  # of every indexed note, for ranking
        self._recall_log: list[dict] = []  # flushed with the next write or on close
        self._inactive: set[int] = set()
        self._past_views: dict[int, PastView] = {}
        self.index_state = "empty"
        self.lexical = LexicalIndex()
        self.vectors: VectorIndex | None = None
        self._about_cache: _About | None = None  # what notes are about (ambient recall)
        self._open_indexes(progress)

    # -- lifecycle ----------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if self._owner.held:
                try:
                    self._flush_recall_log()
                    self._save_vectors()
                finally:
                    self.checker.close()
                    self.store.close()
                    self._owner.release()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def stored_identity(self) -> str | None:
        """``model:dims`` of the vectors in the store, or None before the first note."""
        if self._identity is None:
            self._identity = self.store.meta("embedder") or ""
        return self._identity or None

    def _set_identity(self, identity: str) -> None:
        self.store.set_meta("embedder", identity)
        self._identity = identity

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

    def _check_embedder(self) -> None:
        mismatch = self.mismatch
        if mismatch:
            stored, configured = mismatch
            raise EmbedderMismatch(
                f"This store's vectors were made with {stored}, but the configured model is "
                f"{configured!r}. Re-embed the notes with {{0}}, or set the model back to "
                f"{model_name(stored)!r}.", Command("reembed"))

    def _open_indexes(self, progress: Progress | None, *, rebuild: bool = False) -> None:
        """Build the keyword index and load (or catch up, or rebuild) the vector index."""
        rows = self.store.index_rows(INDEXED)
        ids = np.array([r[0] for r in rows], dtype=np.int64)
        self._inactive = {r[0] for r in rows if r[3] != "active"}
        self._priority = {r[0]: r[2] for r in rows}
        self.lexical = LexicalIndex()
        self.lexical.add_many((r[0], r[1]) for r in rows)
        self._identity = None
        self._past_views.clear()
        self._about_cache = None
        self.vectors = None
        stored = self.stored_identity
        if not stored or self.mismatch:
            self.index_state = "empty" if not stored else "needs re-embedding"
            return
        try:
            if rebuild:
                raise VectorIndexError("asked to rebuild")
            self.index_state = self._load_vectors(ids)
        except VectorIndexError as exc:
            self._rebuild_vectors(progress)
            self.index_state = f"rebuilt ({exc})"

    def _load_vectors(self, ids: np.ndarray) -> str:
        path = self.directory / VECTOR_FILENAME
        if not path.exists():
            raise VectorIndexError("no index file")
        index, meta = VectorIndex.load(path, expansion_search=self.settings.expansion_search)
        if meta.get("embedder") != self.stored_identity:
            raise VectorIndexError(f"built for {meta.get('embedder')}")
        changed = self.store.changed_since(int(meta.get("seq", 0)))
        self.vectors = index
        self._sync_vectors(changed)
        if set(index.keys().tolist()) != set(ids.tolist()):
            self.vectors = None
            raise VectorIndexError("keys disagree with the store")
        if not changed:
            return "loaded"
        self._save_vectors(force=True)
        return f"loaded, caught up {len(changed)} notes"

    def _new_vector_index(self, ndim: int) -> VectorIndex:
        s = self.settings
        return VectorIndex(ndim, connectivity=s.connectivity, expansion_add=s.expansion_add,
                           expansion_search=s.expansion_search)

    def _rebuild_vectors(self, progress: Progress | None = None) -> None:
        model = model_name(self.stored_identity)
        ids = self.store.note_ids(Filters(statuses=INDEXED))
        keys, matrix = self.store.vectors(model, ids.tolist())
        ndim = int(self.stored_identity.rsplit(":", 1)[1])
        index = self._new_vector_index(ndim)
        batch = 2_000
        for start in range(0, len(keys), batch):
            index.add(keys[start:start + batch], matrix[start:start + batch])
            if progress:
                progress(min(start + batch, len(keys)), len(keys))
        self.vectors = index
        self._save_vectors(force=True)

    def _sync_vectors(self, note_ids: Sequence[int]) -> None:
        """Bring the vector index in line with the store for ``note_ids`` (idempotent)."""
        if not note_ids or self.vectors is None:
            return
        model = model_name(self.stored_identity)
        live = set(self.store.note_ids(Filters(statuses=INDEXED)).tolist())
        keep = [i for i in note_ids if i in live]
        self.vectors.remove([i for i in note_ids if i not in live])
        if keep:
            keys, matrix = self.store.vectors(model, keep)
            self.vectors.add(keys, matrix)

    def _save_vectors(self, force: bool = False) -> None:
        if self.vectors is None or not (force or self._writes_since_save):
            return
        meta = {"seq": self.store.position(), "embedder": self.stored_identity,
                "count": len(self.vectors), "nbmemory": __version__}
        self.vectors.save(self.directory / VECTOR_FILENAME, meta)
        self._writes_since_save = 0

    def warm_up(self) -> bool:
        """Load the embedding model now rather than on the first remember or recall
        (not while the store needs re-embedding: then on the re-embed). True if loaded."""
        with self._lock:
            if self.mismatch:
                return False
        getattr(self.embedder, "dims")  # loads the model; reads go on meanwhile
        with self._lock:
            self.embedder.encode(["warm up"])
        return True

    def _after_write(self, count: int = 1) -> None:
        self._writes_since_save += count
        if self._writes_since_save >= self.settings.save_every:
            self._save_vectors()

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        self._check_embedder()
        return self.embedder.encode(texts)

    def _index_note(self, note_id: int, text: str, vector: np.ndarray) -> None:
        self.lexical.add(note_id, text)
        if self.vectors is None:
            self.vectors = self._new_vector_index(len(vector))
            self.index_state = "new"
        self.vectors.add([note_id], vector[None, :])

    # -- remember -----------------------------------------------------------------------

    def remember(self, text: str, *, kind: str = "finding", priority: str = "medium",
                 tags: str | Iterable[str] | None = None, author: str | None = None,
                 provenance: Provenance | dict | None = None, request_id: str | None = None,
                 supersedes: int | None = None, about: Sequence[Any] | None = None) -> Note:
        """Store a finding and return it. A repeated ``request_id`` returns the first note.

        ``about``: paths, directories or globs to anchor the note to (fingerprinted here,
        where staleness is checked), and ready variable anchors (fingerprinted in the
        kernel, which has the variables). Paths the text mentions are anchored too.
        """
        result = self.remember_batch([dict(text=text, kind=kind, priority=priority, tags=tags,
                                           author=author, provenance=provenance,
                                           request_id=request_id, supersedes=supersedes,
                                           about=about)])[0]
        if isinstance(result, BaseException):
            raise result
        return result

    def _prepare_remember(self, text: str, *, kind: str = "finding", priority: str = "medium",
                          tags: str | Iterable[str] | None = None, author: str | None = None,
                          provenance: Provenance | dict | None = None,
                          request_id: str | None = None, supersedes: int | None = None,
                          about: Sequence[Any] | None = None) -> dict[str, Any]:
        """Validate one remember request and fingerprint its anchors (no engine lock:
        hashing a big file must not block other calls)."""
        text = check_text(text)
        kind, priority, tags = check_kind(kind), check_priority(priority), normalise_tags(tags)
        if isinstance(provenance, dict):
            provenance = Provenance.from_dict(provenance)
        provenance = provenance or Provenance()
        return dict(text=text, kind=kind, priority=priority, tags=tags,
                    author=author or default_author(), provenance=provenance,
                    request_id=request_id or None,
                    supersedes=int(supersedes) if supersedes is not None else None,
                    content_hash=content_hash(text), uid=uuid.uuid4().hex,
                    anchors=self.checker.build(text, about, provenance))

    def remember_batch(self, requests: Sequence[dict[str, Any]]) -> list[Note | NbMemoryError]:
        """Remember several findings with one embedding call and one transaction.

        Each request holds :meth:`remember`'s keyword arguments. The result has one entry
        per request, in order: its note, or the error that request alone met (the others
        are still written). A repeated ``request_id`` gives the note it first wrote. The
        owner service batches concurrent remembers through here.
        """
        results: list[Any] = [None] * len(requests)
        prepared: list[tuple[int, dict[str, Any]]] = []
        refused: dict[int, str] = {}  # request ids of requests refused before the lock
        for i, request in enumerate(requests):
            try:
                prepared.append((i, self._prepare_remember(**request)))
            except NbMemoryError as exc:
                results[i] = exc
                if request.get("request_id"):
                    refused[i] = request["request_id"]
            except TypeError as exc:
                results[i] = InvalidInput(f"Bad remember request: {exc}")
        if not prepared and not refused:
            return results
        with self._lock:
            self._remember_locked(prepared, refused, results)
            return results

    def remember_many(self, notes: Sequence[dict[str, Any]], *, request_id: str | None = None,
                      progress: Progress | None = None) -> list[Note]:
        """Remember many findings at the model's speed: for scripts and bulk loads.

        ``notes`` holds one dict of :meth:`remember`'s keyword arguments per note. Every
        note is checked before any is written: one bad note raises :class:`InvalidInput`
        naming it, and nothing is stored. They are then embedded and written in chunks of
        ``BULK_CHUNK`` (one embedding call and one transaction each; other calls run in
        between), reporting ``progress(done, total)``. Note ``i`` gets the request id
        ``{request_id}/{i}`` unless it has its own, so a resent call writes each note once.
        """
        if isinstance(notes, (str, dict)) or not isinstance(notes, Sequence):
            raise InvalidInput("remember_many takes a list of notes, each a dict of "
                               "remember's arguments, e.g. [{'text': '...', 'tags': 'a,b'}]")
        prepared, problems = [], []
        for i, note in enumerate(notes):
            try:
                if not isinstance(note, dict):
                    raise InvalidInput(f"expected a dict of remember's arguments, "
                                       f"got {type(note).__name__}")
                note = dict(note)
                if request_id and not note.get("request_id"):
                    note["request_id"] = f"{request_id}/{i}"
                prepared.append((i, self._prepare_remember(**note)))
            except TypeError as exc:
                problems.append(f"note {i}: {exc}")
            except NbMemoryError as exc:
                problems.append(f"note {i}: {exc}")
        if problems:
            more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
            raise InvalidInput(f"{len(problems)} of {len(notes)} notes cannot be remembered, "
                               f"so none was: {'; '.join(problems[:3])}{more}")
        results: list[Any] = [None] * len(prepared)
        total = len(prepared)
        for start in range(0, total, BULK_CHUNK):
            chunk = [(i, p) for i, p in prepared[start:start + BULK_CHUNK]]
            with self._lock:
                self._remember_locked(chunk, {}, results)
            failed = [r for r in results[start:start + len(chunk)] if isinstance(r, Exception)]
            if failed:
                raise type(failed[0])(f"{failed[0]} ({start} of {total} notes were remembered "
                                      f"before this one; sending the same call again "
                                      f"writes only the rest)")
            if progress:
                progress(min(start + BULK_CHUNK, total), total)
        return results

    def _remember_locked(self, prepared: list[tuple[int, dict[str, Any]]],
                         refused: dict[int, str], results: list) -> None:
        """Dedupe by request id, check supersedes, write what is new (engine lock held)."""
        done = self.store.request_notes(
            [p["request_id"] for _, p in prepared if p["request_id"]] + list(refused.values()))
        for i, rid in refused.items():  # a retry of a write that succeeded before, e.g.,
            if rid in done:             # a file it is about went away
                results[i] = done[rid]
        fresh: list[tuple[int, dict[str, Any]]] = []
        first: dict[str, int] = {}
        replaced: set[int] = set()
        for i, p in prepared:
            rid, old = p["request_id"], p["supersedes"]
            if rid and rid in done:
                results[i] = done[rid]
                continue
            if rid and rid in first:
                results[i] = ("same as", first[rid])
                continue
            if old is not None:
                try:
                    self._require_status(old, "active", "supersede")
                    if old in replaced:
                        raise Conflict(f"Cannot supersede note #{old} twice at once.")
                except NbMemoryError as exc:
                    results[i] = exc
                    continue
                replaced.add(old)
            if rid:
                first[rid] = i
            fresh.append((i, p))
        if fresh:
            try:
                self._write_new_notes(fresh, results)
            except NbMemoryError as exc:
                for i, _ in fresh:
                    results[i] = exc
        # Earlier notes (retried requests) are read back; new ones are as written.
        earlier = self.store.get_notes([r for r in results if isinstance(r, int)])
        notes = list(earlier.values()) + [r for r in results if isinstance(r, Note)]
        notes = {n.id: n for n in self._with_stale(notes)}
        for i, r in enumerate(results):
            if isinstance(r, tuple):
                r = results[r[1]]
            if isinstance(r, Note):
                r = r.id
            results[i] = notes[r] if isinstance(r, int) else r

    def _write_new_notes(self, fresh: list[tuple[int, dict[str, Any]]], results: list) -> None:
        """Embed (one call), write (one transaction), index; ``results[i]`` gets each note.

        Embedding in a helper thread while the rows are inserted gained nothing here: at
        batch sizes like 4 the encode is bound by Python overhead under the GIL.
        """
        texts = list(dict.fromkeys(p["text"] for _, p in fresh))
        vectors = dict(zip(texts, self._embed(texts)))
        ndim = len(next(iter(vectors.values())))
        stored = self.stored_identity
        try:
            with self.store.transaction():
                note_ids, seqs = self.store.allocate(len(fresh))
                rows = [{**p, "note_id": note_id, "seq": seq, "at": utcnow()}
                        for (_, p), note_id, seq in zip(fresh, note_ids, seqs)]
                self.store.create_notes(rows)
                for row in rows:
                    self.store.insert_anchors(row["note_id"], list(enumerate(row["anchors"])),
                                              seq=row["seq"], at=row["at"])
                for row in rows:
                    if row["supersedes"] is not None:
                        self.store.append_event("superseded_by", row["supersedes"],
                                                actor=row["author"], at=row["at"],
                                                request_id=row["request_id"],
                                                data={"by": row["note_id"]})
                        self.store.set_status(row["supersedes"], "superseded")
                if not stored:
                    self._set_identity(f"{self.embedder.name}:{ndim}")
                self.store.put_embeddings(
                    self.embedder.name, [(p["content_hash"], vectors[p["text"]]) for _, p in fresh])
        except BaseException:
            self._identity = None  # set_meta may have been rolled back
            raise
        for row, (i, _) in zip(rows, fresh):
            self.lexical.add(row["note_id"], row["text"])
            self._priority[row["note_id"]] = row["priority"]
            if row["supersedes"] is not None:
                self._inactive.add(row["supersedes"])
            # The note as written (saves reading it back); _with_stale adds its anchors.
            results[i] = Note(row["note_id"], row["text"], row["kind"], row["priority"],
                              row["tags"], "active", 1, row["at"], row["at"], row["author"],
                              row["provenance"], supersedes=row["supersedes"])
        if self.vectors is None:
            self.vectors = self._new_vector_index(ndim)
            self.index_state = "new"
        self.vectors.add([row["note_id"] for row in rows],
                         np.stack([vectors[row["text"]] for row in rows]))
        self._after_write(len(rows))

    def _put_vector(self, digest: str, vector: np.ndarray) -> None:
        if not self.stored_identity:
            self._set_identity(f"{self.embedder.name}:{len(vector)}")
        self.store.put_embeddings(self.embedder.name, [(digest, vector)])

    def supersede(self, note_id: int, text: str, *, kind: str | None = None,
                  priority: str | None = None, tags: str | Iterable[str] | None = None,
                  author: str | None = None, provenance: Provenance | dict | None = None,
                  about: Sequence[Any] | None = None, request_id: str | None = None) -> Note:
        """Write ``text`` as a new note that replaces ``note_id`` (kept in its history);
        kind, priority and tags left out are the old note's."""
        old = self.get(note_id)
        return self.remember(text, supersedes=note_id, kind=kind or old.kind,
                             priority=priority or old.priority,
                             tags=old.tags if tags is None else tags, author=author,
                             provenance=provenance, about=about, request_id=request_id)

    def edit(self, note_id: int, *, text: str | None = None, kind: str | None = None,
             priority: str | None = None, tags: str | Iterable[str] | None = None,
             author: str | None = None, request_id: str | None = None) -> Note:
        """Write a new version of a note; the old version stays in its history."""
        with self._lock:
            old = self._require_status(note_id, "active", "edit")
            new_text = check_text(text) if text is not None else old.text
            new_kind = check_kind(kind) if kind is not None else old.kind
            new_priority = check_priority(priority) if priority is not None else old.priority
            new_tags = normalise_tags(tags) if tags is not None else old.tags
            changed = [name for name, a, b in (("text", new_text, old.text),
                                               ("kind", new_kind, old.kind),
                                               ("priority", new_priority, old.priority),
                                               ("tags", new_tags, old.tags)) if a != b]
            if not changed:
                return old
            if request_id and self.store.request_note(request_id) is not None:
                return self.get(note_id)
            digest = content_hash(new_text)
            vector = None
            if not self.store.has_embedding(self.embedder.name, digest):
                vector = self._embed([new_text])[0]
            author = author or default_author()
            anchors = []
            if "text" in changed:  # the paths the new text mentions replace the old text's
                anchors = self.checker.reanchor_text(
                    self.store.anchors([note_id]).get(note_id, []), new_text, old.provenance,
                    self.store.next_anchor_position(note_id))
            at = utcnow()
            with self.store.transaction():
                seq = self.store.append_event("edited", note_id, actor=author, at=at,
                                              request_id=request_id, data={"changed": changed})
                self.store.insert_version(note_id, text=new_text, content_hash=digest,
                                          kind=new_kind, priority=new_priority, tags=new_tags,
                                          author=author, provenance=old.provenance, at=at, seq=seq)
                self.store.insert_anchors(note_id, anchors, seq=seq, at=at)
                if vector is not None:
                    self._put_vector(digest, vector)
            self._priority[note_id] = new_priority
            if "text" in changed:
                if vector is None:
                    vector = self.store.vectors(self.embedder.name, [note_id])[1][0]
                self._index_note(note_id, new_text, vector)
            self._after_write()
            return self.get(note_id)

    # -- forget -------------------------------------------------------------------------

    def _require_status(self, note_id: int, status: str, action: str) -> Note:
        note = self.store.get_notes([note_id]).get(note_id)
        if note is None:
            raise NotFound(_no_note(note_id))
        if note.status != status:
            hint, then = {"revoked": ("reinstate it first with {0}",
                                      Command("reinstate", (note_id,))),
                          "superseded": ("change the note that superseded it instead", None),
                          "purged": ("it was purged and cannot come back", None),
                          "refuted": ("reopen it first with {0}", Command("reopen", (note_id,))),
                          "active": ("it is active", None)}[note.status]
            raise Conflict(f"Cannot {action} note #{note_id}: it is {note.status}; {hint}.",
                           *([then] if then else []))
        return note

    def forget(self, note_ids: int | Iterable[int], *, actor: str | None = None,
               request_id: str | None = None) -> list[Note]:
        """Revoke notes: hidden from recall, kept in history, reversible with reinstate."""
        ids = [int(note_ids)] if isinstance(note_ids, (int, np.integer)) else [int(i) for i in note_ids]
        if not ids:
            raise InvalidInput("Give the id of the note to forget, e.g. {0}",
                               Command("forget", (12,)))
        with self._lock:
            if request_id and self.store.request_note(request_id) is not None:
                return list(self.store.get_notes(ids).values())
            for note_id in ids:
                self._require_status(note_id, "active", "forget")
            at = utcnow()
            actor = actor or default_author()
            with self.store.transaction():
                for note_id in ids:
                    self.store.append_event("revoked", note_id, actor=actor, at=at,
                                            request_id=request_id)
                    self.store.set_status(note_id, "revoked")
            self._inactive.update(ids)
            self._after_write()
            notes = self.store.get_notes(ids)
            return [notes[i] for i in ids]

    def _done_before(self, request_id: str | None, note_id: int) -> Note | None:
        """The note as it is now when ``request_id`` was already applied (a resent write)."""
        if request_id and self.store.request_event(request_id) is not None:
            return self.get(note_id)
        return None

    def reinstate(self, note_id: int, *, actor: str | None = None,
                  request_id: str | None = None) -> Note:
        with self._lock:
            if (done := self._done_before(request_id, note_id)) is not None:
                return done
            self._require_status(note_id, "revoked", "reinstate")
            at = utcnow()
            with self.store.transaction():
                self.store.append_event("reinstated", note_id, actor=actor or default_author(),
                                        at=at, request_id=request_id)
                self.store.set_status(note_id, "active")
            self._inactive.discard(note_id)
            self._after_write()
            return self.get(note_id)

    def purge(self, note_id: int, *, actor: str | None = None,
              request_id: str | None = None) -> Note:
        """Erase a note's text and vectors for good. The journal keeps that it happened."""
        with self._lock:
            if (done := self._done_before(request_id, note_id)) is not None:
                return done
            note = self.store.get_notes([note_id]).get(note_id)
            if note is None:
                raise NotFound(_no_note(note_id))
            if note.status == "purged":
                raise Conflict(f"Note #{note_id} is already purged.")
            with self.store.transaction():
                self.store.append_event("purged", note_id, actor=actor or default_author(),
                                        at=utcnow(), request_id=request_id)
                self.store.purge_text(note_id)
                self.store.purge_anchors(note_id)
                self.store.set_status(note_id, "purged")
            self.lexical.remove(note_id)
            if self.vectors is not None:
                self.vectors.remove([note_id])
            self._inactive.discard(note_id)
            self._priority.pop(note_id, None)
            self._past_views.clear()
            self._save_vectors(force=True)  # the old index file still holds the vector
            self.store.compact()
            return self.get(note_id)

    # -- questions and hypotheses ---------------------------------------------------------

    def confirm(self, note_id: int, reason: str = "", *, actor: str | None = None,
                request_id: str | None = None) -> Note:
        """Mark a question or hypothesis as confirmed; it stays active."""
        return self._resolve(note_id, "confirmed", reason, actor, request_id)

    def refute(self, note_id: int, reason: str, *, actor: str | None = None,
               request_id: str | None = None) -> Note:
        """Mark a hypothesis as refuted: hidden from recall except as "previously believed"."""
        if not (reason or "").strip():
            raise InvalidInput("Say why it is refuted: {0}", Command(
                "refute", (note_id, "the nulls come from the join, not the source")))
        return self._resolve(note_id, "refuted", reason, actor, request_id)

    def reopen(self, note_id: int, *, actor: str | None = None,
               request_id: str | None = None) -> Note:
        """Undo a confirm or refute: the question is open again."""
        with self._lock:
            if (done := self._done_before(request_id, note_id)) is not None:
                return done
            note = self.get(note_id)
            if note.resolution is None:
                raise Conflict(f"Note #{note_id} is not confirmed or refuted; nothing to reopen.")
            with self.store.transaction():
                self.store.append_event("reopened", note_id, actor=actor or default_author(),
                                        at=utcnow(), request_id=request_id)
                self.store.set_status(note_id, "active")
                self.store.set_resolution(note_id, None, None)
            self._inactive.discard(note_id)
            self._after_write()
            return self.get(note_id)

    def _resolve(self, note_id: int, outcome: str, reason: str, actor: str | None,
                 request_id: str | None = None) -> Note:
        with self._lock:
            if (done := self._done_before(request_id, note_id)) is not None:
                return done
            note = self._require_status(note_id, "active",
                                        {"confirmed": "confirm", "refuted": "refute"}[outcome])
            if note.resolution == outcome:
                raise Conflict(f"Note #{note_id} is already {outcome}.")
            data = {"reason": reason.strip()} if reason and reason.strip() else None
            with self.store.transaction():
                self.store.append_event(outcome, note_id, actor=actor or default_author(),
                                        at=utcnow(), request_id=request_id, data=data)
                self.store.set_resolution(note_id, outcome, data["reason"] if data else None)
                if outcome == "refuted":
                    self.store.set_status(note_id, "refuted")
            if outcome == "refuted":
                self._inactive.add(note_id)
            self._after_write()
            return self.get(note_id)

    def open_questions(self, *, limit: int = 50) -> list[Note]:
        """Active questions that are neither confirmed nor refuted, newest first."""
        with self._lock:
            notes = self.store.list_notes(Filters(kinds=("question",)), limit=2**62)[0]
            return self._with_stale([n for n in notes if n.resolution is None][:limit])

    # -- read ---------------------------------------------------------------------------

    def get(self, note_id: int) -> Note:
        with self._lock:
            note = self.store.get_notes([int(note_id)]).get(int(note_id))
            if note is None:
                raise NotFound(_no_note(note_id))
            return self._with_stale([note])[0]

    def notes(self, *, tags=None, kind=None, priority=None, since: datetime | None = None,
              until: datetime | None = None, status: str | Sequence[str] = "active",
              offset: int = 0, limit: int = 50, order: str = "newest",
              stale: bool | None = None, variables: dict | None = None) -> Page:
        """A page of notes; ``stale`` True keeps only stale notes, False only fresh ones
        (before paging, so ``total`` counts what the filter keeps)."""
        if limit < 1 or offset < 0:
            raise InvalidInput("limit must be at least 1 and offset at least 0")
        if order not in ("newest", "oldest", "priority"):
            raise InvalidInput(f"Unknown order {order!r}; use newest, oldest or priority")
        statuses = (status,) if isinstance(status, str) else tuple(status)
        filters = filters_for(tags=tags, kind=kind, priority=priority, since=since,
                              until=until, statuses=statuses)
        with self._lock:
            if stale is not None:
                kept = self._by_staleness(self.store.note_ids(filters), stale, variables)
                filters = replace(filters, ids=tuple(kept.tolist()))
            notes, total = self.store.list_notes(filters, offset=offset, limit=limit, order=order)
            return Page(self._with_stale(notes, variables), total, offset, limit)

    def history(self, note_id: int) -> list[Event]:
        with self._lock:
            self.get(note_id)
            return self.store.events(note_id)

    def chain(self, note_id: int) -> list[Note]:
        """The supersede chain through ``note_id``, oldest first."""
        with self._lock:
            note = self.get(note_id)
            older = []
            while note.supersedes is not None:
                note = self.get(note.supersedes)
                older.append(note)
            chain = older[::-1] + [self.get(note_id)]
            while True:
                newer = self.store.superseded_by(chain[-1].id)
                if newer is None:
                    return chain
                chain.append(self.get(newer))

    def _with_stale(self, notes: list[Note], variables: dict | None = None) -> list[Note]:
        """Attach anchors and stale reasons (superseded, and each anchor's; see stale.py)."""
        anchors = self.store.anchors([n.id for n in notes])
        out = []
        for note in notes:
            reasons = self._superseded(note)
            mine = tuple(a for _, a in anchors.get(note.id, ()))
            reasons += self.checker.reasons(mine, variables)
            if reasons or mine:
                note = replace(note, stale=tuple(reasons), anchors=mine)
            out.append(note)
        return out

    def _superseded(self, note: Note, upto: int | None = None) -> list[StaleReason]:
        """``superseded #N`` for a superseded note (by the newest replacement up to ``upto``)."""
        if note.status != "superseded":
            return []
        by = next((e.data.get("by") for e in reversed(self.store.events(note.id))
                   if e.type == "superseded_by" and (upto is None or e.seq <= upto)), None)
        return [StaleReason("superseded", f"#{by}" if by else "")]

    # -- recall -------------------------------------------------------------------------

    def recall(self, query: str, *, k: int = 5, tags=None, kind=None, priority=None,
               since: datetime | None = None, until: datetime | None = None,
               explain: bool = False, min_score: float | None = None,
               as_of: str | None = None, mode: str = "hybrid", stale: bool | None = None,
               variables: dict | None = None, log: bool = True) -> Hits:
        """Hybrid recall: BM25 and dense cosine, fused; filters apply before ranking.

        ``as_of`` names a snapshot: search the notes as they were then. ``mode``
        "lexical" or "dense" ranks by one channel only (for evaluation). ``stale`` True
        keeps only stale notes, False only fresh ones; ``variables``: the calling
        kernel's variable fingerprints (see stale.py). ``log`` False keeps the recall out
        of the statistics (a recall nobody typed, such as ambient recall's).
        """
        if not isinstance(query, str) or not query.strip():
            raise InvalidInput("The query is empty; e.g. {0}",
                               Command("recall", ("where is the lock taken",)))
        if k < 1:
            raise InvalidInput(f"k must be at least 1 (got {k})")
        if mode not in MODES:
            raise InvalidInput(f"Unknown mode {mode!r}; use one of: {', '.join(MODES)}")
        query = query.strip()
        threshold = self.settings.min_score if min_score is None else min_score
        filters = filters_for(tags=tags, kind=kind, priority=priority, since=since, until=until)
        with self._lock:
            self._check_embedder()
            view = self._live_view() if as_of is None else self._past_view(as_of)
            scored = []
            if len(view.vectors):
                candidates = view.candidates(filters) if filters.narrows else None
                if stale is not None:
                    candidates = self._by_staleness(
                        view.candidates(filters) if candidates is None else candidates,
                        stale, variables)
                qvec = self.embedder.encode([query])[0] if mode != "lexical" else None
                scored = rank(query, qvec, view.lexical, view.vectors, candidates=candidates,
                              pool=max(10 * k, 50), exact_below=self.settings.exact_below,
                              skip=len(view.inactive), mode=mode)
                priority_of = view.priorities([r.note_id for r in scored])
                scored = sorted((r._replace(score=r.score + PRIORITY_BONUS[priority_of[r.note_id]])
                                 for r in scored), key=lambda r: (-r.score, r.note_id))
            hits, previously, below = [], [], 0
            for row in scored:
                if row.note_id in view.inactive:
                    if row.score >= threshold and len(previously) < 3 and len(hits) < k:
                        previously.append(row)
                    continue
                if len(hits) >= k:
                    break
                if row.score < threshold:
                    below += 1
                    continue
                hits.append(row)
            notes = view.get_notes([r.note_id for r in hits + previously])
            found = list(notes.values())
            found = (self._with_stale(found, variables) if as_of is None
                     else self._as_sealed(found, self._snapshot(as_of)))
            by_id = {n.id: n for n in found}

            def make(rows):
                return [Hit(by_id[r.note_id], round(r.score, 4),
                            round(r.lexical, 4) if explain else None,
                            round(r.dense, 4) if explain else None) for r in rows]

            result = Hits(make(hits), query=query, filtered_out=below,
                          previously=tuple(make(previously)), explain=explain)
            if log:
                # Per channel: candidates it matched at all (lexical) or would keep on its
                # own score (dense: every candidate has a cosine, so count those passing).
                self._recall_log.append(dict(at=utcnow(), query=query, k=k, returned=len(result),
                                             lexical=sum(1 for r in scored if r.lexical > 0),
                                             dense=sum(1 for r in scored if r.dense >= threshold),
                                             filtered_out=below))
            if len(self._recall_log) >= 100:
                self._flush_recall_log()
            return result

    def _flush_recall_log(self) -> None:
        """Recall statistics are written in batches: one commit per recall cost milliseconds."""
        if self._recall_log:
            self.store.log_recalls(self._recall_log)
            self._recall_log = []

    def recall_terms(self, terms: Sequence[str], *, k: int = 5, scope: str | None = None,
                     cwd: str | None = None) -> Hits:
        """Notes about ``terms`` (variables, columns, paths alive in a kernel).

        Notes anchored to one of them come first with score 1.0: a variable of that name
        (in ``scope``, the notebook, when given) or a file, directory or glob a term names
        (relative terms are read from ``cwd``). Then notes whose text names the terms,
        ranked by BM25 over them, the best at 1.0 too.
        """
        terms = [t for t in terms if t and t.strip()]
        if not terms:
            raise InvalidInput("Nothing to recall about: define some variables, or give a query")
        query = " ".join(terms)
        with self._lock:
            anchored = self._anchored_to(terms, scope, cwd)
            ids, scores = self.lexical.score(query, self.store.note_ids(Filters()), limit=k)
            top = float(scores[0]) if len(scores) else 1.0
            ranked = {i: 1.0 for i in anchored}
            for i, score in zip(ids.tolist(), scores):
                ranked.setdefault(int(i), round(float(score) / top, 4))
            order = list(ranked)[:k]
            notes = self._with_stale(list(self.store.get_notes(order).values()))
            by_id = {n.id: n for n in notes}
            hits = [Hit(by_id[i], ranked[i]) for i in order if i in by_id]
            return Hits(hits, query=f"the namespace ({len(terms)} names)")

    def _anchored_to(self, terms: Sequence[str], scope: str | None, cwd: str | None) -> list[int]:
        """Active notes with an anchor on one of ``terms``, newest first."""
        about = self._about()
        names = set(terms)
        found: set[int] = set()
        for (anchor_scope, name), ids in about.variables.items():
            if name in names and (scope is None or anchor_scope == scope):
                found |= ids
        root = self.workspace
        wanted = {os.path.normpath(os.path.join(cwd or str(root), t)) for t in terms
                  if "/" in t or "." in t}
        for target, ids in about.paths.items():
            if str(absolute(target, root)) in wanted:
                found |= ids
        for pattern, ids in about.globs.items():
            if any(fnmatch.fnmatch(w, str(absolute(pattern, root))) for w in wanted):
                found |= ids
        return sorted(found - self._inactive, reverse=True)

    def _live_view(self) -> _LiveView:
        return _LiveView(self.store, self.lexical, self.vectors or _NO_VECTORS, self._inactive,
                         self._priority)

    def _past_view(self, name: str) -> PastView:
        snapshot = self._snapshot(name)
        view = self._past_views.get(snapshot.seq)
        if view is None:
            view = PastView.build(self.store, snapshot.seq, self.embedder.name)
            self._past_views = {snapshot.seq: view}  # keep one: views can be large
        return view

    def similar(self, note_id: int, *, k: int = 3, min_similarity: float = 0.5) -> list[Hit]:
        """Active notes closest to ``note_id`` (shown after remember; never merged)."""
        with self._lock:
            self.get(note_id)
            if self.vectors is None or note_id not in self.vectors:
                return []
            vector = self.vectors.get(np.array([note_id]))[0]
            keys, sims = self.vectors.search(vector, k + 1 + len(self._inactive),
                                             exact=len(self.vectors) <= self.settings.exact_below)
            rows = [(int(i), float(s)) for i, s in zip(keys, sims)
                    if i != note_id and i not in self._inactive and s >= min_similarity][:k]
            notes = self.store.get_notes([i for i, _ in rows])
            return [Hit(notes[i], round(s, 4), dense=round(s, 4)) for i, s in rows]

    # -- snapshots ----------------------------------------------------------------------

    def snapshot(self, name: str, *, message: str = "", author: str | None = None,
                 request_id: str | None = None, variables: dict | None = None) -> Snapshot:
        """Seal the current state under ``name``: a journal position plus the stale flags
        (variable anchors judged by the calling kernel's ``variables``, see stale.py).

        A repeated ``request_id`` returns the snapshot it sealed."""
        name = (name or "").strip()
        if not name or any(c.isspace() for c in name):
            raise InvalidInput("Give the snapshot a name without spaces, e.g. {0}",
                               Command("snapshot", ("before-refactor",)))
        with self._lock:
            done = self.store.request_event(request_id) if request_id else None
            if done is not None:
                return self.store.snapshots(done.data["name"])[0]
            if self.store.snapshots(name):
                raise Conflict(f"A snapshot named {name!r} already exists; pick another name "
                               "(list them with {0}).", Command("snapshots"))
            at = utcnow()
            author = author or default_author()
            stale = {str(note_id): [r.to_dict() for r in reasons]
                     for note_id, reasons in self._stale_now(variables).items()}
            with self.store.transaction():
                seq = self.store.append_event("snapshot", None, actor=author, at=at,
                                              request_id=request_id, data={"name": name})
                self.store.add_snapshot(name, seq=seq, at=at, message=message, author=author,
                                        stale=stale)
            return self.store.snapshots(name)[0]

    def snapshots(self) -> list[Snapshot]:
        with self._lock:
            return self.store.snapshots()

    def _snapshot(self, name: str) -> Snapshot:
        found = self.store.snapshots(name)
        if not found:
            known = ", ".join(s.name for s in self.store.snapshots()[-5:]) or "none yet"
            raise NotFound(f"No snapshot named {name!r} (recent: {known}). "
                           "List them with {0}.", Command("snapshots"))
        return found[0]

    def _stale_now(self, variables: dict | None = None) -> dict[int, list[StaleReason]]:
        """Stale reasons of every active note, as of now."""
        notes = self.store.list_notes(Filters(), limit=2**62)[0]
        return {n.id: list(n.stale) for n in self._with_stale(notes, variables) if n.stale}

    def _as_sealed(self, notes: list[Note], snapshot: Snapshot) -> list[Note]:
        """Notes with the anchors and stale flags they had when ``snapshot`` was sealed."""
        stale = self._stale_at(snapshot)
        anchors = self.store.anchors_at([n.id for n in notes], snapshot.seq)
        return [replace(n, stale=tuple(self._superseded(n, snapshot.seq) + stale.get(n.id, [])),
                         anchors=tuple(a for _, a in anchors.get(n.id, ()))) for n in notes]

    def _stale_at(self, snapshot: Snapshot) -> dict[int, list[StaleReason]]:
        return {int(i): [StaleReason.from_dict(r) for r in reasons]
                for i, reasons in self.store.snapshot_stale(snapshot.name).items()}

    def snapshot_diff(self, a: str, b: str | None = None, *,
                      variables: dict | None = None) -> SnapshotDiff:
        """Notes added, edited, superseded, revoked, reinstated, purged or gone stale from
        snapshot ``a`` to snapshot ``b`` (default: now, judged with ``variables``)."""
        with self._lock:
            first = self._snapshot(a)
            before = {n.id: n for n, _ in self.store.notes_at(first.seq)}
            if b is None:
                b_name, b_seq = "now", self.store.position()
                stale_after = self._stale_now(variables)
            else:
                second = self._snapshot(b)
                b_name, b_seq = second.name, second.seq
                stale_after = self._stale_at(second)
            after = {n.id: n for n, _ in self.store.notes_at(b_seq)}
            changes = diff(before, after, self._stale_at(first), stale_after)
            return SnapshotDiff(first.name, b_name, first.seq, b_seq, tuple(changes))

    # -- staleness ----------------------------------------------------------------------

    def _stale_ids(self, variables: dict | None) -> set[int]:
        """Active notes with at least one stale anchor (only anchored notes can be)."""
        anchors = self.store.anchors(self.store.anchored_note_ids())
        return {note_id for note_id, rows in anchors.items()
                if self.checker.reasons((a for _, a in rows), variables)}

    def _by_staleness(self, candidates: np.ndarray, stale: bool, variables) -> np.ndarray:
        marked = np.isin(candidates, np.fromiter(self._stale_ids(variables), np.int64))
        return candidates[marked] if stale else candidates[~marked]

    def stale(self, *, offset: int = 0, limit: int = 50, variables: dict | None = None) -> Page:
        """Active notes that are stale, with their reasons, most recently changed first."""
        if limit < 1 or offset < 0:
            raise InvalidInput("limit must be at least 1 and offset at least 0")
        with self._lock:
            ids = sorted(self._stale_ids(variables))
            notes = self.store.get_notes(ids)
            ordered = sorted(notes.values(), key=lambda n: (n.updated_at, n.id), reverse=True)
            return Page(self._with_stale(ordered[offset:offset + limit], variables),
                        len(ordered), offset, limit)

    def verify(self, note_id: int, *, actor: str | None = None, variables: dict | None = None,
               request_id: str | None = None) -> Note:
        """Re-take the fingerprints of a note's anchors after checking it still holds.

        The old fingerprints stay in the store; a ``verified`` event records what was
        re-taken, what was stale before, and which anchors could not be re-taken here
        (a variable this kernel does not have).
        """
        with self._lock:
            if request_id and self.store.request_note(request_id) is not None:
                return self._with_stale([self.store.get_notes([note_id])[note_id]], variables)[0]
            self._require_status(note_id, "active", "verify")
            current = self.store.anchors([note_id]).get(note_id, [])
            before = self.checker.reasons((a for _, a in current), variables)
            retaken, kept = [], []
            for position, anchor in current:
                new = self.checker.retake(anchor, variables)
                (retaken.append((position, new)) if new is not None else kept.append(anchor.target))
            at = utcnow()
            data = {"retaken": len(retaken), "cleared": [str(r) for r in before]}
            if kept:
                data["kept"] = kept
            with self.store.transaction():
                seq = self.store.append_event("verified", note_id, actor=actor or default_author(),
                                              at=at, request_id=request_id, data=data)
                self.store.insert_anchors(note_id, retaken, seq=seq, at=at)
            note = self.store.get_notes([note_id])[note_id]
            return self._with_stale([note], variables)[0]

    def variable_anchors(self, scope: str = "") -> list[str]:
        """Variables active notes are anchored to in ``scope`` (the kernel fingerprints these)."""
        with self._lock:
            return self.store.variable_targets(scope or "")

    # -- ambient recall -----------------------------------------------------------------

    def _about(self) -> _About:
        """Targets of active notes' anchors and text, rebuilt after any write."""
        commits = self.store.commits
        if self._about_cache is not None and self._about_cache.commits == commits:
            return self._about_cache
        paths: dict[str, set[int]] = {}
        globs: dict[str, set[int]] = {}
        variables: dict[tuple[str, str], set[int]] = {}
        for note_id, rows in self.store.anchors(self.store.anchored_note_ids()).items():
            for _, anchor in rows:
                if anchor.kind in ("file", "data", "dir"):
                    paths.setdefault(anchor.target, set()).add(note_id)
                elif anchor.kind == "glob":
                    globs.setdefault(anchor.target, set()).add(note_id)
                elif anchor.kind == "variable":
                    key = (anchor.fingerprint.get("scope", ""), anchor.target)
                    variables.setdefault(key, set()).add(note_id)
        inactive = self._inactive
        terms = frozenset(t for t in self.lexical.terms() if is_file_term(t)
                          and any(i not in inactive for i in self.lexical.docs_with(t)))
        gotchas = len(self.store.note_ids(Filters(kinds=("gotcha",))))
        self._about_cache = _About(commits, self.store.position(), paths, globs, variables,
                                   terms, gotchas)
        return self._about_cache

    def anchor_targets(self, scope: str = "") -> dict[str, Any]:
        """What a kernel needs to tell by itself whether a cell concerns any note.

        ``paths``: absolute paths of the files and directories active notes are anchored
        to; ``globs``: absolute glob patterns; ``terms``: file-like terms of note text
        (see :func:`anchors.file_terms`); ``variables``: names anchored in ``scope``;
        ``gotchas``: how many active gotcha notes exist; ``position``: the journal
        position all this reflects.
        """
        with self._lock:
            about = self._about()
            root = self.workspace
            return {"position": about.position, "workspace": str(root),
                    "paths": sorted(str(absolute(t, root)) for t in about.paths),
                    "globs": sorted(str(absolute(g, root)) for g in about.globs),
                    "terms": sorted(about.terms),
                    "variables": sorted(name for s, name in about.variables if s == (scope or "")),
                    "gotchas": about.gotchas}

    def notes_about(self, *, paths: Sequence[str] = (), cwd: str | None = None,
                    variables: dict | None = None, error: str | None = None,
                    k: int = 5) -> dict[str, Any]:
        """Active notes about what one cell touched, in one call.

        ``paths``: absolute paths the cell read; ``cwd``: the kernel's working directory
        (a note may name a file relative to it); ``variables``: ``{"scope": notebook,
        "values": {name: fingerprint}}`` of the anchored variables the cell used;
        ``error``: ``"KeyError: 'amount'"``, recalled among gotcha notes with both
        channels' scores (the kernel's gate decides whether that is worth showing).

        Returns ``{"position", "paths": {target: Hits}, "variables": {name: Hits},
        "error": Hits or None, "agreement": [[cosine of gotchas i and j]]}`` (rows in hit
        order; empty for fewer than two). Notes anchored to a path score 1.0, notes that
        only name it in their text 0.5; each Hits keeps at most ``k`` notes
        (``filtered_out`` counts the rest). While the configured model differs from the
        store's, errors are not matched (paths and variables still are).
        """
        if k < 1:
            raise InvalidInput(f"k must be at least 1 (got {k})")
        if isinstance(paths, str) or not all(isinstance(p, str) for p in paths):
            raise InvalidInput("paths must be a list of absolute path strings")
        roots = [self.workspace] + ([Path(cwd)] if cwd else [])
        with self._lock:
            about = self._about()
            found: dict[str, dict[int, float]] = {}
            for path in dict.fromkeys(paths):
                location = Path(path)
                target = display_path(location, self.workspace)
                ids = {i: 0.5 for term in file_terms(location, roots)
                       for i in self.lexical.docs_with(term) if i not in self._inactive}
                ids.update(dict.fromkeys(about.paths.get(target, ()), 1.0))
                for pattern, matching in about.globs.items():
                    if fnmatch.fnmatchcase(target, pattern):
                        ids.update(dict.fromkeys(matching, 1.0))
                if ids:
                    found[target] = ids
            scope = (variables or {}).get("scope", "")
            by_name = {}
            for name in (variables or {}).get("values") or {}:
                ids = about.variables.get((scope, name))
                if ids:
                    by_name[name] = dict.fromkeys(ids, 1.0)
            wanted = {i for ids in (*found.values(), *by_name.values()) for i in ids}
            notes = {n.id: n for n in self._with_stale(
                list(self.store.get_notes(sorted(wanted)).values()), variables)}

            def hits(scores: dict[int, float], what: str) -> Hits:
                order = sorted((i for i in scores if i in notes), key=lambda i: (
                    -scores[i], -PRIORITY_BONUS[notes[i].priority], -i))
                return Hits([Hit(notes[i], scores[i]) for i in order[:k]], query=what,
                            filtered_out=max(0, len(order) - k))

            gotchas, agreement = None, []
            if error and error.strip() and about.gotchas and not self.mismatch:
                gotchas = self.recall(error.strip()[:1000], k=k, kind="gotcha", explain=True,
                                      min_score=0.0, variables=variables, log=False)
                if len(gotchas) > 1 and self.vectors is not None:
                    matrix = self.vectors.get(np.array([h.note.id for h in gotchas]))
                    agreement = np.round(matrix @ matrix.T, 4).tolist()
            return {"position": about.position,
                    "paths": {t: hits(s, t) for t, s in found.items()},
                    "variables": {n: hits(s, n) for n, s in by_name.items()},
                    "error": gotchas, "agreement": agreement}

    # -- models -------------------------------------------------------------------------

    def reembed(self, progress: Progress | None = None, *,
                request_id: str | None = None) -> dict[str, Any]:
        """Embed every note with the configured model and switch the store to it.

        Doing it again changes nothing; a repeated ``request_id`` returns the first answer
        (``embedded`` counts what that one embedded)."""
        with self._lock:
            if request_id and (done := self.store.request_result(request_id)) is not None:
                return done
            embedded = self._embed_missing(progress)
            previous = self.stored_identity
            self._set_identity(self.embedder.identity)
            self._open_indexes(None, rebuild=True)
            self.index_state = "rebuilt (re-embedded)"
            result = {"from": previous, "to": self.embedder.identity, "embedded": embedded}
            if request_id:
                self.store.record_request(request_id, result)
            return result

    # -- export and import --------------------------------------------------------------

    def export_jsonl(self, path: str, *, progress: Progress | None = None) -> dict[str, int]:
        """Write the whole store, losslessly, to a JSON Lines file at ``path``."""
        with self._lock:
            return exchange.export_jsonl(self.store, path, model=self.stored_identity,
                                         progress=progress)

    def import_jsonl(self, path: str, *, on_conflict: str = "skip", actor: str | None = None,
                     progress: Progress | None = None,
                     request_id: str | None = None) -> dict[str, int]:
        """Import an export. Into an empty store it restores exactly; otherwise notes are
        matched by uid and ``on_conflict`` (skip, replace, keep-both) says what wins.

        A repeated ``request_id`` returns the first import's summary (the summary commits
        with the import) after embedding whatever that one had not embedded yet."""
        if on_conflict not in exchange.POLICIES:
            raise InvalidInput(f"Unknown conflict policy {on_conflict!r}; use one of: "
                               f"{', '.join(exchange.POLICIES)}")
        with self._lock:
            if (done := self._import_done(request_id, progress)) is not None:
                return done
        export = exchange.read_export(path)  # outside the lock: reads and checks the file
        with self._lock:
            if (done := self._import_done(request_id, progress)) is not None:
                return done
            self._check_embedder()
            empty = self.store.position() == 0
            self._identity = None  # the import may set it, inside a transaction that may fail
            try:
                with self.store.transaction():
                    if empty:
                        summary = exchange.restore(self.store, export, progress)
                        summary = {"restored": summary.get("notes", 0)}
                        model = export.header.get("model")
                        if model and model_name(model) == self.embedder.name:
                            self._set_identity(model)
                    else:
                        summary = exchange.merge(self.store, export, policy=on_conflict,
                                                 actor=actor or default_author(), now=utcnow())
                    if request_id:
                        self.store.record_request(request_id, summary)
            except (duckdb.Error, KeyError, TypeError, ValueError) as exc:
                # A well-framed file with a row the schema refuses (edited by hand, or
                # damaged inside a line): the transaction rolled back every row.
                raise InvalidInput(
                    f"{path} has a row this store cannot take ({type(exc).__name__}: {exc}). "
                    "The file is damaged or was edited by hand; export it again. "
                    "Nothing was imported.") from exc
            embedded = self._embed_missing(progress)
            self._open_indexes(progress, rebuild=True)
            result = {**summary, "embedded": embedded}
            if request_id:
                self.store.record_request(request_id, result)
            return result

    def _import_done(self, request_id: str | None,
                     progress: Progress | None) -> dict[str, int] | None:
        """The summary of an import ``request_id`` already committed, or None."""
        done = self.store.request_result(request_id) if request_id else None
        if done is not None and "embedded" not in done:  # it stopped before embedding
            embedded = self._embed_missing(progress)
            self._open_indexes(progress, rebuild=True)
            done = {**done, "embedded": embedded}
            self.store.record_request(request_id, done)
        return done

    def _embed_missing(self, progress: Progress | None = None) -> int:
        """Embed every kept text that has no vector for the configured model."""
        todo = self.store.texts_missing_embedding(self.embedder.name)
        for start in range(0, len(todo), BULK_CHUNK):
            chunk = todo[start:start + BULK_CHUNK]
            vectors = self.embedder.encode([t for _, t in chunk])
            with self.store.transaction():
                self.store.put_embeddings(self.embedder.name,
                                          [(h, v) for (h, _), v in zip(chunk, vectors)])
            if progress:
                progress(min(start + BULK_CHUNK, len(todo)), len(todo))
        if todo and not self.stored_identity:
            self._set_identity(f"{self.embedder.name}:{len(vectors[0])}")
        return len(todo)

    def export_markdown(self, directory: str, *, by: str = "tag") -> list[str]:
        """Readable Markdown pages of the active notes, one per tag (or kind)."""
        with self._lock:
            notes = self._with_stale(self.store.list_notes(Filters(), limit=2**62)[0])
            return [str(p) for p in exchange.export_markdown(notes, directory, by=by)]

    def reindex(self, progress: Progress | None = None, *,
                request_id: str | None = None) -> dict[str, Any]:
        """Rebuild both indexes from DuckDB; re-embed first if the configured model changed.

        A repeated ``request_id`` returns the first answer without rebuilding again."""
        with self._lock:
            if request_id and (done := self.store.request_result(request_id)) is not None:
                return done
            if self.mismatch:
                result = {"action": "reembedded", **self.reembed(progress)}
            else:
                self._open_indexes(progress, rebuild=True)
                self.index_state = "rebuilt (reindex)"
                result = {"action": "rebuilt", "model": self.stored_identity,
                          "vectors": len(self.vectors) if self.vectors is not None else 0,
                          "lexical_docs": len(self.lexical)}
            if request_id:
                self.store.record_request(request_id, result)
            return result

    # -- status -------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        with self._lock:
            self._flush_recall_log()
            counts = self.store.counts()
            stats = self.store.recall_stats()
            return {
                "store": str(self.directory),
                "notes": counts.get("active", 0),
                "by_status": counts,
                "snapshots": len(self.store.snapshots()),
                "model": self.stored_identity or self.embedder.name,
                "configured_model": self.embedder.name,
                "model_loaded": bool(getattr(self.embedder, "loaded", True)),
                "mismatch": bool(self.mismatch),
                "index": self.index_state,
                "vectors": len(self.vectors) if self.vectors is not None else 0,
                "lexical_docs": len(self.lexical),
                "journal_position": self.store.position(),
                "schema_version": SCHEMA_VERSION,
                "version": __version__,
                "pid": os.getpid(),
                "uptime_s": round(time.time() - self.started, 1),
                **stats,
            }
