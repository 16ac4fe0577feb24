"""Checking what a caller asks for before anything is written: texts, kinds,
priorities, tags and filters, with messages that say how to fix them."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from datetime import date, datetime, time, timezone
from typing import Iterable

import numpy as np

from ..config import current_user
from ..errors import Command, InvalidInput, NotFound
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


def default_author(given=None) -> str:
    """``given`` (an actor or author a caller names) once checked, else this user."""
    return (check_author(given) if given is not None else "") or current_user()


MAX_TAG_CHARS = 100
# Tags on a note or in a filter: each tag in a filter is a clause of its own, and a few
# thousand made DuckDB plan until the owner ran out of memory.
MAX_TAGS = 100
MAX_NAME_CHARS = 200  # a snapshot's name
MAX_NOTE_ID = 2**62


def unicode_text(value, what: str) -> str:
    """``value`` if it is a str that either store can keep (UTF-8 without NUL: PostgreSQL's
    text cannot hold one), else a clear refusal."""
    if isinstance(value, (bytes, bytearray)):
        raise InvalidInput(f"{what} is bytes; decode it to text first (e.g. .decode('utf-8'))")
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be text, not {type(value).__name__}")
    if "\x00" in value:
        raise InvalidInput(f"{what} contains a NUL character (U+0000), which a store cannot "
                           "keep; remove it and try again")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        if all("\udc80" <= c <= "\udcff" for c in value if "\ud800" <= c <= "\udfff"):
            # Python's stand-ins for the bytes of a terminal, pipe or argument it could
            # not read as UTF-8: text in Latin-1, cp1252 or another legacy encoding.
            raise InvalidInput(f"{what} is not UTF-8: it reads as text in another encoding "
                               "(Latin-1 or cp1252, say). Convert it to UTF-8 first, e.g. "
                               "iconv -f cp1252 -t utf-8") from None
        raise InvalidInput(f"{what} holds characters that are not valid Unicode (a lone "
                           "surrogate, often from a badly decoded file); fix the text and "
                           "try again") from None
    return value


def note_id(value) -> int:
    """A note id as the store knows them: a whole number from 1."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InvalidInput(f"A note id is a whole number like 12, not {value!r}")
    if value < 1:
        raise InvalidInput(f"No note #{value}: note ids start at 1")
    if value > MAX_NOTE_ID:  # a store never gets there: like any id it does not hold
        raise NotFound(no_note(value))
    return int(value)


def each_once(note_ids) -> tuple[bool, list[int]]:
    """Whether one id was given, and the ids checked, each once in the order given."""
    single = isinstance(note_ids, (str, bytes)) or not hasattr(note_ids, "__iter__")
    return single, list(dict.fromkeys(note_id(i) for i in ([note_ids] if single else note_ids)))


# Tags typed in one string are separated by commas: full-width (，), ideographic (、),
# half-width ideographic (､) and Arabic (،) ones too.
_TAG_SEPARATORS = re.compile("[,\uff0c\u3001\uff64\u060c]")
# Characters that show nothing: a byte order mark, zero-width spaces and joiners.
_INVISIBLE = "\ufeff\u200b\u200c\u200d\u2060"


def _trimmed(text: str) -> str:
    """``text`` without whitespace or invisible characters at either end."""
    start, end = 0, len(text)
    while start < end and (text[start].isspace() or text[start] in _INVISIBLE):
        start += 1
    while end > start and (text[end - 1].isspace() or text[end - 1] in _INVISIBLE):
        end -= 1
    return text[start:end]


def _visible(char: str) -> bool:
    """Not whitespace, a control character (NUL, an escape) or a format character."""
    return not char.isspace() and unicodedata.category(char) not in ("Cc", "Cf")


