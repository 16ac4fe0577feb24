"""The journal: the only way the engine writes.

A write is: validate (the caller) -> append its events in one transaction -> apply. Each
appended event takes its effect on the store's current state right there, in the same
transaction (:data:`nbmemory.events.EFFECTS`, the one place it is written); once the
transaction commits, every projection applies it too. Rows that are data rather than
state (a note's versions, anchors' fingerprints, vectors) are written by the caller in
the same transaction.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Iterator, Protocol, Sequence

import numpy as np

from ..errors import Command, NbMemoryError
from ..events import EFFECTS, KEEP
from ..store import Store


@dataclass(frozen=True)
class Change:
    """A committed event as the projections see it, with what they need to apply it."""

    seq: int
    type: str
    note_id: int | None
    text: str | None = None  # created, or edited with a new text
    priority: str | None = None  # created, or edited
    vector: np.ndarray | None = None  # with ``text``: its embedding
    author: str | None = None  # created: who wrote it, and when
    at: datetime | None = None


class Projection(Protocol):
    def apply(self, change: Change) -> None: ...  # (or apply_many(changes), in order)


class Entry:
    """The events of one transaction (see :meth:`Journal.write`)."""

    def __init__(self, store: Store):
        self.store = store
        self.changes: list[Change] = []

    def append(self, type: str, note_id: int | None, *, actor: str | None, at: datetime,
               request_id: str | None = None, data: dict | None = None,
               **payload: Any) -> int:
        """Append one event, take its effect on the note's state; returns its position.
        ``payload`` (text, priority, vector) goes to the projections."""
        seq = self.store.append_event(type, note_id, actor=actor, at=at, request_id=request_id,
                                      data=data)
        effect = EFFECTS.get(type)
        if effect is not None and note_id is not None:
            if effect.status:
                self.store.set_status(note_id, effect.status)
            if effect.resolution != KEEP:
                reason = (data or {}).get("reason") if effect.resolution else None
                self.store.set_resolution(note_id, effect.resolution, reason)
        self.changes.append(Change(seq, type, note_id, **payload))
        return seq

    def append_each(self, type: str, note_ids: Sequence[int], *, actor: str | None,
                    at: datetime, request_id: str | None = None) -> None:
        """One ``type`` event (a change of status only) for each note: one statement for the
        events and one for the statuses, whatever their number (a bulk forget)."""
        effect = EFFECTS[type]
        assert effect.status and effect.resolution == KEEP, type
        first = self.store.append_events(type, note_ids, actor=actor, at=at,
                                         request_id=request_id)
        self.store.set_status(note_ids, effect.status)
        self.changes += [Change(first + i, type, note_id) for i, note_id in enumerate(note_ids)]

    def created(self, rows: Sequence[dict[str, Any]], vectors: dict[str, np.ndarray]) -> None:
        """New notes and their ``created`` events (one statement per table): each row as
        :meth:`Store.create_notes` takes it; ``vectors`` by text (none: embedded later)."""
        self.store.create_notes(rows)
        self.changes += [Change(r["seq"], "created", r["note_id"], r["text"], r["priority"],
                                vectors.get(r["text"]), r.get("author"), r["at"]) for r in rows]


class Journal:
    def __init__(self, store: Store, projections: Sequence[Projection] = (),
                 committed: Callable[[], None] | None = None):
        self.store = store
        self.projections = list(projections)
        self._position = 0
        self.committed = committed  # told after each commit

    @property
    def position(self) -> int:
        """Every event up to here is in the projections. Only this process writes a
        personal store, so there it is the store's position (asked when needed: a query)."""
        return self._position if self.store.shared else self.store.position()

    @position.setter
    def position(self, value: int) -> None:
        self._position = value

    @contextmanager
    def write(self) -> Iterator[Entry]:
        """One transaction; its events reach the projections only once it commits."""
        entry = Entry(self.store)
        with self.store.transaction():
            yield entry
        # The position first: a projection saving itself while applying records it.
        seqs = [c.seq for c in entry.changes]
        if self.store.shared and seqs and min(seqs) == self.position + 1:
            # On a team store, another member may have written before this transaction:
            # then the position stays, and the next catch-up applies both (idempotently).
            self.position = max(seqs)
        failed = None  # committed: every projection takes it, whichever fails (then said)
        for projection in self.projections:
            try:
                if hasattr(projection, "apply_many"):
                    projection.apply_many(entry.changes)
                else:
                    for change in entry.changes:
                        projection.apply(change)
            except Exception as exc:  # noqa: BLE001 - raised below, once all have it
                failed = failed or exc
        if self.committed is not None:
            self.committed()
        if failed is not None:  # said as written: a retry would write it twice
            raise NbMemoryError(
                f"This was written, but this process's indexes could not take it "
                f"({type(failed).__name__}: {failed}), so recall may miss it: rebuild them "
                "with {0}, or open the store again. Do not send it again.",
                Command("reindex")) from failed
