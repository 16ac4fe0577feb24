"""Text laid out in a terminal's columns: CJK and emoji take two, combining marks none.

textwrap counts characters, so it sized a Chinese line at twice the terminal's width and,
cutting only at spaces, shortened a Chinese note to "...". English text is wrapped exactly
as textwrap does it, and shortened so too unless that keeps less than half the room (a long
path: ``see /data/warehouse/orde [...]``, not ``see [...]``).
"""

from __future__ import annotations

import textwrap
import unicodedata


def _char_width(char: str) -> int:
    if unicodedata.category(char) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def width(text: str) -> int:
    """The columns ``text`` takes in a terminal."""
    return len(text) if text.isascii() else sum(map(_char_width, text))


def _narrow(text: str) -> bool:
    """One column a character: textwrap measures it right."""
    return text.isascii() or all(_char_width(c) == 1 for c in text)


def ljust(text: str, size: int) -> str:
    return text + " " * (size - width(text))


def _fit(text: str, room: int) -> str:
    """The longest start of ``text`` at most ``room`` columns wide (with its marks), not
    ending in a joiner or a virama that would join it to what was cut off (👨‍👩‍, क्षिक्)."""
    used = 0
    for i, char in enumerate(text):
        used += _char_width(char)
        if used > room:
            head = text[:i]
            while head and (head[-1] == "\u200d" or unicodedata.combining(head[-1]) == 9):
                head = head[:-1]
            return head
    return text


def shorten(text: str, size: int, placeholder: str = " [...]") -> str:
    """``textwrap.shorten`` by columns: ``text`` on one line of at most ``size`` columns, cut
    at a space in the second half of the room, else mid-run (Chinese has no spaces)."""
    text = " ".join(text.split())
    if width(text) <= size:
        return text
    room = size - width(placeholder)
    if _narrow(text):
        cut = textwrap.shorten(text, size, placeholder=placeholder)
        if len(cut) - len(placeholder) > room // 2:
            return cut
    head = _fit(text, room)
    space = len(head) if text[len(head)] == " " else head.rfind(" ")
    if space > 0 and width(head[:space]) > room // 2:
        head = head[:space]
    return head.rstrip() + placeholder


def _atoms(text: str) -> list[list[str]]:
    """``text`` as [piece, kind] to wrap: runs of spaces, words, and single wide
    characters (a line may break after any), closing punctuation kept with what it ends."""
    atoms: list[list[str]] = []
    for char in text:
        size = _char_width(char)
        kind = "space" if char.isspace() else "wide" if size == 2 else "word"
        last = atoms[-1] if atoms else None
        # A mark or zero-width character goes with what it follows, but not with a space,
        # which a line break drops (a bidi control there was lost, its closing one kept).
        if last and (size == 0 and kind != "space" != last[1] or kind == last[1] != "wide"
                     or kind == "wide" and last[1] != "space"
                     and unicodedata.category(char) in ("Po", "Pe", "Pf")):
            last[0] += char
        else:
            atoms.append([char, kind])
    return atoms


def wrap(text: str, size: int, indent: str = "", first: str | None = None) -> list[str]:
    """``text`` (one paragraph) in lines of at most ``size`` columns, each after ``indent``
    (the first after ``first``, if given)."""
    first = indent if first is None else first
    if _narrow(text):
        return textwrap.wrap(text, size, initial_indent=first, subsequent_indent=indent)
    lines, line, used, gap = [], "", 0, 0

    def room() -> int:
        return max(1, size - width(indent if lines else first))

    for piece, kind in _atoms(text):
        if kind == "space":
            gap = 1 if line else 0
            continue
        wide = width(piece)
        if used + gap + wide <= room():
            line, used, gap = line + " " * gap + piece, used + gap + wide, 0
            continue
        if line:
            lines.append(line)
        while wide > room():  # a word wider than the line: break it
            head = _fit(piece, room()) or piece[0]
            lines.append(head)
            piece, wide = piece[len(head):], wide - width(head)
        line, used, gap = piece, wide, 0
    if line:
        lines.append(line)
    return [(indent if i else first) + line for i, line in enumerate(lines)]
