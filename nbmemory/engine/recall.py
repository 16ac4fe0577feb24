"""Recall: hybrid ranking over the live notes or a snapshot's, the notes about what is
alive in a kernel, and the notes most like one."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Sequence

import numpy as np

from ..errors import Command, InvalidInput
from ..history import PastView
from ..lexical import LexicalIndex
from ..models import Hit, Hits, Note, utcnow
from ..ranking import MODES, rank
from ..store import Filters, Store
from ..vectors import DenseRows, VectorIndex
from .part import Part
from .validate import MAX_K, check_count, filters_for, unicode_text

PRIORITY_BONUS = {"high": 0.02, "medium": 0.0, "low": -0.02}
_NO_VECTORS = DenseRows.from_matrix(np.empty(0, np.int64), np.empty((0, 1), np.float32))


@dataclass(frozen=True)
class _LiveView:
    """The current notes, read through the store and the in-memory indexes."""

    store: Store
    lexical: LexicalIndex
    vectors: VectorIndex | DenseRows
    inactive: set[int]
    priority: dict[int, str]

    def candidates(self, filters: Filters) -> np.ndarray:
        return self.store.note_ids(filters)

    def priorities(self, ids: Sequence[int]) -> dict[int, str]:
        return {i: self.priority.get(i, "medium") for i in ids}

    def get_notes(self, ids: Sequence[int]) -> dict[int, Note]:
        return self.store.get_notes(ids)


class Recall(Part):
    def __init__(self, engine):
        super().__init__(engine)
        self._log: list[dict] = []  # recall statistics, flushed in batches and on close
        self._past: dict[int, PastView] = {}  # one snapshot's view, built on demand

    def forget_past(self) -> None:
        """Drop the cached view of a snapshot (after a purge or a rebuild)."""
        self._past = {}

    def recall(self, query: str, *, k: int = 5, tags=None, kind=None, priority=None,
               since: datetime | None = None, until: datetime | None = None,
               explain: bool = False, min_score: float | None = None,
               as_of: str | None = None, mode: str = "hybrid", stale: bool | None = None,
               variables: dict | None = None, log: bool = True,
               author: str | Sequence[str] | None = None) -> Hits:
        """Hybrid recall: BM25 and dense cosine, fused; filters apply before ranking.

        ``as_of`` names a snapshot: search the notes as they were then. ``mode``
        "lexical" or "dense" ranks by one channel only (for evaluation). ``stale`` True
        keeps only stale notes, False only fresh ones; ``variables``: the calling
        kernel's variable fingerprints (see stale.py). ``log`` False keeps the recall out
        of the statistics (a recall nobody typed, such as ambient recall's). ``author``:
        only notes written by one of these (names, or a comma-separated string).
        """
        if isinstance(query, str):
            unicode_text(query, "The query")
        if not isinstance(query, str) or not query.strip():
            raise InvalidInput("The query is empty; e.g. {0}",
                               Command("recall", ("where is the lock taken",)))
        check_count(k, "k", 1, MAX_K)
        if mode not in MODES:
            raise InvalidInput(f"Unknown mode {mode!r}; use one of: {', '.join(MODES)}")
        query = query.strip()
        threshold = self.engine.settings.min_score if min_score is None else min_score
        filters = filters_for(tags=tags, kind=kind, priority=priority, since=since, until=until,
                              author=author)
        with self.lock:
            self.engine.check_embedder()
            view = self.live_view() if as_of is None else self.past_view(as_of)
            scored = []
            if len(view.vectors):
                candidates = view.candidates(filters) if filters.narrows else None
                if stale is not None:
                    candidates = self.engine.staleness.by_staleness(
                        view.candidates(filters) if candidates is None else candidates,
                        stale, variables)
                qvec = self.engine.embedder.encode([query])[0] if mode != "lexical" else None
                scored = rank(query, qvec, view.lexical, view.vectors, candidates=candidates,
                              pool=max(10 * k, 50), exact_below=self.engine.settings.exact_below,
                              skip=len(view.inactive), mode=mode)
                priority_of = view.priorities([r.note_id for r in scored])
                scored = sorted((r._replace(score=r.score + PRIORITY_BONUS[priority_of[r.note_id]])
                                 for r in scored), key=lambda r: (-r.score, r.note_id))
            hits, previously, below = [], [], 0
            for row in scored:
                if row.note_id in view.inactive:
                    if row.score >= threshold and len(previously) < 3 and len(hits) < k:
                        previously.append(row)
                    continue
                if len(hits) >= k:
                    break
                if row.score < threshold:
                    below += 1
                    continue
                hits.append(row)
            notes = view.get_notes([r.note_id for r in hits + previously])
            found = list(notes.values())
            found = (self.engine.staleness.with_stale(found, variables) if as_of is None
                     else self.engine.seals.as_sealed(found, self.engine.seals.named(as_of)))
            by_id = {n.id: n for n in found}

            def make(rows):
                return [Hit(by_id[r.note_id], round(r.score, 4),
                            round(r.lexical, 4) if explain else None,
                            round(r.dense, 4) if explain else None) for r in rows]

            result = Hits(make(hits), query=query, filtered_out=below,
                          previously=tuple(make(previously)), explain=explain)
            if log:
                # Per channel: candidates it matched at all (lexical) or would keep on its
                # own score (dense: every candidate has a cosine, so count those passing).
                self._log.append(dict(at=utcnow(), query=query, k=k, returned=len(result),
                                             lexical=sum(1 for r in scored if r.lexical > 0),
                                             dense=sum(1 for r in scored if r.dense >= threshold),
                                             filtered_out=below))
            if len(self._log) >= 100:
                self.flush_log()
            return result

    def flush_log(self) -> None:
        """Recall statistics are written in batches: one commit per recall cost milliseconds."""
        if self._log:
            self.store.log_recalls(self._log)
            self._log = []

    def recall_terms(self, terms: Sequence[str], *, k: int = 5, scope: str | None = None,
                     cwd: str | None = None) -> Hits:
        """Notes about ``terms`` (variables, columns, paths alive in a kernel).

        Notes anchored to one of them come first with score 1.0: a variable of that name
        (in ``scope``, the notebook, when given) or a file, directory or glob a term names
        (relative terms are read from ``cwd``). Then notes whose text names the terms,
        ranked by BM25 over them, the best at 1.0 too.
        """
        terms = [t for t in terms if t and t.strip()]
        if not terms:
            raise InvalidInput("Nothing to recall about: define some variables, or give a query")
        query = " ".join(terms)
        with self.lock:
            anchored = self.engine.about.anchored_to(terms, scope, cwd)
            ids, scores = self.engine.keywords.index.score(query, self.store.note_ids(Filters()), limit=k)
            top = float(scores[0]) if len(scores) else 1.0
            ranked = {i: 1.0 for i in anchored}
            for i, score in zip(ids.tolist(), scores):
                ranked.setdefault(int(i), round(float(score) / top, 4))
            order = list(ranked)[:k]
            notes = self.engine.staleness.with_stale(list(self.store.get_notes(order).values()))
            by_id = {n.id: n for n in notes}
            hits = [Hit(by_id[i], ranked[i]) for i in order if i in by_id]
            return Hits(hits, query=f"the namespace ({len(terms)} names)")

    def live_view(self) -> _LiveView:
        return _LiveView(self.store, self.engine.keywords.index, self.engine.vectors or _NO_VECTORS, self.engine.state.inactive,
                         self.engine.state.priority)

    def past_view(self, name: str) -> PastView:
        snapshot = self.engine.seals.named(name)
        view = self._past.get(snapshot.seq)
        if view is None:
            view = PastView.build(self.store, snapshot.seq, self.engine.embedder.name)
            self._past = {snapshot.seq: view}  # keep one: views can be large
        return view

    def similar(self, note_id: int, *, k: int = 3, min_similarity: float = 0.5) -> list[Hit]:
        """Active notes closest to ``note_id`` (shown after remember; never merged)."""
        check_count(k, "k", 1, MAX_K)
        with self.lock:
            self.engine.reads.get(note_id)
            if self.engine.vectors is None or note_id not in self.engine.vectors:
                return []
            vector = self.engine.vectors.get(np.array([note_id]))[0]
            keys, sims = self.engine.vectors.search(vector, k + 1 + len(self.engine.state.inactive),
                                             exact=len(self.engine.vectors) <= self.engine.settings.exact_below)
            rows = [(int(i), float(s)) for i, s in zip(keys, sims)
                    if i != note_id and i not in self.engine.state.inactive and s >= min_similarity][:k]
            notes = self.store.get_notes([i for i, _ in rows])
            return [Hit(notes[i], round(s, 4), dense=round(s, 4)) for i, s in rows]

