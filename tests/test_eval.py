"""The retrieval evaluation set (eval/): its shape, and hybrid recall measured on it with the real model.

The ranking tests load all notes into a real store with the default model (about a minute
on two busy cores), and again into a store per project and per conversation, and compare
the three recall modes; ``python eval/run.py [--stores]`` prints the same numbers as a table.
"""

import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path

import pytest

from nbmemory.lexical import tokenize
from nbmemory.models import KINDS, PRIORITIES

EVAL = Path(__file__).resolve().parent.parent / "eval"


def load_module(name: str):
    spec = importlib.util.spec_from_file_location(f"nbmemory_eval_{name}", EVAL / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


run = load_module("run")
NOTES, QUERIES = run.load_set(EVAL)
BY_ID = {note["id"]: note for note in NOTES}


def test_set_is_large_enough_and_has_three_slices():
    assert len(NOTES) >= 2000 and len(QUERIES) >= 500
    domains = Counter(note["domain"] for note in NOTES)
    assert set(domains) == {"codebase", "dataset", "penguins", "pandas", "sql", "stdlib", "team",
                            "chat"}
    assert min(domains.values()) >= 250, domains
    types = Counter(query["type"] for query in QUERIES)
    assert types["paraphrase"] >= 80 and types["identifier"] >= 80, types
    assert types["natural"] >= 300, types
    assert set(types) == {"paraphrase", "identifier", "natural"}
    for kind in ("paraphrase", "identifier"):
        per_domain = Counter(q["domain"] for q in QUERIES if q["type"] == kind)
        assert min(per_domain.values()) >= 30, (kind, per_domain)
    natural = Counter(q["domain"] for q in QUERIES if q["type"] == "natural")
    assert set(natural) == set(domains) and min(natural.values()) >= 50, natural


def test_notes_and_queries_are_well_formed():
    assert len(BY_ID) == len(NOTES), "note ids must be unique"
    prefixes = {domain: prefix + "-" for domain, (prefix, _) in load_module("make_set").SOURCES.items()}
    for note in NOTES:
        prefix = prefixes[note["domain"]]
        assert note["id"].startswith(prefix), note["id"]
        assert note["kind"] in KINDS and note["priority"] in PRIORITIES, note["id"]
        assert note["tags"] and all(isinstance(t, str) and t for t in note["tags"]), note["id"]
        assert 30 <= len(note["text"]) <= 400, note["id"]
    assert len({note["text"] for note in NOTES}) == len(NOTES), "duplicate note text"
    assert len({query["query"] for query in QUERIES}) == len(QUERIES), "duplicate query"
    for query in QUERIES:
        assert query["relevant"], query["query"]
        for note_id in query["relevant"]:
            assert BY_ID[note_id]["domain"] == query["domain"], (query["query"], note_id)


def test_each_project_and_each_conversation_is_a_store_of_its_own():
    stores = Counter(note["store"] for note in NOTES)
    chats = {store: n for store, n in stores.items() if store.startswith("chat ")}
    assert len(chats) == 7 and min(chats.values()) >= 150, chats
    assert {s for s in stores if s not in chats} == {n["domain"] for n in NOTES} - {"chat"}
    groups = run.by_store(NOTES, QUERIES)
    assert sum(len(queries) for _, queries, _ in groups) == len(QUERIES)
    for notes, queries, _ in groups:
        held = {note["id"] for note in notes}
        assert all(set(q["relevant"]) <= held for q in queries)


def test_a_query_whose_notes_are_in_two_stores_is_refused():
    notes = [dict(NOTES[0]), dict(NOTES[1], store="elsewhere")]
    query = {"query": "q", "relevant": [notes[0]["id"], notes[1]["id"]], "type": "natural"}
    with pytest.raises(ValueError, match="its notes are in"):
        run.by_store(notes, [query])


def test_paraphrase_queries_share_no_keyword_with_their_notes():
    for query in QUERIES:
        if query["type"] != "paraphrase":
            continue
        words = set(tokenize(query["query"]))
        for note_id in query["relevant"]:
            shared = words & set(tokenize(BY_ID[note_id]["text"]))
            assert not shared, f"{query['query']!r} shares {sorted(shared)} with {note_id}"


def test_natural_queries_share_some_but_not_most_of_their_words():
    for query in QUERIES:
        if query["type"] != "natural":
            continue
        words = set(tokenize(query["query"]))
        shares = [len(words & set(tokenize(BY_ID[i]["text"]))) / len(words)
                  for i in query["relevant"]]
        assert 0 < max(shares) <= 2 / 3, (query["query"], shares)


def test_identifier_queries_name_something_their_notes_contain():
    for query in QUERIES:
        if query["type"] != "identifier":
            continue
        words = set(tokenize(query["query"]))
        assert any(words & set(tokenize(BY_ID[i]["text"])) for i in query["relevant"]), query


def test_jsonl_files_are_built_from_the_sources():
    make_set = load_module("make_set")
    notes, queries, problems = make_set.build()
    assert problems == []
    assert notes == NOTES, "eval/notes.jsonl is stale: run python eval/make_set.py"
    assert queries == QUERIES, "eval/queries.jsonl is stale: run python eval/make_set.py"
    assert json.loads(json.dumps(QUERIES)) == QUERIES


@pytest.fixture(scope="module")
def embedder(real_embedder):
    """The real model, with every note's and query's vector computed once for both layouts."""
    return run.PrecomputedEmbedder(real_embedder, [n["text"] for n in NOTES] +
                                   [q["query"] for q in QUERIES])


@pytest.fixture(scope="module")
def result(embedder):
    return run.evaluate(NOTES, QUERIES, embedder=embedder)


@pytest.fixture(scope="module")
def split_result(embedder):
    return run.evaluate(NOTES, QUERIES, embedder=embedder, split=True)


def test_the_rule_allows_one_query_below_the_better_channel_and_no_more():
    # 100 queries, one query's worth 0.01: recall@1 0.005 below lexical passes; recall@5, 0.02
    # below dense though above lexical, and MRR 0.02 below dense do not.
    hybrid, lexical, dense = [0.505, 0.60, 0.9, 0.70], [0.51, 0.55, 0.0, 0.0], [0.4, 0.62, 0.9, 0.72]
    assert run.shortfalls(hybrid, lexical, dense, 100) == ["recall@5", "mrr"]
    assert run.shortfalls(hybrid, lexical, dense, 40) == []  # one query's worth: 0.025


def test_questions_are_grouped_by_how_much_of_them_keywords_cover():
    from nbmemory.ranking import TRUST_FROM, TRUST_FULL

    queries = [{"type": "natural", "relevant": ["a"]}, {"type": "natural", "relevant": ["b"]},
               {"type": "natural", "relevant": ["c"]}, {"type": "paraphrase", "relevant": ["d"]}]
    found, missed = [("a", 1.0), ("b", 1.0), ("c", 1.0), ("d", 1.0)], [("x", 1.0)] * 4
    runs = {"hybrid": [[h] for h in found], "lexical": [[found[0]], [missed[1]], [found[2]],
                                                      [found[3]]]}
    bands = run.by_coverage(queries, runs, [TRUST_FROM - 0.01, TRUST_FROM, TRUST_FULL, 0.0])
    assert [(m["queries"], m["hybrid"], m["lexical"]) for m in bands.values()] == [
        (1, 1.0, 1.0), (1, 1.0, 0.0), (1, 1.0, 1.0)]  # the paraphrase is not counted
    assert list(bands)[0] == f"under {TRUST_FROM}"


def write_set(directory: Path, notes: list[dict], queries: list[dict]) -> Path:
    directory.mkdir()
    for name, rows in (("notes", notes), ("queries", queries)):
        (directory / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return directory


def test_a_set_of_ones_own_needs_only_ids_texts_queries_and_answers(tmp_path, capsys):
    """``run.py --set DIR``: anyone's questions over anyone's notes, through the same code
    (a held-out set stays where it is and still gets the table)."""
    from nbmemory.embed import HashEmbedder

    notes = [{"id": "a1", "text": "the nightly export moved to Airflow in March", "store": "a"},
             {"id": "a2", "text": "Airflow retries a failed task twice", "store": "a"},
             {"id": "b1", "text": "penguin bill depth is in millimetres", "store": "b"}]
    queries = [{"query": "when did the nightly export move", "relevant": ["a1"]},
               {"query": "units of bill depth", "relevant": ["b1"]}]
    loaded = run.load_set(write_set(tmp_path / "mine", notes, queries))
    assert loaded[0][0] == {**notes[0], "kind": "finding", "priority": "medium", "tags": [],
                            "domain": ""}
    assert {q["type"] for q in loaded[1]} == {"natural"}
    result = run.evaluate(*loaded, embedder=HashEmbedder(), split=True)
    assert result["stores"] == 2 and result["table"]["hybrid"]["natural"]["queries"] == 2
    assert result["table"]["lexical"]["all"]["recall@1"] == 1.0
    assert sum(m["queries"] for m in result["natural_by_coverage"].values()) == 2


def test_bare_takes_only_a_chat_messages_prefix_off():
    texts = ["[2024-03-12] Maya: Juno chewed the sofa [again]: why",
             "see [docs] note: the redirect", "[2024-03-12] a note with no speaker"]
    notes = [{"id": f"n{i}", "text": t, "store": "s"} for i, t in enumerate(texts)]
    assert [n["text"] for n in run.bare(notes)] == ["Juno chewed the sofa [again]: why",
                                                    *texts[1:]]
    assert [n["text"] for n in notes] == texts  # the caller's notes are left as they were


@pytest.mark.model
def test_layers_cuts_the_default_model_to_a_weaker_one(real_embedder):
    """``--layers 3`` is the held-out condition where dense trails keywords: the same
    model, its own errors, not noise."""
    cut = run.cut_model(3)
    texts = ["What breed is Nadia's dog Juno?", "Juno is a border collie, two years old."]
    full, weak = real_embedder.encode(texts), cut.encode(texts)
    assert weak.shape == full.shape == (2, 384)
    assert float(full[0] @ weak[0]) < 0.95  # another model's vectors
    assert abs(float(weak[0] @ weak[0]) - 1.0) < 1e-5


@pytest.mark.parametrize("notes, queries, message", [
    ([{"id": "a1"}], [], "notes.jsonl line 1: no text"),
    ([{"id": "a1", "text": "x"}], [{"query": "x", "relevant": []}],
     "queries.jsonl line 1: no relevant"),
    ([{"id": "a1", "text": "x"}], [{"query": "x", "relevant": ["a1", "a9"]}],
     "queries.jsonl line 1: no note 'a9'"),
])
def test_a_set_with_a_hole_is_refused_by_line(tmp_path, notes, queries, message):
    with pytest.raises(SystemExit, match=message):
        run.load_set(write_set(tmp_path / "mine", notes, queries))


@pytest.mark.parametrize("notes, queries, message", [
    ('{"id": "a1", "text": "x"}\n\n{"id": "a2"}\n', '{"query": "x", "relevant": ["a1"]}',
     r"notes.jsonl line 3: no text$"),  # the file's own line, blank lines counted
    ('{"id": 0, "text": "x"}', '{"query": "x", "relevant": [0], "type": "paraphrases"}',
     r"queries.jsonl line 1: type 'paraphrases' is not one of paraphrase, identifier, "
     r"natural$"),
    ('{"id": "a1", "text": "x"}\n{"id": "a1", "text": "y"}', '{"query": "x", "relevant": ["a1"]}',
     r"notes.jsonl line 2: the id 'a1' again \(line 1 has it\)$"),
    ('{"id": "a1", "text": "x", "kind": "rumour"}', '{"query": "x", "relevant": ["a1"]}',
     r"notes.jsonl line 1: Unknown kind 'rumour'"),
    ('{"id": "a1", "text": "x"}', '{"query": "x", "relevant": "a1"}',
     r'queries.jsonl line 1: relevant is a list of note ids, e.g. \["n1"\]$'),
    ('{"id": "a1", "text": "x"}', '{"query": "x", "relevant": ["a1"]}\n{"query": "y", "rel',
     r"queries.jsonl line 2: not JSON \(Unterminated string"),
    ('{"id": "a1", "text": "x"}', '["x", ["a1"]]', r"queries.jsonl line 1: not a JSON object "
                                                   r"but a list$"),
    ('{"id": "a1", "text": "caf\xe9"}'.encode("latin-1"), '{"query": "x", "relevant": ["a1"]}',
     r"notes.jsonl line 1: not UTF-8 \(at byte 26\)$"),
    ('{"id": "a1", "text": "x"}', "\n", r"queries.jsonl: no lines$"),
    ('{"id": "a1", "text": "x"}', '{"query": 5, "relevant": ["a1"]}',
     r"queries.jsonl line 1: the query 5 is not text$"),
])
def test_a_set_that_cannot_be_read_is_refused_by_its_files_line(tmp_path, notes, queries,
                                                                 message):
    directory = tmp_path / "mine"
    directory.mkdir()
    for name, content in (("notes", notes), ("queries", queries)):
        path = directory / f"{name}.jsonl"
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    with pytest.raises(SystemExit, match=message):
        run.load_set(directory)
    with pytest.raises(SystemExit, match=r"nowhere/notes.jsonl: No such file or directory$"):
        run.load_set(tmp_path / "nowhere")


def assert_hybrid_holds(table: dict, kind: str) -> None:
    """Every metric within one query's worth of the better channel (``run.shortfalls``)."""
    means = {mode: [table[mode][kind][m] for m in run.METRICS] for mode in run.MODES}
    short = run.shortfalls(means["hybrid"], means["lexical"], means["dense"],
                           table["hybrid"][kind]["queries"])
    assert not short, (kind, short, table["hybrid_minus_best"][kind])


@pytest.mark.model
@pytest.mark.parametrize("kind", ["paraphrase", "identifier", "natural"])
def test_hybrid_is_at_least_as_good_as_the_better_channel_on_every_slice(result, kind):
    assert_hybrid_holds(result["table"], kind)


@pytest.mark.model
@pytest.mark.parametrize("kind", ["paraphrase", "identifier", "natural"])
def test_hybrid_holds_with_a_store_per_project_and_per_conversation(split_result, kind):
    """As nbmemory keeps stores by default (one per project), and as the held-out set is ten
    stores: fewer, more alike notes per store change every word's idf."""
    assert split_result["stores"] == 14
    assert_hybrid_holds(split_result["table"], kind)


@pytest.mark.model
def test_hybrid_beats_both_channels_overall(result):
    overall = {mode: result["table"][mode]["all"] for mode in ("hybrid", "lexical", "dense")}
    best = max(overall["lexical"]["recall@10"], overall["dense"]["recall@10"])
    assert overall["hybrid"]["recall@10"] >= best + 0.02, overall
    for metric in ("recall@1", "mrr"):
        assert overall["hybrid"][metric] > max(overall["lexical"][metric],
                                                overall["dense"][metric]), overall


@pytest.mark.model
def test_default_threshold_hides_almost_no_relevant_hit(result):
    report = result["threshold"]
    assert report["relevant_in_top10"] > 700
    assert report["hidden"] <= 0.01 * report["relevant_in_top10"], report
    assert report["hidden_at_rank1"] == 0, report
