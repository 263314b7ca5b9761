"""Run folders and exported folders, read and written: the only code that opens their records.

:func:`load_run` reads a run folder once (each record read, upgraded, checked and typed once);
:func:`find_runs` is the run cache's lookup; :func:`load_model_folder` takes a run folder or an
exported one. Training writes through :func:`write_config`, :func:`write_env` and :func:`write_metrics`
(every file atomically, ``complete`` last); ``absa export`` through :func:`write_export_record`.
"""

from __future__ import annotations

import os
from dataclasses import MISSING, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from absa_lib._version import __version__
from absa_lib.checks import is_kind
from absa_lib.data.inputs import model_sizes
from absa_lib.errors import AbsaError
from absa_lib.evaluation.kept import Kept, read_kept
from absa_lib.fileio import atomic_write_json, file_sha256, read_json
from absa_lib.models.model_config import read_saved_config
from absa_lib.models.pretrained import AbsaPreTrainedModel
from absa_lib.training.checkpoint import verify_checkpoint
from absa_lib.training.config import TrainConfig, config_hash, run_identity
from absa_lib.training.records.layout import EXPORT_RECORD, RunFolder, run_folders
from absa_lib.training.records.typed import (
    ENV_FIX,
    EXPORT_FIX,
    ExportRecord,
    RunConfig,
    RunEnv,
    RunMetrics,
    epoch_seconds,
)
from absa_lib.training.records.upgrade import RECORD_EXTRAS, env_fields

RETRAIN = "retrain with `absa train ... --force`"


@dataclass
class Run:
    """A finished training run on disk, its records typed. ``cached`` is True when it was found
    rather than trained."""

    path: Path
    config: RunConfig
    metrics: RunMetrics
    env: RunEnv
    cached: bool = False

    @property
    def folder(self) -> RunFolder:
        return RunFolder(self.path)

    @property
    def run_id(self) -> str:
        return self.config.run_id

    @property
    def complete(self) -> bool:
        return self.metrics.complete

    def selected(self, protocol: str = "dev_best") -> dict:
        """``{"epoch", "dev", "test"}`` at the epoch chosen by ``protocol``.

        ``dev_best`` (default, honest), ``test_best`` (the official code's protocol, docs/paper_notes.md
        §4.6: selection on the test set), or ``last``.
        """
        return self.metrics.selected(protocol, self.path)

    def kept(self) -> Kept | None:
        """The run's kept per-example predictions, checked against its metrics record; None for a run
        that kept none (trained before runs kept them)."""
        entry = self.metrics.predictions
        return None if entry is None else read_kept(self.folder.kept, entry, self.run_id, self.folder.metrics)

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
        ckpt = self.folder.checkpoint(which)
        if not ckpt.is_symlink() and not (ckpt / "config.json").is_file():
            kept = (" (a finished run keeps its last epoch's only when trained with ABSA_KEEP_LAST=1)"
                    if which == "last" else "")
            raise AbsaError(f"{ckpt}: no checkpoint here (checkpoints are not committed with run "
                            f"records{kept}); {RETRAIN}")
        epoch = self.selected("dev_best" if which == "best" else "last")["epoch"]
        verify_checkpoint(ckpt, self.run_id, epoch, RETRAIN)
        return _model_of(ckpt, self.config, f"the run's {self.folder.config.name}", RETRAIN)


def checkpoint_fields(config: RunConfig) -> dict:
    """What a checkpoint's config.json must say for a run of ``config``: model, labels, contexts, backbone."""
    sizes = model_sizes(config.dataset, config.aux)
    return {"absa_model": config.model, "num_labels": sizes["num_labels"],
            "num_contexts": sizes["num_contexts"], "absa_backbone": config.backbone}


def _model_of(folder: Path, config: RunConfig, source: str, fix: str):
    """The model saved in ``folder``, after checking that its config.json is a model of ``config``."""
    saved = read_saved_config(folder)
    for key, expected in checkpoint_fields(config).items():
        got = getattr(saved, key, None)
        if got != expected:
            raise AbsaError(f"{folder / 'config.json'}: {key} is {got!r}, but {source} says {expected!r}: the "
                            f"weights are not this run's model; {fix}")
    return AbsaPreTrainedModel.from_pretrained(folder)


