"""The wheel from a clean checkout ships the production panel and enables both extensions.

Slow (about a minute): it builds the wheel in an isolated environment (jlpm install and a
production build) and installs it into a fresh virtual environment with JupyterLab.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from nbmemory import __version__

ROOT = Path(__file__).parents[1]
SHARE = f"nbmemory-{__version__}.data/data/share/jupyter/labextensions/nbmemory"


def run(args, **kwargs) -> str:
    result = subprocess.run(args, capture_output=True, text=True, timeout=900, **kwargs)
    assert result.returncode == 0, f"{args}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout + result.stderr


def clean_env() -> dict:
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("JUPYTER", "VIRTUAL_ENV", "PYTHONPATH"))}


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs a git checkout")
def test_wheel_from_a_clean_checkout_ships_the_production_panel(tmp_path):
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "HEAD"], capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(checkout)], input=archive, check=True)
    assert not (checkout / "nbmemory" / "labextension").exists()

    run([sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path / "dist"),
         str(checkout)], env=clean_env())
    wheel = tmp_path / "dist" / f"nbmemory-{__version__}-py3-none-any.whl"
    names = zipfile.ZipFile(wheel).namelist()

    # The prebuilt extension, its settings schema, the install metadata and the server config.
    assert f"{SHARE}/package.json" in names
    assert f"{SHARE}/install.json" in names
    assert f"{SHARE}/schemas/nbmemory/plugin.json" in names
    assert f"nbmemory-{__version__}.data/data/etc/jupyter/jupyter_server_config.d/nbmemory.json" \
        in names
    package = json.loads(zipfile.ZipFile(wheel).read(f"{SHARE}/package.json"))
    entry = package["jupyterlab"]["_build"]["load"]
    assert f"{SHARE}/{entry}" in names
    # Production, not a leftover development bundle: minified, no source maps, no build log.
    static = [n for n in names if n.startswith(f"{SHARE}/static/") and n.endswith(".js")]
    assert not [n for n in names if n.endswith(".js.map") or n.endswith("build_log.json")]
    code = "".join(zipfile.ZipFile(wheel).read(n).decode() for n in static)
    assert "__webpack_require__" not in code, "a development bundle (names not minified)"
    assert "nbmemory server extension is not running" in code
    # The built copy lives in share/ only, not twice.
    assert not [n for n in names if n.startswith("nbmemory/labextension/")]

    # A fresh environment with JupyterLab: both extensions are found and enabled.
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
           "--no-compile"]  # what imports, compiles then: not all of JupyterLab up front
    run([*pip, "jupyterlab>=4.2,<5"], env=clean_env())
    # --no-deps: the engine's dependencies (torch...) are not what this test is about.
    run([*pip, "--no-deps", str(wheel)], env=clean_env())
    jupyter = str(env_dir / "bin" / "jupyter")
    labext = run([jupyter, "labextension", "list"], env=clean_env(), cwd=tmp_path)
    plain = re.sub(r"\x1b\[[0-9;]*m", "", labext)
    assert re.search(rf"nbmemory v{re.escape(__version__)} enabled\s+OK \(python, nbmemory\)",
                     plain), plain
    server = re.sub(r"\x1b\[[0-9;]*m", "", run([jupyter, "server", "extension", "list"],
                                                env=clean_env(), cwd=tmp_path))
    assert re.search(r"nbmemory\.server\s+enabled", server), server
    assert re.search(r"nbmemory\.server\s+OK", server), server
    shutil.rmtree(env_dir)
