#!/usr/bin/env bash
# Set up from scratch if needed, then run the whole test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
VENV=${NBMEMORY_VENV:-.venv}
export HF_HUB_OFFLINE=1
echo "==> running the tests"
exec "$VENV/bin/python" -m pytest "$@"
