"""Provenance: git state read from a real repository, notebook and cell from a real kernel."""

import json
import os
import re
import sys
import time
import subprocess
from pathlib import Path

import nbformat
import pytest

from nbmemory.wording import provenance_line
from nbmemory.embed import HashEmbedder
from nbmemory.memory import Memory
from nbmemory.models import Note, Provenance
from nbmemory.provenance import (MAX_SOURCE, capture, find_cell, git_info,
                                 notebook_from_session, source_hash)
from nbmemory.service import stop


def git(cwd, *args):
    return subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=Test", *args],
                          cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    (root / "analysis").mkdir(parents=True)
    (root / "data").mkdir()
    (root / "data" / "orders.csv").write_text("id,amount\n1,1000\n2,2500\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "initial")
    return root


def test_git_commit_branch_and_dirty_state(repo):
    head = git(repo, "rev-parse", "HEAD")
    info = git_info(repo / "analysis")
    assert info == {"workspace": str(repo), "git_branch": "main", "git_commit": head,
                    "git_dirty": False}
    (repo / "data" / "orders.csv").write_text("changed\n")
    assert git_info(repo)["git_dirty"] is True
    git(repo, "checkout", "-q", "-b", "feature/units")
    git(repo, "commit", "-qam", "units")
    git(repo, "pack-refs", "--all")  # the branch now lives only in packed-refs
    info = git_info(repo)
    assert (info["git_branch"], info["git_commit"], info["git_dirty"]) == (
        "feature/units", git(repo, "rev-parse", "HEAD"), False)
    git(repo, "checkout", "-q", "--detach", head)
    info = git_info(repo)
    assert "git_branch" not in info and info["git_commit"] == head


def test_git_status_runs_no_file_monitor_the_repository_names(repo, tmp_path):
    """A folder's .git/config can name a program for git status to run (core.fsmonitor):
    writing a note about a notebook in an unpacked archive ran it."""
    ran = tmp_path / "ran"
    git(repo, "config", "core.fsmonitor", f"touch {ran}; false")
    (repo / "data" / "orders.csv").write_text("changed\n")
    assert git_info(repo)["git_dirty"] is True
    assert not ran.exists()


def test_git_worktree_is_followed(repo, tmp_path):
    git(repo, "worktree", "add", "-q", "-b", "side", str(tmp_path / "side"))
    info = git_info(tmp_path / "side")
    assert info["workspace"] == str(tmp_path / "side")
    assert (info["git_branch"], info["git_commit"]) == ("side", git(repo, "rev-parse", "HEAD"))


def reftable_repo(root):
    """The files a reftable repository (git >= 2.45) has: HEAD is a stub that older tools
    read as the branch '.invalid', refs/heads is a file, the refs live in reftable/."""
    (root / "sub").mkdir(parents=True)
    (root / ".git" / "refs").mkdir(parents=True)
    (root / ".git" / "HEAD").write_text("ref: refs/heads/.invalid\n")
    (root / ".git" / "refs" / "heads").write_text("this repository uses the reftable format\n")
    (root / ".git" / "reftable").mkdir()
    (root / ".git" / "reftable" / "tables.list").write_text("0x000000000001-0x000000000002.ref\n")
    return root


FAKE_GIT = """#!{python}
# Stands in for git >= 2.45 (this machine has 2.39, which cannot make reftable repos).
import json, sys
args = sys.argv[1:]
with open({log!r}, "a") as log:
    log.write(json.dumps(args) + "\\n")
if args[:2] == ["-c", "core.fsmonitor=false"]:
    args = args[2:]
if args[:1] == ["-C"]:
    args = args[2:]
if args == ["symbolic-ref", "-q", "HEAD"]:
    sys.exit(1) if {detached} else print("refs/heads/feature/units")
elif args == ["rev-parse", "-q", "--verify", "HEAD^{{commit}}"]:
    print("{commit}")
elif args[:1] == ["status"]:
    print(" M analysis/orders.py")
else:
    sys.exit(128)
"""


@pytest.mark.parametrize("detached", [False, True])
def test_git_provenance_in_a_reftable_repository_asks_git(tmp_path, monkeypatch, detached):
    root = reftable_repo(tmp_path / "repo")
    commit, log = "8f3c" * 10, tmp_path / "git-calls.jsonl"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "git"
    fake.write_text(FAKE_GIT.format(python=sys.executable, log=str(log), detached=detached,
                                    commit=commit))
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    info = git_info(root / "sub")
    expected = {"workspace": str(root), "git_commit": commit, "git_dirty": True}
    if not detached:
        expected["git_branch"] = "feature/units"
    assert info == expected  # never the stub's '.invalid'
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert all(call[:4] == ["-c", "core.fsmonitor=false", "-C", str(root)] for call in calls)
    assert [c[4] for c in calls] == ["symbolic-ref", "rev-parse", "status"]


def test_a_reftable_repository_without_git_records_no_branch(tmp_path, monkeypatch):
    root = reftable_repo(tmp_path / "repo")
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    assert git_info(root / "sub") == {"workspace": str(root)}


def test_a_real_reftable_repository(tmp_path):
    root = tmp_path / "repo"
    made = subprocess.run(["git", "init", "-q", "-b", "main", "--ref-format=reftable", str(root)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip("this git cannot make reftable repositories (needs git >= 2.45); "
                    "test_git_provenance_in_a_reftable_repository_asks_git covers it with a fake git")
    (root / "a.txt").write_text("a\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "initial")
    assert (root / ".git" / "HEAD").read_text().strip() == "ref: refs/heads/.invalid"
    assert git_info(root) == {"workspace": str(root), "git_branch": "main",
                              "git_commit": git(root, "rev-parse", "HEAD"), "git_dirty": False}


def test_outside_git_and_outside_a_notebook(tmp_path):
    prov = capture(None, cwd=tmp_path, environ={"JUPYTERHUB_USER": "ana"})
    assert (prov.source, prov.author, prov.cwd, prov.git_commit) == ("api", "ana", str(tmp_path), None)
    note = Note(id=1, text="x", provenance=prov)
    assert provenance_line(note).startswith("not from a notebook (api) by ana, ")


def test_notebook_from_the_jupyter_session(tmp_path):
    nb = tmp_path / "analysis" / "orders.ipynb"
    nb.parent.mkdir()
    nb.write_text("{}")
    cwd = nb.parent
    # jupyter_server: an absolute path when it knows the file name, else the API path
    # relative to its root (the kernel runs in the notebook's directory).
    assert notebook_from_session({}, {"JPY_SESSION_NAME": str(nb)}, cwd) == str(nb)
    assert notebook_from_session({}, {"JPY_SESSION_NAME": "analysis/orders.ipynb"}, cwd) == str(nb)
    assert notebook_from_session({"__session__": "analysis/orders.ipynb"}, {}, cwd) == str(nb)
    assert notebook_from_session({"__vsc_ipynb_file__": str(nb)}, {}, cwd) == str(nb)
    assert notebook_from_session({}, {"JPY_SESSION_NAME": "console-1-3f2a"}, cwd) is None


def test_find_cell_needs_exactly_one_match(tmp_path):
    for name, cells in (("a.ipynb", ["x = 1", "%remember one"]), ("b.ipynb", ["x = 1"])):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
        nbformat.write(nb, tmp_path / name)
    found = find_cell("%remember one\n", tmp_path)
    cells = nbformat.read(tmp_path / "a.ipynb", as_version=4).cells
    assert found == (str(tmp_path / "a.ipynb"), cells[1].id)
    assert find_cell("x = 1", tmp_path) is None  # in two notebooks: no guess
    # A copy an execution wrote beside it (nbconvert's a.nbconvert.ipynb): the original.
    (tmp_path / "a.nbconvert.ipynb").write_bytes((tmp_path / "a.ipynb").read_bytes())
    assert find_cell("%remember one\n", tmp_path) == found
    # A copy under another name (a dated report a scheduled run writes): the older file.
    (tmp_path / "report-0612.ipynb").write_bytes((tmp_path / "a.ipynb").read_bytes())
    os.utime(tmp_path / "a.ipynb", (1_700_000_000, 1_700_000_000))
    assert find_cell("%remember one\n", tmp_path) == found
    (tmp_path / "b.ipynb").unlink()
    assert find_cell("x = 1", tmp_path) == (str(tmp_path / "a.ipynb"), cells[0].id)


def test_find_cell_takes_the_notebook_its_runner_runs(tmp_path, monkeypatch):
    """papermill nb/orders.ipynb out.ipynb, run from the project's root: the kernel runs
    there, beside the output papermill writes (the same cells), not beside the notebook."""
    import nbmemory.provenance as provenance

    (tmp_path / "nb").mkdir()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("%remember one")])
    nbformat.write(nb, tmp_path / "nb" / "orders.ipynb")
    nbformat.write(nb, tmp_path / "out.ipynb")
    os.utime(tmp_path / "nb" / "orders.ipynb", (1_900_000_000, 1_900_000_000))  # newer
    orders = str((tmp_path / "nb" / "orders.ipynb").resolve())
    monkeypatch.setattr(provenance, "_RUNNER", [(orders,)])
    assert find_cell("%remember one", tmp_path) == (orders, nb.cells[0].id)
    # Two notebooks run by one program (nbconvert --execute a.ipynb b.ipynb): no guess.
    other = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("%remember one")])
    nbformat.write(other, tmp_path / "b.ipynb")
    monkeypatch.setattr(provenance, "_RUNNER", [(orders, str(tmp_path / "b.ipynb"))])
    assert find_cell("%remember one", tmp_path) is None


