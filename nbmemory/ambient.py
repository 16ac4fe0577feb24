"""Ambient recall: after a cell runs, one line says which notes it concerns.

A cell concerns a note when it read a file the note is about (anchored to it, or named in
its text), used a variable the note is anchored to, or raised an exception a ``gotcha``
note describes. The kernel tells by itself whether a cell concerns any note, from a cached
list of what notes are about (:meth:`Memory.anchor_targets`, fetched again only when the
store's files change); only then does it ask the store, in one call
(:meth:`Memory.notes_about`). A cell that concerns nothing costs two ``stat`` calls, a
parse of its source, resolving each path it names or reads (``realpath``) and a few set
lookups, and never an embedding.

Files a cell reads are found two ways: path-like tokens in its string literals (which
also covers SQL for DuckDB and line magics, and ``!`` commands), and an audit hook
(:mod:`nbmemory.audit`) that records ``open`` events for reading while a cell runs, for
reads through a variable.

An error speaks only through the :class:`Gate`; nothing is shown twice in a row for the
same cell; everything shown is escaped (see :func:`display.ambient_display`).
"""

from __future__ import annotations

import ast
import hashlib
import os
import sys
import time
from collections import OrderedDict, deque
from contextlib import nullcontext, suppress
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Sequence

from .anchors import glob_match
from .audit import install_hook, start_recording, stop_recording
from .errors import NbMemoryError, StoreDamaged, StoreLocked, StoreTooNew, StoreUnavailable

MAX_CELLS = 1000  # cells whose last matches are remembered (for "not twice in a row")
RECENT_CELLS = 20  # a note shown under a cell is not shown again under the next ones
MAX_SOURCE = 200_000  # longer cells are not parsed
K = 5  # notes per path, variable or error
AWAY_RETRY_S = 10.0  # a store that could not be reached is asked again this much later

# -- reading a cell ----------------------------------------------------------------------

def cell_literals(code: str) -> tuple[list[str], set[str]] | None:
    """String constants and names used in ``code`` (Python), or None if it does not parse.

    IPython turns magics and ``!`` commands into calls with string arguments, so the
    transformed cell of ``%sql SELECT * FROM 'data/x.csv'`` holds the path in a literal.
    """
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    strings, names = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value:
            strings.append((node.lineno, node.col_offset, node.value))
    return [value for *_, value in sorted(strings)], names


def cell_paths(code: str, raw: str = "") -> tuple[list[str], set[str]]:
    """Path-like tokens in the cell's literals (all of ``raw`` if it does not parse), and
    the names it uses. Only a literal with a space is looked for on disk (a path whole?)."""
    from .mentions import path_candidates

    parsed = cell_literals(code) if len(code) <= MAX_SOURCE else None
    if parsed is None:
        text = raw or code
        import re

        return path_candidates(text[:MAX_SOURCE]), set(re.findall(r"[A-Za-z_]\w*", text[:MAX_SOURCE]))
    strings, names = parsed
    tokens: list[str] = []
    for value in strings:
        if len(value) > 20_000:
            continue
        whole = value.strip()  # a literal that is one path, spaces and all ('my data/x.csv'):
        if " " in whole and len(whole) < 1024 and os.path.exists(os.path.expanduser(whole)):
            if whole not in tokens:  # and not the data/x.csv inside it
                tokens.append(whole)
            continue
        for token in path_candidates(value):
            if token not in tokens:
                tokens.append(token)
    return tokens, names


# -- what notes are about (cached in the kernel) -----------------------------------------

@dataclass(frozen=True)
class Targets:
    """The kernel's copy of :meth:`Memory.anchor_targets`."""

    position: int
    workspace: str
    paths: frozenset[str]
    globs: tuple[str, ...]
    terms: frozenset[str]
    variables: frozenset[str]
    gotchas: int
    checked: frozenset[str] = frozenset()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Targets:
        """Paths and globs as the system compares them (Windows ignores case)."""
        case = os.path.normcase
        return cls(int(data["position"]), data["workspace"],
                   frozenset(map(case, data["paths"])), tuple(map(case, data["globs"])),
                   frozenset(data["terms"]), frozenset(data["variables"]),
                   int(data["gotchas"]), frozenset(data.get("checked") or ()))

    def concerns(self, path: str, roots: Sequence[Path]) -> bool:
        """Is some note about ``path`` (absolute), by anchor, glob or text?"""
        from .mentions import file_terms

        key = os.path.normcase(path)
        if key in self.paths:
            return True
        if any(glob_match(g, key) for g in self.globs):
            return True
        return bool(self.terms) and any(t in self.terms for t in file_terms(Path(path), roots))


