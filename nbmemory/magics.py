"""IPython magics: %remember, %recall, %forget, %snapshot and %memory.

Options come first and the rest of the line is the note or query verbatim, so
apostrophes and quotes in a note need no escaping. Settings are traitlets:
``%config NbMemory.k = 10``. Errors become one-line ``UsageError``s.
"""

from __future__ import annotations

import sys

from IPython.core.error import UsageError
from IPython.core.magic import (Magics, line_cell_magic, line_magic, magics_class,
                                no_var_expand)
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display
from IPython.utils.text import DollarFormatter
from traitlets import Bool, Float, Int, Unicode, default, observe

from . import display as show
from . import procedures, syntax, wording
from .ambient import Ambient, Gate
from .cli_args import note_id
from .config import Settings, configured_model
from .magic_args import (about_anchors, ask, keep_question_marks, parse_ids, split_message,
                         split_options, unquote, usage_errors)
from .magic_checks import CheckCommands, check_whole, evidence
from .magic_memory import MemoryCommands
from .magic_recall import RecallCommands
from .models import MODE_HELP, MODES, Provenance

@magics_class
class NbMemory(MemoryCommands, RecallCommands, CheckCommands, Magics):
    """Remember findings, recall them, forget them, snapshot what you know."""

    store = Unicode("", help="Store directory, or a team store's postgresql:// address. Empty: "
                             "NBMEMORY_HOME, the nearest .nbmemory/ above the working "
                             "directory, the git root, or the working directory."
                    ).tag(config=True)
    model = Unicode(help="sentence-transformers model for embeddings (default: "
                         "NBMEMORY_MODEL, else all-MiniLM-L6-v2).").tag(config=True)
    mode = Unicode("auto", help="service: use the store's owner process (started on demand; "
                                "the model never loads in the kernel); local: open the store "
                                "in this kernel; auto: service.").tag(config=True)
    idle_timeout = Float(None, allow_none=True, min=0.0,
                         help="Seconds an owner this kernel starts waits for requests before "
                              "exiting (0: never). None: NBMEMORY_IDLE_TIMEOUT, else "
                              "1800.").tag(config=True)
    k = Int(5, min=1, help="How many notes %recall shows by default.").tag(config=True)
    team_store = Unicode("", help="Where %memory share copies notes: a team store's "
                                  "postgresql:// address (or a store directory)."
                         ).tag(config=True)
    similar = Int(3, min=0, help="How many similar notes to show after %remember (0 hides them).").tag(config=True)
    min_score = Float(Settings.min_score, min=-1.0, max=1.0,
                      help="Recall hides notes scoring below this (and says how many). Scores "
                           "are 0..1: the cosine, mixed with the keyword share when the "
                           "query's words match a note well; a high-priority note's shows "
                           "0.02 more, a low one's 0.02 less.").tag(config=True)
    ambient = Bool(True, help="After each cell, one line names the notes about the files it "
                              "read, the anchored variables it used or the error it "
                              "raised (%memory ambient on|off|status).").tag(config=True)
    ambient_audit = Bool(True, help="Ambient recall also records files opened for reading "
                                    "while a cell runs (an audit hook; reads through "
                                    "variables).").tag(config=True)
    ambient_dense = Float(Gate.dense, min=0.0, max=1.0,
                          help="An error speaks when a gotcha matches it by meaning (cosine) "
                               "at least this much.").tag(config=True)
    ambient_keyword = Float(Gate.keyword, min=0.0, max=1.0, help="... or holds at least "
                            "this share of the error's words.").tag(config=True)
    ambient_cluster = Float(Gate.cluster, min=0.0, max=1.0,
                            help="... or ambient_cluster_size gotchas match by meaning at "
                                 "least this much,").tag(config=True)
    ambient_cluster_size = Int(Gate.cluster_size, min=1,
                               help="(see ambient_cluster)").tag(config=True)
    ambient_agreement = Float(Gate.agreement, min=0.0, max=1.0,
                              help="... and are at least this close to one "
                                   "another.").tag(config=True)

    check_budget = Float(1.0, min=0.01, max=600.0,
                         help="Seconds a check (%remember --check, %memory check) may run "
                              "before it is stopped and reported.").tag(config=True)

    def __init__(self, shell=None, **kwargs):
        # Set before Configurable.__init__: applying config from ipython_config.py fires
        # the observers below, which close the (not yet opened) store.
        self._memory, self._creating = None, False  # a write may create the store
        self._outcomes: dict[int, bool] = {}  # execution count -> ran without error
        self._notebook: str | None = None  # learnt once, kept for the kernel's life
        self._ambient = Ambient(self)
        self._checks, self._checks_token, self._check_seen = None, None, {}  # see magic_checks
        self._unrecorded: list[dict] = []
        super().__init__(shell=shell, **kwargs)

    @property
    def mem(self):
        """The store's Memory, opened on first use (so %load_ext stays instant)."""
        if self._memory is None:
            from .memory import Memory

            self._existing_store("read", creating=self._creating)
            with usage_errors():
                self._memory = Memory.open(self.store or None, model=self.model, mode=self.mode,
                                           settings=Settings(model=self.model, min_score=self.min_score),
                                           idle_timeout=self.idle_timeout, announce=_announce)
        return self._memory

    @default("model")
    def _default_model(self) -> str:
        return configured_model()

    @observe("store", "model", "min_score", "mode", "idle_timeout")
    def _reopen(self, change) -> None:
        self.close()

    def close(self) -> None:
        if self._memory is not None:
            self._memory.close()
            self._memory = None

    def _provenance(self) -> Provenance:
        from . import provenance

        captured = provenance.capture(self.shell)
        if captured.notebook:
            self._notebook = captured.notebook
        elif self._notebook:  # e.g. nbclient: learnt from an earlier cell
            captured = Provenance.from_dict({**captured.to_dict(), "notebook": self._notebook,
                                             "source": "notebook"})
        return captured

    def _expand(self, value: str) -> str:
        """An option's value with ``{expr}`` and ``$name`` filled in from the user's
        namespace, as IPython fills in a whole magic line (left as typed if that fails)."""
        try:
            return DollarFormatter().vformat(value, args=[], kwargs=self.shell.user_ns)
        except NameError as exc:  # said, or "nothing exists at {DATA}/x.csv" puzzles
            print(f"nbmemory: {value} is used as typed ({exc} in this kernel)", file=sys.stderr)
            return value
        except Exception:  # noqa: BLE001 - IPython's own var_expand does the same
            return value

    def _scope(self) -> str:
        """What variable anchors are scoped to: this kernel's notebook ('' outside one)."""
        if self._notebook is None:
            from . import provenance

            self._notebook = provenance.notebook_path(
                self.shell, code=provenance.current_cell(self.shell)[1])
        return self._notebook or ""

    def _variables(self) -> dict | None:
        """Current fingerprints of the anchored variables this kernel has (see stale.py)."""
        from .values import variable_fingerprint

        scope = self._scope()
        names = [n for n in self.mem.variable_anchors(scope) if n in self.shell.user_ns]
        return {"scope": scope, "values": {n: variable_fingerprint(self.shell.user_ns[n])
                                           for n in names}} if names else None

    # -- %remember ------------------------------------------------------------------------

    @magic_arguments()
    @argument("-p", "--priority", default=None,
              help="high, medium or low (default medium; with --supersedes, the old note's)")
    @argument("-t", "--tags", default=None,
              help="comma-separated tags, e.g. -t orders,units "
                   "(with --supersedes, default the old note's)")
    @argument("-k", "--kind", default=None,
              help="finding, gotcha, decision, question, reference or procedure (default "
                   "finding; with --supersedes, the old note's)")
    @argument("--supersedes", type=note_id, default=None, metavar="ID",
              help="this note replaces note ID (kept in its history); without --about it is "
                   "about ID's files, data and globs")
    @argument("--procedure", default=None, metavar="NAME",
              help="store the code of the cells given by --cells (those that ran without "
                   "error) as a procedure note named NAME")
    @argument("--cells", default=None, metavar="N-M",
              help="with --procedure: execution counts, e.g. 3-7 or 3,5,8-9")
    @argument("--about", action="append", default=None, metavar="PATH|GLOB|VAR",
              help="anchor the note to a file, directory, glob or variable (repeatable); "
                   "it is flagged stale when that changes. Paths in the text are anchored too")
    @argument("--check", default=None, metavar="EXPR",
              help="a Python expression that must hold now, e.g. --check \"df.amount.isna()"
                   ".mean() < 0.05\"; %%memory check re-runs it later")
    @argument("--from-output", action="store_true",
              help="keep the latest cell result, Out[N] (not printed output), as the "
                   "note's evidence (%%memory rerun compares it with a fresh run)")
    @argument("--output-of", type=int, default=None, metavar="N",
              help="keep the result of cell [N] (its execution count) as the evidence")
    @argument("text", nargs="*", help="the finding itself; in %%%%remember the cell body")
    @line_cell_magic
    @no_var_expand
    def remember(self, line: str, cell: str | None = None):
        """Store a finding: %remember [-p high] [-t a,b] [-k kind] [--about X] text

        ``--`` ends the options, for text that starts with a dash. In cell form the whole
        cell body is the note:

            %%remember -p high -t orders --about data/orders.csv --about df
            orders.amount is in cents before 2021-03 and in euros after.

        Where it came from (notebook, cell, git commit) is recorded; %recall --provenance
        shows it. The note goes stale when what it is about changes (%memory stale).
        """
        from .anchors import pointer_only
        from .provenance import cell_request_ids, same_run
        from .wording import pointer_hint

        args, text = split_options(self.remember.parser, line, self._expand, ("--check",),
                                   trailing=True)
        check_whole(line, args.check, text)
        if cell is not None:
            text = cell if not text else f"{text}\n{cell}"
        if args.procedure or args.cells:
            text, args.kind = self._procedure(args, text), "procedure"
        provenance = self._provenance()
        ids = cell_request_ids(provenance, line, cell, text)
        request_id = ids[0] if ids else None
        self._writable()  # a first note makes the store
        with usage_errors():  # run again (Run All): the note this cell wrote, not a copy
            earlier = next((n for n in map(self.mem.written_by, ids) if n is not None), None)
            if earlier is not None:
                return display(show.already_display(earlier, provenance.notebook))
        about = about_anchors(args.about, self.shell.user_ns, provenance.notebook or "", text)
        if args.from_output or args.output_of is not None:
            about.append(evidence(self.shell, before=self.shell.execution_count,
                                  count=args.output_of))
        about = about or None  # none given: a note it supersedes lends its own
        with usage_errors():
            options = dict(kind=args.kind, priority=args.priority, tags=args.tags,
                           provenance=provenance, author=provenance.author, about=about,
                           request_id=request_id)
            if args.check is not None:
                options.update(check=unquote(args.check), namespace=self.shell.user_ns,
                               budget=self.check_budget)
            note, similar = self.mem.remember_with_similar(
                text, supersedes=args.supersedes, similar=self.similar, **options)
        hint = pointer_only(note.text) and pointer_hint(
            note.id, f"%remember --supersedes {note.id} <the finding>")
        edited = next((h.note.id for h in similar if provenance.cell_id and args.supersedes is None
                       and (h.note.provenance.cell_id, h.note.provenance.notebook)
                       == (provenance.cell_id, provenance.notebook)
                       and not same_run(h.note.provenance, provenance)), None)
        hint = hint or edited and (f"this cell wrote #{edited} before it was edited: "
                                   f"%forget {edited} if this note replaces it")
        display(show.remembered_display(note, similar, hint=hint or None))

    def _procedure(self, args, description: str) -> str:
        if not (args.procedure and args.cells):
            raise UsageError("A procedure needs a name and cells: "
                             "%remember --procedure load-orders --cells 3-7")
        try:
            counts = procedures.parse_cells(args.cells)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        history = self.shell.history_manager.input_hist_raw
        sources, failed, unknown, missing = [], [], [], []
        for count in counts:
            if count >= len(history) or not history[count].strip():
                missing.append(count)
            elif procedures.is_bookkeeping(history[count]):
                continue
            elif self._outcomes.get(count) is False:
                failed.append(count)
            elif count not in self._outcomes:  # ran before %load_ext: success unknown
                unknown.append(count)
            else:
                sources.append(history[count])
        if missing:
            raise UsageError(f"No cell ran with execution count {procedures.cell_ranges(missing)} "
                             f"in this kernel (the last was {len(history) - 1}).")
        if failed:
            print(f"Left out cells that raised an error: {', '.join(map(str, failed))}.")
        if unknown:
            print(f"Left out cells that ran before %load_ext nbmemory, so whether they succeeded"
                  f" is unknown: {', '.join(map(str, unknown))}. Re-run them to include them.")
        if not sources:
            raise UsageError("None of those cells ran without error; nothing to store.")
        return procedures.procedure_text(args.procedure, sources, description)

    def _record_outcome(self, result) -> None:
        if result.execution_count is not None:
            self._outcomes[result.execution_count] = result.success

    # -- %recall --------------------------------------------------------------------------

    @magic_arguments()
    @argument("-k", type=int, default=None, help="how many notes (default NbMemory.k)")
    @argument("-t", "--tags", default=None, help="only notes with all these tags")
    @argument("--kind", default=None, help="only notes of these kinds (comma-separated)")
    @argument("-p", "--priority", default=None, help="only notes of these priorities")
    @argument("--since", default=None, help="only notes written since: 7d, 12h, 2w or a date")
    @argument("--explain", action="store_true", help="show the keyword and semantic scores")
    @argument("--provenance", action="store_true", help="show where each note came from")
    @argument("--min-score", type=float, default=None,
              help="hide notes scoring below this (before the ±0.02 of priority)")
    @argument("--mode", choices=MODES, default="hybrid", help=MODE_HELP)
    @argument("--open", action="store_true",
              help="open questions (neither confirmed nor refuted); with a query, the best of them")
    @argument("--as-of", default=None, metavar="SNAPSHOT",
              help="search the notes as they were when SNAPSHOT was sealed")
    @argument("--fresh", action="store_true", help="only notes that are not stale")
    @argument("--stale", action="store_true", help="only stale notes")
    @argument("--author", default=None, help="only notes written by these (comma-separated)")
    @argument("--mine", action="store_true", help="only notes you wrote (a team store)")
    @argument("query", nargs="*", help="what you want to know, in any words")
    @line_magic
    @no_var_expand
    def recall(self, line: str):
        """Find notes by meaning and by keyword: %recall [-k N] [-t tags] [--kind K] query

        With no query, recall notes about what is alive in the kernel now: variable
        names, DataFrame columns and file paths. ``hits = %recall ...`` keeps the hits
        (``hits.to_dataframe()`` for pandas).
        """
        args, query = split_options(self.recall.parser, line, self._expand, late_options=False)
        return self._recall_parsed(args, query)

    # -- %forget --------------------------------------------------------------------------

    @magic_arguments()
    @argument("--purge", action="store_true",
              help="erase the text and vectors for good (asks to confirm)")
    @argument("--yes", action="store_true", help="with --purge: do not ask")
    @argument("ids", nargs="*", help="ids of the notes to forget")
    @line_magic
    def forget(self, line: str):
        """Forget notes (reversible): %forget ID [ID ...]; undo with %memory reinstate ID

        %forget --purge ID erases the note's text and vectors for privacy; the journal keeps
        only that a purge happened. It cannot be undone.
        """
        args, rest = split_options(self.forget.parser, line)
        ids = parse_ids(rest)
        if not ids:
            raise UsageError("Give the id of the note to forget, e.g. %forget 12")
        if args.purge:
            return self._purge(ids, confirmed=args.yes)
        with usage_errors():
            notes = self.mem.forget(ids)
        print(syntax.forgot([n.id for n in notes], syntax.MAGIC))
        if replaced := syntax.still_replaced(notes, syntax.MAGIC, self.mem.get):
            print(replaced)

    def _purge(self, ids: list[int], *, confirmed: bool) -> None:
        with usage_errors():
            notes = [self.mem.get(i) for i in dict.fromkeys(ids)]
        purged = [f"#{n.id}" for n in notes if n.status == "purged"]
        if purged:
            raise UsageError(f"Already purged: {', '.join(purged)}. Nothing was erased.")
        if not confirmed:
            listed = ", ".join(f"#{n.id}" for n in notes)
            answer = ask(f"Erase {listed} permanently (text and vectors; cannot be undone)? "
                         "Type 'purge' to confirm: ")
            if answer is None:
                print("Nothing purged: this front end cannot ask. Confirm with "
                      f"%forget --purge --yes {' '.join(str(n.id) for n in notes)}")
                return
            if answer.strip().lower() != "purge":
                print("Nothing purged.")
                return
        with usage_errors():
            for note in notes:
                self.mem.purge(note.id)
        print(f"Purged {', '.join(f'#{n.id}' for n in notes)}: text and vectors erased.")
        if replaced := syntax.still_replaced(notes, syntax.MAGIC, self.mem.get):
            print(replaced)

    # -- %snapshot ------------------------------------------------------------------------

    @magic_arguments()
    @argument("-m", "--message", default="", help="why this moment matters")
    @argument("--list", action="store_true", help="list snapshots")
    @argument("--diff", action="store_true",
              help="what changed from snapshot A to snapshot B (default: now)")
    @argument("name", nargs="*", help="snapshot name (no spaces); with --diff: A [B]")
    @line_magic
    def snapshot(self, line: str):
        """Seal what you know now: %snapshot NAME [-m message]

        %snapshot --list          every snapshot with its time and note count
        %snapshot --diff A [B]    notes added, edited, superseded, revoked and gone stale
                                  from A to B (default: now)
        """
        line, message = split_message(line)
        args = parse_argstring(self.snapshot, line)
        args.name, args.message = [n for n in map(unquote, args.name) if n], message
        if args.list and (args.diff or args.name):
            raise UsageError("--list takes nothing else: %snapshot --list")
        if (args.list or args.diff) and args.message:
            flag = "--list" if args.list else "--diff"
            raise UsageError(f"-m is the message of a new snapshot; {flag} takes none: "
                             "%snapshot NAME -m message")
        if args.list or args.diff:
            self._existing_store("list")
        with usage_errors():
            if args.list:
                return display(show.snapshots_display(self.mem.snapshots()))
            if args.diff:
                if len(args.name) not in (1, 2):
                    raise UsageError("Give one or two snapshot names: %snapshot --diff A [B]")
                return display(show.diff_display(
                    self.mem.snapshot_diff(*args.name, variables=self._variables())))
            if not args.name:
                raise UsageError("Give the snapshot a name: %snapshot NAME [-m message]")
            snap = self._writable().snapshot(" ".join(args.name), message=args.message,
                                     variables=self._variables())
        print(f"Sealed snapshot {snap.name!r} at journal position {snap.seq} "
              f"({wording.counted(snap.note_count, 'active note')}).")

    # -- %memory --------------------------------------------------------------------------

    @line_magic
    def memory(self, line: str):
        """Status and upkeep of the store.

        %memory                     store, counts, model, index, empty-recall rate
        %memory list [-t tags] [--kind K] [-p P] [-n N] [--offset K] [--status S[,S]]
                    [--order newest|oldest|priority]   the notes, newest first
        %memory browse [-t tags] [--kind K] [-n N] interactive browser (ipywidgets)
        %memory history ID          every event of a note
        %memory reinstate ID        undo %forget
        %memory confirm ID [reason] / refute ID reason / reopen ID   resolve a question
        %memory insert [--print] ID   put a procedure's code into a new cell (or print it)
        %memory stale [-n N] [--offset K]   notes whose files, data, variables or cells changed
        %memory verify ID           you checked note ID still holds: re-take its fingerprints
        %memory check [ID ...]      re-run the notes' checks here (NbMemory.check_budget each)
        %memory trust ID            let this kernel run a check someone else wrote
        %memory rerun ID [--yes]    re-run a note's cell; old and new output side by side
        %memory reindex             rebuild both indexes from the store (with progress)
        %memory reembed             re-embed all notes with the configured model
        %memory export FILE.jsonl   everything, losslessly (notes, versions, journal, snapshots)
        %memory export --markdown DIR [--by tag|kind]   readable pages, one per tag or kind
        %memory import FILE.jsonl [--on-conflict skip|replace|keep-both]
        %memory share ID [ID ...] [--to ADDRESS] [--replace]   copy notes to the team store
                                    (NbMemory.team_store); --replace sends edited ones again
        %memory ambient on|off|status|show   the line under cells that touch what notes are about
        %memory settings            current settings (change with %config NbMemory.x = ...)
        """
        command, _, rest = line.strip().partition(" ")
        handler = getattr(self, f"_memory_{command or 'status'}", None)
        if handler is None:
            raise UsageError(f"Unknown %memory command {command!r}; try %memory? for the list")
        if command in ("status", "reindex", "reembed") and rest.strip():
            raise UsageError(f"%memory {command} takes nothing after it (got {rest.strip()!r})")
        with usage_errors():
            return handler(rest.strip())


