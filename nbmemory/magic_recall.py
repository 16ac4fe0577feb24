"""What ``%recall`` does with its parsed line: a query, the open questions, or (with
neither) the notes about what is alive in the kernel."""

from __future__ import annotations

from IPython.core.error import UsageError
from IPython.display import display

from . import display as show
from .address import is_address
from .config import current_user, locate_store
from .magic_args import usage_errors
from .namespace import namespace_terms
from .options import QUERY_ONLY, filters_said, given, stale_wanted
from .when import parse_since


class RecallCommands:
    """Mixed into :class:`~nbmemory.magics.NbMemory`, which provides ``mem`` (``_memory``
    until it is opened), ``store``, ``shell``, ``k``, ``_scope()`` and ``_variables()``."""

    def _recall_parsed(self, args, query: str):
        if args.fresh and args.stale:
            raise UsageError("Use --fresh or --stale, not both")
        stale = stale_wanted(args)
        if args.mine and args.author:
            raise UsageError("Use --mine or --author, not both")
        author = current_user() if args.mine else args.author
        k = self.k if args.k is None else args.k
        if args.open and args.kind not in (None, "question"):  # with a query or without
            raise UsageError("--open searches the open questions: leave --kind out")
        if args.open and not query:
            return self._open_questions(args, k, stale, author)
        if not query:
            return self._recall_kernel(args, k, stale, author)
        self._existing_store()
        with usage_errors():
            hits = self.mem.recall(query, k=k, tags=args.tags, kind=args.kind,
                                   priority=args.priority, since=parse_since(args.since),
                                   explain=args.explain, min_score=args.min_score,
                                   as_of=args.as_of, stale=stale, mode=args.mode,
                                   variables=self._variables(), author=author,
                                   open_only=args.open)
        hits.provenance = args.provenance
        hits.filters = filters_said(args)  # "No notes match 'x' with -t nosuchtag."
        return hits

    def _existing_store(self, doing: str = "recall", *, creating: bool = False) -> None:
        """A store named in NbMemory.store or NBMEMORY_HOME is not created to answer a read
        (``doing``: the magic's verb or %memory command): a typo there would answer "No notes
        match" (or "0 notes") from a new, empty store. Nor, ``creating`` it, in a folder
        that does not exist."""
        doing = {"": "show", "status": "show", "history": "show", "stale": "check"}.get(
            doing, doing)
        if self._memory is not None or is_address(self.store or ""):
            return
        with usage_errors():
            location = locate_store(self.store or None)
        named = "NbMemory.store" if self.store else "NBMEMORY_HOME"
        if location.address is not None or location.reason not in ("given explicitly",
                                                                    "from NBMEMORY_HOME"):
            return  # found where nbmemory looks by itself: made on first use
        if not location.path.parent.is_dir():
            raise UsageError(f"Cannot create the store {location.path}: {location.path.parent}"
                             f" does not exist. Check {named} (a typo?), or make the directory "
                             "first.")
        if not creating and not location.exists:
            raise UsageError(f"No store at {location.path} yet ({named}), so nothing to "
                             f"{doing}: check it for a typo. %remember creates the store there.")

    def _writable(self):
        """The Memory, opened for a write, which may create the store."""
        self._creating = True
        try:
            return self.mem
        finally:
            self._creating = False

    def _open_questions(self, args, k: int, stale, author):
        needless = given(args, QUERY_ONLY)
        if needless:
            verb = "applies" if len(needless) == 1 else "apply"
            raise UsageError(f"%recall --open with no query lists the open questions; "
                             f"{', '.join(needless)} {verb} only to a query: "
                             f"%recall --open {' '.join(needless)} ... <what you want to know>")
        limit = args.k or 50
        with usage_errors():
            questions = self.mem.open_questions(
                limit=limit + 1, tags=args.tags, priority=args.priority,
                since=parse_since(args.since), author=author, stale=stale)
        display(show.notes_display(questions[:limit], title="Open questions"))
        if len(questions) > limit:  # never cut silently
            print(f"(more open questions than {limit}: %recall --open -k {limit * 4} shows more)")

    def _recall_kernel(self, args, k: int, stale, author):
        """No query: notes about the kernel's variables, columns and paths."""
        needless = given(args, ("tags", "kind", "priority", "since", "as_of", "min_score",
                                "explain", "mode"))
        if needless:
            raise UsageError(
                f"{', '.join(needless)} need{'s' if len(needless) == 1 else ''} a query: "
                f"%recall {' '.join(needless)} ... <what you want to know>. With no query, "
                "%recall shows the notes about this kernel's variables; to list notes by "
                "tag, kind or priority: %memory list -t TAGS --kind KIND")
        terms = namespace_terms(self.shell.user_ns, set(getattr(self.shell, "user_ns_hidden", {})))
        with usage_errors():
            return self.mem.recall_terms(terms, k=k, scope=self._scope(),
                                         variables=self._variables(), stale=stale,
                                         author=author)
