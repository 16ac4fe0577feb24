"""Findings that check themselves: checks written, refused, re-run, failed as stale
reasons, trusted; in the API, in an InteractiveShell and in a real kernel (nbclient)."""

import re
import sys
import time

import nbformat
import pytest
from IPython.core.error import StdinNotImplementedError, UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from nbmemory import checks
from nbmemory.config import current_user
from nbmemory.embed import HashEmbedder
from nbmemory.errors import InvalidInput
from nbmemory.memory import Memory
from nbmemory.models import Provenance
from nbmemory.service import stop

pd = pytest.importorskip("pandas")
CHECK = "orders.amount.isna().mean() < 0.05"


def orders(*amounts):
    return pd.DataFrame({"amount": list(amounts)})


# -- evaluating -------------------------------------------------------------------------

def test_a_comparison_reports_its_left_side():
    ns = {"orders": orders(1.0, None, 3.0, 4.0)}
    assert checks.evaluate(CHECK, ns) == checks.Outcome("failed", value="0.25")
    # A chain reports its first side that is not a constant, not the 0 it starts with.
    assert checks.evaluate("0 < len(orders) < 10", ns) == checks.Outcome("passed", value="4")
    assert checks.evaluate("0 <= orders.amount.isna().mean() < 0.2", ns) == checks.Outcome(
        "failed", value="0.25")
    assert checks.evaluate("1 / 3 < 0.5", {}) == checks.Outcome("passed", value="0.333333")
    # A table or an array is said by its shape, not by the start of its rows, cut.
    assert checks.evaluate("orders is not None", ns) == checks.Outcome("passed",
                                                                       value="DataFrame 4×1")
    np = pytest.importorskip("numpy")
    assert checks.evaluate("a is None", {"a": np.zeros((2, 3))}).value == "ndarray 2×3"


def test_an_exception_a_loop_and_a_missing_name_are_outcomes_not_tracebacks():
    assert checks.evaluate("1 / 0 > 2", {}) == checks.Outcome(
        "error", error="ZeroDivisionError: division by zero")
    assert checks.evaluate("orders.amount > 0", {"orders": orders(1.0)}).error.startswith(
        "ValueError: The truth value of a Series is ambiguous")
    assert checks.evaluate("all(True for _ in iter(int, 1))", {}, budget=0.2) == checks.Outcome(
        "error", error="ran past its budget of 0.2 s")
    assert checks.evaluate("orders.amount.sum() > 0", {}) == checks.Outcome(
        "skipped", why="orders not defined here")


def test_a_check_whose_code_catches_every_exception_still_stops_at_its_budget():
    """A retry helper's `except Exception: continue` swallowed the budget's stop, so the
    check held the kernel until it returned (or for ever)."""
    def retrying():
        while True:
            try:
                time.sleep(0.01)
            except Exception:  # noqa: BLE001 - what such helpers do
                continue
    assert checks.evaluate("retrying() == 3", {"retrying": retrying}, budget=0.2) == \
        checks.Outcome("error", error="ran past its budget of 0.2 s")

    stops_though_it_catches_everything()


def retrying_bare():  # a bare except swallows the stop itself, and Ctrl-C: the kernel hung
    while True:
        try:
            time.sleep(0.01)
        except:  # noqa: E722 - what such helpers do
            continue


def stops_though_it_catches_everything():
    assert checks.evaluate("retrying_bare() == 3", {"retrying_bare": retrying_bare},
                           budget=0.2) == checks.Outcome("error", error="ran past its budget "
                                                                        "of 0.2 s")
    assert sys.gettrace() is None and checks.evaluate("1 + 1 == 2", {}).status == "passed"


