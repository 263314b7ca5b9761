"""The cluster path without a cluster: scripts/slurm_grid.sh and scripts/ensure_venv.sh under a fake
SLURM (``sbatch`` and ``scontrol`` executables in a temporary folder on PATH that record their calls;
the SLURM_* variables set as SLURM sets them), ``absa grid --chunk K --task I`` (an array task's slice
of K cells), and a run stopped by SIGTERM saving its resume state at the batch it reached."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from absa_lib.cli import main
from absa_lib.errors import RunStopped
from absa_lib.harness.profiles import load_profile
from absa_lib.training import loop as training
from absa_lib.training import runs, splits

ROOT = Path(__file__).resolve().parents[1]


def mini_profile(tmp_path: Path, **changes) -> Path:
    """A one-dataset profile of tiny runs (6 table cells), its runs in ``tmp_path/runs``."""
    params = {**load_profile("smoke"), "profile": "mini", "datasets": ["semeval"], "max_train_examples": 40,
              "max_eval_examples": 20, "max_length": 32, "runs_dir": str(tmp_path / "runs"), **changes}
    path = tmp_path / "mini.yaml"
    path.write_text(yaml.safe_dump(params))
    return path


def grid_out(capsys, *args: str) -> list[str]:
    assert main(["grid", *args]) == 0
    return capsys.readouterr().out.splitlines()


# ------------------------------------------------------------------------------------ K cells per task
def test_chunk_and_task_slice_the_cells_for_an_array_of_k_runs_per_gpu(tmp_path, capsys, monkeypatch):
    """`--chunk K --count` is the array's size; the tasks' slices are the cells in order, each once;
    `--cell` still picks one cell; a task past the end is refused; the task trains its K cells at once."""
    profile = str(mini_profile(tmp_path))
    every = grid_out(capsys, "--profile", profile, "--part", "tables", "--list")
    assert len(every) == 6 and grid_out(capsys, "--profile", profile, "--part", "tables", "--count") == ["6"]
    assert grid_out(capsys, "--profile", profile, "--part", "tables", "--chunk", "4", "--count") == ["2"]
    assert grid_out(capsys, "--profile", profile, "--part", "tables", "--chunk", "6", "--count") == ["1"]
    tasks = [grid_out(capsys, "--profile", profile, "--part", "tables", "--chunk", "4", "--task", str(t), "--list")
             for t in (0, 1)]
    assert tasks == [every[:4], every[4:]]
    assert grid_out(capsys, "--profile", profile, "--part", "tables", "--chunk", "4", "--list") == [
        "# --task 0: cells 0-3", *every[:4], "# --task 1: cells 4-5", *every[4:]]
    assert grid_out(capsys, "--profile", profile, "--part", "tables", "--cell", "5", "--list") == every[5:]
    assert grid_out(capsys, "--profile", profile, "--part", "tables", "--task", "5", "--list") == every[5:]
    assert main(["grid", "--profile", profile, "--part", "tables", "--chunk", "4", "--task", "2"]) == 2
    assert "--task 2 is out of range: profile 'mini' has 6 cells, 2 slices of --chunk 4 (tasks 0-1)" in \
        capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["grid", "--profile", profile, "--cell", "1", "--task", "1"])

    from absa_lib.harness import runner

    seen = {}
    monkeypatch.setattr(runner, "run_cells", lambda cells, *a, **kw: seen.update(cells=cells, **kw) or [])
    assert main(["grid", "--profile", profile, "--part", "tables", "--chunk", "4", "--task", "1"]) == 0
    assert seen["workers"] == 4 and len(seen["cells"]) == 2            # --workers defaults to K
    assert (tmp_path / "runs" / "grid_summary_mini_chunk4_task1.json").is_file()
    assert main(["grid", "--profile", profile, "--part", "tables", "--chunk", "4", "--task", "0", "--workers", "2"]) == 0
    assert seen["workers"] == 2 and len(seen["cells"]) == 4


# --------------------------------------------------------------------------- the environment, built once
STUB_PYTHON = """#!/bin/sh
# a stand-in for the environment's python: each call logs its caller (the sourcing shell) and takes a while
echo "$PPID start $*" >> "$STUB_LOG"
{sleep} 0.4
echo "$PPID end $*" >> "$STUB_LOG"
"""


@pytest.mark.parametrize("locker", ["flock", "python-fcntl"])
def test_tasks_setting_up_the_environment_at_once_take_turns_and_only_one_installs(tmp_path, locker):
    """Two array tasks sourcing ensure_venv.sh at once used to both see a stale environment and run pip
    side by side (one crashed mid-upgrade). With the lock the second waits, then finds the first's
    install current. Without flock(1) (macOS) Python's fcntl.flock holds the same lock."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text(STUB_PYTHON.format(sleep=shutil.which("sleep")))
    (venv / "bin" / "python").chmod(0o755)
    log = tmp_path / "calls.log"
    env = {**os.environ, "ABSA_VENV": str(venv), "STUB_LOG": str(log)}
    if locker == "python-fcntl":                # a PATH with every tool the script uses but flock
        tools = tmp_path / "tools"
        tools.mkdir()
        for tool in ("dirname", "mkdir", "cat", "sha256sum", "cut", "python3"):
            (tools / tool).symlink_to(shutil.which(tool))
        env["PATH"] = str(tools)
    source = f"source {ROOT / 'scripts' / 'ensure_venv.sh'} test && echo \"$PY\""
    tasks = [subprocess.Popen([shutil.which("bash"), "-c", source], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [t.communicate(timeout=60) for t in tasks]
    assert [t.returncode for t in tasks] == [0, 0], outs
    assert all(out.strip() == str(venv / "bin" / "python") for out, _ in outs)
    calls = log.read_text().splitlines()
    installers = {line.split()[0] for line in calls}
    assert len(installers) == 1, calls                                   # one task installed, alone
    assert sum("pip install -q --upgrade pip" in line for line in calls) == 2     # its start and end
    assert any("waiting for another process setting up" in err for _, err in outs), outs
    assert (venv / ".absa-stamp").is_file() and Path(f"{venv}.lock").is_file()


# ----------------------------------------------------------------------------- the array task's signals
FAKE_GRID = """#!/bin/sh
# a stand-in for the interpreter running `absa grid`: logs its arguments, stops on SIGTERM (exit 143)
echo "grid $*" >> "$FAKE_SLURM/calls.log"
trap 'echo "grid got TERM" >> "$FAKE_SLURM/calls.log"; exit 143' TERM
[ -z "$GRID_EXIT" ] || exit "$GRID_EXIT"
while :; do {sleep} 0.05; done
"""
FAKE_SCONTROL = """#!/bin/sh
echo "scontrol $*" >> "$FAKE_SLURM/calls.log"
"""


def fake_slurm(tmp_path: Path) -> dict:
    """A folder of fake SLURM commands first on PATH, and the environment of a task (SLURM_*)."""
    bin_dir = tmp_path / "fake_slurm"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text(FAKE_SCONTROL)
    (bin_dir / "sbatch").write_text(FAKE_SBATCH)
    (bin_dir / "grid-python").write_text(FAKE_GRID.format(sleep=shutil.which("sleep")))
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "FAKE_SLURM": str(bin_dir),
            "SLURM_SUBMIT_DIR": str(ROOT)}


def calls(env: dict) -> list[str]:
    path = Path(env["FAKE_SLURM"]) / "calls.log"
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.parametrize("signum", [signal.SIGUSR1, signal.SIGTERM, None])
def test_usr1_stops_the_grid_then_requeues_the_task_and_sigterm_only_stops_it(tmp_path, signum):
    """The script starts `absa grid --chunk K --task $SLURM_ARRAY_TASK_ID` with the arguments after K;
    USR1 (SLURM's --signal before the time limit) stops the grid and requeues the task; SIGTERM
    (scancel) stops it and does not; a grid that ends by itself gives the task its exit status."""
    env = {**fake_slurm(tmp_path), "ABSA_PYTHON": str(tmp_path / "fake_slurm" / "grid-python"), "SLURM_JOB_ID": "4242",
           "SLURM_ARRAY_JOB_ID": "4240", "SLURM_ARRAY_TASK_ID": "2", **({} if signum else {"GRID_EXIT": "1"})}
    task = subprocess.Popen(["bash", str(ROOT / "scripts" / "slurm_grid.sh"), "gpu", "3", "--model", "qacg-bert"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 30
    while not calls(env) and time.time() < deadline:
        time.sleep(0.05)
    assert calls(env)[:1] == ["grid -m absa_lib.cli grid --profile gpu --chunk 3 --task 2 --busy skip --model qacg-bert"]
    if signum:
        task.send_signal(signum)
    out, _ = task.communicate(timeout=30)
    if signum == signal.SIGUSR1:
        assert calls(env)[1:] == ["grid got TERM", "scontrol requeue 4242"], out
        assert task.returncode == 143 and "requeueing 4242" in out
    elif signum == signal.SIGTERM:
        assert calls(env)[1:] == ["grid got TERM"] and task.returncode == 143, out
    else:
        assert calls(env)[1:] == [] and task.returncode == 1, out


# ------------------------------------------------------------------- a stopped run saves where it was
@pytest.mark.usefixtures("real_data_dir")
@pytest.mark.parametrize("where", ["last batch of epoch 1", "first batch of epoch 2"])
def test_a_stopped_run_saves_at_its_batch_and_resumes_to_the_uninterrupted_record(tiny_config, tmp_path,
                                                                                  monkeypatch, where):
    """`launch.stop` (SIGTERM to `absa train`) ends the run after the batch it is in, with the resume
    state saved there even though no timed save was due (the default 300 s); the same call resumes it
    and writes the records of a run never stopped. At an epoch's last batch the resume state holds the
    whole epoch, and the resumed process goes straight to its evaluation."""
    config = tiny_config(epochs=2)
    whole = training.train(config, runs_dir=tmp_path / "whole", progress=False)
    per_epoch = len(splits.epoch_batches(config, [None] * whole.config.n_train_inputs, 1))
    stop_at = per_epoch if where.startswith("last") else per_epoch + 1
    launch = runs.Launch()
    steps, real = {"n": 0}, training._step_loss

    def counted(*args, **kwargs):
        steps["n"] += 1
        if steps["n"] == stop_at:
            launch.stop.set()                     # as the SIGTERM handler of `absa train` does
        return real(*args, **kwargs)

    monkeypatch.setattr(training, "_step_loss", counted)
    with pytest.raises(RunStopped, match=f"stopped at batch {stop_at - (stop_at > per_epoch) * per_epoch} of "
                       f"{per_epoch} in epoch {1 + (stop_at > per_epoch)}; its resume state is saved there"):
        training.train(config, runs_dir=tmp_path / "stopped", progress=False, launch=launch)
    last = tmp_path / "stopped" / "sentihood" / "qacg-bert" / whole.run_id / "checkpoints" / "last"
    partial = json.loads((last / "trainer_state.json").read_text())["partial"]
    assert (partial["epoch"], partial["batches"]) == ((1, per_epoch) if stop_at == per_epoch else (2, 1))
    steps["n"] = -10**6
    resumed = training.train(config, runs_dir=tmp_path / "stopped", progress=False)
    assert steps["n"] + 10**6 == 2 * per_epoch - stop_at                # no batch trained twice
    timeless = [[{k: v for k, v in r.items() if k not in ("seconds", "eval_seconds")} for r in run.metrics.epochs]
                for run in (resumed, whole)]
    assert timeless[0] == timeless[1]


# -------------------------------------------------------------------------------- the whole path, trained
FAKE_SBATCH = """#!/bin/bash
# fake sbatch: logs the call, then starts each task of --array=A-B in the background as SLURM would
# (SLURM_* set, output to slurm-<job>_<task>.out); <task's job id>.pid and .rc appear beside it
echo "sbatch $*" >> "$FAKE_SLURM/calls.log"
array=0-0
while [ $# -gt 0 ]; do case "$1" in --array=*) array=${1#--array=}; shift;; -*) shift;; *) break;; esac; done
script=$1; shift
job=$(( $(cat "$FAKE_SLURM/next_job" 2>/dev/null || echo 100) ))
echo $((job + 100)) > "$FAKE_SLURM/next_job"
for task in $(seq "${array%-*}" "${array#*-}"); do
  id=$((job + task + 1))
  ( export SLURM_JOB_ID=$id SLURM_ARRAY_JOB_ID=$job SLURM_ARRAY_TASK_ID=$task SLURM_SUBMIT_DIR=$PWD
    bash "$script" "$@" > "$FAKE_SLURM/slurm-${job}_$task.out" 2>&1 &
    echo $! > "$FAKE_SLURM/$id.pid"; wait $!; echo $? > "$FAKE_SLURM/$id.rc" ) > /dev/null 2>&1 &
done
echo "Submitted batch job $job"
"""


def submit(env: dict, profile: Path, k: int, *grid_args: str) -> list[int]:
    """The README's submission: the array's size from `absa grid --chunk K --count`, then sbatch;
    the job ids of its tasks."""
    args = " ".join(grid_args)
    line = (f'N=$("$ABSA_PYTHON" -m absa_lib.cli grid --profile {profile} --chunk {k} --count {args}) && '
            f"sbatch --array=0-$((N - 1)) scripts/slurm_grid.sh {profile} {k} {args}")
    out = subprocess.run(["bash", "-c", line], env=env, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    job = int(out.split()[-1])
    n = int(next(c for c in reversed(calls(env)) if c.startswith("sbatch")).split("--array=0-")[1].split()[0]) + 1
    return [job + t + 1 for t in range(n)]


def finished(env: dict, job_id: int, timeout: float = 300) -> int:
    rc, deadline = Path(env["FAKE_SLURM"]) / f"{job_id}.rc", time.time() + timeout
    while not rc.exists() and time.time() < deadline:
        time.sleep(0.2)
    return int(rc.read_text())


@pytest.mark.slow
@pytest.mark.usefixtures("real_data_dir")
def test_an_array_task_signalled_before_its_time_limit_requeues_and_its_runs_resume_where_they_stopped(tmp_path):
    """The whole path, trained: the submitted array task trains its two runs at once; USR1 stops them,
    each saving its resume state inside its first epoch, and the task requeues itself; the array
    submitted again resumes both at their batches and finishes them. (Each run is frozen with SIGSTOP
    as soon as it holds its run folder, until the grid has passed the stop on, so that a quick tiny run
    cannot finish first.)"""
    env = {**fake_slurm(tmp_path), "ABSA_PYTHON": sys.executable}
    profile = mini_profile(tmp_path, epochs=3)
    grid = ("--part", "tables", "--model", "qacg-bert")              # 2 cells: one task of K = 2
    [job] = submit(env, profile, 2, *grid)
    task, started, frozen = Path(env["FAKE_SLURM"]) / f"{job}.pid", time.time(), {}
    try:
        while len(frozen) < 2 and time.time() - started < 240:     # each run's `absa train`, holding its folder
            for lock in (tmp_path / "runs").glob("semeval/qacg-bert/*/.lock"):
                holder = lock.read_text().strip()
                if holder and lock.parent not in frozen:
                    os.kill(int(holder), signal.SIGSTOP)
                    frozen[lock.parent] = int(holder)
            time.sleep(0.02)
        assert len(frozen) == 2, list(Path(env["FAKE_SLURM"]).glob("slurm-*.out"))
        os.kill(int(task.read_text()), signal.SIGUSR1)              # SLURM's --signal=B:USR1@180
        time.sleep(2)                                               # the grid sends its runs SIGTERM
    finally:
        for pid in frozen.values():
            os.kill(pid, signal.SIGCONT)
    assert finished(env, job) == 143
    out = next(Path(env["FAKE_SLURM"]).glob(f"slurm-{job - 1}_0.out")).read_text()
    assert f"scontrol requeue {job}" in calls(env), out
    assert out.count("it saved its resume state at the batch it had reached") == 2, out
    for run in frozen:
        assert not (run / "metrics.json").exists(), run                 # not one epoch recorded
        partial = json.loads((run / "checkpoints" / "last" / "trainer_state.json").read_text())["partial"]
        assert partial["epoch"] == 1 and 1 <= partial["batches"] <= 3, partial

    again = submit(env, profile, 2, *grid)                            # SLURM starting the requeued task
    assert finished(env, again[0]) == 0
    assert sum(c.startswith("scontrol") for c in calls(env)) == 1   # not requeued again
    for run in frozen:
        metrics = json.loads((run / "metrics.json").read_text())
        assert metrics["complete"] and len(metrics["epochs"]) == 3, run
        log = (tmp_path / "runs" / "grid_logs" / f"{run.name}.log").read_text()
        assert "resuming" in log and "after epoch 0 and batch " in log, log    # inside epoch 1, not from its start
