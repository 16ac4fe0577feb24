"""Retrieval evaluation: lexical, dense and hybrid recall on the eval set, with the real model.

    python eval/run.py            # recall@1/5/10 and MRR per mode and slice, with 95% intervals
    python eval/run.py --json     # the same numbers as JSON
    python eval/run.py --misses   # also list the queries hybrid gets wrong at rank 1
    python eval/run.py --stores   # one store per source (14) instead of one for every note
    python eval/run.py --set DIR  # your own notes.jsonl and queries.jsonl (eval/README.md)
    python eval/run.py --stores --layers 3 --bare  # a weaker model, messages without a prefix

The notes in eval/notes.jsonl are remembered into a temporary store through ``Memory.open``
with the default sentence-transformers model (``Memory.remember_many``, after their
embeddings are computed in one batch), then every query in eval/queries.jsonl is recalled
with ``k=10`` and ``min_score=-1`` (nothing is hidden) in each of the three modes. With
``--stores`` each source gets a store of its own (``by_store``: a project's notes, or one
conversation, 169-300 notes each; the held-out set is ten stores of about 590) and each
query is asked of its own: the same notes, but each word's rarity is counted among fewer,
more alike notes, so the keyword channel's scores (and the fusion's trust in them) differ.

``--layers N`` cuts the model to its first N of 6 transformer layers (on torch): its errors
are the model's own, and at 3 dense trails keywords on the chats about as MiniLM trailed BM25
on held-out conversations. ``--bare`` takes the ``[date] Name:`` prefix off the chat messages,
so that names and dates help neither channel.

recall@k is the share of a query's relevant notes found in its top k, divided by
min(k, number of relevant notes) so that a perfect ranking scores 1; MRR is the mean of
1 / rank of the first relevant note (0 when none is in the top 10). Intervals are 95%
percentile bootstrap intervals over queries (2,000 resamples, fixed seed); the
``hybrid - best`` line is a paired bootstrap of hybrid minus the better single channel on
the same resampled queries, so it tells a real difference from noise.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from nbmemory.config import Settings  # noqa: E402
from nbmemory.engine import PRIORITY_BONUS  # noqa: E402
from nbmemory.memory import Memory  # noqa: E402
from nbmemory.models import MODES  # noqa: E402
from nbmemory.ranking import TRUST_FROM, TRUST_FULL  # noqa: E402

K = 10
CUTOFFS = (1, 5, 10)
SLICES = ("paraphrase", "identifier", "natural")
GROUPS = (*SLICES, "all")
METRICS = ("recall@1", "recall@5", "recall@10", "mrr")
RESAMPLES = 2000


def load_jsonl(path: Path) -> list[tuple[int, dict]]:
    """The JSON objects of a JSON-lines file, each with its line number (blank lines are
    skipped); a line that is not one is refused by its number."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SystemExit(f"{path}: {exc.strerror or exc}") from None
    rows = []
    for number, raw in enumerate(data.splitlines(), 1):
        try:
            line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            raise SystemExit(f"{path} line {number}: not UTF-8 (at byte {exc.start + 1})") \
                from None
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise SystemExit(f"{path} line {number}: not JSON ({exc})") from None
        if not isinstance(row, dict):
            raise SystemExit(f"{path} line {number}: not a JSON object but a "
                             f"{type(row).__name__}")
        rows.append((number, row))
    if not rows:
        raise SystemExit(f"{path}: no lines")
    return rows


