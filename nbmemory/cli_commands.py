"""What each ``nbmemory`` subcommand does, and how it prints: a table for people, JSON
with ``--json``."""

from __future__ import annotations

import json
import os
import shutil
import sys
import textwrap
from typing import Any, Sequence

from . import syntax
from .cli_args import EXIT_ERROR, EXIT_OK, CommandError, author_of, require_store
from .config import configured_model
from .progress import progress_bar
from .options import QUERY_ONLY, filters_said, given, stale_wanted

def open_memory(store: str | None = None, model: str | None = None):
    """The CLI opens a store through its owner process (started on demand), so a
    notebook, the panel and the CLI can use it at once."""
    from .memory import Memory

    return Memory.open(store or None, model=configured_model(model))


def utf8(stream) -> bool:
    """Can ``stream`` write every character (its encoding is UTF-8)?"""
    return (getattr(stream, "encoding", None) or "").lower().replace("-", "") == "utf8"


def emit_json(value: Any) -> None:
    """``value`` as JSON; escaped to ASCII for a stream that cannot write every character."""
    from .wording import JSON_CONTROL

    print(json.dumps(value, indent=2, default=str, ensure_ascii=not utf8(sys.stdout))
          .translate(JSON_CONTROL))


def width() -> int:
    return max(60, shutil.get_terminal_size((100, 24)).columns)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain-text table; the last column is shortened to fit the terminal."""
    from .columns import ljust, shorten, width as columns  # in display columns: CJK takes 2

    rows = [[str(c) for c in row] for row in rows]
    widths = [max(columns(h), *(columns(r[i]) for r in rows)) for i, h in enumerate(headers[:-1])]
    room = max(20, width() - sum(w + 2 for w in widths))
    out = ["  ".join(ljust(h, w) for h, w in zip(headers, widths + [0])).rstrip()]
    for row in rows:
        last = shorten(row[-1], room, placeholder=" ...")
        out.append("  ".join([ljust(c, w) for c, w in zip(row[:-1], widths)] + [last]).rstrip())
    return "\n".join(out)


def note_rows(notes) -> list[list[str]]:
    from .display import text_of
    from .wording import age

    return [[f"#{n.id}", age(n.created_at), n.priority, n.kind, ",".join(n.tags), n.status,
             ("[STALE] " if n.stale else "") + text_of(n)] for n in notes]


def show_note(note) -> str:
    from .display import text_of
    from .wording import age, local, provenance_line

    lines = [f"#{note.id}  {note.status}  {note.kind}  {note.priority}  version {note.version}",
             textwrap.indent(text_of(note), "    "), ""]
    fields = [("tags", ", ".join(note.tags) or "-"),
              ("created", f"{local(note.created_at):%Y-%m-%d %H:%M} ({age(note.created_at)} ago)"
               if note.created_at else "-"),
              ("updated", f"{local(note.updated_at):%Y-%m-%d %H:%M}" if note.updated_at else "-"),
              ("author", note.author or "-"),
              ("from", provenance_line(note))]
    if note.resolution:  # a question or hypothesis answered: how, and why
        fields.append((note.resolution, note.resolution_reason or "-"))
    fields += [("anchor", f"{a.kind} {a.target}") for a in note.anchors]
    fields += [("STALE", str(r)) for r in note.stale]
    size = max(len(k) for k, _ in fields)
    lines += [f"{k.ljust(size)}  {v}" for k, v in fields]
    return "\n".join(lines)


def read_text(words: list[str]) -> str:
    if words[:1] == ["-"] and len(words) > 1:  # the piped note would be lost
        raise CommandError(f"- reads the note from stdin and takes nothing after it (got "
                           f"{' '.join(words[1:])!r}); for a note that starts with a dash, "
                           f"quote it: nbmemory remember -- '- {' '.join(words[1:])}'")
    if words and words != ["-"]:
        return " ".join(words)
    if sys.stdin.isatty() and not words:
        raise CommandError("Give the finding to remember: nbmemory remember TEXT "
                           "(or pipe it in: echo TEXT | nbmemory remember -)")
    return read_stdin()


def read_stdin() -> str:
    """Stdin as text: UTF-8 (bytes that are not are kept for the store to name), or UTF-16
    when it starts with that byte order mark, as PowerShell 5's pipes and > write it."""
    buffer = getattr(sys.stdin, "buffer", None)
    if buffer is None:  # a text stream given in place of stdin
        return sys.stdin.read()
    data = buffer.read()
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return data.decode("utf-16")
    if b"\x00" in data:  # UTF-8 text holds none; UTF-16 without its byte order mark does
        order = "le" if data[1::2].count(0) > data[0::2].count(0) else "be"
        raise CommandError(f"stdin is not UTF-8: it holds NUL bytes, as UTF-16 text without a "
                           f"byte order mark does. Convert it first, e.g. iconv -f utf-16{order} "
                           "-t utf-8")
    return data.decode("utf-8", "surrogateescape")


