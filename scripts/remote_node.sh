#!/usr/bin/env bash
# One command on a GPU node with time-limited commands (docs/remote.md): start the grids (nothing
# twice), wait at most UNTIL seconds, then write BUNDLE with the records of every run finished there.
# Run the same line again in the next command to collect more, with --collect among the START_OPTIONS:
# it never restarts a running grid, and on a fresh node (the last one given back) it fails at once.
#
#   bash scripts/remote_node.sh CARRY BUNDLE UNTIL START_OPTIONS... [-- WAIT_OPTIONS...]
#
#   CARRY          what `absa remote carry` wrote (minilm/ and data/)
#   START_OPTIONS  of `absa remote start`, e.g. --profile gpu -p seeds '[44]' --grid tables:all:12
#   WAIT_OPTIONS   of `absa remote wait`, e.g. --analysis --analysis-seed 44
#
# The interpreter is $ABSA_PYTHON (default python3) as it is: nothing is installed; it needs torch,
# transformers, pandas, matplotlib, seaborn, scikit-learn and PyYAML.
set -euo pipefail
if [ $# -lt 4 ]; then
  sed -n '2,14p' "$0" >&2
  exit 2
fi
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CARRY="$(cd "$1" && pwd)"; BUNDLE="$2"; UNTIL="$3"; shift 3
START=(); WAIT=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do START+=("$1"); shift; done
[ $# -gt 0 ] && shift
WAIT=("$@")
for i in "${!START[@]}"; do           # the work folder of start is the one to wait on
  if [ "${START[$i]}" = --work ]; then WAIT+=(--work "${START[$((i + 1))]}"); fi
done
PY="${ABSA_PYTHON:-python3}"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" ABSA_MINILM_DIR="$CARRY/minilm" ABSA_DATA_DIR="$CARRY/data"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONHASHSEED=0 CUBLAS_WORKSPACE_CONFIG=:4096:8 TOKENIZERS_PARALLELISM=false
cd "$ROOT"
"$PY" -m absa_lib.cli remote start "${START[@]}"
"$PY" -m absa_lib.cli remote wait --until "$UNTIL" --bundle "$BUNDLE" "${WAIT[@]+"${WAIT[@]}"}"
