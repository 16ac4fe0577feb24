"""--about, --fresh/--stale, %memory stale/verify and provenance in a real InteractiveShell."""

import subprocess

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.lib.pretty import pretty
from IPython.utils.capture import capture_output

from nbmemory.embed import HashEmbedder
from nbmemory.memory import Memory

pd = pytest.importorskip("pandas")


def git(cwd, *args):
    return subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=Test", *args],
                          cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "repo"
    (root / "data").mkdir(parents=True)
    (root / "analysis").mkdir()
    (root / "data" / "orders.csv").write_text("id,amount\n1,1000\n2,2500\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "initial")
    return root


@pytest.fixture
def ip(ws, monkeypatch):
    monkeypatch.chdir(ws / "analysis")  # a notebook's kernel runs in the notebook's folder
    shell = InteractiveShell.instance(history_length=0)
    shell.run_line_magic("load_ext", "nbmemory")
    shell.run_line_magic("config", f"NbMemory.store = {str(ws / '.nbmemory')!r}")
    original = Memory.open

    def open_(path=None, **kwargs):  # the model is irrelevant here
        kwargs["embedder"] = HashEmbedder()
        return original(path, **kwargs)

    monkeypatch.setattr(Memory, "open", open_)
    yield shell
    shell.run_line_magic("unload_ext", "nbmemory")
    InteractiveShell.clear_instance()


def run(ip, line):
    name, _, rest = line.partition(" ")
    with capture_output() as captured:
        result = ip.run_line_magic(name, rest)
    shown = captured.stdout + "".join(o.data.get("text/plain", "") + "\n" for o in captured.outputs)
    return result, shown


def test_a_dataframe_whose_columns_change(ip):
    ip.user_ns["pd"] = pd
    ip.user_ns["df"] = pd.DataFrame({"id": [1, 2], "amount": [1000, 2500]})
    _, out = run(ip, "remember --about df df.amount is in cents")
    assert "About: df (DataFrame 2×2)" in out
    assert len(run(ip, "recall --fresh amount in cents")[0]) == 1

    ip.run_cell("df['discount'] = 0.5")
    hits, _ = run(ip, "recall --stale amount in cents")
    assert "[STALE: schema_changed df (added discount)]" in pretty(hits)
    assert len(run(ip, "recall --fresh amount in cents")[0]) == 0
    hits, _ = run(ip, "recall --stale")  # no query: the notes about what the kernel holds
    assert "[STALE: schema_changed df (added discount)]" in pretty(hits)
    _, out = run(ip, "memory stale")
    assert "1 stale note\n" in out and "[STALE: schema_changed df (added discount)]" in out

    ip.run_cell("df = df.drop(columns=['discount'])")
    assert run(ip, "recall amount in cents")[0][0].note.stale == ()

    ip.run_cell("df = df.iloc[:1]")
    assert "[STALE: rows_changed df (2 → 1 rows)]" in pretty(run(ip, "recall amount")[0])

    ip.run_cell("df = pd.DataFrame({'id': [1, 2], 'amount': [10.0, 25.0]})")
    _, out = run(ip, "memory verify 1")
    assert out.strip() == ("Verified #1: re-took 1 fingerprint; cleared schema_changed df "
                           "(changed amount int64→float64).")
    assert run(ip, "recall amount in cents")[0][0].note.stale == ()
    assert run(ip, "memory stale")[1] == "No stale notes.\n"



def test_memory_stale_pages_as_the_cli_does(ip):
    """%memory stale showed the first 100 stale notes and no way to the rest."""
    ip.user_ns["df"] = pd.DataFrame({"id": [1, 2]})
    for i in range(3):
        run(ip, f"remember --about df finding {i} about the frame")
    ip.run_cell("df['extra'] = 0")
    _, out = run(ip, "memory stale -n 2")
    assert out.startswith("3 stale notes\n#3 ") and out.rstrip().endswith(
        "(1 more: -n 3 lists them all)")
    _, out = run(ip, "memory stale -n 2 --offset 2")
    assert "#1 " in out and "#3 " not in out and "more:" not in out
    assert run(ip, "memory stale --offset 3")[1] == "Nothing past 3 stale notes (--offset 3).\n"
    with pytest.raises(UsageError, match=r"^%memory stale takes options only, not 'extra'"):
        run(ip, "memory stale extra")


def test_snapshots_judge_dataframe_anchors_in_the_kernel(ip):
    ip.user_ns["df"] = pd.DataFrame({"id": [1, 2], "amount": [1000, 2500]})
    run(ip, "remember --about df df.amount is in cents")
    run(ip, "snapshot before")
    ip.run_cell("df['discount'] = 0.5")
    _, out = run(ip, "snapshot --diff before")
    assert "Became stale" in out and "schema_changed df (added discount)" in out
    run(ip, "snapshot after")
    ip.run_cell("df = df.drop(columns=['discount'])")
    _, out = run(ip, "snapshot --diff before after")
    assert "schema_changed df (added discount)" in out  # sealed with the kernel's view then
    _, out = run(ip, "snapshot --diff after")
    assert "No longer stale" in out

def test_a_polars_frame_is_fingerprinted_too(ip):
    pl = pytest.importorskip("polars")
    ip.user_ns["orders"] = pl.DataFrame({"id": [1, 2], "amount": [1000, 2500]})
    _, out = run(ip, "remember --about orders orders amounts are in cents")
    assert "About: orders (DataFrame 2×2)" in out
    ip.user_ns["orders"] = ip.user_ns["orders"].rename({"amount": "amount_cents"})
    hits, _ = run(ip, "recall orders amounts")
    assert "[STALE: schema_changed orders (added amount_cents; removed amount)]" in pretty(hits)


def test_about_a_path_is_relative_to_the_kernels_folder(ip, ws):
    _, out = run(ip, "remember --about ../data/orders.csv --about ../data amounts are in cents")
    assert "About: data/orders.csv (2 columns, 2 rows), data/" in out
    (ws / "data" / "orders.csv").write_text("id,amount,currency\n1,1000,EUR\n2,2500,EUR\n")
    hits, _ = run(ip, "recall amounts")
    assert "[STALE: schema_changed data/orders.csv (added currency)]" in pretty(hits)


def test_about_a_column_says_to_anchor_its_frame(ip):
    """Found by a walkthrough: --about orders.amount (the README's own example column) said
    "nothing exists there ... run the cell that defines it first", though orders was
    defined."""
    ip.user_ns["orders"] = pd.DataFrame({"id": [1, 2], "amount": [1000, 2500]})
    with pytest.raises(UsageError, match=r"^--about orders\.amount: --about takes a variable or "
                                         r"a path, and orders is a variable here: --about "
                                         r"orders anchors the note to it .* not stored\.$"):
        run(ip, "remember --about orders.amount amount is in cents")
    assert run(ip, "memory list")[1].startswith("0 active notes")


def test_an_unquoted_path_with_spaces_is_refused_with_the_quotes_to_type(ip, ws):
    """It said "no variable 'My' in this kernel" and nothing of the space."""
    (ws / "analysis" / "My Data").mkdir()
    (ws / "analysis" / "My Data" / "orders 2024.csv").write_text("id,amount\n1,1000\n")
    with pytest.raises(UsageError, match=r'^--about My: a path with spaces goes in quotes: '
                                         r'--about "My Data/orders 2024\.csv"\. The note was '
                                         r'not stored\.$'):
        run(ip, "remember --about My Data/orders 2024.csv amounts are in cents")
    with pytest.raises(UsageError, match=r'^--about ../analysis/My: a path with spaces goes in '
                                         r'quotes: --about "../analysis/My Data/orders 2024'):
        run(ip, "remember --about ../analysis/My Data/orders 2024.csv\ncents, in a cell")
    assert run(ip, "memory list")[1].startswith("0 active notes")
    _, out = run(ip, "remember --about 'My Data/orders 2024.csv' amounts are in cents")
    assert "About: analysis/My Data/orders 2024.csv (2 columns, 1 row)" in out


@pytest.mark.parametrize("line, message", [
    ("remember --about nosuch amounts are cents",
     "--about nosuch: there is no variable 'nosuch' in this kernel and no file of that name here"),
    ("remember --about ../data/none.csv amounts are cents", "--about .*none.csv: nothing exists there"),
    ("recall --fresh --stale amounts", "Use --fresh or --stale, not both"),
    ("memory verify", "Give the id of the note you checked"),
    ("memory verify 7", "No store at .* yet"),  # no note at all: not even a store
])
def test_errors(ip, line, message):
    with pytest.raises(UsageError, match=message):
        run(ip, line)
    try:
        listed = run(ip, "memory list")[1]
    except UsageError as exc:  # refused before the store was opened: there is none yet
        listed = str(exc)
    assert listed.startswith(("0 active notes: none.", "No store at "))


def test_a_pointer_only_note_gets_a_hint(ip):
    _, out = run(ip, "remember see resolver.rs:214")
    assert ("Hint: #1 is only a location. Pointers go stale as code moves: store the finding "
            "itself (what happens there and why it matters), e.g. %remember --supersedes 1 "
            "<the finding>") in out
    _, out = run(ip, "remember resolver.rs:214 retries forever when the lock is held")
    assert "Hint" not in out
    # A finding in a script written without spaces is one "word" with a slash in it.
    _, out = run(ip, "remember 金额/数量的比例在2021年之后变了，需要重新计算。")
    assert "Hint" not in out


def test_provenance_outside_a_notebook_says_so(ip, ws):
    ip.run_cell("%remember ../data/orders.csv amounts are in cents", store_history=True)
    hits, _ = run(ip, "recall --provenance amounts in cents")
    text = pretty(hits)
    commit = git(ws, "rev-parse", "HEAD")[:8]
    assert f"     not from a notebook (ipython) [1] @ main:{commit} by " in text
    assert "     about data/orders.csv (2 columns, 2 rows)" in text
    note = hits[0].note
    assert note.provenance.cell_source == "%remember ../data/orders.csv amounts are in cents"
    assert note.provenance.git_dirty is False
    assert "not from a notebook (ipython)" in hits._repr_html_()


def test_verify_a_note_about_nothing(ip):
    run(ip, "remember the watcher races the lock")
    _, out = run(ip, "memory verify 1")
    assert out.strip() == ("Verified #1. It is about no file, data, variable or cell, so it "
                           "cannot go stale; the check is recorded in its history.")
    assert "verified" in run(ip, "memory history 1")[1]


def test_verify_without_the_variable_keeps_its_fingerprint_and_says_so(ip):
    ip.user_ns["df"] = pd.DataFrame({"id": [1, 2]})
    run(ip, "remember --about df df ids are unique")
    del ip.user_ns["df"]
    _, out = run(ip, "memory verify 1")
    assert out.strip() == (
        "Verified #1: re-took 0 fingerprints. Kept the old fingerprint of df: it cannot be "
        "re-taken here (a variable must exist in this notebook's kernel: run the cell that "
        "defines it, then verify again).")
    ip.user_ns["df"] = pd.DataFrame({"id": [1, 1]})
    hits, _ = run(ip, "recall df ids")
    assert "[STALE: content_changed df]" in pretty(hits)


def test_verify_in_another_notebook_names_the_notebook_of_the_variable(ip, ws):
    """Found by a walkthrough: verified in day2.ipynb, a note about day1.ipynb's orders said
    to run the cell that defines orders in this kernel, which it had: no run helps."""
    magics = ip.magics_manager.registry["NbMemory"]
    ip.user_ns["orders"] = pd.DataFrame({"id": [1, 2]})
    magics._notebook = str(ws / "analysis" / "day1.ipynb")
    run(ip, "remember --about orders order ids are unique")
    magics._notebook = str(ws / "analysis" / "day2.ipynb")
    _, out = run(ip, "memory verify 1")
    assert out.strip() == (
        "Verified #1: re-took 0 fingerprints. Kept the old fingerprint of orders: it is the "
        "variable of day1.ipynb, where the note was written: verify there, once the cell that "
        "defines it has run.")
    magics._notebook = str(ws / "analysis" / "day1.ipynb")  # there, without orders
    del ip.user_ns["orders"]
    _, out = run(ip, "memory verify 1")
    assert "it cannot be re-taken here (a variable must exist in this notebook's kernel" in out


def test_verify_of_a_note_whose_notebook_moved_talks_about_the_notebook(ip, ws):
    import nbformat

    from nbmemory.models import Provenance
    from nbmemory.provenance import source_hash

    path = ws / "analysis" / "Untitled.ipynb"
    cell = nbformat.v4.new_code_cell("%remember the export runs at 02:00")
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), path)
    mem = ip.magics_manager.registry["NbMemory"]._writable()
    note = mem.remember("the export runs at 02:00",
                        provenance=Provenance(notebook=str(path), cell_id=cell.id,
                                              cell_hash=source_hash(cell.source), source="notebook"))
    assert [a.kind for a in note.anchors] == ["cell"]
    path.rename(path.with_name("sales-notes.ipynb"))
    _, out = run(ip, f"memory verify {note.id}")
    assert " ".join(out.split()) == (
        f"Verified #{note.id}: re-took 1 fingerprint; cleared missing analysis/Untitled.ipynb "
        "(the notebook it was written in; renamed or moved?). The notebook "
        "analysis/Untitled.ipynb is gone: the note no longer watches the cell it came from.")
    assert "variable" not in out


def test_a_correction_keeps_what_the_note_it_replaces_was_about(ip, ws):
    """%remember --supersedes without --about dropped the old note's files, so the correction
    never went stale: the magic always sent an empty list, not "none given"."""
    run(ip, "remember --about ../data/orders.csv the orders file has an amount column")
    _, out = run(ip, "remember --supersedes 1 the orders file has an amount column, in cents")
    assert "replacing #1\nAbout: data/orders.csv" in out
    ip.user_ns["rows"] = pd.DataFrame({"amount": [1000, 2500]})
    # A check given with it is the new text's own: the files come along beside it.
    run(ip, "remember --supersedes 2 --check 'len(rows) == 2' two orders, amounts in cents")
    assert not run(ip, "recall --stale amounts in cents")[0].notes  # nothing changed yet
    (ws / "data" / "orders.csv").write_text("id,amount,discount\n1,1000,0\n2,2500,5\n")
    [hit] = run(ip, "recall --stale amounts in cents")[0]
    assert hit.note.id == 3 and {a.kind for a in hit.note.anchors} >= {"data", "check"}
    assert "schema_changed data/orders.csv (added discount)" in run(ip, "memory stale")[1]
