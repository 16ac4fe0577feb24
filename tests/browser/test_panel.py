"""The JupyterLab panel in real Chromium against a real ``jupyter lab``."""

from __future__ import annotations

import importlib.util
import json
import re
import urllib.request

import pytest
from playwright.sync_api import expect

from nbmemory.display import hits_html
from nbmemory.models import Hit, Hits, Note

from .conftest import (open_lab, open_notebook, put_settings, screenshot, start_lab, stop_lab,
                       toast, wait_for)

XSS = "<img src=x onerror=alert(1)>"
PANEL = "#nbmemory-panel"
NOTES = re.compile(r"/nbmemory/notes\?")


def card(page, text: str):
    return page.locator(f"{PANEL} .nbm-Note", has_text=text)


def card_of(page, note: dict):
    return page.locator(f'{PANEL} .nbm-Note[data-note-id="{note["id"]}"]')


def close_notebook(page):
    """Close the active notebook and shut its kernel down, confirming the dialog."""
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:close-and-shutdown'); }")
    page.locator(".jp-Dialog .jp-mod-accept").click()
    expect(page.locator(".jp-NotebookPanel")).to_have_count(0)


def widen_sidebar(page, width: int):
    """Drag the left sidebar's split handle so the panel is ``width`` pixels wide."""
    box = page.locator(PANEL).bounding_box()
    page.mouse.move(box["x"] + box["width"] + 2, box["y"] + 300)
    page.mouse.down()
    page.mouse.move(box["x"] + width, box["y"] + 300, steps=5)
    page.mouse.up()
    page.wait_for_function(f"() => document.querySelector('{PANEL}').offsetWidth > {width - 20}")


def refresh(page):
    page.evaluate("() => window.jupyterapp.commands.execute('nbmemory:refresh')")


def test_panel_shows_notes_with_badges_tags_and_status(page, lab):
    note = lab.remember("orders.amount is in **cents** before 2021; see `data/orders.csv`",
                        tags="orders,units", priority="high", kind="gotcha")
    refresh(page)
    shown = card(page, "orders.amount is in")
    expect(shown).to_be_visible()
    expect(shown.locator(".nbm-NoteId")).to_have_text(f"#{note['id']}")
    expect(shown.locator(".nbm-Priority")).to_have_text("high")
    expect(shown.locator(".nbm-Kind")).to_have_text("gotcha")
    expect(shown.locator(".nbm-Tag")).to_have_text(["orders", "units"])
    # Markdown renders: bold and code, not asterisks and backticks.
    expect(shown.locator(".nbm-NoteText strong")).to_have_text("cents")
    expect(shown.locator(".nbm-NoteText code")).to_have_text("data/orders.csv")
    expect(shown.locator(".nbm-Provenance")).to_contain_text("not from a notebook (panel)")
    status = page.locator(f"{PANEL} .nbm-Status")
    expect(status).to_contain_text(str(lab.store))
    expect(status).to_contain_text("hash:64")
    expect(status).to_contain_text("owner: owner service")



def test_panel_opens_from_its_sidebar_icon_and_from_the_palette(browser_context, lab):
    page = open_lab(browser_context, lab, open_panel=False)
    try:
        expect(page.locator(PANEL)).to_be_hidden()
        tab = page.locator('.jp-SideBar.jp-mod-left [data-id="nbmemory-panel"]')
        expect(tab).to_have_attribute("title", "nbmemory: what you remembered")
        tab.click()
        expect(page.locator(f"{PANEL} .nbm-Status")).to_be_visible()
        tab.click()  # a second click folds the sidebar away
        expect(page.locator(PANEL)).to_be_hidden()
        page.keyboard.press("Control+Shift+C")
        page.keyboard.type("nbmemory panel")
        page.locator(".lm-CommandPalette-item", has_text="Open the nbmemory panel").click()
        expect(page.locator(f"{PANEL} .nbm-Status")).to_be_visible()
        # Focus comes with it: a keyboard user types the query next (it stayed behind).
        expect(page.locator(f"{PANEL} .nbm-Search")).to_be_focused()
    finally:
        page.close()

def test_note_html_renders_as_text_never_as_markup(page, lab):
    lab.remember(f"{XSS} and <script>window.pwned = 1</script> stay text", tags="xss")
    refresh(page)
    shown = card(page, "stay text")
    expect(shown.locator(".nbm-NoteText")).to_contain_text(XSS)
    expect(shown.locator(".nbm-NoteText")).to_contain_text("<script>window.pwned = 1</script>")
    assert shown.locator("img").count() == 0
    assert shown.locator("script").count() == 0
    assert page.evaluate("() => window.pwned") is None
    assert page.dialogs == []


def test_recall_html_of_the_magics_renders_xss_as_text(browser_context):
    """The same note in %recall's HTML form, rendered by Chromium."""
    hits = Hits([Hit(Note(id=1, text=XSS), 0.9)], query=XSS)
    page = browser_context.new_page()
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.set_content(f"<html><body>{hits_html(hits, provenance=True)}</body></html>")
    expect(page.locator("table.nbm-table")).to_contain_text(XSS)
    assert page.locator("img").count() == 0 and dialogs == []
    page.close()


