#!/usr/bin/env bash
# Create the project's virtual environment (default .venv) and install nbmemory into it.
# CPU torch is pinned and installed first: an unpinned torch, or PyPI's for Linux, is a CUDA
# build of several GB.
# The editable install builds the JupyterLab panel (labextension/ -> nbmemory/labextension/)
# with jlpm when its sources changed: this needs Node >= 18 and the npm registry.
# Browser tests need Debian's Chromium, the team store tests Debian's PostgreSQL 15 (the
# tests start their own server in a temporary directory): both installed here when missing
# and running as root (set NBMEMORY_SKIP_APT=1 to skip), beside the Python packages; never
# `playwright install`.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${NBMEMORY_VENV:-.venv}
EXTRAS=${NBMEMORY_EXTRAS:-lab,test,team}
TORCH=${NBMEMORY_TORCH:-torch==2.13.0}

# A fresh clone builds the panel: without Node, pip would fail minutes later, deep in a traceback.
if [ ! -f nbmemory/labextension/package.json ]; then
  NODE=$(node --version 2> /dev/null || echo none)
  if ! node -e 'process.exit(Number(process.versions.node.split(".")[0]) < 18 ? 1 : 0)' \
      2> /dev/null; then
    echo "==> Node.js 18 or newer is needed to build the JupyterLab panel (found: $NODE)." \
         "Install it (https://nodejs.org, or your package manager), then run this again." >&2
    exit 1
  fi
fi

MISSING=() APT_PID=
[ -x /usr/bin/chromium ] || MISSING+=(chromium fonts-dejavu-core)
[ -x /usr/lib/postgresql/15/bin/initdb ] || MISSING+=(postgresql-15)
if [ ${#MISSING[@]} -gt 0 ] && [ -z "${NBMEMORY_SKIP_APT:-}" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
    echo "==> installing ${MISSING[*]} (apt, beside the Python packages) for the browser" \
         "and team store tests"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
       apt-get install -y -qq "${MISSING[@]}" > /dev/null) &
    APT_PID=$!
  else
    echo "==> missing ${MISSING[*]}: the browser or team store tests will fail." \
         "Install them with: sudo apt-get install -y ${MISSING[*]}"
  fi
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "==> creating $VENV"
  python3 -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
"${PIP[@]}" install --upgrade pip
# PyPI's torch for Linux is the CUDA build: on Linux take the CPU wheel from PyTorch's index
# when it answers (a machine with a local wheel mirror and no internet finds it there).
TORCH_INDEX=()
if [ "$(uname -s)" = Linux ] && "$VENV/bin/python" -c "import urllib.request as u; \
    u.urlopen('https://download.pytorch.org/whl/cpu/', timeout=5)" > /dev/null 2>&1; then
  TORCH_INDEX=(--extra-index-url https://download.pytorch.org/whl/cpu)
fi
if [ "$(uname -s)" = Linux ] && [ ${#TORCH_INDEX[@]} -eq 0 ]; then
  echo "==> installing $TORCH from pip's own index (download.pytorch.org did not answer: where"
  echo "    no CPU wheel of it is at hand, PyPI's is the CUDA build of several GB)"
else
  echo "==> installing $TORCH (CPU)"
fi
"${PIP[@]}" install ${TORCH_INDEX[@]+"${TORCH_INDEX[@]}"} "$TORCH"
# The panel is served through a symlink into the source tree (below); remove it first so
# that pip never writes or deletes files through it.
LINK="$VENV/share/jupyter/labextensions/nbmemory"
if [ -L "$LINK" ]; then rm "$LINK"; fi
echo "==> installing nbmemory[$EXTRAS] (builds the JupyterLab panel if its sources changed)"
"${PIP[@]}" install -e ".[$EXTRAS]"
if [ -x "$VENV/bin/jupyter-builder" ]; then
  # Serve the panel from the source tree, so a rebuild (jlpm build in labextension/) shows
  # up on reload instead of the copy the editable install made.
  BIN=$(cd "$VENV/bin" && pwd)
  PATH="$BIN:$PATH" "$BIN/jupyter-builder" develop --overwrite . > /dev/null
fi
if [ -n "$APT_PID" ]; then
  wait "$APT_PID" || { echo "==> apt-get failed to install ${MISSING[*]} (see above)"; exit 1; }
fi
echo "==> set up in ${SECONDS} s"
