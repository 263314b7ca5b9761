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
from safetensors import SafetensorError
from safetensors.torch import load_file

from absa_lib.data import datasets as D
from absa_lib.data.features import Encoded, batches
from absa_lib.data.inputs import model_sizes
from absa_lib.device import autocast, compiled, default_device, pad_multiple
from absa_lib.errors import AbsaError, one_line
from absa_lib.evaluation.inference import class_probabilities, predict_probs, to_device
from absa_lib.evaluation.kept import Kept, resumed, write_kept
from absa_lib.evaluation.metrics import compute_metrics, selection_metric
from absa_lib.evaluation.predictions import write_predictions
from absa_lib.fileio import atomic_write_json
from absa_lib.models import build_for_training, joint, load_tokenizer, preset_fields
from absa_lib.models.bert_single import skip_absent_contexts, step_routing
from absa_lib.training.checkpoint import load_trainer_state, save_checkpoint, verify_checkpoint
from absa_lib.training.config import TrainConfig, check_max_length, resolved, run_path
from absa_lib.training.optim import build_optimizer, lr_factor
from absa_lib.training.runs import (
    Launch,
    Run,
    claimed_run_folder,
    duration_text,
    env_record,
    load_run,
    marked_complete,
    metrics_record,
    run_record,
    runs_training_beside,
    select_epochs,
)
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
    preset_fields(config.model, config.preset, **config.model_overrides)   # a bad override: before the folder
    config = resolved(config)
    path = run_path(config, runs_dir)
    if not force and marked_complete(path / "metrics.json"):
        return load_run(path)                                               # the run cache
    if launch.cache_only:
        raise AbsaError(f"{path}: this {config.dataset} {config.model} run (seed {config.seed}) is not in the "
                        "run cache, and ABSA_CACHE_ONLY forbids training it here; train it first (absa grid) "
                        "or unset ABSA_CACHE_ONLY")
    tokenizer = load_tokenizer(config.backbone)
    check_max_length(config, tokenizer)
    with claimed_run_folder(path, force):        # before the work: a read-only --out fails now, not later
        if not force and marked_complete(path / "metrics.json"):   # finished by another process meanwhile
            return load_run(path)
        if progress:
            print(f"[absa] {config.dataset} {config.model}, seed {config.seed}: {path}; tokenizing the data and "
                  "building the model", file=sys.stderr, flush=True)
        s = _open_run(config, path, tokenizer, data_dir, launch)   # or resume after the last finished epoch
        if progress:
            print(f"[absa] {config.epochs - s.state['epoch']} of {config.epochs} epochs to train, "
                  f"{s.total_steps // config.epochs:,} batches of {config.batch_size} each, then dev and test",
                  file=sys.stderr, flush=True)
        startup = launch.seconds_since_spawned()
        for epoch in range(s.state["epoch"] + 1, config.epochs + 1):
            row = _train_epoch(s, epoch, progress)
            if startup is not None:              # this process's first epoch: what came before it
                row["startup_seconds"], startup = startup, None
            _evaluate_and_select(s, epoch, row, progress)
        return _finish(s)


@dataclass
class _Session:
    """What one run's training needs between its steps."""

    config: TrainConfig
    path: Path
    model: torch.nn.Module
    step_model: torch.nn.Module                          # ``model``, or its compiled wrapper
    optimizer: torch.optim.Optimizer
    device: torch.device
    pad_id: int
    train_enc: list[Encoded]
    splits: dict[str, tuple[list, list[Encoded]]]       # dev and test: (examples, encoded)
    sel_metric: str
    total_steps: int
    state: dict                                          # epoch, step, per-epoch rows, best row
    launch: Launch                                       # resume state kept? launched by a grid when?
    kept: Kept                                           # dev and test predictions of the selected epochs
    kept_entry: dict | None = None                       # how metrics.json names the kept file
    estimate_said: bool = False                          # the whole run's time estimate, printed once

    @cached_property
    def params(self) -> list[torch.nn.Parameter]:
        """The model's parameters, listed once: walking the module tree at every step's clip cost
        more than the clip itself on a CPU (bert-single: 1.7 against 0.3 ms, tiny model)."""
        return list(self.model.parameters())