MAGIC_NAMES = ("remember", "recall", "forget", "snapshot", "memory")


def _announce(message: str) -> None:
    """Under the cell that waits for a new owner: why it waits."""
    print(f"nbmemory: {message}", file=sys.stderr, flush=True)


def load_ipython_extension(ipython) -> None:
    magics = NbMemory(ipython)
    # IPython has a %recall of its own (history; also %rep): keep it to put it back on unload.
    table = ipython.magics_manager.magics
    # Recent IPython declares its magics lazily: a placeholder resolves by name, which would
    # be ours once registered, so load the real ones first.
    def real(kind: str, name: str):
        try:
            return ipython.find_magic(name, kind) or table[kind][name]
        except UsageError:  # a lazy declaration that fails to load: keep it as it was
            return table[kind][name]

    magics._shadowed = {(kind, name): real(kind, name) for kind in ("line", "cell")
                        for name in MAGIC_NAMES if name in table[kind]}
    ipython.register_magics(magics)
    rep, history_recall = table["line"].get("rep"), magics._shadowed.get(("line", "recall"))
    if getattr(rep, "magic_name", None) == "recall" and history_recall is not None:
        # %rep is IPython's alias of whatever %recall is: point it at the history one.
        magics._shadowed[("line", "rep")] = rep
        table["line"]["rep"] = history_recall
    if keep_question_marks not in ipython.input_transformers_cleanup:
        ipython.input_transformers_cleanup.append(keep_question_marks)
    ipython.events.register("post_run_cell", magics._record_outcome)
    ipython.events.register("pre_run_cell", magics._ambient.before)
    ipython.events.register("post_run_cell", magics._ambient.after)


def unload_ipython_extension(ipython) -> None:
    magics = ipython.magics_manager.registry.pop("NbMemory", None)
    if magics is not None:
        magics.close()
        ipython.events.unregister("post_run_cell", magics._record_outcome)
        ipython.events.unregister("pre_run_cell", magics._ambient.before)
        ipython.events.unregister("post_run_cell", magics._ambient.after)
        magics._ambient.close()
        if keep_question_marks in ipython.input_transformers_cleanup:
            ipython.input_transformers_cleanup.remove(keep_question_marks)
        table = ipython.magics_manager.magics
        for kind in ("line", "cell"):
            for name in MAGIC_NAMES:
                table[kind].pop(name, None)
        for (kind, name), original in getattr(magics, "_shadowed", {}).items():
            table[kind][name] = original
        if magics in ipython.configurables:
            ipython.configurables.remove(magics)

