"""The files of a run folder and of an exported model folder: every name declared here, once.

A run lives in ``<runs_dir>/<dataset>/<model>/<run_id>/`` (:class:`RunFolder`); ``absa export`` writes a
folder of its own (:data:`EXPORT_RECORD` beside the model's files). No other module names these files:
they ask a :class:`RunFolder` for a path, and :mod:`absa_lib.training.records` for what a file holds.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from absa_lib.fileio import read_json

CONFIG = "config.json"        # the TrainConfig, its run id and the rest of its identity (RunConfig)
METRICS = "metrics.json"      # the epochs, the selections, the kept predictions' entry (RunMetrics)
ENV = "env.json"              # the machine and the versions (RunEnv)
LOCK = ".lock"                # held by the one process training the run
CHECKPOINTS = "checkpoints"   # best/ (the dev-selected weights) and last/ (the resume state); not for git
CURVE = "curve.png"           # the training curve, drawn by the callers (absa_lib.reports.plots)
KEPT_FILE = "predictions.npz"  # the kept per-example predictions (their format: absa_lib.evaluation.kept)

RECORD_FILES = (CONFIG, METRICS, ENV)       # a run's record, what results/ keeps (no weights)
KEPT_RECORD_FILES = (*RECORD_FILES, KEPT_FILE)   # with its kept predictions, when it has them

EXPORT_RECORD = "absa_export.json"
"""In a folder ``absa export`` wrote: the run record the model comes from (checked against its run id),
its labels, what each context id stands for, and the SHA-256 of every other file."""


@dataclass(frozen=True)
class RunFolder:
    """The paths of one run folder; nothing is read or checked here."""

    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))

    @property
    def config(self) -> Path:
        return self.path / CONFIG

    @property
    def metrics(self) -> Path:
        return self.path / METRICS

    @property
    def env(self) -> Path:
        return self.path / ENV

    @property
    def kept(self) -> Path:
        return self.path / KEPT_FILE

    @property
    def lock(self) -> Path:
        return self.path / LOCK

    @property
    def curve(self) -> Path:
        return self.path / CURVE

    def checkpoint(self, which: str) -> Path:
        """``best`` (the dev-selected epoch's weights) or ``last`` (the resume state)."""
        return self.path / CHECKPOINTS / which

    def predictions_csv(self, split: str) -> Path:
        """The dev-best model's probabilities on ``split`` (absa_lib.evaluation.predictions format)."""
        return self.path / f"predictions_{split}.csv"

    def is_run(self) -> bool:
        """Whether the folder holds a run record (finished or not)."""
        return self.config.is_file()

    def marked_complete(self) -> bool:
        """Whether its metrics record marks the run complete (False while missing or being trained)."""
        if not self.metrics.is_file():
            return False
        record = read_json(self.metrics)
        return isinstance(record, dict) and bool(record.get("complete"))

    def record_files(self) -> list[Path]:
        """The files of its record that exist: what results/ keeps of a run."""
        return [self.path / name for name in KEPT_RECORD_FILES if (self.path / name).is_file()]


EXPORT_STAGING = ".partial"
"""The suffix of the folder ``absa export`` writes into before renaming it into place (``.NAME.*.partial``):
a killed export leaves one, which is not a run."""


def _not_a_run(name: str, files: list[str]) -> bool:
    """A folder no run lives in, whatever its files: an export's staging folder, or an exported model
    (its ``config.json`` is the model's, beside :data:`EXPORT_RECORD`)."""
    return (name.startswith(".") and name.endswith(EXPORT_STAGING)) or EXPORT_RECORD in files


def _walk(runs_dir: str | os.PathLike):
    """``(folder, files)`` under ``runs_dir`` outside checkpoints and export folders, links followed,
    each real folder once (a link back up cannot loop)."""
    seen = set()
    for root, dirs, files in os.walk(runs_dir, followlinks=True):
        real = os.path.realpath(root)
        if real in seen:                                  # reached again through a link: once is enough
            dirs[:] = []
            continue
        seen.add(real)
        dirs[:] = [d for d in dirs if d != CHECKPOINTS and not (d.startswith(".") and d.endswith(EXPORT_STAGING))]
        if _not_a_run(Path(root).name, files):
            dirs[:] = []
            continue
        yield Path(root), files


def headless_folders(runs_dir: str | os.PathLike) -> list[Path]:
    """Folders under ``runs_dir`` that hold a metrics record but no config record: a run whose
    ``config.json`` was lost, which :func:`run_folders` cannot count (what callers name as not counted)."""
    return sorted(folder for folder, files in _walk(runs_dir) if METRICS in files and CONFIG not in files)


def run_folders(runs_dir: str | os.PathLike) -> list[tuple[Path, bool]]:
    """Every run folder under ``runs_dir`` (a run record outside a run's checkpoints), sorted, with
    whether it is marked complete: what :func:`~absa_lib.training.records.find_runs` loads and what
    ``absa summary`` lists as unfinished. (A run folder named other than its run id is one too, and
    :func:`~absa_lib.training.records.load_run` refuses it: a copy is never counted silently.)
    Symbolic links to folders are followed, each real folder once, so a link back up cannot loop; an
    exported model's folder and a killed export's staging folder are not runs."""
    found = [folder for folder, files in _walk(runs_dir) if CONFIG in files]   # a checkpoint's or an
                                                                                 # export's is not a run's
    found.sort(key=lambda folder: str(folder / CONFIG))
    return [(folder, RunFolder(folder).marked_complete()) for folder in found]
