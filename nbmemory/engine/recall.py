"""Recall: hybrid ranking over the live notes or a snapshot's, the notes about what is
alive in a kernel, and the notes most like one."""

from __future__ import annotations

import logging
import numbers
from dataclasses import dataclass
from datetime import datetime
from typing import Sequence

import numpy as np

from ..embed import reads
from ..errors import Command, InvalidInput, StoreUnreachable
from ..history import PastView
from ..lexical import LexicalIndex
from ..models import MODES, PRIORITIES, Hit, Hits, Note, utcnow
from ..keyword_places import KEYWORD_SLACK
from ..ranking import KEYWORD_WEIGHT, TRUST_FROM, TRUST_FULL, rank_arrays
from ..store import Filters, Store
from ..dense_rows import DenseRows
from ..dense_search import nearest
from ..dense_weight import ASKING_FLOOR, SHORT_NOTE_FLOOR, SHORT_NOTE_TERMS
from ..vectors import VectorIndex
from .indexes import NoteCards
from .state import Priorities
from .part import Part
from .validate import MAX_K, check_count, check_stale, filters_for, unicode_text

_logger = logging.getLogger("nbmemory")
PRIORITY_BONUS = {"high": 0.02, "medium": 0.0, "low": -0.02}
_BONUS_OF_CODE = np.array([PRIORITY_BONUS[p] for p in PRIORITIES])
_NO_VECTORS = DenseRows.from_matrix(np.empty(0, np.int64), np.empty((0, 1), np.float32))


def _words(text: str) -> str:
    """A note's text as compared with another's: case, spacing and a closing stop aside."""
    return " ".join(text.split()).rstrip(".").casefold()


def _fusion(ranked) -> dict[str, float] | None:
    """How a hybrid recall's score was made, for explain mode (``Hits.fusion``)."""
    if ranked is None or not len(ranked.ids):
        return None
    return {"weight": round(ranked.weight, 4), "covered": round(ranked.covered, 4),
            "from": TRUST_FROM, "full": TRUST_FULL, "most": KEYWORD_WEIGHT,
            "below": ranked.kept, "priority": PRIORITY_BONUS["high"],
            "short_terms": SHORT_NOTE_TERMS, "short_floor": SHORT_NOTE_FLOOR,
            "asking_floor": ASKING_FLOOR, "placed": ranked.placed, "slack": KEYWORD_SLACK}


@dataclass(frozen=True)
class _LiveView:
    """The current notes, read through the store and the in-memory indexes."""

    store: Store
    cards: NoteCards
    lexical: LexicalIndex
    vectors: VectorIndex | DenseRows
    inactive: set[int]
    priority: Priorities  # id -> priority, read like a dict

    def candidates(self, filters: Filters) -> np.ndarray:
        return self.store.note_ids(filters)

    def priority_codes(self, ids: Sequence[int]) -> np.ndarray:
        return self.priority.codes(ids)

    def get_notes(self, ids: Sequence[int]) -> dict[int, Note]:
        return self.cards.notes(ids, self.store)


class _Without:
    """``ids`` and one more id, for ``in`` (no copy of a large set per call)."""

    def __init__(self, ids: set[int], extra: int):
        self.ids, self.extra = ids, extra

    def __contains__(self, note_id) -> bool:
        return note_id == self.extra or note_id in self.ids

    def __len__(self) -> int:
        return len(self.ids) + 1


MODEL_LOADING = ("Keyword matches only: the model is still loading. Ask again in a few "
                 "seconds for the full search.")


