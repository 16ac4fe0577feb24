"""What the magics and the CLI share about their options: a long option typed with one dash,
and for ``%recall`` and ``nbmemory recall`` the flags as typed, the ones that apply only to a
query, and the filters as "No notes match" repeats them."""

from __future__ import annotations

from typing import Iterable

# The options of recall by argument name, as a line spells them.
FLAGS = {"tags": "-t", "kind": "--kind", "priority": "-p", "since": "--since",
         "author": "--author", "as_of": "--as-of", "min_score": "--min-score",
         "explain": "--explain", "mine": "--mine", "fresh": "--fresh", "stale": "--stale",
         "open": "--open", "mode": "--mode", "provenance": "--provenance"}
# What ranks or shows search hits: nothing to do for a list of open questions (whose
# --kind can only be question, checked before).
QUERY_ONLY = ("as_of", "min_score", "explain", "provenance", "mode")


def given(args, names: tuple[str, ...]) -> list[str]:
    """The options among ``names`` (``tags`` for -t/--tags...) that the line gave; ``mode``
    counts when it is not the default."""
    return [FLAGS[n] for n in names  # "is": --min-score 0 is given, and 0 == False
            if getattr(args, n) is not None and getattr(args, n) is not False
            and (n != "mode" or args.mode != "hybrid")]


def stale_wanted(args) -> bool | None:
    """Only stale notes (True), only fresh ones (False), or both (None)."""
    return True if args.stale else False if args.fresh else None


def filters_said(args) -> str:
    """The filters the line gave, as typed: ``-t wal --since 7d --fresh`` (a value already
    read into a date shows its flag alone)."""
    said = []
    for name in ("tags", "kind", "priority", "since", "author", "as_of"):
        value = getattr(args, name)
        if value:
            said.append(f"{FLAGS[name]} {value}" if isinstance(value, str) else FLAGS[name])
    return " ".join(said + given(args, ("mine", "fresh", "stale", "open")))


def one_dash(word: str, options: Iterable[str]) -> str | None:
    """The long option ``word`` spells with one dash (``-tag`` for ``--tags``, ``-about``),
    or None. Read as a short option with its value attached, ``-tag`` stored the tag "ag";
    not an option at all, ``-about x.csv`` became words of the note."""
    if word.startswith("--") or len(word) < 3 or not word[1:].replace("-", "").isalpha():
        return None
    return next((o for o in sorted(options) if o.startswith("-" + word)), None)
