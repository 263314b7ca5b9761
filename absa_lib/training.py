"""Training, model selection and run records: one plain loop (docs/paper_notes.md §4, §8).

Defaults are the paper's (§4.2 of the paper): AdamW, lr 2e-5, batch 24, 25 epochs, dropout 0.1,
linear warm-up over the first 10% of steps then linear decay to 0, weight decay 0.01 except biases
and LayerNorm, max length 128, global gradient-norm clipping at 1.0. Differences from the official
BERTAdam (per-tensor clipping, no bias correction, the 1.0→0.9 jump after warm-up) are deliberate:
this is the standard optimizer the paper's text describes (:mod:`absa_lib.optim`).

Model selection: after every epoch the model is evaluated on dev *and* test. The dev-best epoch
(SentiHood: aspect strict accuracy; SemEval: aspect F1) is the default protocol. The test-best
epoch, which is what the official code reports (it selects on the test set), is recorded beside it
and always labelled as such.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from absa_lib import data as D
from absa_lib.checkpoint import load_trainer_state, save_checkpoint, verify_checksums
from absa_lib.config import TrainConfig, check_max_length, data_checksums, resolved, run_identity, run_path
from absa_lib.device import autocast, compiled, default_device, pad_multiple
from absa_lib.errors import AbsaError, RunBusy, one_line
from absa_lib.features import Encoded, batches, encode_examples, length_grouped, per_context, sequential
from absa_lib.fileio import atomic_write_json, exclusive_lock, lock_holder, read_json
from absa_lib.inference import class_probabilities, predict_probs, to_device
from absa_lib.inputs import model_sizes
from absa_lib.metrics import compute_metrics, selection_metric
from absa_lib.models import joint, load_tokenizer, preset_fields
from absa_lib.models.per_context import build_for_training, skip_absent_contexts, step_routing
from absa_lib.optim import build_optimizer, lr_factor
from absa_lib.paths import ensure_writable
from absa_lib.predictions import write_predictions
from absa_lib.runs import Run, collect_env, config_hash, load_run, marked_complete, select_epochs

# ----------------------------------------------------------------------------------------------
# data


def _subset_train(examples: list, k: int | None) -> list:
    if k is None or k >= len(examples):
        return examples
    order = torch.randperm(len(examples), generator=torch.Generator().manual_seed(0)).tolist()
    return [examples[i] for i in sorted(order[:k])]


_ENCODED: dict[tuple, tuple[list, list[Encoded]]] = {}     # one tokenization per split per process


def prepare_split(config: TrainConfig, split: str, tokenizer, data_dir=None) -> tuple[list, list[Encoded]]:
    """Examples of a split (subset as configured) and their encoded inputs, tokenized once per
    process (a notebook or grid that trains many runs on the same split reuses them)."""
    subset = config.max_train_examples if split == "train" else config.max_eval_examples
    key = (config.dataset, split, config.aux, subset, config.max_length, tokenizer.name_or_path,
           len(tokenizer), str(data_dir),
           tuple(sorted(data_checksums(config.dataset).items())))     # your own data's files can change
    if key not in _ENCODED:
        examples = D.load_examples(config.dataset, split, data_dir=data_dir)
        if split == "train":
            examples = _subset_train(examples, config.max_train_examples)
        else:
            examples = D.eval_subset(examples, config.dataset, config.max_eval_examples)
        _ENCODED[key] = examples, encode_examples(examples, config.aux, tokenizer, config.max_length)
    return _ENCODED[key]


# ----------------------------------------------------------------------------------------------
# the loop


def epoch_batches(config: TrainConfig, encoded: list[Encoded], epoch: int) -> list[list[int]]:
    """The epoch's batches (lists of input indices), seeded per (seed, epoch) so that a resumed run
    draws exactly the batches an uninterrupted one would."""
    g = torch.Generator().manual_seed(config.seed * 1000 + epoch)
    if config.sampler == "balanced":
        labels = torch.tensor([e.label for e in encoded])
        counts = torch.bincount(labels).float()
        weights = (len(labels) / counts)[labels]       # official: N / count(label), with replacement
        order = torch.multinomial(weights, len(labels), replacement=True, generator=g).tolist()
    else:                                               # uniform, per-context: every input once
        order = torch.randperm(len(encoded), generator=g).tolist()
    lengths = [len(e.input_ids) for e in encoded] if config.group_by_length else None
    if config.sampler == "per-context":                 # bert-single: one context per batch
        return per_context(order, [e.context_id for e in encoded], config.batch_size, g, lengths)
    if lengths is not None:
        return length_grouped(order, lengths, config.batch_size, g)
    return sequential(order, config.batch_size)


class _Progress:
    """tqdm on a terminal; plain log lines (about ten per epoch) otherwise."""

    def __init__(self, enabled: bool, total: int, desc: str):
        self.tty, self.total, self.desc, self.n = enabled and sys.stderr.isatty(), total, desc, 0
        self.enabled = enabled
        if self.tty:
            from tqdm.auto import tqdm
            self.bar = tqdm(total=total, desc=desc, leave=False)

    def update(self, loss: torch.Tensor) -> None:
        """One step done; ``loss`` is read (a host sync) only when it is shown."""
        self.n += 1
        if self.tty:
            self.bar.update(1)
            self.bar.set_postfix(loss=f"{loss.item():.4f}")
        elif self.enabled and (self.n % max(1, self.total // 10) == 0 or self.n == self.total):
            print(f"[absa] {self.desc} batch {self.n}/{self.total} loss {loss.item():.4f}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.tty:
            self.bar.close()


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
    keep_resume_state: bool                              # checkpoints/last after every epoch

    @cached_property
    def params(self) -> list[torch.nn.Parameter]:
        """The model's parameters, listed once: walking the module tree at every step's clip cost
        more than the clip itself on a CPU (bert-single: 1.7 against 0.3 ms, tiny model)."""
        return list(self.model.parameters())


def train(config: TrainConfig, runs_dir=None, data_dir=None, force: bool = False,
          progress: bool = True) -> Run:
    """Train (or fetch from cache, or resume) the run described by ``config``.

    Returns the :class:`Run`; ``run.cached`` is True when an identical finished run was found.
    With ``$ABSA_CACHE_ONLY`` set, a run that is not finished is an error instead of being trained
    (a notebook that must only read runs a grid trained, e.g. on a node with a time limit). A run
    that another process is training raises :class:`~absa_lib.errors.RunBusy` (one process per run).
    """
    if not isinstance(config, TrainConfig):
        raise AbsaError(f"train() takes a TrainConfig, got {type(config).__name__}; e.g. "
                        "train(TrainConfig(dataset='sentihood', model='qacg-bert'))")
    preset_fields(config.model, config.preset, **config.model_overrides)   # a bad override: before the folder
    config = resolved(config)
    path = run_path(config, runs_dir)
    if not force and marked_complete(path / "metrics.json"):
        return load_run(path)
    if os.environ.get("ABSA_CACHE_ONLY", "") not in ("", "0"):
        raise AbsaError(f"{path}: this {config.dataset} {config.model} run (seed {config.seed}) is not in the "
                        "run cache, and ABSA_CACHE_ONLY forbids training it here; train it first (absa grid) "
                        "or unset ABSA_CACHE_ONLY")
    tokenizer = load_tokenizer(config.backbone)
    check_max_length(config, tokenizer)
    keep_resume_state = keeps_resume_state()  # read once: a bad ABSA_RESUME_STATE is refused before any work
    with _claimed_run_folder(path, force):   # before the work: a read-only --out fails now, not later
        if not force and marked_complete(path / "metrics.json"):   # finished by another process meanwhile
            return load_run(path)
        session = _open_run(config, path, tokenizer, data_dir, keep_resume_state)
        startup = _since_launch()
        for epoch in range(session.state["epoch"] + 1, config.epochs + 1):
            row = _train_epoch(session, epoch, progress)
            if startup is not None:              # this process's first epoch: what came before it
                row["startup_seconds"], startup = startup, None
            _evaluate_and_select(session, epoch, row, progress)
        return _finish(session)


def _since_launch() -> float | None:
    """Seconds since the grid launched this process (``$ABSA_SPAWNED_AT``): before the first epoch,
    its start-up (the interpreter, imports, tokenizing, building the model, a resumed checkpoint); at
    the end, its whole wall time. None when no grid launched it (a notebook, ``absa train`` by hand),
    where there is no such start to measure from."""
    spawned = os.environ.get("ABSA_SPAWNED_AT", "")
    try:
        return round(time.time() - float(spawned), 1) if spawned else None
    except ValueError:
        return None


def keeps_resume_state() -> bool:
    """Whether every epoch saves the resume state (``checkpoints/last``: the weights, Adam's moments
    and the RNG state; 283 MB for a MiniLM CG/QACG-BERT, about 2.2 GB for a SentiHood BERT-single's eight
    classifiers, written and hashed after every epoch). Set
    ``ABSA_RESUME_STATE=0`` where nothing could resume from it (a device given back after its
    session): a run interrupted there starts again from epoch 1. Results are the same either way."""
    value = os.environ.get("ABSA_RESUME_STATE", "1")
    if value not in ("0", "1"):
        raise AbsaError(f"ABSA_RESUME_STATE={value!r}: expected 1 (save the resume state after every "
                        "epoch, the default) or 0 (do not)")
    return value == "1"


BUSY_POLL = 5.0         # seconds between two looks at the lock of a run that another process trains


def train_when_free(config: TrainConfig, runs_dir=None, log=print, **kwargs) -> Run:
    """:func:`train`, but a run that another process is training (a grid beside this notebook) is
    waited for, with one line saying so, instead of refused: once that process lets go of it, the run
    comes from the cache, or resumes from the last epoch that process finished."""
    lock = run_path(resolved(config), runs_dir) / RUN_LOCK
    while True:
        try:
            return train(config, runs_dir=runs_dir, **kwargs)
        except RunBusy:
            if (holder := lock_holder(lock)) is not None:
                log(f"[runs] {lock.parent}: another process is training this run (pid {holder}); waiting for it")
            while lock_holder(lock) is not None:
                time.sleep(BUSY_POLL)


def _open_run(config: TrainConfig, path: Path, tokenizer, data_dir, keep_resume_state: bool) -> _Session:
    """Tokenize, build the model and optimizer, write the config and environment records, and restore
    the last completed epoch if there is one."""
    torch.manual_seed(config.seed)
    np.random.seed(config.seed)
    device = default_device()
    train_ex, train_enc = prepare_split(config, "train", tokenizer, data_dir)
    splits = {s: prepare_split(config, s, tokenizer, data_dir) for s in ("dev", "test")}
    model = build_for_training(config.model, backbone=config.backbone, preset=config.preset,
                               **model_sizes(config.dataset, config.aux), **joint.build_kwargs(config),
                               **config.model_overrides).to(device)
    optimizer = build_optimizer(model, config)
    identity = run_identity(config)
    record = {**config.to_dict(), "run_id": config_hash(identity),
              **{k: v for k, v in identity.items() if k != "config"},
              "n_train_examples": len(train_ex), "n_train_inputs": len(train_enc),
              "n_dev_examples": len(splits["dev"][0]), "n_test_examples": len(splits["test"][0])}
    atomic_write_json(path / "config.json", record)
    last = path / "checkpoints" / "last"
    state = _resume(last, model, optimizer)
    atomic_write_json(path / "env.json", _env_record(path / "env.json", state["epoch"] if state else 0))
    if state is not None:                                   # resume after an interruption
        print(f"[absa] resuming {path} after epoch {state['epoch']}", file=sys.stderr)
    if not keep_resume_state:                # it would not be kept current: none rather than a stale one
        shutil.rmtree(last, ignore_errors=True)
    steps_per_epoch = len(epoch_batches(config, train_enc, 1))
    step_model = compiled(model, config.compile, step_routing(config.model, config.sampler))   # bert-single: K routed
    return _Session(config, path, model, step_model, optimizer, device, tokenizer.pad_token_id or 0, train_enc, splits,
                    selection_metric(config.dataset), steps_per_epoch * config.epochs,
                    state or {"epoch": 0, "step": 0, "epochs": [], "best": {}}, keep_resume_state)


def _train_epoch(s: _Session, epoch: int, progress: bool) -> dict:
    """One pass over the epoch's batches (learning rate set per step); returns the epoch's row."""
    config, state = s.config, s.state
    s.model.train()
    t0, losses = time.time(), []
    order = epoch_batches(config, s.train_enc, epoch)
    bar = _Progress(progress, len(order), f"epoch {epoch}/{config.epochs}")
    pad = pad_multiple(config.compile, step_routing(config.model, config.sampler), config.max_length)
    for _, batch in batches(s.train_enc, order, s.pad_id, pad):
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
    bar.close()
    loss = float(np.mean(torch.stack(losses).tolist())) if losses else float("nan")
    return {"epoch": epoch, "train_loss": loss, "seconds": time.time() - t0}


def _step_loss(s: _Session, batch: dict) -> torch.Tensor:
    """The batch's training loss through ``s.step_model``; a failed compilation is one line."""
    try:
        return s.step_model(**to_device(batch, s.device)).loss
    except torch._dynamo.exc.TorchDynamoException as err:     # raised only by a compiled model
        raise AbsaError(f"compile={s.config.compile!r}: torch.compile failed ({one_line(err)}); train with "
                        "compile none (absa train --compile none, or train_options: {compile: none})") from None


