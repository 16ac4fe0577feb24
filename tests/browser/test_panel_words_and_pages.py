"""A snapshot diff names and orders every kind of change the server makes (refuted too), and
a search keeps its page of hits while only the white space around its words changes."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from nbmemory.memory import Memory

from .conftest import start_lab, stop_lab
from .test_panel import PANEL, refresh


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    instance = start_lab(tmp_path_factory.mktemp("lab"),
                         settings={"nbmemory:plugin": {"pageSize": 5}})
    yield instance
    stop_lab(instance)


def test_a_refuted_question_has_its_place_in_a_diff(page, lab):
    question = lab.remember("is orders.amount in dollars?", kind="question")
    back = lab.remember("the export runs at 02:00")
    assert lab.api(f"notes/{back['id']}/forget", "POST")[0] == 200
    assert lab.api("snapshots", "POST", {"name": "before-refuting"})[0] == 201
    with Memory.open(lab.store, mode="service") as memory:
        memory.refute(question["id"], "it is in cents")
    assert lab.api(f"notes/{back['id']}/reinstate", "POST")[0] == 200
    lab.remember("orders.amount is in cents")
    page.locator(f"{PANEL} .nbm-Tab", has_text="Snapshots").click()
    page.locator(f"{PANEL} .nbm-DiffFrom").select_option("before-refuting")
    page.locator(f"{PANEL} .nbm-Compare").click()
    # In the server's order (models.CHANGES): added, ..., refuted, reinstated, ...
    expect(page.locator(f"{PANEL} .nbm-DiffTitle")).to_have_text(
        ["added (1)", "refuted (1)", "reinstated (1)"])
    page.locator(f"{PANEL} .nbm-Tab", has_text="Notes").click()


def test_a_trailing_space_keeps_the_hits_more_brought(page, lab):
    for i in range(8):
        lab.remember(f"ledger row {i} repeats in the nightly ledger export")
    refresh(page)
    search = page.locator(f"{PANEL} .nbm-Search")
    search.fill("ledger export")
    search.press("Enter")
    hits = page.locator(f"{PANEL} .nbm-NoteList > .nbm-Note")
    expect(hits).to_have_count(5)
    page.locator(f"{PANEL} .nbm-MoreHits").click()
    expect(hits).not_to_have_count(5)
    more = hits.count()  # the 8 and what else scores above the threshold
    assert more >= 8
    search.press("End")
    search.type(" ")
    search.press("Enter")
    # A refresh after the Enter: what it shows is what the search now asks.
    page.evaluate("() => window.jupyterapp.commands.execute('nbmemory:refresh')")
    expect(hits).to_have_count(more)
    expect(search).to_have_value("ledger export ")