def _open_run(config: TrainConfig, path: Path, tokenizer, data_dir, launch: Launch) -> _Session:
    """Tokenize, build the model and optimizer, write the config and environment records, and restore
    the last completed epoch if there is one."""
    torch.manual_seed(config.seed)
    np.random.seed(config.seed)
    device = default_device()
    train_ex, train_enc = prepare_split(config, "train", tokenizer, data_dir)
    splits = {s: prepare_split(config, s, tokenizer, data_dir) for s in ("dev", "test")}
    model = build_for_training(config.model, backbone=config.backbone, preset=config.preset,
                               **model_sizes(config.dataset, config.aux), objective=config.objective,
                               none_label=D.none_id(config.dataset),
                               **config.model_overrides).to(device)
    optimizer = build_optimizer(model, config)
    record = run_record(config, len(train_ex), len(train_enc), len(splits["dev"][0]), len(splits["test"][0]))
    atomic_write_json(path / "config.json", record)
    last = path / "checkpoints" / "last"
    state = _resume(last, model, optimizer)
    atomic_write_json(path / "env.json", env_record(path / "env.json", state["epoch"] if state else 0))
    if state is not None:                                   # resume after an interruption
        within = state.get("partial")
        where = f" and batch {within['batches']} of epoch {within['epoch']}" if within else ""
        print(f"[absa] resuming {path} after epoch {state['epoch']}{where}", file=sys.stderr)
    if not launch.keep_resume_state:                # it would not be kept current: none rather than a stale one
        shutil.rmtree(last, ignore_errors=True)
    steps_per_epoch = len(epoch_batches(config, train_enc, 1))
    step_model = compiled(model, config.compile, step_routing(config.model, config.sampler))   # bert-single: K routed
    kept = Kept.for_splits(record["run_id"], config.dataset, {s: examples for s, (examples, _) in splits.items()})
    if state is not None:
        kept = resumed(path, record["run_id"], state["epoch"], kept)
    return _Session(config, path, model, step_model, optimizer, device, tokenizer.pad_token_id or 0, train_enc, splits,
                    selection_metric(config.dataset), steps_per_epoch * config.epochs,
                    state or {"epoch": 0, "step": 0, "epochs": [], "best": {}}, launch, kept)


def _resume(last: Path, model, optimizer) -> dict | None:
    """Restore the model, optimizer and RNG state saved after the last completed epoch of the run in
    ``last``'s run folder; return the trainer state, or None when there is nothing to resume."""
    fix = "the resume state is corrupt: rerun with --force to train this run from the start"
    if not last.exists() and not last.is_symlink():
        return None
    epoch = verify_checkpoint(last, last.parents[1].name, None, fix)    # this run's, not a copy of another's
    try:
        state = load_trainer_state(last, optimizer)
        if state is not None:
            model.load_checked(load_file(last / "model.safetensors"), str(last / "model.safetensors"))
    except (OSError, SafetensorError, ValueError, KeyError, TypeError, RuntimeError) as err:
        raise AbsaError(f"{last}: cannot resume ({one_line(err)}); {fix}") from None
    if state is None or state["epoch"] != epoch:
        raise AbsaError(f"{last}: its trainer state is not the one of epoch {epoch} it names; {fix}")
    return state