def test_recall_from_the_search_box_then_clear(page, lab):
    lab.remember("acquire_lock must run before touching workspace metadata", tags="locks")
    lab.remember("the nightly export writes parquet files to s3", tags="export")
    refresh(page)
    search = page.locator(f"{PANEL} .nbm-Search")
    search.fill("acquire_lock")
    search.press("Enter")
    expect(page.locator(f"{PANEL} .nbm-Summary")).to_contain_text("recalled for “acquire_lock”")
    first = page.locator(f"{PANEL} .nbm-Note").first
    expect(first).to_contain_text("acquire_lock must run before")
    expect(first.locator(".nbm-Score")).to_be_visible()
    expect(page.locator(f"{PANEL} .nbm-Note", has_text="nightly export")).to_have_count(0)
    search.fill("")
    search.press("Enter")
    expect(card(page, "nightly export")).to_be_visible()


def test_nothing_recalled_offers_a_way_back_that_works(page, lab):
    lab.remember("the warehouse refresh runs at dawn")
    refresh(page)
    search = page.locator(f"{PANEL} .nbm-Search")
    search.fill("zqxj vwkp")
    search.press("Enter")
    empty = page.locator(f"{PANEL} .nbm-Empty")
    expect(empty).to_contain_text("Nothing recalled. Try other words.")
    # Said where a screen reader hears a change (the summary, a live region), not only shown.
    expect(page.get_by_role("status").filter(has_text="Nothing recalled")).to_have_count(1)
    # Only a query is set (no filter): the link still clears it and lists the notes again.
    empty.locator(".nbm-ClearFilters").click()
    expect(search).to_have_value("")
    expect(search).to_be_focused()  # the link is gone: the keyboard goes on from the search
    expect(card(page, "the warehouse refresh runs at dawn")).to_be_visible()
    expect(page.locator(f"{PANEL} .nbm-Summary")).not_to_contain_text("recalled")
    expect(page.locator(f"{PANEL} .nbm-Summary")).not_to_contain_text("below the score")


def test_nothing_recalled_with_filters_says_the_filters_may_be_why(page, lab):
    """A search the filters leave empty says so, naming them: "try other words" alone sent
    the user rewording a query the filters were hiding."""
    lab.remember("the vendor feed arrives every hour", kind="finding")
    refresh(page)
    kind = page.locator(f"{PANEL} .nbm-KindFilter")
    kind.select_option("procedure")  # no note of this module is a procedure
    search = page.locator(f"{PANEL} .nbm-Search")
    search.fill("vendor feed")
    search.press("Enter")
    empty = page.locator(f"{PANEL} .nbm-Empty")
    expect(empty).to_contain_text("Nothing recalled with these filters (kind: procedure). "
                                  "Clear them or try other words.")
    expect(empty).not_to_contain_text("Nothing recalled. Try other words.")
    expect(page.locator(f"{PANEL} .nbm-Summary")).to_have_text(
        "Nothing recalled with these filters (kind: procedure). Clear them or try other words.")
    empty.locator(".nbm-ClearFilters").click()
    expect(kind).to_have_value("")
    expect(search).to_have_value("")
    expect(card(page, "the vendor feed arrives every hour")).to_be_visible()


def test_a_forgotten_note_can_be_brought_back_from_previously_believed(page, lab):
    note = lab.remember("the staging bucket is cleaned every sunday")
    assert lab.api(f"notes/{note['id']}/forget", "POST", {})[0] == 200
    refresh(page)
    search = page.locator(f"{PANEL} .nbm-Search")
    search.fill("staging bucket cleaned every sunday")
    search.press("Enter")
    before = page.locator(f"{PANEL} .nbm-Previously")
    expect(before).to_contain_text(f"Previously believed (#{note['id']}, forgotten):")
    before.get_by_role("button", name=f"Bring back #{note['id']}").click()
    expect(toast(page, f"Reinstated #{note['id']}.")).to_be_visible()
    expect(card_of(page, note)).to_be_visible()
    expect(card_of(page, note)).to_be_focused()
    assert lab.api(f"notes/{note['id']}")[1]["note"]["status"] == "active"
    # Forgotten again elsewhere meanwhile: the panel says so in a notebook's words.
    assert lab.api(f"notes/{note['id']}/forget", "POST", {})[0] == 200
    card_of(page, note).locator(".nbm-Forget").click()
    expect(toast(page, f"Note #{note['id']} is already forgotten; %memory reinstate "
                       f"{note['id']} brings it back.")).to_be_visible()
    search.fill("")
    search.press("Enter")


