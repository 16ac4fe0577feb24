"""What the panel shows and how: long notes, tag chips, renamed notebooks, inserted notes,
notices, the empty state, a narrow sidebar, scores and snapshot names (issue 17, items
4, 5, 6, 7 and 10)."""

from __future__ import annotations

import os
import re
import time

import nbformat
import pytest
from playwright.sync_api import expect

from .conftest import screenshot, start_lab, stop_lab, toast
from .test_panel import PANEL, card, card_of, close_notebook, refresh, widen_sidebar


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    instance = start_lab(tmp_path_factory.mktemp("lab"))
    yield instance
    stop_lab(instance)


def test_the_empty_state_helps_right_below_the_search_box(page, lab):
    """First in this module: the store is empty."""
    help_ = page.locator(f"{PANEL} .nbm-Empty")
    expect(help_).to_contain_text("No notes yet.")
    expect(help_).to_contain_text("%remember")
    search = page.locator(f"{PANEL} .nbm-Search").bounding_box()
    below = help_.bounding_box()["y"] - (search["y"] + search["height"])
    assert 0 <= below < 60, f"the help is {below:.0f} px below the search box"
    screenshot(page, "panel-empty-250.png")


def test_long_notes_are_clamped_and_open_on_click(page, lab):
    long = lab.remember("A long finding about the ledger. " + "The ledger row repeats. " * 900)
    short = lab.remember("a short note needs no Show more")
    refresh(page)
    shown = card_of(page, long)
    expect(shown.locator(".nbm-Expand")).to_have_text("Show more")
    assert shown.bounding_box()["height"] < 450
    shown.locator(".nbm-Clamp").click()
    expect(shown.locator(".nbm-Expand")).to_have_text("Show less")
    assert shown.bounding_box()["height"] > 2000
    shown.locator(".nbm-Expand").click()
    expect(shown.locator(".nbm-Expand")).to_have_text("Show more")
    assert shown.bounding_box()["height"] < 450
    expect(card_of(page, short).locator(".nbm-Expand")).to_have_count(0)
    # Editing it says a long note is better split (the panel's "warning at remember time").
    shown.locator(".nbm-Edit").click()
    expect(shown.locator(".nbm-EditHint")).to_contain_text("A long note (")
    shown.locator(".nbm-EditText").press("Escape")
    expect(shown.locator(".nbm-Editor")).to_have_count(0)
    # A snapshot diff lists the start of a long note, not all of it.
    assert lab.api("snapshots", "POST", {"name": "before-long"})[0] == 201
    lab.remember("Another long one. " + "It goes on. " * 2000)
    page.locator(f"{PANEL} .nbm-Tab", has_text="Snapshots").click()
    page.locator(f"{PANEL} .nbm-DiffFrom").select_option("before-long")
    page.locator(f"{PANEL} .nbm-Compare").click()
    added = page.locator(f"{PANEL} .nbm-DiffSection.nbm-mod-added li")
    expect(added).to_contain_text("Another long one.")
    assert len(added.inner_text()) < 400
    page.locator(f"{PANEL} .nbm-Tab", has_text="Notes").click()


def test_a_link_to_a_relative_path_is_text_and_a_web_link_stays_a_link(page, lab):
    """A note's link to cfg.py names a file where the note was written: it opened the
    server's root (a 404) or a new workspace named cfg.py."""
    note = lab.remember("see [the config](cfg.py) and [the docs](https://example.org/docs)")
    refresh(page)
    text = card_of(page, note).locator(".nbm-NoteText")
    expect(text.locator(".nbm-PathLink")).to_have_text("the config")
    expect(text.locator(".nbm-PathLink")).to_have_attribute("title", "cfg.py")
    expect(text.locator("a")).to_have_count(1)
    expect(text.locator("a")).to_have_attribute("href", "https://example.org/docs")


def test_a_heading_in_a_note_is_no_anchor_of_the_page(page, lab):
    """Found by a walkthrough: a heading's ¶ link set the Lab's URL to /lab#Loading, and
    two notes with one heading gave the page two elements of one id."""
    notes = [lab.remember(f"# Loading\nthe {which} loader retries three times")
             for which in ("parquet", "csv")]
    refresh(page)
    for note in notes:
        text = card_of(page, note).locator(".nbm-NoteText")
        expect(text.locator("h1")).to_have_text("Loading")
        expect(text.locator("a")).to_have_count(0)
        expect(text.locator("[id]")).to_have_count(0)
    assert "#" not in page.url