def unread_query(model: str) -> str:
    return (f"Keyword matches only: the model {model} reads English, and most of this "
            "question is in other scripts or symbols. For notes in other languages, see the "
            "README's 'Notes in other languages'.")


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
               author: str | Sequence[str] | None = None, open_only: bool = False) -> Hits:
        """Hybrid recall: BM25 and dense cosine, fused; filters apply before ranking.

        ``as_of`` names a snapshot: search the notes as they were then. ``mode``
        "lexical" or "dense" ranks by one channel only (for evaluation). ``stale`` True
        keeps only stale notes, False only fresh ones; ``variables``: the calling
        kernel's variable fingerprints (see stale.py). ``log`` False keeps the recall out
        of the statistics (a recall nobody typed, such as ambient recall's). ``author``:
        only notes written by one of these (names, or a comma-separated string).
        ``open_only``: only the questions neither confirmed nor refuted.
        """
        if query is not None:  # bytes or a number: said as such, not as an empty query
            unicode_text(query, "The query")
        if not isinstance(query, str) or not query.strip():
            raise InvalidInput("The query is empty; e.g. {0}",
                               Command("recall", ("where is the lock taken",)))
        check_count(k, "k", 1, MAX_K)
        check_stale(stale)
        if mode not in MODES:
            raise InvalidInput(f"Unknown mode {mode!r}; use one of: {', '.join(MODES)}")
        query = query.strip()
        threshold = self.engine.settings.min_score if min_score is None else min_score
        if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real) or \
                not -1 <= threshold <= 1:
            raise InvalidInput(f"min_score is a score from -1 to 1 (recall hides the notes "
                               f"scoring below it; 0.2 by default), not {threshold!r}")
        if open_only and kind not in (None, "question", ["question"], ("question",)):
            raise InvalidInput("open_only recalls the open questions: leave kind out")
        filters = filters_for(tags=tags, kind="question" if open_only else kind,
                              priority=priority, since=since, until=until, author=author,
                              unresolved=bool(open_only))
        with self.lock:
            self.engine.check_embedder()
            loading = mode != "lexical" and self.engine.model_loading
            # A question the model cannot read would be ranked by noise: by keywords only.
            unread = mode == "hybrid" and not reads(self.engine.embedder.name, query)
            if loading or unread:  # answer now from the keywords rather than wait for the model
                mode = "lexical"
            elif mode != "lexical" and self.engine.unembedded:
                self.engine.embed_pending()
            view = self.live_view() if as_of is None else self.past_view(as_of)
            ranked = None
            if len(view.vectors):
                candidates = view.candidates(filters) if filters.narrows else None
                if stale is not None:  # as of a snapshot: stale as sealed, as the hits show
                    candidates = self.engine.staleness.by_staleness(
                        view.candidates(filters) if candidates is None else candidates,
                        stale, variables, marked=None if as_of is None else set(
                            self.engine.seals.stale_at(self.engine.seals.named(as_of)) or {}))
                qvec = self.engine.embedder.encode([query])[0] if mode != "lexical" else None
                ranked = rank_arrays(query, qvec, view.lexical, view.vectors,
                                     candidates=candidates, pool=max(10 * k, 50),
                                     exact_below=self.engine.settings.exact_below,
                                     drop=view.inactive, mode=mode, feedback=True,
                                     neighbours=self.engine.state.neighbours)
            hits, previously, below = [], [], 0
            if ranked is not None and len(ranked.ids):
                ids = ranked.ids.tolist()
                bonus = _BONUS_OF_CODE[view.priority_codes(ranked.ids)]
                scores = ranked.score + bonus  # float64, as the sum of two Python floats
                # Best first, ties by id; only the head is looked at.
                for at in np.lexsort((ranked.ids, -scores)).tolist():
                    note_id, score = ids[at], float(scores[at])
                    # The threshold reads the fused score: priority orders, it does not
                    # decide what is shown.
                    shown = float(ranked.score[at]) >= threshold
                    if note_id in view.inactive:
                        if shown and len(previously) < 3 and len(hits) < k:
                            previously.append((note_id, score, at))
                        continue
                    if len(hits) >= k:
                        break
                    if not shown:
                        below += 1
                        continue
                    hits.append((note_id, score, at))
            wanted = list(dict.fromkeys(i for i, _, _ in hits + previously))
            notes = view.get_notes(wanted)
            found = [notes[i] for i in wanted if i in notes]
            found = (self.engine.staleness.with_stale(found, variables) if as_of is None
                     else self.engine.seals.as_sealed(found, self.engine.seals.named(as_of)))
            by_id = {n.id: n for n in found}
            believed = {_words(by_id[i].text) for i, _, _ in hits if i in by_id}
            # A forgotten note written again as it was is believed, not "previously" (a
            # refuted one is still said to be refuted).
            previously = [row for row in previously if row[0] in by_id and not (
                by_id[row[0]].status == "revoked" and _words(by_id[row[0]].text) in believed)]

            def make(rows):
                # A channel the recall did not use (no query vector in lexical mode) has no
                # score to show, rather than a cosine of 0.
                return [Hit(by_id[i], round(score, 4),
                            round(float(ranked.lexical[at]), 4) if explain else None,
                            round(float(ranked.dense[at]), 4) if explain and mode != "lexical"
                            else None)
                        for i, score, at in rows]

            result = Hits(make(hits), query=query, filtered_out=below,
                          previously=tuple(make(previously)), explain=explain,
                          fusion=_fusion(ranked) if explain and mode == "hybrid" else None,
                          as_of=as_of)
            if loading:
                result.behind = MODEL_LOADING
            elif unread:
                result.behind = unread_query(self.engine.embedder.name)
            if log:
                # Per channel: candidates it matched at all (lexical) or would keep on its
                # own score (dense: every candidate has a cosine, so count those passing).
                found_by = ((int((ranked.lexical > 0).sum()), int((ranked.dense >= threshold).sum()))
                            if ranked is not None else (0, 0))
                self._log.append(dict(at=utcnow(), query=query, k=k, returned=len(result),
                                      lexical=found_by[0], dense=found_by[1], filtered_out=below))
            if len(self._log) >= 100:
                self.flush_log()
            return result

    def flush_log(self) -> None:
        """Recall statistics are written in batches: one commit per recall cost milliseconds.
        Not into this machine's copy of a team store: kept (the last 1,000) for the server.
        Statistics never fail a recall or a status: while the server cannot be reached they
        are kept (the last 1,000) for the next flush; rows it refuses are dropped, said in
        the log, since they would be refused again at every flush."""
        if self.engine.away or self.store is getattr(self.engine.mirror, "store", None):
            del self._log[:-1000]
        elif self._log:
            batch, self._log = self._log, []
            try:
                self.store.log_recalls(batch)
            except StoreUnreachable:
                self._log = (batch + self._log)[-1000:]
            except Exception as exc:  # noqa: BLE001 - statistics only
                _logger.warning("nbmemory: %d recall statistics were dropped: the store "
                                "refused them (%s: %s)", len(batch), type(exc).__name__, exc)

    def recall_terms(self, terms: Sequence[str], *, k: int = 5, scope: str | None = None,
                     cwd: str | None = None, variables: dict | None = None,
                     stale: bool | None = None,
                     author: str | Sequence[str] | None = None) -> Hits:
        """Notes about ``terms`` (variables, columns, paths alive in a kernel).

        Notes anchored to one of them come first with score 1.0: a variable of that name
        (in ``scope``, the notebook, when given) or a file, directory or glob a term names
        (relative terms are read from ``cwd``). Then notes whose text names the terms,
        ranked by BM25 over them, the best at 1.0 too. ``variables``: the kernel's variable
        fingerprints, so that a changed variable flags its notes stale (see stale.py).
        ``stale`` and ``author`` keep only such notes, as :meth:`recall`'s do.
        """
        terms = [t for t in terms if t and t.strip()]
        if not terms:
            raise InvalidInput("Nothing to recall about: define some variables, or give a query")
        check_stale(stale)
        authors = filters_for(author=author).authors
        query = " ".join(terms)
        with self.lock:
            anchored = self.engine.about.anchored_to(terms, scope, cwd)
            asked = k
            while True:  # the filters hold after the ranking: ask for more while they leave gaps
                ids, scores = self._active_by_keywords(query, asked)
                top = float(scores[0]) if len(scores) else 1.0
                ranked = {i: 1.0 for i in anchored}
                for i, score in zip(ids.tolist(), scores):
                    ranked.setdefault(int(i), round(float(score) / top, 4))
                order = list(ranked)
                notes = self.engine.staleness.with_stale(
                    list(self.engine.cards.notes(order, self.store).values()), variables)
                by_id = {n.id: n for n in notes if (stale is None or bool(n.stale) == stale)
                         and (not authors or n.author in authors)}
                order = [i for i in order if i in by_id]
                if len(order) >= k or len(ids) < asked:
                    break
                asked *= 4
            hits = [Hit(by_id[i], ranked[i]) for i in order[:k]]
            # What an empty answer says: "No notes match 'the 3 names in this kernel'."
            return Hits(hits, query=f"the {len(terms)} {'name' if len(terms) == 1 else 'names'}"
                                    " in this kernel")

    def _active_by_keywords(self, query: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` best active notes by BM25 over the keyword index, which also holds
        the inactive ones: asks for more only while those fill the gap (the list of every
        active id, from the store, cost a round trip the size of the store)."""
        index, inactive = self.engine.keywords.index, self.engine.state.inactive
        limit = k
        while True:
            ids, scores = index.score(query, limit=limit)
            keep = np.fromiter((i not in inactive for i in ids.tolist()), bool, len(ids))
            if keep.sum() >= k or len(ids) < limit:
                return ids[keep][:k], scores[keep][:k]
            limit = 2 * limit + int((~keep).sum())

    def live_view(self) -> _LiveView:
        return _LiveView(self.store, self.engine.cards, self.engine.keywords.index,
                         self.engine.vectors or _NO_VECTORS, self.engine.state.inactive,
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
            note = self.engine.reads.get(note_id)
            if self.engine.vectors is None or note_id not in self.engine.vectors or \
                    not reads(self.engine.embedder.name, note.text):  # its cosines are noise
                return []
            vectors, inactive = self.engine.vectors, self.engine.state.inactive
            vector = vectors.get(np.array([note_id]))[0]
            keys, sims = nearest(vectors, vector, k, len(vectors) <= self.engine.settings.exact_below,
                                 _Without(inactive, note_id))
            rows = [(int(i), float(s)) for i, s in zip(keys, sims)
                    if i != note_id and i not in inactive and s >= min_similarity][:k]
            cards = self.engine.cards.notes([i for i, _ in rows], self.store)
            notes = {n.id: n for n in self.engine.staleness.with_stale(list(cards.values()))}
            return [Hit(notes[i], round(s, 4), dense=round(s, 4)) for i, s in rows]

