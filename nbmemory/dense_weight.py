"""How much of its cosine a note keeps, by its form: a note of few words or one that ends
asking says less by its meaning about what it answers than its vector's closeness suggests.

Short notes (:func:`short_note_weight`). A note of a few words says too little to answer a
question by its meaning alone, yet its vector sits close to many: in a chat, "Theo: What?" and
"Theo: A little bit." are near every question naming Theo, and filled a quarter of hybrid's
wrong top three on a set of three chats a helper wrote afresh outside the repo (704 messages,
180 questions; ``eval/run.py --set``). Its cosine now counts in part: half at no keyword term,
an eighth more a term, all of it from ``SHORT_NOTE_TERMS`` (4) terms. The keyword channel is
untouched, so a short note that shares the question's words is still found. Recall@10 before
-> after: that set 0.736 -> 0.756 (with its names stripped 0.598 -> 0.609, recall@1 0.172 ->
0.233; with the weaker model 0.623 -> 0.658); eval/ with the chats' prefixes stripped
(``--stores --bare``) 0.864 -> 0.865 (chats 0.782 -> 0.785), with the weaker model 0.738 ->
0.742 (chats 0.714 -> 0.723); eval/ as it is, in both layouts, and a second outside set
(analysts' notes on Jinja2 and sklearn's datasets, 300 notes, 170 questions) unchanged: their
notes have four terms or more. A gentler floor (0.7, a tenth a term) moved nothing.

The terms a short note shares with the question are not its own, in hybrid recall
(ranking.own_terms): with the messages' names stripped, "Whoa! That's amazing, Priya." and
"Tomás! I have a question for you." sat closest in meaning to every question naming Priya or
Tomás, the name alone making their vectors close, and held the first places of the full
model's rankings over the answers. Keywords count that shared name already; by meaning such a
note says only its other words. An identifier's terms stay its own ("orders.amount: cents"
names what "what unit is orders.amount stored in" asks about, and fell below a longer note
when they did not), and ``mode="dense"``, which has no keywords to count them, weighs the
note's terms as before. Recall@10 before -> after, ``eval/run.py --stores --bare`` with the
full model on four LoCoMo-style sets written outside the repo (set #4, its questions
rewritten tersely, set #5, and a fresh set #6 of three chats, 1,294 messages, 324
questions): 0.760 -> 0.775, 0.708 -> 0.716, 0.744 -> 0.773, 0.595 -> 0.613 (recall@1 0.433
-> 0.471, 0.396 -> 0.418, 0.403 -> 0.430, 0.358 -> 0.370); with the weaker model 0.763 ->
0.770, 0.743 -> 0.754, 0.741 -> 0.739, 0.655 -> 0.668. eval/, and the sets with their
``[date] Name:`` prefixes, do not move: their notes have four terms of their own or more.
Counting the shared terms at half, or at most one of them, moved less. Counting them costs
0.07 ms a recall (175 candidates, ``LexicalIndex.counts_at``).

Why the weight stops at four terms. Reaching to eight gained those four sets 1.4-3 points
of recall@10 with the full model (recall@1 3.7-5.8), but cost a set of analysts' short notes
written outside the repo (629 notes of nine words on average in three stores, 331 questions)
1.3 points with the full model and 5.4 with the weaker one: an analyst's note of four words
("orders.amount is in cents") means what it says. Cutting a note's cosine further only when it
shares one word with the question, or counting its own terms by their idf, traded the same
way or moved nothing.

Notes that end asking (:func:`asking`, :func:`asking_weight`). In a conversation the message
closest in meaning to a question about it is often the same question, asked at the time ("Did
you see whales?", "Haha your dad. Did he bring sourdough again?"), and the answer is the reply.
Questions rarely answer questions: in the chats of eval/ and of two sets written outside the
repo, 18-33% of the messages end asking and 0.6-5% of the answers do; on the set written in
LoCoMo's style, such messages were 27% of hybrid's wrong top three. So the share of a note's
words in the questions it ends with counts against its cosine, down to ``ASKING_FLOOR`` (half,
as for a note of no terms) when it only asks. "Why does the join drop rows? The key has nulls."
ends telling and keeps all of it; an analyst's open question keeps half, and its keywords find
it as before. Recall@10 before -> after, ``eval/run.py`` (dense alone gains too; MRR fell in
none):

- eval/, one store: all 0.861 -> 0.861 (chats 0.881 -> 0.880, paraphrases 0.612 either way),
  MRR 0.662 -> 0.666; a store per source: all 0.903 -> 0.907 (chats 0.886 -> 0.897);
- the weaker model (``--stores --layers 3 --bare``), natural questions 0.754 -> 0.777, now
  above keywords alone (0.765); the chats a store per source with the cosines weakened
  (``eval/tune.py``'s noise 0.1 and 0.15) 0.801 -> 0.825 and 0.726 -> 0.758 (keywords 0.754);
- the LoCoMo-style set (``--set``, 673 messages, 202 questions) 0.759 -> 0.788 (keywords
  0.700, dense 0.628 -> 0.667), with the weaker model 0.747 -> 0.786; a second chat set 0.756
  -> 0.772 (weaker model 0.658 -> 0.728); the analysts' set unchanged (0.924).

Counting every question in a note, not only those it ends with, cost the analysts' set a
query (its notes state a question, then answer it); no cosine at all for a note that only
asks scored about the same as half; lifting a question's reply by the question's cosine
added nothing. Working out the share costs 7 us a note when it is indexed (tokenizing, 43).
``eval/tune.py`` run again with it keeps ranking.py's fusion (0.7, 0.35, 0.45) and its six kept
notes. For feedback and context it now prefers 20 words and 0.2: 15 and 0.35 cost 0.006 and
0.008 of MRR on one slice (natural questions, the weaker model, a store per source), over the
0.005 it allows. On the outside chat sets 20 and 0.2 score up to 1.5 points lower with the
cosines weakened or the weaker model (as measured, 0.2 gains one on the LoCoMo-style set and
loses half a point on the other), so ranking.py keeps 15 and 0.35.
"""

