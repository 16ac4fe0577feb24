"""Reading a request: the JSON body (known fields only, typed) and query parameters.

Bad input is an ``InvalidInput`` (a 400 whose message says what to send instead); the
store is never reached with it.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from ..errors import InvalidInput
from ..when import parse_since, parse_until

STRING_FIELDS = ("text", "kind", "priority", "name", "message", "query")


AUTH_ARGS = {"token", "_xsrf"}  # read by jupyter_server itself
# A note holds at most 100,000 characters; a body many times that is refused before it is
# parsed (parsing holds several copies of it).
MAX_BODY_BYTES = 8 * 2**20


class RequestParsing:
    """Mixed into the base handler (a tornado ``RequestHandler``)."""

    def body(self, allowed: tuple[str, ...], required: tuple[str, ...] = ()) -> dict[str, Any]:
        """The JSON object in the body, with only ``allowed`` keys and all ``required`` ones."""
        raw = self.request.body or b"{}"
        if len(raw) > MAX_BODY_BYTES:
            raise InvalidInput(f"The request body has {len(raw):,} bytes; nbmemory takes at "
                               f"most {MAX_BODY_BYTES:,} (a note holds at most 100,000 "
                               "characters). Nothing was changed.")
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError):  # nested past Python's stack
            raise InvalidInput("The request body is not valid JSON; send a JSON object such "
                               'as {"text": "..."}.') from None
        if not isinstance(data, dict):
            raise InvalidInput("The request body must be a JSON object, not "
                               f"{type(data).__name__}.")
        unknown = sorted(set(data) - set(allowed))
        if unknown:
            raise InvalidInput(f"Unknown field(s) {', '.join(unknown)}; allowed: "
                               f"{', '.join(allowed) or 'none'}.")
        absent = [name for name in required if data.get(name) in (None, "")]
        if absent:
            raise InvalidInput(f"Missing field(s) {', '.join(absent)}.")
        for name in STRING_FIELDS:
            if name in data and data[name] is not None and not isinstance(data[name], str):
                raise InvalidInput(f"Field {name!r} must be a string.")
        tags = data.get("tags")
        if tags is not None and not isinstance(tags, str):  # a string is comma-separated
            if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
                raise InvalidInput("Field 'tags' must be a list of strings or a "
                                   "comma-separated string.")
        return data

    def arg(self, name: str, default: str | None = None) -> str | None:
        self.__dict__.setdefault("_asked", set()).add(name)
        value = self.get_query_argument(name, default)
        return value if value not in ("",) else default

    def refuse_unknown_args(self) -> None:
        """Refuse query parameters the route did not read: a misspelt one (``tag=`` for
        ``tags=``, ``as_of=`` on a route without it) would otherwise be ignored in silence.
        Called once the route has read its own, before it acts."""
        asked = self.__dict__.get("_asked", set())
        unknown = sorted(name for name in set(self.request.query_arguments) - asked - AUTH_ARGS
                         if not name.isdigit())  # JupyterLab's ?<timestamp> against caches
        if unknown:
            raise InvalidInput(f"Unknown query parameter(s) {', '.join(unknown)}; allowed: "
                               f"{', '.join(sorted(asked)) or 'none'}. Nothing was done.")

    def flag(self, name: str, default: bool) -> bool:
        """A yes/no query parameter: 1/true/yes, 0/false/no (anything else is refused)."""
        value = (self.arg(name) or "").lower()
        if not value:
            return default
        if value not in ("1", "true", "yes", "0", "false", "no"):
            raise InvalidInput(f"{name} is yes or no (1/true/yes, 0/false/no), not "
                               f"{self.arg(name)!r}.")
        return value in ("1", "true", "yes")

    def int_arg(self, name: str, default: int, low: int = 0, high: int | None = None) -> int:
        value = self.arg(name)
        if value is None:
            return default
        try:
            number = int(value)
        except ValueError:
            raise InvalidInput(f"Query parameter {name} must be a whole number, got {value!r}.") from None
        if number < low or (high is not None and number > high):
            bound = f"between {low} and {high}" if high is not None else f"at least {low}"
            raise InvalidInput(f"Query parameter {name} must be {bound}, got {number}.")
        return number

    def float_arg(self, name: str) -> float | None:
        value = self.arg(name)
        if value is None:
            return None
        try:
            return float(value)
        except ValueError:
            raise InvalidInput(f"Query parameter {name} must be a number, got {value!r}.") from None

    def stale_arg(self) -> bool | None:
        """``stale=stale`` (True: only stale notes), ``stale=fresh`` (False), or None."""
        value = self.arg("stale")
        if value not in (None, "stale", "fresh"):
            raise InvalidInput(f"Query parameter stale must be stale or fresh, got {value!r}.")
        return None if value is None else value == "stale"

    def time_arg(self, name: str) -> datetime | None:
        """``since``/``until`` as the CLI takes them (7d, 12h, 2w or an ISO date); a bare
        date as ``until`` takes that day in."""
        value = self.arg(name)
        if value is None:
            return None
        try:
            when = (parse_until if name == "until" else parse_since)(value)
        except InvalidInput:
            raise InvalidInput(f"Query parameter {name} must be 7d, 12h, 2w or an ISO date "
                               f"or time, e.g. 2026-01-31, got {value!r}.") from None
        try:
            return when.astimezone(timezone.utc)
        except OverflowError:
            raise InvalidInput(f"Query parameter {name} is out of range in UTC, got "
                               f"{value!r}.") from None
