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
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# a path given relative to where the command was typed (ABSA_DATA_DIR=../data) must still hold after
# the cd below and in notebooks/, papermill's working folder: make it absolute first
for var in ABSA_DATA_DIR ABSA_RUNS_DIR ABSA_MINILM_DIR ABSA_VENV; do
  if [ -n "${!var:-}" ] && [[ "${!var}" != /* && "${!var}" != "~"* ]]; then export "$var=$PWD/${!var}"; fi
done
cd "$ROOT"
PROFILES="smoke cpu gpu paper render"
PROFILE=""
if [ $# -ge 1 ] && [[ "$1" != -* ]]; then
  PROFILE="$1"; shift
  if [[ " $PROFILES " != *" $PROFILE "* ]]; then       # before any setup: a typo fails at once
    echo "[run_all] error: unknown profile '$PROFILE'; expected one of: $PROFILES (params/<profile>.yaml)" >&2
    exit 2
  fi
fi

if [ -n "${ABSA_PYTHON:-}" ]; then        # an interpreter that has the dependencies already: no venv, no install
  PY="$ABSA_PYTHON"
else
  source "$ROOT/scripts/ensure_venv.sh" test    # sets $PY and puts the venv first on PATH
fi
# this checkout's absa_lib, whatever the interpreter has installed (an ABSA_VENV shared with another
# checkout has that one's): the package's folder is where relative paths (results/, figures/) lead
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
# notebooks run with papermill; without it (or with ABSA_NOTEBOOKS=scripts) their paired scripts run
# with the same parameters (python -m absa_lib.harness.notebook_script), e.g. on a machine without Jupyter
NOTEBOOKS="${ABSA_NOTEBOOKS:-$("$PY" -c "import papermill" 2>/dev/null && echo papermill || echo scripts)}"

if [ -z "$PROFILE" ]; then
  if "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    PROFILE=gpu; why="a CUDA GPU is available"
  elif [ -n "$(find "$ROOT/results/reference/runs" -name metrics.json -print -quit 2>/dev/null)" ]; then
    PROFILE=render; why="no CUDA GPU was found, and results/reference/ holds trained runs"
    "$PY" -c "
from absa_lib.device import cpu_has_native_bf16
from absa_lib.harness.runner import cost_summary
cost = ('1 h 23 min, its 35 runs and the notebooks, on 2 CPU cores with native bf16, as this one has; '
        'docs/evidence/costs_and_speed.md'
        if cpu_has_native_bf16() else '2 h 10 min measured on 2 CPU cores; docs/evidence/costs_and_speed.md')
print('[run_all] the reference: ' + cost_summary('$ROOT/results/reference/runs') + '. To retrain seed 42 here: '
      f'bash run_all.sh cpu ({cost}), or gpu with CUDA '
      '(10 of its 12 table runs took 14 min on one H100; docs/evidence/costs_and_speed.md)')" >&2
  else
    PROFILE=cpu; why="no CUDA GPU was found and results/reference/ has no runs"
  fi
  echo "[run_all] no profile given: using '$PROFILE' ($why). Others: $PROFILES" >&2
  if [ "$PROFILE" = gpu ] && "$PY" -c "
import sys
from huggingface_hub import try_to_load_from_cache
sys.exit(0 if isinstance(try_to_load_from_cache('bert-base-uncased', 'config.json'), str) else 1)" 2>/dev/null; then
    echo "[run_all] bert-base-uncased is in the local cache: 'bash run_all.sh paper' runs the paper's backbone" >&2
  fi
fi
OUT="$ROOT/executed/$PROFILE"            # absolute: papermill opens --stdout-file after --cwd
mkdir -p "$OUT"
# the profile with the command line's `-p NAME VALUE` changes (names checked before anything runs)
PARAMS="$OUT/params.yaml"
"$PY" -m absa_lib.harness.profiles "$ROOT/params/$PROFILE.yaml" "$PARAMS" "$@" || exit 2

export CUBLAS_WORKSPACE_CONFIG=:4096:8 PYTHONHASHSEED=0 TOKENIZERS_PARALLELISM=false
if [ "$PROFILE" != paper ]; then export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1; fi

# where this profile writes (relative paths are from the repository root)
read -r RESULTS FIGURES < <("$PY" -c "
import yaml, sys
p = yaml.safe_load(open(sys.argv[1]))
print(p['results_dir'], p['figures_dir'])" "$PARAMS")

start=$(date +%s)
# the benchmark files first (checked; downloaded when missing; else how to point at a copy): every
# notebook and every cell of a grid reads them
"$PY" -m absa_lib.harness.run_all data "$PARAMS" || exit 1
if "$PY" -c "import yaml, sys; sys.exit(0 if yaml.safe_load(open(sys.argv[1]))['allow_training'] else 1)" "$PARAMS"; then
  echo "[run_all] $(date +%H:%M:%S) training the grid of '$PROFILE' (follow it: tail -f ${OUT#"$ROOT"/}/grid.log)" >&2
  # the whole log to grid.log; to the terminal, each finished run with the runs done, left and the pace
  set +e
  "$PY" -m absa_lib.cli grid --profile "$PARAMS" 2>&1 | tee "$OUT/grid.log" \
    | { grep --line-buffered -E 'runs done, [0-9]+ left' | sed -u 's/^\[grid\]/[run_all]   grid/' >&2; }
  grid_status=${PIPESTATUS[0]}
  set -e
  if [ "$grid_status" -ne 0 ]; then
    reason="$(grep '^\[grid\] [0-9]* runs:' "$OUT/grid.log" | tail -1 || true)"
    echo "[run_all] FAILED: the grid of runs (profile $PROFILE): ${reason:-$(tail -n 1 "$OUT/grid.log")}" >&2
    echo "[run_all]   see $OUT/grid.log and the run logs it names" >&2
    exit 1
  fi
  echo "[run_all] $(date +%H:%M:%S) $(grep '^\[grid\] [0-9]* runs:' "$OUT/grid.log" | tail -1 | sed 's/; summary: .*//')" >&2
  # force_retrain: the grid has just retrained every run once; the notebooks collect them (forced
  # again, each notebook would retrain its runs one at a time, and the runs notebooks share twice)
  if "$PY" -c "import yaml, sys; p = yaml.safe_load(open(sys.argv[1]))
if not p.get('force_retrain'): sys.exit(1)
open(sys.argv[2], 'w').write(yaml.safe_dump({**p, 'force_retrain': False}, sort_keys=False))" "$PARAMS" "$OUT/params_notebooks.yaml"; then
    PARAMS="$OUT/params_notebooks.yaml"
    echo "[run_all] force_retrain: the grid retrained every run; the notebooks collect them" >&2
  fi
fi
# each notebook gets the values of the names its parameters cell declares, no others
"$PY" -m absa_lib.harness.run_all params "$PARAMS" "$OUT" || exit 2
if [ "$NOTEBOOKS" = scripts ]; then
  run_notebook() { "$PY" -m absa_lib.harness.notebook_script "$ROOT/notebooks/$1.py" "$OUT/$1.params.yaml"; }
else
  run_notebook() { "$PY" -m papermill "$ROOT/notebooks/$1.ipynb" "$OUT/$1.ipynb" -k python3 --cwd "$ROOT/notebooks" \
      -f "$OUT/$1.params.yaml" --log-output --no-progress-bar --start-timeout 120; }
fi
# render, as the profile file says (no -p changes), through papermill: the executed notebooks,
# normalized (no times, no absolute paths), into notebooks/executed/ (the same bytes run after run)
RENDER_TO=()
if [ "$PROFILE" = render ] && [ "$NOTEBOOKS" = papermill ] && [ $# -eq 0 ]; then
  RENDER_TO=(--render-to "$ROOT/notebooks/executed")
fi
for nb in "$ROOT"/notebooks/[0-9][0-9]_*.ipynb; do
  name="$(basename "$nb" .ipynb)"
  printf '[run_all] %s %-19s' "$(date +%H:%M:%S)" "$name" >&2     # the line's end comes when it has run
  executed=()
  [ "$NOTEBOOKS" = scripts ] || executed=(--executed "$OUT/$name.ipynb")
  rm -f "$OUT/$name.ipynb" "$OUT/$name.log.err"          # never an old run's copy in a failure's message
  t0="${EPOCHREALTIME:-$(date +%s)}"
  if ! run_notebook "$name" >"$OUT/$name.log" 2>&1; then
    "$PY" -m absa_lib.harness.run_all failed "$name" --profile "$PROFILE" --start "$t0" --log "$OUT/$name.log" \
      ${executed[@]+"${executed[@]}"} >&2 || echo " FAILED; see $OUT/$name.log" >&2
    exit 1
  fi
  "$PY" -m absa_lib.harness.run_all done "$name" --params "$PARAMS" --start "$t0" --log "$OUT/$name.log" \
    ${executed[@]+"${executed[@]}"} ${RENDER_TO[@]+"${RENDER_TO[@]}"} >&2 || exit 1
done

"$PY" -m absa_lib.harness.manifest --profile "$PROFILE" --results-dir "$RESULTS" --figures-dir "$FIGURES"
echo "[run_all] all notebooks ran under '$PROFILE' in $(( $(date +%s) - start ))s" >&2
echo "[run_all]   tables:    $RESULTS/table1_sentihood.{csv,md} $RESULTS/table2_semeval.{csv,md} $RESULTS/ablations.{csv,md}" >&2
echo "[run_all]   figures:   $FIGURES/" >&2
echo "[run_all]   manifest:  $RESULTS/MANIFEST.json" >&2
echo "[run_all]   notebooks: $OUT/" >&2
[ ${#RENDER_TO[@]} -eq 0 ] || echo "[run_all]   readable:  $ROOT/notebooks/executed/ (normalized copies, committed)" >&2