def load_set(directory: Path = HERE) -> tuple[list[dict], list[dict]]:
    """The notes and queries of ``directory``'s notes.jsonl and queries.jsonl, with what a set
    of one's own may leave out filled in (a note's kind, priority, tags, domain and store; a
    query's type and domain). A line the evaluation cannot use (no id, text, query or
    answers, an id given twice, a note nbmemory refuses, an answer naming no note, an
    unknown type) is refused by its number."""
    from nbmemory.engine.validate import check_kind, check_priority, check_text, normalise_tags
    from nbmemory.errors import NbMemoryError

    def refuse(name: str, line: int, why: str):
        raise SystemExit(f"{directory / name}.jsonl line {line}: {why}")

    def read(name: str, needed: tuple[str, ...]) -> list[tuple[int, dict]]:
        rows = load_jsonl(directory / f"{name}.jsonl")
        for line, row in rows:
            missing = [key for key in needed if row.get(key) in (None, "", [])]
            if missing:
                refuse(name, line, f"no {' or '.join(missing)}")
        return rows

    notes, lines = read("notes", ("id", "text")), {}
    for line, note in notes:
        if not isinstance(note["id"], (str, int)):
            refuse("notes", line, f"the id {note['id']!r} is not a text or a number")
        if note["id"] in lines:
            refuse("notes", line, f"the id {note['id']!r} again (line {lines[note['id']]} has it)")
        lines[note["id"]] = line
        try:
            check_text(note["text"])
            check_kind(note.get("kind", "finding"))
            check_priority(note.get("priority", "medium"))
            normalise_tags(note.get("tags"))
        except NbMemoryError as exc:
            refuse("notes", line, str(exc))
    queries = read("queries", ("query", "relevant"))
    for line, query in queries:
        if not isinstance(query["query"], str):
            refuse("queries", line, f"the query {query['query']!r} is not text")
        if not isinstance(query["relevant"], list):
            refuse("queries", line, 'relevant is a list of note ids, e.g. ["n1"]')
        unknown = [r for r in query["relevant"] if not isinstance(r, (str, int))
                   or r not in lines]
        if unknown:
            refuse("queries", line, f"no note {unknown[0]!r}")
        if query.get("type", "natural") not in SLICES:
            refuse("queries", line, f"type {query['type']!r} is not one of {', '.join(SLICES)}")
    notes = [{"kind": "finding", "priority": "medium", "tags": [], "domain": "", "store": "",
              **note} for _, note in notes]
    queries = [{"type": "natural", "domain": "", **query} for _, query in queries]
    return notes, queries


class PrecomputedEmbedder:
    """The real embedder, with the vectors of known texts computed up front in batches.

    It has the wrapped model's name and identity, so the store cannot tell the difference;
    texts it has not seen are passed through to the model.
    """

    def __init__(self, inner, texts: Sequence[str]):
        self.inner = inner
        self.name = inner.name
        unique = list(dict.fromkeys(texts))
        vectors = inner.encode(unique) if unique else np.empty((0, 0), np.float32)
        self._cache = dict(zip(unique, vectors))

    @property
    def dims(self) -> int:
        return self.inner.dims

    @property
    def identity(self) -> str:
        return self.inner.identity

    @property
    def loaded(self) -> bool:
        return True

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        missing = [t for t in texts if t not in self._cache]
        if missing:
            self._cache.update(zip(missing, self.inner.encode(missing)))
        return np.stack([self._cache[t] for t in texts])


@dataclass
class Loaded:
    memory: Memory
    ids: dict[int, str]          # store id -> eval id
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def engine(self):
        return self.memory._backend.engine

    def close(self) -> None:
        self.memory.close()


def load_store(notes: list[dict], queries: list[dict], directory: Path, embedder=None,
               settings: Settings | None = None) -> Loaded:
    """Remember every note into a fresh store at ``directory``."""
    timings = {}
    start = time.perf_counter()
    if embedder is None:
        from nbmemory.embed import SentenceTransformerEmbedder

        embedder = SentenceTransformerEmbedder()
    embedder.dims  # load the model before timing the encoding
    timings["model_load_s"] = time.perf_counter() - start
    start = time.perf_counter()
    cached = PrecomputedEmbedder(embedder, [n["text"] for n in notes] +
                                 [q["query"] for q in queries])
    timings["batch_embed_s"] = time.perf_counter() - start
    timings["batch_embed_texts"] = len(notes) + len(queries)
    memory = Memory.open(directory, embedder=cached, settings=settings)
    start = time.perf_counter()
    stored = memory.remember_many([{"text": n["text"], "kind": n["kind"],
                                    "priority": n["priority"], "tags": n["tags"]} for n in notes])
    ids = {note.id: source["id"] for note, source in zip(stored, notes)}
    timings["remember_s"] = time.perf_counter() - start
    timings["remember_ms_per_note"] = 1000 * timings["remember_s"] / max(len(notes), 1)
    return Loaded(memory, ids, timings)


