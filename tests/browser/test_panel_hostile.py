"""Note text written to get past the panel's escaping: raw HTML where the escaper's guess
about code (a span, a fence) is not what Markdown reads, and text that reads oddly once
escaped. The panel and an inserted Markdown cell must show the characters, hold no
element from the note, and fetch nothing."""

from __future__ import annotations

import json
import urllib.request

import pytest
from playwright.sync_api import expect

from .conftest import open_lab, start_lab, stop_lab, wait_for
from .test_panel import PANEL, card_of, close_notebook, refresh

# Port 9 (discard): a fetch would be refused at once, but the page's request log sees it.
PIXEL = "http://127.0.0.1:9/px.png"
IMG = f'<img src="{PIXEL}" onerror="window.pwned=1">'
LOGIN = '<a href="http://127.0.0.1:9/login" style="position:fixed;top:0">Log in again</a>'

# Each: a code span or fence the escaper could take for code, which Markdown ends early.
HOSTILE = {
    "heading": f"`start\n# {IMG} `",
    "blockquote": f"`start\n> {IMG} `",
    "setext": f"a `b\n---\n{IMG} `",
    "table row": f"| h |\n|---|\n| `x|{IMG}|` |",
    "list that ends": f"1. item\n   ```\nx\n{IMG}\n<script>window.pwned=2</script>\n{LOGIN}",
    "nested list": f"- - a\n\n      {IMG}",
    "image in code": f"`![who reads]({PIXEL})` and !![two]({PIXEL})",
}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    instance = start_lab(tmp_path_factory.mktemp("lab"))
    yield instance
    stop_lab(instance)


def assert_nothing_of_the_note_is_markup(where):
    assert where.locator("img, script, iframe").count() == 0
    assert where.locator("a", has_text="Log in again").count() == 0


@pytest.mark.parametrize("case", HOSTILE)
def test_markup_where_markdown_ends_code_early_shows_as_text(page, lab, case):
    fetched = []
    page.on("request", lambda request: fetched.append(request.url)
            if "127.0.0.1:9/" in request.url else None)
    note = lab.remember(HOSTILE[case])
    refresh(page)
    text = card_of(page, note).locator(".nbm-NoteText")
    expect(text).to_be_visible()
    assert_nothing_of_the_note_is_markup(text)
    if "<img" in HOSTILE[case]:
        expect(text).to_contain_text('<img src="http://127.0.0.1:9/px.png" '
                                     'onerror="window.pwned=1">')
    if "Log in again" in HOSTILE[case]:
        expect(text).to_contain_text("<script>window.pwned=2</script>")
        expect(text).to_contain_text(LOGIN)
    if case == "image in code":
        expect(text.locator("code")).to_have_text(f"![who reads]({PIXEL})")
        expect(text.locator("a", has_text="image: two")).to_have_count(1)
    assert page.evaluate("() => window.pwned") is None
    assert fetched == []


def test_an_inserted_hostile_note_holds_no_markup_either(page, lab):
    note = lab.remember("\n\n".join(HOSTILE.values()))  # the list that ends goes last
    page.evaluate("async () => { await window.jupyterapp.commands.execute("
                  "'notebook:create-new', {kernelName: 'python3'}); }")
    page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for()
    page.evaluate("() => window.jupyterapp.commands.execute('nbmemory:open')")
    refresh(page)
    card_of(page, note).locator(".nbm-Insert").click()
    cell = page.locator(".jp-NotebookPanel .jp-MarkdownCell", has_text=f"nbmemory #{note['id']}")
    rendered = cell.locator(".jp-RenderedMarkdown")
    expect(rendered).to_contain_text("Log in again")
    assert_nothing_of_the_note_is_markup(rendered)
    expect(rendered).to_contain_text(LOGIN)
    assert page.evaluate("() => window.pwned") is None
    close_notebook(page)


def test_backslash_escaped_angle_and_ampersand_read_as_themselves(page, lab):
    note = lab.remember("a \\< b and x \\& y, not a \\<b> tag")
    refresh(page)
    text = card_of(page, note).locator(".nbm-NoteText")
    expect(text).to_have_text("a < b and x & y, not a <b> tag")


def saved_query(lab) -> str | None:
    request = urllib.request.Request(f"{lab.url}/lab/api/workspaces/default",
                                     headers={"Authorization": f"token {lab.token}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        state = json.loads(response.read()).get("data", {}).get("nbmemory:panel") or {}
    return state.get("query")


def test_a_search_too_long_for_the_server_is_refused_and_never_sent(browser_context, lab):
    """Over about 64 KB of URL Jupyter's server drops the request unanswered: the panel said
    "not responding" and sent it again on every poll and after every reload."""
    lab.remember("orders.amount is in cents before 2021")
    sent = []

    def watch(page):
        page.on("request", lambda r: sent.append(r.url) if "/nbmemory/recall" in r.url else None)

    long = "amount " * 10_000
    refused = ("The search text has 69,999 characters; recall takes at most 4,000. "
               "Shorten it.")
    page = open_lab(browser_context, lab, before=watch)
    try:
        search = page.locator(f"{PANEL} .nbm-Search")
        search.fill(long)
        search.press("Enter")
        expect(page.locator(f"{PANEL} .nbm-Banner.nbm-mod-error")).to_have_text(refused)
        wait_for(lambda: (saved_query(lab) or "").startswith("amount amount"),
                 what="the search text in the workspace")
    finally:
        page.close()
    page = open_lab(browser_context, lab, before=watch, reset=False)
    try:
        expect(page.locator(f"{PANEL} .nbm-Banner.nbm-mod-error")).to_have_text(refused)
        assert sent == []
        # Shortened, it is recalled.
        page.locator(f"{PANEL} .nbm-Search").fill("amount cents")
        page.locator(f"{PANEL} .nbm-Search").press("Enter")
        expect(page.locator(f"{PANEL} .nbm-Note", has_text="in cents")).to_be_visible()
        expect(page.locator(f"{PANEL} .nbm-Banner.nbm-mod-error")).to_have_count(0)
        assert len(sent) >= 1 and all(len(url) < 2000 for url in sent)
    finally:
        page.close()
