"""Paths a note's text mentions: tokens that look like paths, the ones that exist, and
the keyword terms a file's name gives (what ambient recall and the about index match).

Written in a script without spaces, a path runs into the words around it
(``文件数据/表.csv的金额``): the paths inside such a token are tried, longest first. A
path with spaces written without quotes (``~/Google Drive/sales.csv``,
``C:\\Users\\Ada Lovelace\\x.csv``) is tried with up to ``MAX_SPACED`` words before its
last part, longest first; the part is then no path of its own.
"""

from __future__ import annotations

import os
import re
import unicodedata
from pathlib import Path
from typing import Iterable

from .anchors import readable
from .tokenizer import UNSPACED, fold, is_term

MAX_TEXT_ANCHORS = 20
MAX_LOOKUPS = 5000  # places on disk one text may be looked for at (about 50 ms)
_UNSPACED = re.compile(UNSPACED)
_EXTENSION_END = re.compile(r"\.[A-Za-z0-9]{1,10}(?![A-Za-z0-9])")
MAX_INSIDE = 60  # paths tried inside one such token
MAX_PATH = 260  # characters: no path inside such a token is longer (Windows' old limit)
MAX_RUN = 1024  # characters: a longer token is not looked inside
MAX_SPACED = 4  # words before a path's last part that may belong to it (My Data/x.csv)


# Path-like tokens: contain a slash or end in a file extension; ``:214`` line suffixes go.
# Windows' separators and drives count too (data\orders.csv, C:\Users\ada\x.csv).
_QUOTED = re.compile(r"`([^`\n]+)`|\"([^\"\n]+)\"|'([^'\n]+)'")
# Also ~\data\x.csv and a share's \\server\x.csv; never from a lone \ (a regex's \d).
_TOKEN = re.compile(r"(?<![\w@\\])"
                    r"(?:[A-Za-z]:[/\\]|\\\\(?=\w)|(?:~|\.{1,2})[/\\]|(?:~|\.{1,2})?/?)"
                    r"(?:[\w.\-]+[/\\])*[\w.\-]+[/\\]?")
_URL = re.compile(r"(?<![\w+.-])[A-Za-z][\w+.-]*://\S+")  # from a run's start: linear
_LINE = re.compile(r"(?::\d+){1,2}$|#L\d+(?:-L?\d+)?$")


def path_candidates(text: str) -> list[str]:
    """Tokens of ``text`` that look like paths (not yet checked against the disk)."""
    seen: dict[str, None] = {}  # ordered; a look-up is O(1) (a long note holds thousands)
    text = _URL.sub(" ", text)
    quoted = [next(g for g in m.groups() if g) for m in _QUOTED.finditer(text)]
    for token in quoted + _TOKEN.findall(text):
        token = token.strip().rstrip(".,;:!?)").replace("\\", "/")
        token = _LINE.sub("", token)
        if "://" in token or not token or token in (".", "..", "/", "~"):
            continue
        name = token.rstrip("/").rsplit("/", 1)[-1]
        if "/" not in token and not re.search(r"\.\w{1,10}$", name):
            continue
        seen[token] = None
    return list(seen)


_WORD = re.compile(r"\S+")
_NAMED_FILE = re.compile(r"\.(?=\d*[A-Za-z])\w{1,10}$")  # x.csv, not 3.5


def spaced_candidates(text: str) -> list[list[tuple[str, int, int]]]:
    """For each path-like word, the runs of words ending in it with single spaces between
    them (``My Data/x.csv``), longest first, with where each starts and ends in ``text``:
    paths with spaces, written without quotes."""
    text = _URL.sub(lambda m: " " * len(m.group()), text)  # same length: places stay
    words = list(_WORD.finditer(text))
    groups = []
    for i, last in enumerate(words):
        end = _LINE.sub("", last.group().rstrip(".,;:!?)\"'`"))
        if not ("/" in end or "\\" in end or _NAMED_FILE.search(end)):
            continue
        first = i
        while first > 0 and i - first < MAX_SPACED and \
                text[words[first - 1].end():words[first].start()] == " " and \
                words[first - 1].group()[-1] not in ".,;:!?)\"'`":  # a clause ends there
            first -= 1
        group = []
        for start in range(first, i):
            run = (text[words[start].start():last.start()] + end).lstrip("([<\"'`")
            if len(run) <= MAX_PATH:
                group.append((run.replace("\\", "/"), words[start].start(), last.start() + len(end)))
        if group:
            groups.append(group)
    return groups