def test_the_notebooks_a_runner_runs_are_read_from_its_command_line(tmp_path):
    from nbmemory.provenance import notebooks_run_by

    def named(*args):
        return [Path(p).name for p in notebooks_run_by(list(args), tmp_path)]

    python = "/venv/bin/python"
    assert named(python, "/venv/bin/jupyter-nbconvert", "--execute", "orders.ipynb",
                 "--output", "report-1.ipynb") == ["orders.ipynb"]
    assert named(python, "-m", "nbconvert", "--execute", "a.ipynb", "b.ipynb") == [
        "a.ipynb", "b.ipynb"]  # two: find_cell uses neither
    assert named(python, "/venv/bin/papermill", "in.ipynb", "out-3.ipynb") == ["in.ipynb"]
    assert notebooks_run_by([python, "/venv/bin/papermill", "nb/in.ipynb", "o.ipynb"],
                            tmp_path) == (str(tmp_path / "nb" / "in.ipynb"),)
    # A server names a notebook to open, not the one each of its kernels runs.
    assert named(python, "/venv/bin/jupyter-notebook", "orders.ipynb") == []
    assert named(python, "/venv/bin/jupyter-lab", "orders.ipynb") == []


NOTEBOOK_CELLS = [
    "%load_ext nbmemory\n%config NbMemory.store = {store!r}\n%config NbMemory.model = 'hash:64'",
    "import pandas as pd\ndf = pd.DataFrame({{'id': [1, 2], 'amount': [1000, 2500]}})",
    "%remember -t orders --about df data/orders.csv amount is in cents before 2021",
    "df['discount'] = 0.1\nhits = %recall amount in cents\n"
    "from IPython.lib.pretty import pretty\nprint(pretty(hits))",
]


