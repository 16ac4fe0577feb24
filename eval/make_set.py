"""Build eval/notes.jsonl and eval/queries.jsonl from the hand-written sources in eval/source/.

Notes are written as ``key | kind | priority | tags | text`` (one file per domain) and
queries as ``type | domain | key,key | query`` (``queries*.txt``); keys are mnemonic so
queries stay readable, and this script numbers each domain's notes (cb-001, ds-001, ...)
in file order, and gives each note the ``store`` it would live in if its author kept one
store per project: its domain, or for a chat message its conversation (the key's prefix,
``c1_...``). It refuses to write a set whose queries point at unknown notes, and checks
each query type's promise against nbmemory's own tokenizer:

- paraphrase: shares no token with any of its relevant notes;
- natural: shares at least one token with one of its relevant notes, and with none of them
  more than ``NATURAL_MAX_SHARE`` of its own tokens (some of the words, not most);
- identifier: no check here (tests/test_eval.py checks that a relevant note holds a token).

    python eval/make_set.py            # write the JSONL files
    python eval/make_set.py --check    # only report problems
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from nbmemory.lexical import tokenize  # noqa: E402

SOURCE = HERE / "source"
# domain -> (id prefix, notes file)
SOURCES = {"codebase": ("cb", SOURCE / "codebase.txt"),
           "dataset": ("ds", SOURCE / "dataset.txt"),
           "penguins": ("pg", SOURCE / "penguins.txt"),
           "pandas": ("pd", SOURCE / "pandas.txt"),
           "sql": ("sq", SOURCE / "sql.txt"),
           "stdlib": ("py", SOURCE / "stdlib.txt"),
           "team": ("tm", SOURCE / "team.txt"),
           "chat": ("ch", SOURCE / "chat.txt")}
KINDS = {"finding", "gotcha", "decision", "question", "reference", "procedure"}
PRIORITIES = {"high", "medium", "low"}
TYPES = {"paraphrase", "identifier", "natural"}
NATURAL_MAX_SHARE = 2 / 3


def rows(path: Path, fields: int):
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split(" | ", fields - 1)]
        if len(parts) != fields or not all(parts):
            raise SystemExit(f"{path.name}:{number}: expected {fields} fields separated by ' | '")
        yield number, parts


def store_of(domain: str, key: str) -> str:
    """A domain's notes share a store; each chat (keys ``c1_...``, ``c2_...``) has its own."""
    return f"{domain} {key.split('_')[0]}" if domain == "chat" else domain


def share(query: str, note: str) -> tuple[set[str], float]:
    """The query's tokens that the note holds, and their share of the query's tokens."""
    words = set(tokenize(query))
    shared = words & set(tokenize(note))
    return shared, len(shared) / max(len(words), 1)


def check_query(qtype: str, text: str, notes: list[dict]) -> str | None:
    """Why a query breaks its type's promise, or None."""
    shares = [share(text, note["text"]) for note in notes]
    if qtype == "paraphrase":
        bad = [(n["key"], sorted(s)) for n, (s, _) in zip(notes, shares) if s]
        return f"shares {bad[0][1]} with {bad[0][0]}" if bad else None
    if qtype == "natural":
        if not any(s for s, _ in shares):
            return "shares no token with any relevant note (that is a paraphrase)"
        worst = max(range(len(notes)), key=lambda i: shares[i][1])
        if shares[worst][1] > NATURAL_MAX_SHARE:
            return (f"shares {shares[worst][1]:.0%} of its tokens with {notes[worst]['key']} "
                    f"({sorted(shares[worst][0])}); at most {NATURAL_MAX_SHARE:.0%}")
    return None


def build() -> tuple[list[dict], list[dict], list[str]]:
    notes, by_key = [], {}
    for domain, (prefix, path) in SOURCES.items():
        if not path.exists():
            continue
        count = 0
        for number, (key, kind, priority, tags, text) in rows(path, 5):
            if key in by_key:
                raise SystemExit(f"{path.name}:{number}: duplicate key {key!r}")
            if kind not in KINDS or priority not in PRIORITIES:
                raise SystemExit(f"{path.name}:{number}: bad kind or priority")
            count += 1
            note = {"id": f"{prefix}-{count:03d}", "text": text, "kind": kind,
                    "priority": priority, "tags": [t.strip() for t in tags.split(",")],
                    "domain": domain, "store": store_of(domain, key)}
            notes.append(note)
            by_key[key] = dict(note, key=key)
    queries, problems = [], []
    for path in sorted(SOURCE.glob("queries*.txt")):
        for number, (qtype, domain, keys, text) in rows(path, 4):
            where = f"{path.name}:{number}"
            if qtype not in TYPES or domain not in SOURCES:
                raise SystemExit(f"{where}: bad type or domain")
            relevant = []
            for key in keys.split(","):
                note = by_key.get(key.strip())
                if note is None:
                    raise SystemExit(f"{where}: unknown note key {key.strip()!r}")
                if note["domain"] != domain:
                    raise SystemExit(f"{where}: {key} is not a {domain} note")
                relevant.append(note)
            problem = check_query(qtype, text, relevant)
            if problem:
                problems.append(f"{where}: {problem}: {text}")
            queries.append({"query": text, "relevant": [n["id"] for n in relevant],
                            "type": qtype, "domain": domain})
    return notes, queries, problems


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    notes, queries, problems = build()
    if problems:
        print("\n".join(problems))
        raise SystemExit(f"{len(problems)} queries break their type's promise")
    kinds = {t: sum(q["type"] == t for q in queries) for t in sorted(TYPES)}
    print(f"{len(notes)} notes, {len(queries)} queries {kinds}")
    if "--check" in argv:
        return
    with open(HERE / "notes.jsonl", "w") as out:
        for note in notes:
            out.write(json.dumps(note, ensure_ascii=False) + "\n")
    with open(HERE / "queries.jsonl", "w") as out:
        for query in queries:
            out.write(json.dumps(query, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