def _under(path: str, folder: str) -> bool:
    """Is ``path`` inside ``folder`` (both absolute), as the system compares paths?"""
    return os.path.normcase(path).startswith(os.path.join(os.path.normcase(folder), ""))


def store_token(directory: Path | None) -> tuple | None:
    """(mtime, size) of the store's DuckDB file and its write-ahead log, or of a team
    store's position file: every commit changes one of them, so an unchanged token means
    unchanged notes."""
    if directory is None:
        return None
    out = []
    for name in ("memory.duckdb", "memory.duckdb.wal", "journal.position"):
        try:
            st = os.stat(directory / name)
            out += [st.st_mtime_ns, st.st_size, st.st_ino]
        except OSError:
            out += [None, None, None]
    return tuple(out)


# -- the gate for errors -----------------------------------------------------------------

@dataclass(frozen=True)
class Gate:
    """When an exception is worth a line: the gotcha notes recalled for ``Type: message``
    must match strongly by meaning, or by keywords, or form a cluster that agrees.

    Defaults measured with all-MiniLM-L6-v2 on the gotchas and errors in
    tests/test_ambient.py (``GOTCHAS``, ``ERRORS``): no unrelated error speaks there.
    """

    dense: float = 0.60  # one gotcha this close in meaning (cosine) speaks alone
    keyword: float = 0.90  # ... or one holding this share of the error's words (idf-weighted)
    cluster: float = 0.42  # ... or cluster_size gotchas at least this close,
    cluster_size: int = 2
    agreement: float = 0.60  # ... that are this close to one another

    def judge(self, hits: Sequence, agreement: Sequence[Sequence[float]] = ()) -> tuple[list, str]:
        """The gotchas worth showing (best first) and why; ``([], "")`` to stay quiet.

        ``hits`` carry ``dense`` and ``lexical`` scores; ``agreement[i][j]`` is the cosine
        of gotchas i and j (from :meth:`Memory.notes_about`).
        """
        reasons, chosen = [], {}
        strong = [h for h in hits if (h.dense or 0.0) >= self.dense]
        if strong:
            reasons.append(f"meaning {max(h.dense for h in strong):.2f} ≥ {self.dense:.2f}")
        words = [h for h in hits if (h.lexical or 0.0) >= self.keyword]
        if words:
            reasons.append(f"keywords {max(h.lexical for h in words):.2f} ≥ {self.keyword:.2f}")
        cluster = self._cluster(hits, agreement)
        if cluster:
            reasons.append(f"{len(cluster)} gotchas ≥ {self.cluster:.2f} that agree "
                           f"(≥ {self.agreement:.2f})")
        for hit in strong + words + cluster:
            chosen.setdefault(hit.note.id, hit)
        ranked = sorted(chosen.values(), key=lambda h: (-(h.score or 0.0), h.note.id))
        return ranked, "; ".join(reasons)

    def _cluster(self, hits: Sequence, agreement: Sequence[Sequence[float]]) -> list:
        good = [i for i, h in enumerate(hits) if (h.dense or 0.0) >= self.cluster]
        if len(good) < max(2, self.cluster_size) or len(agreement) < len(hits):
            return []
        best: list[int] = []
        for center in good:  # the largest group of good gotchas close to one of them
            group = [j for j in good if j == center or agreement[center][j] >= self.agreement]
            if len(group) > len(best):
                best = group
        return [hits[j] for j in best] if len(best) >= self.cluster_size else []

    def describe(self) -> str:
        return (f"an error speaks when a gotcha matches by meaning ≥ {self.dense:.2f} "
                f"(NbMemory.ambient_dense), by keywords ≥ {self.keyword:.2f} "
                f"(ambient_keyword), or {self.cluster_size}+ gotchas match ≥ "
                f"{self.cluster:.2f} (ambient_cluster, ambient_cluster_size) and agree "
                f"≥ {self.agreement:.2f} with one another (ambient_agreement)")


# -- the hook ------------------------------------------------------------------------------

