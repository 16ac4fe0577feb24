"""Choose ranking.py's constants by cross-validation on eval/.

    python eval/tune.py            # each stage's choice, its folds and what it scores held out

Every query is ranked once by both channels in a real store, once with every note in one
store and once with a store per source (``run.by_store``: a project, a conversation; the
candidate pool of
``Engine.recall`` with k=10: the best 100 of each channel and the notes written right after
the keyword channel's best, each candidate scored by both); the rules are then compared on
those scores as recall applies them (``ranking.rank_arrays``: context from the note before,
the fusion, keyword feedback), with the priority bonus.

Slices: paraphrase, identifier, natural, and the natural questions about eval/'s chats apart
("chat"). Each stage is judged in six conditions: each way of storing the notes, with the
channels as they are, with the dense channel weakened (Gaussian noise of sd 0.1 on every
cosine, fixed seed), and with a weaker model (``run.py --layers 3 --bare``: MiniLM cut to 3
of its 6 layers, the chat messages without their ``[date] Name:`` prefix): on eval/ MiniLM
beats BM25 on natural questions, while on held-out conversational questions (ten stores of
about 590 notes) BM25 beat it by 19 points of recall@10; a rule must hold up either way. The
noise is drawn once per query and note, so settings whose pools differ see the same draws;
the weaker model's errors are its own. 5-fold cross-validation (folds
stratified by slice): an option is chosen on four folds and scored on the fifth; the tables
show the held-out folds' metrics pooled beside the option chosen on all queries.

0. BM25's length normalisation (``LexicalIndex.b``; each option ranks its own candidates),
   judged on the keyword channel alone as the feedback is below, in both layouts: a
   parameter of the channel, chosen for the channel.
1. The fusion (``ranking.fuse``: the keyword weight, from which share of the query it starts
   and where it is full; 168 settings), with the feedback and context as ranking.py has
   them. A setting is judged by its worst margin over the better single channel: for each
   slice and metric (recall@10, MRR), hybrid minus max(lexical, dense), the smallest in
   any condition, so a rule that helps one kind of query by hurting another loses; among
   the settings that keep tests/test_eval.py's rule where the cosines are as measured
   (every metric of every query type within one query of the better channel). Ties go
   to the better overall recall@10.
1b. Below the start (``ranking.lifted``): how many of the notes closest in meaning keep their
   places while keywords lift the others under them, or none (keywords do not count below
   the start), judged as the fusion is.
2. The keyword feedback (``ranking.with_feedback``: how many of the first pass's best notes,
   how many of their words, and their weight; 72 settings and none), with ranking.py's
   fusion and context. The worst margin does not tell them apart (it sits on a slice
   feedback barely moves), so a setting is judged by its overall recall@10 in the worst
   condition, among those that on no slice, in no condition, lose more than
   MRR_SLACK of MRR against none.
3. The context from the note written before (``ranking.with_context``; eval/'s notes are
   written in file order, so each chat message follows the one before it): CONTEXT
   weights, judged as the feedback is, against none.
4. A trusted keyword match's place (``keyword_places.keep_places``): how many places below
   its place by keywords alone it may fall, or any (None), judged as the feedback is.
"""

from __future__ import annotations

import itertools
import sys
import tempfile
from abc import ABC, abstractmethod
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import run  # noqa: E402  (eval/run.py)
from nbmemory.engine import PRIORITY_BONUS  # noqa: E402
from nbmemory.keyword_places import KEYWORD_SLACK  # noqa: E402
from nbmemory.lexical import LexicalIndex  # noqa: E402
from nbmemory.ranking import FEEDBACK as CURRENT_FEEDBACK  # noqa: E402
from nbmemory.ranking import FUSION as CURRENT_FUSION  # noqa: E402
from nbmemory.ranking import CONTEXT_WEIGHT, LIFT_BELOW, hybrid, rank  # noqa: E402
from nbmemory.tokenizer import tokenize  # noqa: E402

POOL = 100
WEIGHTS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
STARTS = (0.25, 0.3, 0.35, 0.4, 0.45, 0.5)
WIDTHS = (0.1, 0.15, 0.25, 0.35)
FOLDS = 5
NOISE = 0.1
MRR_SLACK = 0.005
FEEDBACK = [None] + list(itertools.product((2, 3, 5), (5, 10, 15, 20),
                                           (0.2, 0.3, 0.4, 0.5, 0.6, 0.7)))
