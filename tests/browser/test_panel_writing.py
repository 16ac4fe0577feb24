"""Writing notes from the UI: "+ New note", "Remember…" on a cell or a selection, the
shortcut, and the edit box (issue 17, items 3 and 10)."""

from __future__ import annotations

import nbformat
import pytest
from playwright.sync_api import expect

from .conftest import start_lab, stop_lab, toast
from .test_panel import PANEL, card, card_of, close_notebook, refresh


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    instance = start_lab(tmp_path_factory.mktemp("lab"))
    yield instance
    stop_lab(instance)


def open_notebook(page, lab, name: str, cells) -> nbformat.NotebookNode:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = cells
    # A kernelspec: Lab starts its kernel instead of asking which one.
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    nbformat.write(notebook, lab.root / name)
    page.evaluate("async () => { await window.jupyterapp.commands.execute('docmanager:open', "
                  f"{{path: '{name}', factory: 'Notebook'}}); }}")
    page.locator(".jp-NotebookPanel .jp-Cell").nth(len(cells) - 1).wait_for()
    return notebook


def context_menu_item(page, label: str):
    return page.locator(".lm-Menu .lm-Menu-item", has_text=label)


def test_new_note_from_the_panel(page, lab):
    page.locator(f"{PANEL} .nbm-NewNote").click()
    form = page.locator(f"{PANEL} .nbm-NewNote-Form")
    text = form.locator(".nbm-EditText")
    expect(text).to_be_focused()
    text.fill("the export job runs at 03:00 UTC, after the warehouse load")
    form.locator(".nbm-EditKind").select_option("reference")
    form.locator(".nbm-EditPriority").select_option("high")
    form.locator(".nbm-EditTags").fill("export, ops")
    form.locator(".nbm-Save").click()
    expect(toast(page, "Remembered #")).to_be_visible()
    expect(form).to_have_count(0)
    shown = card(page, "the export job runs at 03:00 UTC")
    expect(shown.locator(".nbm-Kind")).to_have_text("reference")
    expect(shown.locator(".nbm-Priority")).to_have_text("high")
    expect(shown.locator(".nbm-Tag")).to_have_text(["export", "ops"])
    expect(shown.locator(".nbm-Provenance")).to_contain_text("not from a notebook (panel)")
    expect(shown).to_be_focused()  # not the page's body: a keyboard user goes on from it


def test_new_note_cancels_on_escape_and_refuses_an_empty_text(page, lab):
    page.locator(f"{PANEL} .nbm-NewNote").click()
    form = page.locator(f"{PANEL} .nbm-NewNote-Form")
    form.locator(".nbm-EditText").fill("  \n ")
    form.locator(".nbm-Save").click()
    problem = form.locator(".nbm-EditProblem")
    expect(problem).to_have_text(
        "The note is empty: write what you found, or press Escape to cancel.")
    form.locator(".nbm-EditText").press("Escape")
    expect(form).to_have_count(0)
    # Focus goes back to the + button (inside JupyterLab 4.6's <jp-button>), not the page.
    expect(page.locator(f"{PANEL} .nbm-NewNote")).to_be_focused()


def test_a_tag_with_a_space_is_said_beside_the_tags_before_anything_is_sent(page, lab):
    """The server's refusal was a toast that passed while the form stayed as it was."""
    page.locator(f"{PANEL} .nbm-NewNote").click()
    form = page.locator(f"{PANEL} .nbm-NewNote-Form")
    form.locator(".nbm-EditText").fill("the export runs at 02:00")
    form.locator(".nbm-EditTags").fill("orders, two words")
    form.locator(".nbm-Save").click()
    expect(form.locator(".nbm-EditProblem")).to_have_text(
        "Tag “two words” contains a space: a tag is one word (join its words with - or _); "
        "separate tags with commas.")
    expect(form.locator(".nbm-EditTags")).to_be_focused()
    form.locator(".nbm-EditTags").fill("orders, two-words")
    expect(form.locator(".nbm-EditProblem")).to_have_count(0)
    form.locator(".nbm-Save").click()
    expect(card(page, "the export runs at 02:00").locator(".nbm-Tag")).to_have_text(
        ["orders", "two-words"])


