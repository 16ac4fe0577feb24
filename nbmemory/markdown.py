"""Readable Markdown export: one page per tag (or kind) and an index, ordered so that
two exports of the same notes diff well. (The lossless format is exchange's JSON Lines.)"""

from __future__ import annotations

import hashlib
import html
import os
import re
import unicodedata
from pathlib import Path
from typing import Iterable

from .errors import InvalidInput
from .models import Note
from .wording import counted, local, provenance_line, stale_marker


def export_markdown(notes: Iterable[Note], directory: str | Path, *, by: str = "tag") -> list[Path]:
    """One Markdown page per tag (or kind) plus an index, ordered so it diffs well."""
    if by not in ("tag", "kind"):
        raise InvalidInput(f"Group pages by 'tag' or 'kind', not {by!r}")
    directory = Path(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidInput(f"Cannot write Markdown pages to {directory}: {exc.strerror}. "
                           "Check the path and its permissions.") from None
    earlier = _pages_of_earlier_export(directory)
    groups: dict[str, list[Note]] = {}
    for note in sorted(notes, key=lambda n: n.id):
        keys = (note.tags or ("untagged",)) if by == "tag" else (note.kind,)
        for key in keys:
            groups.setdefault(key, []).append(note)
    written = []
    index = ["# nbmemory notes", "", f"Grouped by {by}.", ""]
    # Tags "a.b" and "a-b" (or "index") must not share a page, nor be a name Windows keeps
    # for a device (aux.md is the device aux there): those become aux-2.md everywhere.
    taken = {"index", *_DEVICES}
    for key in sorted(groups):
        name, base, n = _slug(key), _slug(key), 1
        while name in taken:
            n += 1
            name = f"{base}-{n}"
        taken.add(name)
        page = directory / f"{name}.md"
        lines = [f"# {_inline(key)}", ""]
        for note in groups[key]:
            lines += _note_markdown(note)
        page.write_text("\n".join(lines).rstrip() + "\n", encoding="utf-8", newline="\n")
        written.append(page)
        label = _inline(key).replace("[", "\\[").replace("]", "\\]")
        index.append(f"- [{label}]({page.name}) ({counted(len(groups[key]), 'note')})")
    (directory / "index.md").write_text("\n".join(index) + "\n", encoding="utf-8", newline="\n")
    now = {os.path.normcase(page.name) for page in written}
    for page in earlier:  # a tag no note has now: its page would mislead
        if os.path.normcase(page.name) not in now and _is_our_page(page):
            page.unlink(missing_ok=True)
    return [directory / "index.md", *written]


_LINK = re.compile(r"^- \[.*\]\(([^()]+)\) \(\d+ notes?\)$")


def _pages_of_earlier_export(directory: Path) -> set[Path]:
    """The pages an earlier export into ``directory`` wrote, as its index lists them: only
    names this module makes (no path, no index.md); other files there stay."""
    try:
        lines = (directory / "index.md").read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return set()
    if not lines or lines[0] != "# nbmemory notes":
        return set()
    names = {m.group(1) for line in lines if (m := _LINK.match(line))}
    return {directory / name for name in names
            if name.endswith(".md") and name[:-3] == _slug(name[:-3]) and name != "index.md"}


def _is_our_page(page: Path) -> bool:
    """A page as this module writes it: its first line is a ``# key`` title."""
    try:
        with open(page, encoding="utf-8") as handle:
            return handle.readline().startswith("# ")
    except (OSError, UnicodeDecodeError):
        return False


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _inline(text: str) -> str:
    """A label (a tag, an author, a path) on one line, its ``<`` and ``&`` shown as
    written: a renderer that allows raw HTML would run a tag named ``<img onerror=...>``.
    A note's own text is Markdown and exported as the note was written."""
    return html.escape(_one_line(text), quote=False)


# A page's name in UTF-8 bytes, under the 255 a file name may have (with -2.md after it): a
# tag of 100 CJK characters is 300 bytes, one of 50 emoji 300 letters (u1f389...).
NAME_BYTES = 200
_DEVICES = {"con", "prn", "aux", "nul",
            *(f"{port}{i}" for port in ("com", "lpt") for i in range(10))}


def _slug(text: str) -> str:
    """A file name for a tag: its letters (with their marks: बिक्री, not ब-क-र-), a symbol
    by its code point (🎉 is u1f389, the same in every export), anything else a dash. One
    over NAME_BYTES is cut there, with a hash of the whole so that two stay apart."""
    def part(c: str) -> str:
        if c.isalnum() or c in "-_" or unicodedata.category(c)[0] == "M":
            return c
        return f"u{ord(c):x}" if unicodedata.category(c) == "So" else "-"
    name = "".join(map(part, unicodedata.normalize("NFC", text.lower()))) or "notes"
    if len(name.encode()) <= NAME_BYTES:
        return name
    cut = name.encode()[:NAME_BYTES - 9].decode("utf-8", "ignore")
    while unicodedata.category(cut[-1])[0] == "M":  # end on a whole letter
        cut = cut[:-1]
    return f"{cut}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def _note_markdown(note: Note) -> list[str]:
    lines = [f"## #{note.id}: {note.kind}, {note.priority} priority", "", note.text, ""]
    meta = [f"- written {local(note.created_at):%Y-%m-%d} by {_inline(note.author or 'unknown')}"
            + (f", version {note.version} of {local(note.updated_at):%Y-%m-%d}"
               if note.version > 1 else "")]
    if note.tags:
        meta.append("- tags: " + _inline(", ".join(note.tags)))
    meta.append("- from: " + _inline(provenance_line(note)))
    if note.stale or note.resolution:  # a question's answer too ([CONFIRMED: ...])
        meta.append("- " + _inline(stale_marker(note)))
    return lines + meta + [""]
