"""The list's sort order (newest, oldest, priority first), kept across a reload and left out
of recall, which ranks by score; and a card's "About:" line, which names what a note is
about (files, directories, variables, a check) while it is still fresh."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from nbmemory.memory import Memory
from nbmemory.models import Anchor
from nbmemory.values import variable_fingerprint

from .conftest import open_lab, start_lab, stop_lab, wait_for
from .test_panel import PANEL, card_of, refresh
from .test_panel_conventions import saved_state

CARDS = f"{PANEL} .nbm-NoteList > .nbm-Note"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    # Pages of 5 (the least), so that 6 notes page; no poll: only the test refreshes.
    instance = start_lab(tmp_path_factory.mktemp("lab"),
                         settings={"nbmemory:plugin": {"pageSize": 5, "pollInterval": 0}})
    yield instance
    stop_lab(instance)


def shown_ids(page) -> list[int]:
    return [int(i) for i in page.locator(CARDS).evaluate_all(
        "cards => cards.map(c => c.dataset.noteId)")]


def expect_ids(page, ids: list[int]) -> None:
    wait_for(lambda: shown_ids(page) == ids, timeout=15,
             what=f"the cards {ids} (shown: {shown_ids(page)})")


def test_each_order_sorts_the_list_pages_and_survives_a_reload_but_not_recall(
        browser_context, lab):
    priorities = ["low", "high", "medium", "high", "low", "medium"]
    ids = [lab.remember(f"ledger fact {i} about the nightly ledger export",
                        priority=p)["id"] for i, p in enumerate(priorities)]
    n1, n2, n3, n4, n5, n6 = ids
    # An edit is a write: it brings the first note to the top of "newest", not of "oldest".
    assert lab.api(f"notes/{n1}", "PATCH", {"text": "ledger fact 0, corrected"})[0] == 200
    newest, oldest = [n1, n6, n5, n4, n3, n2], ids
    priority = [n4, n2, n6, n3, n5, n1]  # high, medium, low; the latest written first in each
    for order, expected in (("newest", newest), ("oldest", oldest), ("priority", priority)):
        listed = lab.api(f"notes?order={order}")[1]["notes"]
        assert [n["id"] for n in listed] == expected, order

    requests: list[str] = []
    page = open_lab(browser_context, lab,
                    before=lambda p: p.on("request", lambda r: requests.append(r.url)))
    try:
        select = page.locator(f"{PANEL} .nbm-OrderFilter")
        expect(select).to_have_value("newest")
        expect(select.locator("option")).to_have_text(
            ["Newest first", "Oldest first", "Highest priority first"])
        expect_ids(page, newest[:5])
        for order, expected in (("oldest", oldest), ("priority", priority), ("newest", newest)):
            select.select_option(order)
            expect_ids(page, expected[:5])
            # The next page goes on in the same order.
            page.locator(f"{PANEL} .nbm-Older").click()
            expect_ids(page, expected[5:])
            page.locator(f"{PANEL} .nbm-Newer").click()
            expect_ids(page, expected[:5])
        assert any("order=priority" in url and "offset=5" in url for url in requests)
        assert not any("order=newest" in url for url in requests)  # the default is not sent
        select.select_option("oldest")
        expect_ids(page, oldest[:5])
        # The pager's words follow the order: the next page holds newer notes now.
        expect(page.locator(f"{PANEL} .nbm-Older")).to_have_text("Newer ›")
        wait_for(lambda: ((saved_state(lab) or {}).get("filters") or {}).get("order")
                 == "oldest", what="the order in the workspace")
    finally:
        page.close()

    requests.clear()
    page = open_lab(browser_context, lab, reset=False,
                    before=lambda p: p.on("request", lambda r: requests.append(r.url)))
    try:
        select = page.locator(f"{PANEL} .nbm-OrderFilter")
        expect(select).to_have_value("oldest")
        expect_ids(page, oldest[:5])
        # A search ranks by score: the select gives way to words saying so, and the
        # order is not sent with the recall.
        search = page.locator(f"{PANEL} .nbm-Search")
        search.fill("ledger export")
        search.press("Enter")
        expect(page.locator(f"{PANEL} .nbm-Summary")).to_contain_text("recalled for")
        expect(select).to_have_count(0)
        ranked = page.locator(f"{PANEL} .nbm-Ranked")
        expect(ranked).to_have_text("Best match first")
        expect(ranked).to_have_attribute(
            "title", "Search results are ranked by how well they match; clear the search to "
                     "see the list sorted again (Oldest first)")
        recalled = lab.api("recall?query=ledger%20export&k=5")[1]["hits"]
        expect_ids(page, [hit["note"]["id"] for hit in recalled])
        recalls = [url for url in requests if "/nbmemory/recall?" in url]
        assert recalls and not any("order=" in url for url in recalls), recalls
        # The search cleared: the list is back in the order chosen.
        search.fill("")
        search.press("Enter")
        expect(ranked).to_have_count(0)
        expect(select).to_have_value("oldest")
        expect_ids(page, oldest[:5])
        # Clearing the filters (from an empty result) puts the order back to newest.
        page.locator(f"{PANEL} .nbm-KindFilter").select_option("procedure")
        page.locator(f"{PANEL} .nbm-ClearFilters").click()
        expect(select).to_have_value("newest")
        expect_ids(page, newest[:5])
        wait_for(lambda: ((saved_state(lab) or {}).get("filters") or {}).get("order")
                 == "newest", what="the cleared order in the workspace")
    finally:
        page.close()


def test_a_fresh_card_says_what_it_is_about(page, lab):
    work = lab.store.parent  # the store's workspace in these tests
    (work / "data" / "raw").mkdir(parents=True)
    (work / "data" / "orders.csv").write_text("amount\n120\n")
    for name in ("a.csv", "b.csv", "c.csv", "d.csv"):
        (work / "data" / name).write_text("x\n1\n")
    df = [120, 80]
    with Memory.open(lab.store, mode="service") as memory:
        about = memory.remember(
            "orders.amount is in cents in data/orders.csv",
            about=[str(work / "data" / "raw"), Anchor("variable", "df", variable_fingerprint(df))],
            check="len(df) > 0", namespace={"df": df})
        many = memory.remember("the four extracts agree",
                               about=[str(work / "data" / n)
                                      for n in ("a.csv", "b.csv", "c.csv", "d.csv")]
                               + [str(work / "data" / "orders.csv")])
    plain = lab.remember("a note about nothing in particular")
    # The list answers with the anchors of fresh notes too.
    listed = {n["id"]: n for n in lab.api("notes")[1]["notes"]}
    assert listed[about.id]["stale"] == []
    assert {(a["kind"], a["target"]) for a in listed[about.id]["anchors"]} == {
        ("data", "data/orders.csv"), ("dir", "data/raw"), ("variable", "df"),
        ("check", "len(df) > 0")}
    refresh(page)
    shown = card_of(page, {"id": about.id})
    expect(shown.locator(".nbm-StaleBadge")).to_have_count(0)
    # The check has its own line (and when it last held), so About does not repeat it.
    expect(shown.locator(".nbm-CheckExpr")).to_have_text("len(df) > 0")
    line = shown.locator(".nbm-About")
    expect(line).to_have_text("About: data/raw/, df, data/orders.csv")
    assert line.get_attribute("title") is None
    # Five things: the first three, then how many more; the title names them all.
    long = card_of(page, {"id": many.id}).locator(".nbm-About")
    expect(long).to_have_text("About: data/a.csv, data/b.csv, data/c.csv, +2 more")
    expect(long).to_have_attribute(
        "title", "data/a.csv, data/b.csv, data/c.csv, data/d.csv, data/orders.csv")
    expect(card_of(page, plain).locator(".nbm-About")).to_have_count(0)
    # Still said once the note is stale, beside why.
    (work / "data" / "orders.csv").write_text("amount\n120\n80\n")
    refresh(page)
    expect(shown.locator(".nbm-StaleReason")).to_contain_text("data/orders.csv")
    expect(line).to_have_text("About: data/raw/, df, data/orders.csv")
