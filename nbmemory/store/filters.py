"""Filters on notes (as SQL and for notes in memory), and turning rows into notes."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Sequence

from ..events import EFFECTS, KEEP, status_sql
from ..models import PRIORITIES, Note, Provenance

# What a purged note's events said in its own words (a refute's reason, a check's expression
# and the value it saw, the stale reasons a verify cleared): erased with its text.
EVENT_WORDS = ("reason", "expression", "value", "error", "why", "cleared", "kept", "checks")


def _naive(value: datetime) -> datetime:
    return value.astimezone(timezone.utc).replace(tzinfo=None)


def _aware(value: datetime | None) -> datetime | None:
    return value.replace(tzinfo=timezone.utc) if value is not None else None


@dataclass(frozen=True)
class Filters:
    """Narrow a listing or a recall. Every given filter must hold (tags: all of them)."""

    tags: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    priorities: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None
    statuses: tuple[str, ...] = ("active",)
    ids: tuple[int, ...] | None = None  # only these notes (e.g. the stale ones)
    authors: tuple[str, ...] = ()  # written by one of these (a team store's members)
    unresolved: bool = False  # neither confirmed nor refuted (an open question)

    @property
    def narrows(self) -> bool:
        """True when the filter excludes some active notes."""
        return bool(self.tags or self.kinds or self.priorities or self.since or self.until
                    or set(self.statuses) != {"active"} or self.ids is not None
                    or self.authors or self.unresolved)

    def matches(self, note: Note) -> bool:
        """The same test as :meth:`sql`, for notes already in memory."""
        return ((not self.statuses or note.status in self.statuses)
                and set(self.tags) <= set(note.tags)
                and (not self.kinds or note.kind in self.kinds)
                and (not self.priorities or note.priority in self.priorities)
                and (self.since is None or note.created_at >= self.since)
                and (self.until is None or note.created_at < self.until)
                and (self.ids is None or note.id in self.ids)
                and (not self.authors or note.author in self.authors)
                and (not self.unresolved or note.resolution is None))

    def sql(self, all_tags: str = "list_has_all(n.tags, ?)", each_tag: str | None = None,
            one_of: str = "{} IN (SELECT unnest(?))") -> tuple[str, list[Any]]:
        """A WHERE clause and its parameters, in the store's SQL: ``all_tags`` says "the note
        has all these tags" (a list); ``each_tag``, if given, "the note has this tag", once
        per tag instead; ``one_of`` "this column is one of these values" (a list).

        DuckDB is given ``list_contains`` for both: at 100k notes, a tag kept by 1 note in
        20 took 18 ms with list_has_all(n.tags, [tag]), 5.6 with list_contains(n.tags, tag),
        4.4 with the status as list_contains(?, n.status) rather than IN (SELECT unnest(?)).
        """
        clauses, params = [], []
        if self.statuses:
            clauses.append(one_of.format("n.status"))
            params.append(list(self.statuses))
        if self.tags and each_tag:
            clauses.extend([each_tag] * len(self.tags))
            params.extend(self.tags)
        elif self.tags:
            clauses.append(all_tags)
            params.append(list(self.tags))
        if self.kinds:
            clauses.append(one_of.format("n.kind"))
            params.append(list(self.kinds))
        if self.priorities:
            clauses.append(one_of.format("n.priority"))
            params.append(list(self.priorities))
        if self.since:
            clauses.append("n.created_at >= ?")
            params.append(_naive(self.since))
        if self.until:
            clauses.append("n.created_at < ?")
            params.append(_naive(self.until))
        if self.ids is not None:
            clauses.append("n.id IN (SELECT unnest(?::BIGINT[]))")
            params.append(list(self.ids))
        if self.authors:
            clauses.append(one_of.format("n.author"))
            params.append(list(self.authors))
        if self.unresolved:
            clauses.append("n.resolution IS NULL")
        return (" AND ".join(clauses) or "TRUE"), params


# How events set a note's status, folded in SQL for past states (events.EFFECTS).
_STATUS_EVENTS, _STATUS_AFTER, _ACTIVE_AFTER = status_sql("last_type")
_RESOLUTION_EVENTS = ", ".join(f"'{t}'" for t, e in EFFECTS.items() if e.resolution != KEEP)

_NOTE_COLUMNS = """
    n.id, n.text, n.kind, n.priority, n.tags, n.status, n.version, n.created_at,
    n.updated_at, n.author, n.provenance, n.supersedes, n.resolution, n.resolution_reason
"""
_NOTE_FROM = "notes n"
# A note's priority as its index in PRIORITIES (Store.note_states), in either dialect.
_PRIORITY_CODE = ("CASE priority " + " ".join(f"WHEN '{p}' THEN {i}" for i, p in
                                               enumerate(PRIORITIES)) + " END")
# Notes written one after the other by one author count as neighbours (ranking.with_context)
# while the gap between them is at most this.
NEIGHBOUR_GAP_S = 600
# The note written just before each one by the same author within NEIGHBOUR_GAP_S, or -1;
# ``{seconds}`` is the dialect's spelling of a timestamp difference in seconds.
_FOLLOWS = ("CASE WHEN {seconds} <= " + str(NEIGHBOUR_GAP_S) + " THEN lag(id) OVER w ELSE -1 END")
_BY_AUTHOR = "WINDOW w AS (PARTITION BY author ORDER BY id)"


def _id_list(ids: Sequence[int]) -> str:
    """Ids inlined as a literal list: DuckDB looks these up far faster than a parameter list."""
    return ", ".join(str(int(i)) for i in ids) or "NULL"


def _note(row: Sequence, provenance: dict | None = None) -> Note:
    """A note from its row (_NOTE_COLUMNS); ``provenance`` when the row's is parsed already."""
    if provenance is None and row[10]:
        provenance = json.loads(row[10])
    return Note(
        id=row[0], text=row[1], kind=row[2], priority=row[3], tags=tuple(row[4]),
        status=row[5], version=row[6], created_at=_aware(row[7]), updated_at=_aware(row[8]),
        author=row[9], provenance=Provenance.from_dict(provenance),
        supersedes=row[11], resolution=row[12], resolution_reason=row[13],
    )


def _split_resolution(value: str | None) -> tuple[str | None, str | None]:
    """``refuted:why`` -> (refuted, why); reopened or nothing -> (None, None)."""
    kind, _, reason = (value or "").partition(":")
    return (kind, reason or None) if kind in ("confirmed", "refuted") else (None, None)


def _now() -> datetime:
    return datetime.now(timezone.utc)
