#!/usr/bin/env bash
# Create the project's virtual environment (default .venv) and install nbmemory into it.
# CPU torch is pinned and installed first: an unpinned torch pulls a CUDA build of several GB.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${NBMEMORY_VENV:-.venv}
EXTRAS=${NBMEMORY_EXTRAS:-lab,test}
TORCH=${NBMEMORY_TORCH:-torch==2.13.0}

if [ ! -x "$VENV/bin/python" ]; then
  echo "==> creating $VENV"
  python3 -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
"${PIP[@]}" install --upgrade pip
echo "==> installing $TORCH (CPU)"
"${PIP[@]}" install "$TORCH"
echo "==> installing nbmemory[$EXTRAS]"
"${PIP[@]}" install -e ".[$EXTRAS]"
