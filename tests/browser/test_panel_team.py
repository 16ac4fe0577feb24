"""The panel on a team store (issue 15), against a real PostgreSQL (tests/postgres.py):
the store in the header, each note's author, "Mine", and a member with read-only grants
who gets no write action and can still search."""

from __future__ import annotations

import os
import re
from pathlib import Path
from types import SimpleNamespace

import psycopg
import pytest
from playwright.sync_api import expect

from nbmemory.address import Address
from nbmemory.memory import Memory

from .conftest import open_lab, screenshot, start_lab, stop_lab, toast, wait_for
from .identity import NAME
from .test_panel import PANEL, XSS, card
from .test_panel_conventions import saved_state

REPO = Path(__file__).parents[2]
READ_ONLY = "Read-only team store: you can search and read notes."
# Every write action a note card or the header can offer.
WRITES = (".nbm-NewNote", ".nbm-Edit", ".nbm-Verify", ".nbm-Forget", ".nbm-Recheck",
          ".nbm-Save", ".nbm-NewNote-Form")


@pytest.fixture(scope="module")
def team(postgres_server, tmp_path_factory):
    """A team store holding a colleague's notes (Bo wrote them without the panel), and a
    PostgreSQL role that may only read it."""
    tmp = tmp_path_factory.mktemp("team")
    database = postgres_server.new_database()
    url = postgres_server.url(database)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NBMEMORY_CACHE_DIR", str(tmp / "cache-bo"))
        with Memory.open(url, model="hash:64", mode="local") as bo:
            bo.remember("the churn dashboard refreshes hourly", author="bo", kind="gotcha")
            bo.remember(f"the churn export escapes {XSS} in names", author="bo")
            bo.remember("the churn table has rows for every active customer", author="bo",
                        check="rows > 0", namespace={"rows": 3})
    reader = f"reader_{database}"
    with psycopg.connect(Address.parse(url).conninfo, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {reader} LOGIN")
        admin.execute(f"GRANT USAGE ON SCHEMA nbmemory TO {reader}")
        admin.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA nbmemory TO {reader}")
    return SimpleNamespace(url=url, database=database, tmp=tmp, server=postgres_server,
                           reader_url=url.replace("postgres@", f"{reader}@"))


def team_lab(team, name: str, url: str, *extra_args: str):
    tmp = team.tmp / name
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    return start_lab(tmp, store=url, extra_args=list(extra_args), env_extra={
        "NBMEMORY_CACHE_DIR": str(tmp / "cache"), "PYTHONPATH": path})


@pytest.fixture(scope="module")
def ana_lab(team):
    """Ana's server: she may write the team store, and every request is hers."""
    instance = team_lab(team, "ana", team.url,
                        "--ServerApp.identity_provider_class=tests.browser.identity.NamedUser")
    yield instance
    stop_lab(instance)


@pytest.fixture(scope="module")
def reader_lab(team):
    """A member whose PostgreSQL role has SELECT grants only."""
    instance = team_lab(team, "reader", team.reader_url)
    yield instance
    stop_lab(instance)


def where(team) -> str:
    """What the header names the store by: the socket directory stands for the host."""
    return f"{team.server.base}/{team.database}"


def journal_length(team) -> int:
    with psycopg.connect(Address.parse(team.url).conninfo) as admin:
        return admin.execute("SELECT count(*) FROM nbmemory.events").fetchone()[0]


def test_mine_lists_and_recalls_only_my_notes_and_combines_with_the_filters(
        browser_context, ana_lab, team):
    ana_lab.remember("the churn model is retrained on Mondays")
    ana_lab.remember("the churn model drops customers younger than 30 days", kind="gotcha")
    page = open_lab(browser_context, ana_lab)
    try:
        header = page.locator(f"{PANEL} .nbm-TeamStore")
        expect(header).to_have_text(f"Team store · {where(team)}")
        expect(header).to_have_attribute("title", team.url)  # no password in it to hide
        expect(page.locator(f"{PANEL} .nbm-ReadOnly")).to_have_count(0)
        expect(page.locator(f"{PANEL} .nbm-NewNote")).to_be_visible()
        # Every card says who wrote it.
        expect(page.locator(f"{PANEL} .nbm-Note")).to_have_count(5)
        ours = card(page, "retrained on Mondays")
        expect(ours.locator(".nbm-Author")).to_have_text(NAME)
        expect(ours.locator(".nbm-Author")).to_have_attribute(
            "title", f"Written by {NAME}: click to show only their notes")
        expect(card(page, "refreshes hourly").locator(".nbm-Author")).to_have_text("bo")

        mine = page.locator(f"{PANEL} .nbm-MineFilter")
        expect(mine).to_have_attribute("aria-pressed", "false")
        mine.click()
        expect(mine).to_have_attribute("aria-pressed", "true")
        expect(page.locator(f"{PANEL} .nbm-Note")).to_have_count(2)
        expect(page.locator(f"{PANEL} .nbm-Summary")).to_have_text("2 notes")
        expect(page.locator(f"{PANEL} .nbm-Note .nbm-Author")).to_have_text([NAME, NAME])
        expect(card(page, "refreshes hourly")).to_have_count(0)

        # Kept across a reload, like the other filters.
        wait_for(lambda: ((saved_state(ana_lab) or {}).get("filters") or {}).get("mine") is True,
                 what="Mine in the workspace")
        page.close()
        page = open_lab(browser_context, ana_lab, reset=False)
        mine = page.locator(f"{PANEL} .nbm-MineFilter")
        expect(mine).to_have_attribute("aria-pressed", "true")
        expect(page.locator(f"{PANEL} .nbm-Note")).to_have_count(2)

        # With the kind filter: Ana's gotcha, not Bo's.
        page.locator(f"{PANEL} .nbm-KindFilter").select_option("gotcha")
        expect(page.locator(f"{PANEL} .nbm-Note")).to_have_count(1)
        expect(card(page, "younger than 30 days")).to_be_visible()
        page.locator(f"{PANEL} .nbm-KindFilter").select_option("")

        # With a search: the recall is Ana's notes only, Bo's churn notes left out.
        search = page.locator(f"{PANEL} .nbm-Search")
        search.fill("churn")
        search.press("Enter")
        expect(page.locator(f"{PANEL} .nbm-Summary")).to_contain_text("recalled for “churn”")
        expect(page.locator(f"{PANEL} .nbm-Note .nbm-Score")).to_have_count(2)
        expect(page.locator(f"{PANEL} .nbm-Note .nbm-Author")).to_have_text([NAME, NAME])
        screenshot(page, "panel-team-mine.png")

        # Everyone's again: Bo's churn notes come back in the recall.
        mine.click()
        expect(mine).to_have_attribute("aria-pressed", "false")
        expect(card(page, "refreshes hourly").locator(".nbm-Score")).to_be_visible()
        authors = page.locator(f"{PANEL} .nbm-Note .nbm-Author").all_inner_texts()
        assert sorted(set(authors)) == ["ana", "bo"], authors
        search.fill("")
        search.press("Enter")
        expect(page.locator(f"{PANEL} .nbm-Note")).to_have_count(5)

        # Clicking a colleague's name keeps only their notes, until the chip is cleared.
        card(page, "refreshes hourly").locator(".nbm-Author").click()
        chip = page.locator(f"{PANEL} .nbm-AuthorFilter")
        expect(chip).to_have_text("by bo ✕")
        expect(page.locator(f"{PANEL} .nbm-Note .nbm-Author")).to_have_text(["bo"] * 3)
        expect(mine).to_have_attribute("aria-pressed", "false")
        chip.click()
        expect(chip).to_have_count(0)
        expect(search).to_be_focused()  # the chip went with its filter
        expect(page.locator(f"{PANEL} .nbm-Note")).to_have_count(5)
        assert page.dialogs == []
    finally:
        page.close()


def test_a_read_only_member_gets_no_write_action_and_can_search(browser_context, reader_lab,
                                                                 team):
    status = reader_lab.api("status")[1]
    assert status["read_only"] is True and status["store"] == team.reader_url
    before = journal_length(team)
    code, reply = reader_lab.api("notes/1/forget", "POST", {})
    assert (code, reply["error"]) == (403, "ReadOnlyStore")
    assert "read-only team store for this user" in reply["message"]
    page = open_lab(browser_context, reader_lab)
    try:
        message = page.locator(f"{PANEL} .nbm-ReadOnly")
        expect(message).to_have_text(READ_ONLY)
        expect(page.get_by_text(READ_ONLY)).to_have_count(1)  # said once, not per card
        header = page.locator(f"{PANEL} .nbm-TeamStore")
        expect(header.locator(".nbm-TeamStoreWhere")).to_have_text(
            f"Team store · {where(team)}")
        expect(header.locator(".nbm-ReadOnlyBadge")).to_have_text("read-only")
        # Bo's notes, with their author and check, and nothing that would write.
        expect(card(page, "refreshes hourly")).to_be_visible()
        checked = card(page, "rows for every active customer")
        expect(checked.locator(".nbm-CheckExpr")).to_have_text("rows > 0")
        for selector in WRITES:
            expect(page.locator(f"{PANEL} {selector}")).to_have_count(0)
        expect(card(page, "refreshes hourly").locator(".nbm-Copy")).to_be_visible()
        expect(card(page, "refreshes hourly").locator(".nbm-Author")).to_have_text("bo")
        # Shown as text: the note's markup, as everywhere.
        escaped = card(page, "the churn export escapes")
        expect(escaped.locator(".nbm-NoteText")).to_contain_text(XSS)
        assert escaped.locator("img").count() == 0

        # Searching works: a recall, which writes nothing (not even its statistics).
        search = page.locator(f"{PANEL} .nbm-Search")
        search.fill("churn dashboard hourly")
        search.press("Enter")
        expect(page.locator(f"{PANEL} .nbm-Summary")).to_contain_text("recalled for")
        first = page.locator(f"{PANEL} .nbm-Note").first
        expect(first).to_contain_text("the churn dashboard refreshes hourly")
        expect(first.locator(".nbm-Score")).to_be_visible()
        for selector in WRITES:
            expect(page.locator(f"{PANEL} {selector}")).to_have_count(0)
        screenshot(page, "panel-team-read-only.png")

        # The shortcut for a new note says why there is none, and opens no form.
        search.press("Control+Alt+R")
        expect(toast(page, READ_ONLY)).to_be_visible()
        expect(page.locator(f"{PANEL} .nbm-NewNote-Form")).to_have_count(0)
        # The palette offers no write command.
        page.keyboard.press("Control+Shift+C")
        page.keyboard.type("nbmemory")
        palette = page.locator(".lm-CommandPalette-item")
        expect(palette.filter(has_text="Open the nbmemory panel")).to_be_visible()
        expect(palette.filter(has_text="Refresh the nbmemory panel")).to_be_visible()
        expect(palette.filter(has_text="New nbmemory note")).to_have_count(0)
        page.keyboard.press("Escape")

        # Snapshots are listed, not sealed: no %snapshot advice for a reader.
        page.locator(f"{PANEL} .nbm-Tab", has_text="Snapshots").click()
        expect(page.locator(f"{PANEL} .nbm-Snapshots .nbm-Empty")).to_have_text(
            "No snapshots yet.")
        expect(message).to_have_text(READ_ONLY)
        assert page.dialogs == []
    finally:
        page.close()
    assert journal_length(team) == before  # the reader wrote nothing


def test_an_address_with_a_password_is_never_shown_with_it(browser_context, ana_lab):
    """The server refuses such an address; the panel does not rely on that. Its status is
    rewritten on the way to the page, as a server that let one through would send it."""
    address = ("postgresql://ana:s3cret@db.internal:6543/analytics"
               "?sslmode=require&password=s3cret2&store=ml")

    def before(page):
        def rewrite(route):
            response = route.fetch()
            status = response.json()
            status["store"] = address
            route.fulfill(response=response, json=status)

        page.route(re.compile(r"/nbmemory/status(\?|$)"), rewrite)

    page = open_lab(browser_context, ana_lab, before=before)
    try:
        header = page.locator(f"{PANEL} .nbm-TeamStore")
        expect(header).to_have_text("Team store · db.internal:6543/analytics (ml)")
        expect(header).to_have_attribute(
            "title", "postgresql://ana@db.internal:6543/analytics?sslmode=require&store=ml")
        status = page.locator(f"{PANEL} .nbm-Status")
        expect(status.locator(".nbm-StatusStore")).to_have_text(
            "postgresql://ana@db.internal:6543/analytics?sslmode=require&store=ml")
        assert "s3cret" not in page.locator(PANEL).inner_html()
    finally:
        page.close()


def test_while_the_server_is_away_a_search_answers_from_the_local_copy_and_says_so(
        browser_context, reader_lab, team):
    page = open_lab(browser_context, reader_lab)
    try:
        expect(card(page, "refreshes hourly")).to_be_visible()
        team.server.stop("immediate")
        try:
            search = page.locator(f"{PANEL} .nbm-Search")
            search.fill("churn dashboard hourly")
            search.press("Enter")
            behind = page.locator(f"{PANEL} .nbm-Behind")
            expect(behind).to_contain_text("The team store is unreachable: these come from "
                                           "this machine's copy as of")
            expect(page.locator(f"{PANEL} .nbm-Note").first).to_contain_text(
                "the churn dashboard refreshes hourly")
        finally:
            team.server.start()
        search.fill("churn dashboard")
        search.press("Enter")
        expect(page.locator(f"{PANEL} .nbm-Behind")).to_have_count(0)
    finally:
        page.close()
