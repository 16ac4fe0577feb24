"""The command line: ``nbmemory remember | recall | edit | forget | list | show | history | ...``.

A composition root: it reads ``--store``/``--model`` (or ``NBMEMORY_HOME``/``NBMEMORY_MODEL``),
opens the store through :func:`open_memory`, prints a table for people or JSON with
``--json``, and turns every :class:`~nbmemory.errors.NbMemoryError` into one line on
stderr and an exit code. The store, the engine and the model load only when a command
needs them.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Iterator, Sequence

from . import syntax
from .cli_args import (EXIT_ERROR, EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE, CommandError,
                       build_parser, require_store)
from .cli_commands import (CREATING_COMMANDS, OTHER_COMMANDS, STORE_COMMANDS, emit_json,
                           open_memory, provenance, read_text, utf8)
from .errors import InvalidInput, ModelUnavailable, NbMemoryError, StoreUnavailable
from .wording import printable

def exit_code_for(exc: BaseException) -> int:
    if isinstance(exc, CommandError):
        return exc.code
    if isinstance(exc, InvalidInput):
        return EXIT_USAGE
    if isinstance(exc, (StoreUnavailable, ModelUnavailable)):
        return EXIT_UNAVAILABLE
    return EXIT_ERROR  # NotFound, Conflict and anything else the store refused


# Commands that print no answer of their own for --json to shape: said when it is given.
NO_JSON_COMMANDS = {"mcp": "it speaks MCP's JSON-RPC on stdout",
                    "serve": "it prints only its log"}


def run(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    _known_before_the_command(parser, argv)
    args, extra = parser.parse_known_args(argv)
    if getattr(args, "command", None) in NO_JSON_COMMANDS and (getattr(args, "json", False) or "--json" in extra):
        raise CommandError(f"--json does not apply to nbmemory {args.command}: "
                           f"{NO_JSON_COMMANDS[args.command]}", EXIT_USAGE)
    if extra:  # argparse would name the top-level help, not the command's
        where = f"nbmemory {args.command}" if getattr(args, "command", None) else "nbmemory"
        raise CommandError(f"unrecognized arguments: {' '.join(extra)} (see: {where} --help)",
                           EXIT_USAGE)
    vars(args).pop("_given", None)  # what _Once counted
    for name, default in (("store", None), ("model", None), ("json", False)):
        if not hasattr(args, name):
            setattr(args, name, default)
    if args.command in OTHER_COMMANDS:
        return OTHER_COMMANDS[args.command](args)
    new = require_store(args.store, creating=args.command in CREATING_COMMANDS)
    if args.command in CREATING_COMMANDS:
        check_before_creating(args, new)
    with open_memory(args.store, args.model) as mem, _printable_stdout():
        STORE_COMMANDS[args.command](mem, args)
    return EXIT_OK


def check_before_creating(args, new: bool) -> None:
    """Refuse a note or a file the store would refuse before the store named is made (``new``):
    a mistyped --store was left holding an empty store, and an owner, for a refused call."""
    if args.command == "remember":
        from .engine.validate import check_kind, check_priority, check_text

        args.text = read_text(args.text)  # stdin is read once
        check_text(args.text)
        for given, check in ((args.kind, check_kind), (args.priority, check_priority)):
            if given is not None:
                check(given)
        if new and args.supersedes is not None:  # a store not made yet has no note to replace
            from .config import locate_store

            raise StoreUnavailable(f"No store at {locate_store(args.store)}: there is no note "
                                   f"#{args.supersedes} to supersede. Check --store and "
                                   "NBMEMORY_HOME.")
        if new and args.about:
            from .about_here import check_before_creating as check_about

            check_about(args.store, args.about, provenance())
    elif args.command == "import":
        from .exchange import check_export

        check_export(os.path.abspath(args.path))


def _known_before_the_command(parser, argv: list[str]) -> None:
    """Refuse an option before the command that nbmemory does not have: argparse took the
    value after it for the command (``--mod hash:64 status``: "invalid choice 'hash:64'")."""
    options, at = parser._option_string_actions, 0
    while at < len(argv) and argv[at].startswith("-") and argv[at] != "--":
        name = argv[at].split("=", 1)[0]
        if name not in options:
            raise CommandError(f"unrecognized arguments: {name} (see: nbmemory --help)",
                               EXIT_USAGE)
        at += 2 if options[name].nargs != 0 and "=" not in argv[at] else 1


class _Printable:
    """stdout with a note's control characters shown, never obeyed (wording.printable)."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(printable(text))
        return len(text)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


@contextmanager
def _printable_stdout() -> Iterator[None]:
    stream, sys.stdout = sys.stdout, _Printable(sys.stdout)
    try:
        yield
    finally:
        sys.stdout = stream


def _tolerant_streams() -> None:
    """A console or pipe in a legacy code page (cp1252 on Windows) cannot show every
    character of a note: those are written escaped rather than failing the command."""
    for stream in (sys.stdout, sys.stderr):
        if not utf8(stream) and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``nbmemory`` command; returns (and exits with) the exit code."""
    json_mode = "--json" in (sys.argv[1:] if argv is None else argv)
    _tolerant_streams()
    try:
        code = run(argv)
    except (CommandError, NbMemoryError) as exc:
        code = exit_code_for(exc)
        message = (syntax.message(exc, syntax.CLI) if isinstance(exc, NbMemoryError)
                   else " ".join(str(exc).split()))
        print(f"nbmemory: {printable(message)}", file=sys.stderr)
        if json_mode:
            emit_json({"error": {"type": type(exc).__name__, "message": message, "exit": code}})
    except BrokenPipeError:  # the reader stopped early (| head): not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except OSError as exc:  # a file given to export/import cannot be read or written
        where = f": {exc.filename}" if exc.filename else ""
        print(f"nbmemory: {exc.strerror or exc}{where}. Check the path and its permissions.",
              file=sys.stderr)
        code = EXIT_ERROR
        if json_mode:
            emit_json({"error": {"type": type(exc).__name__, "message": str(exc), "exit": code}})
    except KeyboardInterrupt:
        # Work the store's owner was sent goes on there (a request is not taken back).
        print("nbmemory: interrupted here; what the store's owner was sent (an import, an "
              "export, a re-embed) may still finish there: nbmemory status shows the store, "
              "nbmemory stop stops its owner", file=sys.stderr)
        code = 130
    except Exception as exc:  # a bug: one line, and the way to get the traceback
        if os.environ.get("NBMEMORY_DEBUG"):
            raise
        print(f"nbmemory: unexpected {type(exc).__name__}: {exc}. Run again with "
              "NBMEMORY_DEBUG=1 for the traceback and report it.", file=sys.stderr)
        code = EXIT_ERROR
    sys.stdout.flush()
    return code


if __name__ == "__main__":
    sys.exit(main())
