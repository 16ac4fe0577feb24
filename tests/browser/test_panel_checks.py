"""Findings that check themselves, in the panel (issue 20): a card shows its check, when it
last held or failed and the value; "Re-check" runs ``%memory check ID`` in the active
notebook's kernel (never in the server); "Remember Output…" on a cell keeps its result
as a note's evidence. Everything is driven through the UI, on a real kernel."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from nbmemory.memory import Memory

from .conftest import screenshot, start_lab, stop_lab, toast
from .test_panel import refresh
from .test_notebook_output import output_of, run_notebook
from .test_panel import PANEL, card, close_notebook
from .test_panel_writing import context_menu_item

SETUP = "%load_ext nbmemory\n%config NbMemory.model = 'hash:64'"
# The data changes through functions, so the cells that change it never name `orders`:
# the ambient re-check (which runs when a cell names a checked variable) stays out, and
# only `%memory check` and the panel's Re-check re-run the check.
DATA = """import pandas as pd
orders = pd.DataFrame({'amount': [120.0, 80.0, 45.5, 99.0]})
label = 'plain'

def spoil():
    orders.loc[0, 'amount'] = None

def fix():
    orders.loc[0, 'amount'] = 120.0"""
CHECK = "orders.amount.isna().mean() < 0.05"
XSS = "<img src=x onerror=window.__nbmXss=1>"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    # The poll off: only what this JupyterLab runs refreshes the panel, so a card that
    # changes after Re-check changed because of it.
    instance = start_lab(tmp_path_factory.mktemp("lab"),
                         settings={"nbmemory:plugin": {"pollInterval": 0}})
    yield instance
    stop_lab(instance)


def checks_by_note(lab) -> dict[int, dict]:
    status, body = lab.api("checks")
    assert status == 200, body
    return {c["note_id"]: c for c in body["checks"]}


def run_new_cell(page, source: str, count: int) -> None:
    """Add a code cell at the end of the notebook, type ``source`` and run it (Ctrl+Enter),
    until its prompt shows ``[count]``."""
    cells = page.locator(".jp-NotebookPanel .jp-Cell")
    index = cells.count()
    cells.nth(index - 1).locator(".jp-InputPrompt").click()
    page.keyboard.press("b")  # command mode: a new cell below
    new = cells.nth(index)
    expect(new.locator(".jp-InputPrompt")).to_have_text("[ ]:")
    new.locator(".jp-InputArea-editor").click()
    page.keyboard.type(source)
    page.keyboard.press("Control+Enter")
    expect(new.locator(".jp-InputPrompt")).to_have_text(f"[{count}]:", timeout=60_000)


def test_a_failed_check_shows_its_value_and_recheck_runs_in_the_notebooks_kernel(page, lab):
    run_notebook(page, lab, "checks.ipynb", [
        SETUP, DATA,
        f'%remember --check "{CHECK}" orders.amount has under 5% nulls',
        f'%remember --check "label not in [\'{XSS}\']" the label is plain text',
        "spoil()",
        "%memory check",
    ])
    expect(output_of(page, 5)).to_contain_text("FAILS", timeout=120_000)
    checks = checks_by_note(lab)
    [nulls] = [c for c in checks.values() if c["expression"] == CHECK]
    [plain] = [c for c in checks.values() if c["expression"] != CHECK]
    assert nulls["last"]["status"] == "failed" and nulls["last"]["value"] == "0.25"

    # The cell that ran %memory check refreshed the panel: the card shows the failure.
    shown = card(page, "orders.amount has under 5% nulls")
    line = shown.locator(".nbm-Check")
    expect(line).to_have_attribute("data-status", "failed", timeout=10_000)
    expect(line.locator(".nbm-CheckExpr")).to_have_text(CHECK)
    expect(line.locator(".nbm-CheckLast")).to_have_text(re.compile(r"^failed \d+ s ago, value 0\.25"))
    expect(shown.locator(".nbm-StaleBadge")).to_be_visible()
    expect(shown.locator(".nbm-StaleReason")).to_contain_text("check failed")
    expect(shown.locator(".nbm-CheckUntrusted")).to_have_count(0)
    # A check is shown as text, never as markup.
    other = card(page, "the label is plain text").locator(".nbm-Check")
    expect(other.locator(".nbm-CheckExpr")).to_have_text(f"label not in ['{XSS}']")
    expect(other.locator(".nbm-CheckLast")).to_contain_text("value 'plain'")
    assert page.locator(f"{PANEL} .nbm-Check img").count() == 0
    assert page.evaluate("() => window.__nbmXss") is None
    screenshot(page, "panel-check-failed.png")

    # The data is fixed in the kernel, by a cell that does not name `orders`: nothing
    # re-checked it yet, so the store (and the card) still say it failed.
    run_new_cell(page, "fix()", 7)
    assert checks_by_note(lab)[nulls["note_id"]]["last"]["status"] == "failed"
    expect(line).to_have_attribute("data-status", "failed")

    recheck = shown.locator(".nbm-Recheck")
    expect(recheck).to_have_text("Re-check")
    recheck.click()
    expect(line).to_have_attribute("data-status", "passed", timeout=30_000)
    expect(line.locator(".nbm-CheckLast")).to_have_text(re.compile(r"^held \d+ s ago, value 0\.0"))
    expect(shown.locator(".nbm-StaleBadge")).to_have_count(0)
    expect(toast(page, f"Re-checked #{nulls['note_id']} in checks.ipynb")).to_be_visible()
    last = checks_by_note(lab)[nulls["note_id"]]["last"]
    assert (last["status"], last["value"]) == ("passed", "0.0"), last
    # It ran in the kernel, outside its history: the notebook's next cell is still [8].
    run_new_cell(page, "1 + 1", 8)
    screenshot(page, "panel-check-rechecked.png")

    # No notebook open: the panel says where the check can run, and runs nothing.
    close_notebook(page)
    recheck.click()
    expect(toast(page, f"Open the notebook whose data the check of #{nulls['note_id']} "
                       "reads (orders)")).to_be_visible()
    assert checks_by_note(lab)[nulls["note_id"]]["last"] == last


def test_remember_output_keeps_a_cells_result_as_the_evidence(page, lab):
    run_notebook(page, lab, "output-of.ipynb", [
        SETUP,
        "import pandas as pd\nsales = pd.DataFrame({'amount': [120.0, None, 45.5]})\n"
        "sales.amount.isna().sum()",
    ])
    expect(output_of(page, 1)).to_contain_text("1", timeout=120_000)
    cell = page.locator(".jp-NotebookPanel .jp-Cell").nth(1)
    expect(cell.locator(".jp-InputPrompt")).to_have_text("[2]:")
    cell.locator(".jp-InputPrompt").click(button="right")
    context_menu_item(page, "Remember Output…").click()
    dialog = page.locator(".jp-Dialog")
    expect(dialog).to_contain_text("Remember the output of cell [2]")
    dialog.locator("input").fill("sales has one null amount, \"quoted\" and --dashed")
    dialog.locator(".jp-mod-accept").click()
    expect(toast(page, "with the output of cell [2] as its evidence")).to_be_visible(
        timeout=60_000)
    shown = card(page, "sales has one null amount")
    expect(shown).to_be_visible()
    note_id = int(shown.get_attribute("data-note-id"))
    status, detail = lab.api(f"notes/{note_id}")
    assert status == 200 and detail["note"]["text"] == (
        "sales has one null amount, \"quoted\" and --dashed")
    # The evidence is cell [2]'s result and source, as the kernel had them.
    with Memory.open(lab.store, mode="service") as memory:
        [kept] = [a for a in memory.get(note_id).anchors if a.kind == "evidence"]
    assert kept.target == "Out[2]", kept
    assert kept.fingerprint["output"] in ("np.int64(1)", "1"), kept.fingerprint
    assert "sales.amount.isna().sum()" in kept.fingerprint["source"], kept.fingerprint

    # A cell that has not run has no result to keep: refused, nothing asked or written.
    cell.locator(".jp-InputPrompt").click()
    page.keyboard.press("b")
    fresh = page.locator(".jp-NotebookPanel .jp-Cell").nth(2)
    expect(fresh.locator(".jp-InputPrompt")).to_have_text("[ ]:")
    before = lab.api("notes")[1]["total"]
    fresh.locator(".jp-InputPrompt").click(button="right")
    context_menu_item(page, "Remember Output…").click()
    expect(toast(page, "Cell 3 of output-of.ipynb has no execution count")).to_be_visible()
    expect(page.locator(".jp-Dialog")).to_have_count(0)
    assert lab.api("notes")[1]["total"] == before
    close_notebook(page)


def test_a_check_from_someone_elses_export_shows_its_code_and_is_not_trusted(page, lab, tmp_path):
    """Imported checks are code someone else wrote: the card shows the code and says it
    does not run until trusted (the export never carries trust)."""
    import pandas as pd

    export = tmp_path / "ana.jsonl"
    with Memory.open(tmp_path / "ana", model="hash:64", mode="local") as ana:
        ana.remember("every order has a customer", author="ana",
                     check="orders.customer.notna().all()",
                     namespace={"orders": pd.DataFrame({"customer": ["c1", "c2"]})})
        ana.export_jsonl(export)
    with Memory.open(lab.store, mode="service") as memory:
        memory.import_jsonl(export)
    refresh(page)
    shown = card(page, "every order has a customer")
    line = shown.locator(".nbm-Check")
    expect(line).to_have_class(re.compile(r"nbm-mod-untrusted"))
    expect(line.locator(".nbm-CheckExpr")).to_have_text("orders.customer.notna().all()")
    note_id = shown.get_attribute("data-note-id")
    expect(line.locator(".nbm-CheckUntrusted")).to_have_text(
        f"Not trusted: written by ana. It is code and does not run until you read it above "
        f"and run %memory trust {note_id} in a notebook.")
    assert checks_by_note(lab)[int(note_id)]["trusted"] is False
    screenshot(page, "panel-check-untrusted.png")



def test_recheck_in_a_kernel_without_nbmemory_says_to_load_it(page, lab):
    import pandas as pd

    with Memory.open(lab.store, mode="service") as memory:
        note = memory.remember("every order is paid", check="orders.paid.all()",
                               namespace={"orders": pd.DataFrame({"paid": [True]})})
    run_notebook(page, lab, "not-loaded.ipynb", ["x = 1"])
    expect(page.locator(".jp-NotebookPanel .jp-Cell").first.locator(".jp-InputPrompt")
           ).to_have_text("[1]:", timeout=60_000)
    refresh(page)
    card(page, "every order is paid").locator(".nbm-Recheck").click()
    # IPython prints a missing magic's UsageError: the panel reads it and says what to do.
    expect(toast(page, "nbmemory is not loaded in the kernel of not-loaded.ipynb: run "
                       "%load_ext nbmemory there.")).to_be_visible(timeout=30_000)
    # Remember Output there: IPython 9 words the missing cell magic without "function", and
    # the raw UsageError was shown while the finding typed in the dialog was lost.
    before = lab.api("notes")[1]["total"]
    page.locator(".jp-NotebookPanel .jp-Cell").first.locator(".jp-InputPrompt").click(
        button="right")
    context_menu_item(page, "Remember Output…").click()
    page.locator(".jp-Dialog input").fill("x is one after the first cell")
    page.locator(".jp-Dialog .jp-mod-accept").click()
    expect(toast(page, "nbmemory is not loaded in the kernel of not-loaded.ipynb: run "
                       "%load_ext nbmemory there. Your finding is on the clipboard.")
           ).to_be_visible(timeout=30_000)
    assert page.evaluate("() => Promise.race([navigator.clipboard.readText(), new Promise("
                         "r => setTimeout(() => r('(clipboard unreadable)'), 5000))])") == \
        "x is one after the first cell"
    assert lab.api("notes")[1]["total"] == before
    close_notebook(page)
