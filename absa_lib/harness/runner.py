"""The grid runner: train every run of a profile before the notebooks read them.

A profile (``params/<name>.yaml``) defines a grid of runs: the table rows of both datasets (every
seed), the ablations, and the other attention systems (notebook 06). Each grid *cell* is one run, i.e. one ``absa train`` command, so cells can
run anywhere: here as a queue of processes, or as a cluster array job (``--cell N``, or ``--chunk K
--task I``: K cells per task, side by side; scripts/slurm_grid.sh). The notebooks then find the
finished runs in the run cache and train only what is missing.

- CPU: a queue served by one single-threaded process per core (at most 4; ``workers`` to change):
  a small model uses one core each better than several cores together, and evaluation and data
  preparation overlap. ``--workers 1`` gives one process using every core.
- One or more GPUs: ``workers`` concurrent processes per visible GPU. A MiniLM-size run is bound
  by kernel launches and leaves most of a large GPU idle, so several runs share one.

Finished runs are skipped (the cache), interrupted ones resume from their last save, and a run that
another process is training is waited for (``--busy wait``, the default) or reported busy
(``--busy skip``: an array job resubmitted while its first tasks still train). Each cell
prints one line when it starts and one when it ends; the summary (per run: status, wall time,
training examples per second) is written to ``<runs_dir>/grid_summary_<profile>.json``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from absa_lib.errors import AbsaError, RunBusy, RunStopped
from absa_lib.fileio import atomic_write_json, lock_holder
from absa_lib.harness.ablations import ABLATIONS
from absa_lib.harness.grid import export_records, make_configs, other_attention_specs, table_specs, train_base
from absa_lib.harness.profiles import BUSY, PARTS  # noqa: F401  (absa_lib.harness.runner.PARTS, BUSY, as before)
from absa_lib.models import MODELS, names_with
from absa_lib.training import records, runs
from absa_lib.training.config import TrainConfig, run_path
from absa_lib.training.records import RunFolder, load_run, run_folders


@dataclass(frozen=True)
class Cell:
    """One run of a grid: which part of the companion it serves, its row label and configuration."""

    part: str
    label: str
    config: object          # absa_lib.training.config.TrainConfig


def profile_cells(params: dict, parts: tuple[str, ...] = PARTS) -> list[Cell]:
    """The runs of a profile, each once, ordered seed by seed (all tables, then the ablations, of the
    first seed before any run of the next), so that a budget cut short still has whole seeds."""

    unknown = set(parts) - set(PARTS)
    if unknown:
        raise AbsaError(f"grid part {sorted(unknown)[0]!r} is unknown; expected one of {', '.join(PARTS)}")
    base = train_base(params)
    cells = []
    if "tables" in parts:
        for dataset in params["datasets"]:
            for spec in table_specs(dataset, names_with(table_row=True)):     # read live: a model registered later too
                cells += [Cell("tables", spec.label, c) for c in make_configs(spec, dataset, params["seeds"], **base)]
    if "ablations" in parts:
        for spec in ABLATIONS:
            cells += [Cell("ablations", spec.label, c) for c in
                      make_configs(spec, params["ablation_dataset"], params["ablation_seeds"], **base)]
    if "other" in parts:
        for dataset in params["datasets"]:
            for spec in other_attention_specs(dataset):
                cells += [Cell("other", spec.label, c) for c in make_configs(spec, dataset, params["seeds"], **base)]
    seeds = list(dict.fromkeys([*params["seeds"], *params["ablation_seeds"]]))
    cells.sort(key=lambda c: (seeds.index(c.config.seed), PARTS.index(c.part)))      # stable
    unique, seen = [], set()
    for cell in cells:
        key = json.dumps(cell.config.to_dict(), sort_keys=True)
        if key not in seen:
            seen.add(key)
            unique.append(cell)
    return unique


def select(cells: list[Cell], models: list[str] | None, seeds: list[int] | None, where: str) -> list[Cell]:
    """The cells of ``models`` and ``seeds`` (all when None); an unknown model, or no cell left, is
    an error naming ``where`` the cells came from."""
    if models:

        unknown = [m for m in models if m not in MODELS]
        if unknown:
            raise AbsaError(f"--model {unknown[0]!r} is not a model; expected some of {', '.join(MODELS)}")
    kept = [c for c in cells if (not models or c.config.model in models) and (not seeds or c.config.seed in seeds)]
    if not kept:
        asked = " and ".join(filter(None, [f"--model {' '.join(models)}" if models else "",
                                           f"--seed {' '.join(map(str, seeds))}" if seeds else ""]))
        raise AbsaError(f"{asked}: {where} has no cell of these models and seeds")
    return kept


def train_argv(config, runs_dir: Path, data_dir: str | None = None) -> list[str]:
    """The ``absa train`` command line of one cell (fields at their default are left out), as
    ``absa grid --list`` prints it for a cluster's own array jobs."""
    defaults = TrainConfig()
    argv = ["absa", "train", "--dataset", config.dataset, "--model", config.model]
    for f in dataclasses.fields(TrainConfig):
        name, value = f.name, getattr(config, f.name)
        if name in ("dataset", "model") or value == getattr(defaults, name):
            continue
        flag = f.metadata["cli"].get("flag", "--" + name.replace("_", "-"))
        if isinstance(value, dict):
            argv += [a for k, v in value.items() for a in (flag, f"{k}={json.dumps(v)}")]
        elif isinstance(value, bool):
            argv += [flag] if value else []
        elif value is not None:
            argv += [flag, str(value)]
    argv += ["--out", str(runs_dir), "--quiet"]
    return argv + (["--data-dir", str(data_dir)] if data_dir else [])