def test_remember_from_a_cells_context_menu_links_back_to_the_cell(page, lab):
    code = nbformat.v4.new_code_cell("rows = len(orders)\nrows")
    open_notebook(page, lab, "remember-cell.ipynb",
                  [nbformat.v4.new_markdown_cell("# Orders"), code])
    page.locator(".jp-NotebookPanel .jp-Cell").nth(1).click(button="right")
    context_menu_item(page, "Remember…").click()
    form = page.locator(f"{PANEL} .nbm-NewNote-Form")
    expect(form.locator(".nbm-EditWhere")).to_have_text("From remember-cell.ipynb, cell 2")
    expect(form.locator(".nbm-EditText")).to_have_value("")
    expect(form.locator(".nbm-EditText")).to_be_focused()
    page.keyboard.type("orders has one row per order line, not per order")
    page.keyboard.press("Control+Enter")
    shown = card(page, "one row per order line")
    expect(shown.locator(".nbm-SourceLink")).to_have_text("remember-cell.ipynb")
    note = lab.api(f"notes/{shown.get_attribute('data-note-id')}")[1]["note"]
    p = note["provenance"]
    assert p["notebook"] == str((lab.root / "remember-cell.ipynb").resolve())
    assert p["cell_id"] == code.id and p["cell_source"] == code.source
    assert p["source"] == "panel" and note["lab_path"] == "remember-cell.ipynb"
    # The link goes back to that cell.
    page.locator(".jp-NotebookPanel .jp-Cell").nth(0).click()
    shown.locator(".nbm-SourceLink").click()
    expect(page.locator(".jp-NotebookPanel .jp-Cell.jp-mod-active")).to_contain_text(
        "rows = len(orders)")
    close_notebook(page)


def test_a_note_being_written_survives_a_tab_switch_a_second_plus_and_a_cells_remember(
        page, lab):
    """Found by a walkthrough: Snapshots and back, + again, or a cell's Remember… emptied
    the form, with no question asked: the note being written was gone."""
    new_note = page.locator(f"{PANEL} .nbm-NewNote")
    new_note.click()
    form = page.locator(f"{PANEL} .nbm-NewNote-Form")
    form.locator(".nbm-EditText").fill("half of a finding about the refunds table")
    form.locator(".nbm-EditTags").fill("refunds, keep")
    page.locator(f"{PANEL} #nbm-tab-snapshots").click()
    expect(form).to_have_count(0)
    page.locator(f"{PANEL} #nbm-tab-notes").click()
    expect(form.locator(".nbm-EditText")).to_have_value("half of a finding about the refunds table")
    expect(form.locator(".nbm-EditTags")).to_have_value("refunds, keep")
    new_note.click()
    expect(form.locator(".nbm-EditText")).to_have_value("half of a finding about the refunds table")
    expect(form.locator(".nbm-EditText")).to_be_focused()
    open_notebook(page, lab, "remember-over.ipynb", [nbformat.v4.new_code_cell("refunds = 3")])
    cell_ = page.locator(".jp-NotebookPanel .jp-Cell").nth(0)
    cell_.click(button="right")
    context_menu_item(page, "Remember…").click()
    dialog = page.locator(".jp-Dialog")
    expect(dialog).to_contain_text("Replace the note you are writing?")
    dialog.get_by_role("button", name="Keep writing").click()
    expect(form.locator(".nbm-EditText")).to_have_value("half of a finding about the refunds table")
    expect(form.locator(".nbm-EditWhere")).to_have_count(0)
    cell_.click(button="right")
    context_menu_item(page, "Remember…").click()
    dialog.get_by_role("button", name="Replace it").click()
    expect(form.locator(".nbm-EditWhere")).to_have_text("From remember-over.ipynb, cell 1")
    expect(form.locator(".nbm-EditText")).to_have_value("")
    form.locator(".nbm-EditText").press("Escape")  # nothing typed: no question
    expect(form).to_have_count(0)
    close_notebook(page)


def test_remember_the_selected_text_of_a_cell(page, lab):
    open_notebook(page, lab, "remember-selection.ipynb", [
        nbformat.v4.new_markdown_cell("Amounts before 2021 are **in cents**; after, in euros."),
        nbformat.v4.new_code_cell("x = 1")])
    rendered = page.locator(".jp-NotebookPanel .jp-MarkdownCell .jp-RenderedMarkdown")
    rendered.wait_for()
    page.evaluate("""() => {
        const strong = document.querySelector('.jp-MarkdownCell .jp-RenderedMarkdown strong');
        window.getSelection().selectAllChildren(strong);
    }""")
    rendered.locator("strong").click(button="right")
    context_menu_item(page, "Remember Selection…").click()
    form = page.locator(f"{PANEL} .nbm-NewNote-Form")
    expect(form.locator(".nbm-EditText")).to_have_value("in cents")
    expect(form.locator(".nbm-EditWhere")).to_have_text("From remember-selection.ipynb, cell 1")
    form.locator(".nbm-Cancel").click()
    expect(form).to_have_count(0)
    close_notebook(page)


