#!/usr/bin/env bash
# Set up from scratch if needed, then open JupyterLab on notebooks/ with nbmemory loaded.
# The store is local: .nbmemory/ at the repository root (override with NBMEMORY_HOME).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
VENV=${NBMEMORY_VENV:-.venv}
export HF_HUB_OFFLINE=1
exec "$VENV/bin/jupyter" lab --notebook-dir=notebooks "$@"
