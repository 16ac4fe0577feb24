"""An export's notes checked before anything is written: what ``remember`` would refuse
(a kind, a priority, tags, empty text) and what the indexes cannot hold (an id out of
range, a replacement of a note the file does not have). Without these checks such a row
was committed and the import then failed while indexing, or left a store that no longer
opened."""

from __future__ import annotations

import unicodedata

from pathlib import Path
from typing import Any

from .engine.validate import normalise_tags
from .errors import InvalidInput
from .models import KINDS, PRIORITIES

# The indexes keep arrays indexed by note id, and a store numbers its notes from 1 without
# gaps: an id far beyond any store's is damage, and would cost memory in proportion to it.
MAX_IMPORTED_ID = 2**24


def check_notes(path: Path, rows: dict[str, list[dict[str, Any]]]) -> None:
    """Raise InvalidInput, naming the note and the field, for the first bad row."""
    ids = set()
    for row in rows.get("notes", ()):
        note = _id(path, row.get("id"), "a note's id")
        ids.add(note)
        _fields(path, f"note {note}", row, purged=row.get("status") == "purged")
        version = row.get("version")
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            _refuse(path, f"note {note} has version {version!r}, not a whole number from 1")
    for row in rows.get("notes", ()):
        replaced = row.get("supersedes")
        if replaced is not None and _id(path, replaced, f"note {row['id']}'s supersedes") \
                not in ids:
            _refuse(path, f"note {row['id']} replaces note {replaced}, which the file does "
                          "not hold")
    for row in rows.get("note_versions", ()):
        note = _id(path, row.get("note_id"), "a version's note id")
        if note not in ids:
            _refuse(path, f"a version of note {note}, which the file does not hold")
        _fields(path, f"note {note}'s version {row.get('version')!r}", row, purged=True)
    for row in rows.get("events", ()):
        if row.get("note_id") is not None:
            _id(path, row["note_id"], "an event's note id")


def _id(path: Path, value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or \
            not 1 <= value <= MAX_IMPORTED_ID:
        _refuse(path, f"{what} is {value!r}, not a note id from 1 to {MAX_IMPORTED_ID:,}")
    return value


def _fields(path: Path, what: str, row: dict[str, Any], *, purged: bool) -> None:
    """Kind, priority, tags and text as remember takes them (a purged note has no text,
    and neither has a version of one)."""
    text = row.get("text")
    if not isinstance(text, str) or not (purged or text.strip()):
        _refuse(path, f"{what} has no text")
    for field, allowed in (("kind", KINDS), ("priority", PRIORITIES)):
        if row.get(field) not in allowed:
            _refuse(path, f"{what} has {field} {row.get(field)!r}, none of {', '.join(allowed)}")
    tags = row.get("tags")
    try:
        # Composed or not (a tag typed decomposed before tags were composed) is the same tag.
        if not isinstance(tags, list) or list(normalise_tags(tags)) != [
                unicodedata.normalize("NFC", t) if isinstance(t, str) else t for t in tags]:
            raise InvalidInput(f"tags {tags!r} are not a list of tags as remember keeps them")
    except InvalidInput as exc:
        _refuse(path, f"{what}: {exc}")


def _refuse(path: Path, problem: str) -> None:
    raise InvalidInput(f"{path}: {problem}. The file is damaged or was edited by hand; "
                       "nothing was imported.")