def test_a_check_gives_back_an_alarm_that_was_set_before_it():
    """A check borrows SIGALRM; an alarm already set (pytest-timeout's, a user's own) is
    set again afterwards for what is left of it, and its handler stays."""
    import signal

    def handler(signum, frame):
        raise AssertionError("not yet")

    previous = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, 300)
    try:
        assert checks.evaluate("1 < 2", {}) == checks.Outcome("passed", value="1")
        assert checks.evaluate("all(True for _ in iter(int, 1))", {}, budget=0.1).status == "error"
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 290 < left <= 300 and signal.getsignal(signal.SIGALRM) is handler
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_a_check_off_the_main_thread_is_abandoned_at_its_budget():
    import threading

    import time

    box = {}  # a check that ends by itself: an abandoned one would spin on for the session
    worker = threading.Thread(target=lambda: box.update(o=checks.evaluate(
        "time.sleep(3) or True", {"time": time}, budget=0.2)))
    worker.start()
    worker.join(10)
    assert box["o"].error.startswith("ran past its budget of 0.2 s")


def test_a_runaway_check_is_stopped_where_there_is_no_alarm(monkeypatch):
    """Windows has no setitimer and other threads no SIGALRM: a check in plain Python that
    never ends is stopped at its budget (it went on burning a core for the session)."""
    import threading
    import types

    monkeypatch.setattr(checks, "signal", types.SimpleNamespace())  # as on Windows
    before = set(threading.enumerate())
    assert checks.evaluate("all(True for _ in iter(int, 1))", {}, budget=0.2) == checks.Outcome(
        "error", error="ran past its budget of 0.2 s")
    assert not [t for t in set(threading.enumerate()) - before if t.name == "nbmemory-check"]


def test_a_check_that_catches_every_exception_stops_where_there_is_no_alarm(monkeypatch):
    """Off the main thread (and on Windows) the stop is an exception sent to the check's
    thread, which a bare ``except:`` in a retry loop swallowed: the check was left retrying
    for the session. It now stops again at its next line, in the handler."""
    import threading
    import types

    monkeypatch.setattr(checks, "signal", types.SimpleNamespace())  # as on Windows
    before = set(threading.enumerate())
    stops_though_it_catches_everything()
    assert not [t for t in set(threading.enumerate()) - before if t.name == "nbmemory-check"]


def test_names_read_leaves_out_builtins_and_comprehension_targets():
    assert checks.names_read("all(v > 0 for v in df.a) and len(limits) > 1") == ["df", "limits"]
    assert checks.names_read("df.a.apply(lambda v, *w, k=1: v >= k).all()") == ["df"]
    # A builtin's name the namespace defines is the user's variable.
    assert checks.names_read("len(input) == 3") == []
    assert checks.names_read("len(input) == 3", {"input": [1, 2, 3]}) == ["input"]
    assert checks.evaluate("len(input) == 3", {}, reads=["input"]) == checks.Outcome(
        "skipped", why="input not defined here")
    with pytest.raises(InvalidInput, match="is not a Python expression"):
        checks.names_read("x = 1")


# -- the API ----------------------------------------------------------------------------

def test_a_check_must_hold_to_be_remembered(memory):
    ns = {"orders": orders(1.0, 2.0)}
    with pytest.raises(InvalidInput, match=r"The check 'orders.amount.mean\(\) > 10' is False "
                                           r"here \(value 1.5\); the note was not stored"):
        memory.remember("mean over 10", check="orders.amount.mean() > 10", namespace=ns)
    with pytest.raises(InvalidInput, match="pass namespace=globals()"):
        memory.remember("x", check=CHECK)
    with pytest.raises(InvalidInput, match=r"^The check 'missing > 1' cannot run \(missing not "
                                           r"defined here\); the note was not stored"):
        memory.remember("x", check="missing > 1", namespace=ns)
    with pytest.raises(InvalidInput, match=r"^The check 'orders.nope > 1' raised "
                                           r"AttributeError: .*; the note was not stored"):
        memory.remember("x", check="orders.nope > 1", namespace=ns)
    endless = "all(True for _ in iter(int, 1))"
    with pytest.raises(InvalidInput, match=re.escape(
            f"The check {endless!r} ran past its budget of 0.2 s; the note was not stored")):
        memory.remember("x", check=endless, namespace=ns, budget=0.2)
    assert memory.notes().total == 0
    note = memory.remember("orders.amount has under 5% nulls", check=CHECK, namespace=ns)
    [item] = memory.checks()
    assert (item["note"].id, item["expression"], item["names"], item["value"],
            item["trusted"]) == (note.id, CHECK, ["orders"], "0.0", True)


