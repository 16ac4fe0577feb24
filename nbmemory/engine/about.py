"""What notes are about, for ambient recall: the paths, globs, variables and file names
active notes are anchored to or name, and the notes about what one cell touched."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..anchors import absolute, display_path, glob_match
from ..mentions import file_terms, is_file_term
from ..errors import InvalidInput
from ..models import Hit, Hits
from ..store import Filters
from .part import Part
from .validate import MAX_K, check_count
from .recall import PRIORITY_BONUS


@dataclass(frozen=True)
class _About:
    """What active notes are about, at one journal position (for ambient recall)."""

    commits: int  # Store.commits when built
    position: int
    paths: dict[str, set[int]]  # file, data and dir anchor targets (workspace-relative)
    globs: dict[str, set[int]]
    variables: dict[tuple[str, str], set[int]]  # (scope, name)
    terms: frozenset[str]  # file-like terms of active notes' text
    gotchas: int
    checked: frozenset[str]  # names the checks of notes read


class About(Part):
    def __init__(self, engine):
        super().__init__(engine)
        self._cache: _About | None = None

    def current(self) -> _About:
        """Targets of active notes' anchors and text, rebuilt after any write."""
        commits = self.store.commits
        if self._cache is not None and self._cache.commits == commits:
            return self._cache
        paths: dict[str, set[int]] = {}
        globs: dict[str, set[int]] = {}
        variables: dict[tuple[str, str], set[int]] = {}
        checked: set[str] = set()
        for note_id, rows in self.store.anchors(self.store.anchored_note_ids()).items():
            for _, anchor in rows:
                if anchor.kind in ("file", "data", "dir"):
                    paths.setdefault(anchor.target, set()).add(note_id)
                elif anchor.kind == "glob":
                    globs.setdefault(anchor.target, set()).add(note_id)
                elif anchor.kind == "variable":
                    key = (anchor.fingerprint.get("scope", ""), anchor.target)
                    variables.setdefault(key, set()).add(note_id)
                elif anchor.kind == "check":
                    checked.update(anchor.fingerprint.get("names") or ())
        inactive = self.engine.state.inactive
        terms = frozenset(t for t in self.engine.keywords.index.terms() if is_file_term(t)
                          and any(i not in inactive for i in self.engine.keywords.index.docs_with(t)))
        gotchas = len(self.store.note_ids(Filters(kinds=("gotcha",))))
        self._cache = _About(commits, self.store.position(), paths, globs, variables,
                                   terms, gotchas, frozenset(checked))
        return self._cache

    def anchor_targets(self, scope: str = "") -> dict[str, Any]:
        """What a kernel needs to tell by itself whether a cell concerns any note.

        ``paths``: absolute paths of the files and directories active notes are anchored
        to; ``globs``: absolute glob patterns; ``terms``: file-like terms of note text
        (see :func:`mentions.file_terms`); ``variables``: names anchored in ``scope``;
        ``gotchas``: how many active gotcha notes exist; ``checked``: the names checks
        read (a cell that changes one re-runs them); ``position``: the journal position
        all this reflects.
        """
        with self.lock:
            about = self.engine.about.current()
            root = self.engine.workspace
            return {"position": about.position, "workspace": str(root),
                    "paths": sorted(str(absolute(t, root)) for t in about.paths),
                    "globs": sorted(str(absolute(g, root)) for g in about.globs),
                    "terms": sorted(about.terms),
                    "variables": sorted(name for s, name in about.variables if s == (scope or "")),
                    "gotchas": about.gotchas, "checked": sorted(about.checked)}

    def notes_about(self, *, paths: Sequence[str] = (), cwd: str | None = None,
                    variables: dict | None = None, error: str | None = None,
                    k: int = 5) -> dict[str, Any]:
        """Active notes about what one cell touched, in one call.

        ``paths``: absolute paths the cell read; ``cwd``: the kernel's working directory
        (a note may name a file relative to it); ``variables``: ``{"scope": notebook,
        "values": {name: fingerprint}}`` of the anchored variables the cell used;
        ``error``: ``"KeyError: 'amount'"``, recalled among gotcha notes with both
        channels' scores (the kernel's gate decides whether that is worth showing).

        Returns ``{"position", "paths": {target: Hits}, "variables": {name: Hits},
        "error": Hits or None, "agreement": [[cosine of gotchas i and j]]}`` (rows in hit
        order; empty for fewer than two). Notes anchored to a path score 1.0, notes that
        only name it in their text 0.5; each Hits keeps at most ``k`` notes
        (``filtered_out`` counts the rest). While the configured model differs from the
        store's, errors are not matched (paths and variables still are).
        """
        check_count(k, "k", 1, MAX_K)
        if isinstance(paths, str) or not all(isinstance(p, str) for p in paths):
            raise InvalidInput("paths must be a list of absolute path strings")
        roots = [self.engine.workspace] + ([Path(cwd)] if cwd else [])
        with self.lock:
            about = self.engine.about.current()
            found: dict[str, dict[int, float]] = {}
            for path in dict.fromkeys(paths):
                location = Path(path)
                target = display_path(location, self.engine.workspace)
                ids = {i: 0.5 for term in file_terms(location, roots)
                       for i in self.engine.keywords.index.docs_with(term) if i not in self.engine.state.inactive}
                ids.update(dict.fromkeys(about.paths.get(target, ()), 1.0))
                for pattern, matching in about.globs.items():
                    if glob_match(pattern, target):
                        ids.update(dict.fromkeys(matching, 1.0))
                if ids:
                    found[target] = ids
            scope = (variables or {}).get("scope", "")
            by_name = {}
            for name in (variables or {}).get("values") or {}:
                ids = about.variables.get((scope, name))
                if ids:
                    by_name[name] = dict.fromkeys(ids, 1.0)
            wanted = {i for ids in (*found.values(), *by_name.values()) for i in ids}
            notes = {n.id: n for n in self.engine.staleness.with_stale(
                list(self.store.get_notes(sorted(wanted)).values()), variables)}

            def hits(scores: dict[int, float], what: str) -> Hits:
                order = sorted((i for i in scores if i in notes), key=lambda i: (
                    -scores[i], -PRIORITY_BONUS[notes[i].priority], -i))
                return Hits([Hit(notes[i], scores[i]) for i in order[:k]], query=what,
                            filtered_out=max(0, len(order) - k))

            gotchas, agreement = None, []
            if error and error.strip() and about.gotchas and not self.engine.mismatch:
                gotchas = self.engine.recalls.recall(error.strip()[:1000], k=k, kind="gotcha", explain=True,
                                      min_score=0.0, variables=variables, log=False)
                if len(gotchas) > 1 and self.engine.vectors is not None:
                    matrix = self.engine.vectors.get(np.array([h.note.id for h in gotchas]))
                    agreement = np.round(matrix @ matrix.T, 4).tolist()
            return {"position": about.position,
                    "paths": {t: hits(s, t) for t, s in found.items()},
                    "variables": {n: hits(s, n) for n, s in by_name.items()},
                    "error": gotchas, "agreement": agreement}

    def anchored_to(self, terms: Sequence[str], scope: str | None, cwd: str | None) -> list[int]:
        """Active notes with an anchor on one of ``terms``, newest first."""
        about = self.engine.about.current()
        names = set(terms)
        found: set[int] = set()
        for (anchor_scope, name), ids in about.variables.items():
            if name in names and (scope is None or anchor_scope == scope):
                found |= ids
        root = self.engine.workspace
        wanted = {os.path.normpath(os.path.join(cwd or str(root), t)) for t in terms
                  if "/" in t or "." in t}
        for target, ids in about.paths.items():
            if str(absolute(target, root)) in wanted:
                found |= ids
        for pattern, ids in about.globs.items():
            if any(glob_match(os.path.normcase(str(absolute(pattern, root))),
                          os.path.normcase(w)) for w in wanted):
                found |= ids
        return sorted(found - self.engine.state.inactive, reverse=True)

