#!/usr/bin/env bash
# The test command: creates or reuses .venv, installs the package with its test extras, runs pytest.
# Extra arguments go to pytest (e.g. `bash tests/run.sh -m "not slow"` or `-k metrics`).
# The files run on one worker per core (pytest-xdist; a file's tests stay together and in order):
# ABSA_TEST_WORKERS=0 runs them in this process, e.g. for a debugger.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/ensure_venv.sh" test
cd "$ROOT"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 MPLBACKEND=Agg PYTHONHASHSEED=0
exec "$PY" -m pytest -n "${ABSA_TEST_WORKERS:-auto}" --dist loadfile "$@"