def _evaluate_and_select(s: _Session, epoch: int, row: dict, progress: bool) -> None:
    """Dev and test metrics of the epoch; keep the dev-best checkpoint and predictions; save the
    resume state and the metrics so far."""
    config, state = s.config, s.state
    t0, probs = time.time(), {}
    for split, (examples, enc) in s.splits.items():
        probs[split] = class_probabilities(config.dataset, config.aux, predict_probs(
            s.model, enc, config.eval_batch_size, s.pad_id, config.precision))
        row[split] = compute_metrics(config.dataset, np.array([e.label_id for e in examples]), probs[split])
    row["eval_seconds"] = time.time() - t0
    row["runs_training"] = runs_training_beside(s.path)
    row.update(joint.end_of_epoch(s.model, config, s.splits["dev"][0], probs["dev"]))   # task weights
    state["epochs"].append(row)
    if not state["best"] or row["dev"][s.sel_metric] > state["best"]["dev"][s.sel_metric]:
        state["best"] = row
        save_checkpoint(s.path / "checkpoints" / "best", s.model)
        for split, (examples, _) in s.splits.items():
            write_predictions(s.path / f"predictions_{split}.csv", examples, probs[split])
    state["epoch"] = epoch
    if s.keep_resume_state:
        save_checkpoint(s.path / "checkpoints" / "last", s.model, s.optimizer, state)
    atomic_write_json(s.path / "metrics.json", _metrics_record(state["epochs"], s.sel_metric, complete=False))
    if progress:
        print(f"[absa] epoch {epoch}/{config.epochs} loss {row['train_loss']:.4f} "
              f"dev {s.sel_metric} {row['dev'][s.sel_metric]:.4f} test {row['test'][s.sel_metric]:.4f} "
              f"({row['seconds']:.0f}s{_compiled_graphs(config)})", file=sys.stderr, flush=True)


