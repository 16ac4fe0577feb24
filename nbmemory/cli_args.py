"""The ``nbmemory`` command's arguments: the parser of every subcommand, the exit codes,
the error the CLI raises itself, and the check of the store a command names."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime

from ._version import __version__
from .errors import InvalidInput
from .models import MODE_HELP, MODES
from .options import one_dash
from .when import parse_since

EXIT_OK = 0
EXIT_ERROR = 1        # the store refused the request (not found, conflict), or doctor found a problem
EXIT_USAGE = 2        # bad arguments or bad input
EXIT_UNAVAILABLE = 3  # the store or the model cannot be used right now

EXIT_CODES = """\
exit codes:
  0  success
  1  the store refused the request (no such note, conflict), doctor found a
     problem, or an unexpected error
  2  usage error: bad arguments or input (empty note, unknown kind, a file for
     export/import that cannot be written or read, ...)
  3  store unavailable: owned by another process, unreadable, written by a newer
     nbmemory, a team store's server unreachable or refusing this user, or the
     embedding model cannot be loaded

environment:
  NBMEMORY_HOME   store directory or a team store's postgresql:// address (default:
                  nearest .nbmemory/ above the working directory, else the git root,
                  else the working directory)
  NBMEMORY_MODEL  embedding model (default all-MiniLM-L6-v2; hash:64 for tests)
