"""The demo notebooks, executed top to bottom in real kernels with the real model.

Each notebook runs through nbclient in a fresh kernel whose TMPDIR is a directory of the
test's own: the notebooks make their scratch workspace and store there. The assertions are
on what a reader sees (the note recalled first, the stale reasons, the snapshot diff, the
Markdown export), and on the last cell leaving nothing behind. The committed notebooks carry
no outputs (see notebooks/README.md), so nothing here depends on them.
"""

from __future__ import annotations

import os
import re
import time
from contextlib import contextmanager
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
DEMOS = ["01-quickstart.ipynb", "02-exploring-a-codebase.ipynb", "03-exploring-a-dataset.ipynb"]
WORKS = {"01-quickstart.ipynb": "nbmemory-demo-quickstart",
         "02-exploring-a-codebase.ipynb": "nbmemory-demo-codebase",
         "03-exploring-a-dataset.ipynb": "nbmemory-demo-dataset"}


# -- running -----------------------------------------------------------------------------

def read(name: str):
    return nbformat.read(NOTEBOOKS / name, as_version=4)


def ids(nb) -> list[str]:
    return [cell.id for cell in nb.cells]


@contextmanager
def kernel(nb, tmp: Path):
    """A fresh kernel started in notebooks/ (as JupyterLab would), TMPDIR=tmp; yields run(ids)."""
    from nbclient import NotebookClient

    env = {**os.environ, "TMPDIR": str(tmp), "HF_HUB_OFFLINE": "1"}
    client = NotebookClient(nb, timeout=240, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOKS)}})
    positions = {cell_id: i for i, cell_id in enumerate(ids(nb))}

    def run(cell_ids):
        for cell_id in cell_ids:
            client.execute_cell(nb.cells[positions[cell_id]], positions[cell_id])

    with client.setup_kernel(env=env):
        yield run


def between(nb, first: str | None = None, stop: str | None = None) -> list[str]:
    """Cell ids from ``first`` up to, not including, ``stop``."""
    all_ids = ids(nb)
    return all_ids[all_ids.index(first) if first else 0: all_ids.index(stop) if stop else None]


def shown(nb, cell_id: str) -> str:
    """What a cell printed (stdout) and displayed, as plain text."""
    cell = next(c for c in nb.cells if c.id == cell_id)
    parts = []
    for output in cell.outputs:
        if output.output_type == "stream" and output.name == "stdout":
            parts.append(output.text)
        elif output.output_type in ("display_data", "execute_result"):
            parts.append(output.data.get("text/plain", "") + "\n")
    return "".join(parts)


_HIT = re.compile(r"^#(\d+)  (-?\d+\.\d\d)  ")


def recalled(text: str) -> list[tuple[int, str]]:
    """(id, text) of each hit in a %recall's plain-text output, best first."""
    hits: list[list] = []
    for line in text.splitlines():
        match = _HIT.match(line)
        if match:
            hits.append([int(match.group(1)), ""])
        elif hits and line.startswith("     ") and not line.startswith("     from "):
            hits[-1][1] += " " + line.strip()
    return [(note_id, body.strip()) for note_id, body in hits]