def provenance():
    from .provenance import capture

    return capture(source="cli")


def cmd_remember(mem, args) -> None:
    text = args.text if isinstance(args.text, str) else read_text(args.text)
    options = dict(kind=args.kind, priority=args.priority, tags=args.tags, provenance=provenance(),
                   about=args.about)
    note, similar = mem.remember_with_similar(text, supersedes=args.supersedes, **options)
    if args.json:
        return emit_json({"note": note.to_dict(), "similar": [h.to_dict() for h in similar]})
    from .anchors import pointer_only
    from .display import remembered_display
    from .wording import pointer_hint

    hint = (pointer_hint(note.id, f"nbmemory remember --supersedes {note.id} '<the finding>'")
            if pointer_only(note.text) else None)
    print(remembered_display(note, similar, hint=hint).text)


def cmd_recall(mem, args) -> None:
    # - reads the question from stdin, as remember and edit read a note.
    query = " ".join(read_stdin().split() if args.query == ["-"] else args.query)
    stale = stale_wanted(args)
    if args.open and args.kind not in (None, "question"):  # with a query or without
        raise CommandError("--open searches the open questions: leave --kind out")
    if args.open and not query:
        needless = given(args, QUERY_ONLY)
        if needless:
            verb = "applies" if len(needless) == 1 else "apply"
            raise CommandError(f"--open with no query lists the open questions; "
                               f"{', '.join(needless)} {verb} only to a query "
                               f"(nbmemory recall --open QUERY...)")
        questions = mem.open_questions(limit=args.k + 1, tags=args.tags, priority=args.priority,
                                       since=args.since, author=author_of(args), stale=stale)
        more, questions = len(questions) > args.k, questions[:args.k]  # never cut silently
        if args.json:
            return emit_json({"open_questions": [n.to_dict() for n in questions], "more": more})
        print(table(["id", "age", "priority", "kind", "tags", "status", "note"], note_rows(questions))
              if questions else "No open questions.")
        if more:
            print(f"(more open questions than {args.k}: -k {args.k * 4} shows more)")
        return
    if not query:
        raise CommandError("Say what you want to know: nbmemory recall QUERY... "
                           "(see: nbmemory recall --help)")
    hits = mem.recall(query, k=args.k, tags=args.tags, kind=args.kind,
                      priority=args.priority, since=args.since, explain=args.explain,
                      min_score=args.min_score, as_of=args.as_of, stale=stale, mode=args.mode,
                      author=author_of(args), open_only=args.open)
    if args.json:
        return emit_json(hits.to_dict())
    from .display import hits_text

    hits.filters = filters_said(args)  # "No notes match 'x' with -t nosuchtag."

    print(hits_text(hits, provenance=args.provenance, show="nbmemory show {0}"))


def cmd_edit(mem, args) -> None:
    # The new text only through --text or stdin: a stray word must not replace a note's text.
    if args.stdin not in ([], ["-"]):
        raise CommandError(f"Give the new text with --text (quoted: --text '{' '.join(args.stdin)}'), "
                           "or - to read it from stdin")
    if args.stdin and args.text is not None:
        raise CommandError("Give the new text once: --text TEXT, or - to read it from stdin")
    if args.stdin or args.text == "-":
        args.text = read_stdin()
    if args.text is not None and not args.text.strip():
        raise CommandError("The new text is empty; give the note's new text with --text TEXT "
                           "(or -), or leave out --text to change only -t, -k or -p")
    if args.text is None and args.tags is None and args.kind is None and args.priority is None:
        raise CommandError("Say what to change: nbmemory edit ID --text TEXT (or - to read it "
                           "from stdin), -t TAGS, -k KIND or -p PRIORITY")
    before = mem.get(args.id)
    note = mem.edit(args.id, text=args.text, tags=args.tags, kind=args.kind,
                    priority=args.priority, version=args.if_version)
    changed = [name for name in ("text", "kind", "priority", "tags")  # the journal's order
               if getattr(note, name) != getattr(before, name)]
    # The version written over: one before the new one, whatever another writer did since
    # the read above (changed is against what that read showed).
    previous = note.version - 1 if note.version > before.version else before.version
    if args.json:
        return emit_json({"note": note.to_dict(), "previous_version": previous,
                          "changed": changed})
    if not changed:
        print(f"Nothing changed: #{note.id} already says that (version {note.version}).")
        return
    print(f"Edited #{note.id}: version {note.version} ({', '.join(changed)} changed; "
          f"version {previous} stays in: nbmemory history {note.id}).")