def test_remember_has_a_keyboard_shortcut(page, lab):
    open_notebook(page, lab, "remember-shortcut.ipynb", [
        nbformat.v4.new_markdown_cell("The nightly load finishes at 02:40."),
        nbformat.v4.new_code_cell("load_time()")])
    page.locator(".jp-NotebookPanel .jp-Cell").nth(1).locator(".jp-InputPrompt").click()
    expect(page.locator(".jp-NotebookPanel .jp-Cell.jp-mod-active")).to_contain_text(
        "load_time()")
    page.keyboard.press("Control+Alt+R")
    form = page.locator(f"{PANEL} .nbm-NewNote-Form")
    expect(form.locator(".nbm-EditWhere")).to_have_text("From remember-shortcut.ipynb, cell 2")
    form.locator(".nbm-EditText").press("Escape")
    expect(form).to_have_count(0)
    close_notebook(page)


def test_edit_box_is_roomy_changes_the_kind_and_cancels_on_escape(page, lab):
    note = lab.remember("the retry limit is 3", kind="finding", tags="config")
    refresh(page)
    shown = card_of(page, note)
    shown.locator(".nbm-Edit").click()
    text = shown.locator(".nbm-EditText")
    expect(text).to_be_focused()
    assert text.bounding_box()["height"] >= 100, "at least about six lines"
    fonts = page.evaluate("() => [getComputedStyle(document.querySelector("
                          "'#nbmemory-panel .nbm-EditText')).fontFamily, getComputedStyle("
                          "document.body).getPropertyValue('--jp-code-font-family')]")
    assert fonts[0].strip() != fonts[1].strip(), "note text is prose, not code"
    dirty = "() => window.jupyterapp.status.isDirty"
    assert page.evaluate(dirty) is False  # opened, nothing typed yet
    text.fill("the retry limit is 3, then a 30 s back-off")
    # Typing not yet saved: closing or reloading the page asks first, as for a notebook.
    page.wait_for_function(dirty)
    # Escape with changes asks once; a second Escape discards them.
    text.press("Escape")
    expect(shown.locator(".nbm-Discard")).to_have_text(
        "Press Escape again to discard your changes, or Ctrl+Enter to save them.")
    expect(text).to_have_value("the retry limit is 3, then a 30 s back-off")
    text.press("Escape")
    expect(shown.locator(".nbm-Editor")).to_have_count(0)
    page.wait_for_function(f"() => !({dirty})()")
    expect(shown.locator(".nbm-NoteText")).to_have_text("the retry limit is 3")
    assert lab.api(f"notes/{note['id']}")[1]["note"]["version"] == 1
    shown.locator(".nbm-Edit").click()
    shown.locator(".nbm-EditKind").select_option("gotcha")
    shown.locator(".nbm-Save").click()
    edited = card_of(page, note)
    expect(edited.locator(".nbm-Kind")).to_have_text("gotcha")
    expect(edited.locator(".nbm-Version")).to_have_text("v2")
    assert lab.api(f"notes/{note['id']}")[1]["note"]["kind"] == "gotcha"


def test_an_empty_edit_says_so_plainly(page, lab):
    note = lab.remember("an edit that will be refused")
    refresh(page)
    shown = card_of(page, note)
    shown.locator(".nbm-Edit").click()
    shown.locator(".nbm-EditText").fill("")
    shown.locator(".nbm-Save").click()
    problem = shown.locator(".nbm-EditProblem")
    expect(problem).to_have_text(
        "The note is empty: write what you found, or press Escape to cancel.")
    assert "%remember" not in problem.inner_text()
    assert lab.api(f"notes/{note['id']}")[1]["note"]["version"] == 1