@dataclass
class ExportedModel:
    """A run's dev-selected model as ``absa export`` wrote it: what :func:`~absa_lib.apply.predict_texts`
    needs with nothing else (no run folder, no network). ``config``: the run's config record."""

    path: Path
    export: ExportRecord
    verified: bool = False

    @property
    def config(self) -> RunConfig:
        return self.export.config

    @property
    def run_id(self) -> str:
        return self.config.run_id

    @property
    def record_path(self) -> Path:
        return self.path / EXPORT_RECORD

    def verify(self) -> None:
        """Every file the export wrote, as it wrote it (its SHA-256 in :data:`EXPORT_RECORD`); once."""
        if self.verified:
            return
        others = sorted(p.name for p in self.path.iterdir() if p.name != EXPORT_RECORD and p.name not in self.export.sha256)
        if others:                             # a tokenizer's added_tokens.json, say, would change what it reads
            raise AbsaError(f"{self.path / others[0]}: not a file the export wrote ({EXPORT_RECORD} names each of them), "
                            f"and it could change what the model reads; remove it, or {EXPORT_FIX}")
        for name, digest in sorted(self.export.sha256.items()):
            actual = file_sha256(self.path / name) if (self.path / name).is_file() else "missing"
            if actual != digest:
                raise AbsaError(f"{self.path / name}: {'missing' if actual == 'missing' else 'changed since export'} "
                                f"(its sha256 is recorded in {EXPORT_RECORD}); {EXPORT_FIX}")
        self.verified = True

    def load_model(self, which: str = "best"):
        """The model, after checking every file against the checksums the export recorded."""
        if which != "best":
            raise AbsaError(f"{self.path}: an exported folder holds the dev-selected model only, not {which!r}")
        self.verify()
        return _model_of(self.path, self.config, EXPORT_RECORD, EXPORT_FIX)


def load_model_folder(path: str | os.PathLike) -> Run | ExportedModel:
    """A run folder (``absa train``) or an exported model folder (``absa export``), checked once."""
    path = Path(path)
    if not (path / EXPORT_RECORD).is_file():
        return load_run(path)
    record = path / EXPORT_RECORD
    exported = ExportedModel(path, ExportRecord.from_record(read_json(record, EXPORT_FIX), record))
    exported.verify()                          # before the tokenizer or the weights are read
    return exported


def load_run(path: str | os.PathLike) -> Run:
    """Read a run folder: each record read, upgraded, checked and typed once. A run whose training has
    not finished raises :class:`AbsaError`."""
    folder = RunFolder(path)
    if not folder.is_run():
        raise AbsaError(f"{folder.path}: not a run folder (no {folder.config.name}); give the folder that "
                        "`absa train` printed")
    config = RunConfig.from_record(read_json(folder.config), folder.config)   # its run id is the hash of the rest
    if folder.path.resolve().name != config.run_id:             # a copy (x.bak) or another run's record
        raise AbsaError(f"{folder.path}: the folder of run {config.run_id} (its {folder.config.name} says so) under "
                        f"another name; a run's folder is named by its run id: move the copy out of the runs folder, "
                        f"or name it {config.run_id}")
    metrics = read_json(folder.metrics) if folder.metrics.is_file() else {}
    env = RunEnv.from_record(read_json(folder.env, ENV_FIX) if folder.env.is_file() else {}, folder.env)
    if isinstance(metrics, dict) and not metrics.get("complete"):
        raise AbsaError(f"{folder.path}: training did not finish ({folder.metrics.name} is not marked complete); "
                        "run the same `absa train` command again to resume it")
    return Run(path=folder.path, config=config, metrics=RunMetrics.from_record(metrics, folder.metrics, config.epochs),
               env=env, cached=True)


def find_runs(runs_dir: str | os.PathLike, **filters: Any) -> list[Run]:
    """Every complete run under ``runs_dir`` whose config matches all ``filters`` (field=value); a field
    a record lacks (written before the field existed) has the value the run had. Unfinished runs are
    left out; a damaged or edited record is an error (never silently dropped or used)."""

    unknown = sorted(set(filters) - set(TrainConfig.__dataclass_fields__) - set(RECORD_EXTRAS))
    if unknown:                                  # a misspelt field would match no run, silently
        raise AbsaError(f"find_runs: {', '.join(unknown)} is not a field of a run's config; expected "
                        "TrainConfig fields such as dataset, model, aux, preset, seed, epochs")
    for name, value in filters.items():          # seed='42' would match no run, silently
        kind = _filter_kind(name)
        if kind and not is_kind(value, kind[0]):
            raise AbsaError(f"find_runs: {name}={value!r} can match no run; a run records its {name} as {kind[1]}")
    runs = []
    for path, complete in run_folders(runs_dir):
        if not complete:
            continue
        if "dataset" in filters and _own_data_of_another_dataset(RunFolder(path), filters["dataset"]):
            continue                 # another dataset of your own (its scheme may clash with one in use)
        run = load_run(path)
        if all(getattr(run.config, k) == v for k, v in filters.items()):
            runs.append(run)
    return runs