def rank_all(loaded: Loaded, queries: list[dict], modes: Sequence[str] = MODES) -> dict:
    """For each mode, per query: the eval ids and fused scores of the top ``K`` hits; and
    ``coverage``: the share of each query its best keyword match covers, as hybrid recall's
    fusion saw it (``Hits.fusion``; it sets the keyword weight)."""
    runs: dict = {"coverage": [0.0] * len(queries)}
    for mode in modes:
        start = time.perf_counter()
        rows = []
        for at, query in enumerate(queries):
            hits = loaded.engine.recall(query["query"], k=K, min_score=-1.0, mode=mode,
                                        explain=mode == "hybrid")
            # The fused score, as min_score cuts it (the shown score adds the priority's
            # bonus, which only orders near-ties): what threshold_report measures.
            rows.append([(loaded.ids[h.note.id], h.score - PRIORITY_BONUS[h.note.priority])
                         for h in hits])
            if hits.fusion:
                runs["coverage"][at] = hits.fusion["covered"]
        loaded.timings[f"recall_ms_{mode}"] = 1000 * (time.perf_counter() - start) / len(queries)
        runs[mode] = rows
    return runs


def query_metrics(ranked: Sequence[str], relevant: Sequence[str]) -> dict[str, float]:
    relevant = set(relevant)
    out = {}
    for cutoff in CUTOFFS:
        found = len(relevant & set(ranked[:cutoff]))
        out[f"recall@{cutoff}"] = found / min(cutoff, len(relevant))
    first = next((i for i, note_id in enumerate(ranked[:K], 1) if note_id in relevant), None)
    out["mrr"] = 1.0 / first if first else 0.0
    return out


def per_query(queries: list[dict], runs: dict) -> dict[str, np.ndarray]:
    """{mode: array of shape (queries, metrics)} in METRICS order."""
    return {mode: np.array([[query_metrics([i for i, _ in row], q["relevant"])[m] for m in METRICS]
                            for q, row in zip(queries, rows)])
            for mode, rows in runs.items()}


def shortfalls(hybrid: Sequence[float], lexical: Sequence[float], dense: Sequence[float],
               queries: int) -> list[str]:
    """The metrics (means in METRICS order) on which hybrid falls more than one query's worth
    (1 / ``queries``) below the better channel: the rule tests/test_eval.py holds recall to on
    every slice, and eval/tune.py its choices. Finer differences are one hit moving by one rank."""
    return [name for name, h, lx, d in zip(METRICS, hybrid, lexical, dense)
            if h < max(lx, d) - 1 / queries]


