"""Anchors: what a note is about, and a fingerprint of it taken now.

- ``file``: size, mtime and a SHA-256 of the content, read in chunks (a file over
  :data:`FULL_HASH_LIMIT` gets a sampled hash of its start, middle and end).
- ``data``: a file DuckDB can read (CSV, TSV, Parquet, JSON, NDJSON): the file
  fingerprint plus its columns with types and its row count, read through a separate
  in-memory DuckDB connection (never the store's).
- ``dir``: the names of its entries; ``glob``: the matching files with their fingerprints.
- ``variable``: a value in the kernel's namespace (pandas or polars DataFrame, Series,
  ndarray, or anything): type, columns, dtypes, shape and a hash of small values, taken
  in the kernel by the magics (:mod:`.values`).
- ``cell``: the source cell a note was written in (hash of its source).

Paths inside the workspace (git root, or the store's parent) are kept relative to it.
"""

from __future__ import annotations

import glob as globmod
import hashlib
import os
import re
import stat
import time
import unicodedata
from functools import lru_cache
from pathlib import Path
from typing import Any

from .models import Anchor
from .tokenizer import UNSPACED

CHUNK = 1 << 20
FULL_HASH_LIMIT = 1 << 30  # bytes; larger files get a sampled hash
ROW_COUNT_LIMIT = 512 << 20  # bytes; larger text data files get no row count (a full scan)
MAX_DIR_NAMES = 200  # kept in the fingerprint to say what was added/removed
MAX_GLOB_MATCHES = 500
# A glob may look at this many directory entries (and for this long) before it is refused:
# `--about '/**/*'` walked the whole disk while every other write waited.
MAX_GLOB_ENTRIES = 50_000
MAX_GLOB_SECONDS = 2.0
# Never read: reading /proc/kmsg (or a FIFO) blocks forever, and restarting the owner would
# resend the same request.
PSEUDO_FILESYSTEMS = ("/proc", "/sys", "/dev")
DATA_SUFFIXES = {".csv": "csv", ".tsv": "csv", ".txt": None, ".parquet": "parquet",
                 ".pq": "parquet", ".json": "json", ".jsonl": "json", ".ndjson": "json"}
GLOB_CHARS = set("*?[")


# -- paths ----------------------------------------------------------------------------------

def display_path(path: Path, root: Path) -> str:
    """``path`` relative to ``root`` (POSIX) when inside it, else absolute."""
    try:
        return path.relative_to(root).as_posix() or "."
    except ValueError:
        return str(path)


def absolute(target: str, root: Path) -> Path:
    path = Path(target).expanduser()
    return path if path.is_absolute() else root / path


def data_format(path: Path) -> str | None:
    suffixes = [s.lower() for s in path.suffixes[-2:]]
    if suffixes and suffixes[-1] in (".gz", ".zst"):
        suffixes = suffixes[:-1]
    return DATA_SUFFIXES.get(suffixes[-1]) if suffixes else None


def is_glob(target: str) -> bool:
    return any(c in GLOB_CHARS for c in target)


def glob_match(pattern: str, path: str) -> bool:
    """Does ``path`` match ``pattern`` as glob.glob reads it (the notes' globs are taken
    that way): ``*`` and ``?`` within one folder's name, ``**`` a whole part for any number
    of folders, none too. fnmatch's ``*`` crossed folders and its ``**/`` needed one."""
    return _glob_regex(pattern.replace(os.sep, "/")).match(path.replace(os.sep, "/")) is not None


@lru_cache(maxsize=1024)
def _glob_regex(pattern: str) -> re.Pattern:
    out, at = [], 0
    while at < len(pattern):
        whole = at == 0 or pattern[at - 1] == "/"
        if whole and pattern.startswith("**/", at):
            out.append("(?:(?!\\.)[^/]*/)*")
            at += 3
            continue
        if whole and pattern[at:] == "**":
            out.append("(?!\\.).*")
            break
        char, end = pattern[at], pattern.find("]", at + 2)
        if char == "[" and end != -1:
            body = pattern[at + 1:end]
            negated = body.startswith("!")
            body = re.sub(r"([\\\[^])", r"\\\1", body[negated:])  # ^ and [ as themselves
            out.append("[" + "^" * negated + body + "]")
            at = end + 1
            continue
        hidden = "(?!\\.)" if whole and char in "*?" else ""  # as glob: no .dot names
        out.append(hidden + ({"*": "[^/]*", "?": "[^/]"}.get(char) or re.escape(char)))
        at += 1
    return re.compile("".join(out) + r"\Z", re.S)