def unfinished_progress(path: str | os.PathLike) -> tuple[int, int | str]:
    """``(epochs finished, epochs planned)`` of a run folder still training or stopped mid-way, read
    without checking the records as :func:`load_run` does (``"?"`` for a plan its config does not say)."""
    folder = RunFolder(path)

    def record(file: Path) -> dict:
        obj = read_json(file) if file.is_file() else {}
        if not isinstance(obj, dict):
            raise AbsaError(f"{file}: expected a JSON object, got {type(obj).__name__}; delete the run folder "
                            "or rerun with --force")
        return obj

    return len(record(folder.metrics).get("epochs", [])), record(folder.config).get("epochs", "?")


def recorded_cost(path: str | os.PathLike) -> tuple[str, float] | None:
    """``(the machine, training and evaluation seconds)`` of a finished run folder, read without the
    checks of :func:`load_run` (a cost summary counts what the records say); None for an unfinished
    run or an unreadable record."""
    folder = RunFolder(path)
    try:
        metrics, env = read_json(folder.metrics), read_json(folder.env) if folder.env.is_file() else {}
    except AbsaError:
        return None
    if not isinstance(metrics, dict) or not metrics.get("complete") or not isinstance(env, dict):
        return None
    return RunEnv(env_fields(env) if env else {}).device_name, epoch_seconds(metrics.get("epochs", []))


def _own_data_of_another_dataset(folder: RunFolder, dataset: str) -> bool:
    record = read_json(folder.config)
    return isinstance(record, dict) and "dataset_scheme" in record and record.get("dataset") != dataset


def _filter_kind(name: str) -> tuple[tuple[type, ...], str] | None:
    """(the types, their name) a run records config field ``name`` as; None for the record's extras."""

    spec = TrainConfig.__dataclass_fields__.get(name)
    if spec is None:
        return None
    default = spec.default_factory() if spec.default is MISSING else spec.default
    return {bool: ((bool,), "true or false"), str: ((str,), "a string"), dict: ((dict,), "a mapping"),
            int: ((int,), "an integer"), float: ((int, float), "a number"),
            type(None): ((int, type(None)), "an integer or None")}[type(default)]


# Writing: what training and ``absa export`` leave in a folder.

def write_config(folder: RunFolder, config: TrainConfig, n_train_examples: int, n_train_inputs: int,
                 n_dev_examples: int, n_test_examples: int) -> str:
    """Write a run's config record: its fields, its run id and the rest of its identity (data
    checksums, backbone fingerprint, library version), and the sizes of its splits; the run id."""
    identity = run_identity(config)
    record = {**config.to_dict(), "run_id": config_hash(identity), **{k: v for k, v in identity.items() if k != "config"},
              "n_train_examples": n_train_examples, "n_train_inputs": n_train_inputs,
              "n_dev_examples": n_dev_examples, "n_test_examples": n_test_examples}
    atomic_write_json(folder.config, record)
    return record["run_id"]


def write_metrics(folder: RunFolder, metrics: RunMetrics) -> None:
    """Write a run's metrics record (``complete`` only once training has finished)."""
    atomic_write_json(folder.metrics, metrics.to_record())


def write_env(folder: RunFolder, env: dict, resumed_after: int) -> None:
    """Write this process's environment (:func:`~absa_lib.training.runs.collect_env`) with the first epoch
    it trains (``from_epoch``). A run resumed over several sessions may have trained on several
    machines: on a resume, the earlier processes' records that trained a kept epoch stay, oldest
    first, under ``earlier`` (a start that ended before finishing an epoch trained nothing that is
    kept and is dropped)."""
    env = {**env, "from_epoch": resumed_after + 1}
    if resumed_after and folder.env.is_file():
        previous = read_json(folder.env)
        earlier = previous.pop("earlier", []) if isinstance(previous, dict) else None
        if not isinstance(earlier, list) or not all(isinstance(e, dict) for e in earlier):
            raise AbsaError(f"{folder.env}: expected a JSON object whose 'earlier' is a list of objects; delete it "
                            "to resume without the earlier sessions' environment, or rerun with --force")
        env["earlier"] = [e for e in [*earlier, previous] if e.get("from_epoch", 1) <= resumed_after]
    atomic_write_json(folder.env, env)


def write_export_record(folder: Path, run: Run, labels: list[str], contexts: dict[str, list]) -> None:
    """Write an exported folder's record, last: the run's config as recorded, its labels, what each
    context id stands for, the selected epoch, and the SHA-256 of every file already in ``folder``
    (what an exported model reads, and nothing else)."""
    files = sorted(p for p in Path(folder).iterdir() if p.is_file() and p.name != EXPORT_RECORD)
    atomic_write_json(Path(folder) / EXPORT_RECORD, {
        "run": run.config.record, "labels": labels, "contexts": contexts,
        "selected_epoch": run.selected("dev_best")["epoch"], "absa_lib_version": __version__,
        "sha256": {p.name: file_sha256(p) for p in files}})