def _compiled_graphs(config: TrainConfig) -> str:
    """For the epoch line of a compiled run: how many graphs torch.compile has made in this process,
    so that a count still growing after the first epoch (a new graph per batch shape, and past
    dynamo's recompile limit steps that run uncompiled) shows in the log."""
    if config.compile == "none":
        return ""
    from torch._dynamo.utils import counters

    return f"; {counters['stats']['unique_graphs']} graphs compiled in this process"


def _finish(s: _Session) -> Run:
    """The training curve, then the metrics marked complete (last: a crash before leaves it resumable)."""
    metrics = _metrics_record(s.state["epochs"], s.sel_metric, complete=True)
    if (wall := _since_launch()) is not None:    # start-up, epochs, checkpoints written after each: all of it
        metrics["process_seconds"] = wall
    _save_curve(s.path, s.config, metrics)
    atomic_write_json(s.path / "metrics.json", metrics)
    run = load_run(s.path)
    run.cached = False
    return run


def _save_curve(path: Path, config: TrainConfig, metrics: dict) -> None:
    """``curve.png``: the run's selection metric on dev and test, and its train loss, per epoch."""
    from absa_lib import figure_data, plots

    curve = figure_data.training_curve(metrics, config.dataset, f"{config.model} ({config.aux})", loss=True)
    plots.save_figure(plots.training_curves([curve], loss=True), path, "curve", formats=("png",), close=True)


