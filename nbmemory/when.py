"""Times as people type them: ``7d``, ``12h``, ``3w`` ago, or an ISO date. As the end of
a range (``until``) a bare date means the whole of that day."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from .errors import InvalidInput

_AGO = re.compile(r"(\d{1,9})\s*([hdw])")
_UNITS = {"h": "hours", "d": "days", "w": "weeks"}


def parse_since(value: str | None, *, now: datetime | None = None) -> datetime | None:
    """The moment ``value`` names (this machine's local time when it has no zone, as the
    Python API reads a naive time); None for an empty value."""
    if not value or not value.strip():
        return None
    now = now or datetime.now(timezone.utc)
    match = _AGO.fullmatch(value.strip())
    try:
        if match:
            return now - timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
        parsed = datetime.fromisoformat(value.strip())
    except (ValueError, OverflowError):
        raise InvalidInput(f"Cannot read the time {value!r}; use 7d, 12h, 2w or 2026-01-31 "
                           "(no earlier than year 1)") from None
    if parsed.tzinfo:
        return parsed
    try:
        return parsed.astimezone()
    except (OverflowError, ValueError, OSError):  # year 1 or 9999 in a zone east or west
        return parsed.replace(tzinfo=timezone.utc)


def parse_until(value: str | None, *, now: datetime | None = None) -> datetime | None:
    """The end of a range (notes before it): as :func:`parse_since`, but a bare date
    ``2026-12-05`` takes that day in (until the next midnight)."""
    moment = parse_since(value, now=now)
    if moment is not None and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value.strip()):
        try:
            return moment + timedelta(days=1)
        except OverflowError:
            return moment.replace(hour=23, minute=59, second=59, microsecond=999999)
    return moment