"""


class CommandError(Exception):
    """A problem found by the CLI itself, with its exit code."""

    def __init__(self, message: str, code: int = EXIT_USAGE):
        super().__init__(message)
        self.code = code


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors that say where the help is, and without abbreviated
    options (``--mode`` was taken for ``--model``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, allow_abbrev=False, **kwargs)
        self.register("action", None, _Once)
        self.register("action", "store", _Once)
        self.register("action", "last", _Last)  # --store, --model: an alias's

    def error(self, message: str):
        raise CommandError(f"{message} (see: {self.prog} --help)", EXIT_USAGE)

    def parse_known_args(self, args=None, namespace=None):
        for word in (sys.argv[1:] if args is None else args):
            if word == "--":
                break
            long = one_dash(word.split("=")[0], self._option_string_actions)
            if long and word.split("=")[0] not in self._option_string_actions:
                self.error(f"unknown option {word.split('=')[0]}: {long} takes two dashes "
                           "(or write -- before a text that starts with a dash); nothing was "
                           "done")
        return super().parse_known_args(args, namespace)


class _Last(argparse.Action):
    """Store the value; given twice, the last one counts (argparse's own "store")."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)


class _Once(_Last):
    """An option that takes one value, refused when given twice (argparse kept the last
    one without a word: -t a -t b dropped a), as the magics refuse it."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = namespace.__dict__.setdefault("_given", set())
        if self.dest in given:
            how = " (several tags: -t a,b)" if self.dest == "tags" else ""
            parser.error(f"option {'/'.join(self.option_strings)} was given twice; it takes "
                         f"one value{how}")
        given.add(self.dest)
        super().__call__(parser, namespace, values, option_string)


def note_id(text: str) -> int:
    try:
        value = int(text.lstrip("#"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a note id; ids are numbers like 12 or #12")
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a note id; ids start at 1")
    return value


def tags_text(text: str) -> str:
    """Tags as given; ``-t x, y`` (a space after the comma) is refused: the shell made y a
    word of the note or the query, and the tag was lost."""
    if text.rstrip().endswith(","):
        raise argparse.ArgumentTypeError(
            f"{text!r} ends with a comma: tags end at the first space, so give them without "
            "spaces (-t a,b) or quoted (-t 'a, b')")
    return text


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 (got {value})")
    return value


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds")
    if not value >= 0 or value == float("inf"):  # nan and -5 too
        raise argparse.ArgumentTypeError(f"must be 0 (never) or more seconds (got {text})")
    return value


def since_time(value: str) -> datetime:
    """``7d``, ``12h``, ``3w`` ago, or an ISO date (argparse's type for --since)."""
    try:
        return parse_since(value)
    except InvalidInput as exc:
        raise argparse.ArgumentTypeError(str(exc)[0].lower() + str(exc)[1:]) from None


def authors(parser) -> None:
    """--author NAMES | --mine (notes of a team store's members)."""
    who = parser.add_mutually_exclusive_group()
    who.add_argument("--author", default=None, help="only notes written by these (comma-separated)")
    who.add_argument("--mine", action="store_true", help="only notes you wrote")


def author_of(args) -> str | None:
    from .config import current_user

    return current_user() if args.mine else args.author


def build_parser() -> Parser:
    # The global options work before or after the command: `nbmemory --json list`
    # and `nbmemory list --json` both do. SUPPRESS keeps a later default from
    # overwriting an earlier value.
    located = Parser(add_help=False)
    located.add_argument("--store", action="last", metavar="DIR|URL", default=argparse.SUPPRESS,
                        help="store directory or a team store's postgresql:// address "
                             "(default: NBMEMORY_HOME, the nearest .nbmemory/, the git root)")
    located.add_argument("--model", action="last", metavar="NAME", default=argparse.SUPPRESS,
                         help="embedding model (default: NBMEMORY_MODEL or all-MiniLM-L6-v2)")
    common = Parser(add_help=False, parents=[located])
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print JSON for scripts instead of a table")

    parser = Parser(prog="nbmemory", parents=[common], epilog=EXIT_CODES,
                    formatter_class=argparse.RawDescriptionHelpFormatter,
                    description="Remember findings, recall them, forget them, snapshot what you know.")
    parser.add_argument("--version", action="version", version=f"nbmemory {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name: str, help: str, *, prints_json: bool = True, **kwargs) -> Parser:
        return sub.add_parser(name, parents=[common if prints_json else located], help=help,
                              description=help,
                              epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter,
                              **kwargs)

    p = command("remember", "store a finding (the text, or - to read it from stdin)")
    p.add_argument("-k", "--kind", default=None,
                   help="finding (default), gotcha, decision, question, reference or procedure")
    p.add_argument("-p", "--priority", default=None, help="high, medium (default) or low")
    p.add_argument("-t", "--tags", type=tags_text, default=None,
                   help="comma-separated tags, e.g. -t orders,units")
    p.add_argument("--supersedes", type=note_id, metavar="ID",
                   help="this note replaces note ID (kept in its history); kind, priority, "
                        "tags and --about not given are ID's (its files fingerprinted now)")
    p.add_argument("--about", action="append", default=None, metavar="PATH|GLOB",
                   help="anchor the note to a file, directory or glob (repeatable); it is "
                        "flagged stale when that changes. Paths in the text are anchored too")
    p.add_argument("text", nargs="*", help="the finding itself; - or nothing reads stdin")

    p = command("recall", "find notes by meaning and by keyword")
    p.add_argument("-k", type=positive, default=5, help="how many notes (default 5)")
    p.add_argument("-t", "--tags", type=tags_text, default=None,
                   help="only notes with all these tags")
    p.add_argument("--kind", default=None, help="only notes of these kinds (comma-separated)")
    p.add_argument("-p", "--priority", default=None, help="only notes of these priorities")
    p.add_argument("--since", type=since_time, default=None,
                   help="only notes written since: 7d, 12h, 2w or a date")
    p.add_argument("--explain", action="store_true", help="show the keyword and semantic scores")
    p.add_argument("--provenance", action="store_true", help="show where each note came from")
    p.add_argument("--min-score", type=float, default=None,
                   help="hide notes scoring below this (before the ±0.02 of priority)")
    p.add_argument("--mode", choices=MODES, default="hybrid", help=MODE_HELP)
    p.add_argument("--as-of", metavar="SNAPSHOT", default=None,
                   help="search the notes as they were when SNAPSHOT was sealed")
    p.add_argument("--open", action="store_true",
                   help="open questions (neither confirmed nor refuted); with a query, the best of them")
    fresh = p.add_mutually_exclusive_group()
    fresh.add_argument("--fresh", action="store_true", help="only notes that are not stale")
    fresh.add_argument("--stale", action="store_true", help="only stale notes")
    authors(p)
    p.add_argument("query", nargs="*", help="what you want to know, in any words; - reads it "
                                            "from stdin")

    p = command("edit", "change a note's text, tags, kind or priority: a new version, the old "
                        "one stays in its history",
                usage="nbmemory edit ID [--text TEXT | -] [-t TAGS] [-k KIND] [-p PRIORITY] "
                      "[--if-version N] [--json] [--store DIR|URL] [--model NAME]")
    p.add_argument("id", type=note_id, metavar="ID")
    p.add_argument("stdin", nargs="*", default=[], metavar="-", help="read the new text from stdin")
    p.add_argument("--text", default=None, help="the new text (- reads stdin)")
    p.add_argument("-t", "--tags", type=tags_text, default=None,
                   help="the new comma-separated tags (replace the old ones; '' removes them)")
    p.add_argument("-k", "--kind", default=None,
                   help="finding, gotcha, decision, question, reference or procedure")
    p.add_argument("-p", "--priority", default=None, help="high, medium or low")
    p.add_argument("--if-version", type=int, default=None, metavar="N",
                   help="only if the note is still at version N (as show printed it): a "
                        "colleague's edit since is refused, not overwritten")

    p = command("forget", "revoke notes: hidden from recall, kept in history, reversible")
    p.add_argument("--purge", action="store_true",
                   help="erase the text and vectors for good (privacy; cannot be undone; asks "
                        "to confirm)")
    p.add_argument("--yes", action="store_true", help="with --purge: do not ask")
    p.add_argument("ids", nargs="+", type=note_id, metavar="ID")

    p = command("reinstate", "undo forget")
    p.add_argument("ids", nargs="+", type=note_id, metavar="ID")

    p = command("list", "list notes, newest first")
    p.add_argument("-t", "--tags", type=tags_text, default=None,
                   help="only notes with all these tags")
    p.add_argument("--kind", default=None, help="only notes of these kinds")
    p.add_argument("-p", "--priority", default=None, help="only notes of these priorities")
    p.add_argument("--status", default="active",
                   help="active, revoked, superseded, refuted or purged; comma-separated "
                        "(default active)")
    p.add_argument("--since", type=since_time, default=None, help="only notes written since")
    authors(p)
    p.add_argument("-n", "--limit", type=positive, default=20, help="how many (default 20)")
    p.add_argument("--offset", type=int, default=0, help="skip this many")
    p.add_argument("--order", choices=("newest", "oldest", "priority"), default="newest",
                   help="newest: last written or edited first (default); oldest: in the order "
                        "they were written; priority: high first")

    p = command("show", "one note in full: text, tags, status, stale reasons, provenance")
    p.add_argument("id", type=note_id, metavar="ID")

    p = command("stale", "active notes whose file, data or cell changed, with the reasons")
    p.add_argument("-n", "--limit", type=positive, default=50, help="how many (default 50)")
    p.add_argument("--offset", type=int, default=0, help="skip this many")

    p = command("verify", "after checking that stale notes still hold: re-take their fingerprints")
    p.add_argument("ids", nargs="+", type=note_id, metavar="ID")

    p = command("history", "every event of a note, with time and actor")
    p.add_argument("id", type=note_id, metavar="ID")

    p = command("snapshot", "seal what you know now under a name, list snapshots, or compare two")
    p.add_argument("name", nargs="*", help="snapshot name (no spaces); with --diff: A [B]")
    p.add_argument("-m", "--message", default="", help="why this moment matters")
    p.add_argument("--list", action="store_true", help="list snapshots")
    p.add_argument("--diff", action="store_true",
                   help="notes added, edited, superseded, forgotten and gone stale from snapshot "
                        "A to snapshot B (default: now)")

    p = command("export", "write the whole store to a JSON Lines file (lossless), or readable "
                          "Markdown pages with --markdown")
    p.add_argument("path", help="the .jsonl file, or with --markdown a directory")
    p.add_argument("--markdown", action="store_true", help="write Markdown pages into PATH")
    p.add_argument("--by", choices=("tag", "kind"), default=None,
                   help="with --markdown: one page per tag (default) or per kind")

    p = command("import", "import a file written by nbmemory export; importing it again "
                          "changes nothing")
    p.add_argument("path", help="a .jsonl file written by nbmemory export")
    p.add_argument("--on-conflict", choices=("skip", "replace", "keep-both"), default="skip",
                   help="for notes already in this store: skip (default), replace, keep-both")

    p = command("share", "copy notes (with their history) to another store, usually a team "
                         "store; a note already there stays as it is unless --replace")
    p.add_argument("ids", nargs="+", type=note_id, metavar="ID")
    p.add_argument("--to", required=True, metavar="DIR|URL",
                   help="the store to copy to, e.g. postgresql://db.internal/analytics")
    p.add_argument("--replace", action="store_true",
                   help="a note the store has in another version takes this one (kept in "
                        "its history); by default it is left as it is")

    p = command("reindex", "rebuild the indexes from the store, with progress; re-embeds the "
                           "notes when the configured model differs from the store's")
    p.add_argument("--reembed", action="store_true",
                   help="embed every note with the configured model (texts that already "
                        "have its vectors are kept) and switch the store to it, then rebuild")

    command("status", "store, counts, model, index, owner, empty-recall rate")

    p = command("doctor", "check the installation end to end and say how to fix each problem")
    p.add_argument("--skip", action="append", default=[], choices=("model", "jupyter"),
                   help="skip a group of checks (repeatable)")

    p = command("serve", "run the store's owner process in the foreground (clients start one "
                         "on demand; this is for running it yourself)", prints_json=False)
    p.add_argument("--idle-timeout", type=seconds, default=None, metavar="SECONDS",
                   help="exit after this long without requests "
                        "(default: NBMEMORY_IDLE_TIMEOUT or 1800; 0 never)")

    command("stop", "ask the store's owner process to exit (the next use starts a new one)")

    p = command("mcp", "serve the store to agents over MCP on stdio (needs nbmemory[mcp])",
                prints_json=False)
    p.add_argument("--hint-tokens", type=positive, default=4000, metavar="N",
                   help="remind the agent that notes can be fetched again by id after about N "
                        "tokens of note content (default 4000)")
    p.add_argument("--hint-calls", type=positive, default=25, metavar="N",
                   help="... or after N calls that returned notes (default 25)")
    return parser


def require_store(store: str | None, *, creating: bool = False,
                  how: str = "'nbmemory remember TEXT' (or import)") -> bool:
    """Refuse to read a local store that does not exist, rather than create an empty one
    where a mistyped ``--store`` points ("No active notes." would say the notes are gone);
    a store is created only in a directory that exists. True: the call would create it."""
    from .address import ADDRESS_FILENAME
    from .config import STORE_DIRNAME, locate_store
    from .errors import StoreDamaged, StoreUnavailable
    from .store import DB_FILENAME, lost_database

    if store == "":
        raise CommandError("--store is empty: give the store's directory or postgresql:// "
                           "address, or leave --store out for the default.", EXIT_USAGE)
    location = locate_store(store)
    path = location.path
    if location.address is not None or (path / ADDRESS_FILENAME).is_file():  # a team store
        return False
    if path.exists() and not path.is_dir():
        raise CommandError(f"{path} is a file, not a store: give the directory that holds "
                           f"{DB_FILENAME} (or where one should be created).", EXIT_USAGE)
    inner = path / STORE_DIRNAME
    if not (path / DB_FILENAME).exists() and (inner / DB_FILENAME).exists():
        # A second store would be made among the project's files (and the folder made private).
        raise CommandError(f"{path} is a project folder whose store is {inner}: give --store "
                           f"{inner}, or leave --store out when working in that project.",
                           EXIT_USAGE)
    if creating:
        if not path.exists() and not path.parent.is_dir():
            why = "is a file" if path.parent.exists() else "does not exist"
            raise CommandError(f"Cannot create the store {location}: {path.parent} {why}. "
                               "Check --store and NBMEMORY_HOME, or make the directory "
                               "first.", EXIT_USAGE)
        return not (path / DB_FILENAME).exists()
    if not (path / DB_FILENAME).exists():
        if lost := lost_database(path, 0):
            raise StoreDamaged(lost)
        raise StoreUnavailable(
            f"No store at {location}: nothing was remembered there yet. Check --store and "
            f"NBMEMORY_HOME; {how} creates it.")
    return False
