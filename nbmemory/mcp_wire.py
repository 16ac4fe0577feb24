"""The agent's end of the MCP wire, read before the SDK reads it.

A client that cuts a string inside an emoji sends half of a UTF-16 pair as an escape
(``"\\ud83d"``): JSON that Python reads, but not text, and the SDK's reader (mcp 2.3) drops a
line it cannot parse without a reply, so the agent's call waited forever. Such a request is
passed on with each unpaired surrogate replaced (U+FFFD) and marked (``UNPAIRED`` in its
params' ``_meta``); the middleware (mcp_calls) refuses a marked tool call with an error that
says why, so nothing the agent did not send is stored. Every other line passes as it came.
"""

from __future__ import annotations

import json
import os
import re
import threading
from typing import Any

UNPAIRED = "nbmemory/unpaired"
_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPED = re.compile(rb"\\u[dD][89a-fA-F]")  # how a surrogate reaches the wire (\ud83d)


def _replaced(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_replaced(k): _replaced(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_replaced(v) for v in value]
    return value


def mended(line: bytes) -> bytes:
    """``line`` as the SDK should read it: a JSON-RPC request holding an unpaired surrogate,
    replaced and marked; any other line unchanged (and, without such an escape, unparsed)."""
    if not _ESCAPED.search(line):
        return line
    try:
        message = json.loads(line)
    except ValueError:
        return line
    if not (isinstance(message, dict) and "id" in message and isinstance(
            message.get("params", {}), dict)):
        return line
    replaced = _replaced(message)
    if replaced == message:
        return line
    message = replaced
    params = message.setdefault("params", {})
    meta = params.get("_meta")
    params["_meta"] = {**(meta if isinstance(meta, dict) else {}), UNPAIRED: True}
    return json.dumps(message).encode() + b"\n"


def mend_stdin() -> None:
    """Put a pipe on file descriptor 0, fed line by line from the real stdin through
    :func:`mended` by a thread; the pipe closes when the real stdin does. Without a stdin to
    read (descriptor 0 closed), the SDK is left to read it as it would."""
    try:
        source = os.dup(0)
    except OSError:
        return
    read_end, write_end = os.pipe()
    os.dup2(read_end, 0)
    os.close(read_end)

    def pump() -> None:
        with os.fdopen(source, "rb") as lines, os.fdopen(write_end, "wb", buffering=0) as sink:
            for line in lines:
                try:
                    sink.write(mended(line))
                except OSError:  # the server has stopped reading: nothing left to serve
                    return

    threading.Thread(target=pump, name="nbmemory-mcp-stdin", daemon=True).start()