CONTEXT = (0.0, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0)
SLACKS = (None, 2, 3, 5, 7, 9)
LIFT = (None, 1, 2, 3, 4, 5, 6, 8)
BM25_B = (0.1, 0.2, 0.3, 0.5, 0.75)
CONDITIONS = ("one store", "one store, dense weakened", "a store per source",
              "a store per source, dense weakened", "one store, a weaker model",
              "a store per source, a weaker model")
WEAKER = (3, True)  # run.py's --layers 3 --bare: the condition closest to the held-out set's


def candidates(notes: list[dict], queries: list[dict], embedder=None,
               b: float | None = None) -> list[dict]:
    """Per query: eval ids, store ids, normalised lexical scores (no feedback, no context;
    0 outside the keyword channel's pool, as recall has them), cosines and priority
    bonuses, with its store's keyword index (for feedback) and the note each note follows
    (by store id, -1: none; for context). The pool is recall's: with the notes written right
    after the keyword channel's best. ``b``: BM25's length normalisation, if not the
    keyword index's own."""
    with tempfile.TemporaryDirectory(prefix="nbmemory-tune-") as tmp:
        loaded = run.load_store(notes, queries, Path(tmp) / "store", embedder=embedder)
        engine = loaded.engine
        if b is not None:
            engine.lexical.b = b
        neighbours = engine.state.neighbours
        lexical, before = engine.lexical, neighbours.before.copy()
        bonus = {n["id"]: PRIORITY_BONUS[n["priority"]] for n in notes}
        out = []
        for query in queries:
            qvec = engine.embedder.encode([query["query"]])[0]
            rows = rank(query["query"], qvec, engine.lexical, engine.vectors, candidates=None,
                        pool=POOL, exact_below=engine.settings.exact_below,
                        neighbours=neighbours)
            sid = np.array([r.note_id for r in rows])
            ids = [loaded.ids[i] for i in sid.tolist()]
            scale = engine.lexical.max_score(query["query"])
            own = engine.lexical.score_at(dict.fromkeys(tokenize(query["query"]), 1.0), sid)
            # Recall scores the keyword channel's own candidates only (those with a share
            # after context, which lifts only notes that have one of their own).
            own[np.array([r.lexical for r in rows]) <= 0] = 0
            out.append({"ids": ids, "type": query["type"], "domain": query["domain"],
                        "relevant": query["relevant"], "query": query["query"], "sid": sid,
                        "lexical": np.minimum(own / scale, 1.0).astype(np.float32)
                        if scale > 0 else np.zeros(len(sid), np.float32),
                        "dense": np.array([r.dense for r in rows], np.float32),
                        "bonus": np.array([bonus[i] for i in ids], np.float32),
                        "index": lexical, "before": before})
        loaded.close()
    return out


def weakened(rows: list[dict], seed: int = 0) -> list[dict]:
    """``rows`` (one a query, in query order) with noise added to every cosine, the same for a
    query and a note whichever pool or store holds the note, so that settings whose candidate
    pools differ are compared on the same draws."""
    notes = {i: n for n, i in enumerate(sorted({i for r in rows for i in r["ids"]}))}
    table = np.random.default_rng(seed).normal(0, NOISE, (len(rows), len(notes)))
    return [dict(r, dense=r["dense"] + table[q, [notes[i] for i in r["ids"]]].astype(np.float32))
            for q, r in enumerate(rows)]


def ranked(row: dict, scorer) -> list[str]:
    score = scorer(row) + row["bonus"]
    return [row["ids"][i] for i in np.lexsort((np.arange(len(score)), -score))]


def metrics(rows: list[dict], scorer) -> np.ndarray:
    """Per query: recall@1, recall@5, recall@10, MRR."""
    return np.array([[m[name] for name in run.METRICS]
                     for m in (run.query_metrics(ranked(r, scorer), r["relevant"]) for r in rows)])


def part_of(row: dict) -> str:
    """The slice a query is judged in: its type, the chats apart."""
    return "chat" if row["domain"] == "chat" else row["type"]


PARTS = (*run.SLICES, "chat")


