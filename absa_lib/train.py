"""Training, model selection and run records: one plain loop (PAPER_SPEC §4, §8).

Defaults are the paper's (§4.2 of the paper): AdamW, lr 2e-5, batch 24, 25 epochs, dropout 0.1,
linear warm-up over the first 10% of steps then linear decay to 0, weight decay 0.01 except biases
and LayerNorm, max length 128, global gradient-norm clipping at 1.0. Differences from the official
BERTAdam (per-tensor clipping, no bias correction, the 1.0→0.9 jump after warm-up) are deliberate:
this is the standard optimizer the paper's text describes.

Model selection: after every epoch the model is evaluated on dev *and* test. The dev-best epoch
(SentiHood: aspect strict accuracy; SemEval: aspect F1) is the default protocol. The test-best
epoch, which is what the official code reports (it selects on the test set), is recorded beside it
and always labelled as such.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
import torch

from absa_lib import data as D
from absa_lib.checkpoint import load_trainer_state, save_checkpoint
from absa_lib.errors import AbsaError
from absa_lib.features import Encoded, collate, encode
from absa_lib.runs import (Run, atomic_write_json, collect_env, config_hash, load_run, read_json,
                           save_training_curve)

SAMPLERS = ("uniform", "balanced")
# Fields left out of the run identity while they hold these values, so that adding a field keeps
# the ids (and cache hits) of every run made before it existed.
NEUTRAL_DEFAULTS = {"objective": "single"}


@dataclass(frozen=True)
class TrainConfig:
    """Everything that determines a run's result (the run id is a hash of these fields)."""

    dataset: str = "sentihood"
    model: str = "qacg-bert"
    preset: str = "paper"           # paper | official (ignored by bert-single / bert-pair)
    aux: str = "NLI-M"              # input variant: none | NLI-M | QA-M | NLI-B | QA-B | single
    backbone: str = "minilm"
    seed: int = 42
    epochs: int = 25
    batch_size: int = 24
    lr: float = 2e-5
    warmup: float = 0.1             # fraction of steps with linear warm-up
    weight_decay: float = 0.01
    adam_eps: float = 1e-6          # the official BERTAdam's epsilon
    max_grad_norm: float = 1.0      # global norm (the official code clips per tensor)
    max_length: int = 128
    sampler: str = "uniform"        # uniform shuffling | balanced: the official WeightedRandomSampler
    eval_batch_size: int = 64
    max_train_examples: int | None = None   # a seeded (seed 0) subset, the same for every run seed
    max_eval_examples: int | None = None    # the first examples (whole groups) of dev and test
    model_overrides: dict = field(default_factory=dict)
    objective: str = "single"       # single C-way head | joint | joint-dwa (absa_lib.models.joint)

    def __post_init__(self) -> None:
        from absa_lib.models import MODELS, PRESETS
        from absa_lib.models.joint import OBJECTIVES

        checks = [("dataset", self.dataset, D.DATASETS), ("model", self.model, MODELS),
                  ("preset", self.preset, PRESETS), ("aux", self.aux, D.INPUT_VARIANTS),
                  ("sampler", self.sampler, SAMPLERS), ("objective", self.objective, OBJECTIVES)]
        for name, value, allowed in checks:
            if value not in allowed:
                raise AbsaError(f"{name}={value!r} is not one of {', '.join(allowed)}")
        for name in ("epochs", "batch_size", "max_length", "eval_batch_size"):
            if getattr(self, name) < 1:
                raise AbsaError(f"{name} must be a positive integer, got {getattr(self, name)}")
        if not self.lr > 0:
            raise AbsaError(f"lr must be positive, got {self.lr}")
        if self.model == "bert-single" and self.aux not in ("none", "single"):
            raise AbsaError("bert-single reads the sentence only: use aux='single'")
        if self.model == "bert-pair" and self.aux in ("none", "single"):
            raise AbsaError("bert-pair needs an auxiliary sentence: aux in NLI-M, QA-M, NLI-B, QA-B")
        if self.objective != "single" and (self.model == "bert-single" or self.aux in D.B_VARIANTS):
            raise AbsaError(f"objective={self.objective!r} needs one model reading C-way labels: not "
                            "bert-single, and aux none, single, NLI-M or QA-M")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# ----------------------------------------------------------------------------------------------
