#!/usr/bin/env bash
# Train a profile's grid of runs as a SLURM array job: one array task = one grid cell = one
# `absa train` command. Finished runs are skipped and interrupted ones resume, so resubmitting the
# same array (or a part of it) is safe. Afterwards, on any machine that sees the same runs folder:
#     bash run_all.sh gpu        # the notebooks find every run in the cache and train nothing
#
# Submit (the array's size is the grid's cell count):
#     N=$(absa grid --profile gpu --count)
#     sbatch --array=0-$((N - 1)) scripts/slurm_grid.sh gpu
# See the cells first:  absa grid --profile gpu --list
#
#SBATCH --job-name=absa-grid
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=4
#SBATCH --mem=16G
#SBATCH --time=02:00:00
#SBATCH --output=slurm-%A_%a.out
set -euo pipefail
PROFILE="${1:?usage: sbatch --array=0-N scripts/slurm_grid.sh PROFILE}"
cd "${SLURM_SUBMIT_DIR:-$(dirname "$0")/..}"
source scripts/ensure_venv.sh test            # the project's environment (sets $PY)
# --busy skip: a task whose run an earlier submission is still training ends at once (exit 1) instead
# of holding its GPU idle until that run ends.
exec "$PY" -m absa_lib.cli grid --profile "$PROFILE" --cell "${SLURM_ARRAY_TASK_ID:?not an array job}" --busy skip
