"""``%memory browse``: the ipywidgets browser, in-process and driven over a real kernel's comms."""

from __future__ import annotations

import json
import os
import sys
import time

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from nbmemory.browse import MemoryBrowser, browse, note_html
from nbmemory.display import Rich
from nbmemory.models import Note, Provenance, StaleReason

XSS = "<img src=x onerror=alert(1)>"


def test_note_html_escapes_text_and_shows_stale_and_provenance():
    note = Note(id=3, text=XSS, tags=("a",), stale=(StaleReason("missing", "data/x.csv"),),
                provenance=Provenance(notebook="work/a.ipynb", cell_id="c1", execution_count=4))
    out = note_html(note)
    assert "&lt;img src=x onerror=alert(1)&gt;" in out and "<img" not in out
    assert "stale: missing data/x.csv" in out
    assert "from work/a.ipynb cell c1 [4]" in out


def test_browser_lists_recalls_filters_and_forgets(memory):
    memory.remember("acquire_lock must run before the watcher starts", tags="locks")
    memory.remember("orders.amount is in cents before 2021", tags="orders", priority="high")
    b = MemoryBrowser(memory)
    assert [n.text[:5] for n in b.rows] == ["order", "acqui"]
    b.search.value = "acquire_lock"
    assert b.rows[0].tags == ("locks",)
    b.search.value = ""
    b.priority.value = "high"
    assert [n.tags for n in b.rows] == [("orders",)]
    b.priority.value = ""
    target = b.rows[0].id
    forget_button = b.results.children[0].children[1].children[0]
    forget_button.click()
    assert memory.get(target).status == "revoked"
    assert target not in [n.id for n in b.rows]
    assert f"Forgot #{target}." in b.message.value
    b.undo.click()
    assert memory.get(target).status == "active"
    assert target in [n.id for n in b.rows]


def test_a_terminal_sees_the_notes_not_the_widget_tree(memory):
    memory.remember("acquire_lock must run before the watcher starts")
    browser = MemoryBrowser(memory)
    InteractiveShell.instance(history_length=0)
    try:
        with capture_output() as captured:
            browser._ipython_display_()
    finally:
        InteractiveShell.clear_instance()
    (shown,) = captured.outputs
    assert shown.data["text/plain"].startswith("1 note\n#1 ")
    assert "acquire_lock must run before the watcher starts" in shown.data["text/plain"]
    assert "VBox" not in shown.data["text/plain"]
    assert "application/vnd.jupyter.widget-view+json" in shown.data


def test_browse_degrades_to_the_static_table_without_ipywidgets(memory, monkeypatch):
    memory.remember(XSS)
    monkeypatch.setitem(sys.modules, "ipywidgets", None)
    shown = browse(memory)
    assert isinstance(shown, Rich)
    assert "&lt;img src=x onerror=alert(1)&gt;" in shown._repr_html_()
    assert "install ipywidgets" in shown.text


# -- a real kernel, driven the way a notebook front end drives widgets: over comm messages --


class Kernel:
    def __init__(self, store_dir):
        from jupyter_client.manager import start_new_kernel

        env = {**os.environ, "NBMEMORY_HOME": str(store_dir), "HF_HUB_OFFLINE": "1"}
        self.km, self.kc = start_new_kernel(kernel_name="python3", env=env)
        self.widget_messages: list[dict] = []

    def run(self, code: str, timeout: float = 60) -> str:
        """Execute ``code``; return what it printed and displayed (as text); fail on an error."""
        msg_id = self.kc.execute(code)
        return self._collect(msg_id, timeout)

    def _collect(self, msg_id: str, timeout: float) -> str:
        out = []
        deadline = time.monotonic() + timeout
        while True:
            msg = self.kc.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream":
                out.append(content["text"])
            elif kind == "error":
                raise AssertionError("\n".join(content["traceback"]))
            elif kind in ("display_data", "execute_result"):
                self.widget_messages.append(content["data"])
                out.append(content["data"].get("text/plain", "") + "\n")
            elif kind == "status" and content["execution_state"] == "idle":
                return "".join(out)

    def comm(self, comm_id: str, data: dict, timeout: float = 30) -> None:
        """Send a widget message as the front end would, and wait until it is handled."""
        msg = self.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": data})
        self.kc.shell_channel.send(msg)
        self._collect(msg["header"]["msg_id"], timeout)

    def state(self, code: str):
        return json.loads(self.run(f"import json as _j; print(_j.dumps({code}))").strip())

    def close(self):
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


@pytest.fixture
def kernel(store_dir):
    k = Kernel(store_dir)
    yield k
    k.close()


def test_browser_in_a_real_kernel_search_forget_verify_change_the_store(kernel, store_dir):
    kernel.run("%load_ext nbmemory\n%config NbMemory.model = 'hash:64'")
    kernel.run("%remember -t locks acquire_lock must run before the watcher starts")
    kernel.run("%remember -t orders -p high orders.amount is in cents before 2021")
    kernel.run("b = %memory browse\nb")
    view = [d for d in kernel.widget_messages if "application/vnd.jupyter.widget-view+json" in d]
    assert view, "the browser must display as a widget"
    ids = kernel.state("{'search': b.search.model_id, 'rows': [n.id for n in b.rows]}")
    assert ids["rows"] == [2, 1]

    # Type a query: the front end sends the Text widget's new value.
    kernel.comm(ids["search"], {"method": "update", "state": {"value": "acquire_lock"},
                                "buffer_paths": []})
    assert kernel.state("[n.id for n in b.rows]")[0] == 1

    # Click Forget on the first row: the front end sends a click event to the Button.
    forget_id = kernel.state("b.results.children[0].children[1].children[0].model_id")
    kernel.comm(forget_id, {"method": "custom", "content": {"event": "click"}})
    out = kernel.run("%memory list --status revoked")
    assert "#1" in out and "acquire_lock" in out
    assert "Forgot #1." in kernel.state("b.message.value")

    # Undo through its button: the note is active again.
    undo_id = kernel.state("b.undo.model_id")
    kernel.comm(undo_id, {"method": "custom", "content": {"event": "click"}})
    assert "acquire_lock" in kernel.run("%memory list")

    # Verify: a note anchored to a file that changed is stale until verified.
    data = store_dir.parent / "inputs"
    data.mkdir()
    (data / "codes.csv").write_text("code\nA\n")
    kernel.run("%remember the codes live in inputs/codes.csv")
    (data / "codes.csv").write_text("code\nA\nB\n")
    kernel.comm(ids["search"], {"method": "update", "state": {"value": ""}, "buffer_paths": []})
    stale_id = kernel.state("b.stale.model_id")
    kernel.comm(stale_id, {"method": "update", "state": {"index": 1}, "buffer_paths": []})
    assert kernel.state("[(n.id, [str(r) for r in n.stale]) for n in b.rows]") == \
        [[3, ["rows_changed inputs/codes.csv (1 → 2 rows)"]]]
    assert "stale: rows_changed inputs/codes.csv (1 → 2 rows)" in kernel.state(
        "b.results.children[0].children[0].value")
    verify_id = kernel.state("b.results.children[0].children[1].children[1].model_id")
    kernel.comm(verify_id, {"method": "custom", "content": {"event": "click"}})
    assert kernel.state("b.message.value").endswith("Verified #3.</span>")
    assert kernel.state("b.rows") == []
    assert "verified" in kernel.run("%memory history 3")
