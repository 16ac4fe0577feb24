"""Staleness: each note's stale reasons (superseded, and each anchor's), the stale
notes, and verifying a note (re-taking its fingerprints)."""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np

from ..models import Note, Page, StaleReason, utcnow
from ..store import Filters
from .part import Part
from .validate import check_page, default_author


class Staleness(Part):
    def with_stale(self, notes: list[Note], variables: dict | None = None) -> list[Note]:
        """Attach anchors and stale reasons (superseded, and each anchor's; see stale.py)."""
        anchors = self.store.anchors([n.id for n in notes])
        out = []
        for note in notes:
            reasons = self.superseded(note)
            mine = tuple(a for _, a in anchors.get(note.id, ()))
            reasons += self.engine.checker.reasons(mine, variables)
            if reasons or mine:
                note = replace(note, stale=tuple(reasons), anchors=mine)
            out.append(note)
        failed = self.engine.checking.failed(out)  # a check that fails now is a reason too
        return [replace(n, stale=n.stale + tuple(failed[n.id])) if n.id in failed else n
                for n in out]

    def superseded(self, note: Note, upto: int | None = None) -> list[StaleReason]:
        """``superseded #N`` for a superseded note (by the newest replacement up to ``upto``)."""
        if note.status != "superseded":
            return []
        by = next((e.data.get("by") for e in reversed(self.store.events(note.id))
                   if e.type == "superseded_by" and (upto is None or e.seq <= upto)), None)
        if by is None:  # shared or exported without the note that replaced it
            return [StaleReason("superseded", "", "by a note not in this store")]
        return [StaleReason("superseded", f"#{by}")]

    def stale_ids(self, variables: dict | None,
                  statuses: Sequence[str] = ("active",)) -> set[int]:
        """Notes (active ones unless ``statuses`` says) with at least one stale anchor
        or a check that failed last."""
        anchors = self.store.anchors(self.store.anchored_note_ids(statuses))
        stale = {note_id for note_id, rows in anchors.items()
                 if self.engine.checker.reasons((a for _, a in rows), variables)}
        checked = [Note(i, "", anchors=tuple(a for _, a in rows)) for i, rows in anchors.items()
                   if i not in stale and any(a.kind == "check" for _, a in rows)]
        return stale | set(self.engine.checking.failed(checked))

    def by_staleness(self, candidates: np.ndarray, stale: bool, variables,
                     statuses: Sequence[str] = ("active",), *,
                     marked: set[int] | None = None) -> np.ndarray:
        """The ``candidates`` (notes in ``statuses``) that are, or are not, stale as
        :meth:`with_stale` flags them: a stale anchor, or superseded (``marked``: the
        notes stale when a snapshot was sealed instead)."""
        marked = self.stale_ids(variables, statuses) if marked is None else set(marked)
        if "superseded" in statuses:
            marked |= set(self.store.note_ids(Filters(statuses=("superseded",))).tolist())
        hit = np.isin(candidates, np.fromiter(marked, np.int64))
        return candidates[hit] if stale else candidates[~hit]

    def stale(self, *, offset: int = 0, limit: int = 50, variables: dict | None = None) -> Page:
        """Active notes that are stale, with their reasons, most recently changed first."""
        check_page(offset, limit)
        with self.lock:
            ids = sorted(self.stale_ids(variables))
            notes = self.store.get_notes(ids)
            ordered = sorted(notes.values(), key=lambda n: (n.updated_at, n.id), reverse=True)
            return Page(self.with_stale(ordered[offset:offset + limit], variables),
                        len(ordered), offset, limit)

    def verify(self, note_id: int, *, actor: str | None = None, variables: dict | None = None,
               request_id: str | None = None) -> Note:
        """Re-take the fingerprints of a note's anchors after checking it still holds.

        The old fingerprints stay in the store; a ``verified`` event records what was
        re-taken, what was stale before, and which anchors could not be re-taken here
        (a variable this kernel does not have).
        """
        with self.lock:
            if request_id and self.store.request_note(request_id) is not None:
                return self.with_stale([self.store.get_notes([note_id])[note_id]], variables)[0]
            self.engine.writes.require_status(note_id, "active", "verify")
            current = self.store.anchors([note_id]).get(note_id, [])
            before = self.engine.checker.reasons((a for _, a in current), variables)
            retaken, kept = [], []
            for position, anchor in current:
                if anchor.kind in ("check", "evidence"):  # re-run by %memory check or rerun
                    continue
                new = self.engine.checker.retake(anchor, variables)
                (retaken.append((position, new)) if new is not None else kept.append(anchor.target))
            at = utcnow()
            data = {"retaken": len(retaken), "cleared": [str(r) for r in before]}
            if kept:
                data["kept"] = kept
            with self.engine.writing() as entry:
                seq = entry.append("verified", note_id, actor=default_author(actor), at=at,
                                   request_id=request_id, data=data)
                self.store.insert_anchors(note_id, retaken, seq=seq, at=at)
            note = self.store.get_notes([note_id])[note_id]
            return self.with_stale([note], variables)[0]

    def variable_anchors(self, scope: str = "") -> list[str]:
        """Variables active notes are anchored to in ``scope`` (the kernel fingerprints these)."""
        with self.lock:
            return self.store.variable_targets(scope or "")