def test_filters_narrow_the_list(page, lab):
    lab.remember("filter me: a low priority question", priority="low", kind="question",
                 tags="filters")
    lab.remember("filter me: a high priority decision", priority="high", kind="decision",
                 tags="filters")
    refresh(page)
    page.locator(f"{PANEL} .nbm-TagFilter").fill("filters")
    page.locator(f"{PANEL} .nbm-TagFilter").press("Enter")
    expect(page.locator(f"{PANEL} .nbm-Note")).to_have_count(2)
    page.locator(f"{PANEL} .nbm-KindFilter").select_option("question")
    expect(page.locator(f"{PANEL} .nbm-Note")).to_have_count(1)
    expect(page.locator(f"{PANEL} .nbm-Note")).to_contain_text("low priority question")
    page.locator(f"{PANEL} .nbm-KindFilter").select_option("")
    page.locator(f"{PANEL} .nbm-PriorityFilter").select_option("high")
    expect(page.locator(f"{PANEL} .nbm-Note")).to_have_count(1)
    expect(page.locator(f"{PANEL} .nbm-Note")).to_contain_text("high priority decision")
    page.locator(f"{PANEL} .nbm-StaleFilter").select_option("stale")
    expect(page.locator(f"{PANEL} .nbm-Note")).to_have_count(0)
    page.locator(f"{PANEL} .nbm-StaleFilter").select_option("fresh")
    expect(page.locator(f"{PANEL} .nbm-Note")).to_have_count(1)


def test_edit_writes_a_new_version(page, lab):
    note = lab.remember("the retry limit is **3**", tags="config")
    refresh(page)
    shown = card_of(page, note)
    shown.locator(".nbm-Edit").click()
    shown.locator(".nbm-EditText").fill("the retry limit is 5 since v2.3")
    shown.locator(".nbm-EditPriority").select_option("high")
    shown.locator(".nbm-Save").click()
    edited = card(page, "the retry limit is 5 since v2.3")
    expect(edited.locator(".nbm-Version")).to_have_text("v2")
    expect(edited.locator(".nbm-Edit")).to_be_focused()  # back where the edit began
    expect(edited.locator(".nbm-Priority")).to_have_text("high")
    expect(toast(page, f"Saved #{note['id']} as version 2")).to_be_visible()
    status, detail = lab.api(f"notes/{note['id']}")
    assert detail["note"]["text"] == "the retry limit is 5 since v2.3"
    assert [e["type"] for e in detail["history"]] == ["created", "edited"]
    assert [v["text"] for v in detail["versions"]] == [
        "the retry limit is **3**", "the retry limit is 5 since v2.3"]
    # What it said before: the version badge opens the earlier versions, rendered as notes are.
    edited.get_by_role("button", name=f"Earlier versions of #{note['id']}").click()
    earlier = edited.get_by_role("list", name=f"Earlier versions of #{note['id']}")
    expect(earlier.locator(".nbm-VersionText")).to_have_text(["the retry limit is 3"])
    expect(earlier.locator(".nbm-VersionText strong")).to_have_text("3")
    # Dimmed as the list is, not in the current note's colour.
    list_color, text_color = earlier.evaluate(
        "l => [getComputedStyle(l).color, getComputedStyle(l.querySelector('.nbm-VersionText p')).color]")
    assert text_color == list_color
    expect(earlier.locator(".nbm-VersionHead")).to_contain_text("v1 · ")
    expect(earlier.locator(".nbm-VersionHead")).to_contain_text("tags: config")


def test_edit_error_is_shown_and_nothing_changes(page, lab):
    note = lab.remember("an edit that will fail")
    refresh(page)
    shown = card_of(page, note)
    shown.locator(".nbm-Edit").click()
    shown.locator(".nbm-EditText").fill("   ")
    shown.locator(".nbm-Save").click()
    expect(shown.locator(".nbm-EditProblem")).to_have_text(
        "The note is empty: write what you found, or press Escape to cancel.")
    assert lab.api(f"notes/{note['id']}")[1]["note"]["version"] == 1


def test_forget_then_undo(page, lab):
    lab.remember("the note under the forgotten one")
    note = lab.remember("forget me, then bring me back")
    refresh(page)
    card(page, "forget me, then bring me back").locator(".nbm-Forget").click()
    notice = toast(page, f"Forgot #{note['id']}.")
    expect(notice).to_be_visible()
    expect(card(page, "forget me, then bring me back")).to_have_count(0)
    # Focus moves to the next card, not to the page's body (a keyboard user goes on).
    expect(card(page, "the note under the forgotten one")).to_be_focused()
    assert lab.api(f"notes/{note['id']}")[1]["note"]["status"] == "revoked"
    notice.get_by_role("button", name="Undo").click()
    expect(card(page, "forget me, then bring me back")).to_be_visible()
    assert lab.api(f"notes/{note['id']}")[1]["note"]["status"] == "active"
    # The toast's Undo is far down the tab order and gone in 10 s: the panel has one too.
    card(page, "forget me, then bring me back").locator(".nbm-Forget").click()
    undo = page.get_by_role("button", name=f"Undo: bring back #{note['id']}")
    expect(page.locator(f"{PANEL} .nbm-Forgotten")).to_have_text(f"Forgot #{note['id']}. Undo")
    undo.click()
    expect(card_of(page, note)).to_be_focused()
    expect(page.locator(f"{PANEL} .nbm-Forgotten")).to_have_count(0)
    assert lab.api(f"notes/{note['id']}")[1]["note"]["status"] == "active"


