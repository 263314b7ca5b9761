"""Train on a GPU node that you reach only through commands with a time limit; bring back records.

Some GPUs come on short leases: a machine lent for half an hour whose commands may each run ten
minutes and which is gone, with everything on it, soon after the last one; a notebook service that
ends idle sessions; a job queue with a short walltime. A 25-epoch run outlasts one command there,
and checkpoints are too big to bring back. So the work is split, and nothing waits on a command
lasting:

1. ``python scripts/remote.py carry DIR`` (here): what the node needs besides the code, checked: a float16
   copy of the MiniLM backbone and the five raw data files (about 48 MB).
2. ``python scripts/remote.py start --grid PARTS:MODELS:WORKERS ...`` (node): each grid runs ``absa grid`` as a
   detached process (a session of its own), so it goes on after the command returns. The runs
   folder starts with the reference's records, so committed runs are not trained again. Starting
   again finds the grids running (or finished) and starts nothing twice; ``--collect`` starts
   nothing at all, and fails at once on a fresh node (the earlier one given back).
3. ``python scripts/remote.py wait --until S --bundle FILE`` (node): waits at most S seconds, a line a minute,
   then writes FILE (``.tar.gz``): the records (config, metrics, env JSON; no weights) of every
   run that finished there, the figure arrays (``--analysis``), and ``status.json``, the state of
   every cell. The next command runs ``wait`` again and brings back a larger bundle.
4. ``python scripts/remote.py import FILE`` (here): every record must be complete, its configuration must hash to
   its run id, and a run id the reference already holds must carry the same record; figure arrays
   must come from runs the reference holds. Nothing is written unless all of it passes.

The work folder (default ``executed/remote``) holds ``params.yaml``, ``runs/``, ``grids/`` (one
``NN.json`` and ``NN.log`` per grid) and ``results/`` (the analysis notebooks' output).
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

import absa_lib.training.config as C
from absa_lib.checks import is_int
from absa_lib.commands import DATA_DIR_HELP
from absa_lib.data.download import FILES, verified_path
from absa_lib.device import default_device, resolve_precision
from absa_lib.errors import AbsaError, one_line
from absa_lib.fileio import atomic_write_bytes, atomic_write_json, read_json
from absa_lib.harness.grid import export_records
from absa_lib.harness.profiles import check_grid_keys, profile_path, read_profile_file, with_changes
from absa_lib.harness.runner import PARTS, profile_cells, select
from absa_lib.harness.session import resolve_dir, source_runs, sources_text
from absa_lib.models.backbones import backbone_dir, folder_fingerprint
from absa_lib.paths import repo_root
from absa_lib.training.config import epochs_text, resolved, run_path
from absa_lib.training.records import (
    KEPT_RECORD_FILES,
    RECORD_FILES,
    RunFolder,
    epoch_seconds,
    find_runs,
    load_run,
    run_folders,
)

ANALYSIS_NOTEBOOKS = ("05_figures", "06_other_attention")   # they compute the figure arrays
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.-]*"
BUNDLE_RUN_FILE = re.compile(rf"runs/{_NAME}/{_NAME}/[0-9a-f]{{12}}/((config|metrics|env)\.json|predictions\.npz)")
BUNDLE_ANALYSIS_FILE = re.compile(rf"analysis/{_NAME}\.json")
BUNDLE_OTHER_FILES = ("status.json",)


# ----------------------------------------------------------------------------------------------
# 1. here: what the node needs

def make_carry(dest: Path, data_dir=None, reference: Path | None = None, new_fingerprint: bool = False) -> dict:
    """Write ``dest/minilm`` (a float16 ``save_pretrained`` copy of the offline backbone with its
    tokenizer files) and ``dest/data`` (the required raw files of both benchmarks, verified).

    The copy's fingerprint enters every run's identity. Unless ``new_fingerprint``, it must be the
    one the reference's GPU runs recorded, or the node would retrain committed runs under new ids.
    Returns ``{"minilm", "data", "fingerprint", "megabytes"}``."""
    import torch
    from transformers import BertModel


    dest = Path(dest)
    for f in FILES:
        if not f.optional:
            atomic_write_bytes(dest / "data" / f.path, verified_path(f.path, data_dir).read_bytes())
    source = backbone_dir("minilm")
    tmp = Path(tempfile.mkdtemp(prefix=".minilm.", dir=dest))
    try:
        BertModel.from_pretrained(source, dtype=torch.float16).save_pretrained(tmp)
        for name in TOKENIZER_FILES:
            shutil.copyfile(source / name, tmp / name)
        fingerprint = folder_fingerprint(tmp)
        expected = gpu_fingerprints(reference) if reference is not None else set()
        if expected and fingerprint not in expected and not new_fingerprint:
            import transformers

            raise AbsaError(f"{dest / 'minilm'}: the copy's fingerprint {fingerprint} is not the "
                            f"{', '.join(sorted(expected))} of the reference's GPU runs (save_pretrained writes the "
                            f"transformers version, here {transformers.__version__}, into config.json); runs on it "
                            "would not find the committed runs. Make it with the version docs/remote.md names, "
                            "or pass --new-fingerprint to start a new series of runs")
        shutil.rmtree(dest / "minilm", ignore_errors=True)
        tmp.rename(dest / "minilm")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    size = sum(p.stat().st_size for p in dest.rglob("*") if p.is_file())
    return {"minilm": dest / "minilm", "data": dest / "data", "fingerprint": fingerprint, "megabytes": size / 2**20}


def gpu_fingerprints(reference: Path) -> set[str]:
    """The MiniLM fingerprints of the reference's runs trained on a GPU (the carried copy's)."""
    found = set()
    for folder, complete in run_folders(Path(reference) / "runs"):
        run = load_run(folder) if complete else None
        if run is not None and run.env.device == "cuda" and run.config.backbone == "minilm" and run.config.backbone_fingerprint:
            found.add(run.config.backbone_fingerprint)
    return found


def backbone_note(params: dict, reference: Path | None) -> str | None:
    """A line for a plan made off the node: the MiniLM found here is not the carried copy that the
    reference's GPU runs were trained on. The fingerprint is part of each run's identity, so such a
    plan lists the committed GPU runs as still to train (and may call two grids overlapping)."""

    if reference is None or params.get("backbone") != "minilm":
        return None
    node = gpu_fingerprints(reference)
    here = C.backbone_fingerprint("minilm")
    if not node or here in node:
        return None
    return (f"[remote] note: the MiniLM here (fingerprint {here}) is not the carried copy of the reference's GPU "
            f"runs ({', '.join(sorted(node))}), and it is part of each run's identity: to see the runs a node would "
            "train, make the copy (`python scripts/remote.py carry .carry`) and set ABSA_MINILM_DIR=.carry/minilm")


# ----------------------------------------------------------------------------------------------
# 2. the node: grids as detached processes

def _digits(text: str) -> bool:
    """ASCII digits only: ``"²".isdigit()`` is true, ``int("²")`` fails."""
    return text.isascii() and text.isdigit()


@dataclass(frozen=True)
class GridSpec:
    """One detached ``absa grid``: its parts, its models and seeds (None: all of the profile's) and
    its concurrent runs."""

    parts: tuple[str, ...]
    models: tuple[str, ...] | None
    workers: int
    seeds: tuple[int, ...] | None = None

    @classmethod
    def parse(cls, text: str) -> GridSpec:
        """``PARTS:MODELS:WORKERS[:SEEDS]``, e.g. ``tables+ablations:cg-bert,qacg-bert:12``,
        ``other:all:8`` or ``tables:bert-single:2:42``."""

        fields = text.split(":")
        seeds = fields[3].split(",") if len(fields) == 4 else []
        if (len(fields) not in (3, 4) or not _digits(fields[2]) or int(fields[2]) < 1
                or not all(_digits(x) for x in seeds) or (len(fields) == 4 and not seeds)):
            raise AbsaError(f"--grid {text!r}: expected PARTS:MODELS:WORKERS[:SEEDS], e.g. tables+ablations:cg-bert,qacg-bert:12 "
                            "or tables:bert-single:2:42 (parts joined by +, models by commas or 'all', a positive number "
                            "of concurrent runs, seeds by commas)")
        parts = tuple(fields[0].split("+"))
        unknown = [p for p in parts if p not in PARTS]
        if unknown:
            raise AbsaError(f"--grid {text!r}: part {unknown[0]!r} is unknown; expected some of {', '.join(PARTS)}")
        models = None if fields[1] == "all" else tuple(fields[1].split(","))
        return cls(parts, models, int(fields[2]), tuple(map(int, seeds)) or None)

    def text(self) -> str:
        seeds = ":" + ",".join(map(str, self.seeds)) if self.seeds else ""
        return f"{'+'.join(self.parts)}:{','.join(self.models) if self.models else 'all'}:{self.workers}{seeds}"

    def grid_options(self) -> list[str]:
        """The ``absa grid`` options that pick this grid's cells."""
        return ["--part", *self.parts, "--workers", str(self.workers), *(["--model", *self.models] if self.models else []),
                *(["--seed", *map(str, self.seeds)] if self.seeds else [])]


def grid_cells(params: dict, spec: GridSpec) -> list:

    return select(profile_cells(params, spec.parts), list(spec.models or ()), list(spec.seeds or ()), f"--grid {spec.text()}")


def work_params(profile: str, changes: list[str], work: Path) -> dict:
    """The profile with ``-p NAME VALUE`` changes, writing into ``work`` (runs, results, figures)."""

    params = with_changes(profile_path(profile), changes)
    check_grid_keys(params, profile_path(profile))
    params.update(runs_dir=str(work / "runs"), results_dir=str(work / "results"), figures_dir=str(work / "figures"))
    return params


def plan(params: dict, specs: list[GridSpec], reference: Path | None) -> list[list[tuple]]:
    """Per grid of ``specs``: ``(cell, run folder, finished)`` for each of its cells, where finished
    means complete in the runs folder or in the reference. Two grids that would both train a run
    are an error (two processes writing one run folder would leave garbage); a finished run may be
    in several (each grid skips it)."""

    if not params.get("allow_training", True):
        raise AbsaError(f"profile {params.get('profile')!r} does not train (allow_training: false)")
    out, owner = [], {}
    for i, spec in enumerate(specs):
        rows = []
        for cell in grid_cells(params, spec):
            path = run_path(cell.config, params["runs_dir"])
            held = reference is not None and marked_done(Path(reference) / "runs" / path.relative_to(params["runs_dir"]))
            done = held or marked_done(path)
            if not done and owner.setdefault(path, i) != i:
                raise AbsaError(f"--grid {specs[owner[path]].text()} and --grid {spec.text()} would both train the run "
                                f"{cell.config.dataset} {cell.label} seed {cell.config.seed}; give each cell to one grid")
            rows.append((cell, path, done))
        out.append(rows)
    return out


def plan_lines(planned: list[list[tuple]], specs: list[GridSpec], reference: Path | None = None) -> list[str]:
    """What ``start`` would train, grid by grid (``python scripts/remote.py start --dry-run``), each run with what
    the reference's runs of the same cell under other seeds took, to size a session."""

    finished = find_runs(Path(reference) / "runs") if reference and (Path(reference) / "runs").is_dir() else []
    lines, hinted = [], False
    for spec, rows in zip(specs, planned, strict=True):
        todo = [(cell, path) for cell, path, done in rows if not done]
        lines.append(f"[remote] grid {spec.text()}: {len(rows)} cells, {len(todo)} to train")
        for cell, path in todo:
            hint = other_seeds_text(cell.config, finished)
            hinted = hinted or bool(hint)
            lines.append(f"[remote]   {cell.config.dataset} {cell.label} seed {cell.config.seed} ({cell.part}, "
                         f"run {path.name}){hint}")
    if hinted:
        lines.append("[remote] other seeds: the seconds of training and evaluation of the reference's runs of the "
                     "same cell; start-up and checkpoints (a minute or two on a shared GPU) come on top, in "
                     "'process' where a grid recorded the whole; 'at once': how many runs of its runs folder were "
                     "training at its epochs' ends, which changes both (recorded since 2026-11-26; docs/evidence/costs_and_speed.md, "
                     "\"GPU cost, measured\")")
    return lines


def other_seeds_text(config, runs: list) -> str:
    """``; other seeds: 335–339 s on NVIDIA H200, 428 s on NVIDIA H100`` for the finished ``runs`` of
    ``config``'s cell with another seed (every training field the same but the seed): the range of
    their :func:`~absa_lib.training.records.epoch_seconds` on each device, and of the whole process where a grid recorded it
    (``(process 428 s)``), and how many runs were training beside them, where they recorded it
    (``3–6 at once``: the range over their epochs), since that changes the time (docs/evidence/costs_and_speed.md,
    "GPU cost, measured"). Empty when there is none."""

    want = {k: v for k, v in resolved(config).to_dict().items() if k != "seed"}
    like = [r for r in runs if r.config.seed != config.seed and all(r.config.get(k) == v for k, v in want.items())]
    if not like:
        return ""

    def span(t: list[int], unit: str = " s") -> str:
        return f"{min(t)}{unit}" if min(t) == max(t) else f"{min(t)}–{max(t)}{unit}"

    def notes(process: list[int], beside: list[int]) -> str:
        parts = ([f"process {span(process)}"] if process else []) + ([f"{span(beside, '')} at once"] if beside else [])
        return f" ({'; '.join(parts)})" if parts else ""

    by_device: dict[str, tuple[list[int], list[int], list[int]]] = {}
    for r in like:
        device = r.env.device_name or "an unnamed machine"
        seconds, process, beside = by_device.setdefault(device, ([], [], []))
        seconds.append(round(r.metrics.seconds))
        if r.metrics.process_seconds is not None:
            process.append(round(r.metrics.process_seconds))
        beside += [e["runs_training"] for e in r.metrics.epochs if "runs_training" in e]
    return "; other seeds: " + ", ".join(span(t) + notes(w, n) + f" on {device}"
                                          for device, (t, w, n) in sorted(by_device.items()))


def start(work: Path, params: dict, specs: list[GridSpec], reference: Path | None, log=print,
          collect: bool = False) -> list[dict]:
    """Start each grid of ``specs`` as a detached process (skipping those running or finished),
    after copying the reference's records into the runs folder. Returns the grids' records.

    With ``collect``, start nothing: only check that an earlier command started these grids here.
    A node given back between two commands comes back fresh, and a run started again from nothing
    there would spend the session's device time without finishing, so that is refused at once."""
    work = Path(work).resolve()
    planned = plan(params, specs, reference)            # checked before anything is written
    text = yaml.safe_dump(params, sort_keys=False)
    params_file = work / "params.yaml"
    old = grids(work)
    if collect and not old:
        raise AbsaError(f"{work / 'grids'}: no grid was started here, so --collect has nothing to collect: this is a fresh "
                        "machine (the one an earlier command started the grids on was given back). Nothing was started; "
                        "start the grids again without --collect if the session has time for whole runs")
    if any(is_running(g) for g in old) or collect:
        if params_file.is_file() and params_file.read_text() != text:
            raise AbsaError(f"{params_file}: grids were started here with other parameters; "
                            + ("collect with the same -p changes" if collect else
                               "they are still running: wait for them, or give another --work folder"))
        if [g["grid"] for g in old] != [s.text() for s in specs]:
            raise AbsaError(f"{work / 'grids'}: grids {', '.join(g['grid'] for g in old)} were started here; "
                            + ("collect with the same --grid list" if collect else "they are running: start again with "
                               "the same --grid list (it starts nothing twice), or wait for them to end"))
    if collect:
        for i, g in enumerate(old):
            log(f"[remote] grid {i} ({g['grid']}) " + (f"is running (pid {g['pid']})" if is_running(g) else "has ended"))
        return old
    atomic_write_bytes(params_file, text.encode())
    seeded = seed_runs(work, reference) if reference is not None else 0
    if seeded:
        log(f"[remote] {seeded} finished runs copied from {reference} (they are not trained again)")
    for stale in (work / "grids").glob("[0-9][0-9].json"):
        if int(stale.stem) >= len(specs):
            stale.unlink()
    records = []
    for i, spec in enumerate(specs):
        record_file = work / "grids" / f"{i:02d}.json"
        if i < len(old) and is_running(old[i]):
            log(f"[remote] grid {i} ({spec.text()}) is running (pid {old[i]['pid']})")
            records.append(old[i])
            continue
        record = {"grid": spec.text(), "pid": None, "cells": len(planned[i]), "started": None}
        if all(marked_done(path) for _, path, _ in planned[i]):
            log(f"[remote] grid {i} ({spec.text()}): all {len(planned[i])} runs finished")
        else:
            argv = [sys.executable, "-m", "absa_lib.cli", "grid", "--profile", str(params_file), *spec.grid_options()]
            log_file = work / "grids" / f"{i:02d}.log"
            log_file.parent.mkdir(parents=True, exist_ok=True)
            with open(log_file, "ab") as fh:
                proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True)
            record.update(pid=proc.pid, argv=argv, started=time.time())
            log(f"[remote] grid {i} ({spec.text()}): started, {len(planned[i])} cells, pid {proc.pid}, log {log_file}")
        atomic_write_json(record_file, record)
        records.append(record)
    return records