def shown(nb, index):
    """What a run notebook's cell ``index`` showed (its stderr left out)."""
    return "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "")
                   for o in nb.cells[index].outputs if o.get("name") != "stderr")


def run_notebook(path: Path, env=None):
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute(env=env) if env else client.execute()
    return nb


@pytest.mark.timeout(300)
def test_provenance_from_a_notebook_run_by_nbclient(repo):
    store = repo / ".nbmemory"
    nb_path = repo / "analysis" / "orders.ipynb"
    cells = [nbformat.v4.new_code_cell(c.format(store=str(store))) for c in NOTEBOOK_CELLS]
    nbformat.write(nbformat.v4.new_notebook(cells=cells), nb_path)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "notebook")

    nb = run_notebook(nb_path)
    stop(store)  # the kernel used the store's owner process; open the store here instead

    remembered = "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "")
                         for o in nb.cells[2].outputs
                         if o.get("name") != "stderr")  # "starting the memory service"
    assert "Remembered #1 (finding, medium) [orders]" in remembered
    assert remembered.splitlines()[1] == "About: df (DataFrame 2×2), data/orders.csv (2 columns, 2 rows)"
    recalled = "".join(o.get("text", "") for o in nb.cells[3].outputs)
    assert "[STALE: schema_changed df (added discount)]" in recalled

    with Memory.open(store, embedder=HashEmbedder()) as mem:
        note = mem.get(1)
    prov = note.provenance
    assert prov.notebook == str(nb_path)
    assert prov.cell_id == cells[2].id
    assert prov.execution_count == 3
    assert prov.cell_source == cells[2].source
    assert prov.cell_hash == source_hash(cells[2].source)
    assert prov.kernel_session
    assert (prov.git_branch, prov.git_commit, prov.git_dirty) == (
        "main", git(repo, "rev-parse", "HEAD"), False)
    assert (prov.workspace, prov.cwd, prov.source) == (str(repo), str(nb_path.parent), "notebook")
    assert provenance_line(note).startswith(
        f"analysis/orders.ipynb cell {cells[2].id[:8]} [3] @ main:{prov.git_commit[:8]} by ")
    assert [(a.kind, a.target) for a in note.anchors] == [
        ("variable", "df"), ("data", "data/orders.csv"), ("cell", f"analysis/orders.ipynb#{cells[2].id}")]
    assert note.anchors[0].fingerprint["scope"] == str(nb_path)


