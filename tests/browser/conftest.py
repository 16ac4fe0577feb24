"""A real ``jupyter lab`` and Debian's Chromium, driven by Python playwright.

Never ``playwright install``: the browser is ``/usr/bin/chromium`` (apt-get install chromium).
Each test module gets its own server (own port, token, workspaces and settings dirs, news
off) and store; screenshots go to ``test-artifacts/``.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("NBMEMORY_CHROMIUM", "/usr/bin/chromium")
REPO = Path(__file__).parents[2]
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-dev-shm-usage"]


def wait_for(condition, timeout: float = 30.0, interval: float = 0.1, what: str = "condition"):
    """Poll ``condition()`` until it returns something truthy; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Lab:
    """A running ``jupyter lab`` with nbmemory's server extension and panel."""

    def __init__(self, root: Path, store: Path, port: int, token: str, process, log: Path):
        self.root, self.store, self.port, self.token = root, store, port, token
        self.process, self.log = process, log
        self.url = f"http://127.0.0.1:{port}"

    def api(self, path: str, method: str = "GET", body=None):
        """Call the REST API with the token; returns (status, json)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.url}/nbmemory/{path}", data=data, method=method,
                                         headers={"Authorization": f"token {self.token}"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"null")

    def remember(self, text: str, **fields) -> dict:
        status, note = self.api("notes", "POST", {"text": text, **fields})
        assert status == 201, note
        return note


def this_checkouts_panel(tmp: Path) -> dict[str, str]:
    """``JUPYTER_PATH`` for a server that serves the panel built in this checkout
    (``jlpm build`` writes ``nbmemory/labextension``), ahead of the one the virtual
    environment links to: a worktree's tests then drive its own panel, not main's."""
    built = REPO / "nbmemory" / "labextension"
    if not (built / "package.json").exists():
        return {}
    data = tmp / "jupyter-data"
    (data / "labextensions").mkdir(parents=True)
    (data / "labextensions" / "nbmemory").symlink_to(built, target_is_directory=True)
    return {"JUPYTER_PATH": os.pathsep.join(
        p for p in (str(data), os.environ.get("JUPYTER_PATH")) if p)}


def start_lab(tmp: Path, env_extra: dict | None = None, extra_args: list[str] = (),
              wait_api: bool = True, model: str = "hash:64",
              settings: dict[str, dict] | None = None, root: Path | None = None,
              store: Path | None = None) -> Lab:
    """Start ``jupyter lab`` on ``root`` (``tmp/root``) with the store ``store``
    (``tmp/store``); its settings, workspaces and log are in ``tmp``.

    ``settings`` are user settings written before the start, by plugin id
    (``{"nbmemory:plugin": {"pollInterval": 1}}``); ``model`` is the server's model
    (the tiny hash embedder unless the test is about the real one).
    """
    root, store = root or tmp / "root", store or tmp / "store"
    root.mkdir(parents=True)
    settings_dir = tmp / "settings"
    plugins = {"@jupyterlab/apputils-extension:notification":
               {"fetchNews": "false", "checkForUpdates": False}, **(settings or {})}
    for plugin, values in plugins.items():
        package, name = plugin.rsplit(":", 1)
        folder = settings_dir / package
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.jupyterlab-settings").write_text(json.dumps(values))
    settings = settings_dir
    token = secrets.token_hex(16)
    env = {**os.environ, "NBMEMORY_HOME": str(store), "HF_HUB_OFFLINE": "1",
           "JUPYTER_PLATFORM_DIRS": "1", **this_checkouts_panel(tmp), **(env_extra or {})}
    jupyter = Path(sys.executable).parent / "jupyter"
    log = tmp / "lab.log"
    for attempt in range(3):  # the free port may be taken before the server binds it
        port = free_port()
        process = subprocess.Popen(
            [str(jupyter), "lab", "--no-browser", "--allow-root", f"--port={port}",
             "--ServerApp.ip=127.0.0.1", "--ServerApp.port_retries=0",
             f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
             f"--LabApp.workspaces_dir={tmp / 'workspaces'}",
             f"--LabApp.user_settings_dir={settings}",
             "--LabApp.news_url=", "--LabApp.expose_app_in_browser=True",
             f"--NbMemoryExtension.store={store}", f"--NbMemoryExtension.model={model}",
             *extra_args],
            cwd=root, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
        lab = Lab(root, store, port, token, process, log)

        def ready():
            if process.poll() is not None:
                if f"The port {port} is already in use" in log.read_text():
                    return "taken"
                raise AssertionError(f"jupyter lab exited:\n{log.read_text()[-3000:]}")
            try:
                if wait_api:
                    return lab.api("version")[0] == 200
                with urllib.request.urlopen(f"{lab.url}/api/status?token={token}", timeout=5):
                    return True
            except OSError:
                return False

        if wait_for(ready, timeout=90, what="jupyter lab to start") is True:
            return lab
    raise AssertionError(f"jupyter lab found no free port in 3 tries:\n{log.read_text()[-3000:]}")


def open_notebook(page, name: str, cells: int, *, kernel: bool = True) -> None:
    """Open notebook ``name`` (in the Lab's root) and wait for its ``cells`` cells and, with
    ``kernel``, for its kernel. The command's result (the widget) is not sent back to Python:
    Playwright took seconds to serialise it, or failed."""
    spec = ", kernel: {name: 'python3'}" if kernel else ""
    page.evaluate("async () => { await window.jupyterapp.commands.execute('docmanager:open', "
                  f"{{path: {json.dumps(name)}, factory: 'Notebook'{spec}}}); }}")
    page.locator(".jp-NotebookPanel .jp-Cell").nth(cells - 1).wait_for()
    if kernel:
        page.wait_for_function("() => window.jupyterapp.shell.currentWidget?.sessionContext"
                               "?.session?.kernel?.connectionStatus === 'connected'",
                               timeout=60_000)


def stop_lab(lab: Lab) -> None:
    lab.process.terminate()
    try:
        lab.process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        lab.process.kill()
        lab.process.wait(timeout=10)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium fonts-dejavu-core")
    instance = start_lab(tmp_path_factory.mktemp("lab"))
    yield instance
    stop_lab(instance)


@pytest.fixture(scope="module")
def browser_context(tmp_path_factory):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium")), executable_path=CHROMIUM, headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 1400, "height": 900})
        context.grant_permissions(["clipboard-read", "clipboard-write"])
        yield context
        context.close()


def open_lab(context, lab: Lab, path: str = "lab", wait_status: bool = True,
             open_panel: bool = True, reset: bool = True, before=None):
    """Open JupyterLab, wait until the app is restored, and open the panel by its command.

    ``before(page)`` runs before the page loads (to watch its requests); ``reset=False``
    keeps the workspace the previous page left (its layout and the panel's saved state).
    """
    page = context.new_page()
    page.dialogs = []
    page.on("dialog", lambda dialog: (page.dialogs.append(dialog.message), dialog.dismiss()))
    if before is not None:
        before(page)
    # ?reset: start from an empty layout, not the one the previous test left behind.
    page.goto(f"{lab.url}/{path}?{'reset&' if reset else ''}token={lab.token}")
    page.wait_for_function("() => window.jupyterapp !== undefined", timeout=60_000)
    page.evaluate("() => window.jupyterapp.restored")
    if reset:
        # An empty layout gets a Launcher a moment after the restore, and it takes the
        # focus: let that happen before a test types anywhere.
        page.wait_for_function("() => document.activeElement?.closest('.jp-Launcher')",
                               timeout=30_000)
    if not open_panel:
        return page
    page.evaluate("() => window.jupyterapp.commands.execute('nbmemory:open')")
    page.locator("#nbmemory-panel .nbm-Status" if wait_status else "#nbmemory-panel").wait_for(
        timeout=30_000)
    return page


@pytest.fixture
def page(browser_context, lab):
    page = open_lab(browser_context, lab)
    yield page
    page.close()


def put_settings(lab: Lab, plugin: str, values: dict) -> None:
    """Replace a plugin's user settings through the Lab's settings API."""
    body = json.dumps({"raw": json.dumps(values)}).encode()
    request = urllib.request.Request(
        f"{lab.url}/lab/api/settings/{plugin}", data=body, method="PUT",
        headers={"Authorization": f"token {lab.token}", "Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=30).close()


def toast(page, text: str):
    """A JupyterLab notification (toast) showing ``text``."""
    return page.locator(".Toastify__toast", has_text=text)


def screenshot(page, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=str(path))
    return path


# pytest-jupyter's autouse fixtures (for tests/test_server.py) fight playwright's own event
# loop; these tests start their own server, so switch them off here.
@pytest.fixture(autouse=True)
def jp_asyncio_loop():
    yield None


@pytest.fixture(autouse=True)
def jp_server_cleanup():
    yield