def test_tag_chips_show_and_toggle_the_tag_filter_and_the_box_applies_live(page, lab):
    alpha = lab.remember("chip note alpha", tags="chips,alpha")
    beta = lab.remember("chip note beta", tags="chips,beta")
    refresh(page)
    box = page.locator(f"{PANEL} .nbm-TagFilter")
    chip = card_of(page, alpha).locator(".nbm-Tag", has_text="alpha")
    chip.click()
    expect(box).to_have_value("alpha")
    expect(page.locator(f"{PANEL} .nbm-Note")).to_have_count(1)
    chip = card_of(page, alpha).locator(".nbm-Tag", has_text="alpha")
    expect(chip).to_have_attribute("aria-pressed", "true")
    expect(chip).to_have_class(re.compile(r"\bnbm-mod-active\b"))
    chip.click()  # again: the filter goes
    expect(box).to_have_value("")
    expect(card_of(page, beta)).to_be_visible()
    expect(card_of(page, alpha).locator(".nbm-Tag", has_text="alpha")).to_have_attribute(
        "aria-pressed", "false")
    # Typing in the tags box applies by itself, like the search box (no Enter, no blur).
    box.press_sequentially("beta")
    expect(page.locator(f"{PANEL} .nbm-Note")).to_have_count(1)
    expect(card_of(page, beta)).to_be_visible()
    expect(box).to_be_focused()
    box.fill("")
    expect(card_of(page, alpha)).to_be_visible()


def test_notes_in_other_scripts_read_in_their_own_direction_and_say_how_they_were_found(
        page, lab):
    """A Hebrew note read left to right in an English page; a Chinese question was answered
    by a model that cannot read it, with no word of that."""
    hebrew = lab.remember("עמודת הסכום נשמרת באגורות לפני מרץ 2021.", tags="סכום")
    chinese = lab.remember("订单金额在2021年3月之前以分为单位存储。")
    refresh(page)
    direction = "el => getComputedStyle(el).direction"
    assert card_of(page, hebrew).locator(".nbm-NoteText").evaluate(direction) == "rtl"
    assert card_of(page, hebrew).locator(".nbm-Tag").evaluate(direction) == "rtl"
    assert card_of(page, chinese).locator(".nbm-NoteText").evaluate(direction) == "ltr"
    search = page.locator(f"{PANEL} .nbm-Search")
    search.fill("金额单位")
    search.press("Enter")
    expect(page.locator(f"{PANEL} .nbm-Note")).to_have_count(1)
    expect(card_of(page, chinese)).to_be_visible()
    expect(page.locator(f"{PANEL} .nbm-Behind")).to_contain_text(
        "Keyword matches only: the model hash reads English")
    search.fill("")
    search.press("Enter")
    expect(page.locator(f"{PANEL} .nbm-Behind")).to_have_count(0)


def test_a_renamed_notebook_gets_a_clear_message_not_a_404_and_a_ghost_tab(page, lab):
    notebook = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("sales.groupby('region').sum()")
    notebook.cells = [nbformat.v4.new_markdown_cell("# Sales"), cell]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    nbformat.write(notebook, lab.root / "Untitled7.ipynb")
    note = lab.remember("sales by region double counts returns",
                        provenance={"notebook": "Untitled7.ipynb", "cell_id": cell.id})
    (lab.root / "reports").mkdir()
    os.rename(lab.root / "Untitled7.ipynb", lab.root / "reports" / "sales-notes.ipynb")
    refresh(page)
    card_of(page, note).locator(".nbm-SourceLink").click()
    message = toast(page, "Untitled7.ipynb is no longer there.")
    expect(message).to_contain_text("Its cell is now in reports/sales-notes.ipynb.")
    expect(page.locator(".jp-Dialog")).to_have_count(0)
    expect(page.locator(".jp-NotebookPanel")).to_have_count(0)  # no ghost tab
    expect(page.locator(".lm-TabBar-tab", has_text="Untitled7.ipynb")).to_have_count(0)
    message.get_by_role("button", name="Open reports/sales-notes.ipynb").click()
    active = page.locator(".jp-NotebookPanel .jp-Cell.jp-mod-active")
    expect(active).to_contain_text("sales.groupby('region').sum()")
    close_notebook(page)
    # Removed while its session still held it, JupyterLab reloaded it and showed a "File Load
    # Error" dialog over the panel (once in CI, on a loaded machine): end the session, and
    # wait until the server says so (the running list is polled, and lagged 30 s once).
    page.evaluate("""async () => {
        const sessions = window.jupyterapp.serviceManager.sessions;
        await sessions.refreshRunning();
        for (const s of [...sessions.running()].filter(s => s.path.includes('sales-notes'))) {
            await sessions.shutdown(s.id).catch(() => undefined);  // ended meanwhile
        }
        await sessions.refreshRunning();
    }""")
    page.wait_for_function("() => ![...window.jupyterapp.serviceManager.sessions.running()]"
                           ".some(s => s.path.includes('sales-notes'))")
    # Gone for good: said so, nothing opened.
    os.remove(lab.root / "reports" / "sales-notes.ipynb")
    card_of(page, note).locator(".nbm-SourceLink").click()
    expect(toast(page, "Untitled7.ipynb is no longer there (renamed, moved or deleted), and no "
                       "notebook here holds its cell.")).to_be_visible()
    expect(page.locator(".jp-Dialog")).to_have_count(0)
    expect(page.locator(".jp-NotebookPanel")).to_have_count(0)


