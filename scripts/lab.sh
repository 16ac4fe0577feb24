#!/usr/bin/env bash
# Set up from scratch if needed, then open JupyterLab on notebooks/ with nbmemory loaded.
# The store is local: .nbmemory/ at the repository root (override with NBMEMORY_HOME).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
VENV=${NBMEMORY_VENV:-.venv}
export HF_HUB_OFFLINE=1
ARGS=()
if [ "$(id -u)" = 0 ]; then  # a container's user: Jupyter refuses root without the flag
  echo "==> running as root: starting JupyterLab with --allow-root" >&2
  ARGS+=(--allow-root)
fi
exec "$VENV/bin/jupyter" lab --notebook-dir=notebooks ${ARGS[@]+"${ARGS[@]}"} "$@"