def test_one_run_of_a_cell_is_its_kernel_its_count_and_its_source():
    """Two %remember lines of one cell are one run (no 'edited' hint between them); after a
    restart jupyter_server keeps the kernel's id and the counts start again, so an edited
    cell run as [2] again is another run."""
    from nbmemory.provenance import same_run

    first = Provenance(kernel_session="k1", execution_count=2, cell_hash="a")
    assert same_run(first, Provenance(kernel_session="k1", execution_count=2, cell_hash="a"))
    assert not same_run(first, Provenance(kernel_session="k1", execution_count=2, cell_hash="b"))
    assert not same_run(first, Provenance(kernel_session="k1", execution_count=3, cell_hash="a"))
    assert not same_run(Provenance(), Provenance())


@pytest.mark.timeout(300)
def test_running_a_notebook_again_finds_the_notes_its_cells_wrote(repo):
    """Run All twice (a new kernel each time) is the everyday way to check an analysis:
    it must not store every finding again; a changed line is a new note."""
    store = repo / ".nbmemory"
    nb_path = repo / "analysis" / "churn.ipynb"
    cells = [NOTEBOOK_CELLS[0].format(store=str(store)),
             "%remember -t churn the churn window is 30 days",
             "%remember the export runs nightly",
             "rows = 3\n%remember --check 'rows > 0' the table has rows",
             "%remember refunds are stored as negative amounts\n"
             "%remember refunds are stored as negative amounts in the ledger too"]
    nbformat.write(nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(c) for c in cells]), nb_path)

    first = run_notebook(nb_path)
    assert shown(first, 1).startswith("Remembered #1 (finding, medium) [churn]")
    # Two notes of one cell, written by one run of it: not an edit of the cell.
    assert "Remembered #5" in shown(first, 4) and "Similar (not merged): #4" in shown(first, 4)
    assert "Hint" not in shown(first, 4)
    stop(store)
    with Memory.open(store, embedder=HashEmbedder()) as mem:
        mem.forget(2)
        mem.forget(3)  # a check's note: found before its check is run or trusted again
    again = run_notebook(nb_path)
    assert re.fullmatch(r"Already remembered as #1 by this cell on \S+ \S+: not written again\. "
                        r"\(Change the line to write a new note\.\)", shown(again, 1))
    assert "; it was forgotten since (%memory reinstate 2 brings it back)" in shown(again, 2)
    assert shown(again, 3).startswith("Already remembered as #3 by this cell")
    changed = nbformat.read(nb_path, as_version=4)
    changed.cells[1].source = "%remember -t churn the churn window is 45 days"
    changed.cells[2].source = "%remember the export runs nightly at 02:00"
    nbformat.write(changed, nb_path)
    third = run_notebook(nb_path)
    # An edited line is a new note; the one it wrote before is still there, and said so.
    assert shown(third, 1).startswith("Remembered #6 (finding, medium) [churn]")
    assert "Hint: this cell wrote #1 before it was edited: %forget 1 if this note replaces " \
        "it" in shown(third, 1)
    assert shown(third, 2).startswith("Remembered #7 (finding, medium)")
    assert "Hint" not in shown(third, 2)  # #2 was forgotten
    stop(store)
    with Memory.open(store, embedder=HashEmbedder()) as mem:
        assert [n.id for n in mem.notes(status=("active", "revoked")).notes] == [
            7, 6, 5, 4, 3, 2, 1]


