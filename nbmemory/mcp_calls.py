"""What happens around each MCP tool call: the session's counters and the hint that
notes can be fetched again by id (:class:`Session`), and the middleware that refuses
unknown tools and arguments and makes validation errors one readable line."""

from __future__ import annotations

import re
import threading
from typing import Any

from mcp.types import CallToolResult, TextContent

from .mcp_wire import UNPAIRED

HINT = ("Notes returned in this session can be fetched again by id with show(note_ids=[...]); "
        "no need to re-read files or repeat searches just to be safe.")


class Session:
    """What this MCP session did: per-tool counters and the re-retrievable hint."""

    def __init__(self, hint_tokens: int = 4000, hint_calls: int = 25):
        self.hint_tokens = hint_tokens
        self.hint_calls = hint_calls
        self.tools: dict[str, dict[str, int]] = {}
        self.tokens_returned = 0
        self.content_calls = 0
        self.hints = 0
        self._next_tokens = hint_tokens
        self._next_calls = hint_calls
        self._lock = threading.Lock()

    def _counters(self, tool: str) -> dict[str, int]:
        return self.tools.setdefault(tool, {"calls": 0, "errors": 0, **({"empty": 0} if tool == "recall" else {})})

    def count(self, tool: str, *, error: bool = False) -> None:
        with self._lock:
            counters = self._counters(tool)
            counters["calls"] += 1
            counters["errors"] += int(error)

    def count_empty(self, tool: str) -> None:
        """A call that succeeded but found nothing (a recall with no hits)."""
        with self._lock:
            self._counters(tool)["empty"] += 1

    def returned(self, texts: list[str]) -> str | None:
        """Account for note content sent to the agent; the hint when a threshold is passed.

        Tokens are approximated as characters / 4. The hint is given once per threshold
        crossed, not on every call after it.
        """
        with self._lock:
            self.tokens_returned += sum(len(t) for t in texts) // 4
            self.content_calls += 1
            if self.tokens_returned >= self._next_tokens or self.content_calls >= self._next_calls:
                self._next_tokens = self.tokens_returned + self.hint_tokens
                self._next_calls = self.content_calls + self.hint_calls
                self.hints += 1
                return HINT
            return None

    def to_dict(self) -> dict[str, Any]:
        with self._lock:
            recall = self.tools.get("recall", {})
            return {"tools": {k: dict(v) for k, v in sorted(self.tools.items())},
                    "recalls": recall.get("calls", 0), "empty_recalls": recall.get("empty", 0),
                    "tokens_returned": self.tokens_returned, "hints_given": self.hints,
                    "hint_every_tokens": self.hint_tokens, "hint_every_calls": self.hint_calls}


_PYDANTIC = re.compile(r"^(?P<loc>\S[^\n]*)\n  (?P<msg>[^\n]*?) \[type=(?P<type>[\w.]+),"
                       r"(?: input_value=(?P<value>.*?), input_type=\w+)?\]", re.M)


def clear_validation_error(tool: str, text: str) -> str:
    """Pydantic's multi-line report -> one line naming each bad argument. An argument that
    takes a value or a list of them is reported once, for the value ("should be 'finding',
    ...", not also "should be a valid list")."""
    problems: dict[str, list[tuple[int, str]]] = {}  # by argument: (depth, what)
    for match in _PYDANTIC.finditer(text):
        path = match.group("loc").split(".")
        loc = path[0]
        if match.group("type") == "missing":
            problems.setdefault(loc, []).append((len(path), f"{loc} is required"))
        else:
            problems.setdefault(loc, []).append(
                (len(path), f"{loc}: {match.group('msg')} (got {match.group('value')})"))
    if not problems:
        return text
    # A list with one bad item: that item ("got 5"), not also the list as a value.
    problems = {loc: [p for d, p in said if d == max(d for d, _ in said)] for loc, said in
                problems.items()}
    problems = {loc: [p for p in said if "should be a valid list" not in p] or said
                for loc, said in problems.items()}
    said = [p for ps in problems.values() for p in ps]
    return f"Bad arguments for {tool}: {'; '.join(said)}. Nothing was changed."


def _middleware(session: Session, parameters: dict[str, set[str]]):
    """Reject unknown arguments, make validation errors readable, count every tool call."""

    def error(text: str) -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)

    async def middleware(ctx, call_next):
        if ctx.method != "tools/call":
            return await call_next(ctx)
        params = ctx.params or {}
        name = params.get("name", "")
        arguments = params.get("arguments") or {}
        if (params.get("_meta") or {}).get(UNPAIRED):  # see mcp_wire
            if name in parameters:
                session.count(name, error=True)
            return error("A text in this call holds half of a UTF-16 pair (an escape such as "
                         "\\ud83d without its partner, as when a string is cut inside an "
                         "emoji), which is not text. Send whole characters. Nothing was changed.")
        if name not in parameters:
            return error(f"Unknown tool {name!r}; nbmemory's tools are "
                         f"{', '.join(sorted(parameters))}. Nothing was changed.")
        if not isinstance(arguments, dict):
            session.count(name, error=True)
            return error(f"The arguments for {name} must be an object of its parameters "
                         f"({', '.join(sorted(parameters[name]))}), not "
                         f"{type(arguments).__name__}. Nothing was changed.")
        unknown = sorted(set(arguments) - parameters[name])
        if unknown:
            session.count(name, error=True)
            return error(f"Unknown argument(s) for {name}: {', '.join(unknown)}; it takes "
                         f"{', '.join(sorted(parameters[name])) or 'no arguments'}. "
                         "Nothing was changed.")
        result = await call_next(ctx)
        # The SDK hands middleware the wire form (a dict) or a model; read both.
        if isinstance(result, dict):
            is_error, content = bool(result.get("isError")), result.get("content") or []
            first = content[0].get("text", "") if content else ""
        else:
            is_error, content = bool(getattr(result, "is_error", False)), getattr(result, "content", [])
            first = getattr(content[0], "text", "") if content else ""
        if name in parameters:
            session.count(name, error=is_error)
        if is_error and first:
            text = first
            prefix = f"Error executing tool {name}: "
            text = text[len(prefix):] if text.startswith(prefix) else text
            if "validation error" in text:
                text = clear_validation_error(name, text)
            result = error(text)
        return result

    return middleware
