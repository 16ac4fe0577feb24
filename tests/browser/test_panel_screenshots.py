"""Screenshots: light and dark theme at the default 250 px sidebar and at 400 px, and the
README's picture from a real session (notes written in a notebook, the real model, a file
that changed under one of them). They go to test-artifacts/ and are looked at."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import nbformat
import pytest
from playwright.sync_api import expect

from nbmemory.config import DEFAULT_MODEL
from nbmemory.service import stop

from .conftest import open_lab, screenshot, start_lab, stop_lab
from .test_panel import PANEL, card, widen_sidebar

KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}


def set_theme(page, theme: str) -> None:
    light = "true" if theme == "JupyterLab Light" else "false"
    before = page.evaluate("() => getComputedStyle(document.querySelector("
                           "'#nbmemory-panel .nbm-Note')).backgroundColor")
    page.evaluate(f"() => window.jupyterapp.commands.execute('apputils:change-theme', "
                  f"{{theme: '{theme}'}})")
    page.wait_for_function(f"() => document.body.dataset.jpThemeLight === '{light}'")
    page.wait_for_function(
        "before => getComputedStyle(document.querySelector('#nbmemory-panel .nbm-Note'))"
        ".backgroundColor !== before", arg=before)
    expect(page.locator("#jupyterlab-splash")).to_have_count(0)


def test_screenshots_light_and_dark_at_250_and_400_px(browser_context, tmp_path):
    """A tidy store of its own: a high-priority gotcha, a superseding note, a stale one
    (its CSV changed), a question, a long note clamped, a search with scores."""
    lab = start_lab(tmp_path)
    try:
        lab.remember("`orders.amount` is in **cents** before 2021-03 and in euros after: divide "
                     "by 100 before summing across the boundary.", tags="orders,units",
                     priority="high", kind="gotcha")
        old = lab.remember("The watcher thread starts after acquire_lock().", tags="locks")
        lab.api(f"notes/{old['id']}/supersede", "POST",
                {"text": "acquire_lock() must run before touching workspace metadata: the "
                         "watcher thread races it at startup.", "kind": "finding"})
        inputs = lab.store.parent / "data"
        inputs.mkdir()
        (inputs / "regions.csv").write_text("code,region\nN,north\nS,south\n")
        lab.remember("Region codes are single letters; the mapping lives in "
                     "`data/regions.csv`.", tags="regions", kind="reference")
        (inputs / "regions.csv").write_text("code,region,manager\nN,north,ana\nS,south,bo\n")
        lab.remember("Does the nightly export drop rows with a NULL region?", kind="question",
                     priority="low", tags="export")
        notebook = nbformat.v4.new_notebook(metadata={"kernelspec": KERNELSPEC})
        notebook.cells = [
            nbformat.v4.new_markdown_cell("# Orders: revenue by month"),
            nbformat.v4.new_code_cell("%load_ext nbmemory\n%recall what unit is the order amount in"),
        ]
        nbformat.write(notebook, lab.root / "analysis.ipynb")
        page = open_lab(browser_context, lab)
        page.evaluate("async () => { await window.jupyterapp.commands.execute('docmanager:open', "
                      "{path: 'analysis.ipynb', factory: 'Notebook'}); }")
        page.locator(".jp-NotebookPanel .jp-Cell").nth(1).wait_for()
        page.evaluate("() => window.jupyterapp.commands.execute('nbmemory:open')")
        expect(page.locator(f"{PANEL} .nbm-Note")).to_have_count(4)
        expect(page.locator(f"{PANEL} .nbm-StaleBadge")).to_have_count(1)
        for width in (250, 400):
            widen_sidebar(page, width)
            for theme, name in (("JupyterLab Light", "light"), ("JupyterLab Dark", "dark")):
                if name == "dark" or width == 400:
                    set_theme(page, theme)
                screenshot(page, f"panel-{name}-{width}.png")
            # What the pictures showed at 250 px: the age on a row of its own under
            # "#4 medium reference stale". The stale card's header is one row.
            header = card(page, "Region codes").locator(".nbm-NoteHeader > *")
            tops = {round(header.nth(i).bounding_box()["y"]) for i in range(header.count())}
            assert max(tops) - min(tops) <= 4, f"the card header wrapped at {width} px: {tops}"
        # The dark theme at 400 px with a search: scores and a clamped note.
        page.locator(f"{PANEL} .nbm-Search").fill("acquire_lock watcher")
        page.locator(f"{PANEL} .nbm-Search").press("Enter")
        expect(page.locator(f"{PANEL} .nbm-Summary")).to_contain_text("recalled for")
        screenshot(page, "panel-dark-400-recall.png")
        set_theme(page, "JupyterLab Light")
        screenshot(page, "panel-light-400-recall.png")
        page.close()
    finally:
        stop_lab(lab)


SESSION = [
    nbformat.v4.new_markdown_cell("# Orders: revenue by month\n\nWhere the order totals come "
                                  "from, and what to watch out for."),
    nbformat.v4.new_code_cell("%load_ext nbmemory\nimport pandas as pd\n\n"
                              "orders = pd.read_csv('data/orders.csv')\norders.head(3)"),
    nbformat.v4.new_code_cell(
        "%remember -p high -t orders,units --about data/orders.csv orders.amount is in "
        "**cents** for rows before 2021-03 and in euros after: divide the old rows by 100 "
        "before summing across the switch."),
    nbformat.v4.new_code_cell(
        "%remember -k gotcha -t orders,joins customer_id is empty for guest checkouts, "
        "so an inner join with customers silently drops them (8 of the 40 rows here)."),
    nbformat.v4.new_code_cell("monthly = orders.groupby('month').amount.sum()\nmonthly"),
    nbformat.v4.new_code_cell(
        "%remember -k decision -t orders,reporting Revenue by month is reported in euros; "
        "the March 2021 switch is converted in `monthly_revenue()`, not in the SQL."),
    nbformat.v4.new_code_cell(
        # Not ending in "?": IPython would take the line for a help request.
        "%remember -k question -p low -t export Does the nightly export keep guest "
        "checkouts? Check before the Q3 report."),
]


def orders_csv(extra_column: bool = False) -> str:
    rows = ["month,customer_id,amount" + (",channel" if extra_column else "")]
    for i in range(40):
        month = f"2021-{1 + i % 6:02d}"
        customer = "" if i % 5 == 0 else str(100 + i)
        amount = 1250 + 10 * i if month < "2021-03" else 12.5 + i
        rows.append(f"{month},{customer},{amount}" + (",web" if extra_column else ""))
    return "\n".join(rows) + "\n"


@pytest.mark.model
def test_readme_screenshot_from_a_real_session(browser_context, tmp_path):
    """docs/panel.png: notes remembered in a notebook (so with their cell and execution
    count), the real model, and a stale badge from a CSV that changed afterwards."""
    # A project folder as an analyst has one (its store in .nbmemory/), at a short path:
    # the status line shows it. A directory of its own: a fixed /tmp/ana was removed whole,
    # whatever else someone kept there.
    project = Path(tempfile.mkdtemp(prefix="ana-")) / "orders-project"
    lab = start_lab(tmp_path, model=DEFAULT_MODEL, root=project, store=project / ".nbmemory")
    try:
        (lab.root / "data").mkdir()
        (lab.root / "data" / "orders.csv").write_text(orders_csv())
        notebook = nbformat.v4.new_notebook(metadata={"kernelspec": KERNELSPEC})
        notebook.cells = SESSION
        nbformat.write(notebook, lab.root / "orders-analysis.ipynb")
        page = open_lab(browser_context, lab)
        page.evaluate("async () => { await window.jupyterapp.commands.execute('docmanager:open', "
                      "{path: 'orders-analysis.ipynb', factory: 'Notebook'}); }")
        page.locator(".lm-TabBar-tab", has_text="Launcher").locator(
            ".lm-TabBar-tabCloseIcon").click()
        page.locator(".jp-NotebookPanel .jp-Cell").nth(len(SESSION) - 1).wait_for()
        page.wait_for_function("() => window.jupyterapp.shell.currentWidget?.sessionContext"
                               "?.session?.kernel?.connectionStatus === 'connected'",
                               timeout=60_000)
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
        outputs = page.locator(".jp-NotebookPanel .jp-OutputArea", has_text="Remembered #")
        try:
            expect(outputs).to_have_count(4, timeout=180_000)
        except AssertionError:
            print("OUTPUTS", page.locator(".jp-NotebookPanel .jp-OutputArea").all_inner_texts())
            raise
        page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
        # A new version of the data arrives: one more column.
        (lab.root / "data" / "orders.csv").write_text(orders_csv(extra_column=True))
        page.evaluate("() => window.jupyterapp.commands.execute('nbmemory:open')")
        page.evaluate("() => window.jupyterapp.commands.execute('nbmemory:refresh')")
        panel = page.locator(PANEL)
        expect(panel.locator(".nbm-Note")).to_have_count(4)
        stale = card(page, "orders.amount is in")
        expect(stale.locator(".nbm-StaleBadge")).to_be_visible()
        expect(stale.locator(".nbm-SourceLink")).to_contain_text("orders-analysis.ipynb [")
        expect(panel.locator(".nbm-Status")).to_contain_text(DEFAULT_MODEL)
        widen_sidebar(page, 400)
        page.locator(".jp-NotebookPanel .jp-Cell").nth(2).click()
        path = screenshot(page, "panel-readme.png")
        assert path.stat().st_size > 10_000
        page.close()
    finally:
        try:
            stop_lab(lab)
            stop(lab.store)
        finally:  # the real model's owner must not outlive the test, nor /tmp/ana-* stay
            from conftest import stop_owners_under

            stop_owners_under(str(project.parent))
            shutil.rmtree(project.parent, ignore_errors=True)
