"""The %memory subcommands (``%memory list``, ``verify``, ``export``...), one method each;
``NbMemory.memory`` routes ``%memory NAME ...`` to ``_memory_NAME``."""

from __future__ import annotations

import os
import shlex

from IPython.core.error import UsageError
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display

from . import display as show
from . import procedures, wording
from .magic_args import _id_and_text, parse_ids, split_options, unquote, usage_errors
from .progress import progress_bar


class MemoryCommands:
    """Mixed into :class:`~nbmemory.magics.NbMemory`, which provides ``mem``, ``shell``,
    ``_variables()`` and the ambient hook."""

    def _memory_status(self, rest: str):
        self._existing_store("show")
        display(show.status_display(self.mem.status()))

    def _memory_ambient(self, rest: str):
        return self._ambient.command(rest)

    def _memory_settings(self, rest: str):
        if rest.strip():
            raise UsageError(f"%memory settings takes nothing after it (got {rest.strip()!r}); "
                             "change one with %config NbMemory.k = 10")
        first = ("store", "model", "mode", "idle_timeout", "k", "similar", "min_score")
        names = [*first, *sorted(set(self.class_trait_names(config=True)) - set(first))]
        width = max(map(len, names))
        print("\n".join(f"NbMemory.{n.ljust(width)} = {getattr(self, n)!r}" for n in names))

    def _memory_history(self, rest: str):
        ids = parse_ids(rest)
        if len(ids) != 1:
            raise UsageError("Give one note id: %memory history 12")
        self._existing_store("show")
        display(show.history_display(ids[0], self.mem.history(ids[0]), self.mem.chain(ids[0]),
                                     self.mem.versions(ids[0])))

    def _memory_reinstate(self, rest: str):
        ids = parse_ids(rest)
        if not ids:
            raise UsageError("Give the id of the note to reinstate: %memory reinstate 12")
        notes = self.mem.reinstate(ids)
        print(f"Reinstated {', '.join(f'#{n.id}' for n in notes)}.")

    def _memory_insert(self, rest: str):
        words = rest.split()
        printing = "--print" in words
        ids = parse_ids(" ".join(w for w in words if w != "--print"))
        if len(ids) != 1:
            raise UsageError("Give one note id: %memory insert 12 (--print: print the code "
                             "instead)")
        note = self.mem.get(ids[0])
        code = procedures.procedure_code(note.text)
        if code is None:
            raise UsageError(f"Note #{note.id} is a {note.kind} with no code block; only "
                             "procedures (%remember --procedure) can be inserted as code.")
        if printing or type(self.shell).__name__ == "TerminalInteractiveShell":
            print(code)
        else:
            # Some front ends (Colab, VS Code, nbclient) ignore a next input without a word.
            self.shell.set_next_input(code, replace=False)
            print(f"Put #{note.id}'s code into a new cell below (none there? "
                  f"'%memory insert --print {note.id}' prints it).")

    def _memory_confirm(self, rest: str):
        note_id, reason = _id_and_text(rest, "confirm")
        note = self.mem.confirm(note_id, reason)
        print(f"Confirmed #{note.id}.")

    def _memory_refute(self, rest: str):
        note_id, reason = _id_and_text(rest, "refute")
        note = self.mem.refute(note_id, reason)
        print(f"Refuted #{note.id}; recall shows it only as previously believed. "
              f"Undo with: %memory reopen {note.id}")

    def _memory_reopen(self, rest: str):
        ids = parse_ids(rest)
        if len(ids) != 1:
            raise UsageError("Give one note id: %memory reopen 12")
        print(f"Reopened #{self.mem.reopen(ids[0]).id}.")
    @magic_arguments()
    @argument("-n", type=int, default=50, help="how many (default 50)")
    @argument("--offset", type=int, default=0, help="skip this many")
    def _stale_args(self, line):  # holds the parser for %memory stale
        """%memory stale [-n N] [--offset K]"""

    def _memory_stale(self, rest: str):
        args = self._page_parsed(self._stale_args, rest, "stale")
        self._existing_store("check")
        page = self.mem.stale(offset=args.offset, limit=args.n, variables=self._variables())
        if page.behind:
            print(f"({page.behind})")
        if not page.notes:
            print(f"Nothing past {wording.counted(page.total, 'stale note')} (--offset "
                  f"{args.offset})." if page.total else "No stale notes.")
            return
        display(self._page(page, args, wording.counted(page.total, "stale note")))

    def _memory_verify(self, rest: str):
        ids = parse_ids(rest)
        if not ids:
            raise UsageError("Give the id of the note you checked: %memory verify 12")
        variables, done = self._variables(), {}
        # Those verify refuses first (see cli_commands.cmd_verify): one refused, none written.
        for note_id in sorted(ids, key=lambda i: self.mem.get(i).status == "active"):
            note = self.mem.verify(note_id, variables=variables)
            done[note_id] = (note, next(e for e in reversed(self.mem.history(note_id))
                                        if e.type == "verified"))
        for note, event in (done[i] for i in ids):
            print(wording.verified_text(note, event, here=self._scope()))

    @magic_arguments()
    @argument("-t", "--tags", default=None)
    @argument("--kind", default=None)
    @argument("-p", "--priority", default=None)
    @argument("-n", type=int, default=20, help="how many (default 20)")
    @argument("--status", default="active",
              help="active, revoked, superseded, refuted or purged (several: a,b)")
    @argument("--offset", type=int, default=0, help="skip this many")
    @argument("--order", default="newest", help="newest (default), oldest or priority")
    def _list_args(self, line):  # holds the parser for %memory list
        """%memory list [-t tags] [--kind K] [-p P] [-n N] [--offset K] [--order O] [--status S]"""

    def _page_parsed(self, magic, rest: str, command: str):
        """A listing's options (quoted values unquoted): options only, ``-n`` at least 1."""
        args, extra = split_options(magic.parser, rest)
        if extra:
            raise UsageError(f"%memory {command} takes options only, not {extra!r}; see "
                             "%memory? (to search the notes: %recall ...)")
        if args.n < 1:
            raise UsageError(f"-n is how many notes to show: at least 1 (got {args.n}).")
        return args

    def _page(self, page, args, title: str):
        """A page of notes under ``title``; the line below says how to see the next."""
        left = page.total - args.offset  # from the first shown on
        how = (f"--offset {args.offset + len(page.notes)} shows the next"
               if args.offset or left > 1_000_000 else f"-n {left} lists them all")
        return show.notes_display(page.notes, title=title, total=left, how=how)

    def _list_parsed(self, rest: str, command: str):
        args = self._page_parsed(self._list_args, rest, command)
        self._existing_store(command)
        return args

    def _memory_list(self, rest: str):
        args = self._list_parsed(rest, "list")
        page = self.mem.notes(tags=args.tags, kind=args.kind, priority=args.priority,
                              status=args.status, offset=args.offset, limit=args.n,
                              order=args.order, variables=self._variables())
        if page.behind:
            print(f"({page.behind})")
        what = wording.statuses_text(args.status) + " note"
        if not page.notes and page.total:
            print(f"Nothing past {wording.counted(page.total, what)} (--offset {args.offset}).")
            return
        display(self._page(page, args, wording.counted(page.total, what)))

    def _memory_browse(self, rest: str):
        from .browse import browse

        args = self._list_parsed(rest, "browse")
        if "," in (args.kind or "") + (args.priority or ""):
            raise UsageError("%memory browse filters by one kind and one priority; "
                             "%memory list takes several (--kind a,b).")
        if args.offset or args.order != "newest":
            raise UsageError("%memory browse pages through the newest notes itself; %memory "
                             "list takes --offset and --order.")
        if args.status.strip() != "active":
            raise UsageError("%memory browse shows the active notes; %memory list --status "
                             f"{args.status} lists the others.")
        with usage_errors():  # refused as %memory list refuses them, not as a TraitError
            self.mem.notes(tags=args.tags, kind=args.kind, priority=args.priority, limit=args.n)
        return browse(self.mem, tags=args.tags, kind=args.kind, priority=args.priority,
                      limit=args.n)

    def _memory_reindex(self, rest: str):
        with progress_bar("indexing") as progress:
            result = self.mem.reindex(progress=progress)
        if result.get("model"):
            status = self.mem.status()
            print(f"Rebuilt the indexes: {status['vectors']} vectors ({result['model']}), "
                  f"{status['lexical_docs']} keyword documents.")
        else:
            print("Nothing to index yet: the store has no notes.")

    def _memory_reembed(self, rest: str):
        with progress_bar("re-embedding") as progress:
            result = self.mem.reembed(progress=progress)
        print(f"Re-embedded {result['embedded']} texts; the store now uses {result['to']}.")

    @magic_arguments()
    @argument("--markdown", action="store_true", help="write Markdown pages into a directory")
    @argument("--by", default=None, help="with --markdown: one page per 'tag' (default) or 'kind'")
    @argument("path", help="file (JSON Lines) or, with --markdown, directory")
    def _export_args(self, line):  # holds the parser for %memory export
        """%memory export FILE.jsonl | %memory export --markdown DIR [--by tag|kind]"""

    def _memory_export(self, rest: str):
        if not rest.strip():
            raise UsageError("Give the file to write: %memory export notes.jsonl (or Markdown "
                             "pages: %memory export --markdown DIR)")
        args = parse_argstring(self._export_args, rest)
        args.path = _path(args.path)
        self._existing_store("export")
        if args.by and not args.markdown:
            raise UsageError("--by groups Markdown pages: add --markdown (a JSON Lines export "
                             "is one file of every note).")
        if args.markdown:
            pages = self.mem.export_markdown(args.path, by=args.by or "tag")
            print(f"Wrote {len(pages)} Markdown pages to {args.path} (start at index.md).")
            return
        with progress_bar("exporting") as progress:
            counts = self.mem.export_jsonl(args.path, progress=progress)
        print(wording.exported_text(counts, args.path))

    @magic_arguments()
    @argument("--on-conflict", default="skip", help="skip, replace or keep-both")
    @argument("path", help="a file written by %%memory export")
    def _import_args(self, line):  # holds the parser for %memory import
        """%memory import FILE.jsonl [--on-conflict skip|replace|keep-both]"""

    @magic_arguments()
    @argument("--to", default=None, metavar="ADDRESS",
              help="the store to copy to (default NbMemory.team_store)")
    @argument("--replace", action="store_true",
              help="a note the store has in another version takes this one")
    @argument("ids", nargs="+", help="the notes to share")
    def _share_args(self, line):  # holds the parser for %memory share
        """%memory share ID [ID ...] [--to postgresql://...] [--replace]"""

    def _memory_share(self, rest: str):
        # Quoted values whole ("my team/store"): IPython's parser splits them at spaces.
        try:
            words = shlex.split(rest.replace('="', ' "').replace("='", " '"), posix=False)
        except ValueError as exc:  # No closing quotation
            raise UsageError(f"%memory share: {exc} in {rest!r}") from None
        args = self._share_args.parser.parse_args(map(unquote, words))
        to = args.to or self.team_store
        if not to:
            raise UsageError("Say where to share the notes: %memory share ID --to "
                             "postgresql://host/db, or %config NbMemory.team_store = '...'")
        ids = parse_ids(" ".join(args.ids))
        summary = self.mem.share(ids, to, replace=args.replace, model=self.model or None,
                                 mode=self.mode)
        print(wording.shared_text(ids, summary, to))

    def _memory_import(self, rest: str):
        if not rest.strip():
            raise UsageError("Give the file to import: %memory import notes.jsonl (one that "
                             "%memory export or nbmemory export wrote)")
        args = parse_argstring(self._import_args, rest)
        args.path = _path(args.path)
        self._writable()  # into a new store: a restore
        with progress_bar("importing") as progress:
            summary = self.mem.import_jsonl(args.path, on_conflict=args.on_conflict,
                                            progress=progress)
        print(wording.imported_text(summary, args.path))


def _path(value: str) -> str:
    """A path as typed: ``"my notes.jsonl"`` (IPython's parser keeps the quotes), ``~/x``."""
    return os.path.expanduser(unquote(value))