@pytest.mark.timeout(300)
def test_a_notebook_run_by_nbconvert_beside_its_reports_finds_the_notes_it_wrote(repo):
    """jupyter nbconvert --execute orders.ipynb --output report-N.ipynb, as a scheduled run
    does: the reports beside it, and another notebook with the same line, hold the cell
    too, nbconvert tells the kernel no notebook, and each run wrote every note again."""
    store = repo / ".nbmemory"
    folder = repo / "analysis"
    cells = [NOTEBOOK_CELLS[0].format(store=str(store)), "%remember orders.amount is in cents"]
    for name in ("orders.ipynb", "other.ipynb"):  # the same lines, other cell ids
        nbformat.write(nbformat.v4.new_notebook(
            cells=[nbformat.v4.new_code_cell(c) for c in cells]), folder / name)
    jupyter = Path(sys.executable).parent / "jupyter"
    for day in (1, 2):
        subprocess.run([str(jupyter), "nbconvert", "--to", "notebook", "--execute",
                        "orders.ipynb", "--output", f"report-{day}.ipynb"],
                       cwd=folder, check=True, capture_output=True)
    first, second = (nbformat.read(folder / f"report-{day}.ipynb", as_version=4)
                     for day in (1, 2))
    assert shown(first, 1).startswith("Remembered #1 (finding, medium)")
    assert shown(second, 1).startswith("Already remembered as #1 by this cell")
    stop(store)
    with Memory.open(store, embedder=HashEmbedder()) as mem:
        assert mem.notes().total == 1
        assert mem.get(1).provenance.notebook == str(folder / "orders.ipynb")


@pytest.mark.timeout(300)
def test_a_renamed_notebook_finds_the_notes_its_cells_wrote(repo):
    """A notebook renamed (or copied) keeps its cells' ids: Run All there finds the notes
    they wrote, and says in which notebook."""
    store = repo / ".nbmemory"
    old, new = repo / "analysis" / "draft.ipynb", repo / "analysis" / "final.ipynb"
    cells = [NOTEBOOK_CELLS[0].format(store=str(store)), "%remember the orders table has 3 rows",
             "%remember the export runs nightly"]
    nbformat.write(nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(c) for c in cells]), old)

    assert shown(run_notebook(old), 2).startswith("Remembered #2 (finding, medium)")
    old.rename(new)
    again = run_notebook(new)
    assert all(shown(again, i).startswith(
        f"Already remembered as #{i} by this cell in analysis/draft.ipynb on ") for i in (1, 2))
    stop(store)
    with Memory.open(store, embedder=HashEmbedder()) as mem:
        assert mem.notes().total == 2


