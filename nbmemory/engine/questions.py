"""Resolving questions and hypotheses: confirm, refute and reopen, each an event in the
journal. A refuted note is recalled only as what was "previously believed"."""

from __future__ import annotations

from ..errors import Command, Conflict, InvalidInput
from ..models import Note, utcnow
from .part import Part
from .validate import default_author, unicode_text


class Questions(Part):
    def confirm(self, note_id: int, reason: str = "", *, actor: str | None = None,
                request_id: str | None = None) -> Note:
        """Mark a question or hypothesis as confirmed; it stays active."""
        return self._resolve(note_id, "confirmed", reason, actor, request_id)

    def refute(self, note_id: int, reason: str, *, actor: str | None = None,
               request_id: str | None = None) -> Note:
        """Mark a hypothesis as refuted: hidden from recall except as "previously believed"."""
        if not unicode_text(reason or "", "The reason").strip():
            self.engine.reads.get(note_id)  # a note that is not there is said first
            raise InvalidInput("Say why it is refuted: {0}", Command(
                "refute", (note_id, "the nulls come from the join, not the source")))
        return self._resolve(note_id, "refuted", reason, actor, request_id)

    def reopen(self, note_id: int, *, actor: str | None = None,
               request_id: str | None = None) -> Note:
        """Undo a confirm or refute: the question is open again."""
        with self.lock:
            if (done := self.engine.writes.done_before(request_id, note_id)) is not None:
                return done
            if self.engine.reads.get(note_id).resolution is None:
                raise Conflict(f"Note #{note_id} is not confirmed or refuted; nothing to reopen.")
            with self.engine.writing() as entry:
                entry.append("reopened", note_id, actor=default_author(actor), at=utcnow(),
                             request_id=request_id)
            return self.engine.reads.get(note_id)

    def _resolve(self, note_id: int, outcome: str, reason: str, actor: str | None,
                 request_id: str | None = None) -> Note:
        with self.lock:
            if (done := self.engine.writes.done_before(request_id, note_id)) is not None:
                return done
            note = self.engine.writes.require_status(note_id, "active",
                                       {"confirmed": "confirm", "refuted": "refute"}[outcome])
            if note.resolution == outcome:
                raise Conflict(f"Note #{note_id} is already {outcome}.")
            reason = unicode_text(reason or "", "The reason").strip()
            data = {"reason": reason} if reason else None
            with self.engine.writing() as entry:
                entry.append(outcome, note_id, actor=default_author(actor), at=utcnow(),
                             request_id=request_id, data=data)
            return self.engine.reads.get(note_id)
