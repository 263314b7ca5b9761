"""Run records: identity (a hash of everything that affects the result), provenance, the run cache.

A run lives in ``<runs_dir>/<dataset>/<model>/<run_id>/``::

    config.json            the TrainConfig, run_id, data checksums, backbone fingerprint, library
                           version; load_run checks that the run_id is the hash of the rest
    metrics.json           per epoch: train loss, time, dev and test metrics; the selections
                           (dev_best = default protocol, test_best = the official code's, last);
                           "complete": true only once training has finished
    env.json               Python, torch, transformers, device (GPU name; CPU model and whether it has
                           native bf16), OS, git commit and dirty flag, the first epoch this process
                           trained (from_epoch); after a resume, the earlier processes' under earlier
    predictions_{dev,test}.csv   the dev-best model's probabilities (absa_lib.evaluation.predictions format)
    predictions.npz        the dev and test probabilities of the dev-best and test-best epochs, compact,
                           named with its sha256 in metrics.json (absa_lib.evaluation.kept); kept with
                           the record (runs trained before it existed have none)
    curve.png              the training curve, drawn by the callers (absa_lib.reports.plots.save_run_curve)
    checkpoints/{best,last}/     safetensors weights (+ trainer state in last/) and checksums.json,
                                 verified before use; not for git

Every file is written atomically (:mod:`absa_lib.fileio`), so a killed process leaves either the old
file or the new one, and ``complete`` is written last. :func:`find_runs` is the cache lookup: the
finished runs whose configuration matches.
"""

from __future__ import annotations

import json
import math
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import MISSING, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from absa_lib._version import __version__
from absa_lib.checks import is_kind
from absa_lib.data.download import file_sha256
from absa_lib.data.inputs import model_sizes
from absa_lib.device import cpu_has_native_bf16
from absa_lib.errors import AbsaError, one_line
from absa_lib.evaluation.kept import KEPT_FILE, Kept, check_entry, read_kept
from absa_lib.fileio import exclusive_lock, lock_holder, read_json
from absa_lib.models.model_config import read_saved_config
from absa_lib.models.pretrained import AbsaPreTrainedModel
from absa_lib.paths import ensure_writable
from absa_lib.training.checkpoint import verify_checkpoint
from absa_lib.training.config import (
    NEUTRAL_DEFAULTS,
    RECORD_EXTRAS,
    TrainConfig,
    config_from_record,
    config_hash,
    run_identity,
)