HOSTILE = ("Raw <img src=x onerror=\"window.pwned=1\"> and <script>window.pwned=2</script> "
           "stay text; so do AT&T and &lt;.\n\n"
           "A tracker ![who reads](http://127.0.0.1:9/pixel.png?note) is a link.\n\n"
           "    if a < b && c:\n"
           "        return a\n\n"
           "Inline `x < y && z` and a fence:\n\n"
           "```python\nprint(1 < 2 & 3)\n```\n\n"
           "- a list item with <b>bold?</b>\n\n"
           "    a paragraph of the item, not code: 1 < 2\n")


def test_insert_reads_exactly_as_the_panel_shows_the_note(page, lab):
    note = lab.remember(HOSTILE)
    # The command resolves to the notebook widget, which the page cannot hand back.
    page.evaluate("async () => { await window.jupyterapp.commands.execute("
                  "'notebook:create-new', {kernelName: 'python3'}); }")
    page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for()
    page.evaluate("() => window.jupyterapp.commands.execute('nbmemory:open')")
    refresh(page)
    shown = card_of(page, note).locator(".nbm-NoteText")
    card_of(page, note).locator(".nbm-Insert").click()
    cell = page.locator(".jp-NotebookPanel .jp-MarkdownCell", has_text=f"nbmemory #{note['id']}")
    rendered = cell.locator(".jp-RenderedMarkdown")
    expect(rendered).to_contain_text("Raw <img src=x onerror=\"window.pwned=1\"> and "
                                     "<script>window.pwned=2</script> stay text")
    for where in (rendered, shown):
        expect(where).to_contain_text("so do AT&T and &lt;.")
        expect(where.locator("pre").first).to_contain_text("if a < b && c:")
        assert "&lt;" not in where.locator("pre").first.inner_text()
        expect(where.locator("code", has_text="x < y && z")).to_have_count(1)
        expect(where.locator("pre", has_text="print(1 < 2 & 3)")).to_have_count(1)
        expect(where.locator("li")).to_contain_text("a list item with <b>bold?</b>")
        expect(where.locator("li")).to_contain_text("a paragraph of the item, not code: 1 < 2")
        assert where.locator("img, script, b").count() == 0
        expect(where.locator("a", has_text="image: who reads")).to_have_count(1)
    assert page.evaluate("() => window.pwned") is None
    # The cell reads as the card, line for line, under the header line.
    inserted = rendered.inner_text().split("\n", 1)[1]
    assert inserted.split() == shown.inner_text().split()
    close_notebook(page)


def test_notices_are_notifications_and_undo_stays_about_ten_seconds(page, lab):
    note = lab.remember("forget me through a notification")
    refresh(page)
    card_of(page, note).locator(".nbm-Forget").click()
    notice = toast(page, f"Forgot #{note['id']}.")
    expect(notice).to_be_visible()
    shown_at = time.monotonic()
    expect(notice.get_by_role("button", name="Undo")).to_be_visible()
    assert page.locator(f"{PANEL} .nbm-Notice").count() == 0, "no notices stacked in the panel"
    expect(notice).to_have_count(0, timeout=20_000)
    kept = time.monotonic() - shown_at
    assert 7 < kept < 16, f"Undo was offered for {kept:.1f} s"
    assert lab.api(f"notes/{note['id']}")[1]["note"]["status"] == "revoked"


def row_of(locator) -> set[int]:
    return {round(locator.nth(i).bounding_box()["y"]) for i in range(locator.count())}


@pytest.mark.parametrize("width", [250, 400])
def test_header_and_filters_fit_one_row_each(page, lab, width):
    lab.remember("a note so that the list is not empty", tags="layout")
    refresh(page)
    widen_sidebar(page, width)
    panel = page.locator(PANEL).bounding_box()
    right = panel["x"] + panel["width"]
    header = page.locator(f"{PANEL} .nbm-Header > *")
    filters = page.locator(f"{PANEL} .nbm-Filters > *")
    for row in (header, filters):
        tops = row_of(row)
        assert max(tops) - min(tops) <= 4, f"wrapped onto more rows: {tops}"
        for i in range(row.count()):
            box = row.nth(i).bounding_box()
            assert box["x"] + box["width"] <= right + 0.5, f"item {i} overflows the panel"
    refresh_button = page.locator(f"{PANEL} .nbm-Refresh").bounding_box()
    assert refresh_button["x"] + refresh_button["width"] <= right


