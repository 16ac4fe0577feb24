"""The command line: ``nbmemory remember | recall | edit | forget | list | show | history | ...``.

A composition root: it reads ``--store``/``--model`` (or ``NBMEMORY_HOME``/``NBMEMORY_MODEL``),
opens the store through :func:`open_memory`, prints a table for people or JSON with
``--json``, and turns every :class:`~nbmemory.errors.NbMemoryError` into one line on
stderr and an exit code. The store, the engine and the model load only when a command
needs them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import textwrap
from datetime import datetime
from typing import Any, Sequence

from ._version import __version__
from .config import configured_model
from .errors import InvalidInput, ModelUnavailable, NbMemoryError, StoreUnavailable
from .progress import progress_bar
from .when import parse_since
from . import syntax

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
     nbmemory, or the embedding model cannot be loaded

environment:
  NBMEMORY_HOME   store directory (default: nearest .nbmemory/ above the working
                  directory, else the git root, else the working directory)
  NBMEMORY_MODEL  embedding model (default all-MiniLM-L6-v2; hash:64 for tests)
"""


class CommandError(Exception):
    """A problem found by the CLI itself, with its exit code."""

    def __init__(self, message: str, code: int = EXIT_USAGE):
        super().__init__(message)
        self.code = code


def open_memory(store: str | None = None, model: str | None = None):
    """The CLI opens a store through its owner process (started on demand), so a
    notebook, the panel and the CLI can use it at once."""
    from .memory import Memory

    return Memory.open(store or None, model=configured_model(model))


def exit_code_for(exc: BaseException) -> int:
    if isinstance(exc, CommandError):
        return exc.code
    if isinstance(exc, InvalidInput):
        return EXIT_USAGE
    if isinstance(exc, (StoreUnavailable, ModelUnavailable)):
        return EXIT_UNAVAILABLE
    return EXIT_ERROR  # NotFound, Conflict and anything else the store refused