def seed_runs(work: Path, reference: Path) -> int:
    """Copy the records of the reference's runs into ``work/runs`` (where absent), so the grid finds
    them finished; their ids go to ``work/runs/seeded.json`` so that bundles leave them out."""

    runs_dir = Path(work) / "runs"
    runs = [r for r in find_runs(Path(reference) / "runs")
            if not (runs_dir / r.config.dataset / r.config.model / r.run_id).exists()]
    export_records(runs, work)
    seeded_file = runs_dir / "seeded.json"
    seeded = set(read_json(seeded_file)) if seeded_file.is_file() else set()
    atomic_write_json(seeded_file, sorted(seeded | {r.run_id for r in runs}))
    return len(runs)


def grids(work: Path) -> list[dict]:
    """The grid records ``start`` wrote in ``work``, each checked (a pid that is not a number was a
    traceback in ``wait``)."""
    records = []
    for path in sorted((Path(work) / "grids").glob("[0-9][0-9].json")):
        record = read_json(path)
        if not isinstance(record, dict) or not (record.get("pid") is None or is_int(record.get("pid"))):
            raise AbsaError(f"{path}: not a grid record (a JSON object whose pid is a process number); it was "
                            "edited or damaged: remove the work folder and start again")
        records.append(record)
    return records


def is_running(record: dict) -> bool:
    """Whether the grid process of ``record`` is alive (a zombie or another program under a reused
    pid is not)."""
    pid = record.get("pid")
    if pid is None:
        return False
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)      # our own child (tests, one long command): reap it
        if waited == pid:
            return False
    except ChildProcessError:
        pass
    proc = Path(f"/proc/{pid}")
    if proc.is_dir():
        try:
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        return state != "Z" and b"absa_lib.cli" in cmdline and b"grid" in cmdline
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def marked_done(path: Path) -> bool:

    return RunFolder(path).marked_complete()