def hybrid_scorer(fusion=CURRENT_FUSION, feedback=CURRENT_FEEDBACK,
                  context: float = CONTEXT_WEIGHT, lift: int | None = LIFT_BELOW,
                  slack: int | None = KEYWORD_SLACK):
    """Hybrid as recall ranks it (``ranking.hybrid``), with the fusion of ``fusion`` (weight,
    start, full), keyword feedback of ``feedback`` (notes, terms, weight) or none, context
    from the note before at weight ``context``, below the start keywords lifting notes
    under the cosine's ``lift`` best (None: not at all), and from it a trusted keyword
    match kept within ``slack`` places of its place by keywords (None: not kept)."""
    def score(r):
        return hybrid(r["query"], r["index"], r["sid"], r["lexical"], r["dense"], r["before"],
                      fusion=fusion, feedback=feedback, context=context, lift=lift,
                      slack=slack)[0]
    return score


CHANNELS = {"lexical": lambda r: r["lexical"], "dense": lambda r: r["dense"]}


class Stage(ABC):
    """One constant's options, every query's metrics under each option in every condition
    (computed once), and the cross-validated choice among them."""

    def __init__(self, title: str, options: list, scorer_of, current, conditions, fold: list[int],
                 labels: tuple[str, ...] = CONDITIONS):
        """``conditions``: the rows of each condition (in query order), or a function of an
        option giving them, for options that change the candidates themselves."""
        self.title, self.options, self.current, self.fold = title, options, current, fold
        conditions_of = conditions if callable(conditions) else lambda option: conditions
        self.conditions, self.labels = conditions_of(current), labels
        self.parts = np.array([part_of(r) for r in self.conditions[0]])
        self.types = np.array([r["type"] for r in self.conditions[0]])
        self.values = {(o, c): metrics(rows, scorer_of(o))
                       for o in options for c, rows in enumerate(conditions_of(o))}
        self.channels = [{name: metrics(rows, s) for name, s in CHANNELS.items()}
                         for rows in self.conditions]

    @abstractmethod
    def key(self, option, chosen: np.ndarray) -> tuple:
        """How good ``option`` is on the queries ``chosen`` (larger is better)."""

    def choose(self, chosen: np.ndarray):
        return max(self.options, key=lambda o: self.key(o, chosen))

    def report(self) -> None:
        n = len(self.parts)
        print(f"\n{self.title}:")
        held_out = {}
        for k in range(FOLDS):
            train = np.array([f != k for f in self.fold])
            option = self.choose(train)
            for c in range(len(self.conditions)):
                held_out.update({(i, c): self.values[option, c][i]
                                 for i in np.flatnonzero(~train)})
            print(f"  fold {k}: chose {option}")
        everything = np.ones(n, bool)
        final = self.choose(everything)
        print(f"  on all queries: {final} ({self.describe(final)}); "
              f"ranking.py has {self.current} ({self.describe(self.current)})")
        for c, label in enumerate(self.labels):
            print(f"  {label}: recall@5 / recall@10 / MRR per slice")
            rows = {**self.channels[c],
                    "held out (CV)": np.array([held_out[i, c] for i in range(n)]),
                    f"{final} (all)": self.values[final, c]}
            if self.current in self.options and self.current != final:
                rows[f"{self.current} (now)"] = self.values[self.current, c]
            for name, table in rows.items():
                cells = []
                for part in (*PARTS, "all"):
                    at = everything if part == "all" else self.parts == part
                    cells.append(f"{part} " + "/".join(f"{table[at, j].mean():.3f}" for j in (1, 2, 3)))
                print(f"    {name:<24} " + "  ".join(cells))

    def describe(self, option) -> str:
        if option not in self.options:
            return "not among the options"
        key = self.key(option, np.ones(len(self.parts), bool))
        return ", ".join(f"{name} {value:+.3f}" if name.startswith("worst") else
                         f"{name} {value}" for name, value in zip(self.key_names, key))


class ByMargin(Stage):
    """(holds the rule of tests/test_eval.py as measured; worst margin over the better
    channel on any slice, recall@10 or MRR, in any condition; overall recall@10 in the worst
    condition)."""

    key_names = ("holds the rule", "worst margin", "recall@10")

    def key(self, option, chosen):
        worst, recall = np.inf, np.inf
        for c in range(len(self.conditions)):
            values = self.values[option, c]
            recall = min(recall, values[chosen, 2].mean())
            for part in PARTS:
                at = chosen & (self.parts == part)
                if at.any():
                    for j in (2, 3):
                        best = max(ch[at, j].mean() for ch in self.channels[c].values())
                        worst = min(worst, values[at, j].mean() - best)
        return self.holds(option, chosen), round(worst, 4), round(recall, 4)

    def holds(self, option, chosen) -> bool:
        """The rule tests/test_eval.py holds recall to, where the cosines are as measured: on
        every query type (the chats among the natural questions) every metric within one
        query's worth of the better channel. A margin in the weakened conditions (noise or
        a weaker model) is won within it, not against it."""
        for c, label in enumerate(self.labels):
            if "weakened" in label or "weaker" in label:
                continue
            values, channels = self.values[option, c], self.channels[c]
            for kind in run.SLICES:
                at = chosen & (self.types == kind)
                if at.any() and run.shortfalls(values[at].mean(0), channels["lexical"][at].mean(0),
                                               channels["dense"][at].mean(0), int(at.sum())):
                    return False
        return True


