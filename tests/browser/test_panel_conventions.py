"""The panel as a JupyterLab extension should be: translatable strings, the Jupyter user
as author, state kept across reloads, JupyterLab's icons, and a token other extensions
recall and remember through (issue 17, item 11)."""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import expect

from .conftest import open_lab, start_lab, stop_lab, toast, wait_for
from .identity import NAME
from .test_panel import PANEL, card, card_of, refresh

REPO = Path(__file__).parents[2]

# A language pack with nbmemory's strings only, as a translator would ship one.
FRENCH = {
    "": {"domain": "nbmemory", "language": "fr-FR", "plural_forms": "nplurals=2; plural=(n > 1);",
         "version": "0.1.0"},
    "Notes": ["Fiches"],
    "Snapshots": ["Instantanés"],
    "Recall: ask in any words…": ["Rappel : demandez avec vos mots…"],
    "%1 note": ["%1 fiche", "%1 fiches"],
    "Edit": ["Modifier"],
    "Forget": ["Oublier"],
    "New note": ["Nouvelle fiche"],
    "Forgot #%1.": ["#%1 oubliée."],
    "Undo": ["Annuler"],
}


def language_pack(folder: Path) -> Path:
    """A fake fr_FR language pack on a PYTHONPATH entry (a module and its entry point)."""
    package = folder / "nbm_test_language_pack"
    messages = package / "fr_FR" / "LC_MESSAGES"
    messages.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (messages / "nbmemory.json").write_text(json.dumps(FRENCH))
    info = folder / "nbm_test_language_pack-0.0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: nbm-test-language-pack\n"
                                   "Version: 0.0.0\n")
    (info / "entry_points.txt").write_text("[jupyterlab.languagepack]\n"
                                          "fr_FR = nbm_test_language_pack\n")
    return folder


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A server where every request is Ana (as on JupyterHub), with a French pack."""
    tmp = tmp_path_factory.mktemp("lab")
    pack = language_pack(tmp / "pack")
    path = os.pathsep.join(p for p in (str(REPO), str(pack), os.environ.get("PYTHONPATH"))
                           if p)
    instance = start_lab(tmp, env_extra={"PYTHONPATH": path}, extra_args=[
        "--ServerApp.identity_provider_class=tests.browser.identity.NamedUser"])
    yield instance
    stop_lab(instance)


def test_strings_go_through_jupyterlab_translation(browser_context, lab):
    lab.remember("une fiche en français", tags="i18n")
    body = json.dumps({"raw": json.dumps({"locale": "fr_FR"})}).encode()
    plugin = "@jupyterlab/translation-extension:plugin"

    def put(raw: bytes) -> None:
        request = urllib.request.Request(
            f"{lab.url}/lab/api/settings/{plugin}", data=raw, method="PUT",
            headers={"Authorization": f"token {lab.token}", "Content-Type": "application/json"})
        urllib.request.urlopen(request, timeout=30).close()

    put(body)
    page = open_lab(browser_context, lab)
    try:
        tabs = page.locator(f"{PANEL} .nbm-Tab")
        expect(tabs).to_have_text(["Fiches", "Instantanés"])
        expect(page.locator(f"{PANEL} .nbm-Search")).to_have_attribute(
            "placeholder", "Rappel : demandez avec vos mots…")
        shown = card(page, "une fiche en français")
        expect(shown.locator(".nbm-Edit")).to_contain_text("Modifier")
        expect(page.locator(f"{PANEL} .nbm-Summary")).to_have_text("1 fiche")
        expect(page.locator(f"{PANEL} .nbm-NewNote")).to_have_attribute("title", "Nouvelle fiche")
        shown.locator(".nbm-Forget").click()
        notice = toast(page, "oubliée.")
        expect(notice.get_by_role("button", name="Annuler")).to_be_visible()
        notice.get_by_role("button", name="Annuler").click()
        expect(card(page, "une fiche en français")).to_be_visible()
    finally:
        page.close()
        put(json.dumps({"raw": "{}"}).encode())


def test_panel_writes_are_attributed_to_the_jupyter_user(page, lab):
    """Edit, forget, reinstate and verify from the panel name Ana, not the server's user."""
    note = lab.remember("the batch window opens at 01:00")
    assert note["author"] == NAME
    refresh(page)
    shown = card_of(page, note)
    shown.locator(".nbm-Edit").click()
    shown.locator(".nbm-EditText").fill("the batch window opens at 01:30")
    shown.locator(".nbm-Save").click()
    expect(card(page, "opens at 01:30").locator(".nbm-Version")).to_have_text("v2")
    card_of(page, note).locator(".nbm-Verify").click()
    expect(toast(page, f"Verified #{note['id']}")).to_be_visible()
    card_of(page, note).locator(".nbm-Forget").click()
    toast(page, f"Forgot #{note['id']}.").get_by_role("button", name="Undo").click()
    expect(card_of(page, note)).to_be_visible()
    expect(card_of(page, note).locator(".nbm-Provenance")).to_contain_text(f"· {NAME}")
    history = lab.api(f"notes/{note['id']}")[1]["history"]
    assert [(e["type"], e["actor"]) for e in history] == [
        ("created", NAME), ("edited", NAME), ("verified", NAME), ("revoked", NAME),
        ("reinstated", NAME)], history