def owners_under(tmp: Path) -> list[str]:
    """Store owner processes (nbmemory's service) serving a store under ``tmp``."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            args = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if "nbmemory.service" in args and any(a.startswith(str(tmp)) for a in args):
            found.append(proc.name)
    return found


def assert_nothing_left(tmp: Path, name: str) -> None:
    assert not (tmp / WORKS[name]).exists()
    assert [p.name for p in tmp.iterdir() if p.name.startswith("nbmemory")] == []
    # An owner told to stop releases the store first, then its process ends.
    deadline = time.monotonic() + 15
    while owners_under(tmp) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert owners_under(tmp) == []


# -- the committed notebooks -------------------------------------------------------------

@pytest.mark.parametrize("name", DEMOS)
def test_committed_notebooks_are_valid_and_stripped(name):
    nb = read(name)
    nbformat.validate(nb)
    assert nb.metadata.kernelspec.name == "python3"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.outputs == [] and c.execution_count is None for c in code), \
        f"{name} has outputs: clear them before committing (Edit > Clear Outputs of All Cells)"
    assert code[-1].id == "cleanup" and "remove_work()" in code[-1].source
    sources = [c.source for c in code if "%remember" in c.source]
    assert len(sources) == len(set(sources))


def test_every_remember_cell_is_unique_across_the_notebooks():
    """Provenance finds a notebook run by nbclient by its one cell with the running source."""
    sources = [c.source for name in DEMOS for c in read(name).cells
               if c.cell_type == "code" and "%remember" in c.source]
    assert len(sources) == len(set(sources))


def test_the_readme_links_every_notebook():
    readme = (ROOT / "README.md").read_text()
    for name in DEMOS:
        assert f"(notebooks/{name})" in readme


def test_the_panel_cell_names_the_real_command():
    """The quickstart says where to click; once the panel is built, its label must match."""
    text = next(c.source for c in read(DEMOS[0]).cells if c.id == "panel")
    assert "left sidebar" in text
    quoted = re.search(r"with \*\*(.+?)\*\*\s+\(category \*nbmemory\*\)", text).group(1)
    index = ROOT / "labextension" / "src" / "index.ts"
    if not index.exists():
        pytest.skip("the JupyterLab panel (labextension/) is not in this checkout")
    # the label is translatable: label: trans.__('...')
    assert re.search(rf"label: (trans\.__\()?'{re.escape(quoted)}'", index.read_text())


# -- executed -----------------------------------------------------------------------------

@pytest.mark.model
@pytest.mark.timeout(300)
def test_quickstart(tmp_path):
    name = DEMOS[0]
    nb = read(name)
    with kernel(nb, tmp_path) as run:
        run(ids(nb))

    assert shown(nb, "orders").startswith("Remembered #1 (finding, high) [orders, units]")
    assert shown(nb, "lock").startswith("Remembered #2 (gotcha, medium) [locks]")
    assert "Similar (not merged): #1 " in shown(nb, "decision")

    first = recalled(shown(nb, "recall-paraphrase"))[0]
    assert first[0] == 1 and first[1].startswith("orders.amount is in cents before 2021-03")
    first = recalled(shown(nb, "recall-identifier"))[0]
    assert first[0] == 3 and "PyObject_GC_Del" in first[1]
    assert "Report revenue in euros everywhere" in shown(nb, "recall-dataframe")

    assert shown(nb, "forget") == "Forgot #2. Undo with: %memory reinstate 2\n"
    forgotten = shown(nb, "recall-forgotten")
    assert 2 not in [i for i, _ in recalled(forgotten)]
    assert "Previously believed (#2, revoked): acquire_lock() must run" in forgotten
    assert shown(nb, "reinstate") == "Reinstated #2.\n"
    assert recalled(shown(nb, "recall-reinstated"))[0][0] == 2

    assert shown(nb, "snapshot").startswith("Sealed snapshot 'first-look' at journal position")
    assert "(4 active notes)" in shown(nb, "snapshot")
    diff = shown(nb, "diff")
    assert "From 'first-look' to 'now'\nAdded (1):\n  #5 orders.amount is in cents before 2021-04-01" in diff
    assert "Superseded (1):\n  #1 [by #5] orders.amount is in cents before 2021-03" in diff
    as_of = recalled(shown(nb, "as-of"))
    assert as_of[0][0] == 1 and "2021-03" in as_of[0][1]
    assert "Supersede chain: #1 (superseded) -> #5 (active)" in shown(nb, "history")
    assert "notes          4 active, 1 superseded" in shown(nb, "status")
    assert f"{tmp_path / WORKS[name] / '.nbmemory'} (given explicitly)" in shown(nb, "status")
    assert shown(nb, "list").startswith("4 active notes\n#5  high  finding")

    assert shown(nb, "cleanup") == f"Removed {tmp_path / WORKS[name]}: True\n"
    assert_nothing_left(tmp_path, name)


@pytest.mark.model
@pytest.mark.timeout(400)
def test_codebase_day_two_in_a_fresh_kernel(tmp_path):
    name = DEMOS[1]
    nb = read(name)
    with kernel(nb, tmp_path) as run:  # day 1
        run(between(nb, stop="day-2"))
    work = tmp_path / WORKS[name]
    assert (work / ".nbmemory").is_dir() and (work / "requests" / "adapters.py").is_file()
    with kernel(nb, tmp_path) as run:  # day 2: a new kernel, only the store remembers
        run(between(nb, first="day-2"))

    for cell_id, about in (("retries", "requests/adapters.py"), ("timeout", "requests/sessions.py"),
                           ("auth", "requests/sessions.py"), ("truthy", "requests/models.py"),
                           ("headers", "requests/structures.py"), ("help", "requests/help.py")):
        assert f"About: {about}\n" in shown(nb, cell_id), cell_id
    assert shown(nb, "read-strip-auth").strip() == "(True, False)"
    assert shown(nb, "read-bool").strip() == "(False, False)"
    assert "(6 active notes)" in shown(nb, "snapshot-day-1")

    # Day 2: recalled from the store by a kernel that never saw the notes.
    first = recalled(shown(nb, "recall-retries"))[0]
    assert first[0] == 1 and first[1].startswith("HTTPAdapter retries nothing by default")
    by_name = shown(nb, "recall-identifier")
    assert recalled(by_name)[0][0] == 3
    assert "from notebooks/02-exploring-a-codebase.ipynb cell auth [" in by_name
    assert "about requests/sessions.py, its cell" in by_name

    # Upstream changed adapters.py and renamed help.py.
    stale = shown(nb, "stale")
    assert stale.startswith("2 stale notes\n")
    assert ("#6  medium  reference  " in stale and "[STALE: missing requests/help.py "
            "(renamed to requests/debug_info.py?)]" in stale)
    assert "#1  high  finding  " in stale and "[STALE: content_changed requests/adapters.py]" in stale
    assert "sessions.py" not in stale
    after = shown(nb, "recall-after-change")
    assert after.splitlines()[0].endswith("[STALE: content_changed requests/adapters.py]")
    fresh = [i for i, _ in recalled(shown(nb, "recall-fresh"))]
    assert fresh and 1 not in fresh and 6 not in fresh

    assert shown(nb, "retries3").startswith("Remembered #7 (finding, high) [requests, retries]")
    diff = shown(nb, "diff")
    assert diff.startswith("From 'day-1' to 'day-2'\nAdded (2):\n  #7 HTTPAdapter now retries")
    assert "\n  #8 Our crawler keeps failing fast" in diff
    assert "Superseded (1):\n  #1 [by #7] HTTPAdapter retries nothing by default" in diff
    assert ("Became stale (1):\n  #6 [missing requests/help.py (renamed to "
            "requests/debug_info.py?)] python -m requests.help") in diff
    assert "Supersede chain: #1 (superseded) -> #7 (active)" in shown(nb, "history")

    assert shown(nb, "cleanup") == f"Removed {work}: True\n"
    assert_nothing_left(tmp_path, name)


@pytest.mark.model
@pytest.mark.timeout(300)
def test_dataset(tmp_path):
    name = DEMOS[2]
    nb = read(name)
    work = tmp_path / WORKS[name]
    with kernel(nb, tmp_path) as run:
        run(between(nb, stop="cleanup"))
        # The Markdown export is on disk before the clean-up removes it.
        index = (work / "notes" / "index.md").read_text()
        assert "- [nulls](nulls.md) (2 notes)" in index and "- [units](units.md) (1 note)" in index
        page = (work / "notes" / "nulls.md").read_text()
        run(["cleanup"])

    assert "About: data/penguins.csv (8 columns, 344 rows)\n" in shown(nb, "na")
    assert ("About: penguins (DataFrame 344×8), data/penguins.csv (8 columns, 344 rows)\n"
            in shown(nb, "units"))
    first = recalled(shown(nb, "recall-paraphrase"))[0]
    assert first[0] == 3 and first[1].startswith("Units in penguins:")
    first = recalled(shown(nb, "recall-identifier"))[0]
    assert first[0] == 1 and "nullstr='NA'" in first[1]
    assert "About: check penguins.body_mass_g.isna().sum() == 2 (held, value 2)" in shown(nb, "check")
    shape, failed, ambient = shown(nb, "new-data").strip().splitlines()
    assert shape == "(342, 9)"
    # The check of #5 re-ran when the cell rebuilt the frame it reads, in this kernel.
    check = "penguins.body_mass_g.isna().sum() == 2"
    assert failed == f"nbmemory: #5 FAILS: {check} is now False (value 0)"
    # Ambient recall: the cell read the file and rebuilt the frame four notes are about.
    assert ambient.startswith("nbmemory: 4 notes about data/penguins.csv and penguins (4 stale)")

    stale = shown(nb, "stale")
    assert stale.startswith("5 stale notes\n")
    file_schema = ("schema_changed data/penguins.csv (added body_mass_kg; changed bill_length_mm "
                   "VARCHAR→DOUBLE, bill_depth_mm VARCHAR→DOUBLE, flipper_length_mm VARCHAR→DOUBLE, "
                   "body_mass_g VARCHAR→DOUBLE)")
    file_rows = "rows_changed data/penguins.csv (344 → 342 rows)"
    frame = "schema_changed penguins (added body_mass_kg); rows_changed penguins (344 → 342 rows)"
    lines = {int(line.split()[0][1:]): line for line in stale.splitlines() if line.startswith("#")}
    assert lines[1].endswith(f"[STALE: {file_schema}; {file_rows}]")
    assert lines[2].endswith(f"[STALE: {file_schema}; {file_rows}]")
    assert lines[3].endswith(f"[STALE: {frame}; {file_schema}; {file_rows}]")
    assert lines[4].endswith(f"[STALE: {frame}]")
    assert lines[5].endswith(f"[STALE: check_failed {check} (is now False, value 0)]")
    assert shown(nb, "recheck") == f"#5 FAILS: {check} is now False (value 0)\n"

    assert shown(nb, "verify").startswith(
        "Verified #3: re-took 3 fingerprints; cleared schema_changed penguins (added body_mass_kg)")
    assert "About: data/penguins.csv (9 columns, 342 rows)\n" in shown(nb, "na2")
    assert shown(nb, "stale-after").startswith("3 stale notes\n")
    fresh = [i for i, _ in recalled(shown(nb, "recall-fresh"))]
    assert fresh and set(fresh) <= {3, 6} and 6 in fresh
    diff = shown(nb, "diff")
    assert "Added (1):\n  #6 Since the cleaned data/penguins.csv" in diff
    assert "Superseded (1):\n  #1 [by #6]" in diff
    assert "Became stale (3):\n  #2 [" in diff and file_rows in diff
    assert f"\n  #5 [check_failed {check} (is now False, value 0)]" in diff
    # The DataFrame-anchored note counts too: %snapshot judges it with the kernel's frame.
    assert "\n  #4 [rows_changed penguins (344 → 342 rows); schema_changed penguins " \
           "(added body_mass_kg)]" in diff

    assert shown(nb, "export") == f"Wrote 5 Markdown pages to {work}/notes (start at index.md).\n"
    assert "['index.md', 'islands.md', 'nulls.md', 'penguins.md', 'units.md']" in shown(nb, "show-page")
    markdown = next(o for o in next(c for c in nb.cells if c.id == "show-page").outputs
                    if "text/markdown" in o.get("data", {}))
    assert markdown.data["text/markdown"] == page
    assert page.startswith("# nulls\n\n## #2: finding, high priority\n\n2 of the 344 penguins")
    assert f"[STALE: {file_schema}; {file_rows}]" in page
    assert "## #6: gotcha, high priority" in page and "## #1:" not in page

    assert shown(nb, "cleanup") == f"Removed {work}: True\n"
    assert_nothing_left(tmp_path, name)


@pytest.mark.model
@pytest.mark.timeout(400)
def test_run_all_twice_in_one_kernel(tmp_path):
    """No restart before day 2, then Run All again: the second run starts from a clean slate."""
    name = DEMOS[1]
    nb = read(name)
    with kernel(nb, tmp_path) as run:
        run(ids(nb))
        run(ids(nb))
    assert recalled(shown(nb, "recall-retries"))[0][0] == 1
    assert shown(nb, "stale").startswith("2 stale notes\n")
    assert "Became stale (1):\n  #6 [missing requests/help.py" in shown(nb, "diff")
    assert shown(nb, "cleanup") == f"Removed {tmp_path / WORKS[name]}: True\n"
    assert_nothing_left(tmp_path, name)
