"""The past: notes as they stood at a journal position, and what changed between two.

A snapshot is only a name for a journal position, so any past state is a fold of the
journal up to it. Views of the past are built in memory on demand and searched exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .lexical import LexicalIndex
from .models import PRIORITIES, Change, Note, StaleReason
from .store import Filters, Store
from .dense_rows import DenseRows


@dataclass
class PastView:
    """The notes, keyword index and vectors of the store at journal position ``seq``."""

    seq: int
    notes: dict[int, Note]
    lexical: LexicalIndex
    vectors: DenseRows
    inactive: set[int] = field(default_factory=set)

    @classmethod
    def build(cls, store: Store, seq: int, model: str) -> PastView:
        rows = [(note, digest) for note, digest in store.notes_at(seq) if note.status != "purged"]
        vectors = store.vectors_by_hash(model, sorted({digest for _, digest in rows}))
        rows = [(note, digest) for note, digest in rows if digest in vectors]
        lexical = LexicalIndex()
        lexical.add_many((note.id, note.text) for note, _ in rows)
        keys = np.array([note.id for note, _ in rows], dtype=np.int64)
        matrix = (np.vstack([vectors[d] for _, d in rows]) if rows
                  else np.empty((0, 1), np.float32))
        return cls(seq, {note.id: note for note, _ in rows}, lexical,
                   DenseRows.from_matrix(keys, matrix),
                   {note.id for note, _ in rows if note.status != "active"})

    def candidates(self, filters: Filters) -> np.ndarray:
        return np.array(sorted(i for i, n in self.notes.items() if filters.matches(n)),
                        dtype=np.int64)

    def priority_codes(self, ids: Sequence[int]) -> np.ndarray:
        """Each note's priority as its index in ``PRIORITIES``."""
        return np.array([PRIORITIES.index(self.notes[i].priority) for i in ids], np.int8)

    def get_notes(self, ids) -> dict[int, Note]:
        return {i: self.notes[i] for i in ids if i in self.notes}


def diff(before: dict[int, Note], after: dict[int, Note],
         stale_before: dict[int, list[StaleReason]],
         stale_after: dict[int, list[StaleReason]]) -> list[Change]:
    """Changes from one state of the notes to another, in note order."""
    changes: list[Change] = []
    for note_id in sorted(set(before) | set(after)):
        old, new = before.get(note_id), after.get(note_id)
        if new is None:
            continue
        if old is None:
            if new.status == "active":
                changes.append(Change("added", new))
            continue
        if old.status != new.status:
            if new.status in ("revoked", "purged", "refuted"):
                changes.append(Change(new.status, new))
            elif new.status == "superseded":
                by = next((n.id for n in after.values() if n.supersedes == note_id), None)
                changes.append(Change("superseded", new, f"by #{by}" if by else ""))
            elif new.status == "active" and old.status in ("revoked", "refuted", "superseded"):
                changes.append(Change("reinstated", new))
        elif new.status == "active" and new.version != old.version:
            changes.append(Change("edited", new, f"v{old.version} -> v{new.version}"))
        if new.status == "active":
            was = {str(r) for r in stale_before.get(note_id, [])}
            now = {str(r): r for r in stale_after.get(note_id, [])}
            if set(now) - was:  # stale anew: it was stale already, for other reasons
                new_reasons = sorted(set(now) - was)
                changes.append(Change("stale_anew" if was else "became_stale", new,
                                      "; ".join(new_reasons), tuple(now[r] for r in new_reasons)))
            elif was and not now:
                changes.append(Change("no_longer_stale", new))
    return changes
