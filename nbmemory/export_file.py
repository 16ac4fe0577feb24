"""Reading an export file (exchange.py writes it): its header, its rows and its end line,
each checked before anything is written."""

from __future__ import annotations

import base64
import json
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import InvalidInput
from .export_rows import check_notes
from .models import STATUSES
from .store import SCHEMA_VERSION
from .store.rows import decode_vector

FORMAT = "nbmemory-export"
# 2: vectors in half precision (store/rows.py); version 1 files still import.
FORMAT_VERSION = 2


@dataclass
class Export:
    """A parsed, validated export file."""

    header: dict[str, Any]
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def table(self, name: str) -> list[dict[str, Any]]:
        return self.rows.get(name, [])

    def keep_vectors(self, model: str, dims: int | None) -> int:
        """Leave out the vectors that are not ``dims`` long for ``model`` (or, for another
        model or with ``dims`` None, not as long as most of its): a file damaged or edited by
        hand, or made by a model of that name with other dimensions. Their texts are
        embedded again; a vector of another length kept would stop the store's index from
        being built. How many."""
        rows = self.table("embeddings")
        lengths = [_length(row.get("vector")) for row in rows]
        counted: dict[Any, Counter] = {}
        for row, length in zip(rows, lengths):
            counted.setdefault(row.get("model"), Counter())[length] += 1
        usual = {m: c.most_common(1)[0][0] for m, c in counted.items()}
        if dims is not None:
            usual[model] = dims
        kept = [row for row, length in zip(rows, lengths) if length == usual[row.get("model")]]
        if len(kept) < len(rows):
            self.rows["embeddings"] = kept
        return len(rows) - len(kept)

    def dims(self, model: str) -> int | None:
        """How long the file's vectors for ``model`` are (after :meth:`keep_vectors`, all
        alike); None: it brings none."""
        return next((_length(row.get("vector")) for row in self.table("embeddings")
                     if row.get("model") == model), None)


def _length(value: Any) -> int:
    """How many numbers a vector as exported holds (-1: it cannot be read)."""
    try:
        return len(decode_vector(base64.b64decode(value, validate=True)))
    except (TypeError, ValueError):
        return -1


MAX_LINE = 16 << 20  # characters: the longest line (one row) an export can hold


def _lines(handle, path: Path):
    """The file's lines, each read with a bound: a 2 GB file with no newline must not be
    read into memory whole before it is refused."""
    number = 0
    while True:
        try:
            line = handle.readline(MAX_LINE + 1)
        except UnicodeDecodeError:
            raise InvalidInput(f"{path} is not UTF-8 text: not an nbmemory export. "
                               "Nothing was imported.") from None
        if not line:
            return
        number += 1
        if len(line) > MAX_LINE:
            raise InvalidInput(f"{path} line {number} is longer than {MAX_LINE:,} characters: "
                               "not an nbmemory export, or damaged. Nothing was imported.")
        if line.strip():  # a blank line (an editor's at the end) holds nothing to refuse
            yield number, line


def check_export(path: str | Path) -> None:
    """Refuse what is no export at all (no file, a directory, no export's header), reading
    its first line only: before an import creates the store it is given."""
    path = Path(path)
    with _opened(path) as handle:
        number, line = next(_lines(handle, path), (0, ""))
    if not number:
        raise InvalidInput(f"{path} is empty. Nothing was imported.")
    _header(_record(line, number, path), path)


@contextmanager
def _opened(path: Path):
    if path.is_dir():
        raise InvalidInput(f"{path} is a directory; give the .jsonl file nbmemory export wrote "
                           "(Markdown pages cannot be imported).")
    if not path.is_file():
        raise InvalidInput(f"No file {path}; give the path of a file made by nbmemory export.")
    with open(path, encoding="utf-8-sig", errors="strict") as handle:  # a BOM is no data
        yield handle


def _record(line: str, number: int, path: Path) -> Any:
    try:
        return json.loads(line)
    except (json.JSONDecodeError, RecursionError):
        raise InvalidInput(f"{path} line {number} is not JSON: this is not an nbmemory "
                           "export, or the file is damaged. Nothing was imported.") from None


def _header(record: Any, path: Path) -> Export:
    """The export an export's first line begins, or why it is none this nbmemory reads."""
    if not isinstance(record, dict) or record.get("format") != FORMAT \
            or not isinstance(record.get("format_version", 0), int):
        raise InvalidInput(f"{path} is not an nbmemory export (no valid header line). "
                           "Nothing was imported.")
    if record.get("format_version", 0) > FORMAT_VERSION:
        raise InvalidInput(f"{path} was written by a newer nbmemory (export format "
                           f"{record['format_version']}, this one reads up to {FORMAT_VERSION}): "
                           "upgrade to import it.")
    schema = record.get("schema", 0)
    if isinstance(schema, int) and schema > SCHEMA_VERSION:  # its columns would go
        raise InvalidInput(f"{path} was written by a newer nbmemory (store schema {schema}, "
                           f"this one has {SCHEMA_VERSION}), whose fields this one would drop: "
                           "upgrade to import it.")
    return Export(record)


def read_export(path: str | Path) -> Export:
    """Parse and check a whole export file; raises InvalidInput before any write."""
    path = Path(path)
    export, end = None, None
    with _opened(path) as handle:
        for number, line in _lines(handle, path):
            record = _record(line, number, path)
            if export is None:
                export = _header(record, path)
                continue
            kind = record.get("type") if isinstance(record, dict) else None
            if end is not None:
                raise InvalidInput(f"{path} has data after its end line (line {number}).")
            if kind == "row" and isinstance(record.get("table"), str) \
                    and isinstance(record.get("row"), dict):
                row, status = record["row"], record["row"].get("status")
                if record["table"] == "notes" and status not in STATUSES:
                    raise InvalidInput(f"{path} line {number}: a note's status {status!r} is "
                                       f"none of {', '.join(STATUSES)}. Nothing was imported.")
                export.rows.setdefault(record["table"], []).append(row)
            elif kind == "end" and isinstance(record.get("counts"), dict):
                end = record
            else:
                raise InvalidInput(f"{path} line {number} is not an export record.")
    if export is None:
        raise InvalidInput(f"{path} is empty. Nothing was imported.")
    counts = {t: len(r) for t, r in export.rows.items()}
    if end is None or {t: n for t, n in end["counts"].items() if n} != counts:
        raise InvalidInput(f"{path} is truncated (its end line is missing or its row counts "
                           "differ). Export again; nothing was imported.")
    check_notes(path, export.rows)
    return export


__all__ = ["Export", "check_export", "read_export"]
