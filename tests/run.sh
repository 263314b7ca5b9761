#!/usr/bin/env bash
# The test command: creates or reuses .venv, installs the package with its test extras, runs pytest.
# Extra arguments go to pytest (e.g. `bash tests/run.sh -m "not slow"` or `-k metrics`).
# The files run on one worker per core (pytest-xdist; a file's tests stay together and in order):
# ABSA_TEST_WORKERS=0 runs them in this process, e.g. for a debugger.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/ensure_venv.sh" test
cd "$ROOT"
# The benchmark files, as run_all.sh finds them (checked; downloaded when missing): about a quarter of
# the tests read them. ABSA_SKIP_DATA_TESTS=1 skips those tests instead, and the summary counts them.
if [ "${ABSA_SKIP_DATA_TESTS:-0}" != 1 ]; then
  "$PY" -m absa_lib.harness.run_all data || {
    echo "[tests] or run the tests without them: ABSA_SKIP_DATA_TESTS=1 bash tests/run.sh" >&2; exit 1; }
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 MPLBACKEND=Agg PYTHONHASHSEED=0
exec "$PY" -m pytest -n "${ABSA_TEST_WORKERS:-auto}" --dist loadfile "$@"