# ----------------------------------------------------------------------------------------------
# 3. the node: wait, analyse, bundle

def cell_status(work: Path) -> list[dict]:
    """One row per cell of every grid started in ``work``: done, or training (epochs so far),
    waiting, or failed (its grid ended without it). A training or failed row carries its run log's
    last lines (``log_tail``: progress, compiler warnings, the error), so that a bundle written at a
    command's limit says where a run stood and why."""

    params = started_params(work)
    rows = []
    for i, record in enumerate(grids(work)):
        running = is_running(record)
        for cell in grid_cells(params, GridSpec.parse(record["grid"])):
            path = run_path(cell.config, params["runs_dir"])
            row = {"grid": i, "dataset": cell.config.dataset, "label": cell.label, "seed": cell.config.seed,
                   "part": cell.part, "run_id": path.name}
            metrics = _read_or_none(RunFolder(path).metrics)
            epochs = len(metrics.get("epochs", [])) if metrics else 0
            if metrics and metrics.get("complete"):
                row.update(state="done", seconds=epoch_seconds(metrics.get("epochs", [])))
            elif path.is_dir():
                row.update(state="training" if running else "failed", epochs=f"{epochs}/{cell.config.epochs}")
                left = seconds_left(metrics, cell.config.epochs) if running else None
                if left is not None:
                    row["seconds_left"] = left
            else:
                row.update(state="waiting" if running else "failed")
            if row["state"] in ("training", "failed"):
                row["log_tail"] = _tail(Path(params["runs_dir"]) / "grid_logs" / f"{path.name}.log")
            rows.append(row)
    return rows