def test_a_failing_check_is_a_stale_reason_until_it_holds_again(memory):
    ns = {"orders": orders(1.0, 2.0)}
    note = memory.remember("orders.amount has under 5% nulls", check=CHECK, namespace=ns)
    ns["orders"] = orders(1.0, None)
    [(item, outcome)] = memory.check(ns)
    assert outcome.status == "failed"
    [reason] = memory.get(note.id).stale
    assert str(reason) == f"check_failed {CHECK} (is now False, value 0.5)"
    assert [n.id for n in memory.notes(stale=True).notes] == [note.id]
    assert [e.type for e in memory.history(note.id)][-1] == "check_failed"
    ns["orders"] = orders(1.0, 2.0)
    memory.check(ns, [note.id])
    assert memory.get(note.id).stale == ()
    assert memory.notes(stale=True).total == 0


def test_a_check_stopped_late_says_so():
    """SIGALRM interrupts Python code, not a call into C: say when the budget was not kept."""
    outcome = checks.evaluate("sum(range(5 * 10**7)) > 0", {}, budget=0.05)
    assert outcome.status == "error"
    assert re.fullmatch(r"ran past its budget of 0\.05 s \(stopped after \d+\.\d s: a call into "
                        r"C, such as sum\(\) or a pandas method, is only stopped once it "
                        r"returns\)", outcome.error), outcome.error


def test_an_error_is_a_stale_reason_and_a_skip_changes_nothing(memory):
    """A check that can no longer run (its column is gone) does not hold either; a kernel
    without its names says nothing either way."""
    ns = {"orders": orders(1.0)}
    note = memory.remember("x", check=CHECK, namespace=ns)
    memory.check({})
    assert memory.get(note.id).stale == ()
    memory.check({"orders": "not a frame"})
    [reason] = memory.get(note.id).stale
    assert str(reason) == (f"check_error {CHECK} (raised AttributeError: 'str' object has no "
                           "attribute 'amount')")
    memory.check({})
    history = memory.history(note.id)
    assert [e.type for e in history][-3:] == ["check_skipped", "check_error", "check_skipped"]
    assert history[-1].data["why"] == "orders not defined here"
    assert memory.get(note.id).stale == (reason,)
    memory.check(ns)
    assert memory.get(note.id).stale == ()
    # Running out of time depends on the machine: it says nothing about the finding.
    memory.record_checks([{"note_id": note.id, "expression": CHECK, "status": "error",
                           "error": "ran past its budget of 1 s"}])
    assert memory.get(note.id).stale == ()


def test_an_imported_check_does_not_run_until_trusted(memory, tmp_path):
    ns = {"orders": orders(1.0)}
    memory.remember("orders.amount has under 5% nulls", check=CHECK, namespace=ns)
    memory.export_jsonl(tmp_path / "theirs.jsonl")
    with Memory.open(tmp_path / "mine", embedder=HashEmbedder(), settings=None) as mine:
        mine.import_jsonl(tmp_path / "theirs.jsonl")
        [item] = mine.checks()
        assert item["trusted"] is False  # even though the export says the same author
        ran = []
        ns = {"orders": type("Spy", (), {"__getattr__": lambda s, n: ran.append(n)})()}
        [(_, outcome)] = mine.check(ns)
        assert (outcome.status, ran) == ("skipped", [])
        # The same author (this user): it is the import that is not trusted, and said so.
        assert outcome.why == "not trusted: it came in an import (a file carries no trust)"
        mine.trust(item["note"].id)
        assert [e.type for e in mine.history(item["note"].id)][-2:] == ["check_skipped",
                                                                        "trusted"]
        [(_, outcome)] = mine.check({"orders": orders(None)})
        assert outcome.status == "failed"
        with pytest.raises(InvalidInput, match="has no check to trust"):
            mine.trust(mine.remember("no check here").id)


