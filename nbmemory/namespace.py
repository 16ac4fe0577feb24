"""What a kernel has alive now: variable names, DataFrame columns and file paths.

Read without importing pandas or polars: frames are recognised by their type's module.
"""

from __future__ import annotations

import os
from pathlib import PurePath
from types import FunctionType, ModuleType

_SKIP = {"In", "Out", "exit", "quit", "get_ipython"}


def _columns(value) -> list[str]:
    module = type(value).__module__ or ""
    if module.startswith(("pandas", "polars")) and hasattr(value, "columns"):
        try:
            return [str(c) for c in list(value.columns)[:200]]
        except Exception:  # an exotic frame: its name is still a term
            return []
    return []


def _path(value) -> str | None:
    if isinstance(value, PurePath) or (isinstance(value, str) and 0 < len(value) < 300
                                       and ("/" in value or "." in value)):
        text = str(value)
        try:
            return text if os.path.exists(text) else None
        except (OSError, ValueError):
            return None
    return None


def namespace_terms(user_ns: dict, hidden: set[str] | None = None) -> list[str]:
    """Variable names, DataFrame columns and existing file paths, in a stable order."""
    hidden = hidden or set()
    terms: list[str] = []
    for name, value in user_ns.items():
        if name.startswith("_") or name in _SKIP or name in hidden:
            continue
        if isinstance(value, (ModuleType, type, FunctionType)):
            continue
        terms.append(name)
        terms.extend(_columns(value))
        path = _path(value)
        if path:
            terms.append(path)
    return list(dict.fromkeys(terms))
