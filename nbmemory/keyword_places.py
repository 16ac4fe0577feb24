"""Keyword matches the fusion trusts keep a place near the one keywords alone give them.

Where a query's keyword matches cover enough of it for the fusion to mix them in (from
``ranking.TRUST_FROM``), the cosine can still push a good keyword match far down: the keyword
weight is small while the best match covers little more than that, and a weak cosine (a
conversation's many alike messages, a question naming the other speaker) is confidently
wrong. So each note whose keyword share reaches ``floor`` ranks at most ``slack`` (3) places
below its place among the keyword matches (:func:`keep_places`): the keyword channel's best
keeps a place in the first four, its second in the first five, and so on; not a note whose
cosine is under half the best (``NEAR_ENOUGH``), which shares words, not meaning. The other
notes keep their order. A place by keywords is by the share before it is capped at 1, ties by
the fused score: many short notes that hold a one-word query share 1, and taken by id the
oldest filled the places from the fourth on (and ``-k 20``, whose pool holds more of them,
showed another first ten).

Measured with ``eval/run.py``, before -> after (recall@1 and MRR within 0.002 everywhere):

- a set written in LoCoMo's style afresh outside the repo (4 conversations, 1,140 messages,
  323 questions, a fifth of them naming the wrong speaker; ``--set DIR --stores``): recall@10
  0.812 -> 0.822 (keywords alone 0.720, dense 0.673), recall@5 0.693 -> 0.706; with the
  weaker model (``--layers 3 --bare``) 0.759 -> 0.768 (keywords 0.682);
- eval/, one store: recall@10 0.861 -> 0.862 (chats 0.880 -> 0.888; a pandas question lost
  its note, 0.895 -> 0.881); a store per source: 0.907 -> 0.908, recall@5 0.814 -> 0.816;
  paraphrases and identifiers unchanged; the weaker model, a store per source: 0.760 ->
  0.767 (natural questions 0.777 -> 0.786, keywords 0.765);
- on ``eval/tune.py``'s candidates with the cosines weakened (noise of sd 0.1 / 0.15), the
  LoCoMo-style set 0.760 -> 0.762 and 0.693 -> 0.704 (keywords 0.720).

``eval/tune.py`` (stage 4: none, or 2, 3, 5, 7, 9 places) chose 3 on all queries; its folds
chose 9, 3, 3, 2 and 2 (recall@10 in its worst condition, one store with the cosines
weakened: 0.689 at 3, 0.687 at 5). Chosen on the same candidates (scripts outside the
repo): with no cosine condition the weakened conditions gained more (the LoCoMo-style set
at sd 0.15: 0.716), but one store's natural questions outside the chats lost (0.861 ->
0.854): there the best keyword matches of a pandas or a team question were often notes of
another project sharing its words, at cosines of 0.08-0.28 where the best was about 0.5. A
floor of 0.4 of the best cosine cost 0.005 of them, half 0.002. The floor of keyword share
is the fusion's own start: at its full point (0.45) the gains vanished (they come from
matches covering 0.35-0.45, where the keyword weight is small), and from 0.3 a paraphrase
lost its note.
"""

from __future__ import annotations

import numpy as np

KEYWORD_SLACK = 3
NEAR_ENOUGH = 0.5


def keep_places(score: np.ndarray, keyword: np.ndarray, dense: np.ndarray, ids: np.ndarray,
                floor: float, active: np.ndarray | None = None, slack: int = KEYWORD_SLACK,
                bm25: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """``score`` (of the candidates ``ids``) with each note whose ``keyword`` share is at least
    ``floor`` placed at most ``slack`` places below its place by keywords alone, unless its
    cosine (``dense``) is under ``NEAR_ENOUGH`` of the best. That place is by ``bm25`` (the
    shares before they are capped at 1, default ``keyword``), ties by the fused score: many
    short notes holding a one-word query all share 1, and the oldest must not be taken
    first. A note moved up scores between the two notes it now sits between; how many were
    moved comes second. Only the positions ``active`` (default all) count as places; the
    others keep their scores."""
    active = np.arange(len(ids)) if active is None else active
    if not len(active) or float(np.max(keyword[active])) < floor:
        return score, 0
    ranked_by = keyword if bm25 is None else bm25
    by_keyword = active[np.lexsort((ids[active], -score[active], -ranked_by[active]))]
    near = NEAR_ENOUGH * max(float(np.max(dense[active])), 0.0)
    trusted = [(at, rank + slack) for rank, at in enumerate(by_keyword.tolist(), 1)
               if keyword[at] >= floor and dense[at] >= near]
    fused = active[np.lexsort((ids[active], -score[active]))].tolist()
    if len(fused) <= slack + 1 or not trusted:
        return score, 0
    placed, moved, order = set(), set(), []
    next_fused = next_trusted = 0
    while len(order) < len(fused):
        while next_trusted < len(trusted) and trusted[next_trusted][0] in placed:
            next_trusted += 1
        while next_fused < len(fused) and fused[next_fused] in placed:
            next_fused += 1
        if next_trusted == len(trusted):  # the rest in the fusion's order
            order += [at for at in fused[next_fused:] if at not in placed]
            break
        at = fused[next_fused]
        if len(order) + 1 >= trusted[next_trusted][1] and at != trusted[next_trusted][0]:
            at = trusted[next_trusted][0]  # due here, and the fusion has others first
            moved.add(at)
        placed.add(at)
        order.append(at)
    if not moved:
        return score, 0
    out = score.astype(np.float32, copy=True)
    position = 0
    while position < len(order):
        if order[position] not in moved:
            position += 1
            continue
        end = position
        while end < len(order) and order[end] in moved:
            end += 1
        above = float(score[order[position - 1]])  # position >= slack: never the first
        below = float(score[order[end]]) if end < len(order) else above - 1e-3
        for step, at in enumerate(order[position:end], 1):
            value = np.float32(above - (above - below) * step / (end - position + 1))
            # Strictly between where float32 leaves room (a tie is sorted by id), else a tie.
            low = np.nextafter(np.float32(below), np.float32(np.inf))
            high = np.nextafter(np.float32(above), np.float32(-np.inf))
            out[at] = min(max(value, low), high) if low <= high else np.float32(above)
        position = end
    return out, len(moved)
