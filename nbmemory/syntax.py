"""How each front end writes a command a message suggests (see :class:`errors.Command`).

The engine says *what* to run next (``Command("reinstate", (3,))``); a notebook user is
told ``%memory reinstate 3``, a shell user ``nbmemory reinstate 3``, an agent the tool
call. Operations a front end has no command for fall back to the Python API's form.
"""

from __future__ import annotations

from .errors import Command, NbMemoryError, Syntax, write

MAGIC: Syntax = {
    "remember": "%remember {0}",
    "recall": "%recall {0}",
    "forget": "%forget {args}",
    "reinstate": "%memory reinstate {args}",
    "reopen": "%memory reopen {args}",
    "refute": "%memory refute {args}",
    "verify": "%memory verify {args}",
    "reembed": "%memory reembed",
    "reindex": "%memory reindex",
    "snapshot": "%snapshot {0}",
    "snapshots": "%snapshot --list",
    "snapshot_diff": "%snapshot --diff {0}",
    "supersede": "%remember --supersedes {0} <the corrected finding>",
    # Not commands: how a message names what a note is about, and what a kernel can do.
    "about": "--about {0}",
    "define": ", or for a variable run the cell that defines it first",
}

CLI: Syntax = {
    "remember": 'nbmemory remember "{0}"',
    "recall": 'nbmemory recall "{0}"',
    "forget": "nbmemory forget {args}",
    "reinstate": "nbmemory reinstate {args}",
    "verify": "nbmemory verify {args}",
    "reopen": "%memory reopen {args} (in a notebook)",  # no CLI command: a question's
    "refute": "%memory refute {args} (in a notebook)",  # answer is given where it is asked
    "reembed": "nbmemory reindex --reembed",
    "reindex": "nbmemory reindex",
    "snapshot": "nbmemory snapshot {0}",
    "snapshots": "nbmemory snapshot --list",
    "snapshot_diff": "nbmemory snapshot --diff {0}",
    "supersede": 'nbmemory remember --supersedes {0} "<the corrected finding>"',
    "about": "--about {0}",
    "define": "",  # a shell has no variables
}


def _tool(name: str, *params: str):
    def write(command: Command) -> str:
        args = ", ".join(f"{p}={a!r}" for p, a in zip(params, command.args))
        return f"the {name} tool ({args})" if args else f"the {name} tool"
    return write


MCP: Syntax = {
    "remember": _tool("remember", "text"),
    "recall": _tool("recall", "query"),
    "forget": _tool("forget", "note_ids"),
    "reinstate": _tool("reinstate", "note_id"),
    "verify": _tool("verify", "note_id"),
    "snapshot": _tool("snapshot", "name"),
    "snapshots": _tool("snapshot_list"),
    "snapshot_diff": _tool("snapshot_diff", "a"),
    "reembed": lambda c: "nbmemory reindex --reembed in a shell",
    "reindex": lambda c: "nbmemory reindex in a shell",
    "reopen": lambda c: f"%memory reopen {' '.join(map(str, c.args))} in a notebook",
    "refute": lambda c: f"%memory refute {' '.join(map(str, c.args))} in a notebook",
    "supersede": lambda c: f"the remember tool (text=<the corrected finding>, "
                           f"supersedes={c.args[0]})",
    "about": "about={0!r}",
    "define": "",
}


# For the REST API (the panel and other clients show the server's message): the request.
REST: Syntax = {
    "remember": "'{0}'",
    "recall": "'{0}'",
    "forget": "POST /nbmemory/notes/{0}/forget",
    "reinstate": "POST /nbmemory/notes/{0}/reinstate",
    "verify": "POST /nbmemory/notes/{0}/verify",
    "reopen": "%memory reopen {args} (in a notebook)",
    "refute": "%memory refute {args} (in a notebook)",
    "reembed": "nbmemory reindex --reembed (in a shell)",
    "reindex": "nbmemory reindex (in a shell)",
    "snapshot": "'{0}'",
    "snapshots": "GET /nbmemory/snapshots",
    "snapshot_diff": "GET /nbmemory/snapshots/diff?from={0}",
    "supersede": "POST /nbmemory/notes/{0}/supersede",
    "about": "about {0!r}",
    "define": "",
}


def forgot(note_ids, syntax: Syntax) -> str:
    """What a front end says after forgetting notes, with the one command that undoes it."""
    ids = list(note_ids)
    listed = ", ".join(f"#{i}" for i in ids)
    return f"Forgot {listed}. Undo with: {write(Command('reinstate', tuple(ids)), syntax)}"


def still_replaced(notes, syntax: Syntax, get) -> str:
    """After forgetting or purging corrections: the notes they replaced (read with ``get``)
    that stay replaced, and the command that brings each back; else nothing."""
    replaced = [n for n in notes if n.supersedes and get(n.supersedes).status == "superseded"]
    return "\n".join(f"#{n.supersedes}, which #{n.id} replaced, stays replaced; bring it back "
                     f"with: {write(Command('reinstate', (n.supersedes,)), syntax)}"
                     for n in replaced)


def message(exc: NbMemoryError, syntax: Syntax) -> str:
    """``exc``'s message with its commands in ``syntax``, on one line."""
    return " ".join(exc.render(syntax).split())
