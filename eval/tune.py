"""Choose the fusion's constants by cross-validation on eval/ (``nbmemory.ranking.fuse``).

    python eval/tune.py            # the grid, the 5-fold choice and what it scores held out

Every query is ranked once by both channels in a real store (the same candidate pool as
``Engine.recall`` with k=10: the best 100 of each channel, each candidate scored by both);
fusions are then compared on those scores, with the priority bonus, as recall applies it.

A setting is judged by its worst margin over the better single channel: for each slice
(paraphrase, identifier, natural) and metric (recall@10, MRR), hybrid minus
max(lexical, dense), and the smallest of these is the setting's score, so a rule that helps
one kind of query by hurting another loses. It is judged twice, on the channels as they
are and with the dense channel weakened (Gaussian noise of sd 0.1 on every cosine, fixed
seed): on eval/ MiniLM beats BM25 on natural questions, while on held-out conversational
questions BM25 beat it by 19 points of recall@10; a rule must hold up either way. Ties go
to the better overall recall@10.

5-fold cross-validation (folds stratified by slice): the setting is chosen on four folds
and scored on the fifth; the table shows the held-out folds' metrics pooled.

Then, with those constants as ranking.py has them, the keyword feedback
(``ranking.with_feedback``: how many of the first pass's best notes, how many of their
words, and their weight) is cross-validated on the same candidates and folds, with "no
feedback" among the settings. The worst margin does not tell feedback settings apart (it
sits on a slice feedback barely moves: identifiers' MRR with the cosines weakened), so a
setting is judged by its overall recall@10 in the worse of the two conditions, among those
that lose at most MRR_SLACK of MRR on any slice in either condition against no feedback.
"""

from __future__ import annotations

import itertools
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import run  # noqa: E402  (eval/run.py)
from nbmemory.engine import PRIORITY_BONUS  # noqa: E402
from nbmemory.ranking import (  # noqa: E402
    FEEDBACK_NOTES, FEEDBACK_TERMS, FEEDBACK_WEIGHT, KEYWORD_WEIGHT, TRUST_FROM, TRUST_FULL,
    fuse, keyword_weight, mix, rank, with_feedback)

POOL = 100
WEIGHTS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
STARTS = (0.25, 0.3, 0.35, 0.4, 0.45, 0.5)
WIDTHS = (0.1, 0.15, 0.25, 0.35)
FOLDS = 5
NOISE = 0.1
MRR_SLACK = 0.005
FEEDBACK = [None] + list(itertools.product((2, 3, 5), (5, 10, 15, 20),
                                           (0.2, 0.3, 0.4, 0.5, 0.6, 0.7)))


def candidates(notes: list[dict], queries: list[dict]) -> tuple[list[dict], object]:
    """Per query: eval ids, store ids, normalised lexical scores (no feedback), cosines and
    priority bonuses; and the keyword index, for feedback."""
    with tempfile.TemporaryDirectory(prefix="nbmemory-tune-") as tmp:
        loaded = run.load_store(notes, queries, Path(tmp) / "store")
        engine = loaded.engine
        bonus = {n["id"]: PRIORITY_BONUS[n["priority"]] for n in notes}
        out = []
        for query in queries:
            qvec = engine.embedder.encode([query["query"]])[0]
            rows = rank(query["query"], qvec, engine.lexical, engine.vectors, candidates=None,
                        pool=POOL, exact_below=engine.settings.exact_below)
            ids = [loaded.ids[r.note_id] for r in rows]
            out.append({"ids": ids, "type": query["type"], "relevant": query["relevant"],
                        "query": query["query"], "sid": np.array([r.note_id for r in rows]),
                        "lexical": np.array([r.lexical for r in rows], np.float32),
                        "dense": np.array([r.dense for r in rows], np.float32),
                        "bonus": np.array([bonus[i] for i in ids], np.float32)})
        lexical = engine.lexical
        loaded.close()
    return out, lexical