def seconds_left(metrics: dict | None, epochs: int) -> int | None:
    """A training run's remaining seconds if each epoch left lasts as long as its last one did
    (training and evaluation); None until a second epoch has ended, since the first includes start-up
    and compilation (on an H200, 118–205 s against about 10 s for a later one) and would overstate
    the rest twentyfold."""
    done = (metrics or {}).get("epochs") or []
    if len(done) >= epochs:
        return 0
    if len(done) < 2:
        return None
    return round(epoch_seconds(done[-1:]) * (epochs - len(done)))


def _tail(log_file: Path, lines: int = 20) -> list[str]:
    """The last lines of a log (what a failed run or grid said), or none."""
    return Path(log_file).read_text(errors="replace").splitlines()[-lines:] if Path(log_file).is_file() else []


def started_params(work: Path) -> dict:
    """The parameters ``start`` wrote into ``work``."""

    path = Path(work) / "params.yaml"
    if not path.is_file():
        raise AbsaError(f"{path}: no grid was started in this work folder (run `python scripts/remote.py start` first; "
                        "on a fresh machine the folder is empty)")
    return read_profile_file(path)


def _read_or_none(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text()) if path.is_file() else None
    except (OSError, ValueError, RecursionError):
        return None          # being written by the trainer this instant (atomic, so rare) or damaged


def progress_line(rows: list[dict]) -> str:
    count = {s: sum(r["state"] == s for r in rows) for s in ("done", "training", "waiting", "failed")}
    training = ", ".join(f"{r['dataset']} {r['label']} s{r['seed']} {r['epochs']}"
                         + (f" (~{r['seconds_left']} s left)" if "seconds_left" in r else "")
                         for r in rows if r["state"] == "training")
    return (f"{count['done']}/{len(rows)} done, {count['training']} training, {count['waiting']} waiting, "
            f"{count['failed']} failed" + (f" | {training}" if training else ""))


