"""Build eval/notes.jsonl and eval/queries.jsonl from the hand-written sources in eval/source/.

Notes are written as ``key | kind | priority | tags | text`` and queries as
``type | domain | key,key | query``; keys are mnemonic so queries stay readable, and this
script numbers the notes (cb-001..., ds-001...) in file order. It refuses to write a set
whose queries point at unknown notes or whose paraphrase queries share a keyword (after
nbmemory's own tokenizer) with a relevant note.

    python eval/make_set.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from nbmemory.lexical import tokenize  # noqa: E402

SOURCES = {"codebase": ("cb", HERE / "source" / "codebase.txt"),
           "dataset": ("ds", HERE / "source" / "dataset.txt")}
QUERIES = HERE / "source" / "queries.txt"
KINDS = {"finding", "gotcha", "decision", "question", "reference", "procedure"}
PRIORITIES = {"high", "medium", "low"}
TYPES = {"paraphrase", "identifier"}


def rows(path: Path, fields: int):
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split(" | ", fields - 1)]
        if len(parts) != fields or not all(parts):
            raise SystemExit(f"{path.name}:{number}: expected {fields} fields separated by ' | '")
        yield number, parts


def build() -> tuple[list[dict], list[dict], list[str]]:
    notes, by_key = [], {}
    for domain, (prefix, path) in SOURCES.items():
        count = 0
        for number, (key, kind, priority, tags, text) in rows(path, 5):
            if key in by_key:
                raise SystemExit(f"{path.name}:{number}: duplicate key {key!r}")
            if kind not in KINDS or priority not in PRIORITIES:
                raise SystemExit(f"{path.name}:{number}: bad kind or priority")
            count += 1
            note = {"id": f"{prefix}-{count:03d}", "text": text, "kind": kind,
                    "priority": priority, "tags": [t.strip() for t in tags.split(",")],
                    "domain": domain}
            notes.append(note)
            by_key[key] = note
    queries, problems = [], []
    for number, (qtype, domain, keys, text) in rows(QUERIES, 4):
        if qtype not in TYPES or domain not in SOURCES:
            raise SystemExit(f"queries.txt:{number}: bad type or domain")
        relevant = []
        for key in keys.split(","):
            note = by_key.get(key.strip())
            if note is None:
                raise SystemExit(f"queries.txt:{number}: unknown note key {key!r}")
            if note["domain"] != domain:
                raise SystemExit(f"queries.txt:{number}: {key} is not a {domain} note")
            relevant.append(note["id"])
            if qtype == "paraphrase":
                shared = set(tokenize(text)) & set(tokenize(note["text"]))
                if shared:
                    problems.append(f"queries.txt:{number}: shares {sorted(shared)} with {key}")
        queries.append({"query": text, "relevant": relevant, "type": qtype, "domain": domain})
    return notes, queries, problems


def main() -> None:
    notes, queries, problems = build()
    if problems:
        print("\n".join(problems))
        raise SystemExit(f"{len(problems)} paraphrase queries share keywords with their notes")
    with open(HERE / "notes.jsonl", "w") as out:
        for note in notes:
            out.write(json.dumps(note, ensure_ascii=False) + "\n")
    with open(HERE / "queries.jsonl", "w") as out:
        for query in queries:
            out.write(json.dumps(query, ensure_ascii=False) + "\n")
    kinds = {t: sum(q["type"] == t for q in queries) for t in sorted(TYPES)}
    print(f"{len(notes)} notes, {len(queries)} queries {kinds}")


if __name__ == "__main__":
    main()