# -- argument parsing -------------------------------------------------------------------


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors that say where the help is."""

    def error(self, message: str):
        raise CommandError(f"{message} (see: {self.prog} --help)", EXIT_USAGE)


def note_id(text: str) -> int:
    try:
        value = int(text.lstrip("#"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a note id; ids are numbers like 12 or #12")
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a note id; ids start at 1")
    return value


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 (got {value})")
    return value


def since_time(value: str) -> datetime:
    """``7d``, ``12h``, ``3w`` ago, or an ISO date (argparse's type for --since)."""
    try:
        return parse_since(value)
    except InvalidInput as exc:
        raise argparse.ArgumentTypeError(str(exc)[0].lower() + str(exc)[1:]) from None


def build_parser() -> Parser:
    # The global options work before or after the command: `nbmemory --json list`
    # and `nbmemory list --json` both do. SUPPRESS keeps a later default from
    # overwriting an earlier value.
    common = Parser(add_help=False)
    common.add_argument("--store", metavar="DIR", default=argparse.SUPPRESS,
                        help="store directory (default: NBMEMORY_HOME, the nearest .nbmemory/, "
                             "the git root)")
    common.add_argument("--model", metavar="NAME", default=argparse.SUPPRESS,
                        help="embedding model (default: NBMEMORY_MODEL or all-MiniLM-L6-v2)")
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print JSON for scripts instead of a table")

    parser = Parser(prog="nbmemory", parents=[common], epilog=EXIT_CODES,
                    formatter_class=argparse.RawDescriptionHelpFormatter,
                    description="Remember findings, recall them, forget them, snapshot what you know.")
    parser.add_argument("--version", action="version", version=f"nbmemory {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name: str, help: str, **kwargs) -> Parser:
        return sub.add_parser(name, parents=[common], help=help, description=help,
                              epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter,
                              **kwargs)

    p = command("remember", "store a finding (the text, or - to read it from stdin)")
    p.add_argument("-k", "--kind", default="finding",
                   help="finding, gotcha, decision, question, reference or procedure")
    p.add_argument("-p", "--priority", default="medium", help="high, medium or low")
    p.add_argument("-t", "--tags", default=None, help="comma-separated tags, e.g. -t orders,units")
    p.add_argument("--supersedes", type=note_id, metavar="ID",
                   help="this note replaces note ID (kept in its history)")
    p.add_argument("--about", action="append", default=None, metavar="PATH|GLOB",
                   help="anchor the note to a file, directory or glob (repeatable); it is "
                        "flagged stale when that changes. Paths in the text are anchored too")
    p.add_argument("text", nargs="*", help="the finding itself; - or nothing reads stdin")

    p = command("recall", "find notes by meaning and by keyword")
    p.add_argument("-k", type=positive, default=5, help="how many notes (default 5)")
    p.add_argument("-t", "--tags", default=None, help="only notes with all these tags")
    p.add_argument("--kind", default=None, help="only notes of these kinds (comma-separated)")
    p.add_argument("-p", "--priority", default=None, help="only notes of these priorities")
    p.add_argument("--since", type=since_time, default=None,
                   help="only notes written since: 7d, 12h, 2w or a date")
    p.add_argument("--explain", action="store_true", help="show the keyword and semantic scores")
    p.add_argument("--provenance", action="store_true", help="show where each note came from")
    p.add_argument("--min-score", type=float, default=None, help="hide notes scoring below this")
    p.add_argument("--as-of", metavar="SNAPSHOT", default=None,
                   help="search the notes as they were when SNAPSHOT was sealed")
    p.add_argument("--open", action="store_true",
                   help="open questions (neither confirmed nor refuted); with a query, the best of them")
    fresh = p.add_mutually_exclusive_group()
    fresh.add_argument("--fresh", action="store_true", help="only notes that are not stale")
    fresh.add_argument("--stale", action="store_true", help="only stale notes")
    p.add_argument("query", nargs="*", help="what you want to know, in any words")

    p = command("edit", "change a note's text, tags, kind or priority: a new version, the old "
                        "one stays in its history",
                usage="nbmemory edit ID [--text TEXT | -] [-t TAGS] [-k KIND] [-p PRIORITY] "
                      "[--json] [--store DIR] [--model NAME]")
    p.add_argument("id", type=note_id, metavar="ID")
    p.add_argument("stdin", nargs="*", default=[], metavar="-", help="read the new text from stdin")
    p.add_argument("--text", default=None, help="the new text (- reads stdin)")
    p.add_argument("-t", "--tags", default=None,
                   help="the new comma-separated tags (replace the old ones; '' removes them)")
    p.add_argument("-k", "--kind", default=None,
                   help="finding, gotcha, decision, question, reference or procedure")
    p.add_argument("-p", "--priority", default=None, help="high, medium or low")

    p = command("forget", "revoke notes: hidden from recall, kept in history, reversible")
    p.add_argument("--purge", action="store_true",
                   help="erase the text and vectors for good (privacy; cannot be undone; asks "
                        "to confirm)")
    p.add_argument("--yes", action="store_true", help="with --purge: do not ask")
    p.add_argument("ids", nargs="+", type=note_id, metavar="ID")

    p = command("reinstate", "undo forget")
    p.add_argument("ids", nargs="+", type=note_id, metavar="ID")

    p = command("list", "list notes, newest first")
    p.add_argument("-t", "--tags", default=None, help="only notes with all these tags")
    p.add_argument("--kind", default=None, help="only notes of these kinds")
    p.add_argument("-p", "--priority", default=None, help="only notes of these priorities")
    p.add_argument("--status", default="active",
                   help="active, revoked, superseded or purged; comma-separated (default active)")
    p.add_argument("--since", type=since_time, default=None, help="only notes written since")
    p.add_argument("-n", "--limit", type=positive, default=20, help="how many (default 20)")
    p.add_argument("--offset", type=int, default=0, help="skip this many")
    p.add_argument("--order", choices=("newest", "oldest", "priority"), default="newest")

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
    p.add_argument("--by", choices=("tag", "kind"), default="tag",
                   help="with --markdown: one page per tag (default) or per kind")

    p = command("import", "import a file written by nbmemory export; importing it again "
                          "changes nothing")
    p.add_argument("path", help="a .jsonl file written by nbmemory export")
    p.add_argument("--on-conflict", choices=("skip", "replace", "keep-both"), default="skip",
                   help="for notes already in this store: skip (default), replace, keep-both")

    p = command("reindex", "rebuild the indexes from the store, with progress; re-embeds the "
                           "notes when the configured model differs from the store's")
    p.add_argument("--reembed", action="store_true",
                   help="re-embed with the configured model even if the store already uses it")

    command("status", "store, counts, model, index, owner, empty-recall rate")

    p = command("doctor", "check the installation end to end and say how to fix each problem")
    p.add_argument("--skip", action="append", default=[], choices=("model", "jupyter"),
                   help="skip a group of checks (repeatable)")

    p = command("serve", "run the store's owner process in the foreground (clients start one "
                         "on demand; this is for running it yourself)")
    p.add_argument("--idle-timeout", type=float, default=None, metavar="SECONDS",
                   help="exit after this long without requests "
                        "(default: NBMEMORY_IDLE_TIMEOUT or 1800; 0 never)")

    command("stop", "ask the store's owner process to exit (the next use starts a new one)")

    p = command("mcp", "serve the store to agents over MCP on stdio (needs nbmemory[mcp])")
    p.add_argument("--hint-tokens", type=positive, default=4000, metavar="N",
                   help="remind the agent that notes can be fetched again by id after about N "
                        "tokens of note content (default 4000)")
    p.add_argument("--hint-calls", type=positive, default=25, metavar="N",
                   help="... or after N calls that returned notes (default 25)")
    return parser


# -- output helpers ---------------------------------------------------------------------


def emit_json(value: Any) -> None:
    print(json.dumps(value, indent=2, default=str, ensure_ascii=False))


def width() -> int:
    return max(60, shutil.get_terminal_size((100, 24)).columns)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain-text table; the last column is shortened to fit the terminal."""
    rows = [[str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers[:-1])]
    room = max(20, width() - sum(w + 2 for w in widths))
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths + [0])).rstrip()]
    for row in rows:
        last = textwrap.shorten(" ".join(row[-1].split()), room, placeholder=" ...")
        out.append("  ".join([c.ljust(w) for c, w in zip(row[:-1], widths)] + [last]).rstrip())
    return "\n".join(out)


def note_rows(notes) -> list[list[str]]:
    from .wording import age

    return [[f"#{n.id}", age(n.created_at), n.priority, n.kind, ",".join(n.tags), n.status,
             ("[STALE] " if n.stale else "") + n.text] for n in notes]


def show_note(note) -> str:
    from .wording import age, provenance_line

    lines = [f"#{note.id}  {note.status}  {note.kind}  {note.priority}  version {note.version}",
             textwrap.indent(note.text, "    "), ""]
    fields = [("tags", ", ".join(note.tags) or "-"),
              ("created", f"{note.created_at:%Y-%m-%d %H:%M} ({age(note.created_at)} ago)"
               if note.created_at else "-"),
              ("updated", f"{note.updated_at:%Y-%m-%d %H:%M}" if note.updated_at else "-"),
              ("author", note.author or "-"),
              ("from", provenance_line(note))]
    fields += [("anchor", f"{a.kind} {a.target}") for a in note.anchors]
    fields += [("STALE", str(r)) for r in note.stale]
    size = max(len(k) for k, _ in fields)
    lines += [f"{k.ljust(size)}  {v}" for k, v in fields]
    return "\n".join(lines)


# -- commands ---------------------------------------------------------------------------


def read_text(words: list[str]) -> str:
    if words and words != ["-"]:
        return " ".join(words)
    if sys.stdin.isatty() and not words:
        raise CommandError("Give the finding to remember: nbmemory remember TEXT "
                           "(or pipe it in: echo TEXT | nbmemory remember -)")
    return sys.stdin.read()


def provenance():
    from .provenance import capture

    return capture(source="cli")


def cmd_remember(mem, args) -> None:
    text = read_text(args.text)
    options = dict(kind=args.kind, priority=args.priority, tags=args.tags, provenance=provenance(),
                   about=args.about)
    note, similar = mem.remember_with_similar(text, supersedes=args.supersedes, **options)
    if args.json:
        return emit_json({"note": note.to_dict(), "similar": [h.to_dict() for h in similar]})
    from .display import remembered_display

    print(remembered_display(note, similar).text)


def cmd_recall(mem, args) -> None:
    query = " ".join(args.query)
    if args.open and not query:
        questions = mem.open_questions(limit=args.k)
        if args.json:
            return emit_json({"open_questions": [n.to_dict() for n in questions]})
        print(table(["id", "age", "priority", "kind", "tags", "status", "note"], note_rows(questions))
              if questions else "No open questions.")
        return
    if not query:
        raise CommandError("Say what you want to know: nbmemory recall QUERY... "
                           "(see: nbmemory recall --help)")
    hits = mem.recall(query, k=args.k, tags=args.tags, kind="question" if args.open else args.kind,
                      priority=args.priority, since=args.since, explain=args.explain,
                      min_score=args.min_score, as_of=args.as_of,
                      stale=True if args.stale else False if args.fresh else None)
    if args.open:
        hits[:] = [h for h in hits if h.note.resolution is None]
    if args.json:
        return emit_json({**hits.to_dict(), "as_of": args.as_of})
    from .display import hits_text

    if args.as_of:
        print(f"As of snapshot {args.as_of!r}:")
    print(hits_text(hits, provenance=args.provenance))


def cmd_edit(mem, args) -> None:
    # The new text only through --text or stdin: a stray word must not replace a note's text.
    if args.stdin not in ([], ["-"]):
        raise CommandError(f"Give the new text with --text (quoted: --text '{' '.join(args.stdin)}'), "
                           "or - to read it from stdin")
    if args.stdin and args.text is not None:
        raise CommandError("Give the new text once: --text TEXT, or - to read it from stdin")
    if args.stdin or args.text == "-":
        args.text = sys.stdin.read()
    if args.text is not None and not args.text.strip():
        raise CommandError("The new text is empty; give the note's new text with --text TEXT "
                           "(or -), or leave out --text to change only -t, -k or -p")
    if args.text is None and args.tags is None and args.kind is None and args.priority is None:
        raise CommandError("Say what to change: nbmemory edit ID --text TEXT (or - to read it "
                           "from stdin), -t TAGS, -k KIND or -p PRIORITY")
    before = mem.get(args.id)
    note = mem.edit(args.id, text=args.text, tags=args.tags, kind=args.kind,
                    priority=args.priority)
    changed = [name for name in ("text", "kind", "priority", "tags")  # the journal's order
               if getattr(note, name) != getattr(before, name)]
    if args.json:
        return emit_json({"note": note.to_dict(), "previous_version": before.version,
                          "changed": changed})
    if not changed:
        print(f"Nothing changed: #{note.id} already says that (version {note.version}).")
        return
    print(f"Edited #{note.id}: version {note.version} ({', '.join(changed)} changed; "
          f"version {before.version} stays in: nbmemory history {note.id}).")


def cmd_forget(mem, args) -> None:
    if args.purge:
        return purge(mem, args)
    notes = mem.forget(args.ids)
    if args.json:
        return emit_json({"forgotten": [n.to_dict() for n in notes]})
    print(syntax.forgot([n.id for n in notes], syntax.CLI))


def purge(mem, args) -> None:
    notes = [mem.get(i) for i in args.ids]  # every id must exist before anything is erased
    listed = ", ".join(f"#{n.id}" for n in notes)
    if not args.yes:
        if not sys.stdin.isatty():
            raise CommandError(f"Purging erases {listed} for good; confirm with --yes "
                               "(or run it in a terminal to be asked).")
        answer = input(f"Erase {listed} permanently (text and vectors; cannot be undone)? "
                       "Type 'purge' to confirm: ")
        if answer.strip().lower() != "purge":
            raise CommandError("Nothing purged.", EXIT_ERROR)
    purged = [mem.purge(n.id) for n in notes]
    if args.json:
        return emit_json({"purged": [n.to_dict() for n in purged]})
    print(f"Purged {listed}: text and vectors erased; the journal keeps only that it happened.")


def cmd_reinstate(mem, args) -> None:
    notes = [mem.reinstate(i) for i in args.ids]
    if args.json:
        return emit_json({"reinstated": [n.to_dict() for n in notes]})
    print(f"Reinstated {', '.join(f'#{n.id}' for n in notes)}.")


def cmd_list(mem, args) -> None:
    statuses = [s.strip() for s in args.status.split(",") if s.strip()]
    page = mem.notes(tags=args.tags, kind=args.kind, priority=args.priority, since=args.since,
                     status=statuses, offset=args.offset, limit=args.limit, order=args.order)
    if args.json:
        return emit_json(page.to_dict())
    if not page.notes:
        print(f"No {args.status} notes" + (" match." if page.total else "."))
        return
    print(table(["id", "age", "priority", "kind", "tags", "status", "note"], note_rows(page.notes)))
    shown = f"{page.offset + 1}-{page.offset + len(page.notes)}"
    print(f"({shown} of {page.total} {args.status} notes)")


def cmd_show(mem, args) -> None:
    note = mem.get(args.id)
    if args.json:
        return emit_json(note.to_dict())
    print(show_note(note))


def cmd_stale(mem, args) -> None:
    page = mem.stale(offset=args.offset, limit=args.limit)
    if args.json:
        return emit_json(page.to_dict())
    if not page.notes:
        print("No stale notes.")
        return
    rows = [[f"#{n.id}", "; ".join(str(r) for r in n.stale), n.text] for n in page.notes]
    print(table(["id", "why", "note"], rows))
    from .wording import counted

    print(f"({counted(page.total, 'stale note')}. Check them, then: nbmemory verify ID, "
          "or correct them: nbmemory remember --supersedes ID ...)")


def cmd_verify(mem, args) -> None:
    from .wording import verified_text

    done = []
    for i in args.ids:
        note = mem.verify(i)
        event = next(e for e in reversed(mem.history(i)) if e.type == "verified")
        done.append((note, event))
    if args.json:
        return emit_json({"verified": [{"note": n.to_dict(), "event": e.to_dict()} for n, e in done]})
    for note, event in done:
        print(verified_text(note, event))


def cmd_history(mem, args) -> None:
    events = mem.history(args.id)
    if args.json:
        return emit_json({"id": args.id, "events": [e.to_dict() for e in events]})
    from .display import history_display

    print(history_display(args.id, events).text)


def cmd_snapshot(mem, args) -> None:
    if args.diff:
        if len(args.name) not in (1, 2):
            raise CommandError("Give one or two snapshot names: nbmemory snapshot --diff A [B]")
        diff = mem.snapshot_diff(*args.name)
        if args.json:
            return emit_json(diff.to_dict())
        from .display import diff_display

        print(diff_display(diff).text)
        return
    if args.list:
        snapshots = mem.snapshots()
        if args.json:
            return emit_json({"snapshots": [s.to_dict() for s in snapshots]})
        if not snapshots:
            print("No snapshots yet. Seal one with: nbmemory snapshot NAME -m 'why'")
            return
        print(table(["name", "sealed", "notes", "author", "message"],
                    [[s.name, f"{s.at:%Y-%m-%d %H:%M}", str(s.note_count), s.author or "",
                      s.message] for s in snapshots]))
        return
    if len(args.name) != 1:
        raise CommandError("Give the snapshot one name without spaces: nbmemory snapshot NAME "
                           "[-m message]; list them with --list, compare with --diff A [B]")
    snap = mem.snapshot(args.name[0], message=args.message)
    if args.json:
        return emit_json(snap.to_dict())
    print(f"Sealed snapshot {snap.name!r} at journal position {snap.seq} "
          f"({snap.note_count} active notes).")


def cmd_reindex(mem, args) -> None:
    with progress_bar("indexing", terminal=True, unit="note") as progress:
        result = mem.reembed(progress=progress) if args.reembed else mem.reindex(progress=progress)
    if args.reembed:
        result = {"action": "reembedded", **result}
    status = mem.status()
    result.update(index=status["index"], vectors=status["vectors"],
                  lexical_docs=status["lexical_docs"], notes=status["notes"])
    if args.json:
        return emit_json(result)
    if result["action"] == "reembedded":
        print(f"Re-embedded {result['embedded']} texts; the store now uses {result['to']} "
              f"({result['vectors']} vectors).")
    elif result.get("model"):
        print(f"Rebuilt the indexes: {result['vectors']} vectors ({result['model']}), "
              f"{result['lexical_docs']} keyword documents.")
    else:
        print("Nothing to index yet: the store has no notes.")


def cmd_export(mem, args) -> None:
    # Absolute: the store's owner may be another process with another working directory.
    args.path = os.path.abspath(args.path)
    if args.markdown:
        pages = mem.export_markdown(args.path, by=args.by)
        if args.json:
            return emit_json({"markdown": pages})
        print(f"Wrote {len(pages)} Markdown pages to {args.path} (start at index.md).")
        return
    with progress_bar("exporting", terminal=True, unit="row") as progress:
        counts = mem.export_jsonl(args.path, progress=progress)
    if args.json:
        return emit_json({"path": args.path, **counts})
    from .wording import exported_text

    print(exported_text(counts, args.path))


def cmd_import(mem, args) -> None:
    args.path = os.path.abspath(args.path)
    with progress_bar("importing", terminal=True, unit="note") as progress:
        summary = mem.import_jsonl(args.path, on_conflict=args.on_conflict, progress=progress)
    if args.json:
        return emit_json({"path": args.path, **summary})
    print("Imported: " + ", ".join(f"{v} {k}" for k, v in summary.items()))


def cmd_status(mem, args) -> None:
    status = mem.status()
    if args.json:
        return emit_json(status)
    from .display import status_display

    print(status_display(status).text)


def cmd_doctor(args) -> int:
    from .doctor import run_checks

    checks = run_checks(args.store, configured_model(args.model), skip=set(args.skip))
    failed = [c for c in checks if c.status == "fail"]
    if args.json:
        emit_json({"ok": not failed, "checks": [c.to_dict() for c in checks]})
    else:
        size = max(len(c.name) for c in checks)
        for c in checks:
            print(f"{c.status.upper():4}  {c.name.ljust(size)}  {c.detail}")
            if c.fix and c.status != "ok":
                print(f"{'':4}  {'':{size}}  -> {c.fix}")
        print(f"\n{len(failed)} problem(s) found." if failed else "\nAll checks passed.")
    return EXIT_ERROR if failed else EXIT_OK


def cmd_serve(args) -> int:
    from .config import locate_store
    from .service import serve
    from .service.protocol import default_idle_timeout

    location = locate_store(args.store)
    print(f"nbmemory: serving {location} (Ctrl-C to stop)", file=sys.stderr)
    idle = default_idle_timeout() if args.idle_timeout is None else args.idle_timeout
    serve(location.path, model=configured_model(args.model), idle_timeout=idle)
    return EXIT_OK


def cmd_stop(args) -> int:
    from .config import locate_store
    from .service import owner_info, stop

    location = locate_store(args.store)
    info = owner_info(location.path)
    stopped = stop(location.path)
    if args.json:
        emit_json({"store": str(location.path), "stopped": stopped,
                   "pid": info.get("pid") if info else None})
    elif stopped:
        print(f"Stopped the owner of {location.path} (pid {info.get('pid') if info else '?'}).")
    else:
        print(f"No owner is running for {location.path}.")
    return EXIT_OK


def cmd_mcp(args) -> int:
    try:
        from .mcp import serve
    except ImportError as exc:
        raise CommandError(f"The MCP server needs the mcp package ({exc}); install it with: "
                           "pip install 'nbmemory[mcp]'", EXIT_ERROR) from None
    serve(store=args.store, model=args.model, hint_tokens=args.hint_tokens,
          hint_calls=args.hint_calls)
    return EXIT_OK


STORE_COMMANDS = {
    "remember": cmd_remember, "recall": cmd_recall, "edit": cmd_edit, "forget": cmd_forget,
    "reinstate": cmd_reinstate, "list": cmd_list, "show": cmd_show, "history": cmd_history,
    "stale": cmd_stale, "verify": cmd_verify,
    "snapshot": cmd_snapshot, "reindex": cmd_reindex, "status": cmd_status,
    "export": cmd_export, "import": cmd_import,
}
OTHER_COMMANDS = {"doctor": cmd_doctor, "mcp": cmd_mcp, "serve": cmd_serve, "stop": cmd_stop}


def run(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    for name, default in (("store", None), ("model", None), ("json", False)):
        if not hasattr(args, name):
            setattr(args, name, default)
    if args.command in OTHER_COMMANDS:
        return OTHER_COMMANDS[args.command](args)
    with open_memory(args.store, args.model) as mem:
        STORE_COMMANDS[args.command](mem, args)
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``nbmemory`` command; returns (and exits with) the exit code."""
    json_mode = "--json" in (sys.argv[1:] if argv is None else argv)
    try:
        code = run(argv)
    except (CommandError, NbMemoryError) as exc:
        code = exit_code_for(exc)
        message = (syntax.message(exc, syntax.CLI) if isinstance(exc, NbMemoryError)
                   else " ".join(str(exc).split()))
        print(f"nbmemory: {message}", file=sys.stderr)
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
        print("nbmemory: interrupted", file=sys.stderr)
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