def test_a_trust_covers_the_check_as_read_and_one_from_before_still_counts(memory, tmp_path):
    """Trusts now keep the checks they read (a team member may rewrite a check's row); a
    trust given before they did still counts in a store of one's own, so an upgrade asks
    nobody to trust their checks again."""
    from nbmemory.models import utcnow

    memory.remember("orders.amount has under 5% nulls", check=CHECK,
                    namespace={"orders": orders(1.0)})
    memory.export_jsonl(tmp_path / "theirs.jsonl")
    with Memory.open(tmp_path / "mine", embedder=HashEmbedder(), settings=None) as mine:
        mine.import_jsonl(tmp_path / "theirs.jsonl")
        [item] = mine.checks()
        engine = mine._backend.engine
        with engine.lock, engine.writing() as entry:  # as nbmemory wrote a trust before
            entry.append("trusted", item["note"].id, actor=current_user(), at=utcnow())
        assert [i["trusted"] for i in mine.checks()] == [True]
        mine.trust(item["note"].id)
        assert mine.history(item["note"].id)[-1].data == {"checks": [CHECK]}


def test_a_trust_names_the_checks_read_and_adds_to_those_trusted_before(memory, tmp_path):
    """Found by review: checks=[] trusted every check, a trust of one check undid an earlier
    trust of another, and a check changed since it was read was trusted."""
    from nbmemory.checks import check_anchor, evaluate
    from nbmemory.errors import Conflict

    ns = {"x": 1}
    second = check_anchor("x > 0", ns, evaluate("x > 0", ns))
    memory.remember("x is one", check="x == 1", namespace=ns, about=[second])
    memory.export_jsonl(tmp_path / "theirs.jsonl")
    with Memory.open(tmp_path / "mine", embedder=HashEmbedder(), settings=None) as mine:
        mine.import_jsonl(tmp_path / "theirs.jsonl")
        note_id = mine.checks()[0]["note"].id
        with pytest.raises(InvalidInput, match=r"^checks lists the check expressions read"):
            mine.trust(note_id, checks=[])
        mine.trust(note_id, checks=["x == 1"], request_id="r1")
        mine.trust(note_id, checks=["x > 0"])
        assert sorted((i["expression"], i["trusted"]) for i in mine.checks()) == [
            ("x == 1", True), ("x > 0", True)]
        with pytest.raises(Conflict, match=r"^Note #1 has no check 'x > 2' any more: it changed "
                                           r"since it was read\."):
            mine.trust(note_id, checks=["x > 2"])
        engine = mine._backend.engine
        with engine.lock:  # as a member's own SQL would, in a team store
            engine.store.con.execute("UPDATE anchors SET target = 'x > 2' WHERE target = 'x > 0'")
            engine.store.forget_cached([note_id])
        mine.trust(note_id, checks=["x == 1"], request_id="r1")  # sent again: as it was
        assert sorted((i["expression"], i["trusted"]) for i in mine.checks()) == [
            ("x == 1", True), ("x > 2", False)]


# -- the magics -------------------------------------------------------------------------