def cmd_forget(mem, args) -> None:
    if args.purge:
        return purge(mem, args)
    notes = mem.forget(args.ids)
    if args.json:
        return emit_json({"forgotten": [n.to_dict() for n in notes]})
    print(syntax.forgot([n.id for n in notes], syntax.CLI))
    if replaced := syntax.still_replaced(notes, syntax.CLI, mem.get):
        print(replaced)


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
    if replaced := syntax.still_replaced(purged, syntax.CLI, mem.get):
        print(replaced)


def cmd_reinstate(mem, args) -> None:
    notes = mem.reinstate(args.ids)
    if args.json:
        return emit_json({"reinstated": [n.to_dict() for n in notes]})
    print(f"Reinstated {', '.join(f'#{n.id}' for n in notes)}.")


def cmd_list(mem, args) -> None:
    from .wording import counted, statuses_text

    # As typed: the engine splits it, and says that "" or "," names no status.
    page = mem.notes(tags=args.tags, kind=args.kind, priority=args.priority, since=args.since,
                     status=args.status, offset=args.offset, limit=args.limit, order=args.order,
                     author=author_of(args))
    if args.json:
        return emit_json(page.to_dict())
    if page.behind:
        print(f"({page.behind})")
    if not page.notes:
        what = statuses_text(args.status)
        filtered = any((args.tags, args.kind, args.priority, args.since, author_of(args)))
        print(f"Nothing past {counted(page.total, what + ' note')} (--offset {args.offset})."
              if page.total else f"No {what} notes" + (" match." if filtered else "."))
        return
    print(table(["id", "age", "priority", "kind", "tags", "status", "note"], note_rows(page.notes)))
    shown = f"{page.offset + 1}-{page.offset + len(page.notes)}"
    print(f"({shown} of {counted(page.total, statuses_text(args.status) + ' note')})")


def cmd_show(mem, args) -> None:
    note = mem.get(args.id)
    if args.json:
        return emit_json(note.to_dict())
    if note.behind:
        print(f"({note.behind})")
    print(show_note(note))


def cmd_stale(mem, args) -> None:
    page = mem.stale(offset=args.offset, limit=args.limit)
    if args.json:
        return emit_json(page.to_dict())
    if page.behind:
        print(f"({page.behind})")
    if not page.notes:
        print("No stale notes.")
        return
    from .display import text_of
    from .columns import shorten, wrap
    from .wording import counted

    for note in page.notes:  # why, wrapped (the reasons are long), then the note, shortened
        why = "; ".join(str(r) for r in note.stale)
        print("\n".join(wrap(f"#{note.id}  {why}", width(), "    ", first="")))
        print("    " + shorten(text_of(note), max(20, width() - 4), placeholder=" ..."))
    print(f"({counted(page.total, 'stale note')}. Check them, then: nbmemory verify ID, "
          "or correct them: nbmemory remember --supersedes ID ...)")


def cmd_verify(mem, args) -> None:
    from .wording import verified_text

    done = {}
    # Those verify refuses first (a note not active; an unknown id fails the sort): a
    # command with one refused id writes nothing.
    for i in sorted(args.ids, key=lambda i: mem.get(i).status == "active"):
        note = mem.verify(i)
        done[i] = (note, next(e for e in reversed(mem.history(i)) if e.type == "verified"))
    done = [done[i] for i in args.ids]
    if args.json:
        return emit_json({"verified": [{"note": n.to_dict(), "event": e.to_dict()} for n, e in done]})
    for note, event in done:
        print(verified_text(note, event))


