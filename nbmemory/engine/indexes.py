"""The projections of the journal the engine keeps in files: the keyword index, the note
cards and the vector index (each note's status and priority: :mod:`.state`).

Each applies a committed :class:`~.journal.Change` and can be rebuilt from the store;
the keyword and vector indexes are also files, which record the journal position (and
the embedder) they reflect, are caught up from the journal on open and rebuilt when they
cannot be.
"""

from __future__ import annotations

import threading
import zlib
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np

from .. import __version__
from ..cards import BLOCK, Cards, CardsFileError
from ..config import Settings
from ..embed import model_name
from ..events import INDEXED
from ..lexical import LexicalIndex, LexicalIndexError
from ..errors import StoreDamaged
from ..models import Note
from ..store import DB_FILENAME, SCHEMA_VERSION, VECTOR_FILENAME, Filters, Store
from ..store.rows import as_stored
from ..wording import counted
from ..vectors import VectorIndex, VectorIndexError
from .journal import Change

Progress = Callable[[int, int], None]
KEYWORDS_FILENAME = "keywords.index"
# What a damaged index file raises beyond its own error (a header of another shape, a field
# of another type): it is rebuilt from the store, as a missing one is.
_ODD_FILE = (ValueError, TypeError, AttributeError, KeyError, IndexError, OverflowError,
             zlib.error)
CARDS_FILENAME = "cards.index"


def foreign(meta: dict, store) -> str | None:
    """Why an index file's ``meta`` is not ``store``'s, or None (it is, or cannot tell: a
    file written before stores had ids, a team store)."""
    theirs, ours = meta.get("store"), store.store_id
    if theirs and ours and theirs != ours:
        return f"written for another store ({theirs[:8]}; this one is {ours[:8]})"
    return None


class SavedFile:
    """An index kept in memory and written to its file now and then. A subclass gives
    ``save(force=False)``, which writes the file, and ``due()``: how many unsaved changes
    make a save due."""

    unsaved = 0  # changes since the file was written
    failed = 0  # saves that failed in a row since

    def save_when_due(self) -> None:
        """Write the file once it is due; after a failed save, once twice as many changes
        are unsaved (a save costs time in proportion to the store)."""
        if self.unsaved >= self.due() << min(self.failed, 16):
            self.try_save()

    def try_save(self, force: bool = False) -> None:
        """A save after a commit: a file that cannot be written (a full disk, a directory
        made read-only) is left to a later save, or to the next open to catch up from the
        journal, rather than fail a write that is stored."""
        try:
            self.save(force)
        except (OSError, RuntimeError):  # usearch says its I/O errors as RuntimeError
            self.failed += 1
        else:
            self.failed = 0