def test_recall_scores_are_labelled(page, lab):
    lab.remember("acquire_lock must run before touching workspace metadata", tags="locks")
    refresh(page)
    search = page.locator(f"{PANEL} .nbm-Search")
    search.fill("acquire_lock")
    search.press("Enter")
    score = page.locator(f"{PANEL} .nbm-Note").first.locator(".nbm-Score")
    expect(score).to_have_text(re.compile(r"^score \d\.\d\d$"))
    expect(score).to_have_attribute("title", re.compile("Recall score"))
    search.fill("")
    search.press("Enter")


def test_long_snapshot_names_stay_inside_the_panel(page, lab):
    name = "quarterly-revenue-reconciliation-after-the-2021-currency-switch-" + "x" * 60
    assert lab.api("snapshots", "POST", {"name": name, "message": "m " * 60})[0] == 201
    widen_sidebar(page, 250)
    page.locator(f"{PANEL} .nbm-Tab", has_text="Snapshots").click()
    table = page.locator(f"{PANEL} .nbm-SnapshotTable")
    expect(table).to_contain_text(name[:20])
    panel = page.locator(PANEL).bounding_box()
    box = table.bounding_box()
    assert box["x"] + box["width"] <= panel["x"] + panel["width"] + 0.5
    scroll = page.evaluate("() => { const s = document.querySelector('#nbmemory-panel "
                           ".nbm-Snapshots'); return [s.scrollWidth, s.clientWidth]; }")
    assert scroll[0] <= scroll[1], f"the snapshots scroll sideways: {scroll}"
    page.locator(f"{PANEL} .nbm-Tab", has_text="Notes").click()


def test_a_long_snapshot_message_is_cut_until_asked_for(page, lab):
    """Found by a walkthrough: a 600-character message took most of the tab at 250 px and
    pushed Compare down; notes are cut with Show more, the messages were not."""
    message = "why this moment matters: " + "the ledger was reconciled again " * 18
    assert lab.api("snapshots", "POST", {"name": "long-message", "message": message})[0] == 201
    page.locator(f"{PANEL} .nbm-Tab", has_text="Snapshots").click()
    cell = page.locator(f"{PANEL} .nbm-SnapshotTable tr", has_text="long-message").locator(
        ".nbm-SnapshotMessage")
    expect(cell).to_contain_text("why this moment matters")
    assert len(cell.inner_text()) < 200
    cell.get_by_role("button", name="Show more").click()
    expect(cell).to_contain_text(message.strip())
    cell.get_by_role("button", name="Show less").click()
    assert len(cell.inner_text()) < 200
    page.locator(f"{PANEL} .nbm-Tab", has_text="Notes").click()


def test_a_snapshot_diff_renders_notes_as_cards_do_and_folds_a_long_section(page, lab):
    """Last in this module (it adds 60 notes). The diff shows a note's Markdown rendered
    (bold, code), its raw HTML as text; a section of more than 50 notes is folded under
    its title and count, and lists them once opened."""
    assert lab.api("snapshots", "POST", {"name": "diff-before"})[0] == 201
    lab.remember("orders.amount is in **cents**; see `data/orders.csv` <b>not bold</b>")
    for i in range(60):
        lab.remember(f"bulk note {i} from the nightly import", tags="bulk")
    assert lab.api("snapshots", "POST", {"name": "diff-after"})[0] == 201
    page.locator(f"{PANEL} .nbm-Tab", has_text="Snapshots").click()
    page.locator(f"{PANEL} .nbm-DiffFrom").select_option("diff-before")
    page.locator(f"{PANEL} .nbm-DiffTo").select_option("diff-after")
    page.locator(f"{PANEL} .nbm-Compare").click()
    added = page.locator(f"{PANEL} .nbm-DiffSection.nbm-mod-added")
    title = added.locator(".nbm-DiffTitle")
    expect(title).to_have_text("added (61)")
    items = added.locator("li")
    expect(items).to_have_count(0)  # folded: 61 notes are not one endless list
    title.click()
    expect(items).to_have_count(61)
    cents = items.filter(has_text="orders.amount is in")
    expect(cents.locator(".nbm-NoteText strong")).to_have_text("cents")
    expect(cents.locator(".nbm-NoteText code")).to_have_text("data/orders.csv")
    expect(cents).not_to_contain_text("**")
    expect(cents).to_contain_text("<b>not bold</b>")  # raw HTML reads as text, as on cards
    expect(cents.locator(".nbm-NoteText b")).to_have_count(0)
    title.click()
    expect(items).to_have_count(0)
    page.locator(f"{PANEL} .nbm-Tab", has_text="Notes").click()
