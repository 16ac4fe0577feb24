"""Reading notes: one, a page (filtered, optionally by staleness), a history, a
supersede chain, the open questions."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Sequence

from ..errors import InvalidInput, NotFound
from ..models import STATUSES, Event, Note, Page
from ..store import Filters
from .part import Part
from .validate import check_page, check_stale, filters_for, no_note, unicode_text
from .validate import note_id as valid_id


class Reads(Part):
    def written_by(self, request_id: str) -> Note | None:
        """The note the write ``request_id`` made, as it is now (None if none did)."""
        with self.lock:
            note_id = self.store.request_note(unicode_text(request_id, "A request id"))
            return None if note_id is None else self.get(note_id)

    def get(self, note_id: int) -> Note:
        note_id = valid_id(note_id)
        with self.lock:
            note = self.store.get_notes([note_id]).get(note_id)
            if note is None:
                raise NotFound(no_note(note_id))
            return self.engine.staleness.with_stale([note])[0]

    def notes(self, *, tags=None, kind=None, priority=None, since: datetime | None = None,
              until: datetime | None = None, status: str | Sequence[str] = "active",
              offset: int = 0, limit: int = 50, order: str = "newest",
              stale: bool | None = None, variables: dict | None = None,
              author: str | Sequence[str] | None = None) -> Page:
        """A page of notes; ``stale`` True keeps only stale notes, False only fresh ones
        (before paging, so ``total`` counts what the filter keeps); ``author``: written by
        one of these."""
        check_page(offset, limit)
        check_stale(stale)
        if order not in ("newest", "oldest", "priority"):
            raise InvalidInput(f"Unknown order {order!r}; use newest, oldest or priority")
        statuses = (tuple(s.strip() for s in status.split(",") if s.strip()) or (status,)
                    if isinstance(status, str) else tuple(status))  # "a,b" as tags are
        unknown = [s for s in statuses if s not in STATUSES]
        if unknown:
            raise InvalidInput(f"Unknown status {unknown[0]!r}; use one or more of: "
                               f"{', '.join(STATUSES)}")
        filters = filters_for(tags=tags, kind=kind, priority=priority, since=since,
                              until=until, statuses=statuses, author=author)
        with self.lock:
            if stale is not None:
                kept = self.engine.staleness.by_staleness(self.store.note_ids(filters), stale,
                                                          variables, statuses)
                filters = replace(filters, ids=tuple(kept.tolist()))
            notes, total = self.store.list_notes(filters, offset=offset, limit=limit, order=order)
            return Page(self.engine.staleness.with_stale(notes, variables), total, offset, limit)

    def history(self, note_id: int) -> list[Event]:
        with self.lock:
            self.get(note_id)
            return self.store.events(note_id)

    def versions(self, note_id: int) -> list[Note]:
        """Every version of the note, oldest first: what it said before each edit."""
        with self.lock:
            self.get(note_id)
            return self.store.versions(note_id)

    def chain(self, note_id: int) -> list[Note]:
        """The supersede chain through ``note_id``, oldest first."""
        with self.lock:
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

    def open_questions(self, *, limit: int = 50, tags=None, priority=None,
                       since: datetime | None = None, until: datetime | None = None,
                       author=None, stale: bool | None = None) -> list[Note]:
        """Active questions that are neither confirmed nor refuted, newest first, filtered
        as :meth:`notes` filters (``stale``: True only stale ones, False only fresh)."""
        check_page(0, limit)
        filters = filters_for(tags=tags, kind="question", priority=priority, since=since,
                              until=until, author=author, unresolved=True)
        with self.lock:
            notes = self.store.list_notes(filters, limit=2**62)[0]
            found = self.engine.staleness.with_stale(notes)
            if stale is not None:
                found = [n for n in found if bool(n.stale) == stale]
            return found[:limit]

