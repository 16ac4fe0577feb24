"""The panel keeps up with the store: stale flags, the owner's restarts, cold starts, and
each request sent once (issue 17, items 1, 8 and 9)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import expect

from nbmemory.config import DEFAULT_MODEL
from nbmemory.memory import Memory
from nbmemory.service import owner_info, stop

from .conftest import open_lab, start_lab, stop_lab, toast, wait_for
from .test_panel import PANEL, card, card_of, refresh

# The poll every second: what it brings shows up in a test without waiting long.
FAST_POLL = {"nbmemory:plugin": {"pollInterval": 1}}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    instance = start_lab(tmp_path_factory.mktemp("lab"), settings=FAST_POLL)
    yield instance
    stop_lab(instance)


def test_a_file_change_shows_the_stale_badge_at_the_next_poll(page, lab):
    """Nothing is written to the store when a file changes under a note: the panel still
    shows the badge at its next poll, with no refresh and no filter change."""
    data = lab.store.parent / "inputs"
    data.mkdir(exist_ok=True)
    (data / "orders.csv").write_text("id,amount\n1,100\n")
    note = lab.remember("amounts in inputs/orders.csv are in cents")
    shown = card_of(page, note)
    expect(shown).to_be_visible(timeout=10_000)  # the poll brings the note itself
    expect(shown.locator(".nbm-StaleBadge")).to_have_count(0)
    (data / "orders.csv").write_text("id,amount,discount\n1,100,0\n")
    expect(shown.locator(".nbm-StaleBadge")).to_be_visible(timeout=10_000)
    expect(shown.locator(".nbm-StaleReason")).to_contain_text("inputs/orders.csv")
    expect(page.locator(f"{PANEL} .nbm-StatusStale")).to_have_text("1 stale")
    # And back: the file as it was is no longer a change.
    (data / "orders.csv").write_text("id,amount\n1,100\n")
    expect(shown.locator(".nbm-StaleBadge")).to_have_count(0, timeout=10_000)


def test_the_status_line_follows_the_owner_across_a_restart(page, lab):
    """After ``nbmemory stop`` the status line says the service is not running (the poll
    starts none and names no dead pid); the next owner's pid shows once one runs."""
    status = page.locator(f"{PANEL} .nbm-Status")
    expect(status).to_contain_text("owner: owner service (pid ")
    first = owner_info(lab.store)["pid"]
    expect(status).to_contain_text(f"(pid {first})")
    assert process_state(first)[1] == lab.process.pid, "the Jupyter server started this owner"
    # ``nbmemory stop`` (its entry point, imported ahead), sent right after a poll came
    # back: a poll that reaches the owner while it shuts down still starts a new one (the
    # server's status call has no "do not start" mode yet), which this test is not about.
    cli = subprocess.Popen(
        [sys.executable, "-c", "import sys; from nbmemory.cli import main; "
         "print('ready', flush=True); sys.stdin.readline(); sys.exit(main(sys.argv[1:]))",
         "stop", "--store", str(lab.store)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    assert cli.stdout.readline().strip() == "ready", cli.stderr.read()
    with page.expect_response(lambda r: "/nbmemory/status?start=false" in r.url):
        pass
    out, err = cli.communicate("go\n", timeout=60)
    assert cli.returncode == 0 and f"(pid {first})" in out, err
    expect(status).to_contain_text("memory service: not running", timeout=10_000)
    expect(status).not_to_contain_text(f"pid {first}")
    assert owner_info(lab.store) is None, "the panel's poll must not start an owner"
    # The server started that owner, so only the server can collect it: no <defunct> left.
    wait_for(lambda: process_state(first) is None, timeout=10,
             what=f"the stopped owner (pid {first}) to be reaped, not left <defunct>")
    lab.remember("written after the owner stopped")  # the server starts a new owner
    expect(card(page, "written after the owner stopped")).to_be_visible(timeout=10_000)
    second = owner_info(lab.store)["pid"]
    assert second != first
    expect(status).to_contain_text(f"owner: owner service (pid {second})")


def editing(page, lab, typed: str):
    """A new note "the retry limit is 3", its card, and its edit box holding ``typed``."""
    note = lab.remember("the retry limit is 3", tags="config")
    shown = card_of(page, note)
    expect(shown).to_be_visible(timeout=10_000)
    shown.locator(".nbm-Edit").click()
    text = shown.locator(".nbm-EditText")
    text.fill(typed)
    return note, shown, text


def test_an_edit_survives_a_write_elsewhere_and_keeps_it(page, lab):
    """The poll brings a new version while the note is being edited: the edit stays, says
    so, and saving writes only the fields it changed (the other change is kept)."""
    note, shown, text = editing(page, lab, "the retry limit is 5 since v2.3")
    assert lab.api(f"notes/{note['id']}", "PATCH", {"priority": "low"})[0] == 200
    expect(shown.locator(".nbm-Priority")).to_have_text("low", timeout=10_000)  # the poll
    expect(shown.locator(".nbm-EditNotice")).to_contain_text(
        "Changed elsewhere while you edit it (now version 2)")
    expect(text).to_have_value("the retry limit is 5 since v2.3")
    shown.locator(".nbm-Save").click()
    expect(shown.locator(".nbm-Version")).to_have_text("v3")
    saved = lab.api(f"notes/{note['id']}")[1]["note"]
    assert (saved["text"], saved["priority"]) == ("the retry limit is 5 since v2.3", "low")


def test_an_edit_of_a_field_changed_elsewhere_too_shows_theirs_before_saving_over_it(page, lab):
    """A colleague changed the text the edit changes: saving writes nothing and shows their
    version (before, theirs was silently overwritten); the user saves over it or keeps it."""
    note, shown, text = editing(page, lab, "the retry limit is 5")
    assert lab.api(f"notes/{note['id']}", "PATCH", {"text": "the retry limit is 4"})[0] == 200
    # The poll brings version 2: the notice says saving will show theirs, as it does.
    expect(shown.locator(".nbm-EditNotice")).to_have_text(
        "Changed elsewhere while you edit it (now version 2), in what you changed too: saving "
        "shows you their version first.", timeout=10_000)
    shown.locator(".nbm-Save").click()
    conflict = shown.locator(".nbm-Conflict")
    expect(conflict).to_contain_text("Not saved: version 2, written elsewhere while you "
                                     "edited, changed the text too. It says:")
    # The Save clicked is disabled while saving: the choice takes focus, not the page's body.
    expect(conflict.locator(".nbm-SaveOver")).to_be_focused()
    expect(conflict.locator(".nbm-ConflictTheirs")).to_have_text("the retry limit is 4")
    assert lab.api(f"notes/{note['id']}")[1]["note"]["text"] == "the retry limit is 4"
    expect(text).to_have_value("the retry limit is 5")  # nothing the user typed is lost
    conflict.locator(".nbm-SaveOver").click()
    expect(shown.locator(".nbm-Version")).to_have_text("v3")
    assert lab.api(f"notes/{note['id']}")[1]["note"]["text"] == "the retry limit is 5"
    # Keep theirs: the edit closes and their version stays.
    shown.locator(".nbm-Edit").click()
    text.fill("the retry limit is 6")
    assert lab.api(f"notes/{note['id']}", "PATCH", {"text": "the retry limit is 7"})[0] == 200
    shown.locator(".nbm-Save").click()
    shown.locator(".nbm-KeepTheirs").click()
    expect(shown.locator(".nbm-Editor")).to_have_count(0)
    expect(shown.locator(".nbm-Version")).to_have_text("v4")  # theirs shown, not the old text
    expect(shown).to_contain_text("the retry limit is 7")
    assert lab.api(f"notes/{note['id']}")[1]["note"]["text"] == "the retry limit is 7"


def test_an_edit_stays_when_its_note_leaves_the_view(page, lab):
    """Another client's write takes the note out of the filtered list: its edit stays on
    top, saying why, until it is saved or cancelled."""
    note = lab.remember("exports are gzipped since march", tags="exports")
    tags = page.locator(f"{PANEL} .nbm-TagFilter")
    tags.fill("exports")
    tags.press("Enter")
    shown = card_of(page, note)
    shown.locator(".nbm-Edit").click()
    shown.locator(".nbm-EditText").fill("exports are zstd since june")
    assert lab.api(f"notes/{note['id']}", "PATCH", {"tags": ["archive"]})[0] == 200
    expect(shown.locator(".nbm-EditNotice")).to_contain_text(
        "This note is no longer on this page", timeout=10_000)
    expect(shown.locator(".nbm-EditText")).to_have_value("exports are zstd since june")
    shown.locator(".nbm-Cancel").click()
    expect(shown).to_have_count(0)
    # Its card is gone, focus is not: it went on in the panel (it fell to the page's body).
    expect(page.locator(f"{PANEL} :focus")).to_have_count(1)
    assert lab.api(f"notes/{note['id']}")[1]["note"]["text"] == "exports are gzipped since march"
    tags.fill("")
    tags.press("Enter")


def test_an_error_clears_by_itself_once_the_store_is_free(page, lab):
    """A search that failed (the store held by another process) runs again at the next poll
    once the store is free: no stale banner, no other query's results meanwhile."""
    lab.remember("the ledger closes on the fifth working day")
    expect(card(page, "the ledger closes")).to_be_visible(timeout=10_000)
    stop(lab.store)
    with Memory.open(lab.store, model="hash:64", mode="local"):
        search = page.locator(f"{PANEL} .nbm-Search")
        search.fill("ledger closes")
        search.press("Enter")
        banner = page.locator(f"{PANEL} .nbm-Banner.nbm-mod-error")
        expect(banner).to_contain_text("owned by another process", timeout=20_000)
        expect(page.locator(f"{PANEL} .nbm-Note")).to_have_count(0)
        expect(page.locator(f"{PANEL} .nbm-Status")).to_contain_text(
            "memory service: unavailable (see above)")
        # A write meanwhile fails with a notice, kept in its form.
        page.locator(f"{PANEL} .nbm-NewNote").click()
        form = page.locator(f"{PANEL} .nbm-NewNote-Form")
        form.locator(".nbm-EditText").fill("the ledger reopens on the first")
        form.locator(".nbm-Save").click()
        refused = toast(page, "owned by another process")
        expect(refused).to_be_visible(timeout=20_000)
    expect(banner).to_have_count(0, timeout=20_000)
    # The store is free: the notice saying it was not is closed, not left under what follows.
    expect(refused).to_have_count(0, timeout=10_000)
    expect(form.locator(".nbm-EditText")).to_have_value("the ledger reopens on the first")
    form.locator(".nbm-Cancel").click()
    expect(form).to_have_count(0)
    expect(page.locator(f"{PANEL} .nbm-Summary")).to_contain_text("recalled for “ledger closes”")
    expect(card(page, "the ledger closes")).to_be_visible()
    search.fill("")
    search.press("Enter")


def nbmemory_api(url: str) -> bool:
    """A request of the panel to nbmemory's REST API (not its own script files)."""
    return "/nbmemory/" in url and "/static/" not in url


def test_while_jupyters_server_is_down_the_panel_says_so_in_words_and_keeps_the_edit(
        page, lab):
    """No answer from Jupyter's server (stopped, or the network down): the panel says so in
    words (not "TypeError: Failed to fetch"), does not blame the memory service, does not say
    the note being edited moved, and keeps the edit; once the server answers again its
    notice closes by itself and the edit saves."""
    note, shown, text = editing(page, lab, "the retry limit is 8")
    words = "JupyterLab's server is not responding (stopped, or the network is down)."
    page.route(nbmemory_api, lambda route: route.abort())  # what a stopped server gives
    try:
        shown.locator(".nbm-Save").click()
        said = toast(page, words + " Your edit is kept; save it once the server is back.")
        expect(said).to_be_visible()
        expect(text).to_have_value("the retry limit is 8")
        # A search meanwhile: the list cannot load, and the panel says why.
        search = page.locator(f"{PANEL} .nbm-Search")
        search.fill("retry limit")
        search.press("Enter")
        banner = page.locator(f"{PANEL} .nbm-Banner.nbm-mod-error")
        expect(banner).to_have_text(words)
        status = page.locator(f"{PANEL} .nbm-Status")
        expect(status).to_have_text("JupyterLab's server: not responding (see above)")
        expect(shown.locator(".nbm-EditNotice")).to_have_text(
            "JupyterLab's server is not responding: your edit is kept here; save it once the "
            "server is back.")
        expect(text).to_have_value("the retry limit is 8")
        expect(page.locator(PANEL)).not_to_contain_text("memory service")
        expect(page.locator(PANEL)).not_to_contain_text("no longer on this page")
        expect(page.locator(".Toastify__toast", has_text="TypeError")).to_have_count(0)
    finally:
        page.unroute(nbmemory_api)
    # Back: the poll finds the server, the search runs again, the notice closes by itself.
    expect(page.locator(f"{PANEL} .nbm-Summary")).to_contain_text(
        "recalled for “retry limit”", timeout=10_000)
    expect(banner).to_have_count(0)
    expect(said).to_have_count(0, timeout=10_000)
    expect(status).to_contain_text("owner: owner service")
    expect(shown.locator(".nbm-EditNotice")).to_have_count(0)
    shown.locator(".nbm-Save").click()
    expect(shown.locator(".nbm-Version")).to_have_text("v2")
    assert lab.api(f"notes/{note['id']}")[1]["note"]["text"] == "the retry limit is 8"
    search.fill("")
    search.press("Enter")


KEYWORD_ONLY = ("Keyword matches only: the model is still loading. Ask again in a few seconds "
                "for the full search.")


def test_a_keyword_only_answer_is_dropped_once_the_full_search_answers(page, lab):
    """While the model loads, recall answers from the keywords and says so. Asking again
    (Enter on the same words, as the line says) drops the line once the full search
    answers; so does the poll once the model is in, even if "loaded" was said while it was
    still warming up. The server's real replies, with the model's state as such an owner
    reports it."""
    lab.remember("the vat rate changed in april", tags="vat")
    # The owner's model: "loading", then "warming" (loaded is said, not yet usable), "in".
    model = {"state": "loading", "keywords_only": True}
    fields = {"loading": {"model_loaded": False, "model_loading": True},
              "warming": {"model_loaded": True, "model_loading": True}}

    def status(route):
        response = route.fetch()
        body = response.json()
        if body.get("running") and model["state"] in fields:
            body = {**body, **fields[model["state"]]}
        route.fulfill(response=response, body=json.dumps(body))

    def recall(route):
        response = route.fetch()
        body = response.json()
        if model["keywords_only"]:
            body = {**body, "behind": KEYWORD_ONLY}
        route.fulfill(response=response, body=json.dumps(body))

    def polls(count: int) -> None:
        for _ in range(count):
            with page.expect_response(lambda r: "/nbmemory/status?start=false" in r.url):
                pass

    page.route("**/nbmemory/status*", status)
    page.route("**/nbmemory/recall*", recall)
    try:
        search = page.locator(f"{PANEL} .nbm-Search")
        notice = page.locator(f"{PANEL} .nbm-Behind")
        summary = page.locator(f"{PANEL} .nbm-Summary")
        search.fill("vat rate")
        search.press("Enter")
        expect(notice).to_have_text(KEYWORD_ONLY)
        expect(summary).to_contain_text("recalled for “vat rate”")
        # Warming up: the poll does not ask again yet (it would get keywords again).
        model["state"] = "warming"
        polls(2)
        expect(notice).to_have_text(KEYWORD_ONLY)
        # Enter on the same words asks again, as the line says; the full search answers.
        model["keywords_only"] = False
        with page.expect_response(lambda r: "/nbmemory/recall" in r.url):
            search.press("Enter")
        expect(notice).to_have_count(0)
        expect(summary).to_contain_text("recalled for “vat rate”")
        # The poll: another search answered from the keywords, then the model is in.
        model["keywords_only"] = True
        search.fill("vat rate april")
        search.press("Enter")
        expect(summary).to_contain_text("recalled for “vat rate april”")
        expect(notice).to_have_text(KEYWORD_ONLY)
        polls(1)
        model.update(state="in", keywords_only=False)
        expect(notice).to_have_count(0, timeout=10_000)
        expect(summary).to_contain_text("recalled for “vat rate april”")
    finally:
        page.unroute("**/nbmemory/status*")
        page.unroute("**/nbmemory/recall*")
    search.fill("")
    search.press("Enter")


def process_state(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process from Linux's /proc ("Z" is a zombie, <defunct>),
    or None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    state, ppid = stat.rsplit(")", 1)[1].split()[:2]
    return state, int(ppid)


def nbmemory_request(url: str) -> str | None:
    """``notes?kind=question`` for a panel request, without the cache-busting number."""
    parts = urlsplit(url)
    if "/nbmemory/" not in parts.path or "/static/" in parts.path:
        return None
    query = [q for q in parts.query.split("&") if q and not re.fullmatch(r"\d+", q)]
    path = parts.path.split("/nbmemory/", 1)[1]
    return path + ("?" + "&".join(query) if query else "")


def wait_for_polls(page, sent: list[str], count: int, timeout: float = 30.0) -> None:
    """Until ``count`` polls were sent (each wait lets playwright deliver the events)."""
    deadline = time.monotonic() + timeout
    while sent.count("status?start=false") < count:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"no poll (status?start=false) within {timeout:g} s; "
                                 f"sent: {sent}")
        try:
            page.wait_for_event("request", timeout=left * 1000)
        except PlaywrightTimeout:
            pass


def workspace(lab) -> dict:
    request = urllib.request.Request(f"{lab.url}/lab/api/workspaces/default",
                                     headers={"Authorization": f"token {lab.token}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read()).get("data", {})


def test_each_request_is_sent_once_at_start_and_on_a_filter_change(browser_context, lab):
    """JupyterLab restores the panel open, loads the settings and the saved state, shows
    the panel and starts the poll, all at start: the panel still asks once for each."""
    lab.remember("counted once", tags="count", kind="question")
    page = open_lab(browser_context, lab)
    wait_for(lambda: workspace(lab).get("layout-restorer:data", {}).get("left", {})
             .get("current") == "nbmemory-panel", what="the layout with the panel open")
    page.close()
    sent: list[str] = []

    def watch(page):
        page.on("request", lambda r: (name := nbmemory_request(r.url)) and sent.append(name))

    page = open_lab(browser_context, lab, reset=False, before=watch)
    try:
        expect(card(page, "counted once")).to_be_visible()
        # The first poll comes a second after the start: whatever the start sends is out.
        wait_for_polls(page, sent, 1)
        start = [r for r in sent if r != "status?start=false"]
        # The cards' checks come in one request with the notes, never one per card.
        assert sorted(start) == ["checks", "notes?offset=0&limit=25", "status", "version"], start
        sent.clear()
        page.locator(f"{PANEL} .nbm-KindFilter").select_option("question")
        expect(page.locator(f"{PANEL} .nbm-Summary")).to_have_text(re.compile(r"^1 note$"))
        wait_for_polls(page, sent, sent.count("status?start=false") + 1)
        changed = [r for r in sent if r != "status?start=false"]
        assert sorted(changed) == ["checks", "notes?kind=question&offset=0&limit=25"], changed
        page.locator(f"{PANEL} .nbm-KindFilter").select_option("")
    finally:
        page.close()


RECORD_PHASES = """
window.__nbmPhases = [];
new MutationObserver(() => {
  for (const node of document.querySelectorAll('.nbm-Phase')) {
    const text = node.textContent.trim();
    if (window.__nbmPhases[window.__nbmPhases.length - 1] !== text) {
      window.__nbmPhases.push(text);
    }
  }
}).observe(document, {subtree: true, childList: true, characterData: true});
"""


@pytest.mark.model
def test_cold_start_says_it_starts_the_service_and_loads_the_model(browser_context, tmp_path):
    """With no owner running and the real model, the first request waits for an owner to
    start (the panel says so); recall then answers from keywords while the model loads,
    saying so, and by meaning once it is in."""
    from nbmemory.memory import Memory

    store = tmp_path / "store"
    with Memory.open(store, model=DEFAULT_MODEL, mode="local") as memory:
        memory.remember("orders.amount is in cents before 2021", tags="orders")
    lab = start_lab(tmp_path, model=DEFAULT_MODEL)  # the server opens the store lazily
    try:
        assert owner_info(lab.store) is None
        page = open_lab(browser_context, lab,
                        before=lambda p: p.add_init_script(RECORD_PHASES))
        expect(card(page, "orders.amount is in cents")).to_be_visible(timeout=60_000)
        assert "Starting the memory service…" in page.evaluate("() => window.__nbmPhases")
        search = page.locator(f"{PANEL} .nbm-Search")
        search.fill("which unit is the order total in")
        search.press("Enter")
        answered = re.compile("recalled for|below the score threshold")  # keywords may miss
        summary = page.locator(f"{PANEL} .nbm-Summary")
        expect(summary).to_contain_text(answered, timeout=120_000)
        notice = page.locator(f"{PANEL} .nbm-Behind")
        keyword_only = ("Keyword matches only: the model is still loading. Ask again in a few "
                        "seconds for the full search.")
        if notice.count():  # answered before the model was in: from keywords, and says so
            expect(notice).to_have_text(keyword_only)
            # Asked again by itself once the poll sees the model in (it stayed up before).
            expect(notice).to_have_count(0, timeout=120_000)
        expect(summary).to_contain_text("recalled for")
        expect(card(page, "orders.amount is in cents")).to_be_visible()  # by meaning
        expect(page.locator(f"{PANEL} .nbm-Phase")).to_have_count(0)
        page.close()
    finally:
        stop_lab(lab)
        stop(lab.store)