def wait(work: Path, until: float, every: float = 60.0, log=print, on_progress=None) -> bool:
    """Wait until every grid of ``work`` has ended or ``until`` seconds have passed; print a progress
    line every ``every`` seconds and then call ``on_progress()`` (e.g. write the bundle so far, so
    that a command stopped at its limit still leaves one). Returns whether every grid has ended."""
    t0 = time.time()
    last = -every
    while True:
        ended = not any(is_running(g) for g in grids(work))
        now = time.time() - t0
        if ended or now >= until or now - last >= every:
            log(f"[remote] {time.strftime('%H:%M:%S')} {progress_line(cell_status(work))}")
            last = now
            if on_progress is not None:
                on_progress()
        if ended or now >= until:
            return ended
        time.sleep(min(5.0, max(0.1, until - now)))


def analyse(work: Path, seed: int | None, timeout: float, log=print) -> dict[str, str]:
    """Run the analysis notebooks (their scripts) on the runs of ``seed`` (default: the profile's
    first) on SentiHood, reading only finished runs (``ABSA_CACHE_ONLY``: a notebook whose runs are
    not all finished stops at once, and is tried again at the next call): the figure arrays go to
    ``work/results/analysis``. A notebook that succeeded is not run again. Returns ``{notebook: "ok"
    | why not}``."""

    params = started_params(work)
    seed = params["seeds"][0] if seed is None else seed
    params.update(seeds=[seed], datasets=["sentihood"])
    params_file = Path(work) / "analysis_params.yaml"
    atomic_write_bytes(params_file, yaml.safe_dump(params, sort_keys=False).encode())
    root = repo_root()
    if root is None:
        raise AbsaError("the analysis notebooks need a checkout (notebooks/NN_*.py); none beside this package")
    outcome, deadline = {}, time.time() + timeout
    for name in ANALYSIS_NOTEBOOKS:
        log_file, done = Path(work) / f"analysis_{name}.log", Path(work) / f"analysis_{name}_seed{seed}.ok"
        if done.is_file():
            outcome[name] = "ok"
            continue
        left = deadline - time.time()
        if left <= 0:
            outcome[name] = "not run: no time left"
            continue
        argv = [sys.executable, "-m", "absa_lib.harness.notebook_script", str(root / "notebooks" / f"{name}.py"), str(params_file)]
        env = {**os.environ, "ABSA_CACHE_ONLY": "1", "PYTHONUNBUFFERED": "1",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
        try:
            with open(log_file, "wb") as fh:
                proc = subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT, env=env, timeout=left, check=False)
            tail = log_file.read_text(errors="replace").strip().splitlines()[-1:] or [""]
            outcome[name] = "ok" if proc.returncode == 0 else f"failed (exit {proc.returncode}): {tail[0]}"
            if proc.returncode == 0:
                done.touch()
        except subprocess.TimeoutExpired:
            outcome[name] = f"stopped after {left:.0f}s (time limit)"
        log(f"[remote] analysis {name} (seed {seed}): {outcome[name]}; log {log_file}")
    return outcome


def write_bundle(work: Path, bundle: Path, extra: dict | None = None) -> dict:
    """Write ``bundle`` (tar.gz, atomically): the records of the runs that finished in ``work`` (not
    those copied from the reference), the analysis arrays computed from them, and ``status.json``."""
    work = Path(work)
    runs_dir = Path(started_params(work)["runs_dir"])
    seeded = set(read_json(runs_dir / "seeded.json")) if (runs_dir / "seeded.json").is_file() else set()
    files: dict[str, bytes] = {}
    trained = set()
    for run, complete in run_folders(runs_dir) if runs_dir.is_dir() else []:
        if run.name in seeded or not complete:
            continue
        trained.add(run.name)
        for src in RunFolder(run).record_files():
            files[f"runs/{run.parent.parent.name}/{run.parent.name}/{run.name}/{src.name}"] = src.read_bytes()

    analysis = []
    for path in sorted((work / "results" / "analysis").glob("*.json")):
        try:
            named = set(source_runs(_read_or_none(path), path))
        except AbsaError:
            continue                                   # half-written or not arrays: not brought back
        if named and named <= trained:                 # arrays copied from the reference stay behind
            files[f"analysis/{path.name}"] = path.read_bytes()
            analysis.append(path.name)
    rows = cell_status(work)
    processes = [{"grid": g["grid"], "pid": g.get("pid"), "running": is_running(g),
                  "log_tail": _tail(work / "grids" / f"{i:02d}.log")} for i, g in enumerate(grids(work))]
    status = {"progress": progress_line(rows), "cells": rows, "grids": processes, "runs": sorted(trained),
              "analysis": analysis, "written": time.strftime("%Y-%m-%d %H:%M:%S"), **(extra or {})}
    files["status.json"] = (json.dumps(status, indent=2, sort_keys=True) + "\n").encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
    atomic_write_bytes(Path(bundle), buffer.getvalue())
    return {"runs": len(trained), "analysis": analysis, "bytes": len(buffer.getvalue()), "progress": status["progress"]}


# ----------------------------------------------------------------------------------------------
# 4. here: import a bundle into the reference

BUNDLE_LIMIT = 256 * 2**20      # bytes a bundle may unpack to: records are KB, the figure arrays a few MB