from __future__ import annotations

import re

import numpy as np

SHORT_NOTE_FLOOR = 0.5
SHORT_NOTE_TERMS = 4
ASKING_FLOOR = 0.5

# A sentence ends at a run of stops followed by a space, a closing quote or bracket, or the
# end: "?" inside a URL's query or "v1.2" ends none.
_SENTENCE_END = re.compile(r"[.!?\u2026\u3002\uff01\uff1f]+(?=[\s\"'\u201d\u2019\u00bb)\]]|$)")
_WORD = re.compile(r"\w+")


def short_note_weight(terms: np.ndarray) -> np.ndarray:
    """How much of its cosine a note of ``terms`` keyword terms (of its own: not the query's)
    keeps: ``SHORT_NOTE_FLOOR`` plus an equal step per term, all of it from
    ``SHORT_NOTE_TERMS`` terms."""
    step = (1.0 - SHORT_NOTE_FLOOR) / SHORT_NOTE_TERMS
    return np.minimum(1.0, SHORT_NOTE_FLOOR + step * terms).astype(np.float32)


def asking(text: str) -> float:
    """The share of ``text``'s words in the questions it ends with: 0 for a note that ends
    telling, 1 for one that only asks."""
    sentences, start = [], 0  # (words, asks) of each
    for end in _SENTENCE_END.finditer(text):
        sentences.append((len(_WORD.findall(text, start, end.end())),
                          "?" in end.group() or "\uff1f" in end.group()))
        start = end.end()
    sentences.append((len(_WORD.findall(text, start)), False))
    asked = 0
    for words, asks in reversed(sentences):
        if words and not asks:
            break
        asked += words
    total = sum(words for words, _ in sentences)
    return asked / total if total else 0.0


def asking_weight(shares: np.ndarray) -> np.ndarray:
    """How much of its cosine a note keeps whose words are ``shares`` in the questions it
    ends with: all of it at none, ``ASKING_FLOOR`` when it only asks."""
    return (1.0 - (1.0 - ASKING_FLOOR) * np.asarray(shares, np.float32)).astype(np.float32)