def _signature(note) -> tuple:
    """What makes a note news again: its version, and why it is stale (a note verified and
    then gone stale for a new reason is)."""
    return note.id, note.version, tuple(sorted(str(r) for r in note.stale))


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


class Ambient:
    """Runs after every cell for one :class:`~nbmemory.magics.NbMemory`."""

    def __init__(self, magics):
        self.magics = magics
        self.targets: Targets | None = None
        self._token: tuple | None = None
        self._memory = None  # the Memory the targets came from
        self._seen: OrderedDict[str, frozenset] = OrderedDict()  # cell -> its last matches
        self._shown_at: dict[tuple, int] = {}  # (store, a note as shown) -> cell count then
        self._cwd: tuple[str, str] = ("", "")
        self._started = datetime.now(timezone.utc)
        self.problem: str | None = None  # said once; ambient waits for %memory ambient on
        self.away: str | None = None  # the store could not be reached (said once)
        self._away_until = 0.0  # asked again at the first cell after this (monotonic)
        self.last: tuple[Any, list] | None = None  # (what was shown, its groups)
        self.last_decision = "no cell run yet"
        self.timings: deque[float] = deque(maxlen=1000)  # ms per cell, this kernel
        self.counts = {"cells": 0, "triggered": 0, "shown": 0, "repeats": 0, "quiet": 0}

    @property
    def on(self) -> bool:
        return bool(self.magics.ambient) and self.problem is None

    def gate(self) -> Gate:
        m = self.magics
        return Gate(dense=m.ambient_dense, keyword=m.ambient_keyword, cluster=m.ambient_cluster,
                    cluster_size=m.ambient_cluster_size, agreement=m.ambient_agreement)

    def close(self) -> None:
        """Unloading: the audit hook stays (it cannot be removed) but records nothing."""
        stop_recording()

    # -- IPython events ------------------------------------------------------------------

    def before(self, info=None) -> None:
        self._started = datetime.now(timezone.utc)
        if self.on and self.magics.ambient_audit:
            install_hook()
            start_recording()
        else:
            stop_recording()

    def after(self, result) -> None:
        reads = stop_recording()
        if not self.on or (self.away and time.monotonic() < self._away_until):
            return  # the store was away a moment ago: not asked at every cell
        started = time.perf_counter()
        memory = self.magics._memory
        try:
            with memory.quickly() if memory is not None else nullcontext():
                self._after(result, reads)
            self.away = None
        except (StoreLocked, StoreDamaged, StoreTooNew) as exc:  # not over by the next cell
            self._pause(exc)
        except StoreUnavailable as exc:  # the owner or the team's server away: not for long
            if self.away is None:
                print(f"nbmemory: ambient recall waits for the store ({exc}); it tries again "
                      f"at a cell in {AWAY_RETRY_S:g} s.", file=sys.stderr)
            self.away, self._away_until = str(exc), time.monotonic() + AWAY_RETRY_S
            self.last_decision = f"waiting for the store: {exc}"
        except Exception as exc:  # never break the user's cell: say it once and stop
            self._pause(exc)
        finally:
            self.timings.append((time.perf_counter() - started) * 1000)

    def _pause(self, exc: BaseException) -> None:
        """Say it once and stop, until %memory ambient on."""
        self.problem = f"{type(exc).__name__}: {exc}"
        self.last_decision = f"paused: {self.problem}"
        print(f"nbmemory: ambient recall paused ({self.problem}). Fix that, then "
              "%memory ambient on.", file=sys.stderr)

    # -- deciding ------------------------------------------------------------------------

    def _after(self, result, reads: Iterable[str]) -> None:
        from .procedures import is_bookkeeping

        info = result.info
        raw = info.raw_cell or ""
        if getattr(info, "silent", False) or not raw.strip() or is_bookkeeping(raw):
            return
        self.counts["cells"] += 1
        targets = self._targets()
        if targets is None:
            self.last_decision = "there was no store yet when it ran"
            return
        shell = self.magics.shell
        code = getattr(info, "transformed_cell", None)
        if code is None:
            code = shell.transform_cell(raw) if any(c in raw for c in "%!?") else raw
        tokens, names = cell_paths(code, raw)
        failing = self.magics._recheck(names & targets.checked & set(shell.user_ns), self._token)
        if failing:  # a check whose data this cell changed: said at once, checked here
            print("nbmemory: " + "\nnbmemory: ".join(failing))
        cwd, real_cwd = self._cwd_now()
        roots = [Path(targets.workspace), Path(real_cwd)]
        paths = self._paths(tokens, reads, real_cwd, targets, roots)
        names = sorted(n for n in names & targets.variables if n in shell.user_ns)
        error = self._error(result, targets)
        if not (paths or names or error):
            self.last_decision = "nothing this cell touched has notes"
            return
        self.counts["triggered"] += 1
        self._ask(info, raw, paths, names, error, real_cwd)

    def _paths(self, tokens: list[str], reads: Iterable[str], cwd: str, targets: Targets,
               roots: list[Path]) -> list[str]:
        def forms(path: str) -> list[str]:  # resolved first, as anchors are, then as written
            plain = os.path.normpath(os.path.join(cwd, path))
            return list(dict.fromkeys((os.path.realpath(plain), plain)))

        found = []
        for token in tokens:
            for path in forms(os.path.expanduser(token)):
                if path not in found and targets.concerns(path, roots) and os.path.exists(path):
                    found.append(path)
                    break
        skip = list({f for p in (sys.prefix, sys.base_prefix) for f in (p, os.path.realpath(p))})
        store = self._store_dir()
        for read in reads:
            for path in forms(read):
                if (_under(path, targets.workspace) and path not in found
                        and not any(_under(path, p) for p in skip + [store] if p)
                        and targets.concerns(path, roots)):
                    found.append(path)
                    break
        return found

    def _error(self, result, targets: Targets) -> str | None:
        from IPython.core.error import UsageError

        error = result.error_in_exec
        if error is None or not targets.gotchas:
            return None
        if isinstance(error, (KeyboardInterrupt, SystemExit, UsageError)):
            return None
        return f"{type(error).__name__}: {error}"[:1000]

    def _ask(self, info, raw: str, paths: list[str], names: list[str], error: str | None,
             cwd: str) -> None:
        from .values import variable_fingerprint

        magics = self.magics
        variables = None
        if names:
            values = {n: variable_fingerprint(magics.shell.user_ns[n]) for n in names}
            variables = {"scope": magics._scope(), "values": values}
        about = self._memory.notes_about(paths=paths, cwd=cwd, variables=variables,
                                         error=error, k=K)
        if self.targets is not None and about["position"] != self.targets.position:
            self._token = None  # the notes changed under us: fetch the targets again
        groups: list[tuple[str, list, int]] = []  # (what, notes, how many more)
        for what, hits in [*about["paths"].items(), *about["variables"].items()]:
            groups.append((what, [h.note for h in hits], hits.filtered_out))
        why, quiet = "", "notes about it were written in this cell"
        if about.get("error"):
            hits = about["error"]
            chosen, why = self.gate().judge(hits, about.get("agreement") or [])
            if chosen:
                groups.append((f"this {error.split(':', 1)[0]}", [h.note for h in chosen], 0))
            else:
                quiet = (f"the error matched no gotcha strongly enough (best: meaning "
                         f"{max(h.dense or 0 for h in hits):.2f}, keywords "
                         f"{max(h.lexical or 0 for h in hits):.2f})")
        groups = [(w, [n for n in notes if not self._new(n)], more) for w, notes, more in groups]
        groups = [g for g in groups if g[1]]
        key = getattr(info, "cell_id", None) or hashlib.sha256(raw.encode()).hexdigest()
        previous = self._seen.pop(key, frozenset())
        matched = frozenset(_signature(n) for _, notes, _ in groups for n in notes)
        self._seen[key] = matched
        while len(self._seen) > MAX_CELLS:
            self._seen.popitem(last=False)
        # Not again under this cell, nor (unchanged) under the next RECENT_CELLS others.
        cell, store = self.counts["cells"], self._store_dir()
        recent = {s for (where, s), at in self._shown_at.items()
                  if where == store and cell - at <= RECENT_CELLS}
        fresh = [(w, [n for n in notes if _signature(n) not in previous | recent], more)
                 for w, notes, more in groups]
        fresh = [g for g in fresh if g[1]]
        if fresh:
            self._shown_at = {k: at for k, at in self._shown_at.items()
                              if k[0] == store and k[1] in recent}
            self._shown_at.update(((store, _signature(n)), cell)
                                  for _, notes, _ in fresh for n in notes)
            self._show(fresh, why)
        elif matched:
            self.counts["repeats"] += 1
            self.last_decision = ("shown already for this cell (its last run matched the same "
                                  f"notes), or under one of the last {RECENT_CELLS} cells")
        else:
            self.counts["quiet"] += 1
            self.last_decision = quiet

    def _new(self, note) -> bool:
        """Written during this very cell (e.g. by a %remember in it): not news."""
        return note.created_at is not None and note.created_at >= self._started

    def _show(self, groups: list[tuple[str, list, int]], why: str) -> None:
        from IPython.display import display

        from .display import ambient_display

        shown = ambient_display(groups, why=why)
        self.last = (shown, groups)
        self.counts["shown"] += 1
        self.last_decision = f"shown: {shown.text}"
        display(shown)

    # -- the store -----------------------------------------------------------------------

    def _store_dir(self) -> str | None:
        location = getattr(self._memory, "location", None)
        return str(location.path) if location is not None else None

    def _targets(self) -> Targets | None:
        """The cached targets, fetched again when the store's files changed."""
        magics = self.magics
        if magics._memory is None:
            from .config import locate_store

            location = locate_store(magics.store or None)
            if not location.exists:
                return None  # no store, so no notes: do not create one
        memory = magics.mem
        if memory is not self._memory:
            self._memory, self.targets, self._token = memory, None, None
        location = getattr(memory, "location", None)
        token = store_token(location.path if location is not None else None)
        scope = magics._notebook or ""  # variables are anchored per notebook
        if self.targets is None or token is None or (token, scope) != self._token:
            self.targets = Targets.from_dict(memory.anchor_targets(magics._scope()))
            self._token = (token, magics._notebook or "")
        return self.targets

    def _cwd_now(self) -> tuple[str, str]:
        cwd = os.getcwd()
        if cwd != self._cwd[0]:
            self._cwd = (cwd, os.path.realpath(cwd))
        return self._cwd

    # -- %memory ambient ---------------------------------------------------------------------

    def command(self, rest: str):
        from IPython.core.error import UsageError

        word = rest.strip().lower() or "status"
        if word in ("on", "off"):
            self.magics.ambient = word == "on"
            self.problem = None
            print(f"Ambient recall is {word}." + (" Cells that read, use or raise what a note "
                                                   "is about get one line under their output."
                                                   if word == "on" else ""))
            return None
        if word == "status":
            return print(self.status())
        if word == "show":
            from IPython.display import display

            from .display import ambient_notes_display

            if self.last is None:
                return print("Ambient recall has shown nothing in this kernel yet.")
            return display(ambient_notes_display(self.last[1]))
        raise UsageError(f"Unknown %memory ambient command {word!r}; use on, off, status or show")

    def status(self) -> str:
        magics = self.magics
        state = "on" if magics.ambient else "off"
        if magics.ambient and self.problem:
            state = f"paused ({self.problem}); %memory ambient on to retry"
        elif magics.ambient and self.away:
            state = f"on, waiting for the store ({self.away}); it tries again at each cell"
        lines = [f"Ambient recall: {state} (NbMemory.ambient)",
                 "  speaks when a cell reads a file a note is about (literals in its source"
                 + (", and open() while it runs" if magics.ambient_audit else "")
                 + "; NbMemory.ambient_audit), uses an anchored variable, or raises an error "
                 "a gotcha note describes",
                 f"  gate: {self.gate().describe()}"]
        t = self.targets
        if t is None and magics.ambient and not self.problem:  # a store made since
            with suppress(NbMemoryError):
                t = self._targets()
        if t is not None:
            lines.append(f"  notes are about {_n(len(t.paths), 'path')}, {_n(len(t.globs), 'glob')}, "
                         f"{_n(len(t.variables), 'variable')} here and "
                         f"{_n(len(t.terms), 'file name')} in their text; "
                         f"{_n(t.gotchas, 'gotcha')} (journal position {t.position})")
        c = self.counts
        timing = (f"; overhead per cell p50 {_percentile(self.timings, 0.5):.2f} ms, p95 "
                  f"{_percentile(self.timings, 0.95):.2f} ms") if self.timings else ""
        lines.append(f"  this kernel: {c['cells']} cells checked, {c['triggered']} touched "
                     f"something with notes, {_n(c['shown'], 'line')} shown, {c['repeats']} "
                     f"repeats held back, {c['quiet']} kept quiet{timing}")
        lines.append(f"  last cell: {self.last_decision}")
        return "\n".join(lines)