def read_bundle(bundle: Path) -> dict[str, bytes]:
    """The bundle's files by name, after checking that each is one a bundle may hold and that
    together they unpack to at most :data:`BUNDLE_LIMIT` bytes (a small archive of a huge file is
    refused before anything is unpacked)."""
    try:
        tar = tarfile.open(bundle, mode="r:gz")
    except (OSError, tarfile.TarError, EOFError) as err:       # EOFError: cut short within its first member
        raise AbsaError(f"{bundle}: not a readable .tar.gz bundle ({one_line(err)}); bring it back again") from None
    files = {}
    with tar:
        try:
            for member in tar.getmembers():
                if member.isdir():
                    continue
                name = member.name
                if not member.isfile() or not (BUNDLE_RUN_FILE.fullmatch(name) or BUNDLE_ANALYSIS_FILE.fullmatch(name)
                                               or name in BUNDLE_OTHER_FILES):
                    raise AbsaError(f"{bundle}: member {name!r} is not a file a bundle holds (runs/DATASET/MODEL/RUN_ID/"
                                    "{config,metrics,env}.json or predictions.npz, analysis/NAME.json, status.json); "
                                    "refusing the bundle")
                total = sum(len(data) for data in files.values()) + member.size
                if total > BUNDLE_LIMIT:
                    raise AbsaError(f"{bundle}: unpacks to more than {BUNDLE_LIMIT // 2**20} MiB (at {name}); a "
                                    "bundle holds run records and figure arrays; refusing it")
                files[name] = tar.extractfile(member).read()
        except (OSError, tarfile.TarError, EOFError) as err:
            raise AbsaError(f"{bundle}: the archive is damaged ({one_line(err)}); bring it back again") from None
    return files


def import_bundle(bundle: Path, reference: Path, dry_run: bool = False, allow_tiny: bool = False, log=print) -> dict:
    """Check every record and array of ``bundle`` against ``reference``, then (unless ``dry_run``)
    copy them in. Runs the reference already holds with the same bytes are skipped; a different
    record under a known run id, an unfinished or edited record, a run on the tiny random backbone
    (unless ``allow_tiny``: its numbers mean nothing), or arrays from a run that neither holds,
    refuse the whole bundle."""
    files = read_bundle(Path(bundle))
    reference = Path(reference)
    if not reference.is_dir():
        raise AbsaError(f"--reference {reference}: no such folder; give the reference's folder (default "
                        "results/reference): an import never creates one")
    _remove_stale_staging(reference)
    with tempfile.TemporaryDirectory(prefix=f"absa-import-{os.getpid()}-") as tmp:
        staged = Path(tmp)
        for name, data in files.items():
            (staged / name).parent.mkdir(parents=True, exist_ok=True)
            (staged / name).write_bytes(data)
        try:
            new, same = _bundle_runs(Path(bundle), staged, files, reference, allow_tiny)
        except AbsaError as err:                     # name the bundle, not the staging folder it is unpacked in
            raise AbsaError(str(err).replace(str(staged), f"{bundle}:")) from None
        metas = _bundle_arrays(Path(bundle), files, reference, {r.run_id for r in new})
        arrays = list(metas)
        replaced = {name: (_read_or_none(reference / name) or {}).get("meta") or {} for name in arrays}
        if not dry_run:
            _move_into(reference, [(Path(run.path), Path(run.path).relative_to(staged)) for run in new],
                       {name: files[name] for name in arrays})
    verb = "would add" if dry_run else "added"
    for run in new:
        log(f"[import] {verb} {import_line(run.config, run.run_id)} ({run.env.gpu or run.env.device})")
    for name in arrays:
        before = replaced[name]
        log(f"[import] {verb} {name}: {sources_text(metas[name])}" + (f", replacing {sources_text(before)}" if before else ""))
    log(f"[import] {len(new)} new runs, {len(same)} already in {reference}, {len(arrays)} analysis files")
    return {"new": [r.run_id for r in new], "same": [r.run_id for r in same], "analysis": arrays}


STAGING = ".import-"            # next to the reference: the checked bundle, before it is moved into place


def _remove_stale_staging(reference: Path) -> None:
    """Staging folders of imports whose process is gone (killed while copying): nothing of them was
    moved into the reference yet, so they are removed."""
    for folder in list(reference.parent.glob(f".{reference.name}{STAGING}*")) + list(
            Path(tempfile.gettempdir()).glob("absa-import-*")):
        pid = folder.name.rsplit(STAGING, 1)[-1] if STAGING in folder.name else folder.name.split("-")[2]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _move_into(reference: Path, runs: list[tuple[Path, Path]], arrays: dict[str, bytes]) -> None:
    """Copy the checked records and arrays to a staging folder beside ``reference`` (the same file
    system), then rename each into place: a full disk or a write error leaves the reference as it was
    and no half-written run (each run folder appears whole or not at all)."""
    staging = reference.parent / f".{reference.name}{STAGING}{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    placed: list[Path] = []                       # run folders renamed into the reference so far
    before: dict[str, bytes | None] = {}          # each array replaced so far: its bytes before (None: new)
    try:
        for src, rel in runs:
            for n in (n for n in KEPT_RECORD_FILES if (src / n).is_file()):
                atomic_write_bytes(staging / rel / n, (src / n).read_bytes())
        for name, data in arrays.items():
            atomic_write_bytes(staging / name, data)
        for _, rel in runs:
            (reference / rel).parent.mkdir(parents=True, exist_ok=True)
            (staging / rel).rename(reference / rel)
            placed.append(rel)
        for name in arrays:
            (reference / name).parent.mkdir(parents=True, exist_ok=True)
            before[name] = (reference / name).read_bytes() if (reference / name).is_file() else None
            os.replace(staging / name, reference / name)
    except (OSError, AbsaError) as err:
        left = _undo_move(reference, staging, placed, before, [rel for _, rel in runs])
        if left:
            raise AbsaError(f"{reference}: the import could not be written ({one_line(err)}) and could not be undone: "
                            f"{', '.join(left)} of the bundle are in it; remove them (git checkout/clean under "
                            f"{reference}), free some space and import it again") from None
        raise AbsaError(f"{reference}: the import could not be written ({one_line(err)}); nothing of the bundle "
                        "was added; free some space and import it again") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _undo_move(reference: Path, staging: Path, placed: list[Path], before: dict[str, bytes | None],
               runs: list[Path]) -> list[str]:
    """Take out of ``reference`` what a failed :func:`_move_into` put in (run folders renamed back into
    ``staging``, arrays restored or removed, the folders made for ``runs`` removed when empty); what could
    not be taken out, as paths under ``reference``."""
    left = []
    for rel in placed:
        try:
            (reference / rel).rename(staging / rel)
        except OSError:
            left.append(str(rel))
    for name, data in before.items():
        try:
            if data is None:
                (reference / name).unlink(missing_ok=True)
            else:
                atomic_write_bytes(reference / name, data)
        except OSError:
            left.append(name)
    for rel in runs:                              # runs/<dataset>/<model>/, made for them, if now empty
        for folder in (reference / rel).parents:
            if folder == reference or reference not in folder.parents:
                break
            try:
                folder.rmdir()
            except OSError:                       # not empty (other runs), or gone already
                break
    return left


