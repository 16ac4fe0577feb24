"""Would a note's neighbours help either channel? Measured per slice, outside the engine.

    python eval/neighbours.py

A note's neighbours are the notes written just before and after it in the same place: the
same domain's file for the analyst notes, the same dated session for the chats (a product
would take them from provenance: the same notebook and kernel session). Each channel is
scored exactly over the whole set, once on each note's own text and once with its
neighbours: the keyword channel on the note's text after the previous note's, the dense
channel on the note's vector plus ``a`` times the vector of its neighbours' texts
(normalised again). Recall@10 per slice, the chats apart from the other natural questions.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import run  # noqa: E402  (eval/run.py)
from nbmemory.embed import SentenceTransformerEmbedder  # noqa: E402
from nbmemory.lexical import LexicalIndex  # noqa: E402


def places(notes: list[dict]) -> list[str]:
    """Where each note was written: its domain, for a chat message its session too."""
    out = []
    for note in notes:
        session = re.match(r"\[(.*?)\]", note["text"]) if note["domain"] == "chat" else None
        out.append(note["domain"] + (session.group(1) if session else ""))
    return out


def neighbours(texts: list[str], where: list[str], before: bool, after: bool) -> list[str]:
    out = []
    for i in range(len(texts)):
        parts = []
        if before and i > 0 and where[i - 1] == where[i]:
            parts.append(texts[i - 1])
        if after and i + 1 < len(texts) and where[i + 1] == where[i]:
            parts.append(texts[i + 1])
        out.append(" ".join(parts))
    return out


def keyword_scores(docs: list[str], queries: list[dict]) -> np.ndarray:
    index = LexicalIndex.build(enumerate(docs))
    scores = np.zeros((len(queries), len(docs)), np.float32)
    for row, query in enumerate(queries):
        found, values = index.score(query["query"], None, limit=len(docs))
        scores[row, found] = values
    return scores


def report(label: str, scores: np.ndarray, notes: list[dict], queries: list[dict]) -> None:
    ids, got = [n["id"] for n in notes], {}
    for query, row in zip(queries, scores):
        top = [ids[i] for i in np.argsort(-row, kind="stable")[:run.K]]
        kind = "chat" if query["domain"] == "chat" else query["type"]
        got.setdefault(kind, []).append(run.query_metrics(top, query["relevant"])["recall@10"])
    print(f"{label:<37}" + "  ".join(f"{kind} {np.mean(v):.3f}" for kind, v in sorted(got.items())))


def main() -> None:
    notes, queries = run.load_set()
    texts, where = [n["text"] for n in notes], places(notes)
    embedder = SentenceTransformerEmbedder()
    qvecs = embedder.encode([q["query"] for q in queries])
    own = embedder.encode(texts)
    print(f"{len(notes)} notes, {len(queries)} queries; recall@10, exact scoring over all notes")
    report("keywords, own text", keyword_scores(texts, queries), notes, queries)
    before = neighbours(texts, where, True, False)
    report("keywords, after the previous note's",
           keyword_scores([f"{b} {t}" if b else t for b, t in zip(before, texts)], queries),
           notes, queries)
    report("dense, own text", qvecs @ own.T, notes, queries)
    around = neighbours(texts, where, True, True)
    context = embedder.encode([a or t for a, t in zip(around, texts)])
    for a in (0.25, 0.5):
        mixed = own + a * context
        mixed /= np.linalg.norm(mixed, axis=1, keepdims=True)
        report(f"dense, own + {a} x neighbours'", qvecs @ mixed.T, notes, queries)


if __name__ == "__main__":
    main()
