"""JSON encoding of operation arguments and results.

Plain JSON values pass through; datetimes and domain objects become
``{"$type": NAME, "value": ...}`` using their ``to_dict``/``from_dict``. Tuples and sets
arrive as lists, dict keys as strings. Callables (progress callbacks) are not sent.
"""

from __future__ import annotations

from datetime import date, datetime, time
from pathlib import PurePath
from typing import Any

from ..errors import InvalidInput
from ..models import (Anchor, Change, Event, Hit, Hits, Note, Page, Provenance, Snapshot,
                      SnapshotDiff, StaleReason)

TYPES: dict[str, type] = {cls.__name__: cls for cls in (
    Note, Hit, Hits, Snapshot, SnapshotDiff, Change, Event, Page, Provenance, Anchor,
    StaleReason)}


class Unsendable(InvalidInput, TypeError):
    """An argument that cannot cross processes: the caller's mistake, said as such."""


def _here(value: datetime) -> datetime:
    """A naive time as this process's local time (Python's reading of it), with its zone:
    the owner may run in another zone."""
    try:
        return value if value.tzinfo else value.astimezone()
    except (OverflowError, ValueError, OSError):  # year 1, or 9999
        return value


def encode(value: Any) -> Any:
    """``value`` as JSON-ready data; raises TypeError for what cannot cross processes."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, datetime):
        return {"$type": "datetime", "value": _here(value).isoformat()}
    if isinstance(value, date):  # a day: its midnight here, as validate.moment reads it
        return encode(datetime.combine(value, time()))
    cls = TYPES.get(type(value).__name__)
    if cls is not None and isinstance(value, cls):
        return {"$type": cls.__name__, "value": value.to_dict()}
    if isinstance(value, dict):
        out = {str(k): encode(v) for k, v in value.items()}
        return {"$type": "dict", "value": out} if "$type" in out else out
    if isinstance(value, (list, tuple, set, frozenset)):
        return [encode(v) for v in value]
    if isinstance(value, PurePath):
        return str(value)
    if hasattr(value, "dtype") and hasattr(value, "item"):  # numpy scalar
        return encode(value.item())
    raise Unsendable(f"Cannot send a {type(value).__name__} to the store's owner process; "
                     "give text, numbers, lists or dicts (bytes: decode them first)")


def decode(value: Any) -> Any:
    if isinstance(value, list):
        return [decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    kind = value.get("$type")
    if kind is None:
        return {k: decode(v) for k, v in value.items()}
    if kind == "datetime":
        return datetime.fromisoformat(value["value"])
    if kind == "dict":
        return {k: decode(v) for k, v in value["value"].items()}
    cls = TYPES.get(kind)
    if cls is None:
        raise ValueError(f"Unknown type {kind!r} from the store's owner; "
                         "is it running another nbmemory version?")
    return cls.from_dict(value["value"])


def encode_arguments(arguments: dict[str, Any]) -> dict[str, Any]:
    """Arguments for the wire; callables (progress callbacks) are left out."""
    return {k: encode(v) for k, v in arguments.items() if not callable(v)}