def saved_state(lab) -> dict | None:
    request = urllib.request.Request(f"{lab.url}/lab/api/workspaces/default",
                                     headers={"Authorization": f"token {lab.token}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        data = json.loads(response.read())
    return data.get("data", {}).get("nbmemory:panel")


def test_search_filters_and_tab_are_kept_across_a_reload(browser_context, lab):
    lab.remember("the lock file lives next to the workspace", kind="gotcha", tags="locks")
    page = open_lab(browser_context, lab)
    try:
        page.locator(f"{PANEL} .nbm-Search").fill("lock file")
        page.locator(f"{PANEL} .nbm-Search").press("Enter")
        page.locator(f"{PANEL} .nbm-KindFilter").select_option("gotcha")
        page.locator(f"{PANEL} .nbm-TagFilter").fill("locks")
        page.locator(f"{PANEL} .nbm-TagFilter").press("Enter")
        expect(page.locator(f"{PANEL} .nbm-Summary")).to_contain_text("recalled for “lock file”")
        page.locator(f"{PANEL} .nbm-Tab", has_text="Snapshots").click()
        wait_for(lambda: (saved_state(lab) or {}).get("view") == "snapshots",
                 what="the panel's state in the workspace")
    finally:
        page.close()
    page = open_lab(browser_context, lab, reset=False)
    try:
        expect(page.locator(f"{PANEL} .nbm-Tab.nbm-mod-active")).to_have_text("Snapshots")
        page.locator(f"{PANEL} .nbm-Tab", has_text="Notes").click()
        expect(page.locator(f"{PANEL} .nbm-Search")).to_have_value("lock file")
        expect(page.locator(f"{PANEL} .nbm-KindFilter")).to_have_value("gotcha")
        expect(page.locator(f"{PANEL} .nbm-TagFilter")).to_have_value("locks")
        expect(card(page, "the lock file lives next to")).to_be_visible()
        # Back to a clean panel for the tests after this one.
        page.locator(f"{PANEL} .nbm-Search").fill("")
        page.locator(f"{PANEL} .nbm-Search").press("Enter")
        page.locator(f"{PANEL} .nbm-KindFilter").select_option("")
        page.locator(f"{PANEL} .nbm-TagFilter").fill("")
        page.locator(f"{PANEL} .nbm-TagFilter").press("Enter")
        wait_for(lambda: (saved_state(lab) or {}).get("query") == "",
                 what="the cleared state in the workspace")
    finally:
        page.close()


def test_buttons_use_jupyterlab_icons(page, lab):
    lab.remember("a note with action buttons")
    refresh(page)
    expect(page.locator(f"{PANEL} .nbm-Refresh svg[data-icon='ui-components:refresh']")) \
        .to_have_count(1)
    expect(page.locator(f"{PANEL} .nbm-NewNote svg[data-icon='ui-components:add']")) \
        .to_have_count(1)
    actions = card(page, "a note with action buttons").locator(".nbm-Actions button")
    for i in range(actions.count()):
        expect(actions.nth(i).locator("svg[data-icon^='ui-components:']")).to_have_count(1)


TOKEN_CLIENT = """async () => {
  // What another extension does: import nbmemory's token and ask the app for the service.
  const factory = await window._JUPYTERLAB['nbmemory'].get('./index');
  const { INbMemory } = factory();
  const memory = await window.jupyterapp.resolveRequiredService(INbMemory);
  let changed = 0;
  memory.changed.connect(() => { changed += 1; });
  const note = await memory.remember('written through the INbMemory token', {
    kind: 'decision', tags: ['token']});
  const hits = await memory.recall('INbMemory token', {k: 3});
  const page = await memory.notes({tags: 'token'});
  return {id: note.id, author: note.author, recalled: hits.hits.map(h => h.note.id),
          listed: page.notes.map(n => n.id), changed};
}"""


def test_other_extensions_recall_and_remember_through_the_token(page, lab):
    result = page.evaluate(TOKEN_CLIENT)
    assert result["author"] == NAME and result["changed"] == 1
    assert result["recalled"][0] == result["id"] and result["listed"] == [result["id"]]
    expect(card(page, "written through the INbMemory token")).to_be_visible()
