"""Typed stale reasons: has what a note is about changed since it was written or verified?

The engine's :class:`StaleChecker` builds a note's anchors at remember time, explains
how each has changed (``missing``, ``content_changed``, ``schema_changed``,
``rows_changed``, ``cell_changed``) and re-takes fingerprints on verify. Reasons are
recomputed on every read, so they clear by themselves when a file comes back.

Speed: a file whose (mtime, size) still equals the fingerprint's costs one ``stat``;
otherwise its new fingerprint is computed once and cached by (path, mtime, size).

Variables live in a kernel, not in the engine's process: the kernel sends the current
fingerprints of the variables it has (``{"scope": notebook, "values": {name: fp}}``)
and only anchors taken in the same scope (notebook) are compared with them. A variable
the kernel does not have (a fresh kernel that has not run the cell yet, another
notebook) is not judged.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from .anchors import (MAX_GLOB_MATCHES, DataReader, Unreadable, absolute, cell_anchor,
                      display_path, file_fingerprint, glob_matches, hash_file, is_glob,
                      path_anchor, same_text, spec_anchor, split_cell_target, stat_key, take,
                      wal_key)
from .config import this_machine
from .errors import Command, InvalidInput
from .mentions import paths_in_text
from .models import Anchor, Provenance, StaleReason
from .provenance import notebook_cells, source_hash
from .repos import Repositories

Variables = Mapping[str, Any] | None
MAX_CACHE = 20_000
MAX_RENAME_SCAN = 500


def schema_diff(old: Sequence[Sequence[str]], new: Sequence[Sequence[str]]) -> str:
    """``added discount; removed note; amount BIGINT→DOUBLE`` (empty when equal)."""
    before, after = dict(map(tuple, old)), dict(map(tuple, new))
    parts = []
    added = [c for c in after if c not in before]
    removed = [c for c in before if c not in after]
    changed = [f"{c} {before[c]}→{after[c]}" for c in after if c in before and before[c] != after[c]]
    for label, items in (("added", added), ("removed", removed), ("changed", changed)):
        if items:
            shown = ", ".join(items[:5]) + (f" and {len(items) - 5} more" if len(items) > 5 else "")
            parts.append(f"{label} {shown}")
    if not parts and list(before) != list(after):
        parts.append("columns reordered")
    return "; ".join(parts)


def _rows(old: Any, new: Any) -> str:
    return f"{old:,} → {new:,} rows"


def _listing_diff(old: Iterable[str], new: Iterable[str]) -> str:
    old, new = set(old), set(new)
    added, removed = sorted(new - old), sorted(old - new)
    parts = [f"+{n}" for n in added[:3]] + [f"−{n}" for n in removed[:3]]
    more = len(added) + len(removed) - len(parts)
    return ", ".join(parts) + (f" and {more} more" if more > 0 else "")


class StaleChecker:
    """Anchors and their reasons for one workspace. Thread-safe; owns a private DuckDB."""

    def __init__(self, root: Path, *, exclude: Iterable[Path] = (),
                 repositories: Repositories | None = None):
        self.root = Path(root).resolve()
        self.exclude = [Path(p).resolve() for p in exclude]
        # A team store's: paths in a git repository are kept relative to it, by identity.
        self.repositories = repositories
        # A team store's too: whose machine an anchor only it can check was taken on.
        self.machine = this_machine() if repositories is not None else None
        self.reader = DataReader()
        self._lock = threading.RLock()
        self._cache: dict[tuple, Any] = {}

    def close(self) -> None:
        with self._lock:
            self.reader.close()

    def _path_anchor(self, path: Path, origin: str) -> Anchor:
        """An anchor to ``path``: relative to the workspace, or (a team store) to its git
        repository, whose identity it keeps so each member checks their own checkout."""
        found = self.repositories.of(path) if self.repositories else None
        if found is None:
            return path_anchor(path, self.root, self.reader, origin)
        root, identity = found
        anchor = path_anchor(path, root, self.reader, origin)
        return Anchor(anchor.kind, anchor.target, {**anchor.fingerprint, "repo": identity},
                      origin)

    def _root(self, anchor: Anchor) -> Path | None:
        """Where ``anchor``'s relative target is: its repository's checkout here (None when
        this machine has none), else the workspace."""
        wanted = anchor.fingerprint.get("repo")
        if not wanted or not self.repositories:
            return self.root
        return self.repositories.locate(wanted)

    def _elsewhere(self, anchor: Anchor) -> bool:
        """An anchor taken on another member's machine (a team store's notebook cells): no
        file here says anything about it, so it is neither stale nor missing here."""
        machine = anchor.fingerprint.get("machine")
        return bool(machine) and machine != self.machine

    def _cached(self, key: tuple, compute):
        with self._lock:
            if key in self._cache:
                return self._cache[key]
            value = compute()
            if len(self._cache) >= MAX_CACHE:
                self._cache.clear()
            self._cache[key] = value
            return value

    def _file(self, path: Path, key: tuple[int, int], data: bool) -> dict[str, Any]:
        return self._cached(("file", str(path), key, data),
                            lambda: file_fingerprint(path, self.reader if data else None))

    def _sha(self, path: Path) -> str | None:
        key = stat_key(path)
        return self._file(path, key, False)["sha256"] if key else None

    # -- building ---------------------------------------------------------------------------

    def build(self, text: str, about: Iterable[Any] | None, provenance: Provenance) -> list[Anchor]:
        """The anchors of a new note: ``about`` items, paths the text mentions, its cell.

        ``about`` holds paths, directories or globs (strings; relative ones, and the paths
        the text mentions, are looked up in the writer's working directory, as their code
        reads them, then in the workspace) and ready anchors (:class:`Anchor` or its dict,
        for variables fingerprinted in a kernel).
        """
        roots = ([Path(provenance.cwd)] if provenance.cwd else []) + [self.root]
        if self.repositories and provenance.cwd:
            self.repositories.of(Path(provenance.cwd))  # a checkout this member works in
        anchors: list[Anchor] = []
        if isinstance(about, (str, dict)):
            about = [about]
        elif about is not None and not isinstance(about, (list, tuple)):
            raise InvalidInput(f"about is a list of paths, globs or anchors, not "
                               f"{type(about).__name__}")
        with self._lock:
            for item in about or ():
                anchor = self._about(item, roots)
                if all((a.kind, a.target) != (anchor.kind, anchor.target) for a in anchors):
                    anchors.append(anchor)
            notebook = [Path(provenance.notebook)] if provenance.notebook else []
            exclude = self.exclude + notebook + [self.root, *self.root.parents]
            for path in paths_in_text(text, roots, exclude=exclude):
                if any(path.is_relative_to(p) for p in self.exclude):
                    continue
                anchor = self._path_anchor(path, "text")
                if all(a.target != anchor.target for a in anchors):
                    anchors.append(anchor)
        if provenance.notebook and provenance.cell_id and provenance.cell_hash:
            cell = cell_anchor(provenance.notebook, provenance.cell_id, provenance.cell_hash,
                               self.root)
            if self.machine:  # a team store: only the writer's machine has this notebook
                cell = Anchor("cell", cell.target, {**cell.fingerprint, "machine": self.machine},
                              cell.origin)
            anchors.append(cell)
        return anchors

    def reanchor_text(self, current: list[tuple[int, Anchor]], text: str, provenance: Provenance,
                      next_position: int) -> list[tuple[int, Anchor]]:
        """Rows to write when a note's text is edited: new ``(position, anchor)`` for paths
        it now mentions, and a ``dropped`` row for each it no longer mentions."""
        roots = [self.root] + ([Path(provenance.cwd)] if provenance.cwd else [])
        notebook = [Path(provenance.notebook)] if provenance.notebook else []
        exclude = self.exclude + notebook + [self.root, *self.root.parents]
        with self._lock:
            mentioned = [p for p in paths_in_text(text, roots, exclude=exclude)
                         if not any(p.is_relative_to(e) for e in self.exclude)]
            targets = {self._path_anchor(p, "text").target: p for p in mentioned}
            rows: list[tuple[int, Anchor]] = []
            for position, anchor in current:
                if anchor.origin == "text" and anchor.target not in targets:
                    rows.append((position, Anchor(anchor.kind, anchor.target, {"dropped": True},
                                                  "text")))
            known = {a.target for _, a in current}
            for target, path in targets.items():
                if target not in known:
                    rows.append((next_position, self._path_anchor(path, "text")))
                    next_position += 1
        return rows

    def _about(self, item: Any, roots: list[Path]) -> Anchor:
        if isinstance(item, dict):
            try:
                item = Anchor.from_dict(item)
            except (KeyError, TypeError, ValueError, AttributeError):
                raise InvalidInput("An about item given as a dict must be an anchor "
                                   "(kind, target, fingerprint, origin), e.g. from "
                                   "nbmemory.values.variable_fingerprint") from None
        if isinstance(item, Anchor):
            if item.kind == "variable":
                if not item.target.isidentifier():
                    raise InvalidInput(f"{item.target!r} is not a variable name")
                return Anchor("variable", item.target, dict(item.fingerprint), "about")
            if item.kind == "check":  # evaluated in the writer's kernel, never here
                if not item.target.strip() or not isinstance(item.fingerprint.get("names"), list):
                    raise InvalidInput("A check anchor needs its expression and the names it "
                                       "reads (make it with nbmemory.checks.check_anchor)")
                return Anchor("check", item.target.strip(), dict(item.fingerprint), "check")
            if item.kind == "evidence":  # a cell's output, kept as it was
                if not isinstance(item.fingerprint.get("output"), str):
                    raise InvalidInput("An evidence anchor needs the output it keeps")
                return Anchor("evidence", item.target, dict(item.fingerprint), "evidence")
            item = item.target  # a file-system anchor: the engine takes its own fingerprint
        if not isinstance(item, (str, os.PathLike)) or not str(item).strip():
            raise InvalidInput(f"Cannot anchor a note to {item!r}; give a path, a glob or a "
                               "variable name, e.g. {0}", Command("about", ("data/orders.csv",)))
        if "\x00" in str(item):  # no file system holds such a name: not "nothing exists there"
            raise InvalidInput("{0}: a path cannot hold a NUL character (U+0000); remove it. "
                               "The note was not stored.", Command("about", (str(item),)))
        try:
            anchor = spec_anchor(str(item), roots, self.root, self.reader)
            if anchor is not None and anchor.kind != "glob" and self.repositories:
                anchor = self._path_anchor(absolute(anchor.target, self.root), "about")
        except Unreadable as exc:
            raise InvalidInput(f"{{0}}: {exc}. The note was not stored.",
                               Command("about", (str(item),))) from None
        except OSError as exc:  # a name too long for any file system, and the like
            shown = str(item) if len(str(item)) <= 200 else f"{str(item)[:200]}…"
            raise InvalidInput(f"{{0}}: {exc.strerror or exc}. Check the path. The note was "
                               "not stored.", Command("about", (shown,))) from None
        if anchor is None:
            what = "matches" if is_glob(str(item)) else "exists"
            looked = ("" if os.path.isabs(os.path.expanduser(str(item))) else
                      f" (looked in {', '.join(dict.fromkeys(str(r) for r in roots))})")
            raise InvalidInput(f"{{0}}: nothing {what} there{looked}. Check the path{{1}}. "
                               "The note was not stored.", Command("about", (str(item),)),
                               Command("define"))
        return anchor

    # -- checking ---------------------------------------------------------------------------

    def reasons(self, anchors: Iterable[Anchor], variables: Variables = None) -> list[StaleReason]:
        out: list[StaleReason] = []
        for anchor in anchors:
            try:
                out.extend(self._reasons(anchor, variables))
            except (OSError, Unreadable):  # unreadable right now: say so rather than guess
                out.append(StaleReason("missing", anchor.target, "unreadable"))
        return out

    def _reasons(self, anchor: Anchor, variables: Variables) -> list[StaleReason]:
        kind = anchor.kind
        if "repo" in anchor.fingerprint and self._root(anchor) is None:
            return [StaleReason("unchecked", anchor.target,
                                f"in {anchor.fingerprint['repo']}, which is not checked out on this "
                                "machine")]
        if kind in ("file", "data"):
            return self._file_reasons(anchor)
        if kind == "dir":
            return self._dir_reasons(anchor)
        if kind == "glob":
            return self._glob_reasons(anchor)
        if kind == "cell":
            return [] if self._elsewhere(anchor) else self._cell_reasons(anchor)
        if kind in ("check", "evidence"):
            return []  # a check's outcome is a journal event (the engine reads the latest);
            # evidence is what a cell printed once, compared by %memory rerun
        if kind == "variable":
            return self._variable_reasons(anchor, variables)
        return []

    def _file_reasons(self, anchor: Anchor) -> list[StaleReason]:
        old, target = anchor.fingerprint, anchor.target
        path = absolute(target, self._root(anchor))
        key = stat_key(path) if not path.is_dir() else None
        if old.get("exists") is False:  # verified while gone
            if key is None or old.get("sha256") and same_text(
                    self._file(path, key, anchor.kind == "data"), old):
                return []
            return [StaleReason("content_changed", target, "it exists again" + (
                ", changed" if old.get("sha256") else ""))]
        if key is None:
            return [StaleReason("missing", target, self._renamed(path, old))]
        logged = wal_key(path) != old.get("wal")  # a database written, not yet checkpointed
        if key == (old.get("mtime_ns"), old.get("size")):
            return [StaleReason("content_changed", target, "its write-ahead log changed")
                    ] if logged else []
        new = self._file(path, key, anchor.kind == "data")
        if same_text(new, old) and not logged:
            return []
        reasons = []
        if "columns" in old and "columns" in new:
            diff = schema_diff(old["columns"], new["columns"])
            if diff:
                reasons.append(StaleReason("schema_changed", target, diff))
        if old.get("rows") is not None and new.get("rows") is not None and old["rows"] != new["rows"]:
            reasons.append(StaleReason("rows_changed", target, _rows(old["rows"], new["rows"])))
        return reasons or [StaleReason("content_changed", target)]

    def _renamed(self, path: Path, old: dict[str, Any]) -> str:
        """``renamed to data/x.csv?`` when a file with the same content sits beside it."""
        parent, size, sha = path.parent, old.get("size"), old.get("sha256")
        if not sha or not parent.is_dir():
            return ""
        try:
            with os.scandir(parent) as entries:
                for n, entry in enumerate(entries):
                    if n >= MAX_RENAME_SCAN:
                        break
                    if entry.is_file(follow_symlinks=False) and entry.stat().st_size == size:
                        if self._sha(Path(entry.path)) == sha:
                            return f"renamed to {display_path(Path(entry.path), self.root)}?"
        except (OSError, Unreadable):
            pass
        return ""

    def _dir_reasons(self, anchor: Anchor) -> list[StaleReason]:
        old, target = anchor.fingerprint, anchor.target
        root = self._root(anchor)
        path = absolute(target, root)
        if old.get("exists") is False:
            return [StaleReason("content_changed", target, "it exists again")] if path.is_dir() else []
        if not path.is_dir():
            return [StaleReason("missing", target)]
        mtime = path.stat().st_mtime_ns
        if mtime == old.get("mtime_ns"):
            return []
        new = self._cached(("dir", str(path), mtime), lambda: take("dir", target, root))
        if new.get("listing") == old.get("listing"):
            return []
        detail = (_listing_diff(old["names"], new["names"]) if "names" in old and "names" in new
                  else f"{old.get('entries', '?')} → {new.get('entries', '?')} entries")
        return [StaleReason("content_changed", target, detail)]

    def _glob_reasons(self, anchor: Anchor) -> list[StaleReason]:
        old_files = anchor.fingerprint.get("files") or {}
        target = anchor.target
        try:
            matches = glob_matches(target, self.root)
        except Unreadable as exc:
            return [StaleReason("content_changed", target, str(exc))]
        if not matches:
            return [StaleReason("missing", target, "nothing matches")] if old_files else []
        more = len(matches) - MAX_GLOB_MATCHES
        matches = matches[:MAX_GLOB_MATCHES]  # the files past them are counted, not read
        new_names = [display_path(m, self.root) for m in matches]
        changed = []
        for match, name in zip(matches, new_names):
            if name not in old_files:
                continue
            size, mtime, sha, *text = old_files[name]
            key = stat_key(match)
            old = {"sha256": sha, **({"text_sha256": text[0]} if text else {})}
            if key is not None and key != (mtime, size) and not same_text(
                    self._file(match, key, False), old):
                changed.append(name)
        # Fingerprints taken before the files past the first were counted have no count:
        # unknown, not 0 (600 files were "100 past the first 500, were 0" after an upgrade).
        was = anchor.fingerprint.get("more", max(more, 0))
        past = (f"{max(more, 0):,} files past the first {MAX_GLOB_MATCHES}, were {was:,}"
                if max(more, 0) != was else "")
        if set(new_names) == set(old_files) and not changed and not past:
            return []
        detail = ", ".join(x for x in (_listing_diff(old_files, new_names),
                                       ", ".join(f"~{n}" for n in changed[:3]), past) if x)
        return [StaleReason("content_changed", target, detail)]

    def _cell(self, notebook: Path) -> tuple[tuple[int, int] | None, dict[str, str] | None]:
        key = stat_key(notebook)
        if key is None:
            return None, None
        cells = self._cached(("cells", str(notebook), key), lambda: notebook_cells(notebook))
        return key, cells

    def _cell_reasons(self, anchor: Anchor) -> list[StaleReason]:
        """The saved notebook differs in this cell; a notebook not saved since says nothing."""
        old = anchor.fingerprint
        if not old.get("sha"):
            return []
        notebook, cell_id = split_cell_target(anchor.target)
        key, cells = self._cell(absolute(notebook, self.root))
        if key is None and old.get("saved"):  # a verify stops watching it (see retake)
            return [StaleReason("missing", notebook, "the notebook it was written in; "
                                "renamed or moved?")]
        if key is None or cells is None or key[0] / 1e9 <= float(old.get("at", 0)):
            return []
        shown = f"{notebook} cell {cell_id[:8]}"
        if cell_id not in cells:
            return [StaleReason("cell_changed", shown, "cell deleted")]
        kind, source = cells[cell_id]
        if kind != "code":
            return [StaleReason("cell_changed", shown, f"cell turned into {kind}")]
        if source_hash(source) != old["sha"]:
            return [StaleReason("cell_changed", shown, "source edited")]
        return []

    @staticmethod
    def unjudged(anchors: Iterable[Anchor], variables: Variables) -> set[str]:
        """The variables among ``anchors`` that ``variables`` cannot judge (another kernel's,
        or none given: the CLI, the server): their flags are neither raised nor cleared."""
        return {a.target for a in anchors if a.kind == "variable" and (
            not variables or variables.get("scope", "") != a.fingerprint.get("scope", "")
            or (variables.get("values") or {}).get(a.target) is None)}

    def _variable_reasons(self, anchor: Anchor, variables: Variables) -> list[StaleReason]:
        old, name = anchor.fingerprint, anchor.target
        if anchor.target in self.unjudged([anchor], variables):
            return []
        new = variables["values"][name]
        if new.get("type") != old.get("type"):
            return [StaleReason("content_changed", name,
                                f"was {old.get('type')}, now {new.get('type')}")]
        reasons = []
        if "columns" in old and "columns" in new:
            diff = schema_diff(old["columns"], new["columns"])
            if diff:
                reasons.append(StaleReason("schema_changed", name, diff))
        old_shape, new_shape = old.get("shape"), new.get("shape")
        if old_shape and new_shape and old_shape[0] != new_shape[0]:
            reasons.append(StaleReason("rows_changed", name, _rows(old_shape[0], new_shape[0])))
        # Samples taken by another scheme (an older nbmemory's polars hash) do not compare:
        # the note is not flagged for it; verifying re-takes the fingerprint.
        if (not reasons and old.get("sample_scheme") == new.get("sample_scheme")
                and None not in (old.get("sample"), new.get("sample"))
                and old.get("sample") != new.get("sample")):
            reasons.append(StaleReason("content_changed", name))
        return reasons

    # -- verifying --------------------------------------------------------------------------

    def carried(self, anchors: Iterable[Anchor]) -> list[Anchor]:
        """The files, data, directories and globs a note was written ``--about``,
        fingerprinted now, for the note that supersedes it: the correction is flagged when
        they change again. Those gone, and variables, cells and checks, are not carried."""
        taken = (self.retake(a) for a in anchors
                 if a.origin == "about" and a.kind in ("file", "data", "dir", "glob"))
        return [a for a in taken if a is not None and a.fingerprint.get("exists") is not False]

    def retake(self, anchor: Anchor, variables: Variables = None) -> Anchor | None:
        """The anchor with a fingerprint taken now; None when it cannot be taken here."""
        if anchor.kind in ("file", "data", "dir", "glob"):
            root = self._root(anchor)
            if root is None:
                return None  # its repository is not checked out here
            with self._lock:
                fingerprint = take(anchor.kind, anchor.target, root, self.reader)
            if "repo" in anchor.fingerprint:
                fingerprint["repo"] = anchor.fingerprint["repo"]
            if fingerprint.get("exists") is False:  # gone: it may come back as it was
                fingerprint.update({k: v for k, v in anchor.fingerprint.items()
                                    if k in ("sha256", "text_sha256")})
            return Anchor(anchor.kind, anchor.target, fingerprint, anchor.origin)
        if anchor.kind == "cell":
            if self._elsewhere(anchor):
                return None  # a colleague's notebook: their machine's to check
            notebook, cell_id = split_cell_target(anchor.target)
            key, cells = self._cell(absolute(notebook, self.root))
            if key is None:  # gone: the note was checked without it, and stops watching it
                return Anchor("cell", anchor.target, {**anchor.fingerprint, "at": time.time(),
                                                      "saved": False}, anchor.origin)
            if cells is None:
                return None
            kind, source = cells.get(cell_id, ("", ""))
            sha = source_hash(source) if kind == "code" else None
            mine = {"machine": anchor.fingerprint["machine"]} if "machine" in anchor.fingerprint \
                else {}
            return Anchor("cell", anchor.target, {"sha": sha, "at": time.time(), "saved": True,
                                                  **mine}, anchor.origin)
        if anchor.kind == "variable":
            scope = anchor.fingerprint.get("scope", "")
            if not variables or variables.get("scope", "") != scope:
                return None
            new = (variables.get("values") or {}).get(anchor.target)
            if new is None:
                return None
            return Anchor("variable", anchor.target, {**new, "scope": scope}, anchor.origin)
        return None


__all__ = ["StaleChecker", "schema_diff", "hash_file", "cell_anchor"]
