"""Training, model selection and run records: one plain loop (docs/paper_notes.md §4, §8).

Defaults are the paper's (§4.2 of the paper): AdamW, lr 2e-5, batch 24, 25 epochs, dropout 0.1,
linear warm-up over the first 10% of steps then linear decay to 0, weight decay 0.01 except biases
and LayerNorm, max length 128, global gradient-norm clipping at 1.0. Differences from the official
BERTAdam (per-tensor clipping, no bias correction, the 1.0→0.9 jump after warm-up) are deliberate:
this is the standard optimizer the paper's text describes (:mod:`absa_lib.training.optim`).

Model selection: after every epoch the model is evaluated on dev *and* test. The dev-best epoch
(SentiHood: aspect strict accuracy; SemEval: aspect F1) is the default protocol. The test-best
epoch, which is what the official code reports (it selects on the test set), is recorded beside it
and always labelled as such.
"""

from __future__ import annotations

import shutil
import sys
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import torch

from absa_lib.data import datasets as D
from absa_lib.data.features import Encoded, batches
from absa_lib.data.inputs import model_sizes
from absa_lib.device import autocast, compiled, default_device, grad_scaler, pad_multiple
from absa_lib.errors import AbsaError, RunStopped, one_line
from absa_lib.evaluation.inference import class_probabilities, predict_probs, to_device
from absa_lib.evaluation.metrics import compute_metrics
from absa_lib.evaluation.trivial import floor_record
from absa_lib.fileio import lock_holder
from absa_lib.models import build_for_training, joint, load_tokenizer
from absa_lib.training.config import TrainConfig, check_max_length, resolved, run_path
from absa_lib.training.optim import build_optimizer, set_lr
from absa_lib.training.progress import EpochProgress, EvalProgress
from absa_lib.training.recorder import EpochRecorder
from absa_lib.training.records import Run, RunFolder, load_run, write_config, write_env
from absa_lib.training.runs import Launch, claimed_run_folder, collect_env, duration_text
from absa_lib.training.splits import epoch_batches, prepare_split


def train(config: TrainConfig, runs_dir=None, data_dir=None, force: bool = False, progress: bool = True,
          launch: Launch | None = None) -> Run:
    """Train (or fetch from the cache, or resume) the run described by ``config``.

    Returns the :class:`Run`; ``run.cached`` is True when an identical finished run was found. A run
    that another process is training raises :class:`~absa_lib.errors.RunBusy` (one process per run).
    ``launch``: how this process trains (:class:`~absa_lib.training.runs.Launch`: cache only, resume
    state, when a grid launched it); its callers read it from the environment.
    """
    if not isinstance(config, TrainConfig):
        raise AbsaError(f"train() takes a TrainConfig, got {type(config).__name__}; e.g. "
                        "train(TrainConfig(dataset='sentihood', model='qacg-bert'))")
    launch = launch or Launch()
    config = resolved(config)
    path = run_path(config, runs_dir)
    if not force and RunFolder(path).marked_complete():
        return _cached(path, launch)                                        # the run cache
    if launch.cache_only:
        raise AbsaError(f"{path}: this {config.dataset} {config.model} run (seed {config.seed}) is not in the "
                        "run cache, and ABSA_CACHE_ONLY forbids training it here; train it first (absa grid) "
                        "or unset ABSA_CACHE_ONLY")
    tokenizer = load_tokenizer(config.backbone)
    check_max_length(config, tokenizer)
    with claimed_run_folder(path, force):        # before the work: a read-only --out fails now, not later
        if not force and RunFolder(path).marked_complete():   # finished by another process meanwhile
            return _cached(path, launch)
        if progress:
            print(f"[absa] {config.dataset} {config.model}, seed {config.seed}: {path}; tokenizing the data and "
                  "building the model", file=sys.stderr, flush=True)
        s = _open_run(config, path, tokenizer, data_dir, launch)   # or resume after the last finished epoch
        if progress:
            print(f"[absa] {config.epochs - s.books.epoch} of {config.epochs} epochs to train, "
                  f"{s.total_steps // config.epochs:,} batches of {config.batch_size} each, then dev and test",
                  file=sys.stderr, flush=True)
        startup = launch.seconds_since_spawned()
        for epoch in range(s.books.epoch + 1, config.epochs + 1):
            row = _train_epoch(s, epoch, progress)
            if startup is not None:              # this process's first epoch: what came before it
                row["startup_seconds"], startup = startup, None
            probs = _evaluate(s, row, progress)
            row.update(joint.after_epoch(s.model, s.gold["dev"], probs["dev"]))   # joint-dwa: its task weights updated
            s.books.record(row, probs, s.model, s.optimizer)
            if progress:
                _say_epoch(config, row, s.books.sel_metric)
        return s.books.finish(floor_record(config.dataset, s.train_labels, s.gold["test"]))