# -- what may be read --------------------------------------------------------------------

class Unreadable(ValueError):
    """A path nbmemory will not fingerprint (a device, a FIFO, /proc, or a glob too broad)."""


def _pseudo(path: Path) -> bool:
    text = os.path.abspath(path)
    return any(text == p or text.startswith(p + os.sep) for p in PSEUDO_FILESYSTEMS)


def readable(path: Path) -> bool:
    """True for a regular file or a directory outside /proc, /sys and /dev."""
    if _pseudo(path):
        return False
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISREG(mode) or stat.S_ISDIR(mode)


def check_readable(path: Path) -> None:
    if not readable(path):
        raise Unreadable(f"{path} is not a regular file or directory, or lies in "
                         f"{', '.join(PSEUDO_FILESYSTEMS)}: nbmemory never reads those")


# -- fingerprints of files --------------------------------------------------------------

def hash_file(path: Path, size: int | None = None) -> str:
    """SHA-256 of a file read in chunks; files over FULL_HASH_LIMIT are sampled."""
    return hash_contents(path, size)[0]


def hash_contents(path: Path, size: int | None = None) -> tuple[str, str | None]:
    """:func:`hash_file`, and the SHA-256 of a text file read with CRLF line ends as LF
    where it has some (else None): a checkout on Windows (git's autocrlf) is the same file
    as one on Linux."""
    size = path.stat().st_size if size is None else size
    digest, text, crlf, held = hashlib.sha256(), hashlib.sha256(), False, b""
    with open(path, "rb") as handle:
        if size <= FULL_HASH_LIMIT:
            while chunk := handle.read(CHUNK):
                digest.update(chunk)
                if handle.tell() == len(chunk) and b"\0" in chunk[:8192]:
                    text = None  # a binary file (a NUL near its start)
                if text is None:
                    continue
                chunk, held = held + chunk, b""
                if chunk.endswith(b"\r"):  # its \n may start the next chunk
                    chunk, held = chunk[:-1], b"\r"
                crlf = crlf or b"\r\n" in chunk
                text.update(chunk.replace(b"\r\n", b"\n"))
            if text is not None:
                text.update(held)
            return digest.hexdigest(), text.hexdigest() if crlf and text is not None else None
        digest.update(str(size).encode())
        for offset in (0, size // 2, max(0, size - CHUNK)):
            handle.seek(offset)
            digest.update(handle.read(CHUNK))
    return "sampled:" + digest.hexdigest(), None


def same_text(new: dict[str, Any], old: dict[str, Any]) -> bool:
    """Do two file fingerprints hold the same bytes, or the same text in other line ends?
    (A fingerprint from before text hashes has only the bytes': compared as bytes too.)"""
    return (new.get("sha256") == old.get("sha256") or
            new.get("text_sha256", new.get("sha256")) == old.get("text_sha256", old.get("sha256")))


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


class DataReader:
    """Schema and row counts of data files through a private in-memory DuckDB."""

    def __init__(self):
        self._con = None

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None

    def describe(self, path: Path, fmt: str, size: int) -> dict[str, Any]:
        import duckdb

        if self._con is None:
            self._con = duckdb.connect(":memory:")
        reader = {"csv": "read_csv", "parquet": "read_parquet", "json": "read_json"}[fmt]
        source = f"{reader}({_sql_string(str(path))})"
        try:
            columns = [[r[0], r[1]] for r in
                       self._con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()]
            out: dict[str, Any] = {"columns": columns}
            if fmt == "parquet" or size <= ROW_COUNT_LIMIT:
                out["rows"] = int(self._con.execute(f"SELECT count(*) FROM {source}").fetchone()[0])
            return out
        except duckdb.Error as exc:
            return {"unreadable": str(exc).splitlines()[0][:200]}


def stat_key(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def wal_key(path: Path) -> list[int] | None:
    """A database's write-ahead log beside it (DuckDB's NAME.wal, SQLite's NAME-wal) as
    [mtime_ns, size], or None when there is none or it is empty: a connection's writes sit
    there until a checkpoint copies them into the file."""
    for name in (path.name + ".wal", path.name + "-wal"):
        key = stat_key(path.with_name(name))
        if key is not None and key[1] > 0:
            return list(key)
    return None


def file_fingerprint(path: Path, reader: DataReader | None = None) -> dict[str, Any]:
    check_readable(path)
    st = path.stat()
    sha, text_sha = hash_contents(path, st.st_size)
    out: dict[str, Any] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha}
    if text_sha:
        out["text_sha256"] = text_sha
    if (wal := wal_key(path)) is not None:
        out["wal"] = wal
    fmt = data_format(path)
    if fmt and reader is not None:
        out.update(reader.describe(path, fmt, st.st_size))
    return out


def dir_fingerprint(path: Path) -> dict[str, Any]:
    # A name that is not UTF-8 (unzipped from a Windows archive) as \xe9: storable text.
    names = sorted(entry.name.encode(errors="surrogateescape").decode(errors="backslashreplace")
                   + ("/" if entry.is_dir() else "") for entry in os.scandir(path))
    digest = hashlib.sha256("\n".join(names).encode()).hexdigest()[:32]
    out: dict[str, Any] = {"entries": len(names), "listing": digest,
                           "mtime_ns": path.stat().st_mtime_ns}
    if len(names) <= MAX_DIR_NAMES:
        out["names"] = names
    return out


def glob_matches(pattern: str, root: Path) -> list[Path]:
    """Regular files ``pattern`` matches, sorted, found within a budget of entries and time;
    :class:`Unreadable` for a glob that would take longer."""
    path = absolute(pattern, root)
    if _pseudo(Path(str(path).split("*")[0].split("?")[0].split("[")[0] or "/")):
        raise Unreadable(f"{pattern}: nbmemory never reads {', '.join(PSEUDO_FILESYSTEMS)}")
    deadline = time.monotonic() + MAX_GLOB_SECONDS
    found = []
    for seen, match in enumerate(globmod.iglob(str(path), recursive="**" in pattern)):
        if seen >= MAX_GLOB_ENTRIES or time.monotonic() > deadline:
            raise Unreadable(f"{pattern} matches too much (more than {seen:,} paths looked at "
                             f"in {MAX_GLOB_SECONDS:g} s); narrow it")
        if not _pseudo(Path(match)) and os.path.isfile(match):
            found.append(Path(match))
    return sorted(found)


def glob_fingerprint(pattern: str, root: Path) -> dict[str, Any]:
    """The first MAX_GLOB_MATCHES files the glob matches, each as a file's fingerprint;
    ``more``: how many it matches past them (counted, not read)."""
    files: dict[str, list] = {}
    matches = glob_matches(pattern, root)
    for match in matches[:MAX_GLOB_MATCHES]:
        if not readable(match):
            continue
        st = match.stat()
        sha, text_sha = hash_contents(match, st.st_size)  # as file_fingerprint's
        entry = [st.st_size, st.st_mtime_ns, sha] + ([text_sha] if text_sha else [])
        files[display_path(match, root)] = entry
    more = len(matches) - MAX_GLOB_MATCHES
    return {"files": files, **({"more": more} if more > 0 else {})}


# -- building anchors -------------------------------------------------------------------

def take(kind: str, target: str, root: Path, reader: DataReader | None = None) -> dict[str, Any]:
    """A fresh fingerprint of a file-system anchor; ``{"exists": False}`` when it is gone."""
    if kind == "glob":
        try:
            return glob_fingerprint(target, root)
        except Unreadable:
            return {"files": {}, "too_broad": True}
    path = absolute(target, root)
    try:
        if kind == "dir":
            return dir_fingerprint(path) if path.is_dir() else {"exists": False}
        if kind in ("file", "data"):
            return file_fingerprint(path, reader) if readable(path) and path.is_file() \
                else {"exists": False}
    except (OSError, Unreadable):
        return {"exists": False}
    raise ValueError(f"not a file-system anchor kind: {kind}")


def path_anchor(path: Path, root: Path, reader: DataReader | None, origin: str) -> Anchor:
    target = display_path(path, root)
    if path.is_dir():
        kind = "dir"
    else:
        kind = "data" if data_format(path) else "file"
    return Anchor(kind, target, take(kind, target, root, reader), origin)


def spec_anchor(spec: str, roots: list[Path], root: Path, reader: DataReader | None) -> Anchor | None:
    """An anchor for ``--about PATH|GLOB``; None when nothing there exists or matches."""
    spec = spec.strip()
    if is_glob(spec):
        for base in roots:
            pattern = str(absolute(spec, base))
            if glob_matches(pattern, root):
                target = display_path(Path(pattern), root)
                return Anchor("glob", target, glob_fingerprint(target, root), "about")
    # A path (or a glob matching nothing that is a path: run[1]/out.csv), as typed or in
    # the other Unicode form (a folder copied from a Mac keeps é as e and an accent).
    forms = dict.fromkeys([spec, *(unicodedata.normalize(f, spec) for f in ("NFC", "NFD"))])
    for path in (absolute(form, base) for base in roots for form in forms):
        if path.exists():
            check_readable(path)
            # A link is watched as named (data/latest.csv repointed is a change), its folder
            # by where it really is.
            named = path.parent.resolve() / path.name if path.is_symlink() else path.resolve()
            return path_anchor(named, root, reader, "about")
    return None


def cell_anchor(notebook: str, cell_id: str, cell_hash: str, root: Path) -> Anchor:
    """``saved``: the notebook was on disk then, so its going away later is news."""
    target = f"{display_path(Path(notebook), root)}#{cell_id}"
    return Anchor("cell", target, {"sha": cell_hash, "at": time.time(),
                                   "saved": os.path.exists(notebook)}, "cell")


def split_cell_target(target: str) -> tuple[str, str]:
    notebook, _, cell_id = target.rpartition("#")
    return notebook, cell_id


# -- pointer-only notes -----------------------------------------------------------------

_LOCATION = re.compile(r"""(://|/|:\d+$|#L\d+|\.\w{1,10}$|\w\(\)$|^L\d+$)""")
_FILLER = {"see", "look", "at", "in", "on", "line", "lines", "check", "cf", "cf.", "ref",
           "refer", "to", "the", "here", "there", "this", "file", "code", "note", "around",
           "near", "go", "read", "also", "and", "function", "method", "def", "class", "todo",
           "->", "→", "-", ":", "=>", "source", "src", "impl", "implementation", "of"}


# Four characters in a row of a script written without spaces: a phrase, not a location.
_UNSPACED = re.compile(UNSPACED + "{4}")


def own_anchor(item: Any) -> bool:
    """A check or a cell's output: what a note's text was checked against or read from, not
    what it is about (a note that supersedes another keeps the other's files beside them)."""
    kind = item.kind if isinstance(item, Anchor) else (
        item.get("kind") if isinstance(item, dict) else None)
    return kind in ("check", "evidence")


def pointer_only(text: str) -> bool:
    """True for a note that is only a location (``see resolver.rs:214``), not a finding."""
    words = [w.strip("`'\"()[],;.!?") for w in text.split()]
    words = [w for w in words if w]
    if not words or len(words) > 12 or _UNSPACED.search(text):  # words without spaces
        return False
    locations = [w for w in words if _LOCATION.search(w)]
    rest = [w for w in words if w not in locations and w.lower() not in _FILLER
            and not w.isdigit()]
    return bool(locations) and len(rest) <= 1