RUN_LOCK = ".lock"      # in the run folder: held by the one process training the run


def runs_training_beside(path: Path) -> int:
    """How many runs of the runs folder that holds ``path`` (``<runs_dir>/<dataset>/<model>/<id>``)
    are being trained now, the one at ``path`` included: the run locks that some process holds.
    Recorded after every epoch (``runs_training``), because runs sharing a device change its speed."""
    others = (lock for lock in path.parents[2].glob(f"*/*/*/{RUN_LOCK}") if lock.parent != path)
    return 1 + sum(lock_holder(lock) is not None for lock in others)


@contextmanager
def _claimed_run_folder(path: Path, force: bool) -> Iterator[None]:
    """Create the run folder, check that files can be written in it, and hold it for the ``with``
    block: a second process (another grid, a notebook) training the same run is refused with one line
    instead of interleaving its epochs with this one's. With ``force`` the folder is emptied first
    (all but the lock)."""

    fix = "choose a writable folder with --out (or $ABSA_RUNS_DIR)"
    ensure_writable(path, fix)
    with exclusive_lock(path / RUN_LOCK, "another process is training this run; wait for it to finish "
                                         "or stop it, then run the same command again"):
        if force:
            try:
                for child in [c for c in path.iterdir() if c.name != RUN_LOCK]:
                    shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
            except OSError as err:
                raise AbsaError(f"--force cannot delete {err.filename} ({err.strerror}); {fix}") from None
        yield


def _env_record(path: Path, resumed_after: int) -> dict:
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


def _resume(last: Path, model, optimizer) -> dict | None:
    """Restore the model, optimizer and RNG state saved after the last completed epoch; return the
    trainer state, or None when there is nothing to resume."""

    fix = "the resume state is corrupt: rerun with --force to train this run from the start"
    verify_checksums(last, fix)
    try:
        state = load_trainer_state(last, optimizer)
        if state is not None:
            model.load_checked(load_file(last / "model.safetensors"), str(last / "model.safetensors"))
    except (OSError, SafetensorError, ValueError, KeyError, TypeError, RuntimeError) as err:
        raise AbsaError(f"{last}: cannot resume ({one_line(err)}); {fix}") from None
    return state


def _metrics_record(epochs: list[dict], sel_metric: str, complete: bool) -> dict:
    """Per-epoch rows plus the three selections (:func:`absa_lib.runs.select_epochs`)."""
    return {"epochs": epochs, "selection": select_epochs(epochs, sel_metric), "selection_metric": sel_metric,
            "complete": complete}
