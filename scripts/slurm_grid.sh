#!/usr/bin/env bash
# Train a profile's grid of runs as a SLURM array job: array task I trains slice I of the grid's
# cells, K runs side by side on its one GPU (`absa grid --chunk K --task I`; twelve MiniLM runs
# shared one H100 well, docs/evidence/costs_and_speed.md). Finished runs are skipped and interrupted
# ones resume, so resubmitting the same array (or a part of it) is safe. Afterwards, on any machine
# that sees the same runs folder:
#     bash run_all.sh gpu        # the notebooks find every run in the cache and train nothing
#
# 1. Build the environment once, before submitting (on the login node, or as a job the array waits
#    for with --dependency=afterok:<its id>); each task then finds it built. Tasks that do find it
#    stale wait for one another on a lock (scripts/ensure_venv.sh) and only the first installs.
#        bash scripts/ensure_venv.sh             # or ABSA_PYTHON=/path/to/python: used as it is
# 2. Submit (the array's size is the number of slices of K cells):
#        K=12; N=$(.venv/bin/absa grid --profile gpu --chunk $K --count)
#        sbatch --array=0-$((N - 1)) scripts/slurm_grid.sh gpu $K
#    See each task's cells first:  absa grid --profile gpu --chunk 12 --list
#    K defaults to 1 (one cell per task, the array's size `absa grid --profile gpu --count`).
#    Arguments after K go to `absa grid` (e.g. --model qacg-bert): give them to --count too.
#
# Pre-emption and the time limit: SLURM sends USR1 (--signal below) 180 s before it ends the task;
# the runs then save their resume state at the batch they are in (a run still in its evaluation
# first finishes it; one not saved after 30 s is killed and resumes from its last save, at most
# ABSA_CHECKPOINT_SECONDS of training back), and the task requeues itself (`scontrol requeue`),
# to resume them at that batch when it starts again. A plain SIGTERM (scancel, a pre-emption that
# requeues by itself) stops and saves the runs the same way, without requeueing the task.
#
#SBATCH --job-name=absa-grid
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=4
#SBATCH --mem=16G
#SBATCH --time=02:00:00
#SBATCH --output=slurm-%A_%a.out
#SBATCH --open-mode=append
#SBATCH --requeue
#SBATCH --signal=B:USR1@180
set -euo pipefail
PROFILE="${1:?usage: sbatch --array=0-N scripts/slurm_grid.sh PROFILE [K [absa grid options]]}"
K="${2:-1}"
shift $(( $# < 2 ? $# : 2 ))
cd "${SLURM_SUBMIT_DIR:-$(dirname "$0")/..}"
requeue=0 stopping=0 grid=
# USR1: stop the grid (it stops its runs, each saving where it is), then requeue; TERM: stop only.
trap 'requeue=1 stopping=1; [ -z "$grid" ] || kill -TERM "$grid" 2>/dev/null || true' USR1
trap 'stopping=1; [ -z "$grid" ] || kill -TERM "$grid" 2>/dev/null || true' TERM
if [ -n "${ABSA_PYTHON:-}" ]; then          # an interpreter that has the dependencies: used as it is
  PY="$ABSA_PYTHON"
else
  source scripts/ensure_venv.sh test        # the project's environment (sets $PY); built before submitting
fi
echo "[slurm] job ${SLURM_JOB_ID:-?}, array task ${SLURM_ARRAY_TASK_ID:-?} (start $((${SLURM_RESTART_COUNT:-0} + 1))):" \
     "slice ${SLURM_ARRAY_TASK_ID:-?} of the $PROFILE grid, $K runs at once" >&2
# --busy skip: a task whose run an earlier submission is still training ends at once (exit 1) instead
# of holding its GPU idle until that run ends.
"$PY" -m absa_lib.cli grid --profile "$PROFILE" --chunk "$K" --task "${SLURM_ARRAY_TASK_ID:?not an array job}" \
  --busy skip "$@" &
grid=$!
if [ "$stopping" = 1 ]; then kill -TERM "$grid" 2>/dev/null || true; fi    # a signal came before it started
status=
while [ -z "$status" ]; do                 # a trapped signal ends `wait` early: wait again for the grid
  wait "$grid" && status=0 || status=$?
  if [ "$status" -gt 128 ] && kill -0 "$grid" 2>/dev/null; then status=; fi
done
if [ "$requeue" = 1 ] && [ "$status" != 0 ]; then
  echo "[slurm] the time limit or a pre-emption is near: the runs stopped and saved; requeueing ${SLURM_JOB_ID:-?}" >&2
  scontrol requeue "${SLURM_JOB_ID:?}"
fi
exit "$status"