def _train_epoch(s: _Session, epoch: int, progress: bool) -> dict:
    """One pass over the epoch's batches (learning rate set per step); returns the epoch's row. Every
    ``launch.checkpoint_seconds`` the resume state is saved inside the epoch too (the batches done,
    their losses, the RNG state), and an epoch begun before an interruption continues where it was."""
    config, state = s.config, s.state
    s.model.train()
    order = epoch_batches(config, s.train_enc, epoch)
    begun = state.pop("partial", None) or {"epoch": epoch, "batches": 0, "losses": [], "seconds": 0.0}
    if begun["epoch"] != epoch:
        raise AbsaError(f"{s.path}: the resume state is inside epoch {begun['epoch']}, not {epoch}; rerun with "
                        "--force to train this run from the start")
    done, losses = begun["batches"], [torch.tensor(x) for x in begun["losses"]]
    t0 = saved = time.time()
    bar = _Progress(progress, s, epoch, len(order), done)
    pad = pad_multiple(config.compile, step_routing(config.model, config.sampler), config.max_length)
    for i, (_, batch) in enumerate(batches(s.train_enc, order[done:], s.pad_id, pad), start=done + 1):
        factor = lr_factor(state["step"], s.total_steps, config.warmup, config.schedule)
        for group in s.optimizer.param_groups:
            group["lr"] = group["base_lr"] * factor
        with autocast(s.device, config.precision):
            loss = _step_loss(s, batch)
        loss.backward()
        skip_absent_contexts(s.step_model, s.model, batch.get("context_ids"))   # bert-single, mixed batches
        torch.nn.utils.clip_grad_norm_(s.params, config.max_grad_norm)
        s.optimizer.step()
        s.optimizer.zero_grad(set_to_none=True)
        state["step"] += 1
        losses.append(loss.detach().clone())      # no host sync per step (clone: CUDA graphs reuse outputs)
        bar.update(losses[-1])
        if s.launch.keep_resume_state and i < len(order) and time.time() - saved >= s.launch.checkpoint_seconds:
            state["partial"] = {"epoch": epoch, "batches": i, "losses": [float(x) for x in losses],
                                "seconds": begun["seconds"] + time.time() - t0}
            save_checkpoint(s.path / "checkpoints" / "last", s.model, s.path.name, state["epoch"], s.optimizer, state)
            del state["partial"]
            saved = time.time()
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


def _evaluate_and_select(s: _Session, epoch: int, row: dict, progress: bool) -> None:
    """Dev and test metrics of the epoch; keep the dev-best checkpoint and predictions, and the
    predictions of the epochs each protocol selects; save the resume state and the metrics so far."""
    config, state = s.config, s.state
    t0, probs = time.time(), {}
    for split, (examples, enc) in s.splits.items():
        probs[split] = class_probabilities(config.dataset, config.aux, predict_probs(
            s.model, enc, config.eval_batch_size, s.pad_id, config.precision))
        row[split] = compute_metrics(config.dataset, np.array([e.label_id for e in examples]), probs[split])
    row["eval_seconds"] = time.time() - t0
    row["runs_training"] = runs_training_beside(s.path)
    row.update(_joint_task_weights(s.model, config, s.splits["dev"][0], probs["dev"]))
    state["epochs"].append(row)
    if not state["best"] or row["dev"][s.sel_metric] > state["best"]["dev"][s.sel_metric]:
        state["best"] = row
        save_checkpoint(s.path / "checkpoints" / "best", s.model, s.path.name, epoch)
        for split, (examples, _) in s.splits.items():
            write_predictions(s.path / f"predictions_{split}.csv", examples, probs[split])
    selected = select_epochs(state["epochs"], s.sel_metric)
    s.kept.add(epoch, probs)                  # the arrays the metrics came from: they give them back exactly
    dev_best, test_best = selected["dev_best"]["epoch"], selected["test_best"]["epoch"]
    s.kept.keep_only({"dev": {dev_best}, "test": {dev_best, test_best}})
    s.kept_entry = write_kept(s.path, s.kept)
    state["epoch"] = epoch
    if s.launch.keep_resume_state:
        save_checkpoint(s.path / "checkpoints" / "last", s.model, s.path.name, epoch, s.optimizer, state)
    atomic_write_json(s.path / "metrics.json", metrics_record(state["epochs"], s.sel_metric, False, s.kept_entry))
    if progress:
        print(f"[absa] epoch {epoch}/{config.epochs} loss {row['train_loss']:.4f} "
              f"dev {s.sel_metric} {row['dev'][s.sel_metric]:.4f} test {row['test'][s.sel_metric]:.4f} "
              f"({row['seconds']:.0f}s{_compiled_graphs(config)})", file=sys.stderr, flush=True)


