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
from .when import parse_since


# The options of %recall by argument name, as a line spells them.
_FLAGS = {"tags": "-t", "kind": "--kind", "priority": "-p", "since": "--since",
          "author": "--author", "as_of": "--as-of", "min_score": "--min-score",
          "explain": "--explain", "mine": "--mine", "fresh": "--fresh", "stale": "--stale",
          "open": "--open", "mode": "--mode", "provenance": "--provenance"}


def _given(args, names: tuple[str, ...]) -> list[str]:
    """The options among ``names`` (``tags`` for -t/--tags...) that the line gave."""
    return [_FLAGS[n] for n in names if getattr(args, n) not in (None, False)]


def _mode(args) -> list[str]:
    return [] if args.mode == "hybrid" else ["--mode"]


def _filters_said(args) -> str:
    """The filters the line gave, as typed: ``-t wal --fresh``."""
    values = ("tags", "kind", "priority", "since", "author", "as_of")
    switches = ("mine", "fresh", "stale", "open")
    return " ".join([f"{_FLAGS[n]} {getattr(args, n)}" for n in values if getattr(args, n)]
                    + _given(args, switches))


class RecallCommands:
    """Mixed into :class:`~nbmemory.magics.NbMemory`, which provides ``mem`` (``_memory``
    until it is opened), ``store``, ``shell``, ``k``, ``_scope()`` and ``_variables()``."""

    def _recall_parsed(self, args, query: str):
        if args.fresh and args.stale:
            raise UsageError("Use --fresh or --stale, not both")
        stale = True if args.stale else False if args.fresh else None
        if args.mine and args.author:
            raise UsageError("Use --mine or --author, not both")
        author = current_user() if args.mine else args.author
        k = self.k if args.k is None else args.k
        if args.open and not query:
            return self._open_questions(args, k, stale, author)
        if args.open and args.kind not in (None, "question"):
            raise UsageError("--open searches the open questions: leave --kind out")
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
        hits.filters = _filters_said(args)  # "No notes match 'x' with -t nosuchtag."
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
        needless = _given(args, ("kind", "as_of", "min_score", "explain", "provenance")) \
            + _mode(args)
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
        needless = _given(args, ("tags", "kind", "priority", "since", "as_of", "min_score",
                                 "explain")) + _mode(args)
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
