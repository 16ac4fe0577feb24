"""Keyword matches lifted under the notes that keep their places, where the fusion does not
trust keywords yet or not fully (ranking.py calls :func:`lift`).

Below the start (the shares after keyword feedback: ``ranking.lifted``). Where a query's best
keyword match covers less than ``TRUST_FROM`` of it, keywords are not mixed in, but no longer
ignored: the ``LIFT_BELOW`` notes closest in meaning keep their places and cosines, and every
other note scores its cosine plus w / (1 - w) times its keyword share after feedback (w rising
from 0 to ``KEYWORD_WEIGHT`` as the best share goes from 0 to the start: the order the mix
itself would give), eased to stay under the sixth best cosine (:func:`ease_under`). A
paraphrase's wrong keyword matches can then only fill the places below those six, while a
conversational question's answer, sharing a word or two with it where the cosine is weak, comes
up into the top ten; the feedback's words (from the best notes of the first pass) bring up some
answers in other words too. Measured on ``eval/tune.py``'s candidates, paired: recall@1
unchanged everywhere; recall@10 a store per source, chats 0.852 -> 0.886 [+0.018, +0.052],
paraphrases 0.724 -> 0.755, other natural questions 0.920 -> 0.927, all 0.886 -> 0.904; one
store, chats 0.866 -> 0.879 [+0.003, +0.024], paraphrases 0.612 -> 0.617, all 0.851 -> 0.857;
with the cosines weakened, the chats in their own stores 0.747 -> 0.799 [+0.030, +0.076], where
keywords alone score 0.757 and hybrid had trailed them. MRR moves by +0.001 to +0.008.
``eval/tune.py`` (stage 1b: none, or 1-8 kept) chose 6 on all queries; its folds chose 3, 6, 5,
6 and none, as the one-store paraphrases sit at the rule's edge (one query under dense): with 4
kept, chats gained more (+3.7 a store per source, +6.6 weakened) but the one-store paraphrases
lost 1.5 queries more (2.5 under dense). The threshold hides what it did: ``min_score`` 0.2,
none of 1,277 relevant top-10 hits in one store and 6 of 1,355 a store per source, none at rank
1.

While the weight rises (``ranking._fused``: from the start to full). The mix's keyword weight
rises from 0 at the start, so just over it keywords counted for almost nothing, while just under
it they lifted every note under the six closest in meaning at the full weight: a note sharing a
question's one telling word ranked just under the kept notes while the best match covered 34% of
the question, and last among five once it covered 36% (tests/test_ranking.py). Questions in
LoCoMo's style sit there when they name a speaker whose name the messages do not hold as a word
("When did Jasmine pass quals?"): the best match covers 35-38% of the question, its answer a
third, and with a weak model the answer keywords alone ranked second was 62nd; hybrid fell below
keywords alone. Now the mix's ``LIFT_BELOW`` best keep their places and scores there, and the
other notes are lifted as at the start: in the order of cosine + ``KEYWORD_WEIGHT / (1 -
KEYWORD_WEIGHT)`` x keyword share (after a feedback pass of their own), on the mix's scale
(``1 - w`` times that, which at full is the mix itself), eased under the last kept.
``eval/tune.py`` then chose the keyword weight again, 0.7 -> 0.6 on all queries (its folds chose
0.8, 0.8, 0.6, 0.6 from 0.3 to 0.55, and 0.5 from 0.5 to 0.6; at 0.7 the one-store paraphrases
fell half a query further below dense than the rule allows), and with it how many notes keep
their places, 6 -> 3 (folds 5, 3, 4, 3, 3; its worst margin over the better channel went from
-0.048 to -0.035). Measured with ``eval/run.py``, recall@10 before -> after: one store 0.862 ->
0.876 (paraphrases 0.612 -> 0.633, natural questions 0.872 -> 0.886; recall@1 0.549 -> 0.556,
MRR 0.666 -> 0.675; identifiers' recall@1 0.951 -> 0.935, two queries, still above keywords'
0.927); a store per source 0.908 -> 0.912 (natural 0.911 -> 0.918, paraphrases 0.765 ->
0.750); the weaker model a store per source 0.767 -> 0.784 (natural 0.786 -> 0.808, keywords
0.765). On three sets written in LoCoMo's style outside the repo, a store per conversation, with
the full model | the weaker one (``--layers 3 --bare``, where keywords lead dense by 13-21
points, as on the held-out set by 19): four conversations, 323 questions, 0.822 -> 0.822 | 0.768
-> 0.763; the same questions rewritten tersely, as LoCoMo's are ("What did Caroline
research?"), 0.805 -> 0.815 | 0.712 -> 0.743 (keywords 0.657); two conversations of 1,137
messages and 298 questions, written meanwhile by a helper who saw neither the ranking code nor
the other sets, 0.807 -> 0.819 | 0.729 -> 0.741 (keywords 0.673, dense 0.464).
"""

from __future__ import annotations

import numpy as np

from .lexical import top_positions

# Below the start (and while the weight rises), keywords lift notes to just under the LIFT_BELOW
# best (chosen by eval/tune.py: see the module docstring); within LIFT_EASE of the last of them a
# lifted score slows, so order is kept.
LIFT_BELOW = 3
LIFT_EASE = 0.05


def lift(keyword: np.ndarray, dense: np.ndarray, w: float, below: int,
         active: np.ndarray | None = None, first: np.ndarray | None = None,
         scale: float = 1.0) -> np.ndarray:
    """Scores where the query's best keyword match covers too little of it for keywords to
    be trusted: the ``below`` notes closest in meaning (among the positions ``active``,
    default all) score their cosine and keep their places; every other note scores its
    cosine plus ``w / (1 - w)`` times its ``keyword`` share (the order of the mix at weight
    ``w``), eased to stay under the ``below``-th best cosine (:func:`ease_under`).
    ``first``: the scores whose ``below`` best keep their places and scores instead of the
    cosines, and ``scale`` what the others' scores are multiplied by (while the keyword
    weight rises: the mix's, and 1 - its weight)."""
    cosine = np.clip(np.asarray(dense, np.float32), 0.0, 1.0)
    first = cosine if first is None else first
    active = np.arange(len(cosine)) if active is None else active
    kept = active[top_positions(first[active], below)]
    score = ease_under(scale * (cosine + w / (1.0 - w) * np.asarray(keyword, np.float32)),
                       float(first[kept[-1]]))
    score[kept] = first[kept]
    return score


def ease_under(scores: np.ndarray, cap: float, ease: float = LIFT_EASE) -> np.ndarray:
    """``scores`` as they are up to ``cap - ease``, then rising ever more slowly towards
    ``cap`` without reaching it: the order is kept, and nothing passes ``cap``."""
    knee = cap - ease
    over = scores > knee
    out = scores.astype(np.float32, copy=True)
    # Hyperbolic rather than exponential: 3 over the knee still ends 0.0008 under the cap,
    # where float32 would round an exponential onto it.
    out[over] = cap - ease / (1.0 + (scores[over] - knee) / ease)
    return out