def weakened(rows: list[dict], seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [dict(r, dense=r["dense"] + rng.normal(0, NOISE, len(r["dense"])).astype(np.float32))
            for r in rows]


def ranked(row: dict, scorer) -> list[str]:
    score = scorer(row) + row["bonus"]
    return [row["ids"][i] for i in np.lexsort((np.arange(len(score)), -score))]


SCORERS = {"lexical": lambda r: r["lexical"], "dense": lambda r: r["dense"]}


def previous_rule(row: dict) -> np.ndarray:
    """The fusion before this one, for comparison: soft OR of the cosine and the keyword
    share above half of the query, 1 - (1 - cos)(1 - 0.9 * max(0, (lex - 0.5) / 0.5))."""
    dense = np.clip(row["dense"], 0, 1)
    return dense + (1 - dense) * 0.9 * np.clip((row["lexical"] - 0.5) / 0.5, 0, 1)


def metrics(rows: list[dict], scorer) -> np.ndarray:
    """Per query: recall@1, recall@5, recall@10, MRR."""
    return np.array([[m[name] for name in run.METRICS]
                     for m in (run.query_metrics(ranked(r, scorer), r["relevant"]) for r in rows)])


def margin(rows: list[dict], scorer, channels: dict) -> tuple[float, float]:
    """(worst slice margin over the better channel on recall@10 and MRR, overall recall@10)."""
    return margin_of(metrics(rows, scorer), rows, channels)


def margin_of(values: np.ndarray, rows: list[dict], channels: dict) -> tuple[float, float]:
    worst = np.inf
    for kind in run.SLICES:
        chosen = np.array([r["type"] == kind for r in rows])
        if not chosen.any():
            continue
        for j in (2, 3):  # recall@10, MRR
            best = max(channels[c][chosen, j].mean() for c in channels)
            worst = min(worst, values[chosen, j].mean() - best)
    return worst, values[:, 2].mean()


def settings():
    for weight, start, width in itertools.product(WEIGHTS, STARTS, WIDTHS):
        yield weight, start, round(start + width, 2)


def scorer_for(setting):
    weight, start, full = setting
    return lambda r: fuse(r["lexical"], r["dense"], weight, start, full)


def choose(conditions: list[list[dict]]) -> tuple[tuple, tuple]:
    """The setting with the best worst margin over every condition (ties: recall@10)."""
    channels = [{name: metrics(rows, s) for name, s in SCORERS.items()} for rows in conditions]
    best, best_key = None, None
    for setting in settings():
        scorer = scorer_for(setting)
        results = [margin(rows, scorer, ch) for rows, ch in zip(conditions, channels)]
        key = (round(min(m for m, _ in results), 4), round(min(r for _, r in results), 4))
        if best_key is None or key > best_key:
            best, best_key = setting, key
    return best, best_key


def folds(rows: list[dict]) -> list[int]:
    fold, seen = [], {}
    for r in rows:
        seen[r["type"]] = seen.get(r["type"], -1) + 1
        fold.append(seen[r["type"]] % FOLDS)
    return fold


def feedback_scorer(setting, lexical):
    """Hybrid with the keyword feedback of ``setting`` (notes, terms, weight), or none."""
    def score(r):
        w = keyword_weight(r["lexical"])
        first = mix(r["lexical"], r["dense"], w)
        if setting is None or w == 0:
            return first
        notes, terms, weight = setting
        blended = with_feedback(r["query"], lexical, r["sid"], first, r["lexical"],
                                notes=notes, terms=terms, weight=weight)
        return mix(blended, r["dense"], w)
    return score


def tune_feedback(rows: list[dict], noisy: list[dict], fold: list[int], lexical) -> None:
    """Cross-validate the feedback settings (FEEDBACK; see the module docstring)."""
    conditions = (rows, noisy)
    values = {(setting, c): metrics(cond, feedback_scorer(setting, lexical))
              for setting in FEEDBACK for c, cond in enumerate(conditions)}

    def choose_among(chosen: list[int]):
        kinds = np.array([rows[i]["type"] for i in chosen])

        def key(setting):
            """(allowed, worst recall@10 over the conditions); allowed: on no slice, in
            neither condition, is MRR more than MRR_SLACK below no feedback's."""
            mrr_loss, recall = 0.0, np.inf
            for c in range(len(conditions)):
                got, base = values[setting, c][chosen], values[None, c][chosen]
                recall = min(recall, got[:, 2].mean())
                for kind in run.SLICES:
                    at = kinds == kind
                    if at.any():
                        mrr_loss = max(mrr_loss, base[at, 3].mean() - got[at, 3].mean())
            return mrr_loss <= MRR_SLACK, round(recall, 4)
        return max(FEEDBACK, key=key), key

    print("\nkeyword feedback (notes, words, weight), by recall@10 at no cost in MRR:")
    cv = {}
    for k in range(FOLDS):
        train = [i for i, f in enumerate(fold) if f != k]
        test = [i for i, f in enumerate(fold) if f == k]
        setting, key = choose_among(train)
        for c in range(len(conditions)):
            cv.update({(i, c): values[setting, c][i] for i in test})
        print(f"fold {k}: chose {setting} (train recall@10, the worse condition's, "
              f"{key(setting)[1]:.3f}; without feedback {key(None)[1]:.3f})")
    final, key = choose_among(list(range(len(rows))))
    print(f"on all queries: {final} (recall@10, the worse condition's, {key(final)[1]:.3f}; "
          f"without feedback {key(None)[1]:.3f}); ranking.py has "
          f"{(FEEDBACK_NOTES, FEEDBACK_TERMS, FEEDBACK_WEIGHT)}")
    for c, label in enumerate(("as measured", "dense weakened")):
        pooled = np.array([cv[i, c] for i in range(len(rows))])
        print(f"  {label}: recall@10 / MRR per slice")
        for name, table in (("no feedback", values[None, c]), ("feedback (CV)", pooled),
                            ("feedback (final)", values[final, c])):
            cells = []
            for kind in (*run.SLICES, "all"):
                chosen = np.array([kind in ("all", r["type"]) for r in rows])
                cells.append(f"{kind} {table[chosen, 2].mean():.3f}/{table[chosen, 3].mean():.3f}")
            print(f"    {name:<16} " + "  ".join(cells))


def main() -> None:
    notes, queries = run.load_set()
    rows, lexical = candidates(notes, queries)
    noisy = weakened(rows)
    fold = folds(rows)
    held_out: dict[int, np.ndarray] = {}
    print(f"{len(notes)} notes, {len(queries)} queries; grid of {len(list(settings()))} settings")
    for k in range(FOLDS):
        train = [i for i, f in enumerate(fold) if f != k]
        test = [i for i, f in enumerate(fold) if f == k]
        setting, key = choose([[rows[i] for i in train], [noisy[i] for i in train]])
        values = metrics([rows[i] for i in test], scorer_for(setting))
        held_out.update(zip(test, values))
        print(f"fold {k}: chose weight {setting[0]}, from {setting[1]}, full {setting[2]} "
              f"(worst train margin {key[0]:+.3f})")
    final, key = choose([rows, noisy])
    print(f"on all queries: weight {final[0]}, from {final[1]}, full {final[2]} "
          f"(worst margin {key[0]:+.3f}, recall@10 {key[1]:.3f}); ranking.py has "
          f"{KEYWORD_WEIGHT}, {TRUST_FROM}, {TRUST_FULL}")
    cv = np.array([held_out[i] for i in range(len(rows))])
    for label, condition in (("as measured", rows), ("dense weakened", noisy)):
        print(f"\n{label}: recall@10 / MRR per slice (hybrid: held-out folds of the CV choice)")
        table = {name: metrics(condition, s) for name, s in SCORERS.items()}
        table["hybrid (CV)"] = cv if condition is rows else metrics(condition, scorer_for(final))
        if condition is noisy:
            table["hybrid (final)"] = table.pop("hybrid (CV)")
        table["previous rule"] = metrics(condition, previous_rule)
        for name, values in table.items():
            cells = []
            for kind in (*run.SLICES, "all"):
                chosen = np.array([kind in ("all", r["type"]) for r in condition])
                cells.append(f"{kind} {values[chosen, 2].mean():.3f}/{values[chosen, 3].mean():.3f}")
            print(f"  {name:<15} " + "  ".join(cells))
    tune_feedback(rows, noisy, fold, lexical)


if __name__ == "__main__":
    main()
