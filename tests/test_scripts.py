"""The setup script a stranger runs first: what it needs, said before it installs anything."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SETUP = Path(__file__).resolve().parent.parent / "scripts" / "setup.sh"


@pytest.fixture
def clone(tmp_path):
    """A checkout with no panel built yet (as a fresh clone is), and a PATH of only the
    tools the script's first lines use."""
    (tmp_path / "repo" / "scripts").mkdir(parents=True)
    shutil.copy(SETUP, tmp_path / "repo" / "scripts" / "setup.sh")
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("bash", "dirname"):
        (tools / tool).symlink_to(shutil.which(tool))
    return tmp_path / "repo", tools


def setup(repo: Path, tools: Path) -> subprocess.CompletedProcess:
    env = {"PATH": str(tools), "NBMEMORY_SKIP_APT": "1", "HOME": os.environ.get("HOME", "/")}
    return subprocess.run([str(tools / "bash"), str(repo / "scripts" / "setup.sh")], env=env,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.skipif(os.name == "nt", reason="a bash script")
def test_a_fresh_clone_without_node_is_told_so_before_anything_is_installed(clone):
    repo, tools = clone
    done = setup(repo, tools)
    assert done.returncode == 1
    assert done.stderr == ("==> Node.js 18 or newer is needed to build the JupyterLab panel "
                           "(found: none). Install it (https://nodejs.org, or your package "
                           "manager), then run this again.\n")
    assert not (repo / ".venv").exists()


@pytest.mark.skipif(os.name == "nt", reason="a bash script")
def test_an_old_node_is_named_with_its_version(clone):
    repo, tools = clone
    node = tools / "node"
    node.write_text("#!/bin/sh\n[ \"$1\" = --version ] && echo v16.20.2 && exit 0\nexit 1\n")
    node.chmod(0o755)
    done = setup(repo, tools)
    assert done.returncode == 1 and "(found: v16.20.2)" in done.stderr
    assert not (repo / ".venv").exists()


@pytest.mark.skipif(os.name == "nt" or not shutil.which("node"), reason="a bash script; Node")
def test_the_node_on_this_machine_passes_the_check(clone):
    """The check itself must not refuse a Node that is new enough (it once refused v20)."""
    repo, tools = clone
    (tools / "node").symlink_to(shutil.which("node"))
    version = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout
    assert int(version.strip().lstrip("v").split(".")[0]) >= 18  # what the suite runs with
    done = setup(repo, tools)  # on to the next step, which needs python3: not on this PATH
    assert "Node.js" not in done.stderr and "python3" in done.stderr
