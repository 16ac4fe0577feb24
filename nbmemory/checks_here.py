"""Checks run in the caller's process, in its namespace (a kernel's variables): those the
caller trusts, the others skipped with the reason; the outcomes journalled by the store."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from . import checks as evaluation
from .config import current_user
from .errors import ReadOnlyStore


def run_checks(memory, namespace: Mapping[str, Any], note_ids: Iterable[int] | None,
               budget: float) -> list[tuple[dict, evaluation.Outcome]]:
    """See :meth:`nbmemory.memory.Memory.check`."""
    wanted = None if note_ids is None else {int(i) for i in note_ids}
    listed = memory.checks()
    for note_id in sorted((wanted or set()) - {item["note"].id for item in listed}):
        memory.get(note_id)  # an id that names no note is refused, not "has no check"
    results = []
    for item in listed:
        if wanted is not None and item["note"].id not in wanted:
            continue
        author = item["note"].author
        why = ("not trusted: it came in an import (a file carries no trust)"
               if item.get("imported") else
               f"not trusted as it reads now: you trusted this note's checks before, not this "
               f"one (it changed, or is new); read it, then %memory trust {item['note'].id}"
               if item.get("trusted_before") else
               f"not trusted: written by {author or 'someone else'}"
               if author != current_user() else
               "not trusted here: not as it reads now (or only on another machine)")
        outcome = evaluation.evaluate(
            item["expression"], namespace, budget=budget, reads=item["names"]
        ) if item["trusted"] else evaluation.Outcome("skipped", why=why)
        results.append((item, outcome))
    if results:
        try:
            memory.record_checks([{"note_id": item["note"].id, "expression": item["expression"],
                                   **outcome.to_dict()} for item, outcome in results])
        except ReadOnlyStore:  # a reader of a team store: the outcomes are theirs alone
            for item, _ in results:
                item["recorded"] = False
    return results