def cmd_history(mem, args) -> None:
    events, versions = mem.history(args.id), mem.versions(args.id)
    if args.json:
        return emit_json({"id": args.id, "events": [e.to_dict() for e in events],
                          "versions": [v.to_dict() for v in versions]})
    from .display import history_display

    print(history_display(args.id, events, mem.chain(args.id), versions).text)


def cmd_snapshot(mem, args) -> None:
    from .wording import counted, local

    if args.list and (args.diff or args.name):
        raise CommandError("--list takes nothing else: nbmemory snapshot --list")
    if (args.list or args.diff) and args.message:
        flag = "--list" if args.list else "--diff"
        raise CommandError(f"-m is the message of a new snapshot; {flag} takes none: "
                           "nbmemory snapshot NAME -m message")
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
                    [[s.name, f"{local(s.at):%Y-%m-%d %H:%M}", str(s.note_count), s.author or "",
                      s.message] for s in snapshots]))
        return
    if len(args.name) != 1:
        raise CommandError("Give the snapshot one name without spaces: nbmemory snapshot NAME "
                           "[-m message]; list them with --list, compare with --diff A [B]")
    snap = mem.snapshot(args.name[0], message=args.message)
    if args.json:
        return emit_json(snap.to_dict())
    print(f"Sealed snapshot {snap.name!r} at journal position {snap.seq} "
          f"({counted(snap.note_count, 'active note')}).")


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
        kept = "" if result["embedded"] else " (every text had its vectors already)"
        print(f"Re-embedded {result['embedded']} texts{kept}; the store now uses "
              f"{result['to']} ({result['vectors']} vectors).")
    elif result.get("model"):
        print(f"Rebuilt the indexes: {result['vectors']} vectors ({result['model']}), "
              f"{result['lexical_docs']} keyword documents.")
    else:
        print("Nothing to index yet: the store has no notes.")


def cmd_export(mem, args) -> None:
    # Absolute: the store's owner may be another process with another working directory.
    args.path = os.path.abspath(args.path)
    if args.by and not args.markdown:
        raise CommandError("--by groups Markdown pages: add --markdown (a JSON Lines export "
                           "is one file of every note).")
    if args.markdown:
        pages = mem.export_markdown(args.path, by=args.by or "tag")
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
    from .wording import imported_text

    args.path = os.path.abspath(args.path)
    with progress_bar("importing", terminal=True, unit="note") as progress:
        summary = mem.import_jsonl(args.path, on_conflict=args.on_conflict, progress=progress)
    if args.json:
        return emit_json({"path": args.path, **summary})
    print(imported_text(summary, args.path))


def cmd_share(mem, args) -> None:
    summary = mem.share(args.ids, args.to, replace=args.replace,
                        model=configured_model(getattr(args, "model", None)))
    if args.json:
        return emit_json({"to": args.to, **summary})
    from .wording import shared_text

    print(shared_text(args.ids, summary, args.to))


def cmd_status(mem, args) -> None:
    status = mem.status()
    if args.json:
        return emit_json(status)
    from .display import status_display

    print(status_display(status).text)


def cmd_doctor(args) -> int:
    from .doctor import run_checks
    from .wording import counted

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
        print(f"\n{counted(len(failed), 'problem')} found." if failed
              else "\nAll checks passed.")
    return EXIT_ERROR if failed else EXIT_OK


def cmd_serve(args) -> int:
    from .config import locate_store
    from .service import serve
    from .service.protocol import default_idle_timeout

    idle = default_idle_timeout() if args.idle_timeout is None else args.idle_timeout
    require_store(args.store)  # an owner of a mistyped --store would make an empty store there
    location = locate_store(args.store)
    print(f"nbmemory: starting the owner of {location} (Ctrl-C to stop)", file=sys.stderr)
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
        print(f"Stopped the owner of {location.address or location.path} "
              f"(pid {info.get('pid') if info else '?'}).")
    else:
        print(f"No owner is running for {location.address or location.path}.")
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
    "export": cmd_export, "import": cmd_import, "share": cmd_share,
}
# The commands that may create the store they name; the others need it to exist.
CREATING_COMMANDS = {"remember", "import"}
OTHER_COMMANDS = {"doctor": cmd_doctor, "mcp": cmd_mcp, "serve": cmd_serve, "stop": cmd_stop}
