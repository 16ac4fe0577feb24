"""Errors raised by nbmemory. Every message says what to do next.

A message may name a command ("reinstate it first with {0}"): it then carries that
:class:`Command` and a ``{0}`` placeholder, and each front end writes the command in its
own syntax (``%memory reinstate 3`` in a notebook, ``nbmemory reinstate 3`` in a shell,
the tool call for agents) with :meth:`NbMemoryError.render`. ``str()`` gives the Python
API's form (``Memory.reinstate(3)``). Front ends translate once: magics raise
``UsageError``, the server maps the class to an HTTP status, the CLI prints the message
and exits non-zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Union


@dataclass(frozen=True)
class Command:
    """An operation the user could run next, with its arguments in the order every front
    end's syntax takes them (e.g. ``Command("reinstate", (3,))``)."""

    operation: str
    args: tuple = ()

    def to_list(self) -> list:
        return [self.operation, list(self.args)]

    @classmethod
    def from_list(cls, data) -> Command:
        operation, args = data
        return cls(str(operation), tuple(args))


# How a front end writes a command: a format string per operation ({0}, {1}: the
# arguments; {args}: all of them, space-separated) or a function of the command.
# Messages use {0}, {1}... for their commands and nothing else (no str.format).
Syntax = Mapping[str, Union[str, Callable[[Command], str]]]

# Memory.<operation>(<args>) for every operation but these
PYTHON: Syntax = {"supersede": "Memory.supersede({0}, <the corrected finding>)",
                  "about": "about={0!r}",
                  "define": ", or for a variable run the cell that defines it first"}


def python_call(command: Command) -> str:
    return f"Memory.{command.operation}({', '.join(repr(a) for a in command.args)})"


def write(command: Command, syntax: Syntax) -> str:
    form = syntax.get(command.operation)
    if form is None:
        return python_call(command)
    if callable(form):
        return form(command)
    return form.format(*command.args, args=" ".join(str(a) for a in command.args))


class NbMemoryError(Exception):
    """Base class for every error nbmemory raises on purpose.

    ``message`` may hold ``{0}``, ``{1}``... for ``commands``.
    """

    def __init__(self, message: str = "", *commands: Command):
        self.template = message
        self.commands = tuple(commands)
        super().__init__(self.render(PYTHON))

    def render(self, syntax: Syntax) -> str:
        """The message with its commands written in a front end's ``syntax``."""
        text = self.template
        for i, command in enumerate(self.commands):  # not str.format: notes hold braces
            text = text.replace("{%d}" % i, write(command, syntax))
        return text

    def to_dict(self) -> dict[str, Any]:
        """What crosses the owner's socket: enough to raise the same error on the other side."""
        return {"type": type(self).__name__, "message": str(self), "template": self.template,
                "commands": [c.to_list() for c in self.commands],
                "pid": getattr(self, "pid", None)}


def from_dict(payload: Mapping[str, Any], details: str = "") -> NbMemoryError:
    """The error :meth:`NbMemoryError.to_dict` described (``details`` appended), as the
    same class; an unknown class becomes a plain NbMemoryError naming it."""
    name = str(payload.get("type", "NbMemoryError"))
    template = payload.get("template") or payload.get("message", "")
    commands = [Command.from_list(c) for c in payload.get("commands") or ()]
    if details:
        template = f"{template} {details}"
    cls = globals().get(name)
    if not (isinstance(cls, type) and issubclass(cls, NbMemoryError)):
        return NbMemoryError(f"The store's owner failed: {name}: {payload.get('message', '')}")
    if issubclass(cls, StoreLocked):
        return cls(template, *commands, pid=payload.get("pid"))
    return cls(template, *commands)


class InvalidInput(NbMemoryError):
    """The caller passed something the store cannot accept (empty note, bad kind...)."""


class NotFound(NbMemoryError):
    """A note, snapshot or other named thing does not exist."""


class Conflict(NbMemoryError):
    """The request clashes with the store's state (duplicate name, revoked note...)."""


class StoreUnavailable(NbMemoryError):
    """The store cannot be opened or used right now."""


class OutcomeUnknown(StoreUnavailable):
    """The owner stopped or went silent after a write was sent: it may or may not have
    been applied."""


class DiskFull(StoreUnavailable):
    """The disk holding the store is full: what was acknowledged is kept, the call failed
    (a bulk one after writing part of it, perhaps)."""


class StoreLocked(StoreUnavailable):
    """Another process owns the store."""

    def __init__(self, message: str = "", *commands: Command, pid: int | None = None):
        super().__init__(message, *commands)
        self.pid = pid


class StoreTooNew(StoreUnavailable):
    """The store was written by a newer nbmemory and is left untouched."""


class StoreDamaged(StoreUnavailable):
    """The store's files disagree (writes were lost); nothing was touched."""


class StoreUnreachable(StoreUnavailable):
    """A team store's server cannot be reached right now (sending again is safe)."""


class ReadOnlyStore(NbMemoryError):
    """The team store grants this user reading only."""


class ModelUnavailable(NbMemoryError):
    """The embedding model cannot be loaded."""


class EmbedderMismatch(Conflict):
    """The store's vectors were made by another model than the configured one."""