def normalise_tags(tags: str | Iterable[str] | None) -> tuple[str, ...]:
    if tags is None:
        return ()
    listed = not isinstance(tags, str)
    if isinstance(tags, str):
        if tags.strip() and not _TAG_SEPARATORS.sub("", tags).replace("#", "").strip():
            raise InvalidInput(f"Tags {tags!r} name no tag; separate tags with commas, "
                               f"e.g. orders,units")
        tags = _TAG_SEPARATORS.split(tags)
    elif not isinstance(tags, (list, tuple, set, frozenset)):
        raise InvalidInput(f"Tags are a list or a comma-separated string, not "
                           f"{type(tags).__name__}")
    out: dict[str, None] = {}  # ordered, and a look-up is O(1)
    for tag in tags:
        tag = unicodedata.normalize("NFC", unicode_text(tag, "A tag").strip().lower().lstrip("#"))
        if len(tag) > MAX_TAG_CHARS:
            raise InvalidInput(f"A tag has {len(tag):,} characters; keep tags under "
                               f"{MAX_TAG_CHARS} (they are labels, not notes)")
        if not tag:
            continue
        if any(c.isspace() for c in tag):
            how = ("a tag is one word: join its words with - or _" if listed
                   else "separate tags with commas (a,b)")
            raise InvalidInput(f"Tag {tag!r} contains a space; {how}")
        if "," in tag:  # a filter splits on commas: such a tag could never be asked for
            raise InvalidInput(f"Tag {tag!r} contains a comma; give each tag as its own item")
        if not tag.isprintable():
            raise InvalidInput(f"Tag {tag!r} contains a control character; tags are words")
        out[tag] = None
        if len(out) > MAX_TAGS:  # said at once, not after reading 100,000 of them
            raise InvalidInput(f"{len(tags):,} tags; a note or a filter takes at most "
                               f"{MAX_TAGS}")
    return tuple(out)


def check_kind(kind: str) -> str:
    kind = unicode_text(kind or "", "The kind").strip().lower()
    if kind not in KINDS:
        raise InvalidInput(f"Unknown kind {kind!r}; use one of: {', '.join(KINDS)}")
    return kind


def check_priority(priority: str) -> str:
    value = unicode_text(priority or "", "The priority").strip().lower()
    value = {"h": "high", "m": "medium", "med": "medium", "l": "low"}.get(value, value)
    if value not in PRIORITIES:
        raise InvalidInput(f"Unknown priority {priority!r}; use one of: {', '.join(PRIORITIES)}")
    return value


def check_text(text: str) -> str:
    if isinstance(text, (bytes, bytearray)) or text is not None and not isinstance(text, str):
        unicode_text(text, "The note")
    if isinstance(text, str):  # a file's byte order mark, a zero-width space: not the note
        text = _trimmed(text)
    if not isinstance(text, str) or not any(_visible(c) for c in text):
        raise InvalidInput("The note is empty; write the finding itself, e.g. {0}",
                           Command("remember", ("orders.amount is in cents before 2021",)))
    text = unicode_text(text, "The note")
    if len(text) > MAX_NOTE_CHARS:
        raise InvalidInput(f"The note has {len(text):,} characters; the limit is "
                           f"{MAX_NOTE_CHARS:,}. Store the finding, not the whole source.")
    return text


def filters_for(*, tags=None, kind=None, priority=None, since=None, until=None,
                statuses=("active",), author=None, unresolved: bool = False) -> Filters:
    def many(value, check):
        if value is None:
            return ()
        if isinstance(value, str):
            value = value.split(",")
        elif not isinstance(value, (list, tuple, set, frozenset)):
            raise InvalidInput(f"A filter is a list or a comma-separated string, not "
                               f"{type(value).__name__}")
        return tuple(check(v) for v in value if not isinstance(v, str) or v.strip())

    since, until = moment(since, "since"), moment(until, "until")
    return Filters(tags=normalise_tags(tags), kinds=many(kind, check_kind),
                   priorities=many(priority, check_priority), since=since, until=until,
                   statuses=tuple(statuses), authors=many(author, check_author),
                   unresolved=unresolved)


def check_stale(value) -> None:
    if value not in (None, True, False):
        raise InvalidInput(f"stale is True (only stale notes), False (only fresh ones) or None "
                           f"(both), not {value!r}")


def moment(value, name: str) -> datetime | None:
    """A filter's time: a datetime, a date (its midnight here) or ISO text (2024-03-01)."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            raise InvalidInput(f"{name} is a date or time like 2024-03-01 or "
                               f"2024-03-01T14:30, not {value!r}") from None
    elif isinstance(value, date) and not isinstance(value, datetime):
        value = datetime.combine(value, time())
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InvalidInput(f"{name} is a datetime, a date or text like 2024-03-01, not "
                           f"{type(value).__name__} {value!r}")
    try:
        value.astimezone(timezone.utc)
    except OverflowError:
        raise InvalidInput(f"{name} {value.isoformat()} is out of range in UTC") from None
    return value


def check_author(value) -> str:
    if not isinstance(value, str) or len(value.strip()) > MAX_NAME_CHARS:
        raise InvalidInput(f"An author is a user name of at most {MAX_NAME_CHARS} characters, "
                           f"not {value!r}")
    return unicode_text(value, "The author").strip()