class ByRecall(Stage):
    """(loses at most MRR_SLACK of MRR against ``baseline`` on every slice in every
    condition; overall recall@10 in the worst condition)."""

    key_names = ("allowed", "recall@10")

    def __init__(self, *args, baseline, **kwargs):
        self.baseline = baseline
        super().__init__(*args, **kwargs)

    def key(self, option, chosen):
        loss, recall = 0.0, np.inf
        for c in range(len(self.conditions)):
            got, base = self.values[option, c], self.values[self.baseline, c]
            recall = min(recall, got[chosen, 2].mean())
            for part in PARTS:
                at = chosen & (self.parts == part)
                if at.any():
                    loss = max(loss, base[at, 3].mean() - got[at, 3].mean())
        return loss <= MRR_SLACK, round(recall, 4)


def folds(rows: list[dict]) -> list[int]:
    fold, seen = [], {}
    for r in rows:
        part = part_of(r)
        seen[part] = seen.get(part, -1) + 1
        fold.append(seen[part] % FOLDS)
    return fold


def fusion_settings() -> list[tuple]:
    return [(weight, start, round(start + width, 2))
            for weight, start, width in itertools.product(WEIGHTS, STARTS, WIDTHS)]


def main() -> None:
    from nbmemory.embed import SentenceTransformerEmbedder

    notes, queries = run.load_set()
    embedder = run.PrecomputedEmbedder(SentenceTransformerEmbedder(),
                                       [n["text"] for n in notes] + [q["query"] for q in queries])
    layouts = {b: (candidates(notes, queries, embedder, b),
                   run.per_store(notes, queries, lambda n, q, b=b: candidates(n, q, embedder, b)))
               for b in BM25_B}
    one, split = layouts[LexicalIndex.b]
    layers, strip = WEAKER
    weak_notes = run.bare(notes) if strip else notes
    weak = run.PrecomputedEmbedder(run.cut_model(layers), [n["text"] for n in weak_notes] +
                                   [q["query"] for q in queries])
    conditions = (one, weakened(one), split, weakened(split),
                  candidates(weak_notes, queries, weak),
                  run.per_store(weak_notes, queries, lambda n, q: candidates(n, q, weak)))
    fold = folds(one)
    print(f"{len(notes)} notes, {len(queries)} queries")
    ByRecall("0. BM25's length normalisation b, by the keyword channel's own recall@10 at no "
             "cost in MRR", list(BM25_B), lambda option: CHANNELS["lexical"], LexicalIndex.b,
             layouts.get, fold, labels=CONDITIONS[:4:2], baseline=LexicalIndex.b).report()
    ByMargin("1. fusion (keyword weight, from, full), by the worst margin over the better "
             "channel", fusion_settings(),
             lambda option: hybrid_scorer(fusion=option),
             CURRENT_FUSION, conditions, fold).report()
    ByMargin("1b. below the start, keywords lift notes under the cosine's best (how many keep "
             "their places; None: keywords do not count there), by the worst margin over the "
             "better channel", list(LIFT), lambda option: hybrid_scorer(lift=option),
             LIFT_BELOW, conditions, fold).report()
    ByRecall("2. keyword feedback (notes, words, weight), by recall@10 at no cost in MRR",
             FEEDBACK, lambda option: hybrid_scorer(feedback=option),
             CURRENT_FEEDBACK, conditions, fold, baseline=None).report()
    ByRecall("3. context from the note before (weight), by recall@10 at no cost in MRR",
             list(CONTEXT), lambda option: hybrid_scorer(context=option),
             CONTEXT_WEIGHT, conditions, fold, baseline=0.0).report()
    ByRecall("4. a trusted keyword match's place (how far below its place by keywords it may "
             "fall; None: any), by recall@10 at no cost in MRR", list(SLACKS),
             lambda option: hybrid_scorer(slack=option), KEYWORD_SLACK, conditions, fold,
             baseline=None).report()


if __name__ == "__main__":
    main()
