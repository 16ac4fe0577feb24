"""``about`` as the caller means it, made in the caller's process before a note is sent to
the store's owner (running elsewhere, perhaps in another directory): relative paths that
exist here made absolute, and a check evaluated here, in the caller's namespace."""

from __future__ import annotations

import glob
import os
from typing import Any, Mapping

from . import checks as evaluation
from .anchors import is_glob
from .errors import InvalidInput
from .models import Anchor


def about_here(items) -> list | None:
    """``about`` as plain JSON values (a path string or an anchor's dict), relative paths
    that exist from this process's working directory made absolute: they mean what the
    caller sees, not what the store's owner (running elsewhere) would."""
    if items is None:
        return None
    if isinstance(items, (str, os.PathLike, Anchor, dict)):
        items = [items]
    if not isinstance(items, (list, tuple)):
        return items  # the engine says what is wrong with it
    return [i.to_dict() if isinstance(i, Anchor) else _here(os.fspath(i))
            if isinstance(i, (str, os.PathLike)) else i for i in items]


def check_before_creating(store, about, provenance) -> None:
    """``about`` refused (InvalidInput) as the store not made yet at ``store`` would refuse
    it, before it is made: a refused note left an empty store, and its owner, where a
    mistyped store points."""
    from .config import locate_store, workspace_of
    from .stale import StaleChecker

    path = locate_store(store).path
    checker = StaleChecker(workspace_of(path), exclude=[path])
    try:
        checker.build("", about_here(about), provenance)
    finally:
        checker.close()


def with_check(about: list | None, check: str | None, namespace: Mapping[str, Any] | None,
                budget: float) -> list | None:
    """``about`` and, given a check, the anchor of that check if it holds in ``namespace``
    (else InvalidInput, with the value it got)."""
    if check is None:
        return about
    return [*(about or []), checked(check, namespace, budget).to_dict()]


def checked(expression: str, namespace: Mapping[str, Any] | None, budget: float) -> Anchor:
    if namespace is None:
        raise InvalidInput("A check is evaluated in your namespace: pass namespace=globals() "
                           "(or the dict the names live in)")
    outcome = evaluation.evaluate(expression, namespace, budget=budget)
    if outcome.status != "passed":
        said = {"failed": f"is False here (value {outcome.value})",
                "error": outcome.trouble, "skipped": f"cannot run ({outcome.why})"}[outcome.status]
        raise InvalidInput(f"The check {expression.strip()!r} {said}; the note was not "
                           "stored. Fix the check or the finding.")
    if outcome.gave:  # a mean or a length holds while it is not 0, even when NaN
        raise InvalidInput(f"The check {expression.strip()!r} gives a {outcome.gave} (value "
                           f"{outcome.value}), not True or False, so it would hardly ever fail; "
                           "write what must hold, e.g. a comparison such as "
                           f"'{expression.strip()} > 0'. The note was not stored.")
    return evaluation.check_anchor(expression, namespace, outcome)


def _here(path: str) -> str:
    """``path`` made absolute against the working directory when something is there
    (a file, a directory, or files a glob matches); else as given (the engine then looks
    in the workspace)."""
    if not path.strip() or os.path.isabs(os.path.expanduser(path)):
        return path
    local = os.path.join(os.getcwd(), path)
    return local if os.path.exists(local) or (is_glob(path) and glob.glob(local)) else path
