#!/usr/bin/env bash
# One command on a GPU node with time-limited commands (docs/remote.md): start the grids (nothing
# twice), wait at most UNTIL seconds, then write BUNDLE with the records of every run finished there.
# Run the same line again in the next command to collect more, with --collect among the START_OPTIONS:
# it never restarts a running grid, and on a fresh node (the last one given back) it fails at once.
#
#   bash scripts/remote_node.sh CARRY BUNDLE UNTIL START_OPTIONS... [-- WAIT_OPTIONS...]
#
#   CARRY          what `python scripts/remote.py carry` wrote (minilm/ and data/)
#   START_OPTIONS  of `python scripts/remote.py start`, e.g. --profile gpu -p seeds '[44]' --grid tables:all:12
#   WAIT_OPTIONS   of `python scripts/remote.py wait`, e.g. --analysis --analysis-seed 44
#
# The interpreter is $ABSA_PYTHON (default python3) as it is: nothing is installed; it needs torch,
# transformers, pandas, matplotlib, seaborn, scikit-learn and PyYAML.
#
# torch.compile keeps what it compiled on disk ($TORCHINDUCTOR_CACHE_DIR, default executed/inductor:
# FX graphs and Triton kernels, keyed by the torch and Triton versions and the GPU, checked on use).
# After waiting, that cache is written beside BUNDLE as inductor.tar.gz, if at most 10 MiB (to fit a
# 64 MiB carry beside the 47 MiB of backbone and data and the 5 MB of code); copied into CARRY, a
# later node of the same kind of GPU starts from it instead of compiling again. A GPU's cache has
# been far larger (below), so leave UNTIL 60 s short of the command's limit (570 of 600 once ran past it).
set -euo pipefail
if [ $# -lt 4 ]; then
  sed -n '2,20p' "$0" >&2
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
export TORCHINDUCTOR_CACHE_DIR="${TORCHINDUCTOR_CACHE_DIR:-$ROOT/executed/inductor}"
# No resume state after each epoch (283 MB for a MiniLM CG/QACG-BERT, about 2.2 GB for BERT-single's
# eight classifiers): the node is given back after the session,
# so nothing would resume from it. The results are the same; ABSA_RESUME_STATE=1 keeps it.
export ABSA_RESUME_STATE="${ABSA_RESUME_STATE:-0}"
if [ -f "$CARRY/inductor.tar.gz" ] && [ ! -d "$TORCHINDUCTOR_CACHE_DIR" ]; then
  mkdir -p "$TORCHINDUCTOR_CACHE_DIR"
  if tar -xzf "$CARRY/inductor.tar.gz" -C "$TORCHINDUCTOR_CACHE_DIR" 2>/dev/null; then
    echo "[remote_node] torch.compile cache: $(find "$TORCHINDUCTOR_CACHE_DIR" -type f | wc -l) files from $CARRY/inductor.tar.gz"
  else                                              # only a cache: compile as without one
    rm -rf "$TORCHINDUCTOR_CACHE_DIR"
    echo "[remote_node] $CARRY/inductor.tar.gz: not a readable .tar.gz; compiling without it"
  fi
fi
cd "$ROOT"
"$PY" "$ROOT/scripts/remote.py" start "${START[@]}"
"$PY" "$ROOT/scripts/remote.py" wait --until "$UNTIL" --bundle "$BUNDLE" "${WAIT[@]+"${WAIT[@]}"}"
# The cache, whole or not at all. Packing takes time the command may not have (on an H200, 195 MB
# packed for over 20 s and came to 29 MiB): over $ABSA_INDUCTOR_MAX_DISK_MIB on disk (default 64, the
# whole carry) it is not packed, and packing is cut off after 20 s. It is packed outside the bundle's
# folder and moved there whole, so a command stopped while packing brings back no half-packed file.
if [ -d "$TORCHINDUCTOR_CACHE_DIR" ]; then
  mkdir -p "$ROOT/executed"
  DEST="$(dirname "$BUNDLE")"; PART="$ROOT/executed/.inductor.tar.gz.part"; DISK="$(du -sh "$TORCHINDUCTOR_CACHE_DIR" | cut -f1)"
  MAX_MIB="${ABSA_INDUCTOR_MAX_DISK_MIB:-64}"; KIB=
  case "$MAX_MIB" in ''|*[!0-9]*)
    echo "[remote_node] ABSA_INDUCTOR_MAX_DISK_MIB=$MAX_MIB: expected a whole number of MiB; using 64"; MAX_MIB=64;;
  esac
  if [ "$(du -sm "$TORCHINDUCTOR_CACHE_DIR" | cut -f1)" -gt "$MAX_MIB" ]; then
    WHY="over $MAX_MIB MiB on disk, not packed"
  elif timeout 20 tar -czf "$PART" -C "$TORCHINDUCTOR_CACHE_DIR" . 2>/dev/null; then
    KIB=$(($(stat -c %s "$PART") / 1024)); WHY="$KIB KiB compressed, over 10 MiB"
  else
    WHY="changed while packed, or took over 20 s"
  fi
  if [ -n "$KIB" ] && [ "$KIB" -le $((10 * 1024)) ]; then
    mv "$PART" "$DEST/inductor.tar.gz"
    echo "[remote_node] torch.compile cache: $DISK on disk, $KIB KiB in $DEST/inductor.tar.gz"
  else
    rm -f "$PART"
    echo "[remote_node] torch.compile cache ($DISK on disk) not brought back: $WHY"
  fi
fi