def _bundle_runs(bundle: Path, staged: Path, files: dict, reference: Path, allow_tiny: bool) -> tuple[list, list]:
    """The bundle's runs, unpacked in ``staged``, checked: ``(new, same)``, the runs the reference
    lacks and those it holds with the same bytes (any other difference refuses the bundle)."""

    new, same = [], []
    for run_dir in sorted({(staged / n).parent for n in files if n.startswith("runs/")}):
        rel = run_dir.relative_to(staged)
        missing = [n for n in RECORD_FILES if not (run_dir / n).is_file()]
        if missing:
            raise AbsaError(f"{bundle}: {rel} lacks {', '.join(missing)}; refusing the bundle")
        run = load_run(run_dir)       # complete, and its configuration hashes to its folder's name
        run.kept()                    # its kept predictions, if it names any, are the ones it names
        if rel.parts[1:3] != (run.config.dataset, run.config.model):
            raise AbsaError(f"{bundle}: {rel} holds a {run.config.dataset} {run.config.model} run; refusing the bundle")
        if run.config.backbone == "tiny" and not allow_tiny:
            raise AbsaError(f"{bundle}: {rel} was trained on the tiny random backbone (a test run whose numbers mean "
                            "nothing); refusing the bundle")
        held = reference / rel
        if held.exists():
            differ = [n for n in KEPT_RECORD_FILES if (held / n).is_file() != (run_dir / n).is_file()
                      or (held / n).is_file() and (held / n).read_bytes() != (run_dir / n).read_bytes()]
            if differ:
                raise AbsaError(f"{bundle}: {rel} is already in {reference} with another {differ[0]} (the same "
                                "configuration trained twice gives other numbers); keep one: remove that run "
                                "from the reference first if the new one should replace it")
            same.append(run)
        else:
            new.append(run)
    return new, same


def _bundle_arrays(bundle: Path, files: dict, reference: Path, new_runs: set[str]) -> dict:
    """The bundle's analysis arrays, each checked to come from runs the reference holds once the new
    runs ``new_runs`` are in: ``{file name: its meta}``."""

    known = new_runs | {f.name for f, complete in run_folders(reference / "runs") if complete}
    metas = {}
    for name in sorted(n for n in files if n.startswith("analysis/")):
        try:
            record = json.loads(files[name])
        except (ValueError, RecursionError):
            raise AbsaError(f"{bundle}: {name} is not valid JSON; refusing the bundle") from None
        named = source_runs(record, bundle / name)
        if not all(isinstance(r, str) for r in named):
            raise AbsaError(f"{bundle}: {name} names its run as {named[0]!r}, not a run id; refusing the bundle")
        unknown = [r for r in named if r not in known] if named else ["(none named)"]
        if unknown:
            raise AbsaError(f"{bundle}: {name} was computed from run {unknown[0]}, which neither the bundle nor "
                            f"{reference / 'runs'} holds; refusing the bundle")
        metas[name] = record["meta"]
    return metas


def import_line(config: dict, run_id: str) -> str:
    """``sentihood qacg-bert (aux none) seed 44, minilm, 25 epochs, run 0123456789ab``."""
    subset = f", {config['max_train_examples']} training examples" if config.get("max_train_examples") else ""
    return (f"{config['dataset']} {config['model']} (aux {config['aux']}) seed {config['seed']}, {config['backbone']}, "
            f"{epochs_text(config['epochs'])}{subset}, run {run_id}")


WORK = "executed/remote"