def bootstrap(values: np.ndarray, seed: int = 13) -> tuple[np.ndarray, np.ndarray]:
    """95% percentile intervals of the column means of ``values`` (queries x metrics)."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(values), size=(RESAMPLES, len(values)))
    means = values[picks].mean(axis=1)
    return np.percentile(means, 2.5, axis=0), np.percentile(means, 97.5, axis=0)


def summarise(queries: list[dict], runs: dict) -> dict:
    """{mode: {group: {metric: mean, metric_ci: [lo, hi], queries: n}}} per slice and all,
    plus {"hybrid_minus_best": {group: {metric: {mean, ci, best}}}} where "best" names the
    better single channel on that metric."""
    values = per_query(queries, runs)
    table: dict = {}
    for group in GROUPS:
        chosen = np.array([group in ("all", q["type"]) for q in queries])
        if not chosen.any():
            continue
        for mode, matrix in values.items():
            sub = matrix[chosen]
            lo, hi = bootstrap(sub)
            entry = {"queries": int(chosen.sum())}
            for j, name in enumerate(METRICS):
                entry[name] = float(sub[:, j].mean())
                entry[f"{name}_ci"] = [float(lo[j]), float(hi[j])]
            table.setdefault(mode, {})[group] = entry
        if {"hybrid", "lexical", "dense"} <= set(values):
            gaps = {}
            for j, name in enumerate(METRICS):
                lexical, dense = values["lexical"][chosen, j], values["dense"][chosen, j]
                best = "lexical" if lexical.mean() >= dense.mean() else "dense"
                diff = values["hybrid"][chosen, j] - values[best][chosen, j]
                lo, hi = bootstrap(diff[:, None])
                gaps[name] = {"best": best, "mean": float(diff.mean()),
                              "ci": [float(lo[0]), float(hi[0])]}
            table.setdefault("hybrid_minus_best", {})[group] = gaps
    return table


def by_domain(queries: list[dict], runs: dict, kind: str = "natural") -> dict:
    """{domain: {mode: recall@10}} over the queries of one slice, to see in which kind of
    store each channel is the weaker one."""
    values = per_query(queries, runs)
    out: dict = {}
    for domain in dict.fromkeys(q["domain"] for q in queries if q["type"] == kind):
        chosen = np.array([q["type"] == kind and q["domain"] == domain for q in queries])
        out[domain] = {"queries": int(chosen.sum()), **{
            mode: float(matrix[chosen, METRICS.index("recall@10")].mean())
            for mode, matrix in values.items()}}
    return out


def by_coverage(queries: list[dict], runs: dict, covered: list[float],
                kind: str = "natural") -> dict:
    """{band: {mode: recall@10}} over the queries of one slice, by how much of each its best
    keyword match covers (``rank_all``'s ``coverage``): below ``TRUST_FROM`` the notes closest
    in meaning come first and keywords only lift the others (``ranking.lifted``), from
    ``TRUST_FULL`` keywords have their full weight. Where hybrid trails keywords alone, this
    says in which band."""
    values = per_query(queries, runs)
    bands = {f"under {TRUST_FROM}": (0.0, TRUST_FROM), f"{TRUST_FROM}-{TRUST_FULL}":
             (TRUST_FROM, TRUST_FULL), f"{TRUST_FULL} and over": (TRUST_FULL, 2.0)}
    out: dict = {}
    for band, (lo, hi) in bands.items():
        chosen = np.array([q["type"] == kind and lo <= c < hi for q, c in zip(queries, covered)])
        if chosen.any():
            out[band] = {"queries": int(chosen.sum()), **{
                mode: float(matrix[chosen, METRICS.index("recall@10")].mean())
                for mode, matrix in values.items()}}
    return out


def threshold_report(queries: list[dict], runs: dict, threshold: float,
                     sweep: Sequence[float] = (0.15, 0.2, 0.25, 0.3, 0.35)) -> dict:
    """What a fused-score cutoff would hide among the top 10 hybrid hits.

    For the default ``threshold``: relevant hits hidden (and how many of those were at rank
    1); for each value in ``sweep``: the share of relevant and of other hits it hides.
    """
    relevant_scores, other_scores, first = [], [], []
    for query, row in zip(queries, runs["hybrid"]):
        relevant = set(query["relevant"])
        for rank, (note_id, score) in enumerate(row, 1):
            if note_id in relevant:
                relevant_scores.append(score)
                first.append(rank == 1)
            else:
                other_scores.append(score)
    relevant_scores, other_scores = np.array(relevant_scores), np.array(other_scores)
    hidden = relevant_scores < threshold
    return {"min_score": threshold, "relevant_in_top10": int(len(relevant_scores)),
            "hidden": int(hidden.sum()),
            "hidden_at_rank1": int((hidden & np.array(first, bool)).sum()),
            "others_in_top10": int(len(other_scores)),
            "sweep": {str(cut): {"relevant_hidden": int((relevant_scores < cut).sum()),
                                 "others_hidden": int((other_scores < cut).sum())}
                      for cut in sweep}}


def misses(queries: list[dict], runs: dict, mode: str = "hybrid") -> list[str]:
    out = []
    for query, row in zip(queries, runs[mode]):
        top = [i for i, _ in row]
        if not top or top[0] not in query["relevant"]:
            where = [top.index(r) + 1 for r in query["relevant"] if r in top]
            out.append(f"[{query['type'][:5]}] {query['query']!r}: relevant {query['relevant']} "
                       f"at {where or 'none'}, got {top[:3]}")
    return out


def format_table(table: dict) -> str:
    header = f"{'slice':<11} {'mode':<8} {'n':>4} " + " ".join(
        f"{name:>17}" for name in ("recall@1", "recall@5", "recall@10", "MRR"))
    lines = [header, "-" * len(header)]
    for group in GROUPS:
        if group not in table.get("hybrid", table.get(next(iter(table)), {})):
            continue
        for mode in MODES:
            if mode not in table:
                continue
            m = table[mode][group]
            lines.append(f"{group:<11} {mode:<8} {m['queries']:>4} " + " ".join(
                f"{m[name]:>6.3f} [{m[name + '_ci'][0]:.2f},{m[name + '_ci'][1]:.2f}]"
                for name in METRICS))
        gaps = table.get("hybrid_minus_best", {}).get(group)
        if gaps:
            lines.append(f"{group:<11} {'h-best':<8} {'':>4} " + " ".join(
                f"{g['mean']:>+6.3f} [{g['ci'][0]:+.2f},{g['ci'][1]:+.2f}]"
                for g in (gaps[name] for name in METRICS)))
        lines.append("")
    lines.append("h-best: hybrid minus the better single channel on that metric, paired "
                 "bootstrap 95% interval")
    return "\n".join(lines).rstrip()


def by_store(notes: list[dict],
             queries: list[dict]) -> list[tuple[list[dict], list[dict], list[int]]]:
    """The notes and queries of each note's ``store`` (a query goes where its notes are),
    with the queries' positions in ``queries``."""
    store_of = {note["id"]: note["store"] for note in notes}
    groups: dict[str, tuple[list, list, list]] = {}
    for note in notes:
        groups.setdefault(note["store"], ([], [], []))[0].append(note)
    for at, query in enumerate(queries):
        stores = {store_of[i] for i in query["relevant"]}
        if len(stores) != 1:
            raise ValueError(f"{query['query']!r}: its notes are in {sorted(stores)}; with "
                             f"--stores a query is asked of the one store holding its notes")
        _, group_queries, positions = groups[stores.pop()]
        group_queries.append(query)
        positions.append(at)
    return list(groups.values())


def per_store(notes: list[dict], queries: list[dict], results) -> list:
    """``results(notes, queries)`` (an item per query) for each store's notes and queries
    (``by_store``), the items in the order of ``queries``."""
    out: list = [None] * len(queries)
    for group_notes, group_queries, positions in by_store(notes, queries):
        for at, item in zip(positions, results(group_notes, group_queries)):
            out[at] = item
    return out


def evaluate(notes: list[dict], queries: list[dict], embedder=None, split: bool = False) -> dict:
    """Every query recalled in every mode, with the notes in one store, or with ``split`` in
    one store per source (``by_store``: as an analyst keeps one per project, and as each
    conversation would be kept), each query asked of its own."""
    if embedder is None:
        from nbmemory.embed import SentenceTransformerEmbedder

        embedder = SentenceTransformerEmbedder()
    timings: list[dict] = []  # each store's
    with tempfile.TemporaryDirectory(prefix="nbmemory-eval-") as tmp:
        def recalled(group_notes: list[dict], group_queries: list[dict]) -> list[dict]:
            loaded = load_store(group_notes, group_queries, Path(tmp) / f"store{len(timings)}",
                                embedder=embedder)
            timings.append(loaded.timings)
            try:
                runs = rank_all(loaded, group_queries)
            finally:
                loaded.close()
            return [dict(zip(runs, rows)) for rows in zip(*runs.values())]

        by_query = per_store(notes, queries, recalled) if split else recalled(notes, queries)
    runs = {mode: [hits[mode] for hits in by_query] for mode in MODES}
    threshold = Settings().min_score
    return {"table": summarise(queries, runs),
            # one store's timings of many would pass for the whole run's
            "timings": timings[0] if len(timings) == 1 else None,
            "natural_by_domain": by_domain(queries, runs),
            "natural_by_coverage": by_coverage(queries, runs, [h["coverage"] for h in by_query]),
            "threshold": threshold_report(queries, runs, threshold), "runs": runs,
            "notes": len(notes), "queries": len(queries), "stores": len(timings)}


def cut_model(layers: int):
    """The default model with only its first ``layers`` transformer layers, on torch."""
    from nbmemory.embed import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder(threads=None, runtime="torch")
    encoder = embedder._load().model[0].auto_model.encoder  # the loaded SentenceTransformer's
    encoder.layer = encoder.layer[:layers]
    return embedder


PREFIX = re.compile(r"^\[[^\]]*\] [^:]{1,40}: ")  # a chat message's "[2024-03-12] Maya: "


def bare(notes: list[dict]) -> list[dict]:
    """The notes with a chat message's leading ``[date] Name:`` taken off (``--bare``)."""
    return [{**n, "text": PREFIX.sub("", n["text"])} for n in notes]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--misses", action="store_true",
                        help="list queries whose first hybrid hit is not relevant")
    parser.add_argument("--stores", action="store_true",
                        help="one store per source (a project, a conversation), not one for all")
    parser.add_argument("--set", type=Path, default=HERE, metavar="DIR",
                        help="a directory with notes.jsonl and queries.jsonl of your own (see "
                             "eval/README.md); default: eval/'s")
    parser.add_argument("--layers", type=int, choices=range(1, 7), metavar="N",
                        help="a weaker model: the default one cut to its first N of 6 layers")
    parser.add_argument("--bare", action="store_true",
                        help="chat messages without their leading '[date] Name: '")
    args = parser.parse_args(argv)
    notes, queries = load_set(args.set)
    if args.bare:
        notes = bare(notes)
    embedder = cut_model(args.layers) if args.layers and args.layers < 6 else None
    try:
        by_store(notes, queries) if args.stores else None
    except ValueError as exc:  # a query whose notes are in two stores
        raise SystemExit(f"{args.set / 'queries.jsonl'}: {exc}") from None
    result = evaluate(notes, queries, embedder=embedder, split=args.stores)
    if args.json:
        print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=2))
        return
    t, th = result["timings"], result["threshold"]
    model = f"all-MiniLM-L6-v2 cut to {args.layers} layers" if embedder else "all-MiniLM-L6-v2"
    print(f"{result['notes']} notes in {result['stores']} store(s), {result['queries']} queries; "
          f"model {model}{', bare messages' if args.bare else ''}, k={K}")
    if t is not None:
        print(f"load: model {t['model_load_s']:.1f} s, batch embedding of "
              f"{t['batch_embed_texts']} texts {t['batch_embed_s']:.1f} s, remember loop "
              f"{t['remember_s']:.1f} s ({t['remember_ms_per_note']:.1f} ms/note)")
        print("recall per query (query embedding precomputed): " + ", ".join(
            f"{mode} {t[f'recall_ms_{mode}']:.1f} ms" for mode in MODES))
    print()
    print(format_table(result["table"]))
    print()
    print("natural questions by domain, recall@10: " + "; ".join(
        f"{domain or '(none)'} ({m['queries']}) " + "/".join(f"{m[mode]:.3f}" for mode in MODES)
        for domain, m in result["natural_by_domain"].items()) + f" ({'/'.join(MODES)})")
    print("natural questions by the share of the question their best keyword match covers, "
          "recall@10: " + "; ".join(
              f"{band} ({m['queries']}) " + "/".join(f"{m[mode]:.3f}" for mode in MODES)
              for band, m in result["natural_by_coverage"].items()) + f" ({'/'.join(MODES)})")
    print()
    print(f"default threshold min_score={th['min_score']}: hides {th['hidden']} of "
          f"{th['relevant_in_top10']} relevant hybrid hits in the top {K} "
          f"({th['hidden_at_rank1']} of them at rank 1)")
    print("other cutoffs, hidden among the top 10 hybrid hits: " + "; ".join(
        f"{cut}: {v['relevant_hidden']}/{th['relevant_in_top10']} relevant, "
        f"{v['others_hidden']}/{th['others_in_top10']} others"
        for cut, v in th["sweep"].items()))
    if args.misses:
        print()
        print("\n".join(misses(queries, result["runs"])))


if __name__ == "__main__":
    main()