def _cached(path: Path, launch: Launch) -> Run:
    """The finished run in ``path``, without the resume state a kill after its final record left behind
    (about 300 MB that nothing resumes), unless ``launch.keep_last``."""
    run = load_run(path)
    last = run.folder.checkpoint("last")
    if not launch.keep_last and last.is_dir() and lock_holder(run.folder.lock) is None:
        shutil.rmtree(last, ignore_errors=True)
    return run


@dataclass(kw_only=True)
class _Session:
    """What one run's training needs between its steps; the books (epochs, step, selection) are ``books``'s."""

    config: TrainConfig
    path: Path
    model: torch.nn.Module
    step_model: torch.nn.Module                          # ``model``, or its compiled wrapper
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler                         # fp16's loss scaling (a pass-through otherwise)
    device: torch.device
    pad_id: int
    pad_to: int                                          # batches padded to a multiple of it (compiled steps)
    train_enc: list[Encoded]
    train_labels: list[int]                              # the training examples' labels (the trivial floor's)
    splits: dict[str, tuple[list, list[Encoded]]]       # dev and test: (examples, encoded)
    total_steps: int
    launch: Launch                                       # resume state kept? launched by a grid when?
    books: EpochRecorder                                 # the epochs so far, the selection, the resume state
    estimate_said: bool = False                          # the whole run's time estimate, printed once

    @cached_property
    def gold(self) -> dict[str, np.ndarray]:
        """Dev's and test's label ids, ``{split: (N,)}``."""
        return {split: np.array([e.label_id for e in examples]) for split, (examples, _) in self.splits.items()}

    def probe_evaluation(self) -> tuple[int, float, int, float]:
        """``(inputs, inputs/s, probed, seconds)``: the dev and test inputs one evaluation reads, and the
        speed of inference timed on ``probed`` of them (two evaluation batches, every k-th input, so
        that their lengths are the splits'), which took ``seconds``: for the run's time estimate. No
        random state is drawn; the model is left in training mode."""
        encoded = [e for _, enc in self.splits.values() for e in enc]
        size = min(len(encoded), 2 * self.config.eval_batch_size)
        sample = encoded[::max(1, len(encoded) // max(size, 1))][:size]
        t0 = time.time()
        predict_probs(self.model, sample, self.config.eval_batch_size, self.pad_id, self.config.precision)
        took = time.time() - t0
        self.model.train()
        return len(encoded), len(sample) / max(took, 1e-9), len(sample), took

    @cached_property
    def params(self) -> list[torch.nn.Parameter]:
        """The model's parameters, listed once: walking the module tree at every step's clip cost
        more than the clip itself on a CPU (bert-single: 1.7 against 0.3 ms, tiny model)."""
        return list(self.model.parameters())


def _open_run(config: TrainConfig, path: Path, tokenizer, data_dir, launch: Launch) -> _Session:
    """Tokenize, build the model and optimizer, write the config and environment records, and open the
    books (restoring the last completed epoch if there is one)."""
    torch.manual_seed(config.seed)
    np.random.seed(config.seed)
    device = default_device()
    splits = {s: prepare_split(config, s, tokenizer, data_dir) for s in ("train", "dev", "test")}
    train_ex, train_enc = splits.pop("train")
    model = build_for_training(config.model, backbone=config.backbone, preset=config.preset,
                               **model_sizes(config.dataset, config.aux), objective=config.objective,
                               none_label=D.none_id(config.dataset),
                               **config.model_overrides).to(device)
    optimizer = build_optimizer(model, config)
    scaler = grad_scaler(device, config.precision)
    run_id = write_config(RunFolder(path), config, len(train_ex), len(train_enc), len(splits["dev"][0]),
                          len(splits["test"][0]))
    books = EpochRecorder.open(path=path, run_id=run_id, dataset=config.dataset, launch=launch, model=model,
                               optimizer=optimizer, scaler=scaler,
                               examples={s: examples for s, (examples, _) in splits.items()})
    write_env(RunFolder(path), collect_env(), books.epoch)
    steps_per_epoch = len(epoch_batches(config, train_enc, 1))
    routing = model.step_routing(config.sampler)                        # bert-single: its K classifiers routed
    return _Session(config=config, path=path, model=model, step_model=compiled(model, config.compile, routing),
                    optimizer=optimizer, scaler=scaler, device=device, pad_id=tokenizer.pad_token_id or 0,
                    pad_to=pad_multiple(config.compile, routing, config.max_length), train_enc=train_enc,
                    train_labels=[e.label_id for e in train_ex],
                    splits=splits, total_steps=steps_per_epoch * config.epochs, launch=launch, books=books)


def _train_epoch(s: _Session, epoch: int, progress: bool) -> dict:
    """One pass over the epoch's batches (learning rate set per step); returns the epoch's row. Every
    ``launch.checkpoint_seconds`` the resume state is saved inside the epoch too (the batches done,
    their losses, the RNG state), and an epoch begun before an interruption continues where it was. Once
    ``launch.stop`` is set (SIGTERM to ``absa train``) it saves at the end of the batch and raises
    :class:`~absa_lib.errors.RunStopped`."""
    config, books = s.config, s.books
    s.model.train()
    order = epoch_batches(config, s.train_enc, epoch)
    begun = books.begin_epoch(epoch)
    done, losses = begun["batches"], [torch.tensor(x) for x in begun["losses"]]
    t0 = saved = time.time()
    bar = EpochProgress(progress, s, epoch, len(order), done)
    for i, (_, batch) in enumerate(batches(s.train_enc, order[done:], s.pad_id, s.pad_to), start=done + 1):
        set_lr(s.optimizer, books.step, s.total_steps, config.warmup, config.schedule)
        with autocast(s.device, config.precision):
            loss = _step_loss(s, batch)
        s.scaler.scale(loss).backward()           # fp16: the loss scaled up, so small gradients do not underflow
        s.model.after_backward(s.step_model, batch.get("context_ids"))   # bert-single: absent contexts skipped
        s.scaler.unscale_(s.optimizer)            # the true gradients, before they are clipped
        torch.nn.utils.clip_grad_norm_(s.params, config.max_grad_norm)
        s.scaler.step(s.optimizer)                # fp16: skipped when a gradient overflowed
        s.scaler.update()
        s.optimizer.zero_grad(set_to_none=True)
        books.step += 1
        losses.append(loss.detach().clone())      # no host sync per step (clone: CUDA graphs reuse outputs)
        bar.update(losses[-1])
        stop = s.launch.stop.is_set()             # SIGTERM to `absa train`: save here, then end
        due = i < len(order) and time.time() - saved >= s.launch.checkpoint_seconds
        if s.launch.keep_resume_state and (stop or due):
            books.save_within_epoch(s.model, s.optimizer, {"epoch": epoch, "batches": i, "losses": [
                float(x) for x in losses], "seconds": begun["seconds"] + time.time() - t0})
            saved = time.time()
        if stop:
            bar.close()
            raise RunStopped(f"{s.path}: stopped at batch {i} of {len(order)} in epoch {epoch}; " + (
                "its resume state is saved there: the same command resumes it" if s.launch.keep_resume_state
                else "ABSA_RESUME_STATE=0 saves no resume state: it trains again from epoch 1"))
    bar.close()
    loss = float(np.mean(torch.stack(losses).tolist())) if losses else float("nan")
    return {"epoch": epoch, "train_loss": loss, "seconds": begun["seconds"] + time.time() - t0}


def _step_loss(s: _Session, batch: dict) -> torch.Tensor:
    """The batch's training loss through ``s.step_model``; a failed compilation is one line."""
    try:
        return s.step_model(**to_device(batch, s.device)).loss
    except torch._dynamo.exc.TorchDynamoException as err:     # raised only by a compiled model
        raise AbsaError(f"compile={s.config.compile!r}: torch.compile failed ({one_line(err)}); train with "
                        "compile none (absa train --compile none, or train_options: {compile: none})") from None


def _evaluate(s: _Session, row: dict, progress: bool = False) -> dict[str, np.ndarray]:
    """The epoch's dev and test metrics into ``row`` (and the seconds they took), each split's
    inference shown (:class:`~absa_lib.training.progress.EvalProgress`); returns the class
    probabilities per split, ``{split: [n_examples, n_classes]}``."""
    config, t0, probs = s.config, time.time(), {}
    for split, (examples, enc) in s.splits.items():
        shown = EvalProgress(progress, f"epoch {row['epoch']}/{config.epochs} {split}", len(enc),
                             "examples" if len(enc) == len(examples) else "inputs")
        probs[split] = class_probabilities(config.dataset, config.aux, predict_probs(
            s.model, enc, config.eval_batch_size, s.pad_id, config.precision, on_batch=shown.update))
        shown.close()
        row[split] = compute_metrics(config.dataset, s.gold[split], probs[split])
    row["eval_seconds"] = time.time() - t0
    return probs


def _say_epoch(config: TrainConfig, row: dict, metric: str) -> None:
    """The epoch's line: loss, dev and test selection metric, seconds of training and of evaluation
    (and graphs compiled), and the run's time left at this epoch's pace."""
    left = config.epochs - row["epoch"]
    pace = f"; about {duration_text(left * (row['seconds'] + row['eval_seconds']))} left" if left else ""
    print(f"[absa] epoch {row['epoch']}/{config.epochs} loss {row['train_loss']:.4f} "
          f"dev {metric} {row['dev'][metric]:.4f} test {row['test'][metric]:.4f} "
          f"({row['seconds']:.0f}s + {row['eval_seconds']:.0f}s evaluation{_compiled_graphs(config)}{pace})",
          file=sys.stderr, flush=True)


def _compiled_graphs(config: TrainConfig) -> str:
    """For the epoch line of a compiled run: how many graphs torch.compile has made in this process,
    so that a count still growing after the first epoch (a new graph per batch shape, and past
    dynamo's recompile limit steps that run uncompiled) shows in the log."""
    if config.compile == "none":
        return ""
    from torch._dynamo.utils import counters

    return f"; {counters['stats']['unique_graphs']} graphs compiled in this process"