def _ex_per_s(run_dir: Path) -> float | None:
    """Training examples per second over the run's epochs (from its records)."""

    try:
        run = load_run(run_dir)
        return run.config.n_train_inputs * len(run.metrics.epochs) / run.metrics.train_seconds
    except (AbsaError, TypeError, ZeroDivisionError):
        return None


CPU_WORKERS = 4        # at most this many single-threaded runs side by side on a CPU by default


def _slots(workers: int | None) -> list[str | None]:
    """One slot per concurrent process: ``workers`` (default 4) per visible GPU; on a CPU
    ``workers`` slots (default: one per core, at most :data:`CPU_WORKERS`)."""
    import torch

    if not torch.cuda.is_available():
        return [None] * (workers or min(CPU_WORKERS, os.cpu_count() or 1))
    return [str(g) for g in range(torch.cuda.device_count()) for _ in range(workers or 4)]


def run_cells(cells: list[Cell], runs_dir: Path, data_dir: str | None = None, workers: int | None = None,
              threads: int | None = None, busy: str = "wait", log=print, force: bool = False) -> list[dict]:
    """Train ``cells`` (skipping finished runs; with ``force``, the profile's ``force_retrain``,
    training each again, once) on the free slots; return one summary row per cell.

    A run that another process is training (another grid, a notebook, an overlapping array job)
    holds no slot: with ``busy="wait"`` the grid looks at its lock every ``runs.BUSY_POLL`` seconds and,
    once it is free, counts the run as finished there or resumes it; with ``"skip"`` it reports it
    busy at once. Stopped (Ctrl-C, SIGTERM, an error), the grid stops the runs it started: none goes
    on training unwatched."""
    if busy not in BUSY:
        raise AbsaError(f"busy={busy!r}: expected one of {', '.join(BUSY)}")
    running: dict = {}
    try:
        return _serve(cells, runs_dir, data_dir, workers, threads, busy, log, running, force)
    finally:
        _stop(running, log)


