"""Questions and hypotheses: open, confirmed, refuted (and still recallable as previously believed)."""

import pytest
from IPython.core.error import UsageError

from nbmemory.errors import Conflict, InvalidInput

from test_magics import ip, run  # noqa: F401  (the shell fixture)


def test_hypothesis_lifecycle(memory):
    q = memory.remember("are the null amounts caused by the left join on customers?", kind="question")
    other = memory.remember("does the watcher debounce events?", kind="question")
    assert [n.id for n in memory.open_questions()] == [other.id, q.id]

    refuted = memory.refute(q.id, "nulls exist in the raw export before any join")
    assert (refuted.status, refuted.resolution) == ("refuted", "refuted")
    assert refuted.resolution_reason == "nulls exist in the raw export before any join"
    hits = memory.recall("null amounts left join customers")
    assert q.id not in [h.note.id for h in hits]
    assert [h.note.id for h in hits.previously] == [q.id]
    assert [n.id for n in memory.open_questions()] == [other.id]
    # Someone writes the refuted text again as a finding: the refutation is still shown.
    same = memory.remember("are the null amounts caused by the left join on customers?")
    hits = memory.recall("null amounts left join customers")
    assert same.id in [h.note.id for h in hits] and [h.note.id for h in hits.previously] == [q.id]
    memory.forget(same.id)

    memory.reopen(q.id)
    assert memory.get(q.id).status == "active" and memory.get(q.id).resolution is None
    confirmed = memory.confirm(other.id, "debounce of 50 ms in watcher.py")
    assert (confirmed.status, confirmed.resolution) == ("active", "confirmed")
    assert [n.id for n in memory.open_questions()] == [q.id]
    assert [e.type for e in memory.history(q.id)] == ["created", "refuted", "reopened"]


def test_resolution_errors(memory):
    q = memory.remember("is the cache shared?", kind="question")
    with pytest.raises(InvalidInput, match="Say why it is refuted"):
        memory.refute(q.id, "  ")
    memory.confirm(q.id)
    with pytest.raises(Conflict, match="already confirmed"):
        memory.confirm(q.id)
    memory.forget(q.id)
    with pytest.raises(Conflict, match="Cannot refute note #1: it is forgotten"):
        memory.refute(q.id, "because")
    fresh = memory.remember("a finding")
    with pytest.raises(Conflict, match="nothing to reopen"):
        memory.reopen(fresh.id)


def test_resolution_is_part_of_the_past(memory):
    q = memory.remember("is the cache shared between workers?", kind="question")
    memory.snapshot("open")
    memory.refute(q.id, "each worker has its own")
    diff = memory.snapshot_diff("open")
    assert [(c.change, c.note.id) for c in diff.changes] == [("refuted", q.id)]
    assert memory.recall("cache shared workers", as_of="open")[0].note.resolution is None


def test_question_magics(ip):  # noqa: F811
    run(ip, "remember -k question is the amount column in cents everywhere")
    run(ip, "remember -k question does the watcher debounce")
    _, out = run(ip, "recall --open")
    assert "Open questions" in out.stdout and "#1" in out.stdout and "#2" in out.stdout
    _, out = run(ip, "memory refute 1 euros after 2021")
    assert "Refuted #1; recall shows it only as previously believed" in out.stdout
    hits, _ = run(ip, "recall amount column cents")
    assert "Previously believed (#1, refuted: euros after 2021)" in hits._repr_html_()
    _, out = run(ip, "memory confirm 2 yes, 50 ms")
    assert "Confirmed #2." in out.stdout
    hits, _ = run(ip, "recall watcher debounce")
    from IPython.lib.pretty import pretty

    assert "[CONFIRMED: yes, 50 ms]" in pretty(hits)
    _, out = run(ip, "recall --open")
    assert "Open questions: none." in out.stdout


def test_open_questions_take_the_listing_filters(memory):
    wal = memory.remember("does the WAL replay after kill -9?", kind="question", tags=["wal"],
                          priority="high")
    memory.remember("is the cache shared?", kind="question", tags=["cache"])
    memory.remember("the WAL is replayed on open", tags=["wal"])  # a finding, not a question
    assert [n.id for n in memory.open_questions(tags="wal")] == [wal.id]
    assert [n.id for n in memory.open_questions(priority="high")] == [wal.id]
    assert memory.open_questions(tags="nosuchtag") == []
    assert len(memory.open_questions(stale=False)) == 2 and memory.open_questions(stale=True) == []


def test_recall_open_with_filters_in_a_notebook(ip):  # noqa: F811
    run(ip, "remember -k question -t wal -p high does the WAL replay after a crash")
    run(ip, "remember -k question -t cache is the cache shared")
    _, out = run(ip, "recall --open -t wal")
    assert "#1" in out.stdout and "#2" not in out.stdout
    _, out = run(ip, "recall --open -p low")
    assert "Open questions: none." in out.stdout
    with pytest.raises(Exception, match=r"^%recall --open with no query lists the open "
                                        r"questions; --as-of applies only to a query"):
        run(ip, "recall --open --as-of base")


def test_recall_of_open_questions_looks_past_the_answered_ones(memory):
    """Five answered questions ranked above the open one: --open took the top k, then
    dropped the answered, and said "No notes match"."""
    for i in range(5):
        q = memory.remember(f"are orders amount values in cents, batch {i}?", kind="question")
        memory.confirm(q.id, "yes")
    still = memory.remember("are orders amount values of refunds in cents?", kind="question")
    hits = memory.recall("orders amount cents", k=3, open_only=True)
    assert [h.note.id for h in hits] == [still.id]
    with pytest.raises(InvalidInput, match="^open_only recalls the open questions: leave "
                                           "kind out$"):
        memory.recall("orders amount cents", open_only=True, kind="finding")


def test_the_kernels_notes_by_one_author_look_past_the_others(memory):
    """%recall --mine (no query) took the k best notes about the kernel's names, then kept
    the caller's: none, so "No notes match"."""
    for i in range(5):
        memory.remember(f"orders_df holds one row per order, batch {i}", author="ada")
    mine = memory.remember("orders_df drops the refunds", author="bo")
    hits = memory.recall_terms(["orders_df"], k=2, author="bo")
    assert [h.note.id for h in hits] == [mine.id]
    assert [h.note.id for h in memory.recall_terms(["orders_df"], k=2, stale=True)] == []
    assert len(memory.recall_terms(["orders_df"], k=2, stale=False)) == 2


def test_recall_open_in_a_notebook_looks_past_the_answered_questions(ip):  # noqa: F811
    for i in range(5):
        run(ip, f"remember -k question orders amount cents? batch {i}")
        run(ip, f"memory confirm {i + 1} yes")
    run(ip, "remember -k question are orders amount values of refunds in cents")
    hits, _ = run(ip, "recall --open -k 2 orders amount cents")
    assert [h.note.id for h in hits] == [6]


def test_a_notebooks_list_of_open_questions_says_when_it_is_cut(ip):  # noqa: F811
    for i in range(3):
        run(ip, f"remember -k question is batch {i} late?")
    _, out = run(ip, "recall --open -k 2")
    assert out.stdout.count("\n#") == 2
    assert "(more open questions than 2: %recall --open -k 8 shows more)" in out.stdout
    with pytest.raises(UsageError, match="^%recall --open with no query lists the open "
                                         "questions; --provenance applies only to a query"):
        run(ip, "recall --open --provenance")
