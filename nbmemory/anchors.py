"""Anchors: what a note is about, and a fingerprint of it taken now.

- ``file``: size, mtime and a SHA-256 of the content, read in chunks (a file over
  :data:`FULL_HASH_LIMIT` gets a sampled hash of its start, middle and end).
- ``data``: a file DuckDB can read (CSV, TSV, Parquet, JSON, NDJSON): the file
  fingerprint plus its columns with types and its row count, read through a separate
  in-memory DuckDB connection (never the store's).
- ``dir``: the names of its entries; ``glob``: the matching files with their fingerprints.
- ``variable``: a value in the kernel's namespace (pandas or polars DataFrame, Series,
  ndarray, or anything): type, columns, dtypes, shape and a hash of small values. Taken
  in the kernel by the magics (:func:`variable_fingerprint` imports nothing heavy).
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
SMALL_FRAME_ROWS = 10_000  # polars frames up to this many rows get a content hash
# pandas: a frame of up to FULL_HASH_CELLS values is hashed whole; a larger one by rows
# spread evenly over it (about SAMPLE_CELLS values): a 10k x 100 frame of strings took
# 0.9 s a cell touching it, and frames over 10k rows were compared by shape alone.
FULL_HASH_CELLS = 100_000
SAMPLE_CELLS = 10_000
ROWS_SAMPLE_SCHEME = "rows-1"
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
    names = sorted(entry.name + ("/" if entry.is_dir() else "") for entry in os.scandir(path))
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


# -- fingerprints of kernel values ------------------------------------------------------

def _module(value: Any) -> str:
    return type(value).__module__.split(".", 1)[0]


def _short_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:32]


# polars documents DataFrame.hash_rows and Series.hash as unstable across polars versions:
# samples hash the column values written out canonically instead (see polars_sample).
POLARS_SAMPLE_SCHEME = "polars-values-1"
# Columns written as their physical numbers (numpy bytes of a fixed dtype) plus a null mask.
POLARS_NUMBERS = {"Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64",
                  "Float32", "Float64", "Boolean", "Date", "Datetime", "Duration", "Time"}


def _polars_column(series) -> bytes:
    """One polars column's values, written the same way by every polars version.

    Numbers, booleans and temporal values: their physical values (days, or ticks of the
    column's time unit, as Arrow defines them) as numpy bytes, then the null mask.
    Categoricals as their strings (their codes depend on the string cache). Anything else
    (strings, decimals, lists, structs, binary, objects): ``repr`` of the Python values.
    """
    dtype_name = series.dtype.base_type().__name__
    if dtype_name in ("Categorical", "Enum"):
        series = series.cast(str)
    elif dtype_name in POLARS_NUMBERS:
        physical = series.to_physical()
        values = physical.fill_null(False if dtype_name == "Boolean" else 0).to_numpy()
        nulls = physical.is_null().to_numpy()
        return b"n" + values.dtype.str.encode() + b"|" + values.tobytes() + nulls.tobytes()
    return b"p" + repr(series.to_list()).encode()


def polars_sample(columns) -> str:
    """A hash of polars columns (names and values), stable across polars versions."""
    digest = hashlib.sha256()
    for series in columns:
        for part in (str(series.name).encode(), _polars_column(series)):
            digest.update(len(part).to_bytes(8, "little") + part)
    return digest.hexdigest()[:32]


def _rows(value, out: dict[str, Any]):
    """A pandas frame or series to hash: whole, or rows spread evenly over it (first and
    last included; ``out`` then names the scheme)."""
    rows, width = len(value), (value.shape[1] if value.ndim == 2 else 1) or 1
    if rows * width <= FULL_HASH_CELLS:
        return value
    out["sample_scheme"] = ROWS_SAMPLE_SCHEME
    step = -(-rows // max(2, SAMPLE_CELLS // width))  # rounded up
    positions = [*range(0, rows, step)]
    return value.iloc[positions + [rows - 1] if positions[-1] != rows - 1 else positions]


def _pandas_hashes(pd, value, **options):
    """pandas' row hashes; a column of lists or dicts (unhashable) is hashed as their reprs."""
    try:
        return pd.util.hash_pandas_object(value, **options).to_numpy()
    except TypeError:
        return pd.util.hash_pandas_object(value.map(repr), **options).to_numpy()


# Lists, tuples, dicts and sets are hashed by their content, item by item (see _digest):
# their repr held objects' memory addresses (a false alarm at every run) and shortened
# the frames inside them (a change missed).
VALUES_SAMPLE_SCHEME = "values-1"
MAX_DIGESTED_ITEMS = 20_000
MAX_DIGESTED_BYTES = 8 * 2**20
_SCALARS = (str, bytes, int, float, bool, complex, type(None))


def _digest(value: Any, digest, budget: list[int]) -> bool:
    """Feed ``value``'s content into ``digest``: scalars by repr, containers item by item
    (dict items and set members in a fixed order), frames and arrays by their own sample,
    other objects by repr unless it is the default one (an address: by type alone). False
    when a frame inside is too big to hash or the value exceeds ``budget`` (items, bytes)."""
    budget[0] -= 1
    if budget[0] < 0:
        return False
    if isinstance(value, _SCALARS):
        part = f"{type(value).__name__}:{value!r}".encode()
    elif isinstance(value, (list, tuple)):
        digest.update(f"{type(value).__name__}[{len(value)}".encode())
        return all(_digest(item, digest, budget) for item in value)
    elif isinstance(value, (dict, set, frozenset)):
        pairs = value.items() if isinstance(value, dict) else ((item, None) for item in value)
        digest.update(f"{type(value).__name__}{{{len(value)}".encode())
        return all(_digest(key, digest, budget) and _digest(item, digest, budget)
                   for key, item in sorted(pairs, key=lambda pair: repr(pair[0])))
    elif _module(value) in ("pandas", "polars", "numpy"):
        inner = variable_fingerprint(value)
        if "sample" not in inner:
            return False
        part = repr(sorted(inner.items())).encode()
    elif type(value).__repr__ is object.__repr__:
        part = f"{_module(value)}.{type(value).__qualname__}".encode()
    else:
        part = repr(value).encode()
    budget[1] -= len(part)
    digest.update(len(part).to_bytes(8, "little") + part)
    return budget[1] >= 0


def variable_fingerprint(value: Any) -> dict[str, Any]:
    """Type, schema, shape and (for small values) a content hash of a kernel value.

    pandas and polars are recognised by their module, never imported here.
    """
    kind = type(value).__name__
    out: dict[str, Any] = {"type": f"{_module(value)}.{kind}"}
    module = _module(value)
    try:
        if module == "pandas" and kind == "DataFrame":
            import pandas as pd

            out["columns"] = [[str(c), str(t)] for c, t in value.dtypes.items()]
            out["shape"] = list(value.shape)
            part = _rows(value, out)
            hashed = _pandas_hashes(pd, part, index=True)
            out["sample"] = _short_hash(hashed.tobytes() + repr(list(value.columns)).encode())
        elif module == "pandas" and kind == "Series":
            import pandas as pd

            out["columns"] = [[str(value.name), str(value.dtype)]]
            out["shape"] = list(value.shape)
            out["sample"] = _short_hash(_pandas_hashes(pd, _rows(value, out)).tobytes())
        elif module == "polars" and kind in ("DataFrame", "LazyFrame"):
            schema = value.collect_schema() if kind == "LazyFrame" else value.schema
            out["columns"] = [[str(c), str(t)] for c, t in schema.items()]
            if kind == "DataFrame":
                out["shape"] = list(value.shape)
                if value.height <= SMALL_FRAME_ROWS:
                    out["sample"] = polars_sample(value.get_columns())
                    out["sample_scheme"] = POLARS_SAMPLE_SCHEME
        elif module == "polars" and kind == "Series":
            out["columns"] = [[str(value.name), str(value.dtype)]]
            out["shape"] = [len(value)]
            if len(value) <= SMALL_FRAME_ROWS:
                out["sample"] = polars_sample([value])
                out["sample_scheme"] = POLARS_SAMPLE_SCHEME
        elif module == "numpy" and kind == "ndarray":
            out["columns"] = [["", str(value.dtype)]]
            out["shape"] = list(value.shape)
            if value.nbytes <= 8 * 2**20:
                out["sample"] = _short_hash(value.tobytes())
        elif isinstance(value, (str, bytes, int, float, bool, complex, type(None))):
            out["sample"] = _short_hash(repr(value).encode())
        elif isinstance(value, (list, tuple, dict, set, frozenset)):
            out["shape"] = [len(value)]
            digest = hashlib.sha256()
            if _digest(value, digest, [MAX_DIGESTED_ITEMS, MAX_DIGESTED_BYTES]):
                out["sample"] = digest.hexdigest()[:32]
                out["sample_scheme"] = VALUES_SAMPLE_SCHEME
        elif hasattr(value, "__len__"):
            out["shape"] = [len(value)]
    except Exception as exc:  # an odd object: keep what we have, say why
        out["partial"] = f"{type(exc).__name__}: {exc}"[:200]
    return out


def describe_variable(fingerprint: dict[str, Any]) -> str:
    """``DataFrame 1000×5`` for messages."""
    kind = fingerprint.get("type", "").rsplit(".", 1)[-1]
    shape = fingerprint.get("shape")
    return f"{kind} {'×'.join(map(str, shape))}" if shape else kind


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
        return None
    for base in roots:
        path = absolute(spec, base)
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