def test_stale_badge_and_verify(page, lab):
    """A note whose file changed shows why it is stale; Verify clears the badge."""
    data = lab.store.parent / "inputs"  # the store's workspace in these tests
    data.mkdir(exist_ok=True)
    (data / "regions.csv").write_text("region\nnorth\n")
    note = lab.remember("region codes come from inputs/regions.csv")
    refresh(page)
    shown = card_of(page, note)
    expect(shown.locator(".nbm-StaleBadge")).to_have_count(0)
    (data / "regions.csv").write_text("region\nnorth\nsouth\n")
    refresh(page)
    expect(shown.locator(".nbm-StaleBadge")).to_be_visible()
    expect(shown.locator(".nbm-StaleReason")).to_contain_text("inputs/regions.csv")
    page.locator(f"{PANEL} .nbm-StaleFilter").select_option("stale")
    expect(page.locator(f"{PANEL} .nbm-Note")).to_have_count(1)
    # A correction does not clear the flag (the file changed, not the note): the save says so.
    shown.locator(".nbm-Edit").click()
    shown.locator(".nbm-EditText").fill("region codes come from inputs/regions.csv (2 now)")
    shown.locator(".nbm-Save").click()
    expect(toast(page, f"Saved #{note['id']} as version 2. It stays flagged stale until you "
                       "verify it.")).to_be_visible()
    expect(shown.locator(".nbm-StaleBadge")).to_be_visible()
    expect(shown.locator(".nbm-Version")).to_have_text("v2")  # the card holds the new version
    shown.locator(".nbm-Edit").click()  # a zero-width space added, which the store drops
    shown.locator(".nbm-EditText").fill("region codes come from inputs/regions.csv (2 now)\u200b")
    shown.locator(".nbm-Save").click()
    expect(toast(page, f"Nothing to save: #{note['id']} is as it was.")).to_be_visible()
    assert lab.api(f"notes/{note['id']}")[1]["note"]["version"] == 2
    # A slow machine: the refreshed list may be committed frames after the verify answers
    # (focus was left on the page's body in 4 of 6 tries at this rate, and once in CI).
    cdp = page.context.new_cdp_session(page)
    cdp.send("Emulation.setCPUThrottlingRate", {"rate": 8})
    try:
        shown.locator(".nbm-Verify").click()
        expect(toast(page, f"Verified #{note['id']}")).to_be_visible()
        expect(page.locator(f"{PANEL} .nbm-Note")).to_have_count(0)
        expect(page.locator(f"{PANEL} .nbm-Search")).to_be_focused()  # the last card left
    finally:
        cdp.send("Emulation.setCPUThrottlingRate", {"rate": 1})
        cdp.detach()
    page.locator(f"{PANEL} .nbm-StaleFilter").select_option("")
    expect(card_of(page, note).locator(".nbm-StaleBadge")).to_have_count(0)
    assert lab.api(f"notes/{note['id']}")[1]["history"][-1]["type"] == "verified"


def test_a_cards_actions_are_one_tab_stop_moved_through_with_arrows(page, lab):
    note = lab.remember("the toolbar note", tags="keys,more,most")
    refresh(page)
    shown = card_of(page, note)
    tags = shown.get_by_role("toolbar", name=f"Tags of #{note['id']}")
    expect(tags.locator("button[tabindex='0']")).to_have_count(1)  # not a stop per tag
    tags.locator(".nbm-Tag").first.focus()
    page.keyboard.press("ArrowRight")
    expect(tags.locator(".nbm-Tag").nth(1)).to_be_focused()
    bar = shown.get_by_role("toolbar", name=f"Actions for #{note['id']}")
    expect(bar.locator("button[tabindex='0']")).to_have_count(1)
    shown.locator(".nbm-Edit").focus()
    page.keyboard.press("ArrowRight")
    expect(shown.locator(".nbm-Verify")).to_be_focused()
    page.keyboard.press("End")
    expect(shown.locator(".nbm-Insert")).to_be_focused()
    page.keyboard.press("ArrowRight")  # wraps
    expect(shown.locator(".nbm-Edit")).to_be_focused()
    page.keyboard.press("ArrowLeft")
    expect(shown.locator(".nbm-Insert")).to_be_focused()
    page.keyboard.press("Tab")  # out of the toolbar at once, not through its five buttons
    assert not page.evaluate("() => !!document.activeElement.closest('[role=toolbar]')"
                             " && document.activeElement.closest('.nbm-Note')?.dataset.noteId"
                             f" === '{note['id']}'")
    page.keyboard.press("Shift+Tab")  # back to the button last used
    expect(shown.locator(".nbm-Insert")).to_be_focused()