# data


def _subset_train(examples: list, k: int | None) -> list:
    if k is None or k >= len(examples):
        return examples
    order = torch.randperm(len(examples), generator=torch.Generator().manual_seed(0)).tolist()
    return [examples[i] for i in sorted(order[:k])]


def _subset_eval(examples: list, dataset: str, k: int | None) -> list:
    if k is None:
        return examples
    g = D.group_size(dataset)
    return examples[: max(1, k // g) * g]          # whole groups: the metrics need them


def prepare_split(config: TrainConfig, split: str, tokenizer, data_dir=None) -> tuple[list, list[Encoded]]:
    """Examples of a split (subset as configured) and their encoded inputs."""
    examples = D.load_examples(config.dataset, split, data_dir=data_dir)
    if split == "train":
        examples = _subset_train(examples, config.max_train_examples)
    else:
        examples = _subset_eval(examples, config.dataset, config.max_eval_examples)
    return examples, encode(D.build_inputs(examples, config.aux), tokenizer, config.max_length)


def class_probabilities(config: TrainConfig, probs: np.ndarray) -> np.ndarray:
    """Per-example class probabilities (N, C); B variants pool their per-label yes-scores."""
    if config.aux in ("NLI-B", "QA-B"):
        return D.pool_binary_scores(config.dataset, config.aux, probs[:, 1])
    return probs


# ----------------------------------------------------------------------------------------------
# the loop


def _device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _batches(encoded: list[Encoded], batch_size: int, order: list[int], pad_id: int):
    for start in range(0, len(order), batch_size):
        yield collate([encoded[i] for i in order[start:start + batch_size]], pad_id)


def _epoch_order(config: TrainConfig, encoded: list[Encoded], epoch: int) -> list[int]:
    """Seeded per (seed, epoch), so a resumed run draws exactly the batches an uninterrupted one would."""
    g = torch.Generator().manual_seed(config.seed * 1000 + epoch)
    if config.sampler == "uniform":
        return torch.randperm(len(encoded), generator=g).tolist()
    labels = torch.tensor([e.label for e in encoded])
    counts = torch.bincount(labels).float()
    weights = (len(labels) / counts)[labels]       # official: N / count(label), with replacement
    return torch.multinomial(weights, len(labels), replacement=True, generator=g).tolist()


@torch.inference_mode()
def predict_probs(model, encoded: list[Encoded], batch_size: int = 64, pad_id: int = 0) -> np.ndarray:
    """Softmax probabilities (N, C) in input order."""
    model.eval()
    device = next(model.parameters()).device
    out = []
    for batch in _batches(encoded, batch_size, list(range(len(encoded))), pad_id):
        batch = {k: v.to(device) for k, v in batch.items() if k != "labels"}
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            logits = model(**batch).logits
        out.append(torch.softmax(logits.float(), dim=-1).cpu().numpy())
    return np.concatenate(out)


def _optimizer(model, config: TrainConfig, device: torch.device) -> torch.optim.AdamW:
    head_lr = getattr(model, "head_lr", None)      # ATAE, MAN, OA: their new layers' own rate (base_lr)
    groups = {}
    for name, p in model.named_parameters():
        if p.requires_grad:
            decay = not (name.endswith("bias") or "LayerNorm" in name or "layer_norm" in name)
            lr = head_lr if head_lr and not name.startswith("bert.") else config.lr
            groups.setdefault((decay, lr), []).append(p)
    groups = [{"params": ps, "weight_decay": config.weight_decay if decay else 0.0, "lr": lr, "base_lr": lr}
              for (decay, lr), ps in sorted(groups.items(), key=lambda kv: (not kv[0][0], kv[0][1] != config.lr))]
    return torch.optim.AdamW(groups, lr=config.lr, eps=config.adam_eps, fused=device.type == "cuda")


def lr_factor(step: int, total: int, warmup: float) -> float:
    """Linear warm-up to 1 over ``warmup·total`` steps, then linear decay to 0 at ``total``."""
    w = max(1, int(round(warmup * total)))
    return (step + 1) / w if step < w else max(0.0, (total - step) / max(1, total - w))


class _Progress:
    """tqdm on a terminal; plain log lines (about ten per epoch) otherwise."""

    def __init__(self, enabled: bool, total: int, desc: str):
        self.tty, self.total, self.desc, self.n = enabled and sys.stderr.isatty(), total, desc, 0
        self.enabled = enabled
        if self.tty:
            from tqdm.auto import tqdm
            self.bar = tqdm(total=total, desc=desc, leave=False)

    def update(self, loss: float) -> None:
        self.n += 1
        if self.tty:
            self.bar.update(1)
            self.bar.set_postfix(loss=f"{loss:.4f}")
        elif self.enabled and (self.n % max(1, self.total // 10) == 0 or self.n == self.total):
            print(f"[absa] {self.desc} batch {self.n}/{self.total} loss {loss:.4f}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.tty:
            self.bar.close()


def run_identity(config: TrainConfig) -> dict:
    """What the run id hashes: the config, the data files' checksums and the library version."""
    from absa_lib import __version__
    from absa_lib.download import dataset_checksums

    config = {k: v for k, v in config.to_dict().items() if not (k in NEUTRAL_DEFAULTS and v == NEUTRAL_DEFAULTS[k])}
    return {"config": config, "data_sha256": dataset_checksums(config["dataset"]),
            "absa_lib_version": __version__}


def train(config: TrainConfig, runs_dir=None, data_dir=None, force: bool = False,
          progress: bool = True) -> Run:
    """Train (or fetch from cache, or resume) the run described by ``config``.

    Returns the :class:`Run`; ``run.cached`` is True when an identical finished run was found.
    """
    from absa_lib.models import build_model, joint, load_tokenizer
    from absa_lib.models.per_context import build_per_context
    from absa_lib.paths import default_runs_dir
    from absa_lib.predictions import write_predictions

    identity = run_identity(config)
    run_id = config_hash(identity)
    path = Path(runs_dir or default_runs_dir()) / config.dataset / config.model / run_id
    if (path / "metrics.json").is_file() and not force:
        metrics = read_json(path / "metrics.json")
        if metrics.get("complete"):
            return load_run(path)
    if force and path.exists():
        import shutil
        shutil.rmtree(path)

    torch.manual_seed(config.seed)
    np.random.seed(config.seed)
    device = _device()
    tokenizer = load_tokenizer(config.backbone)
    pad_id = tokenizer.pad_token_id or 0
    train_ex, train_enc = prepare_split(config, "train", tokenizer, data_dir)
    splits = {s: prepare_split(config, s, tokenizer, data_dir) for s in ("dev", "test")}
    build = build_per_context if config.model == "bert-single" else partial(build_model, config.model)
    model = build(backbone=config.backbone, preset=config.preset,
                  num_labels=D.variant_num_labels(config.dataset, config.aux),
                  num_contexts=D.num_contexts(config.dataset), **joint.build_kwargs(config),
                  **config.model_overrides).to(device)
    optimizer = _optimizer(model, config, device)

    from absa_lib.metrics import SELECTION_METRIC, compute_metrics

    sel_metric = SELECTION_METRIC[config.dataset]
    steps_per_epoch = math.ceil(len(train_enc) / config.batch_size)
    total_steps = steps_per_epoch * config.epochs
    record = {**config.to_dict(), "run_id": run_id, **{k: v for k, v in identity.items() if k != "config"},
              "n_train_examples": len(train_ex), "n_train_inputs": len(train_enc),
              "n_dev_examples": len(splits["dev"][0]), "n_test_examples": len(splits["test"][0])}
    atomic_write_json(path / "config.json", record)
    atomic_write_json(path / "env.json", collect_env())

    state = load_trainer_state(path / "checkpoints" / "last", optimizer)
    if state is not None:                                   # resume after an interruption
        from safetensors.torch import load_file
        model.load_state_dict(load_file(path / "checkpoints" / "last" / "model.safetensors"), strict=True)
        print(f"[absa] resuming {path} after epoch {state['epoch']}", file=sys.stderr)
    else:
        state = {"epoch": 0, "step": 0, "epochs": [], "best": {}}
    for epoch in range(state["epoch"] + 1, config.epochs + 1):
        model.train()
        t0, losses = time.time(), []
        bar = _Progress(progress, steps_per_epoch, f"epoch {epoch}/{config.epochs}")
        for batch in _batches(train_enc, config.batch_size, _epoch_order(config, train_enc, epoch), pad_id):
            for group in optimizer.param_groups:
                group["lr"] = group.get("base_lr", config.lr) * lr_factor(state["step"], total_steps, config.warmup)
            batch = {k: v.to(device) for k, v in batch.items()}
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
                loss = model(**batch).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            state["step"] += 1
            losses.append(loss.item())
            bar.update(losses[-1])
        bar.close()
        row = {"epoch": epoch, "train_loss": float(np.mean(losses)), "seconds": time.time() - t0}
        probs = {}
        for split, (examples, enc) in splits.items():
            probs[split] = class_probabilities(config, predict_probs(model, enc, config.eval_batch_size, pad_id))
            gold = np.array([e.label_id for e in examples])
            row[split] = compute_metrics(config.dataset, gold, probs[split])
        row.update(joint.end_of_epoch(model, config, splits["dev"][0], probs["dev"]))   # task weights
        state["epochs"].append(row)
        if not state["best"] or row["dev"][sel_metric] > state["best"]["dev"][sel_metric]:
            state["best"] = row
            save_checkpoint(path / "checkpoints" / "best", model)
            for split, (examples, _) in splits.items():
                write_predictions(path / f"predictions_{split}.csv", examples, probs[split])
        state["epoch"] = epoch
        save_checkpoint(path / "checkpoints" / "last", model, optimizer, state)
        atomic_write_json(path / "metrics.json", _metrics_record(state["epochs"], sel_metric, complete=False))
        if progress:
            print(f"[absa] epoch {epoch}/{config.epochs} loss {row['train_loss']:.4f} "
                  f"dev {sel_metric} {row['dev'][sel_metric]:.4f} test {row['test'][sel_metric]:.4f} "
                  f"({row['seconds']:.0f}s)", file=sys.stderr, flush=True)
    metrics = _metrics_record(state["epochs"], sel_metric, complete=True)
    save_training_curve(path / "curve.png", metrics)
    atomic_write_json(path / "metrics.json", metrics)
    run = load_run(path)
    run.cached = False
    return run


def _metrics_record(epochs: list[dict], sel_metric: str, complete: bool) -> dict:
    """Per-epoch rows plus the three selections; ties go to the earlier epoch."""
    def pick(split: str) -> dict:
        best = max(epochs, key=lambda r: (r[split][sel_metric], -r["epoch"]))
        return {"epoch": best["epoch"], "dev": best["dev"], "test": best["test"]}

    selection = {"dev_best": pick("dev"), "test_best": pick("test"),
                 "last": {"epoch": epochs[-1]["epoch"], "dev": epochs[-1]["dev"], "test": epochs[-1]["test"]}}
    return {"epochs": epochs, "selection": selection, "selection_metric": sel_metric, "complete": complete}