def _joint_task_weights(model: torch.nn.Module, config: TrainConfig, dev_examples: list,
                        dev_probs: np.ndarray) -> dict:
    """The epoch's record of a joint run (``{}`` otherwise); ``joint-dwa`` also updates the task weights
    from the dev losses (:mod:`absa_lib.models.joint`).

    Returns ``{"task_weights": {task: w used this epoch}, "dev_task_losses": {task: L̄}}``.
    """
    if config.objective == "single":
        return {}
    mc = model.config
    gold = np.array([e.label_id for e in dev_examples])
    losses = joint.dev_task_losses(dev_probs, gold, mc.none_label, mc.joint_tau)
    used = [float(w) for w in model.task_weights.tolist()]
    if config.objective == "joint-dwa":
        new = joint.updated_weights(used, losses)
        model.task_weights.copy_(torch.tensor(new, dtype=model.task_weights.dtype))
    return {"task_weights": dict(zip(joint.TASKS, used, strict=True)),
            "dev_task_losses": dict(zip(joint.TASKS, losses, strict=True))}


def _compiled_graphs(config: TrainConfig) -> str:
    """For the epoch line of a compiled run: how many graphs torch.compile has made in this process,
    so that a count still growing after the first epoch (a new graph per batch shape, and past
    dynamo's recompile limit steps that run uncompiled) shows in the log."""
    if config.compile == "none":
        return ""
    from torch._dynamo.utils import counters

    return f"; {counters['stats']['unique_graphs']} graphs compiled in this process"


def _finish(s: _Session) -> Run:
    """The metrics marked complete (last: a crash before leaves the run resumable), then the resume state
    deleted unless ``launch.keep_last``."""
    metrics = metrics_record(s.state["epochs"], s.sel_metric, True, s.kept_entry)
    if (wall := s.launch.seconds_since_spawned()) is not None:   # start-up, epochs, checkpoints after each
        metrics["process_seconds"] = wall
    atomic_write_json(s.path / "metrics.json", metrics)
    if not s.launch.keep_last:                 # nothing resumes a finished run: the resume state goes
        shutil.rmtree(s.path / "checkpoints" / "last", ignore_errors=True)
    run = load_run(s.path)
    run.cached = False
    return run


class _Progress:
    """What a person waiting sees: on a terminal a bar per epoch (examples, examples/s, time left in the
    epoch); otherwise a line at most every :data:`LOG_SECONDS` and at the epoch's end. Both say, once
    the first :data:`SPEED_BATCHES` batches have run, how long the whole run will take at that speed."""

    LOG_SECONDS = 60.0
    SPEED_BATCHES = 20

    def __init__(self, enabled: bool, s: _Session, epoch: int, total: int, done: int = 0):
        self.enabled, self.tty = enabled, enabled and sys.stderr.isatty()
        self.s, self.total, self.n, self.first = s, total, done, done
        self.desc = f"epoch {epoch}/{s.config.epochs}"
        self.t0 = self.logged = time.time()
        self.estimated = s.estimate_said                              # said once per process
        if self.tty:
            from tqdm.auto import tqdm
            self.bar = tqdm(total=total * s.config.batch_size, initial=done * s.config.batch_size, desc=self.desc,
                            unit="ex", leave=False)

    def _say(self, line: str) -> None:
        if self.tty:
            self.bar.write(line, file=sys.stderr)
        else:
            print(line, file=sys.stderr, flush=True)

    def update(self, loss: torch.Tensor) -> None:
        """One step done; ``loss`` is read (a host sync) only when it is shown."""
        self.n += 1
        if not self.enabled:
            return
        now, batch = time.time(), self.s.config.batch_size
        per_batch = (now - self.t0) / (self.n - self.first)
        if not self.estimated and self.n - self.first >= min(self.SPEED_BATCHES, self.total - self.first):
            self.estimated = self.s.estimate_said = True
            left = (self.s.total_steps - self.s.state["step"]) * per_batch
            self._say(f"[absa] {batch / per_batch:.1f} examples/s over the first {self.n - self.first} batches: "
                      f"the run's {self.s.total_steps - self.s.state['step']:,} batches left take about "
                      f"{duration_text(left)} at this speed, plus evaluation after each epoch")
        if self.tty:
            self.bar.update(batch)
            self.bar.set_postfix(loss=f"{loss.item():.4f}")
        elif now - self.logged >= self.LOG_SECONDS or self.n == self.total:
            self.logged = now
            self._say(f"[absa] {self.desc} batch {self.n}/{self.total} loss {loss.item():.4f}, "
                      f"{batch / per_batch:.1f} examples/s, epoch left {duration_text((self.total - self.n) * per_batch)}")

    def close(self) -> None:
        if self.tty:
            self.bar.close()