def _git(*args: str) -> str | None:
    root = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def cpu_model() -> str | None:
    """The CPU's model name ("AMD EPYC 9R14 96-Core Processor"), from /proc/cpuinfo on Linux; None
    where that file is absent or names none. ``platform.processor()`` says only "x86_64"."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and value.strip():
                    return value.strip()
    except OSError:
        return None
    return None


def collect_env() -> dict:
    """Versions and hardware next to every result (docs/paper_notes.md §4.3: runs are not bit-reproducible
    across devices, so the device is part of the record)."""
    import numpy
    import torch
    import transformers


    cuda = torch.cuda.is_available()
    commit = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_model": cpu_model(),
        "cpu_native_bf16": cpu_has_native_bf16(),   # what precision "auto" resolves to on this CPU
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "numpy": numpy.__version__,
        "absa_lib": __version__,
        "device": "cuda" if cuda else "cpu",
        "cuda": torch.version.cuda if cuda else None,
        "gpu": torch.cuda.get_device_name(0) if cuda else None,
        "gpu_count": torch.cuda.device_count() if cuda else 0,
        "git_commit": commit,
        "git_dirty": (status != "") if status is not None else None,
    }


def device_name(env: dict) -> str:
    """The machine a run trained on, from its ``env.json`` (:func:`collect_env`): the GPU's name, else
    the CPU's (older records name only its architecture, e.g. ``x86_64``) with its cores and the
    threads the run used; "" for a run without one."""
    if not env:
        return ""
    if env.get("gpu"):
        return env["gpu"]
    cpu = env.get("cpu_model") or env.get("processor") or "CPU"
    threads = env.get("torch_threads")
    return f"{cpu} ({env.get('cpu_count')} cores, {threads} thread{'' if threads == 1 else 's'})"


def describe(config: dict, seed: bool = True, dataset: bool = True) -> str:
    """A run's configuration in a few words, for scripts that list runs, e.g. ``semeval cg-bert NLI-M
    gate_activation=sigmoid (paper) seed 42``, ``sentihood qacg-bert (no aux) (paper) seed 43`` or
    ``semeval bert-single per-context batches (paper) seed 42`` (without ``seed``: what its seeds share; without ``dataset``: a row of a dataset's table)."""
    aux = {None: "", "single": "", "none": " (no aux)"}.get(config.get("aux"), f" {config.get('aux')}")
    overrides = "".join(f" {k}={v}" for k, v in sorted((config.get("model_overrides") or {}).items()))
    objective = f" {config['objective']}" if config.get("objective", "single") != "single" else ""
    sampler = f" {config['sampler']} batches" if config.get("sampler", "uniform") != "uniform" else ""
    return ((f"{config['dataset']} " if dataset else "") + f"{config['model']}{aux}{overrides}{objective}{sampler} ({config['preset']})"
            + (f" seed {config['seed']}" if seed else ""))


@dataclass
class Run:
    """A training run on disk. ``cached`` is True when it was found rather than trained."""

    path: Path
    config: dict
    metrics: dict
    env: dict = field(default_factory=dict)
    cached: bool = False

    @property
    def run_id(self) -> str:
        return self.config["run_id"]

    @property
    def complete(self) -> bool:
        return bool(self.metrics.get("complete"))

    def selected(self, protocol: str = "dev_best") -> dict:
        """``{"epoch", "dev", "test"}`` at the epoch chosen by ``protocol``.

        ``dev_best`` (default, honest), ``test_best`` (the official code's protocol, docs/paper_notes.md
        §4.6: selection on the test set), or ``last``.
        """
        try:
            return self.metrics["selection"][protocol]
        except KeyError:
            raise AbsaError(f"{self.path}: no '{protocol}' selection recorded; expected one of "
                            f"{sorted(self.metrics.get('selection', {}))}") from None

    def kept(self) -> Kept | None:
        """The run's kept per-example predictions, checked against its metrics.json; None for a run
        that kept none (trained before runs kept them)."""
        entry = self.metrics.get("predictions")
        return None if entry is None else read_kept(self.path, entry, self.run_id)

    def kept_probs(self, protocol: str = "dev_best", split: str = "test") -> np.ndarray | None:
        """(N, C) probabilities of ``split`` at the epoch ``protocol`` selects, from the kept
        predictions; None when the run kept none for that epoch."""
        kept = self.kept()
        return None if kept is None else kept.probs(split, self.selected(protocol)["epoch"])

    def load_model(self, which: str = "best"):
        """The model saved at the dev-best (``best``) or final (``last``) epoch, after checking that
        the checkpoint is this run's at that epoch, its checksums, and that its own config is this
        run's model (labels, contexts, backbone)."""
        if which not in ("best", "last"):
            raise AbsaError(f"load_model({which!r}): expected 'best' (the dev-selected epoch) or 'last'")
        ckpt = self.path / "checkpoints" / which
        if not ckpt.is_symlink() and not (ckpt / "config.json").is_file():
            kept = (" (a finished run keeps its last epoch's only when trained with ABSA_KEEP_LAST=1)"
                    if which == "last" else "")
            raise AbsaError(f"{ckpt}: no checkpoint here (checkpoints are not committed with run "
                            f"records{kept}); retrain with `absa train ... --force`")
        fix = "retrain with `absa train ... --force`"
        epoch = self.selected("dev_best" if which == "best" else "last")["epoch"]
        verify_checkpoint(ckpt, self.run_id, epoch, fix)
        return _model_of(ckpt, self.config, "the run's config.json", fix)


def checkpoint_fields(config: dict) -> dict:
    """What a checkpoint's config.json must say for a run of ``config``: model, labels, contexts, backbone."""
    sizes = model_sizes(config["dataset"], config["aux"])
    return {"absa_model": config["model"], "num_labels": sizes["num_labels"],
            "num_contexts": sizes["num_contexts"], "absa_backbone": config["backbone"]}


def _model_of(folder: Path, config: dict, source: str, fix: str):
    """The model saved in ``folder``, after checking that its config.json is a model of ``config``."""
    saved = read_saved_config(folder)
    for key, expected in checkpoint_fields(config).items():
        got = getattr(saved, key, None)
        if got != expected:
            raise AbsaError(f"{folder / 'config.json'}: {key} is {got!r}, but {source} says {expected!r}: the "
                            f"weights are not this run's model; {fix}")
    return AbsaPreTrainedModel.from_pretrained(folder)


EXPORT_RECORD = "absa_export.json"
"""In a folder ``absa export`` wrote: the run record the model comes from (checked against its run id),
its labels, what each context id stands for, and the SHA-256 of every other file."""


@dataclass
class ExportedModel:
    """A run's dev-selected model as ``absa export`` wrote it: what :func:`~absa_lib.apply.predict_texts`
    needs with nothing else (no run folder, no network). ``config``: the run's config.json record."""

    path: Path
    config: dict
    record: dict
    verified: bool = False

    @property
    def run_id(self) -> str:
        return self.config["run_id"]

    def verify(self) -> None:
        """Every file the export wrote, as it wrote it (its SHA-256 in :data:`EXPORT_RECORD`); once."""
        if self.verified:
            return
        for name, digest in sorted(self.record["sha256"].items()):
            actual = file_sha256(self.path / name) if (self.path / name).is_file() else "missing"
            if actual != digest:
                raise AbsaError(f"{self.path / name}: {'missing' if actual == 'missing' else 'changed since export'} "
                                f"(its sha256 is recorded in {EXPORT_RECORD}); export the run again (absa export RUN DIR)")
        self.verified = True

    def load_model(self, which: str = "best"):
        """The model, after checking every file against the checksums the export recorded."""
        if which != "best":
            raise AbsaError(f"{self.path}: an exported folder holds the dev-selected model only, not {which!r}")
        self.verify()
        return _model_of(self.path, self.config, EXPORT_RECORD, "export the run again (absa export RUN DIR)")


def load_model_folder(path: str | os.PathLike) -> Run | ExportedModel:
    """A run folder (``absa train``) or an exported model folder (``absa export``), checked."""
    path = Path(path)
    if not (path / EXPORT_RECORD).is_file():
        return load_run(path)
    record = read_json(path / EXPORT_RECORD)
    if (not isinstance(record, dict) or not isinstance(record.get("run"), dict)
            or not isinstance(record.get("sha256"), dict)):
        raise AbsaError(f"{path / EXPORT_RECORD}: expected the export's record (run, labels, contexts, sha256); "
                        "export the run again (absa export RUN DIR)")
    strange = [n for n in record["sha256"] if n in ("", ".", "..") or "/" in n or "\\" in n or n.startswith(".")]
    if strange:                                # a name outside the folder (/dev/zero) would be read and hashed
        raise AbsaError(f"{path / EXPORT_RECORD}: {strange[0]!r} is not a file of this folder; the record was edited "
                        "or damaged; export the run again (absa export RUN DIR)")
    config_from_record(record["run"], path / EXPORT_RECORD)              # its run id is the hash of its fields
    exported = ExportedModel(path, record["run"], record)
    exported.verify()                          # before the tokenizer or the weights are read
    return exported



def folder_megabytes(path: Path) -> float:
    """The size of the files under ``path``, in MB (10⁶ bytes)."""
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file() and not p.is_symlink()) / 1e6