def _serve(cells: list[Cell], runs_dir: Path, data_dir: str | None, workers: int | None, threads: int | None,
           busy: str, log, running: dict, force: bool = False) -> list[dict]:
    """The queue of :func:`run_cells`; ``running`` (process -> its cell) is the caller's, for cleanup."""

    logs = Path(runs_dir) / "grid_logs"
    logs.mkdir(parents=True, exist_ok=True)
    rows, queue = [], list(enumerate(cells))
    waiting: dict[int, tuple[Cell, float]] = {}     # busy in another process: cell, next look at its lock
    waited: set[int] = set()
    free = _slots(workers)
    slots = len(free)
    if threads is None and free[0] is None and len(free) > 1:
        threads = 1                               # CPU runs side by side: one core each
    n = len(cells)

    def row(i: int, cell: Cell, path: Path, status: str, **extra) -> dict:
        c = cell.config
        return {"cell": i, "label": cell.label, "dataset": c.dataset, "seed": c.seed, "status": status,
                "run": str(path), **extra}

    def what(i: int, cell: Cell) -> str:
        return f"[grid] {i + 1}/{n} {cell.config.dataset} {cell.label} seed {cell.config.seed}"

    def wait_or_skip(i: int, cell: Cell, path: Path, why: str, **extra) -> None:
        if busy == "wait":
            log(f"{what(i, cell)}: busy in another process ({why}); waiting for it")
            waiting[i] = (cell, time.time() + runs.BUSY_POLL)
        else:
            log(f"{what(i, cell)}: busy, not trained here: {why}")
            rows.append(row(i, cell, path, "busy", **extra))

    while queue or running or waiting:
        for i, (cell, look) in sorted(waiting.items()):
            if time.time() >= look:
                if lock_holder(RunFolder(run_path(cell.config, runs_dir)).lock) is None:
                    del waiting[i]
                    waited.add(i)
                    queue.insert(0, (i, cell))      # finished there (cached) or left unfinished (resumed)
                else:
                    waiting[i] = (cell, time.time() + runs.BUSY_POLL)
        while queue and free:
            i, cell = queue.pop(0)
            path = run_path(cell.config, runs_dir)
            try:
                finished = RunFolder(path).marked_complete() and not (force and i not in waited)
                if finished:
                    load_run(path)           # a cache hit only if its records pass every check
            except AbsaError as err:
                log(f"{what(i, cell)}: FAILED: {err}")
                rows.append(row(i, cell, path, "failed", error=str(err)))
                continue
            if finished:
                log(f"{what(i, cell)}: finished {'by the other process' if i in waited else 'before'} ({path.name})")
                rows.append(row(i, cell, path, "cached", examples_per_s=_ex_per_s(path)))
                continue
            holder = lock_holder(RunFolder(path).lock)
            if holder is not None:
                wait_or_skip(i, cell, path, f"{path}: another process is training this run (pid {holder})")
                continue
            slot = free.pop(0)
            proc, fh = _launch(cell, runs_dir, data_dir, slot, threads, logs / f"{path.name}.log",
                               force and i not in waited)
            running[proc] = (i, cell, path, slot, time.time(), fh)
            log(f"{what(i, cell)}: started {path.name}" + (f" on GPU {slot}" if slot is not None else ""))
        for proc in [p for p in running if p.poll() is not None]:
            i, cell, path, slot, t0, fh = running.pop(proc)
            fh.close()
            free.append(slot)
            wall, ok = time.time() - t0, proc.returncode == 0
            speed = _ex_per_s(path) if ok else None
            if proc.returncode == RunBusy.exit_code:       # another process took the run since the look
                wait_or_skip(i, cell, path, _refusal(fh.name, path), log=fh.name)
                continue
            rows.append(row(i, cell, path, "trained" if ok else "failed", wall_seconds=wall, examples_per_s=speed,
                            log=fh.name))
            log(f"{what(i, cell)}: " + (f"done in {wall:.0f}s ({speed or 0:.1f} train ex/s)" if ok else
                                        f"FAILED (exit {proc.returncode}): {_last_line(fh.name)}; log: {fh.name}")
                + _remaining(rows, n, slots))
        if running or waiting:
            time.sleep(1.0)
    return sorted(rows, key=lambda r: r["cell"])


def _remaining(rows: list[dict], n: int, slots: int) -> str:
    """``; 3 of 35 runs done, 32 left, about 5 h 20 min at this grid's pace``: the runs left times the
    mean wall time of those trained here, shared over the parallel slots."""
    walls = [r["wall_seconds"] for r in rows if r["status"] == "trained"]
    left = n - len(rows)
    text = f"; {len(rows)} of {n} runs done, {left} left"
    if left and walls:
        text += f", about {runs.duration_text(sum(walls) / len(walls) * -(-left // max(1, slots)))} at this grid's pace"
    return text