def test_edit_opened_from_the_keyboard_types_after_the_text(page, lab):
    """Enter on a card's Edit: the caret is at the end of the text, so typing goes on from
    there (it was at the start, and what was typed came before the note)."""
    note = lab.remember("the batch size is 64")
    refresh(page)
    shown = card_of(page, note)
    shown.locator(".nbm-Edit").focus()
    page.keyboard.press("Enter")
    text = shown.locator(".nbm-EditText")
    expect(text).to_be_focused()
    page.keyboard.type(" on the GPU")
    expect(text).to_have_value("the batch size is 64 on the GPU")
    page.keyboard.press("Control+Enter")
    expect(shown.locator(".nbm-NoteText")).to_have_text("the batch size is 64 on the GPU")


def test_saving_an_edit_of_a_note_forgotten_meanwhile_says_so_once_and_keeps_the_text(
        page, lab):
    """Found by a walkthrough: the save was sent three times (a 409 was taken for a version
    written in between) and focus fell to the page's body with the Save button."""
    note = lab.remember("the refunds job runs hourly")
    refresh(page)
    shown = card_of(page, note)
    shown.locator(".nbm-Edit").click()
    text = shown.locator(".nbm-EditText")
    text.fill("the refunds job runs every 30 minutes")
    assert lab.api(f"notes/{note['id']}/forget", "POST")[0] == 200
    refresh(page)
    sent = []
    page.on("request", lambda r: sent.append(r.method) if r.method == "PATCH" else None)
    shown.locator(".nbm-Save").click()
    expect(toast(page, f"Cannot edit note #{note['id']}: it is forgotten")).to_be_visible()
    expect(text).to_be_focused()
    expect(text).to_have_value("the refunds job runs every 30 minutes")
    assert sent == ["PATCH"]
    text.press("Escape")
    text.press("Escape")
    lab.api(f"notes/{note['id']}/reinstate", "POST")


def test_a_new_note_the_filters_hide_says_so(page, lab):
    """Found by a walkthrough: with a filter on, a new note of another kind closed the
    form and seemed to vanish ("Remembered #29." passed, the list unchanged)."""
    kinds = page.locator(f"{PANEL} .nbm-KindFilter")
    kinds.select_option("gotcha")
    try:
        page.locator(f"{PANEL} .nbm-NewNote").click()
        form = page.locator(f"{PANEL} .nbm-NewNote-Form")
        form.locator(".nbm-EditText").fill("the tax table is loaded before the orders")
        form.locator(".nbm-Save").click()
        expect(toast(page, "The search or the filters hide it: clear them to see it.")
               ).to_be_visible()
        expect(card(page, "the tax table is loaded before")).to_have_count(0)
        page.locator(f"{PANEL} .nbm-NewNote").click()
        form.locator(".nbm-EditText").fill("a null discount means no discount, not unknown")
        form.locator(".nbm-EditKind").select_option("gotcha")
        form.locator(".nbm-Save").click()
        shown = card(page, "a null discount means no discount")
        expect(shown).to_be_visible()
        said = toast(page, f"Remembered #{shown.get_attribute('data-note-id')}.")
        expect(said).to_be_visible()
        expect(said).not_to_contain_text("hide")
    finally:
        kinds.select_option("")


def test_a_note_not_remembered_says_why_in_its_form(page, lab):
    """Found by a walkthrough: with the server down, the reason was a toast alone, and
    JupyterLab could not show one (its notifications load from that server): the form
    closed nothing and said nothing. It says why beside the text it keeps."""
    def remember(url: str) -> bool:
        return url.split("?")[0].endswith("/nbmemory/notes")

    page.route(remember, lambda route: route.abort() if route.request.method == "POST"
               else route.continue_())  # what a stopped server gives
    try:
        page.locator(f"{PANEL} .nbm-NewNote").click()
        form = page.locator(f"{PANEL} .nbm-NewNote-Form")
        form.locator(".nbm-EditText").fill("the vat rate changed in April")
        form.locator(".nbm-Save").click()
        expect(form.locator(".nbm-EditProblem")).to_have_text(
            "JupyterLab's server is not responding (stopped, or the network is down). Your "
            "note is kept in the form; save it once the server is back.")
        expect(form.locator(".nbm-EditText")).to_have_value("the vat rate changed in April")
        # The note is all there is of it: Escape asks before it goes (review: it did not).
        form.locator(".nbm-EditText").press("Escape")
        expect(form.locator(".nbm-Discard")).to_be_visible()
        expect(form.locator(".nbm-EditText")).to_have_value("the vat rate changed in April")
    finally:
        page.unroute(remember)
    form.locator(".nbm-Save").click()
    expect(card(page, "the vat rate changed in April")).to_be_visible()
    expect(form).to_have_count(0)