class Keywords(SavedFile):
    """The BM25 index of the indexed notes' current texts, and its file.

    Like the vector index, the file records the journal position it reflects and is
    caught up from the journal on open, so an open tokenizes only what changed since it
    was written (lexical.py has the numbers). Writing it folds every change since into
    one segment, which costs time in proportion to the store: it is written when those
    changes reach a twentieth of the store (at least ``save_every``), on close, and at
    once after a purge, whose words must leave the disk.
    """

    def __init__(self, directory: Path, settings: Settings, store: Store,
                 position: Callable[[], int]):
        self.path = Path(directory) / KEYWORDS_FILENAME
        self.settings = settings
        self.store = store
        self.position = position
        self.index = LexicalIndex()
        self.unsaved = 0

    def open(self, ids: np.ndarray, *, rebuild: bool = False) -> str:
        """Load the file and catch it up, or rebuild it from the texts; what happened."""
        try:
            if rebuild:
                raise LexicalIndexError("asked to rebuild")
            return self._load(ids)
        except (LexicalIndexError, *_ODD_FILE) as exc:
            rows = self.store.index_rows(INDEXED)
            self.rebuild(rows)
            self.save(force=True)
            return f"rebuilt ({exc})" if rows else "new"  # nothing to rebuild: not a repair

    def _load(self, ids: np.ndarray) -> str:
        if not self.path.exists():
            raise LexicalIndexError("no index file")
        index, meta = LexicalIndex.load(self.path)
        if why := foreign(meta, self.store):
            raise LexicalIndexError(why)
        seq = int(meta.get("seq", 0))
        if seq > self.store.position():
            raise LexicalIndexError(f"saw journal position {seq:,}, past the store's")
        changed = self.store.changed_since(seq)
        self.index = index
        self.sync(changed, self.store.index_rows(INDEXED, changed))
        if not np.array_equal(index.doc_ids(), ids):
            raise LexicalIndexError("documents disagree with the store")
        return f"loaded, caught up {counted(len(changed), 'note')}" if changed else "loaded"

    def rebuild(self, rows: Sequence[tuple]) -> None:
        self.index = LexicalIndex.build((r[0], r[1]) for r in rows)
        self.unsaved = len(rows)

    def sync(self, note_ids: Sequence[int], rows: Sequence[tuple]) -> None:
        for note_id in note_ids:
            self.index.remove(note_id)
        for r in rows:
            self.index.add(r[0], r[1])
        self.unsaved += len(note_ids)
        self.save_when_due()

    def apply(self, change: Change) -> None:
        self.apply_many([change])

    def apply_many(self, changes: Sequence[Change]) -> None:
        """One write's changes, then a save if one is due: saved in the middle, the file
        would say it holds the whole write (its position) and a crash would lose the rest."""
        purged = False
        for change in changes:
            if change.text is not None:
                self.index.add(change.note_id, change.text)
                self.unsaved += 1
            elif change.type == "purged":
                self.index.remove(change.note_id)
                purged = True
        if purged:
            self.try_save(force=True)  # finish_purges says if it failed
        else:
            self.save_when_due()

    def due(self) -> int:
        return max(self.settings.save_every, len(self.index) // 20)

    def save(self, force: bool = False) -> None:
        """Write the file (atomically) with the journal position it reflects."""
        if not (force or self.unsaved):
            return
        self.index.save(self.path, {"seq": self.position(), "count": len(self.index),
                                    "store": self.store.store_id, "nbmemory": __version__})
        self.unsaved = 0


class NoteCards(SavedFile):
    """What a hit shows of each note (nbmemory/cards.py), and its file: recall's hits are
    read here, not from the store. Like the keyword index, the file records the journal
    position it reflects and is caught up on open; a change marks the note's block out of
    date, and the first recall that needs one reads every out-of-date block again, in one
    query. The file is written when due, on close, and at once after a purge, whose text
    must leave the disk. A local store's only: a team store's server reads rows by their
    index.
    """

    def __init__(self, directory: Path, settings: Settings, store: Store,
                 position: Callable[[], int]):
        self.path = Path(directory) / CARDS_FILENAME
        self.settings = settings
        self.store = store
        self.position = position
        self.cards = Cards()
        self.unsaved = 0
        self.count = 0  # notes in the store, roughly: the file is due every twentieth

    @property
    def enabled(self) -> bool:
        return not self.store.shared

    def open(self, count: int, *, rebuild: bool = False) -> str:
        """Load the file and mark what changed since, or build it from every note."""
        self.count = count
        if not self.enabled:
            return "not kept (a team store)"
        try:
            if rebuild:
                raise CardsFileError("asked to rebuild")
            return self._load()
        except (CardsFileError, *_ODD_FILE) as exc:
            self.cards = Cards()
            ids, lines = self.store.note_lines(None, BLOCK)
            self.cards.write(ids, lines, ())
            self.save(force=True)
            return f"rebuilt ({exc})"

    def _load(self) -> str:
        if not self.path.exists():
            raise CardsFileError("no cards file")
        cards, meta = Cards.load(self.path)
        if why := foreign(meta, self.store):
            raise CardsFileError(why)
        seq = int(meta.get("seq", 0))
        if seq > self.store.position():
            raise CardsFileError(f"saw journal position {seq:,}, past the store's")
        if meta.get("schema") != SCHEMA_VERSION:
            raise CardsFileError(f"written for schema {meta.get('schema')}")
        self.cards = cards
        changed = self.store.changed_since(seq)
        self.sync(changed)
        return f"loaded, {len(changed)} notes read again" if changed else "loaded"

    def notes(self, ids: Sequence[int], store: Store) -> dict[int, Note]:
        """The notes ``ids`` (those that exist), as ``store.get_notes`` reads them (the
        engine's store: a team store's mirror while its server is away)."""
        if not self.enabled:
            return store.get_notes(ids)
        found, missing = self.cards.lines(ids)
        if missing and self.cards.out_of_date and store is self.store:
            # Every out-of-date block in the one scan a miss costs anyway, rather than the
            # misses from the store on every recall until the file is due (at 1M notes
            # every 50k changes; 2.1 ms a read there).
            self.refresh()
            found, missing = self.cards.lines(ids)
        notes = {i: store.note_from_line(line) for i, line in found.items()}
        if missing:
            notes.update(store.get_notes(missing))
        return {i: notes[i] for i in ids if i in notes}

    def apply(self, change: Change) -> None:
        self.apply_many([change])

    def apply_many(self, changes: Sequence[Change]) -> None:
        """One write's changes, then a save if one is due (as :meth:`Keywords.apply_many`)."""
        changes = [c for c in changes if c.note_id is not None]
        if not changes or not self.enabled:
            return
        self.cards.mark([c.note_id for c in changes])
        self.unsaved += len(changes)
        self.count += sum(c.type == "created" for c in changes)
        if any(c.type == "purged" for c in changes):
            self.try_save(force=True)  # finish_purges says if it failed
        else:
            self.save_when_due()

    def sync(self, note_ids: Sequence[int]) -> None:
        if note_ids and self.enabled:
            self.cards.mark(note_ids)
            self.unsaved += len(note_ids)
            self.save_when_due()

    def due(self) -> int:
        return max(self.settings.save_every, self.count // 20)

    def refresh(self) -> None:
        """Read the out-of-date blocks again from the store (in memory; the file is
        written when due)."""
        blocks = sorted(self.cards.out_of_date)
        for start in range(0, len(blocks), 10_000):
            part = blocks[start:start + 10_000]
            ids, lines = self.store.note_lines(part, BLOCK)
            self.cards.write(ids, lines, part)

    def save(self, force: bool = False) -> None:
        """Read the out-of-date blocks again, then write the file (atomically) at its position."""
        if not self.enabled or not (force or self.unsaved):
            return
        self.refresh()
        self.cards.save(self.path, {"seq": self.position(), "block": BLOCK,
                                    "schema": SCHEMA_VERSION, "store": self.store.store_id,
                                    "nbmemory": __version__})
        self.unsaved = 0


class Dense(SavedFile):
    """The usearch index of the indexed notes' vectors, and its file."""

    def __init__(self, directory: Path, settings: Settings, store: Store,
                 position: Callable[[], int], lock: threading.RLock):
        self.path = Path(directory) / VECTOR_FILENAME
        self.lock = lock  # the engine's: a background build saves under it
        self._reader: Store | None = None  # see _stored
        self._reading = threading.Lock()
        self.settings = settings
        self.store = store
        self.position = position  # the journal position the projections reflect
        self.index: VectorIndex | None = None
        self.identity: str | None = None  # model:dims of the vectors it holds
        self.unsaved = 0  # changes since the file was written

    def apply(self, change: Change) -> None:
        self.apply_many([change])

    def apply_many(self, changes: Sequence[Change]) -> None:
        """One transaction's changes: its new vectors go to the graph in one call (one
        call per note cost half of a bulk remember's time at 20k notes)."""
        added = [c for c in changes if c.vector is not None]
        if added:
            self._insert(np.array([c.note_id for c in added], np.int64),
                         as_stored(np.vstack([c.vector for c in added])))
        self.unsaved += len(changes)
        purged = [c.note_id for c in changes if c.type == "purged"]
        if purged and self.index is not None:
            self.index.remove(purged)  # the old file still holds the vector: rewrite it
            self.try_save(force=True)  # finish_purges says if it failed
        else:
            self.save_when_due()  # once the whole write is in (see Keywords.apply_many)

    def add(self, ids: np.ndarray, matrix: np.ndarray) -> None:
        """Vectors for notes in the journal."""
        self._insert(ids, matrix)
        self.unsaved += len(ids)
        self.save_when_due()

    def _insert(self, ids: np.ndarray, matrix: np.ndarray) -> None:
        if self.index is None:
            self.index = self._new(matrix.shape[1])
        self.index.add(ids, matrix)

    def due(self) -> int:
        # Writing the file costs time in proportion to the store (about 0.5 GB at 1M
        # notes): every save_every changes, or every hundredth of the store if more.
        return max(self.settings.save_every, len(self.index or ()) // 100)

    def open(self, identity: str, ids: np.ndarray, progress: Progress | None = None, *,
             rebuild: bool = False) -> str:
        """Load the file and catch it up, or rebuild it; what happened, for ``status``."""
        self.identity, self.index = identity, None
        try:
            if rebuild:
                raise VectorIndexError("asked to rebuild")
            return self._load(ids)
        except (VectorIndexError, *_ODD_FILE, MemoryError, RuntimeError) as exc:
            self._rebuild(progress)
            return f"rebuilt ({exc})"

    def close(self) -> None:
        if self.index is not None:
            self.index.close()
        self.index = self.identity = None
        self.close_reader()

    def close_reader(self) -> None:  # the next read opens one on the store (a new one too)
        with self._reading:
            if self._reader is not None and self._reader is not self.store:
                self._reader.con.close()
            self._reader = None

    def _new(self, ndim: int) -> VectorIndex:
        return VectorIndex(ndim, **self._params())

    def _params(self) -> dict:
        s = self.settings
        return dict(connectivity=s.connectivity, expansion_add=s.expansion_add,
                    expansion_search=s.expansion_search, dtype=s.vector_dtype,
                    source=self._stored, source_all=self._all_stored, fill_below=self._fill_below)

    @property
    def _fill_below(self) -> int:
        # A team store's connection is shared with the listener: fill its rows at once.
        return 2**62 if self.store.shared else 20_000

    def _stored(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The float32 vectors of ``keys`` from the store (the exact rows of an int8 graph),
        on a connection of their own: the rows may be filled from a thread of their own."""
        with self._reading:
            if self._reader is None:
                self._reader = self.store.reader()
            return self._reader.vectors(model_name(self.identity), np.asarray(keys).tolist())

    def _all_stored(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Every indexed note's float32 vector, in one pass on a connection of its own
        (the background copy of a large index's rows)."""
        reader = self.store.reader()
        try:
            yield from reader.vector_chunks(model_name(self.identity), INDEXED)
        finally:
            if reader is not self.store:
                reader.con.close()

    def _load(self, ids: np.ndarray) -> str:
        if not self.path.exists():
            raise VectorIndexError("no index file")
        index, meta = VectorIndex.load(self.path, expansion_search=self.settings.expansion_search,
                                       source=self._stored, source_all=self._all_stored,
                                       fill_below=self._fill_below)
        if why := foreign(meta, self.store):
            index.close()
            raise StoreDamaged(
                f"The store {self.path.parent} has a vector index {why}. Nothing was changed. "
                f"If {DB_FILENAME} was replaced by another store's, put this store's back; to "
                f"use it as it is, move {self.path.name} (and {self.path.name}.json) away, "
                "then open it again.")
        if meta.get("embedder") != self.identity:
            raise VectorIndexError(f"built for {meta.get('embedder')}")
        self._check_not_ahead(index, int(meta.get("seq", 0)))
        changed = self.store.changed_since(int(meta.get("seq", 0)))
        self.index = index
        index.start_filling()
        self.sync(changed)
        keys = index.keys()
        if len(keys) and not (len(ids) and np.isin(keys, ids, kind="table").all()):
            self.index = None  # the rebuild that follows needs the identity close() clears
            index.close()
            raise VectorIndexError("keys disagree with the store")
        absent = ids[~index.holds(ids)]
        if len(absent):  # vectors the file missed; notes without any wait for the model
            found, matrix = self.store.vectors(model_name(self.identity), absent.tolist())
            if len(found):
                index.add(found, matrix)
                changed = [*changed, *found.tolist()]
        if not changed:
            return "loaded"
        self.save(force=True)
        return f"loaded, caught up {counted(len(changed), 'note')}"

    def _check_not_ahead(self, index: VectorIndex, seq: int) -> None:
        """Refuse, touching nothing, a store whose database has lost what its vector index
        saw: the index is the evidence (a damaged or replaced write-ahead log, a database
        file restored from an older copy). Rebuilding would destroy it."""
        position = self.store.position()
        keys = index.keys()
        known = self.store.note_ids(Filters(statuses=()))
        unknown = keys[~np.isin(keys, known, kind="table")] if len(known) else keys
        if seq <= position and not len(unknown):
            return
        lost = (f"its vector index saw journal position {seq:,}, the database ends at "
                f"{position:,}" if seq > position else
                f"its vector index holds {len(unknown):,} notes the database does not have")
        if self.store.shared:  # a team store: the server (or this machine's copy) is the truth
            raise VectorIndexError(lost)
        raise StoreDamaged(
            f"The store {self.path.parent} has lost writes: {lost}. Nothing was changed. "
            f"Restore {DB_FILENAME} from a backup, or keep what the database has by moving "
            f"{self.path.name} (and {self.path.name}.json) away, then open it again.")

    def _rebuild(self, progress: Progress | None = None) -> None:
        """From the vectors in the store. A large index answers at once (exactly) while
        its graph is built in the background, then is saved."""
        ids = self.store.note_ids(Filters(statuses=INDEXED))
        keys, matrix = self.store.vectors(model_name(self.identity), ids.tolist())
        if progress:
            progress(0, len(keys))
        self.index = VectorIndex.build(int(self.identity.rsplit(":", 1)[1]), keys, matrix,
                                       done=self._built, **self._params())
        if progress:
            progress(len(keys), len(keys))
        self.save(force=True)

    def _built(self, index: VectorIndex) -> None:
        """Save a graph built in the background, unless the index was dropped meanwhile
        (closing holds the lock while it waits for the builder: never wait on it then)."""
        while not index.stopped:
            if self.lock.acquire(timeout=0.1):
                try:
                    if self.index is index:
                        self.save(force=True)
                finally:
                    self.lock.release()
                return

    def sync(self, note_ids: Sequence[int]) -> None:
        """Bring the index in line with the store for ``note_ids`` (idempotent)."""
        if not note_ids or self.index is None:
            return
        ids = np.asarray(note_ids, np.int64)
        live = np.isin(ids, self.store.note_ids(Filters(statuses=INDEXED)))
        self.index.remove(ids[~live])
        if live.any():
            keys, matrix = self.store.vectors(model_name(self.identity), ids[live].tolist())
            if len(keys):
                self.index.add(keys, matrix)
        self.unsaved += len(ids)
        self.save_when_due()

    def save(self, force: bool = False) -> None:
        """Write the file (atomically) with the journal position it reflects; not over the
        files of a store made anew at this path (position None: a background build's end)."""
        seq = self.position()
        if seq is None or self.index is None or self.index.building or not (force or self.unsaved):
            return
        meta = {"seq": seq, "embedder": self.identity, "count": len(self.index),
                "store": self.store.store_id, "nbmemory": __version__}
        self.index.save(self.path, meta)
        self.unsaved = 0