@pytest.mark.timeout(300)
def test_the_jupyter_session_name_names_an_unsaved_notebook(repo):
    """As under jupyter_server: the kernel is told its notebook, whose file is older."""
    store = repo / ".nbmemory"
    nb_path = repo / "analysis" / "draft.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), nb_path)  # saved empty, then cells typed
    cells = [NOTEBOOK_CELLS[0].format(store=str(store)), "%remember a draft finding"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbformat.write(nb, repo / "analysis" / "unsaved.ipynb")
    env = {**os.environ, "JPY_SESSION_NAME": "analysis/draft.ipynb"}
    run_notebook(repo / "analysis" / "unsaved.ipynb", env=env)
    stop(store)
    (repo / "analysis" / "unsaved.ipynb").unlink()
    with Memory.open(store, embedder=HashEmbedder()) as mem:
        prov = mem.get(1).provenance
    assert prov.notebook == str(nb_path)
    assert prov.cell_id is None  # nbclient sends no cellId and the saved file has no such cell
    assert prov.cell_source == "%remember a draft finding"
    assert prov.git_dirty is True


@pytest.mark.timeout(300)
def test_a_kernel_started_as_jupyter_server_does_records_notebook_and_cell_id(repo):
    """The kernel environment comes from jupyter_server's own SessionManager, and each
    execute request carries ``cellId`` in its metadata, as JupyterLab sends it."""
    from jupyter_client.manager import KernelManager
    from jupyter_server.services.kernels.kernelmanager import MappingKernelManager
    from jupyter_server.services.sessions.sessionmanager import SessionManager

    store = repo / ".nbmemory"
    nb_path = repo / "analysis" / "orders.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), nb_path)  # saved empty; cells typed since
    sessions = SessionManager(kernel_manager=MappingKernelManager(root_dir=str(repo)))
    env = sessions.get_kernel_env("analysis/orders.ipynb", "orders.ipynb")
    km = KernelManager(kernel_name="python3")
    km.start_kernel(cwd=str(nb_path.parent), env=env)
    kc = km.client()
    try:
        kc.start_channels()
        kc.wait_for_ready(timeout=120)

        def run(code: str, cell_id: str) -> None:
            msg = kc.session.msg("execute_request", {
                "code": code, "silent": False, "store_history": True, "user_expressions": {},
                "allow_stdin": False, "stop_on_error": True}, metadata={"cellId": cell_id})
            kc.shell_channel.send(msg)
            while True:
                reply = kc.get_shell_msg(timeout=120)
                if reply["parent_header"].get("msg_id") == msg["header"]["msg_id"]:
                    break
            assert reply["content"]["status"] == "ok", reply["content"]

        run(NOTEBOOK_CELLS[0].format(store=str(store)), "setup-cell")
        run("%remember -t orders amounts are in cents before 2021", "3f2a9c1e-cell")
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    stop(store)

    with Memory.open(store, embedder=HashEmbedder()) as mem:
        note = mem.get(1)
        prov = note.provenance
        assert (prov.notebook, prov.cell_id, prov.execution_count, prov.source) == (
            str(nb_path), "3f2a9c1e-cell", 2, "notebook")
        assert prov.kernel_session and prov.cell_source.startswith("%remember -t orders")
        assert note.anchors[-1].target == "analysis/orders.ipynb#3f2a9c1e-cell"
        assert note.stale == ()  # the saved notebook is older than the note
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("%remember -t orders amounts are in euros")])
        nb.cells[0].id = "3f2a9c1e-cell"
        nbformat.write(nb, nb_path)
        later = time.time() + 2  # a save made a moment later (file clocks are coarse)
        os.utime(nb_path, (later, later))
        assert [str(r) for r in mem.get(1).stale] == [
            "cell_changed analysis/orders.ipynb cell 3f2a9c1e (source edited)"]
        # Renamed: the flag does not silently go; a verify stops watching the old name.
        nb_path.rename(nb_path.with_name("orders-2024.ipynb"))
        assert [str(r) for r in mem.get(1).stale] == [
            "missing analysis/orders.ipynb (the notebook it was written in; renamed or moved?)"]
        assert mem.verify(1).stale == ()
        assert mem.get(1).stale == ()