def _seconds(text: str) -> float:
    """An argparse ``type``: a finite number of seconds >= 0 (``nan`` waited forever)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds >= 0, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python scripts/remote.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    c = actions.add_parser("carry", help="write what the node needs: a float16 MiniLM copy and the raw data")
    c.add_argument("dest", help="folder to write (e.g. .carry, git-ignored)")
    c.add_argument("--data-dir", default=None, help=DATA_DIR_HELP)
    c.add_argument("--reference", default=None,
                   help="the copy must have the fingerprint of this reference's GPU runs (default: results/reference)")
    c.add_argument("--new-fingerprint", action="store_true",
                   help="accept a copy whose fingerprint the reference's GPU runs do not have (a new series of runs)")
    c.set_defaults(func=_carry)

    s = actions.add_parser("start", help="start grids as detached processes (nothing twice)")
    s.add_argument("--profile", default="gpu", help="a profile name (params/<name>.yaml) or a YAML file (default: gpu)")
    s.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                   help="change a profile parameter, as run_all.sh does (e.g. -p seeds '[44]')")
    s.add_argument("--grid", action="append", required=True, metavar="PARTS:MODELS:WORKERS[:SEEDS]",
                   help="one detached grid: parts joined by +, models by commas or 'all', its concurrent runs, "
                        "optionally seeds by commas (e.g. tables+ablations:cg-bert,qacg-bert:12, "
                        "tables:bert-single:2:42); repeat for several")
    s.add_argument("--reference", default=None,
                   help="its finished runs are copied into the runs folder and not trained again ('' for none)")
    s.add_argument("--dry-run", action="store_true",
                   help="print the runs each grid would train, and start nothing (plan a node's time here)")
    s.add_argument("--collect", action="store_true",
                   help="start nothing: only check that an earlier command started these grids here (for a second "
                        "command on the same node); on a fresh node, fail at once instead of starting runs again")
    s.set_defaults(func=_start)

    w = actions.add_parser("wait", help="wait for the grids (at most --until seconds), then write the bundle")
    w.add_argument("--until", type=_seconds, required=True, help="seconds to wait at most")
    w.add_argument("--bundle", required=True, help="the .tar.gz to write (records of the runs finished here)")
    w.add_argument("--analysis", action="store_true",
                   help="after waiting, compute the figure arrays (notebooks 05 and 06) from the runs finished here; "
                        "a notebook whose runs are not all finished stops at once and is tried at the next call")
    w.add_argument("--analysis-time", type=float, default=150.0,
                   help="seconds the analysis may take after --until (default 150)")
    w.add_argument("--analysis-seed", type=int, default=None,
                   help="the seed whose SentiHood runs are analysed (default: the profile's first)")
    w.add_argument("--every", type=float, default=60.0, help="seconds between progress lines (default 60)")
    w.set_defaults(func=_wait)

    i = actions.add_parser("import", help="check a bundle's records and add them to the reference")
    i.add_argument("bundle", help="a .tar.gz written by `python scripts/remote.py wait`")
    i.add_argument("--reference", default=None,
                   help="the reference folder (default: the checkout's results/reference; a relative path is from here)")
    i.add_argument("--dry-run", action="store_true", help="check and say what would be added; write nothing")
    i.add_argument("--allow-tiny", action="store_true",
                   help="accept runs on the tiny random backbone (tests; their numbers mean nothing)")
    i.set_defaults(func=_import)

    for q in (s, w):
        q.add_argument("--work", default=WORK, help=f"the work folder on the node (default: {WORK})")
    return p


def _carry(args: argparse.Namespace) -> int:

    reference = _reference(args.reference)
    out = make_carry(Path(args.dest).resolve(), args.data_dir, reference, args.new_fingerprint)
    print(f"[remote] {out['minilm']} (fingerprint {out['fingerprint']}) and {out['data']}: {out['megabytes']:.1f} MiB; "
          f"on the node: ABSA_MINILM_DIR={out['minilm']} ABSA_DATA_DIR={out['data']}")
    return 0


def _start(args: argparse.Namespace) -> int:


    work = resolve_dir(args.work, create=not args.dry_run)
    params = work_params(args.profile, [x for name, value in args.p for x in ("-p", name, value)], work)
    reference = _reference(args.reference)
    specs = [GridSpec.parse(g) for g in args.grid]
    if args.dry_run:
        note = backbone_note(params, reference)
        if note:                                   # before the plan, which it explains (or its refusal)
            print(note, flush=True)
        print("\n".join(plan_lines(plan(params, specs, reference), specs, reference)))
        here = resolve_precision("auto", default_device())
        if "precision" not in (params.get("train_options") or {}) and here != "bf16":
            print(f"[remote] note: precision 'auto' is {here} here and bf16 on a CUDA node, and it is part of each "
                  "run's identity: add precision: bf16 to -p train_options to see the runs a node would train")
        return 0
    start(work, params, specs, reference, collect=args.collect)
    return 0


def _reference(value: str | None):
    """``--reference`` as a folder: the checkout's ``results/reference`` when not given, a path
    relative to the working folder, or None for ``''``. A misspelt one is refused: read as an empty
    reference, a node would have trained every committed run again, and an import would have made it."""
    if value == "":
        return None
    folder = (repo_root() / "results" / "reference") if value is None else Path(value).expanduser().resolve()
    if not folder.is_dir():
        raise AbsaError(f"--reference {value}: no such folder ({folder}); give the reference's folder "
                        "(default results/reference), or '' for none")
    return folder


def _wait(args: argparse.Namespace) -> int:

    work = resolve_dir(args.work, create=False)
    ended = wait(work, args.until, args.every,       # the bundle so far after each progress line: a command
                 on_progress=lambda: write_bundle(work, Path(args.bundle)))     # cut off still brings one back
    outcome = analyse(work, args.analysis_seed, args.analysis_time) if args.analysis else {}
    out = write_bundle(work, Path(args.bundle), {"grids_ended": ended, "analysis_outcome": outcome})
    print(f"[remote] {args.bundle}: {out['runs']} finished runs, analysis {out['analysis'] or 'none'}, "
          f"{out['bytes'] / 1024:.0f} KiB; {out['progress']}")
    return 0


def _import(args: argparse.Namespace) -> int:

    import_bundle(Path(args.bundle), _reference(args.reference), args.dry_run, args.allow_tiny)
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python scripts/remote.py carry|start|wait|import ...``; a bad input is one line, exit 2."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except AbsaError as err:
        print(f"remote: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