def test_a_diff_to_now_says_in_words_why_a_note_went_stale(page, lab):
    data = lab.store.parent / "inputs"
    data.mkdir(exist_ok=True)
    (data / "depots.csv").write_text("depot\nleeds\n")
    note = lab.remember("depot names come from inputs/depots.csv")
    assert lab.api("snapshots", "POST", {"name": "panel-depots"})[0] == 201
    (data / "depots.csv").write_text("depot\nleeds\nyork\n")
    refresh(page)
    expect(card_of(page, note).locator(".nbm-Age")).to_have_text(re.compile(r"^\d+ s ago$"))
    page.get_by_role("tab", name="Snapshots").click()
    page.locator(f"{PANEL} .nbm-DiffFrom").select_option("panel-depots")
    page.locator(f"{PANEL} .nbm-DiffTo").select_option("")
    page.locator(f"{PANEL} .nbm-Compare").click()
    went = page.locator(f"{PANEL} .nbm-DiffSection.nbm-mod-became_stale")
    expect(went).to_contain_text("became stale (1)")
    expect(went.locator(".nbm-DiffDetail")).to_have_text(
        " (rows changed inputs/depots.csv (1 → 2 rows))")
    page.get_by_role("tab", name="Notes").click()


def test_copy_recall_snippet_and_insert_into_notebook(page, lab):
    lab.remember("insert me into the notebook as markdown", tags="insert")
    # The command resolves to the notebook widget, which the page cannot hand back.
    page.evaluate("async () => { await window.jupyterapp.commands.execute("
                  "'notebook:create-new', {kernelName: 'python3'}); }")
    page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for()
    page.evaluate("() => window.jupyterapp.commands.execute('nbmemory:open')")
    refresh(page)
    shown = card(page, "insert me into the notebook")
    shown.locator(".nbm-Copy").click()
    expect(toast(page, "Copied: %recall -k 3 insert me into the notebook as markdown")).to_be_visible()
    assert page.evaluate("() => Promise.race([navigator.clipboard.readText(), new Promise("
                         "r => setTimeout(() => r('(clipboard unreadable)'), 5000))])") == \
        "%recall -k 3 insert me into the notebook as markdown"
    # A question's %recall line leaves its "?" off: IPython would read it as a help request.
    lab.remember("why are there duplicate ids in orders?", kind="question")
    refresh(page)
    card(page, "why are there duplicate ids").locator(".nbm-Copy").click()
    expect(toast(page, "Copied: %recall -k 3 why are there duplicate ids in orders")
           ).to_be_visible()
    expect(toast(page, "ids in orders?")).to_have_count(0)
    # Words that start with a dash would be read as %recall's options: they follow a --.
    lab.remember("--about is how anchors are declared")
    lab.remember("filter by kind with --kind gotcha when listing")
    refresh(page)
    card(page, "is how anchors are declared").locator(".nbm-Copy").click()
    expect(toast(page, "Copied: %recall -k 3 -- --about is how anchors are declared")
           ).to_be_visible()
    card(page, "filter by kind with").locator(".nbm-Copy").click()
    expect(toast(page, "Copied: %recall -k 3 -- filter by kind with --kind gotcha when listing")
           ).to_be_visible()
    shown.locator(".nbm-Insert").click()
    cell = page.locator(".jp-NotebookPanel .jp-MarkdownCell", has_text="insert me into the notebook")
    expect(cell).to_be_visible()
    expect(cell).to_contain_text("nbmemory #")
    close_notebook(page)