def duration_text(seconds: float) -> str:
    """A wait as a person reads it: ``3 h 05 min``, ``12 min``, ``40 s``."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes = round(seconds / 60)
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"


@dataclass(frozen=True)
class Launch:
    """How this process trains its runs; none of it changes a result. The callers (``absa train``,
    the grid, a notebook's session) read it from the environment with :meth:`from_environ`; the
    training loop reads no environment variable.

    - ``cache_only`` (``$ABSA_CACHE_ONLY=1``): a run that is not finished is an error instead of being
      trained (a notebook that must only read the runs a grid trained, e.g. on a node with a time limit).
    - ``keep_resume_state`` (``$ABSA_RESUME_STATE``, default 1): every epoch saves the resume state
      (``checkpoints/last``: the weights, Adam's moments and the RNG state; 283 MB for a MiniLM
      CG/QACG-BERT, about 2.2 GB for a SentiHood BERT-single's eight classifiers, written and hashed
      after every epoch). 0 where nothing could resume from it (a machine that is gone when the job
      ends): a run interrupted there starts again from epoch 1. Results are the same either way.
    - ``keep_last`` (``$ABSA_KEEP_LAST=1``): keep the resume state after the run has finished. By
      default it is deleted once ``metrics.json`` says complete (nothing resumes a finished run), and a
      finished run keeps its records, kept predictions and the dev-selected checkpoint only.
    - ``checkpoint_seconds`` (``$ABSA_CHECKPOINT_SECONDS``, default 300): with the resume state kept,
      it is also saved inside an epoch at most this often, so that an interrupted hour-long epoch
      resumes where it was (the batches done, their losses and the RNG state) and ends with the record
      an uninterrupted run writes.
    - ``spawned_at`` (``$ABSA_SPAWNED_AT``, set by the grid runner): when the grid launched this
      process, so that the run records its start-up (the interpreter, imports, tokenizing, building the
      model, a resumed checkpoint) and its whole wall time. None when no grid launched it.
    - ``stop`` (set by ``absa train`` on SIGTERM, not from the environment): the loop saves the resume
      state at the end of the batch it is in and raises :class:`~absa_lib.errors.RunStopped`, so a run
      stopped by a grid or a scheduler resumes at that batch instead of at its last timed save.
    """

    cache_only: bool = False
    keep_resume_state: bool = True
    spawned_at: float | None = None
    checkpoint_seconds: float = 300.0
    keep_last: bool = False
    stop: threading.Event = field(default_factory=threading.Event, compare=False, repr=False)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] = os.environ) -> Launch:
        """The options ``environ`` sets; a bad ``ABSA_RESUME_STATE`` is refused before any work."""
        resume = environ.get("ABSA_RESUME_STATE", "1")
        if resume not in ("0", "1"):
            raise AbsaError(f"ABSA_RESUME_STATE={resume!r}: expected 1 (save the resume state after every "
                            "epoch, the default) or 0 (do not)")
        try:
            spawned_at = float(environ["ABSA_SPAWNED_AT"])
        except (KeyError, ValueError):               # not launched by a grid (or a value no grid writes)
            spawned_at = None
        if spawned_at is not None and not math.isfinite(spawned_at):
            spawned_at = None
        keep_last = environ.get("ABSA_KEEP_LAST", "0")
        if keep_last not in ("0", "1"):
            raise AbsaError(f"ABSA_KEEP_LAST={keep_last!r}: expected 1 (keep a finished run's resume state) or 0 (delete "
                            "it, the default)")
        every = environ.get("ABSA_CHECKPOINT_SECONDS", "300")
        try:
            checkpoint_seconds = float(every)
        except ValueError:
            checkpoint_seconds = math.nan
        if not (math.isfinite(checkpoint_seconds) and checkpoint_seconds >= 0):
            raise AbsaError(f"ABSA_CHECKPOINT_SECONDS={every!r}: expected the seconds between saves of the resume "
                            "state inside an epoch, a number of 0 or more (default 300)")
        return cls(cache_only=environ.get("ABSA_CACHE_ONLY", "") not in ("", "0"),
                   keep_resume_state=resume == "1", spawned_at=spawned_at, checkpoint_seconds=checkpoint_seconds,
                   keep_last=keep_last == "1")

    def seconds_since_spawned(self) -> float | None:
        """Seconds since the grid launched this process; None when no grid launched it."""
        return None if self.spawned_at is None else round(time.time() - self.spawned_at, 1)


def run_record(config: TrainConfig, n_train_examples: int, n_train_inputs: int, n_dev_examples: int,
               n_test_examples: int) -> dict:
    """A run's ``config.json``: its fields, its run id and the rest of its identity (data checksums,
    backbone fingerprint, library version), and the sizes of its splits."""
    identity = run_identity(config)
    return {**config.to_dict(), "run_id": config_hash(identity), **{k: v for k, v in identity.items() if k != "config"},
            "n_train_examples": n_train_examples, "n_train_inputs": n_train_inputs,
            "n_dev_examples": n_dev_examples, "n_test_examples": n_test_examples}


def metrics_record(epochs: list[dict], sel_metric: str, complete: bool, predictions: dict | None = None) -> dict:
    """A run's ``metrics.json``: per-epoch rows plus the three selections (:func:`select_epochs`),
    and how it names its kept predictions (:func:`absa_lib.evaluation.kept.write_kept`), if any."""
    record = {"epochs": epochs, "selection": select_epochs(epochs, sel_metric), "selection_metric": sel_metric,
              "complete": complete}
    if predictions is not None:
        record["predictions"] = predictions
    return record


RECORD_FILES = ("config.json", "metrics.json", "env.json")   # a run's record, what results/ keeps (no weights)
KEPT_RECORD_FILES = (*RECORD_FILES, KEPT_FILE)                 # with its kept predictions, when it has them


RUN_LOCK = ".lock"      # in the run folder: held by the one process training the run


def runs_training_beside(path: Path) -> int:
    """How many runs of the runs folder that holds ``path`` (``<runs_dir>/<dataset>/<model>/<id>``)
    are being trained now, the one at ``path`` included: the run locks that some process holds.
    Recorded after every epoch (``runs_training``), because runs sharing a device change its speed."""
    others = (lock for lock in path.parents[2].glob(f"*/*/*/{RUN_LOCK}") if lock.parent != path)
    return 1 + sum(lock_holder(lock) is not None for lock in others)


@contextmanager
def claimed_run_folder(path: Path, force: bool) -> Iterator[None]:
    """Create the run folder, check that files can be written in it, and hold it for the ``with``
    block: a second process (another grid, a notebook) training the same run is refused with one line
    instead of interleaving its epochs with this one's. With ``force`` the folder is emptied first
    (all but the lock). A folder this call made is removed again when the block fails before writing
    anything into it (missing or edited data, say): no folder holding only the lock stays behind."""

    fix = "choose a writable folder with --out (or $ABSA_RUNS_DIR)"
    new = not path.exists()
    ensure_writable(path, fix)
    try:
        with exclusive_lock(path / RUN_LOCK, "another process is training this run; wait for it to finish "
                                             "or stop it, then run the same command again"):
            if force:
                try:
                    for child in [c for c in path.iterdir() if c.name != RUN_LOCK]:
                        shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
                except OSError as err:
                    raise AbsaError(f"--force cannot delete {err.filename} ({err.strerror}); {fix}") from None
            yield
    except BaseException:
        if new and path.is_dir() and {c.name for c in path.iterdir()} <= {RUN_LOCK}:
            shutil.rmtree(path, ignore_errors=True)     # refused before anything of the run was written
        raise


BUSY_POLL = 5.0         # seconds between two looks at the lock of a run that another process trains


def env_record(path: Path, resumed_after: int) -> dict:
    """This process's environment, with the first epoch it trains (``from_epoch``). A run resumed over
    several sessions may have trained on several machines: on a resume, the earlier processes' records
    that trained a kept epoch stay, oldest first, under ``earlier`` (a start that ended before finishing
    an epoch trained nothing that is kept and is dropped)."""
    env = {**collect_env(), "from_epoch": resumed_after + 1}
    if resumed_after and path.is_file():
        previous = read_json(path)
        earlier = previous.pop("earlier", []) if isinstance(previous, dict) else None
        if not isinstance(earlier, list) or not all(isinstance(e, dict) for e in earlier):
            raise AbsaError(f"{path}: expected a JSON object whose 'earlier' is a list of objects; delete it "
                            "to resume without the earlier sessions' environment, or rerun with --force")
        env["earlier"] = [e for e in [*earlier, previous] if e.get("from_epoch", 1) <= resumed_after]
    return env


def select_epochs(epochs: list[dict], sel_metric: str) -> dict:
    """The epoch each protocol picks, with its dev and test metrics: ``dev_best`` and ``test_best``
    by ``sel_metric`` (ties go to the earlier epoch), and ``last``."""
    def pick(best: dict) -> dict:
        return {"epoch": best["epoch"], "dev": best["dev"], "test": best["test"]}

    return {f"{split}_best": pick(max(epochs, key=lambda r: (r[split][sel_metric], -r["epoch"])))
            for split in ("dev", "test")} | {"last": pick(epochs[-1])}


def _check_metrics(path: Path, metrics: dict, n_epochs: int) -> None:
    """A finished run's metrics.json as training writes it, since every table reads it: ``complete``
    true, the epochs 1 to ``n_epochs`` (the run's config) in order, every dev and test metric of every
    epoch a fraction in [0, 1] (NaN: undefined, e.g. an AUC without both classes), and the recorded
    selections those epochs give."""
    where, fix = path / "metrics.json", "the file was edited or damaged: restore it, or retrain with --force"
    if metrics.get("complete") is not True:
        raise AbsaError(f"{where}: complete is {metrics.get('complete')!r}, expected true; {fix}")
    epochs, sel_metric = metrics.get("epochs"), metrics.get("selection_metric")
    if not isinstance(epochs, list) or not epochs:
        raise AbsaError(f"{where}: no epochs recorded (epochs is {epochs!r}); {fix}")
    numbers = [e.get("epoch") if isinstance(e, dict) else None for e in epochs]
    if numbers != list(range(1, n_epochs + 1)):
        raise AbsaError(f"{where}: epochs {numbers[:30]} recorded, expected 1 to {n_epochs} (the run's config.json "
                        f"trains {n_epochs}); {fix}")
    if not isinstance(sel_metric, str):
        raise AbsaError(f"{where}: selection_metric is {sel_metric!r}, expected the name of a metric; {fix}")
    for i, epoch in enumerate(epochs, 1):
        for split in ("dev", "test"):
            values = epoch.get(split) if isinstance(epoch, dict) else None
            if not isinstance(values, dict) or sel_metric not in values:
                raise AbsaError(f"{where}: epoch {i} has no {split} {sel_metric!r} (the selection metric); {fix}")
            for key, v in values.items():
                if not is_kind(v, (int, float)) or not (math.isnan(v) or 0 <= v <= 1):
                    raise AbsaError(f"{where}: epoch {i}, {split} {key} is {v!r}, expected a fraction in [0, 1] "
                                    f"(or NaN: undefined); {fix}")
    if "predictions" in metrics:
        check_entry(metrics["predictions"], where, n_epochs)
    try:
        again, recorded = select_epochs(epochs, sel_metric), dict(metrics["selection"])
    except (KeyError, TypeError, ValueError) as err:
        raise AbsaError(f"{where}: its epochs cannot be read ({one_line(err)}); delete the run "
                        "folder or rerun with --force") from None
    for protocol, picked in again.items():       # compared as JSON text, where NaN equals NaN
        if json.dumps(recorded.get(protocol), sort_keys=True) != json.dumps(picked, sort_keys=True):
            raise AbsaError(f"{path / 'metrics.json'}: the recorded {protocol} selection is not what its epochs "
                            f"give (epoch {picked['epoch']}); the file was edited or damaged: restore it, or "
                            "retrain with --force")
    if "predictions" in metrics:                 # training keeps the epochs the protocols select, no others
        dev_best, test_best = again["dev_best"]["epoch"], again["test_best"]["epoch"]
        expected = {"dev": [dev_best], "test": sorted({dev_best, test_best})}
        if {k: sorted(v) for k, v in metrics["predictions"]["epochs"].items()} != expected:
            raise AbsaError(f"{where}: its kept predictions are of epochs {metrics['predictions']['epochs']}, but its "
                            f"selections are dev epoch {dev_best}, test epochs {expected['test']}; {fix}")


def load_run(path: str | os.PathLike) -> Run:
    """Read a run folder. A run whose training has not finished raises :class:`AbsaError`."""
    path = Path(path)
    if not (path / "config.json").is_file():
        raise AbsaError(f"{path}: not a run folder (no config.json); give the folder that "
                        "`absa train` printed")

    config = read_json(path / "config.json")
    recorded = config_from_record(config, path / "config.json")   # a valid config whose hash is its run_id
    if path.resolve().name != config["run_id"]:               # a copy (x.bak) or another run's record
        raise AbsaError(f"{path}: the folder of run {config['run_id']} (its config.json says so) under another "
                        f"name; a run's folder is named by its run id: move the copy out of the runs folder, or "
                        f"name it {config['run_id']}")
    metrics = read_json(path / "metrics.json") if (path / "metrics.json").is_file() else {}
    env = read_json(path / "env.json") if (path / "env.json").is_file() else {}
    for name, record in (("metrics.json", metrics), ("env.json", env)):
        if not isinstance(record, dict):
            raise AbsaError(f"{path / name}: expected a JSON object, got {type(record).__name__}; delete "
                            "the run folder or rerun with --force")
    run = Run(path=path, config=config, metrics=metrics, env=env, cached=True)
    if not run.complete:
        raise AbsaError(f"{path}: training did not finish (metrics.json is not marked complete); "
                        "run the same `absa train` command again to resume it")
    _check_metrics(path, metrics, recorded.epochs)
    return run


def find_runs(runs_dir: str | os.PathLike, **filters: Any) -> list[Run]:
    """Every complete run under ``runs_dir`` whose config matches all ``filters`` (field=value); a field
    a record lacks (written before the field existed) has its neutral default. Unfinished runs are
    left out; a damaged or edited record is an error (never silently dropped or used)."""

    unknown = sorted(set(filters) - set(TrainConfig.__dataclass_fields__) - set(RECORD_EXTRAS))
    if unknown:                                  # a misspelt field would match no run, silently
        raise AbsaError(f"find_runs: {', '.join(unknown)} is not a field of a run's config.json; expected "
                        "TrainConfig fields such as dataset, model, aux, preset, seed, epochs")
    for name, value in filters.items():          # seed='42' would match no run, silently
        kind = _filter_kind(name)
        if kind and not is_kind(value, kind[0]):
            raise AbsaError(f"find_runs: {name}={value!r} can match no run; a run records its {name} as {kind[1]}")
    runs = []
    for folder, complete in run_folders(runs_dir):
        if not complete:
            continue
        cfg = folder / "config.json"
        record = read_json(cfg)
        if (isinstance(record, dict) and "dataset_scheme" in record and "dataset" in filters
                and record.get("dataset") != filters["dataset"]):
            continue                 # another dataset of your own (its scheme may clash with one in use)
        run = load_run(cfg.parent)
        if all(run.config.get(k, NEUTRAL_DEFAULTS.get(k)) == v for k, v in filters.items()):
            runs.append(run)
    return runs


def _filter_kind(name: str) -> tuple[tuple[type, ...], str] | None:
    """(the types, their name) a run records config field ``name`` as; None for the record's extras."""

    spec = TrainConfig.__dataclass_fields__.get(name)
    if spec is None:
        return None
    default = spec.default_factory() if spec.default is MISSING else spec.default
    return {bool: ((bool,), "true or false"), str: ((str,), "a string"), dict: ((dict,), "a mapping"),
            int: ((int,), "an integer"), float: ((int, float), "a number"),
            type(None): ((int, type(None)), "an integer or None")}[type(default)]


def run_folders(runs_dir: str | os.PathLike) -> list[tuple[Path, bool]]:
    """Every run folder under ``runs_dir`` (a ``config.json`` outside a run's ``checkpoints/``),
    sorted, with whether its ``metrics.json`` marks it complete: what :func:`find_runs` loads and
    what ``absa summary`` lists as unfinished. (A run folder named other than its run id is one too,
    and :func:`load_run` refuses it: a copy is never counted silently.) Symbolic links to folders are
    followed, each real folder once, so a link back up cannot loop."""
    found, seen = [], set()
    for root, dirs, files in os.walk(runs_dir, followlinks=True):
        real = os.path.realpath(root)
        if real in seen:                                  # reached again through a link: once is enough
            dirs[:] = []
            continue
        seen.add(real)
        dirs[:] = [d for d in dirs if d != "checkpoints"]  # a checkpoint's config.json is not a run's
        if "config.json" in files:
            found.append(Path(root))
    found.sort(key=lambda folder: str(folder / "config.json"))
    return [(folder, marked_complete(folder / "metrics.json")) for folder in found]


def run_seconds(metrics: dict) -> float:
    """A run's training and evaluation seconds over its epochs (``seconds`` + ``eval_seconds``). Not
    counted: the start-up before the first epoch and the checkpoints written after each; a run that a
    grid launched records them too (``startup_seconds`` in its first epoch, ``process_seconds`` for
    its whole process)."""
    return sum(e.get("seconds", 0) + e.get("eval_seconds", 0) for e in metrics.get("epochs", []))


def marked_complete(metrics: Path) -> bool:
    """Whether ``metrics`` marks its run complete (False while it is missing or being trained)."""
    if not metrics.is_file():
        return False
    record = read_json(metrics)
    return isinstance(record, dict) and bool(record.get("complete"))

