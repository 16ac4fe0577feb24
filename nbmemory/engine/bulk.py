"""The checks of a bulk remember (Writes.remember_many), made before any note is written."""

from __future__ import annotations

from typing import Any, Sequence

from ..errors import InvalidInput, NbMemoryError

# What a note of remember_many may hold: remember's arguments (Writes.prepare's).
REMEMBERS = ("text", "kind", "priority", "tags", "author", "provenance", "about",
             "supersedes", "request_id")


def prepare_many(writes, notes: Sequence[Any], request_id: str | None
                 ) -> list[tuple[int, dict[str, Any]]]:
    """Each note of ``notes`` (a text, or a dict of remember's arguments) as ``writes``
    prepares it, by its index; one that cannot be remembered raises InvalidInput naming it
    (and up to two more), and none is written. Note ``i`` gets the request id
    ``{request_id}/{i}`` unless it has its own."""
    if isinstance(notes, (str, dict)) or not isinstance(notes, Sequence):
        raise InvalidInput("remember_many takes a list of notes, each a text or a dict "
                           "of remember's arguments, e.g. [{'text': '...', 'tags': 'a,b'}]")
    prepared, problems = [], []
    for i, note in enumerate(notes):
        try:
            if isinstance(note, str):  # the text alone, with remember's defaults
                note = {"text": note}
            if not isinstance(note, dict):
                raise InvalidInput(f"expected a dict of remember's arguments or a text, "
                                   f"got {type(note).__name__}")
            note = dict(note)
            if unknown := sorted(set(note) - set(REMEMBERS), key=str):
                raise InvalidInput(f"no argument {', '.join(map(repr, unknown))}"
                                   f"{'' if 'text' in note else ' (and no text)'}; a note "
                                   f"takes {', '.join(REMEMBERS)}")
            if "text" not in note:
                raise InvalidInput("no text")
            if request_id and not note.get("request_id"):
                note["request_id"] = f"{request_id}/{i}"
            prepared.append((i, writes.prepare(**note)))
        except (TypeError, NbMemoryError) as exc:
            problems.append(f"note {i}: {exc}")
    if not problems:
        problems = cannot_supersede_any(writes, prepared)
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise InvalidInput(f"{len(problems)} of {len(notes)} notes cannot be remembered, "
                           f"so none was: {'; '.join(problems[:3])}{more}")
    return prepared


def cannot_supersede_any(writes, prepared: list[tuple[int, dict[str, Any]]]) -> list[str]:
    """What the store says against the notes' ``supersedes`` (a note missing, not active
    or replaced twice), before any note is written; notes already written (a resent
    call) are not asked again."""
    if all(p["supersedes"] is None for _, p in prepared):
        return []
    with writes.lock:
        done = writes.store.request_notes([p["request_id"] for _, p in prepared
                                           if p["request_id"]])
        problems, replaced = [], set()
        for i, p in prepared:
            old = p["supersedes"]
            if old is None or p["request_id"] in done:
                continue
            if problem := writes.cannot_supersede(old, replaced):
                problems.append(f"note {i}: {problem}")
            replaced.add(old)
        return problems
