"""Hostile input, generated: whatever a caller sends, the answer is a result or one of our
own errors with a message, and a refused call leaves the store as it was.

Property-based (hypothesis), bounded in examples and time; the hash embedder stands in
for the model, which is irrelevant here.
"""

import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbmemory.embed import HashEmbedder
from nbmemory.errors import NbMemoryError
from nbmemory.memory import Memory

# Values of every JSON-ish shape, plus the awkward ones: lone surrogates, huge and
# negative numbers, bytes, floats that are not numbers.
weird = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=40)
    | st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), max_size=3)
    | st.binary(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                               max_size=3),
    max_leaves=6)

CALLS = {
    "remember": lambda m, a, b: m.remember(a, tags=b),
    "remember_kind": lambda m, a, b: m.remember("a finding", kind=a, priority=b),
    "remember_about": lambda m, a, b: m.remember("a finding", about=a),
    "remember_supersedes": lambda m, a, b: m.remember("a finding", supersedes=a),
    "remember_many": lambda m, a, b: m.remember_many(a),
    "recall": lambda m, a, b: m.recall(a, k=b),
    "recall_filters": lambda m, a, b: m.recall("finding", tags=a, kind=b),
    "forget": lambda m, a, b: m.forget(a),
    "get": lambda m, a, b: m.get(a),
    "edit": lambda m, a, b: m.edit(1, text=a, tags=b),
    "notes": lambda m, a, b: m.notes(offset=a, limit=b),
    "snapshot": lambda m, a, b: m.snapshot(a, message=b),
    "snapshot_diff": lambda m, a, b: m.snapshot_diff(a, b),
    "history": lambda m, a, b: m.history(a),
    "similar": lambda m, a, b: m.similar(a, k=b),
}


@pytest.fixture(scope="module", params=["local", "service"])
def fuzzed(request, tmp_path_factory):
    """The engine in this process, and the same through the owner process (where every
    argument must also cross the socket)."""
    store = tmp_path_factory.mktemp("fuzz") / "store"
    if request.param == "local":
        mem = Memory.open(store, embedder=HashEmbedder())
    else:
        mem = Memory.open(store, model="hash:64", mode="service")
    with mem:
        mem.remember("orders.amount is in cents before 2021", tags="orders")
        yield mem


def state(mem):
    status = mem.status()
    return status["journal_position"], status["notes"]


@pytest.mark.parametrize("name", sorted(CALLS))
def test_any_argument_gets_a_result_or_our_own_error(fuzzed, name):
    call = CALLS[name]

    @settings(max_examples=60, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(weird, weird)
    def check(a, b):
        before = state(fuzzed)
        try:
            call(fuzzed, a, b)
        except NbMemoryError as exc:
            assert str(exc).strip(), "an error must say what is wrong"
            assert "Traceback" not in str(exc)
            assert state(fuzzed) == before, "a refused call must change nothing"

    check()
    # The store still answers (successful calls may have changed it).
    assert fuzzed.status()["notes"] >= 0 and isinstance(len(fuzzed.recall("a finding")), int)


@settings(max_examples=10, deadline=None, database=None)
@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",),
                                                blacklist_characters="\x00"), max_size=12),
                max_size=4))
def test_the_cli_answers_any_arguments_with_an_exit_code_not_a_traceback(tmp_path_factory, args):
    store = tmp_path_factory.mktemp("cli") / "store"
    for command in (["recall"], ["forget"], ["show"], ["list", "-n"], ["snapshot"]):
        result = subprocess.run(
            [sys.executable, "-m", "nbmemory.cli", "--store", str(store), *command, *args],
            capture_output=True, text=True, timeout=60,
            env={**os.environ, "NBMEMORY_MODEL": "hash:64", "NBMEMORY_IDLE_TIMEOUT": "5"})
        assert result.returncode in (0, 1, 2, 3), result.stderr
        assert "Traceback" not in result.stderr, result.stderr
