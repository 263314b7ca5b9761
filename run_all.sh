#!/usr/bin/env bash
# Run every notebook in order with papermill under one profile (params/<profile>.yaml).
#
#   bash run_all.sh            # gpu with CUDA; else render when results/reference/ has runs; else cpu
#   bash run_all.sh smoke      # tiny model, a few minutes: checks that everything runs
#   bash run_all.sh cpu        # MiniLM, full training data, short budget (see params/cpu.yaml)
#   bash run_all.sh gpu        # MiniLM, full data, paper hyper-parameters, 3 seeds (CUDA)
#   bash run_all.sh paper      # bert-base-uncased, full data, 5 seeds (CUDA + the hub or a local copy)
#   bash run_all.sh render     # no training: rebuild tables and figures from results/reference/
#   bash run_all.sh cpu -p seeds '[42, 43]'    # change notebook parameters (names are checked)
#   ABSA_PYTHON=python3 bash run_all.sh gpu    # use this interpreter as it is (no venv, no install);
#                                              # without papermill the notebooks' paired scripts run
#
# A training profile first trains its whole grid of runs with the grid runner (`absa grid`: a
# queue on the CPU, several runs at once per GPU; finished runs are skipped, interrupted ones
# resume); the notebooks then find them in the run cache. Each notebook is handed the parameters it
# declares (executed/<profile>/NN_name.params.yaml) and prints one line here: how long it took, the
# files it wrote, its log; everything it and papermill print goes to that log. Executed notebooks and
# their logs go to executed/<profile>/ (git-ignored); under `render` a normalized copy of each
# executed notebook also goes to notebooks/executed/ (committed: readable on the repository's page).
# The script stops at the first failure and names the error, the log and the executed copy.
set -euo pipefail
if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then       # the comment above is the usage
  sed -n '2,/^# The script stops/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
  exit 0
fi
# This file is the entry: it sets up the interpreter, then hands everything else (the profile, its
# parameters, the data, the grid, each notebook and its line, the manifest) to one Python driver,
# absa_lib/harness/run_all.py.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# a path given relative to where the command was typed (ABSA_DATA_DIR=../data) must still hold after
# the cd below and in notebooks/, papermill's working folder: make it absolute first
for var in ABSA_DATA_DIR ABSA_RUNS_DIR ABSA_MINILM_DIR ABSA_VENV; do
  if [ -n "${!var:-}" ] && [[ "${!var}" != /* && "${!var}" != "~"* ]]; then export "$var=$PWD/${!var}"; fi
done
cd "$ROOT"
PROFILES="smoke cpu gpu paper render"         # absa_lib.harness.profiles.PROFILES (a test keeps them equal)
if [ $# -ge 1 ] && [[ "$1" != -* ]] && [[ " $PROFILES " != *" $1 "* ]]; then   # before any setup: a typo fails at once
  echo "[run_all] error: unknown profile '$1'; expected one of: $PROFILES (params/<profile>.yaml)" >&2
  exit 2
fi

if [ -n "${ABSA_PYTHON:-}" ]; then        # an interpreter that has the dependencies already: no venv, no install
  PY="$ABSA_PYTHON"
else
  source "$ROOT/scripts/ensure_venv.sh" test    # sets $PY and puts the venv first on PATH
fi
# this checkout's absa_lib, whatever the interpreter has installed (an ABSA_VENV shared with another
# checkout has that one's): the package's folder is where relative paths (results/, figures/) lead
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
# the driver sets what the steps it starts share (seeds of hashing, cuBLAS, the hub offline but under
# paper); --python: the interpreter it runs them with
exec "$PY" -m absa_lib.harness.run_all --python "$PY" "$@"