@pytest.fixture
def ip(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shell = InteractiveShell.instance(history_length=0)
    shell.run_line_magic("load_ext", "nbmemory")
    shell.run_line_magic("config", f"NbMemory.store = {str(tmp_path / 'store')!r}")
    shell.run_line_magic("config", "NbMemory.model = 'hash:64'")
    shell.run_line_magic("config", "NbMemory.mode = 'local'")
    yield shell
    shell.run_line_magic("unload_ext", "nbmemory")
    InteractiveShell.clear_instance()


def cell(ip, source):
    with capture_output() as captured:
        result = ip.run_cell(source, store_history=True)
    if result.error_in_exec is not None:
        raise result.error_in_exec
    return captured.stdout + "".join(o.data.get("text/plain", "") for o in captured.outputs)


def test_memory_trust_prints_every_check_it_trusts(ip):
    """A note may carry two checks (the API's about=); %memory trust named one of them."""
    from nbmemory.checks import check_anchor, evaluate

    cell(ip, "x = 1\n%remember the store is made by the first note")
    mem = ip.magics_manager.registry["NbMemory"].mem
    second = check_anchor("x > 0", {"x": 1}, evaluate("x > 0", {"x": 1}))
    note = mem.remember("x is one", check="x == 1", namespace={"x": 1}, about=[second])
    assert cell(ip, f"%memory trust {note.id}") == (
        f"Trusted the 2 checks of #{note.id} (%memory check {note.id} runs them):\n"
        "  x > 0\n  x == 1\n")  # in the note's order
    # Again: said so, and no other trust journalled (each one was, found by a walkthrough).
    events = len(mem.history(note.id))
    assert cell(ip, f"%memory trust {note.id}") == (
        f"Already trusted: the checks of #{note.id} as they read now (%memory check "
        f"{note.id} runs them).\n")
    assert len(mem.history(note.id)) == events


def test_an_outcome_kept_for_a_note_forgotten_since_is_dropped_not_a_pause(ip):
    """Outcomes the line under a cell could not record (the store away) are recorded at a
    later cell; one for a note forgotten meanwhile (by another member) is dropped: it must
    not pause the line for the rest of the session."""
    cell(ip, "x = 1\n%remember --check 'x > 0' x is positive")
    magics = ip.magics_manager.registry["NbMemory"]
    magics.mem.forget(1)
    magics._unrecorded = [{"note_id": 1, "expression": "x > 0", "auto": True,
                           "status": "passed", "value": "1"}]
    assert cell(ip, "x = 2") == ""
    assert magics._unrecorded == []
    assert "Ambient recall: on (NbMemory.ambient)" in cell(ip, "%memory ambient status")


def test_remember_check_then_a_cell_that_breaks_it(ip):
    cell(ip, "import pandas as pd\norders = pd.DataFrame({'amount': [1.0, 2.0, 3.0, 4.0]})")
    shown = cell(ip, f"%remember --check '{CHECK}' orders.amount has under 5% nulls")
    assert f"About: check {CHECK} (held, value 0.0)" in shown
    with pytest.raises(UsageError, match=r"is False here \(value 2.5\); the note was not stored"):
        cell(ip, "%remember --check 'orders.amount.mean() > 10' the mean is over 10")
    # ambient: the cell that changes what the check reads says so at once
    assert cell(ip, "orders.loc[0, 'amount'] = None") == (
        f"nbmemory: #1 FAILS: {CHECK} is now False (value 0.25)\n")
    assert "check_failed" in cell(ip, "%memory stale")
    # Said once: not again under each cell that changes orders while it fails the same way.
    assert cell(ip, "orders['discount'] = 0.2") == ""
    assert cell(ip, "orders.loc[1, 'amount'] = None") == (
        f"nbmemory: #1 FAILS: {CHECK} is now False (value 0.5)\n")  # worse: said again
    assert cell(ip, "orders = orders.fillna(0)") == f"nbmemory: #1 holds: {CHECK} (value 0.0)\n"
    assert cell(ip, "len(orders)") == "Out[9]: 4\n"  # reads orders, changes nothing: quiet
    assert cell(ip, "%memory check") == f"#1 holds: {CHECK} (value 0.0)\n"


def test_a_check_that_failed_runs_again_in_a_new_kernel_given_its_old_values(ip):
    """After a restart the data was rebuilt as it was when the note was written: that was
    taken for 'touched, not changed', so the check stayed failed until %memory check."""
    cell(ip, "import pandas as pd\norders = pd.DataFrame({'amount': [1.0, 2.0, 3.0, 4.0]})")
    cell(ip, f"%remember --check '{CHECK}' orders.amount has under 5% nulls")
    assert "FAILS" in cell(ip, "orders.loc[0, 'amount'] = None")
    ip.magics_manager.registry["NbMemory"]._check_seen.clear()  # as a new kernel's magics
    assert cell(ip, "orders = pd.DataFrame({'amount': [1.0, 2.0, 3.0, 4.0]})") == (
        f"nbmemory: #1 holds: {CHECK} (value 0.0)\n")
    assert cell(ip, "%memory stale") == "No stale notes.\n"


def test_a_check_on_a_variable_named_as_a_builtin_follows_the_variable(ip):
    cell(ip, "import pandas as pd\ninput = pd.DataFrame({'v': [1, 2, 3]})")
    cell(ip, "%remember --check 'len(input) == 3' the input has three rows")
    assert cell(ip, "input = pd.DataFrame({'v': [1, 2, 3, 4]})") == (
        "nbmemory: #1 FAILS: len(input) == 3 is now False (value 4)\n")
    cell(ip, "del input")
    assert cell(ip, "%memory check") == (
        "#1 not checked: len(input) == 3 (input not defined here)\n")
    cell(ip, "df = pd.DataFrame({'v': [1, 2]})")
    shown = cell(ip, "%remember --check 'df.v.apply(lambda x: x > 0).all()' all positive")
    assert "About: check df.v.apply(lambda x: x > 0).all() (held" in shown


def test_a_check_cut_at_its_first_space_or_that_gives_no_true_or_false_is_refused(ip):
    cell(ip, "import pandas as pd\ndf = pd.DataFrame({'x': range(200)})")
    with pytest.raises(UsageError, match=re.escape(
            "The check stops at its first space unless quoted: it would be 'len(df)' and the "
            "note '> 100 df has more than 100 rows'. Quote the check: %remember --check "
            "\"len(df) > ...\" the finding")):
        cell(ip, "%remember --check len(df) > 100 df has more than 100 rows")
    with pytest.raises(UsageError, match=re.escape(
            "The check 'df.x.mean()' gives a float64 (value 99.5), not True or False, so it "
            "would hardly ever fail; write what must hold")):
        cell(ip, "%remember --check 'df.x.mean()' the mean is about 100")
    assert ip.magics_manager.registry["NbMemory"].mem.notes().total == 0
    assert "Remembered #1" in cell(ip, "%remember --check df.x.is_unique x has no repeats")
    assert "Remembered #2" in cell(ip, "%remember --check '(df.x >= 0).all()' x is never "
                                       "negative")


def test_a_check_keeps_the_quotes_inside_it(ip):
    cell(ip, "label = 'y'")
    shown = cell(ip, "%remember --check \"label != 'x'\" the label is never x")
    assert "About: check label != 'x' (held, value 'y')" in shown
    shown = cell(ip, "%remember --check 'label in [\"y\", \"z\"]' the label is y or z")
    assert "About: check label in [\"y\", \"z\"] (held, value 'y')" in shown


def test_a_check_runs_by_itself_only_in_the_notebook_it_was_written_in(ip):
    """Another notebook's `orders` is not the one a check is about: it neither fails the
    note for everyone nor runs there unless asked by id."""
    mem = ip.magics_manager.registry["NbMemory"]._writable()
    ns = {"orders": orders(1.0, 2.0)}
    mem.remember("orders.amount has under 5% nulls", check=CHECK, namespace=ns,
                 provenance=Provenance(notebook="/elsewhere/explore.ipynb"))
    assert cell(ip, "import pandas as pd\norders = pd.DataFrame({'amount': [1.0, None]})") == ""
    assert mem.get(1).stale == ()
    assert cell(ip, "%memory check") == (
        "No check was written in this notebook; 1 note in others (#1) has one. "
        "To run them here: %memory check 1\n")
    cell(ip, "%remember --check 'len(orders) > 1' orders has rows")
    assert cell(ip, "%memory check") == (
        "#2 holds: len(orders) > 1 (value 2)\n"
        "Not run: the checks of #1, written in other notebooks (%memory check 1 runs them "
        "here).\n")
    assert cell(ip, "%memory check 1") == f"#1 FAILS: {CHECK} is now False (value 0.5)\n"


def test_a_check_that_can_no_longer_run_is_flagged_once_someone_runs_it(ip):
    """Run All passes through states where a column is not made yet: the ambient re-check's
    error is journalled, quietly; %memory check's is a stale reason until the check holds."""
    cell(ip, "import pandas as pd\norders = pd.DataFrame({'amount': [1.0, 2.0]})")
    cell(ip, f"%remember --check '{CHECK}' orders.amount has under 5% nulls")
    assert cell(ip, "orders = orders.rename(columns={'amount': 'cents'})") == ""
    assert "No stale notes" in cell(ip, "%memory stale")
    assert cell(ip, "%memory check") == (
        f"#1 could not be checked: {CHECK} raised AttributeError: 'DataFrame' object has no "
        "attribute 'amount'\n")
    assert "check_error" in cell(ip, "%memory stale")
    assert cell(ip, "orders = orders.rename(columns={'cents': 'amount'})") == (
        f"nbmemory: #1 holds: {CHECK} (value 0.0)\n")


def test_memory_check_says_why_it_did_not_run(ip):
    cell(ip, "import pandas as pd\norders = pd.DataFrame({'amount': [1.0]})")
    cell(ip, f"%remember --check '{CHECK}' under 5% nulls")
    cell(ip, "del orders")
    assert cell(ip, "%memory check 1") == f"#1 not checked: {CHECK} (orders not defined here)\n"
    cell(ip, "%remember a note without a check")
    assert cell(ip, "%memory check 2") == ("None of #2 has a check (add one with "
                                           "%remember --check EXPR ...).\n")
    cell(ip, "orders = pd.DataFrame({'amount': [1.0]})")
    cell(ip, f"%remember --supersedes 1 --check '{CHECK}' under 5% nulls, checked again")
    cell(ip, "%forget 2")
    assert cell(ip, "%memory check 1 2") == (
        "#1 was replaced by #3: run its check with %memory check 3.\n"
        "#2 is revoked: only an active note's check runs.\n")
    with pytest.raises(UsageError, match="No note #7"):
        cell(ip, "%memory check 7")
    with pytest.raises(UsageError, match="Give the id of the note whose check you read"):
        cell(ip, "%memory trust")


def test_from_output_keeps_the_result_and_rerun_compares(ip, monkeypatch):
    cell(ip, "import pandas as pd\norders = pd.DataFrame({'amount': [1.0, 2.0]})")
    cell(ip, "orders.amount.sum()")
    assert "About: evidence Out[2]" in cell(ip, "%remember --from-output the total is 3")
    [evidence] = [a for a in ip.magics_manager.registry["NbMemory"].mem.get(1).anchors
                  if a.kind == "evidence"]
    assert (evidence.fingerprint["output"], evidence.fingerprint["source"]) == (
        "np.float64(3.0)", "orders.amount.sum()")
    cell(ip, "orders.loc[0, 'amount'] = 10")
    monkeypatch.setattr("builtins.input", lambda prompt: "n")
    assert cell(ip, "%memory rerun 1").endswith(
        "Not run. (%memory rerun 1 --yes runs it without asking.)\n")

    def no_stdin(prompt):  # ipykernel under nbclient or papermill
        raise StdinNotImplementedError("raw_input was called")

    monkeypatch.setattr("builtins.input", no_stdin)
    assert cell(ip, "%memory rerun 1").endswith(
        "Not run. This front end cannot ask. (%memory rerun 1 --yes runs it without asking.)\n")
    shown = cell(ip, "%memory rerun 1 --yes")
    assert "np.float64(3.0)" in shown and "* np.float64(12.0)" in shown
    assert shown.rstrip().endswith("1 line(s) differ.")


def test_rerun_never_re_runs_the_remember_itself(ip):
    cell(ip, "%%remember\nthe export runs at 02:00")
    with pytest.raises(UsageError, match="its cell held only the %remember"):
        cell(ip, "%memory rerun 1 --yes")
    assert ip.magics_manager.registry["NbMemory"].mem.notes().total == 1


def test_from_output_with_no_output_yet_is_refused(ip):
    with pytest.raises(UsageError, match="no cell has shown a result yet"):
        cell(ip, "%remember --from-output the total is 3")


def test_output_of_keeps_the_result_of_the_cell_named(ip):
    """What the panel's "Remember output" runs for the selected cell."""
    cell(ip, "6 * 7")
    cell(ip, "'later'")
    with pytest.raises(UsageError, match=r"Cell \[9\] has no result in this kernel"):
        cell(ip, "%remember --output-of 9 the answer is 42")
    assert "About: evidence Out[1]" in cell(ip, "%remember --output-of 1 the answer is 42")


# -- a real kernel ----------------------------------------------------------------------

KERNEL_CELLS = [
    "%load_ext nbmemory\n%config NbMemory.store = {store!r}\n%config NbMemory.model = 'hash:64'"
    "\n%config NbMemory.check_budget = 0.5",
    "import pandas as pd\norders = pd.DataFrame({{'amount': [1.0, 2.0, 3.0, 4.0]}})\n"
    "def slow():\n    return True",
    f"%remember --check '{CHECK}' orders.amount has under 5% nulls",
    "%remember --check 'slow()' slow() is quick",
    "%remember --check 'orders.amount.sum() > 0' amounts are positive",
    "orders.loc[0, 'amount'] = None",
    "%memory check 1",
    "orders = orders.fillna(0)",
    "def slow():\n    while True:\n        pass",
    "%memory check 2\nprint('the kernel goes on')",
    "orders = 'now a string'",
    "%memory check 3",
    "del orders\n%memory check 1",
    "%memory import {export}\n%memory check 4",
    "%memory trust 4",
    "shares = pd.Series([0.5, 0.6])\n%memory check 4",
]


def outputs(nb, index, stream="stdout"):
    """What cell ``index`` showed: its ``stream`` text, results and errors."""
    return "".join((o.get("text", "") if o.get("name", stream) == stream else "")
                   + o.get("data", {}).get("text/plain", "")
                   + "\n".join(o.get("traceback", [])) for o in nb.cells[index].outputs)


@pytest.mark.timeout(300)
def test_checks_in_a_real_kernel(tmp_path):
    from nbclient import NotebookClient

    export = tmp_path / "colleague.jsonl"
    with Memory.open(tmp_path / "colleague", embedder=HashEmbedder(), settings=None) as theirs:
        theirs.remember("shares stay under one", check="shares.max() < 1",
                        namespace={"shares": pd.Series([0.1])})
        theirs.export_jsonl(export)
    store = tmp_path / ".nbmemory"
    cells = [nbformat.v4.new_code_cell(c.format(store=str(store), export=str(export)))
             for c in KERNEL_CELLS]
    path = tmp_path / "orders.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    try:
        assert "starting the memory service" in outputs(nb, 2, "stderr")  # no silent wait
        assert [outputs(nb, i).splitlines()[0] for i in (2, 3, 4)] == [
            "Remembered #1 (finding, medium)", "Remembered #2 (finding, medium)",
            "Remembered #3 (finding, medium)"]
        # holds, then fails when the data changes (said by the cell that changed it), then holds
        assert outputs(nb, 5) == f"nbmemory: #1 FAILS: {CHECK} is now False (value 0.25)\n"
        assert outputs(nb, 6) == f"#1 FAILS: {CHECK} is now False (value 0.25)\n"
        assert outputs(nb, 7) == f"nbmemory: #1 holds: {CHECK} (value 0.0)\n"
        # past its budget: stopped, reported, and the cell goes on
        assert outputs(nb, 9) == ("#2 could not be checked: slow() ran past its budget "
                                  "of 0.5 s\nthe kernel goes on\n")
        assert outputs(nb, 10) == ""  # the ambient re-check's errors are journalled quietly
        # raises: an outcome, not a traceback
        assert outputs(nb, 11).startswith("#3 could not be checked: orders.amount.sum() > 0 "
                                          "raised AttributeError: 'str' object has no attribute")
        # not defined here: skipped, said so
        assert outputs(nb, 12) == f"#1 not checked: {CHECK} (orders not defined here)\n"
        # imported: shown, not run until trusted
        imported = outputs(nb, 13)
        assert "#4 not checked: shares.max() < 1 (not trusted: " in imported
        assert "%memory trust 4" in imported
        assert outputs(nb, 14) == ("Trusted the check of #4: shares.max() < 1. "
                                   "%memory check 4 runs it.\n")
        assert outputs(nb, 15) == "#4 holds: shares.max() < 1 (value 0.6)\n"
    finally:
        stop(store)
    with Memory.open(store, embedder=HashEmbedder()) as mem:
        assert [e.type for e in mem.history(1) if e.type.startswith("check_")] == [
            "check_failed", "check_failed", "check_passed",
            "check_error",  # the ambient re-check's, when orders became a string
            "check_skipped"]
        assert mem.get(1).stale == ()  # that error is no stale reason, nor is the skip
        # %memory check 3 ran it and it raised: that one is
        assert [r.reason for r in mem.get(3).stale] == ["check_error"]
        assert [e.type for e in mem.history(4)][-3:] == ["check_skipped", "trusted",
                                                         "check_passed"]

