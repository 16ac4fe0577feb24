"""Which note each one follows: the notes one author writes one after the other."""

from __future__ import annotations

from datetime import datetime

import numpy as np

from ..store.filters import NEIGHBOUR_GAP_S


class Neighbours:
    """Which note each one follows, both ways, by id (-1: none): its author's previous note,
    written at most ``NEIGHBOUR_GAP_S`` before it (ranking.with_context reads them).

    From ``Store.note_states`` on open, then from each note created. A note's author's
    previous note is only known from writes since the open: the first note written after
    an open follows none until the next open, which reads the link from the store.
    """

    def __init__(self, ids: np.ndarray | None = None, follows: np.ndarray | None = None):
        size = int(ids[-1]) + 1 if ids is not None and len(ids) else 0
        self.before = np.full(size, -1, np.int64)
        self.after = np.full(size, -1, np.int64)
        if size:
            self.before[ids] = follows
            linked = follows >= 0
            self.after[follows[linked]] = ids[linked]
        self._latest: dict[str | None, tuple[int, datetime]] = {}

    def created(self, note_id: int, author: str | None, at: datetime) -> None:
        previous = self._latest.get(author)
        self._latest[author] = (note_id, at)
        if note_id >= len(self.before):
            grow = max(note_id + 1, 2 * len(self.before)) - len(self.before)
            self.before = np.concatenate([self.before, np.full(grow, -1, np.int64)])
            self.after = np.concatenate([self.after, np.full(grow, -1, np.int64)])
        if previous and previous[0] < note_id and \
                (at - previous[1]).total_seconds() <= NEIGHBOUR_GAP_S:
            self.before[note_id], self.after[previous[0]] = previous[0], note_id