def _launch(cell: Cell, runs_dir: Path, data_dir: str | None, slot: str | None, threads: int | None,
            log_path: Path, force: bool = False):
    """Start one cell's ``absa train`` (``--force``: from scratch) as a process on GPU ``slot``
    (None: the CPU, ``threads`` threads), its output appended to ``log_path``: ``(process, log file)``.
    The process reads its configuration from a file beside the log (``absa train --config``)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if slot is not None:
        env["CUDA_VISIBLE_DEVICES"] = slot
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    env["ABSA_SPAWNED_AT"] = f"{time.time():.3f}"          # the run records its start-up from here
    config_file = log_path.with_suffix(".config.json")
    atomic_write_json(config_file, cell.config.to_dict())
    argv = [sys.executable, "-m", "absa_lib.cli", "train", "--config", str(config_file), "--out", str(runs_dir),
            "--quiet", *(["--data-dir", str(data_dir)] if data_dir else []), *(["--force"] if force else [])]
    fh = open(log_path, "ab")
    return subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, env=env), fh


def _stop(running: dict, log, grace: float = 30.0) -> None:
    """Terminate the runs still training (SIGTERM, then SIGKILL after ``grace`` seconds). On SIGTERM a
    run saves its resume state at the end of the batch it is in (a run in its evaluation first ends
    that), so it resumes there when the grid runs again; one killed after ``grace`` resumes from its last
    save. Left running, it would go on writing its run folder beside the next grid's process."""
    if not running:
        return
    for proc in running:
        proc.terminate()
    deadline = time.time() + grace
    for proc, (_, cell, path, *_, fh) in running.items():
        try:
            proc.wait(timeout=max(0.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        fh.close()
        if proc.returncode == 0:
            how = "it finished meanwhile"
        elif proc.returncode == RunStopped.exit_code:
            how = "it saved its resume state at the batch it had reached and resumes there when the grid runs again"
        else:                                  # killed after the grace, or stopped before it could save
            why = f"killed after {grace:.0f} s" if proc.returncode == -9 else f"exit {proc.returncode}"
            how = (f"{why}, unsaved: it resumes from its last save (at most ABSA_CHECKPOINT_SECONDS of training "
                   "before) when the grid runs again")
        log(f"[grid] {cell.config.dataset} {cell.label} seed {cell.config.seed}: stopped ({path.name}); {how}")
    running.clear()


def _refusal(log_path: str, path: Path) -> str:
    """Why a run's process was refused as busy: the last ``absa: error:`` line of its log (the log
    also holds earlier processes' output, such as a finished run's JSON), else what the exit status says."""
    try:
        lines = Path(log_path).read_text(errors="replace").splitlines()
    except OSError:
        lines = []
    errors = [line.strip().removeprefix("absa: error: ") for line in lines if line.startswith("absa: error: ")]
    return errors[-1] if errors else f"{path}: another process is training this run"


def _last_line(log_path: str) -> str:
    """The last non-empty line of a run's log (its one-line error), or a placeholder."""
    try:
        lines = [line for line in Path(log_path).read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        lines = []
    return lines[-1].strip() if lines else "(empty log)"


def write_summary(rows: list[dict], path: Path, wall: float, setup: dict) -> dict:
    """The grid's summary: counts, total wall time, and the per-run rows."""

    counts = {s: sum(r["status"] == s for r in rows) for s in ("trained", "cached", "busy", "failed")}
    summary = {**setup, **counts, "runs": len(rows), "wall_seconds": wall, "rows": rows}
    atomic_write_json(path, summary)
    return summary


def recorded_cost(runs_dir: Path) -> dict:
    """What the finished runs under ``runs_dir`` cost, from their records: ``runs``, ``hours`` of
    training and evaluation, and the same per device (``devices``: {name: {"runs", "hours"}}), so a
    user sees what retraining takes on which machine."""

    devices: dict[str, dict] = {}
    for folder, complete in run_folders(runs_dir) if Path(runs_dir).is_dir() else []:
        machine, seconds = (records.recorded_cost(folder) if complete else None) or (None, None)
        if machine is None:
            continue
        cost = devices.setdefault(machine, {"runs": 0, "hours": 0.0})
        cost["runs"] += 1
        cost["hours"] += seconds / 3600
    return {"runs": sum(c["runs"] for c in devices.values()), "hours": sum(c["hours"] for c in devices.values()),
            "devices": dict(sorted(devices.items()))}


def cost_summary(runs_dir: Path) -> str:
    """One line: the runs under ``runs_dir`` and their hours per device (run_all.sh prints it)."""
    cost = recorded_cost(runs_dir)
    parts = [f"{c['runs']} on {name}, {c['hours']:.1f} h" for name, c in cost["devices"].items()]
    return (f"{cost['runs']} runs" + (": " + "; ".join(parts) if parts else "")
            + " (training and evaluation, summed over runs)")


def export_finished(cells: list[Cell], runs_dir: Path, dest: Path) -> list[Path]:
    """Copy the records (config, metrics, env JSON; no weights) of the cells' finished runs into
    ``<dest>/runs/<dataset>/<model>/<run_id>/``: how a session adds its runs to ``results/reference``."""

    paths = [run_path(c.config, runs_dir) for c in cells]
    return export_records([load_run(p) for p in paths if RunFolder(p).marked_complete()], dest)
