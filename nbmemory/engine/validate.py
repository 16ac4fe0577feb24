"""Checking what a caller asks for before anything is written: texts, kinds,
priorities, tags and filters, with messages that say how to fix them."""

from __future__ import annotations

import getpass
import hashlib
from typing import Iterable

from ..errors import Command, InvalidInput
from ..models import KINDS, PRIORITIES
from ..store import Filters

MAX_NOTE_CHARS = 100_000
MAX_K = 1_000  # hits a recall may ask for
MAX_PAGE = 1_000_000  # notes a listing may return at once
MAX_OFFSET = 2**40  # a page may start this far in (DuckDB's OFFSET is a 64-bit integer)


def check_count(value, name: str, low: int, high: int) -> int:
    """``value`` as an int in low..high, or a message that says which numbers work."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"{name} must be a whole number from {low} to {high:,} "
                           f"(got {value!r})")
    if not low <= value <= high:
        raise InvalidInput(f"{name} must be at least {low} and at most {high:,} (got {value:,})")
    return value


def check_page(offset, limit) -> None:
    check_count(limit, "limit", 1, MAX_PAGE)
    check_count(offset, "offset", 0, MAX_OFFSET)


def no_note(note_id: int) -> str:
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