def test_snapshots_list_and_diff(page, lab):
    lab.remember("before the snapshot")
    assert lab.api("snapshots", "POST", {"name": "panel-a", "message": "first"})[0] == 201
    lab.remember("after the snapshot")
    assert lab.api("snapshots", "POST", {"name": "panel-b", "message": "second"})[0] == 201
    notes_tab = page.get_by_role("tab", name="Notes")
    notes_tab.focus()
    page.keyboard.press("ArrowRight")  # WAI-ARIA tabs: arrows select and focus
    snapshots_tab = page.get_by_role("tab", name="Snapshots")
    expect(snapshots_tab).to_be_focused()
    expect(snapshots_tab).to_have_attribute("aria-selected", "true")
    expect(page.get_by_role("tabpanel", name="Snapshots")).to_be_visible()
    table = page.locator(f"{PANEL} .nbm-SnapshotTable")
    expect(table).to_contain_text("panel-a")
    expect(table).to_contain_text("second")
    page.locator(f"{PANEL} .nbm-DiffFrom").select_option("panel-a")
    page.locator(f"{PANEL} .nbm-DiffTo").select_option("panel-b")
    page.locator(f"{PANEL} .nbm-Compare").click()
    diff = page.locator(f"{PANEL} .nbm-Diff")
    expect(diff).to_contain_text("panel-a → panel-b")
    added = diff.locator(".nbm-DiffSection.nbm-mod-added")
    expect(added).to_contain_text("added (1)")
    expect(added).to_contain_text("after the snapshot")
    expect(diff).not_to_contain_text("before the snapshot")
    # A screen reader hears what the comparison found (focus stays on Compare).
    expect(page.locator(f"{PANEL} .nbm-Snapshots [role=status]")).to_have_text(
        "panel-a → panel-b: added (1)")
    expect(page.get_by_role("heading", name="panel-a → panel-b")).to_be_visible()
    screenshot(page, "panel-snapshot-diff.png")
    # Later to earlier is refused, in the panel (a toast would cut the sentence).
    page.locator(f"{PANEL} .nbm-DiffFrom").select_option("panel-b")
    page.locator(f"{PANEL} .nbm-DiffTo").select_option("panel-a")
    page.locator(f"{PANEL} .nbm-Compare").click()
    expect(page.locator(f"{PANEL} .nbm-DiffError")).to_have_text(
        "Snapshot 'panel-b' was sealed after 'panel-a'; a diff goes from the earlier to the "
        "later: give 'panel-a' first.")
    expect(diff).to_have_count(0)
    # At the default 250 px one block per snapshot: every word whole, the count with its noun.
    row = table.locator("tr", has_text="panel-a")
    expect(row).to_contain_text(re.compile(r"\d+ notes?"))
    assert row.bounding_box()["width"] <= page.locator(PANEL).bounding_box()["width"]
    snapshots_tab.focus()
    page.keyboard.press("Home")
    expect(notes_tab).to_be_focused()
    expect(page.get_by_role("tabpanel", name="Notes")).to_be_visible()


def test_settings_page_size_and_poll_interval(browser_context, lab):
    for i in range(7):
        lab.remember(f"paging note {i}", tags="paging")
    for topic in ("invoices", "vendors", "refunds"):
        lab.remember(f"unrelated: {topic} close monthly")
    put_settings(lab, "nbmemory:plugin", {"pageSize": 5, "pollInterval": 1})
    page = open_lab(browser_context, lab)
    try:
        expect(page.locator(f"{PANEL} .nbm-Note")).to_have_count(5)
        expect(page.locator(f"{PANEL} .nbm-Pager")).to_contain_text("1–5 of")
        older = page.locator(f"{PANEL} .nbm-Pager button", has_text="Older")
        newer = page.locator(f"{PANEL} .nbm-Pager button", has_text="Newer")
        older.click()
        expect(page.locator(f"{PANEL} .nbm-Pager")).to_contain_text("6–")
        # Enter again and again with the keyboard: focus stays on Older, and on the last
        # page (Older disabled) it is on Newer, never on the page's body.
        pager = page.locator(f"{PANEL} .nbm-Pager span")

        def turn_with_enter():
            shown = pager.inner_text()
            page.keyboard.press("Enter")
            expect(pager).not_to_have_text(shown)  # the page turned
            expect(page.locator(f"{PANEL} .nbm-Pager button:focus")).to_have_count(1)

        expect(page.locator(f"{PANEL} .nbm-Pager button:focus")).to_have_count(1)
        while not older.is_disabled():
            turn_with_enter()
        expect(newer).to_be_focused()
        while not newer.is_disabled():
            turn_with_enter()
        expect(older).to_be_focused()
        # Recall shows a page of hits too, and a page more on request.
        search = page.locator(f"{PANEL} .nbm-Search")
        search.fill("paging")
        search.press("Enter")
        expect(page.locator(f"{PANEL} .nbm-Summary")).to_contain_text("5 recalled for")
        page.locator(f"{PANEL} .nbm-MoreHits").click()
        expect(card(page, "paging note")).to_have_count(7)
        expect(page.locator(f"{PANEL} .nbm-NoteList > .nbm-Note").nth(5)).to_be_focused()
        # The notes below the score threshold are one click away.
        expect(page.locator(f"{PANEL} .nbm-Summary")).to_contain_text("more below the score")
        page.locator(f"{PANEL} .nbm-ShowBelow").click()
        expect(page.locator(f"{PANEL} .nbm-Summary")).to_contain_text("10 recalled for")
        expect(page.locator(f"{PANEL} .nbm-Summary")).not_to_contain_text("below the score")
        search.fill("")
        search.press("Enter")
        # A note written elsewhere (here: the REST API, as a CLI or MCP would) shows up by
        # the poll alone, with no refresh and no cell run.
        lab.remember("written elsewhere, found by the poll")
        expect(card(page, "written elsewhere, found by the poll")).to_be_visible(timeout=10_000)
    finally:
        put_settings(lab, "nbmemory:plugin", {})
        page.close()


