"""The epoch's bookkeeping: what a run folder holds after each finished epoch, and how a run resumes.

The loop trains and evaluates; :class:`EpochRecorder` keeps the books (docs/paper_notes.md §8):

    open      restore the model, optimizer and RNG state of the last finished epoch, if any
              (``checkpoints/last``, verified to be this run's), and the predictions it kept
    record    after an epoch's dev and test evaluation: the epoch's row; the dev-best checkpoint
              and ``predictions_{dev,test}.csv`` when it is the best so far; the kept
              predictions of the epochs each protocol selects; the resume state; the metrics record
    finish    the metrics record marked complete, with the trivial floor on the run's test examples
              (last: a crash before it leaves the run resumable), then the resume state removed unless
              ``launch.keep_last``

Every state change is a field of the recorder, written by one of its methods; the trainer state in
``checkpoints/last/trainer_state.json`` is :meth:`EpochRecorder.trainer_state`.
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from absa_lib.errors import AbsaError
from absa_lib.evaluation.kept import Kept, resumed, write_kept
from absa_lib.evaluation.metrics import selection_metric
from absa_lib.evaluation.predictions import write_predictions
from absa_lib.training.checkpoint import (
    recover_checkpoint,
    restore_checkpoint,
    save_checkpoint,
    verify_checkpoint,
)
from absa_lib.training.records import Run, RunFolder, RunMetrics, load_run, select_epochs, write_metrics
from absa_lib.training.runs import Launch, runs_training_beside

RESUME_FIX = "the resume state is corrupt: rerun with --force to train this run from the start"
RESTART = "rerun with --force to train this run from the start"


@dataclass(kw_only=True)
class EpochRecorder:
    """The books of one run across its epochs (the trainer state a resume restores)."""

    path: Path                                   # the run folder
    sel_metric: str                              # the dev metric that selects the epoch
    examples: dict[str, list]                    # dev and test examples, in the order of their predictions
    kept: Kept                                   # dev and test predictions of the selected epochs
    launch: Launch                               # resume state kept? finished runs keep it?
    epoch: int = 0                               # the last finished epoch
    step: int = 0                                # optimizer steps taken
    epochs: list[dict] = field(default_factory=list)    # a row per finished epoch (RunMetrics.epochs)
    best: dict = field(default_factory=dict)     # the dev-best row so far
    partial: dict | None = None                  # an interrupted epoch: batches done, their losses, seconds
    kept_entry: dict | None = None               # how the metrics record names the kept file
    scaler: torch.amp.GradScaler | None = None   # fp16's loss scale, part of the resume state

    @property
    def folder(self) -> RunFolder:
        return RunFolder(self.path)

    @property
    def last(self) -> Path:
        return self.folder.checkpoint("last")

    @classmethod
    def open(cls, *, path: Path, run_id: str, dataset: str, examples: dict[str, list],
             launch: Launch, model, optimizer, scaler: torch.amp.GradScaler | None = None) -> EpochRecorder:
        """The books of the run in ``path``: fresh, or restored with ``model`` and ``optimizer`` from
        the resume state the last process left."""
        for which in ("best", "last"):                 # a save a kill cut between its two renames
            recover_checkpoint(RunFolder(path).checkpoint(which))
        state = restore_checkpoint(RunFolder(path).checkpoint("last"), model, optimizer, path.name, RESUME_FIX)
        kept = Kept.for_splits(run_id, dataset, examples)
        books = cls(path=path, sel_metric=selection_metric(dataset), examples=examples, kept=kept, launch=launch,
                    scaler=scaler)
        if state is not None:                          # resume after an interruption
            books.epoch, books.step, books.epochs, books.best = (state["epoch"], state["step"], state["epochs"],
                                                                 state["best"])
            books.partial = state.get("partial")
            if scaler is not None and "grad_scaler" in state:
                scaler.load_state_dict(state["grad_scaler"])
            books.kept = resumed(RunFolder(path).kept, run_id, books.epoch, kept)
            books._check_resumable()
            if books.epochs:                           # what the finished record names (a kill before it lost it)
                books.kept_entry = write_kept(RunFolder(path).kept, books.kept)
            where = f" and batch {books.partial['batches']} of epoch {books.partial['epoch']}" if books.partial else ""
            print(f"[absa] resuming {path} after epoch {books.epoch}{where}", file=sys.stderr)
        if not launch.keep_resume_state:            # it would not be kept current: none rather than a stale one
            shutil.rmtree(books.last, ignore_errors=True)
        return books

    def _check_resumable(self) -> None:
        """What the epochs finished so far left must still be there, or the run could only end bricked
        or poorer: the dev-best checkpoint, and the kept predictions of the epochs the protocols select."""
        if not self.epochs:
            return
        best = self.folder.checkpoint("best")
        verify_checkpoint(best, self.path.name, self.best["epoch"], f"{best} held the dev-best epoch "
                          f"{self.best['epoch']}, which a resume cannot bring back; {RESTART}")
        selected = select_epochs(self.epochs, self.sel_metric)
        dev_best, test_best = selected["dev_best"]["epoch"], selected["test_best"]["epoch"]
        need = {"dev": {dev_best}, "test": {dev_best, test_best}}
        missing = {split: sorted(e for e in epochs if e not in self.kept.epochs[split]) for split, epochs in need.items()}
        if any(missing.values()):
            raise AbsaError(f"{self.folder.kept}: missing or damaged, and it held the predictions of the selected "
                            f"epochs ({', '.join(f'{k} {v}' for k, v in missing.items() if v)}), which a resume "
                            f"cannot make again (those epochs' weights are gone); {RESTART}")

    def trainer_state(self) -> dict:
        """What ``checkpoints/last`` records beside the weights and the optimizer's moments."""
        state = {"epoch": self.epoch, "step": self.step, "epochs": self.epochs, "best": self.best}
        if self.scaler is not None and self.scaler.is_enabled():
            state["grad_scaler"] = self.scaler.state_dict()
        return state | ({"partial": self.partial} if self.partial else {})

    def begin_epoch(self, epoch: int) -> dict:
        """Where ``epoch`` starts: batches done, their losses and seconds (all zero unless an
        interrupted process left it part-way)."""
        begun = self.partial or {"epoch": epoch, "batches": 0, "losses": [], "seconds": 0.0}
        self.partial = None
        if begun["epoch"] != epoch:
            raise AbsaError(f"{self.path}: the resume state is inside epoch {begun['epoch']}, not {epoch}; rerun "
                            "with --force to train this run from the start")
        return begun

    def save_within_epoch(self, model, optimizer, partial: dict) -> None:
        """The resume state part-way through an epoch (``partial``: its batches done, losses, seconds)."""
        state = self.trainer_state() | {"partial": partial}
        save_checkpoint(self.last, model, self.path.name, self.epoch, optimizer, state)

    def record(self, row: dict, probs: dict[str, np.ndarray], model, optimizer) -> None:
        """Book the evaluated epoch ``row`` (its dev and test metrics from ``probs``, the class
        probabilities per split)."""
        epoch, metric = row["epoch"], self.sel_metric
        row["runs_training"] = runs_training_beside(self.path)
        self.epochs.append(row)
        if not self.best or row["dev"][metric] > self.best["dev"][metric]:
            self.best = row
            save_checkpoint(self.folder.checkpoint("best"), model, self.path.name, epoch)
            for split, examples in self.examples.items():
                write_predictions(self.folder.predictions_csv(split), examples, probs[split])
        self.kept.add(epoch, probs)           # the arrays the metrics came from: they give them back exactly
        selected = select_epochs(self.epochs, metric)
        dev_best, test_best = selected["dev_best"]["epoch"], selected["test_best"]["epoch"]
        self.kept.keep_only({"dev": {dev_best}, "test": {dev_best, test_best}})
        self.kept_entry = write_kept(self.folder.kept, self.kept)
        self.epoch = epoch
        if self.launch.keep_resume_state:
            save_checkpoint(self.last, model, self.path.name, epoch, optimizer, self.trainer_state())
        write_metrics(self.folder, RunMetrics.of(self.epochs, metric, False, self.kept_entry))

    def finish(self, trivial_floor: dict | None = None) -> Run:
        """The metrics record marked complete, the resume state gone (unless kept); the finished run.
        ``process_seconds``: start-up, epochs and checkpoints, when a grid launched the process;
        ``trivial_floor``: the best trivial predictor on the run's test examples
        (:func:`~absa_lib.evaluation.trivial.floor_record`)."""
        write_metrics(self.folder, RunMetrics.of(self.epochs, self.sel_metric, True, self.kept_entry,
                                                 self.launch.seconds_since_spawned(), trivial_floor))
        if not self.launch.keep_last:                # nothing resumes a finished run: the resume state goes
            shutil.rmtree(self.last, ignore_errors=True)
        run = load_run(self.path)
        run.cached = False
        return run