def paths_in_text(text: str, roots: Iterable[Path], *, exclude: Iterable[Path] = ()) -> list[Path]:
    """Existing files and directories ``text`` mentions, resolved against ``roots`` in order.
    Paths with spaces come first; the words of one found are then no paths of their own
    (not ``Data/x.csv`` of ``My Data/x.csv``)."""
    roots = [Path(r) for r in roots if r]
    excluded: set[Path] | None = None  # resolved only once something exists (most texts: never)
    found: list[Path] = []
    lookups = 0

    def look(token: str, budget: int) -> bool:
        """Whether ``token`` names something on disk under a root (added to ``found``)."""
        nonlocal excluded, lookups
        options = _options(token, roots)[:budget - lookups]
        lookups += len(options)
        for option in options:
            try:
                if option.exists() and readable(option):
                    if excluded is None:
                        excluded = {Path(p).resolve() for p in exclude}
                    # The link's own name, as --about keeps it: repointed, the note is stale.
                    named = option.parent.resolve() / option.name
                    if option.resolve() not in excluded and named not in found:
                        found.append(named)
                    return True
            except OSError:
                continue
        return False

    for group in spaced_candidates(text):  # a quarter of the look-ups at most: a long
        if lookups >= MAX_LOOKUPS // 4:    # note's paths without spaces come after them
            break
        for run, start, end in group:
            if look(run, MAX_LOOKUPS // 4):
                text = text[:start] + " " * (end - start) + text[end:]
                break
    for token in path_candidates(text):
        if len(found) >= MAX_TEXT_ANCHORS or lookups >= MAX_LOOKUPS:
            break
        look(token, MAX_LOOKUPS)
    return found[:MAX_TEXT_ANCHORS]


def _options(token: str, roots: list[Path]) -> list[Path]:
    """Where ``token`` may be on disk: under each root (or itself, absolute), then, if it
    runs into words of a script without spaces, each path inside it, longest first; each
    in both Unicode forms (a folder copied from a Mac keeps é as e and an accent)."""
    options = []
    for inside in [token, *_inside(token)]:
        forms = dict.fromkeys([inside] + ([unicodedata.normalize(f, inside) for f in ("NFD", "NFC")]
                                          if not inside.isascii() else []))
        for form in forms:
            # os.path.expanduser leaves ~nosuchuser alone; Path.expanduser raises on it.
            path = Path(os.path.expanduser(form))
            options += [path] if path.is_absolute() else [r / path for r in roots]
    return list(dict.fromkeys(options))


def _inside(token: str) -> list[str]:
    """The paths inside a token that runs a path into words without spaces, longest first:
    from after each such character to each file extension's end (数据/表.csv in
    文件数据/表.csv的金额), at most MAX_INSIDE of them, none over MAX_PATH characters."""
    if len(token) > MAX_RUN or not _UNSPACED.search(token):
        return []
    starts = [0] + [i for i in range(1, len(token)) if _UNSPACED.match(token[i - 1])]
    ends = [m.end() for m in _EXTENSION_END.finditer(token)]
    found: list[str] = []
    for length in sorted({b - a for a in starts for b in ends if 0 < b - a <= MAX_PATH},
                         reverse=True)[:MAX_INSIDE]:
        for a in starts:
            part = token[a:a + length]
            if a + length in ends and part != token and part[0] not in "./" and len(found) < MAX_INSIDE:
                found.append(part)
    return found


# A term of note text that may name a file: it has a slash or a file-like suffix.
_FILE_SUFFIX = re.compile(
    r"\.(?:csv|tsv|txt|parquet|pq|json|jsonl|ndjson|xlsx?|xml|ya?ml|toml|ini|cfg|conf|sql|"
    r"db|sqlite3?|duckdb|feather|arrow|ipc|avro|orc|pkl|pickle|h5|hdf5?|npy|npz|gz|zip|bz2|"
    r"zst|xz|log|md|rst|html?|ipynb|py|r|sh|dat|sav|dta|sas7bdat)$")


def is_file_term(term: str) -> bool:
    return "/" in term or bool(_FILE_SUFFIX.search(term))


def file_terms(path: Path, roots: Iterable[Path] = ()) -> list[str]:
    """The keyword-index terms a note holds when its text names ``path``: the path
    relative to each root, the absolute path and the bare file name, lower-cased."""
    names = []
    for root in roots:
        try:
            names.append(path.relative_to(root).as_posix())
        except ValueError:
            continue
    names += [path.as_posix().lstrip("/"), path.name]
    # Whole terms as tokenize() keeps them (tests/test_ambient.py checks they agree).
    names = [unicodedata.normalize("NFKC", n) for n in names]
    return [fold(n) for n in dict.fromkeys(names)
            if is_term(n) and ("/" in n or "." in n or "-" in n or "_" in n)]