def test_forgetting_the_last_page_shows_the_page_before_it(browser_context, lab):
    """Forget the only notes of the last page: the panel said "No notes yet" under a pager
    reading "51–50 of 50"; it shows the page before, and focus stays in the panel."""
    for i in range(11):  # the page before is not the only one: its pager still shows
        lab.remember(f"last page note {i}")
    put_settings(lab, "nbmemory:plugin", {"pageSize": 5, "pollInterval": 1})
    page = open_lab(browser_context, lab)
    forgotten = []
    try:
        pager = page.locator(f"{PANEL} .nbm-Pager span")
        older = page.locator(f"{PANEL} .nbm-Pager button", has_text="Older")
        expect(pager).to_contain_text("1–5 of")
        while not older.is_disabled():
            shown = pager.inner_text()
            older.click()
            expect(pager).not_to_have_text(shown)
        first, last, total = map(int, re.search(r"(\d+)–(\d+) of (\d+)",
                                                pager.inner_text()).groups())
        cards = page.locator(f"{PANEL} .nbm-NoteList > .nbm-Note")
        on_last = last - first + 1
        # The pager can show the new page a moment before its cards do: wait for them.
        expect(cards).to_have_count(on_last)
        for left in range(on_last, 0, -1):
            forgotten.append(int(cards.first.get_attribute("data-note-id")))
            cards.first.locator(".nbm-Forget").click()
            if left > 1:
                expect(cards).to_have_count(left - 1)
        now = total - on_last
        expect(pager).to_have_text(f"{now - 4}–{now} of {now}")
        expect(cards).to_have_count(5)
        expect(page.locator(PANEL)).not_to_contain_text("No notes yet")
        expect(page.locator(f"{PANEL} :focus")).to_have_count(1)
    finally:
        for note_id in forgotten:
            lab.api(f"notes/{note_id}/reinstate", "POST")
        put_settings(lab, "nbmemory:plugin", {})
        page.close()


def test_focus_waits_for_the_forgotten_card_to_leave(page, lab):
    """A later refresh (a poll that saw the forget, here Refresh) can overtake the forget's
    own: the forgotten card stays shown until that one is back. With no card beside it,
    focus went to the forgotten card itself and fell to the page's body when it left (CI
    saw it on the last page); it now waits, then goes to the search box."""
    note = lab.remember("the only card the filter shows", tags="overtaken")
    refresh(page)
    tags = page.locator(f"{PANEL} .nbm-TagFilter")
    tags.fill("overtaken")
    tags.press("Enter")
    forgotten = card_of(page, note)
    expect(page.locator(f"{PANEL} .nbm-Note")).to_have_count(1)
    held = []
    page.route(NOTES, lambda route: held.append(route))
    try:
        with page.expect_request(NOTES):  # the forget's own refresh asks for the list
            forgotten.locator(".nbm-Forget").click()
        with page.expect_request(NOTES):  # and another refresh, sent after it
            page.evaluate("() => { void window.jupyterapp.commands.execute('nbmemory:refresh'); }")
        with page.expect_response(NOTES):  # the forget's is back first, and set aside
            held.pop(0).continue_()
        # The forget is done now; what it focuses, it focuses within a frame or two.
        page.evaluate("() => new Promise(done => { let n = 10; const f = () => "
                      "--n ? requestAnimationFrame(f) : done(); requestAnimationFrame(f); })")
        expect(forgotten).to_be_visible()
        held.pop(0).continue_()
        expect(forgotten).to_have_count(0)
        expect(page.locator(f"{PANEL} .nbm-Search")).to_be_focused()
    finally:
        page.unroute(NOTES)
        lab.api(f"notes/{note['id']}/reinstate", "POST")
        tags.fill("")
        tags.press("Enter")


def test_status_says_when_the_model_loads_and_the_graph_builds(browser_context, lab):
    """A starting owner answers from the keywords while its model loads, and a large store
    searches exactly while its graph builds: the status line says both, and drops them
    once the owner reports them done. The server's real status, with those two fields as
    such an owner reports them."""
    def starting(route):
        response = route.fetch()
        body = {**response.json(), "model_loading": True,
                "index": "building 40,000/100,000 (recall searches exactly meanwhile)"}
        route.fulfill(response=response, body=json.dumps(body))

    page = open_lab(browser_context, lab, before=lambda p: p.route("**/nbmemory/status*", starting))
    try:
        status = page.locator(f"{PANEL} .nbm-Status")
        expect(status.locator(".nbm-StatusLoading")).to_have_text(
            "loading the model: keyword results meanwhile")
        expect(status.locator(".nbm-StatusIndex")).to_have_text(
            "vector index building 40,000/100,000 (recall searches exactly meanwhile)")
        expect(status).to_contain_text("hash:64")  # the rest of the real status
        page.unroute("**/nbmemory/status*")
        refresh(page)
        expect(status.locator(".nbm-StatusLoading")).to_have_count(0)
        expect(status.locator(".nbm-StatusIndex")).to_have_count(0)
        expect(status).to_contain_text("hash:64")
    finally:
        page.close()


