"""Each note's status, priority and neighbours: the projection of the journal that ranking
reads for every candidate, kept in memory (rebuilt from the store at every open)."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..events import EFFECTS, INACTIVE
from ..models import PRIORITIES
from .journal import Change
from .neighbours import Neighbours


class Priorities:
    """Note id -> priority, read like a dict, held as one code per id (a dict of a
    million notes took 0.15 s to build at every open, and about 100 MB)."""

    def __init__(self, ids: np.ndarray = np.empty(0, np.int64),
                 codes: np.ndarray = np.empty(0, np.int8)) -> None:
        self._codes = np.full(int(ids[-1]) + 1 if len(ids) else 0, -1, np.int8)
        self._codes[ids] = codes
        self._count = len(ids)

    def get(self, note_id: int, default: str | None = None) -> str | None:
        code = self._codes[note_id] if 0 <= note_id < len(self._codes) else -1
        return PRIORITIES[code] if code >= 0 else default

    def codes(self, ids: Sequence[int], default: str = "medium") -> np.ndarray:
        """The priority of each of ``ids`` as its index in ``PRIORITIES`` (``default`` for
        one not held), in one lookup."""
        ids = np.asarray(ids, np.int64)
        codes = np.full(len(ids), PRIORITIES.index(default), np.int8)
        inside = np.flatnonzero((ids >= 0) & (ids < len(self._codes)))
        found = self._codes[ids[inside]]
        codes[inside[found >= 0]] = found[found >= 0]
        return codes

    def __contains__(self, note_id: int) -> bool:
        return self.get(note_id) is not None

    def __len__(self) -> int:
        return self._count

    def __setitem__(self, note_id: int, priority: str) -> None:
        if note_id >= len(self._codes):
            grown = np.full(max(note_id + 1, 2 * len(self._codes)), -1, np.int8)
            grown[:len(self._codes)] = self._codes
            self._codes = grown
        self._count += int(self._codes[note_id] < 0)
        self._codes[note_id] = PRIORITIES.index(priority)

    def pop(self, note_id: int, default: str | None = None) -> str | None:
        found = self.get(note_id)
        if found is None:
            return default
        self._codes[note_id] = -1
        self._count -= 1
        return found


class NoteState:
    """Status, priority and neighbours of every indexed note, for ranking and "previously
    believed"."""

    def __init__(self) -> None:
        self.inactive: set[int] = set()
        self.priority = Priorities()
        self.neighbours = Neighbours()

    def rebuild(self, ids: np.ndarray, priorities: np.ndarray, inactive: np.ndarray,
                follows: np.ndarray) -> None:
        """From ``Store.note_states``."""
        self.priority = Priorities(ids, priorities)
        self.inactive = set(ids[inactive].tolist())
        self.neighbours = Neighbours(ids, follows)

    def sync(self, note_ids: Sequence[int], rows: Sequence[tuple]) -> None:
        """Bring ``note_ids`` in line with their ``Store.index_rows`` (absent: not indexed)."""
        for note_id in note_ids:
            self.inactive.discard(note_id)
            self.priority.pop(note_id, None)
        for r in rows:
            self.priority[r[0]] = r[2]
            if r[3] != "active":
                self.inactive.add(r[0])

    def apply(self, change: Change) -> None:
        if change.priority is not None:
            self.priority[change.note_id] = change.priority
        if change.type == "created" and change.at is not None:
            self.neighbours.created(change.note_id, change.author, change.at)
        effect = EFFECTS.get(change.type)
        if effect is None or not effect.status:
            return
        if effect.status == "purged":
            self.inactive.discard(change.note_id)
            self.priority.pop(change.note_id, None)
        elif effect.status in INACTIVE:
            self.inactive.add(change.note_id)
        else:
            self.inactive.discard(change.note_id)
