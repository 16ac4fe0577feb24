"""What the magics print, as a real JupyterLab renders it in a notebook (issue 17, items 2
and 4): tables read left to right, ages do not wrap, a long note is clamped and warned
about. Checked on the rendered page (computed styles, line boxes, pixel heights), not on
the HTML string, because the bug was JupyterLab's own, more specific, CSS winning."""

from __future__ import annotations

import re
import time

import nbformat
import pytest
from playwright.sync_api import expect

from .conftest import open_notebook, screenshot, start_lab, stop_lab
from .test_panel import card, close_notebook

KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    # The poll off: only the cells run in this JupyterLab refresh the panel.
    instance = start_lab(tmp_path_factory.mktemp("lab"),
                         settings={"nbmemory:plugin": {"pollInterval": 0}})
    yield instance
    stop_lab(instance)

LONG = "A long finding about the ledger. " + "The ledger row repeats itself. " * 650

CELLS = [
    "%load_ext nbmemory\n%config NbMemory.model = 'hash:64'",
    "%remember -t ledger,close the ledger closes at 02:00 UTC, not at midnight",
    f"%remember -t ledger {LONG}",
    "%recall ledger",
    "%memory list",
]

# For each cell of the first table in an output: its text-align, and on how many lines its
# text is laid out (a Range's client rects: one per line box).
TABLE_LAYOUT = """
output => [...output.querySelectorAll('table.nbm-table tbody tr')].map(row =>
  [...row.cells].map(td => {
    const range = document.createRange();
    range.selectNodeContents(td);
    const tops = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
    return {align: getComputedStyle(td).textAlign, lines: tops.size, text: td.innerText};
  }))
"""


def run_notebook(page, lab, name: str, cells: list[str]) -> None:
    notebook = nbformat.v4.new_notebook(metadata={"kernelspec": KERNELSPEC})
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    nbformat.write(notebook, lab.root / name)
    open_notebook(page, name, len(cells))
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")


def output_of(page, index: int):
    return page.locator(".jp-NotebookPanel .jp-Cell").nth(index).locator(".jp-OutputArea-output")


def test_tables_read_left_to_right_and_long_notes_are_clamped(page, lab):
    run_notebook(page, lab, "output.ipynb", CELLS)
    listed = output_of(page, 4)
    expect(listed.locator("table.nbm-table")).to_be_visible(timeout=120_000)

    # Item 4, at remember time: the long note is stored, with a word about its length.
    expect(output_of(page, 2)).to_contain_text("A long note (")
    expect(output_of(page, 1)).not_to_contain_text("A long note")

    for index in (3, 4):  # %recall and %memory list
        output = output_of(page, index)
        table = output.locator("table.nbm-table")
        expect(table.locator("tbody tr")).to_have_count(2)
        rows = output.evaluate(TABLE_LAYOUT)
        for row in rows:
            # Item 2: JupyterLab's .jp-RenderedHTMLCommon td rule right-aligned these.
            assert all(c["align"] in ("left", "start") for c in row), row
            # Ids, scores, ages, tags: one line each ("1 min", never "1 / min").
            assert all(c["lines"] == 1 for c in row[:-1]), row
        # Item 4: the 20k-character note is clamped to its start and opens on a click.
        height = output.bounding_box()["height"]
        assert height < 600, f"output {index} is {height:.0f} px tall"
        more = table.locator("details.nbm-more")
        expect(more).to_have_count(1)
        expect(more.locator("summary")).to_contain_text("more characters")
        expect(table).to_contain_text("A long finding about the ledger.")
        if index == 3:
            screenshot(page, "notebook-recall-clamped.png")
            more.locator("summary").click()
            expect(more).to_have_attribute("open", "")
            assert output.bounding_box()["height"] > 2 * height
            more.locator("summary").click()
    close_notebook(page)


NOTES = re.compile(r"/nbmemory/notes\?")


def test_cells_that_remember_one_after_the_other_all_show_in_the_panel(page, lab):
    """The second cell's note lands while the refresh the first cell started is on its way
    (its answer held back 1.5 s here, as on a busy server): the panel must look again when
    that refresh is back, not drop the news (it showed one note of two until the next poll,
    up to 10 s later by default; never, with the poll off as here)."""
    def held_back(route):
        response = route.fetch()  # what the server had when asked
        time.sleep(1.5)
        route.fulfill(response=response)

    page.route(NOTES, held_back)
    run_notebook(page, lab, "two.ipynb", [
        "%load_ext nbmemory\n%config NbMemory.model = 'hash:64'",
        "%remember -t sequence the first of two notes in a row",
        "import time\ntime.sleep(0.5)  # after the panel's check for the cell above",
        "%remember -t sequence the second of two notes in a row",
    ])
    outputs = page.locator(".jp-NotebookPanel .jp-OutputArea", has_text="Remembered #")
    expect(outputs).to_have_count(2, timeout=120_000)
    expect(card(page, "the first of two notes")).to_be_visible(timeout=10_000)
    expect(card(page, "the second of two notes")).to_be_visible(timeout=10_000)
    page.unroute(NOTES)
    close_notebook(page)