def test_version_mismatch_is_explained(browser_context, lab):
    page = browser_context.new_page()
    page.route("**/nbmemory/version*", lambda route: route.fulfill(
        status=200, content_type="application/json", body=json.dumps({"version": "0.0.1", "api": 1})))
    try:
        page.goto(f"{lab.url}/lab?reset&token={lab.token}")
        page.wait_for_function("() => window.jupyterapp !== undefined", timeout=60_000)
        page.evaluate("() => window.jupyterapp.restored")
        page.evaluate("() => window.jupyterapp.commands.execute('nbmemory:open')")
        banner = page.locator(f"{PANEL} .nbm-Banner")
        expect(banner).to_contain_text("server extension is version 0.0.1 but this panel is")
        expect(banner).to_contain_text("pip install -U nbmemory")
        expect(page.locator(f"{PANEL} .nbm-Note")).to_have_count(0)
    finally:
        page.close()


def test_missing_server_extension_is_explained(browser_context, tmp_path):
    lab = start_lab(tmp_path, extra_args=["--ServerApp.jpserver_extensions="
                                          "{'nbmemory.server': False}"], wait_api=False)
    try:
        page = open_lab(browser_context, lab, wait_status=False)
        banner = page.locator(f"{PANEL} .nbm-Banner")
        expect(banner).to_contain_text("The nbmemory server extension is not running")
        expect(banner).to_contain_text("jupyter server extension list")
        page.close()
    finally:
        stop_lab(lab)


def test_note_remembered_in_a_cell_links_back_to_its_cell(browser_context, tmp_path):
    """Provenance: the note's link opens its notebook with the cell it came from active.

    Without the owner service a kernel and the server cannot hold the store at once, so
    on a server of its own, the kernel remembers first and lets go (%unload_ext) before
    the panel opens.
    """
    import nbformat

    lab = start_lab(tmp_path)
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_markdown_cell("# Ledger"),
        nbformat.v4.new_code_cell("%load_ext nbmemory\n%config NbMemory.model = 'hash:64'"),
        nbformat.v4.new_code_cell("x = 1"),
        nbformat.v4.new_code_cell("%remember -t ledger the ledger closes at 02:00 UTC"),
        nbformat.v4.new_code_cell("%unload_ext nbmemory"),
    ]
    nbformat.write(notebook, lab.root / "ledger.ipynb")
    page = open_lab(browser_context, lab, open_panel=False)
    try:
        open_notebook(page, "ledger.ipynb", 5)
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
        page.locator(".jp-NotebookPanel .jp-OutputArea", has_text="Remembered #").wait_for(
            timeout=60_000)
        wait_for(lambda: lab.api("status")[0] == 200, timeout=30,
                 what="the kernel to let go of the store")
        page.evaluate("() => window.jupyterapp.commands.execute('nbmemory:open')")
        shown = card(page, "the ledger closes at 02:00 UTC")
        link = shown.locator(".nbm-SourceLink")
        expect(link).to_contain_text("ledger.ipynb [")
        page.locator(".jp-NotebookPanel .jp-Cell").nth(0).click()
        expect(page.locator(".jp-NotebookPanel .jp-Cell.jp-mod-active")).to_contain_text("Ledger")
        link.click()
        active = page.locator(".jp-NotebookPanel .jp-Cell.jp-mod-active")
        expect(active).to_contain_text("%remember -t ledger the ledger closes")
        close_notebook(page)
    finally:
        page.close()
        stop_lab(lab)


SERVICE = importlib.util.find_spec("nbmemory.service") is not None


@pytest.mark.skipif(not SERVICE, reason="a kernel and the server share a store only through "
                                        "the owner service (nbmemory.service), not merged yet")
def test_note_remembered_in_a_cell_appears_and_opens_its_cell(browser_context, lab):
    """With polling off, the note can only appear because its cell ran."""
    import nbformat

    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell("%load_ext nbmemory\n%config NbMemory.model = 'hash:64'"),
        nbformat.v4.new_markdown_cell("Some context in between."),
        nbformat.v4.new_code_cell("%remember -t live the ledger closes at 02:00 UTC, not midnight"),
    ]
    nbformat.write(notebook, lab.root / "live.ipynb")
    put_settings(lab, "nbmemory:plugin", {"pollInterval": 0})
    page = open_lab(browser_context, lab)
    try:
        open_notebook(page, "live.ipynb", 3)
        page.evaluate("() => window.jupyterapp.commands.execute('nbmemory:open')")
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
        output = page.locator(".jp-NotebookPanel .jp-OutputArea", has_text="Remembered #")
        output.wait_for(timeout=120_000)
        shown = card(page, "the ledger closes at 02:00 UTC")
        shown.wait_for(timeout=15_000)
        expect(shown.locator(".nbm-SourceLink")).to_contain_text("live.ipynb")
        # Move away from the cell, then follow the provenance link back to it.
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:move-cursor-up')")
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:move-cursor-up')")
        shown.locator(".nbm-SourceLink").click()
        active = page.locator(".jp-NotebookPanel .jp-Cell.jp-mod-active")
        expect(active).to_contain_text("%remember -t live the ledger closes")
        close_notebook(page)
    finally:
        put_settings(lab, "nbmemory:plugin", {})
        page.close()
