"""Training, model selection and run records: one plain loop (docs/paper_notes.md §4, §8).

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
from absa_lib.device import PRECISIONS, autocast, default_device, resolve_precision
from absa_lib.errors import AbsaError
from absa_lib.features import Encoded, batches, by_length, encode, length_grouped, sequential
from absa_lib.runs import (Run, atomic_write_json, collect_env, config_hash, load_run, marked_complete,
                           save_training_curve)

SAMPLERS = ("uniform", "balanced")
SCHEDULES = ("linear", "constant")
# Fields added after the first runs were recorded. At these values they reproduce the earlier
# behaviour, so they are left out of the run identity and earlier runs keep their ids.
NEUTRAL_DEFAULTS = {"group_by_length": False, "schedule": "linear", "head_lr_mult": 1.0,
                    "objective": "single"}
# Parameters outside the pretrained encoder: the classifier, the pooler (MiniLM's was never trained
# for classification) and the context layers of CG/QACG. ``head_lr_mult`` scales their learning rate.
HEAD_PREFIXES = ("classifier", "bert.pooler", "context_embeddings")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v) -> bool:
    return (_is_int(v) or isinstance(v, float)) and math.isfinite(v)


# The fields that are not a choice from a list: (test, what is expected). A subset size of 0 would
# train on nothing, -5 on all but five; a learning rate of inf would fail an epoch later.
FIELD_CHECKS = {
    "backbone": (lambda v: isinstance(v, str) and v != "", "a backbone name or a model folder"),
    "seed": (_is_int, "an integer"),
    **{name: (lambda v: _is_int(v) and v >= 1, "a positive integer")
       for name in ("epochs", "batch_size", "max_length", "eval_batch_size")},
    **{name: (lambda v: v is None or (_is_int(v) and v >= 1), "a positive integer, or unset for all")
       for name in ("max_train_examples", "max_eval_examples")},
    **{name: (lambda v: _is_number(v) and v > 0, "a finite positive number")
       for name in ("lr", "head_lr_mult", "adam_eps", "max_grad_norm")},
    "weight_decay": (lambda v: _is_number(v) and v >= 0, "a finite number >= 0"),
    "warmup": (lambda v: _is_number(v) and 0 <= v < 1, "a fraction in [0, 1)"),
    "group_by_length": (lambda v: isinstance(v, bool), "true or false"),
    "model_overrides": (lambda v: isinstance(v, dict), "a mapping of model fields to values"),
}


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
    schedule: str = "linear"        # after warm-up: linear decay to 0 (paper) | constant
    head_lr_mult: float = 1.0       # lr multiplier for the classifier, pooler and context layers
    weight_decay: float = 0.01
    adam_eps: float = 1e-6          # the official BERTAdam's epsilon
    max_grad_norm: float = 1.0      # global norm (the official code clips per tensor)
    max_length: int = 128
    sampler: str = "uniform"        # uniform shuffling | balanced: the official WeightedRandomSampler
    eval_batch_size: int = 64
    precision: str = "auto"         # auto | fp32 | bf16 (autocast); runs record the resolved value
    group_by_length: bool = False   # batches of similar length (less padding, same examples per epoch)
    max_train_examples: int | None = None   # a seeded (seed 0) subset, the same for every run seed
    max_eval_examples: int | None = None    # the first examples (whole groups) of dev and test
    model_overrides: dict = field(default_factory=dict)
    objective: str = "single"       # single C-way head | joint | joint-dwa (absa_lib.models.joint)

    def __post_init__(self) -> None:
        from absa_lib.models import MODELS, PRESETS
        from absa_lib.models.joint import OBJECTIVES

        checks = [("dataset", self.dataset, D.DATASETS), ("model", self.model, MODELS),
                  ("preset", self.preset, PRESETS), ("aux", self.aux, D.INPUT_VARIANTS),
                  ("sampler", self.sampler, SAMPLERS), ("schedule", self.schedule, SCHEDULES),
                  ("precision", self.precision, PRECISIONS),
                  ("objective", self.objective, OBJECTIVES)]
        for name, value, allowed in checks:
            if value not in allowed:
                raise AbsaError(f"{name}={value!r} is not one of {', '.join(allowed)}")
        for name, (ok, expected) in FIELD_CHECKS.items():
            if not ok(getattr(self, name)):
                raise AbsaError(f"{name} must be {expected}, got {getattr(self, name)!r}")
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


_ENCODED: dict[tuple, tuple[list, list[Encoded]]] = {}     # one tokenization per split per process


def prepare_split(config: TrainConfig, split: str, tokenizer, data_dir=None) -> tuple[list, list[Encoded]]:
    """Examples of a split (subset as configured) and their encoded inputs, tokenized once per
    process (a notebook or grid that trains many runs on the same split reuses them)."""
    subset = config.max_train_examples if split == "train" else config.max_eval_examples
    key = (config.dataset, split, config.aux, subset, config.max_length, tokenizer.name_or_path,
           len(tokenizer), str(data_dir))           # data files are verified against pinned checksums
    if key not in _ENCODED:
        examples = D.load_examples(config.dataset, split, data_dir=data_dir)
        if split == "train":
            examples = _subset_train(examples, config.max_train_examples)
        else:
            examples = _subset_eval(examples, config.dataset, config.max_eval_examples)
        _ENCODED[key] = examples, encode(D.build_inputs(examples, config.aux), tokenizer, config.max_length)
    return _ENCODED[key]


def class_probabilities(config: TrainConfig, probs: np.ndarray) -> np.ndarray:
    """Per-example class probabilities (N, C); B variants pool their per-label yes-scores."""
    if config.aux in ("NLI-B", "QA-B"):
        return D.pool_binary_scores(config.dataset, config.aux, probs[:, 1])
    return probs


# ----------------------------------------------------------------------------------------------
# the loop


def epoch_batches(config: TrainConfig, encoded: list[Encoded], epoch: int) -> list[list[int]]:
    """The epoch's batches (lists of input indices), seeded per (seed, epoch) so that a resumed run
    draws exactly the batches an uninterrupted one would."""
    g = torch.Generator().manual_seed(config.seed * 1000 + epoch)
    if config.sampler == "uniform":
        order = torch.randperm(len(encoded), generator=g).tolist()
    else:
        labels = torch.tensor([e.label for e in encoded])
        counts = torch.bincount(labels).float()
        weights = (len(labels) / counts)[labels]       # official: N / count(label), with replacement
        order = torch.multinomial(weights, len(labels), replacement=True, generator=g).tolist()
    if config.group_by_length:
        return length_grouped(order, [len(e.input_ids) for e in encoded], config.batch_size, g)
    return sequential(order, config.batch_size)


@torch.inference_mode()
def predict_probs(model, encoded: list[Encoded], batch_size: int = 64, pad_id: int = 0,
                  precision: str = "fp32") -> np.ndarray:
    """Softmax probabilities (N, C) in input order (computed in length-sorted batches)."""
    model.eval()
    device = next(model.parameters()).device
    precision = resolve_precision(precision, device)
    out = [None] * len(encoded)
    for idx, batch in batches(encoded, by_length(encoded, batch_size), pad_id):
        batch = {k: v.to(device) for k, v in batch.items() if k != "labels"}
        with autocast(device, precision):
            logits = model(**batch).logits
        for i, row in zip(idx, torch.softmax(logits.float(), dim=-1).cpu().numpy()):
            out[i] = row
    return np.stack(out)


def _optimizer(model, config: TrainConfig, device: torch.device) -> torch.optim.AdamW:
    """AdamW; weight decay except on biases and LayerNorm. Base rates: ``config.lr``, or the model's
    own ``head_lr`` for the new layers of ATAE, MAN and OA; × ``head_lr_mult`` for the head."""
    head_lr = getattr(model, "head_lr", None)
    groups = {}
    for name, p in model.named_parameters():
        if p.requires_grad:
            decay = not (name.endswith("bias") or "LayerNorm" in name or "layer_norm" in name)
            lr = head_lr if head_lr and not name.startswith("bert.") else config.lr
            lr *= config.head_lr_mult if _is_head(name) else 1.0
            group = groups.setdefault((decay, lr), {"params": [], "base_lr": lr,
                                                    "weight_decay": config.weight_decay if decay else 0.0})
            group["params"].append(p)
    try:      # the fused kernel: one pass over all tensors (~5x faster than for-each on a CPU)
        return torch.optim.AdamW(list(groups.values()), lr=config.lr, eps=config.adam_eps, fused=True)
    except (RuntimeError, ValueError):
        return torch.optim.AdamW(list(groups.values()), lr=config.lr, eps=config.adam_eps)


def _is_head(name: str) -> bool:
    """The classifier, pooler and context layers (bert-single: of each of its ``models.<k>.``)."""
    from absa_lib.models.attention import NEW_MODULES

    if name.startswith("models."):
        name = name.split(".", 2)[-1]
    leaf = name.split(".attention.self.")[-1].split(".")[0]
    return name.startswith(HEAD_PREFIXES) or (".attention.self." in name and leaf in NEW_MODULES)


def lr_factor(step: int, total: int, warmup: float, schedule: str = "linear") -> float:
    """Linear warm-up to 1 over ``warmup·total`` steps, then linear decay to 0 at ``total``
    (``linear``, the paper's) or 1 until the end (``constant``)."""
    w = max(1, int(round(warmup * total)))
    if step < w:
        return (step + 1) / w
    return 1.0 if schedule == "constant" else max(0.0, (total - step) / max(1, total - w))


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
    """What the run id hashes: the config (precision resolved; fields at their neutral default left
    out), the data files' checksums, the backbone's fingerprint and the library version."""
    from absa_lib import __version__
    from absa_lib.download import dataset_checksums
    from absa_lib.models.backbones import backbone_fingerprint

    config = resolved(config)
    fields = {k: v for k, v in config.to_dict().items()
              if not (k in NEUTRAL_DEFAULTS and v == NEUTRAL_DEFAULTS[k])}
    return {"config": fields, "data_sha256": dataset_checksums(config.dataset),
            "backbone_fingerprint": backbone_fingerprint(config.backbone), "absa_lib_version": __version__}


# What a run's config.json records besides the TrainConfig fields (see train()).
RECORD_EXTRAS = ("run_id", "data_sha256", "backbone_fingerprint", "absa_lib_version",
                 "n_train_examples", "n_train_inputs", "n_dev_examples", "n_test_examples")


def recorded_identity(record: dict) -> dict:
    """The :func:`run_identity` a run's config.json describes, from what it recorded: its fields, the
    data checksums, the backbone fingerprint and the library version. Nothing is recomputed (neither
    the data nor the backbone's weights are needed), so its hash is the run_id the record must carry.
    A record without a backbone fingerprint was written before the fingerprint and the neutral
    defaults were part of the identity, and is hashed as it was then."""
    fields = {k: v for k, v in record.items() if k not in RECORD_EXTRAS}
    identity = {"config": fields, "data_sha256": record.get("data_sha256")}
    if "backbone_fingerprint" in record:
        identity["config"] = {k: v for k, v in fields.items()
                              if not (k in NEUTRAL_DEFAULTS and v == NEUTRAL_DEFAULTS[k])}
        identity["backbone_fingerprint"] = record["backbone_fingerprint"]
    return {**identity, "absa_lib_version": record.get("absa_lib_version")}


def config_from_record(record, source: Path) -> TrainConfig:
    """The TrainConfig of a run's config.json, after checking that it is one and that its run_id is
    the hash of what it records (an edited ``dataset``, ``aux`` or ``model`` would otherwise make
    ``absa predict`` answer confidently with the wrong labels).

    Raises:
        AbsaError: naming ``source``: not a JSON object, a missing or wrong-typed field, or a run_id
            that does not match.
    """
    fix = "restore the file, or train the run again with `absa train ... --force`"
    if not isinstance(record, dict) or not {"run_id", "dataset", "model", "aux", "backbone"} <= set(record):
        got = type(record).__name__ if not isinstance(record, dict) else f"keys {sorted(record)}"
        raise AbsaError(f"{source}: expected a run record (a JSON object with run_id, dataset, model, aux, "
                        f"backbone and the other training fields), got {got}; {fix}")
    try:
        config = TrainConfig(**{k: v for k, v in record.items() if k in TrainConfig.__dataclass_fields__})
    except AbsaError as err:
        raise AbsaError(f"{source}: {err}; {fix}") from None
    digest = config_hash(recorded_identity(record))
    if record["run_id"] != digest:
        raise AbsaError(f"{source}: run_id {record['run_id']!r} is not the hash of the recorded configuration "
                        f"({digest}): the file was edited or damaged; {fix}")
    return config


def resolved(config: TrainConfig) -> TrainConfig:
    """``config`` with ``precision`` resolved for this machine (``auto`` -> ``bf16`` or ``fp32``) and
    a local backbone folder as an absolute path (a run does not depend on the working directory)."""
    from absa_lib.models.backbones import BACKBONES

    backbone = config.backbone if config.backbone in BACKBONES else str(Path(config.backbone).expanduser().resolve())
    return dataclasses.replace(config, backbone=backbone,
                               precision=resolve_precision(config.precision, default_device()))


def run_path(config: TrainConfig, runs_dir=None) -> Path:
    """The folder of the run ``config`` describes: ``<runs_dir>/<dataset>/<model>/<run_id>``."""
    from absa_lib.paths import default_runs_dir

    run_id = config_hash(run_identity(config))
    return Path(runs_dir or default_runs_dir()) / config.dataset / config.model / run_id


def is_finished(config: TrainConfig, runs_dir=None) -> bool:
    """Whether a finished run with this configuration is in ``runs_dir`` (a cache hit)."""
    try:
        return marked_complete(run_path(config, runs_dir) / "metrics.json")
    except AbsaError:
        return False


def train(config: TrainConfig, runs_dir=None, data_dir=None, force: bool = False,
          progress: bool = True) -> Run:
    """Train (or fetch from cache, or resume) the run described by ``config``.

    Returns the :class:`Run`; ``run.cached`` is True when an identical finished run was found.
    """
    from absa_lib.models import build_model, joint, load_tokenizer
    from absa_lib.models.per_context import build_per_context
    from absa_lib.predictions import write_predictions

    config = resolved(config)
    identity = run_identity(config)
    run_id = config_hash(identity)
    path = run_path(config, runs_dir)
    if not force and marked_complete(path / "metrics.json"):
        return load_run(path)
    tokenizer = load_tokenizer(config.backbone)
    check_max_length(config, tokenizer)
    _fresh_run_folder(path, force)            # before the work: a read-only --out fails now, not later

    torch.manual_seed(config.seed)
    np.random.seed(config.seed)
    device = default_device()
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
    steps_per_epoch = len(epoch_batches(config, train_enc, 1))
    total_steps = steps_per_epoch * config.epochs
    record = {**config.to_dict(), "run_id": run_id, **{k: v for k, v in identity.items() if k != "config"},
              "n_train_examples": len(train_ex), "n_train_inputs": len(train_enc),
              "n_dev_examples": len(splits["dev"][0]), "n_test_examples": len(splits["test"][0])}
    atomic_write_json(path / "config.json", record)
    atomic_write_json(path / "env.json", collect_env())

    state = _resume(path / "checkpoints" / "last", model, optimizer)
    if state is not None:                                   # resume after an interruption
        print(f"[absa] resuming {path} after epoch {state['epoch']}", file=sys.stderr)
    else:
        state = {"epoch": 0, "step": 0, "epochs": [], "best": {}}
    for epoch in range(state["epoch"] + 1, config.epochs + 1):
        model.train()
        t0, losses = time.time(), []
        bar = _Progress(progress, steps_per_epoch, f"epoch {epoch}/{config.epochs}")
        for _, batch in batches(train_enc, epoch_batches(config, train_enc, epoch), pad_id):
            factor = lr_factor(state["step"], total_steps, config.warmup, config.schedule)
            for group in optimizer.param_groups:
                group["lr"] = group["base_lr"] * factor
            batch = {k: v.to(device) for k, v in batch.items()}
            with autocast(device, config.precision):
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
        t0, probs = time.time(), {}
        for split, (examples, enc) in splits.items():
            probs[split] = class_probabilities(
                config, predict_probs(model, enc, config.eval_batch_size, pad_id, config.precision))
            gold = np.array([e.label_id for e in examples])
            row[split] = compute_metrics(config.dataset, gold, probs[split])
        row["eval_seconds"] = time.time() - t0
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


def check_max_length(config: TrainConfig, tokenizer) -> None:
    """``max_length`` must hold the special tokens, the longest auxiliary sentence of the input variant
    and one word of the sentence (below that nothing can be truncated as it should), and at most the
    backbone's ``max_position_embeddings``."""
    from absa_lib.models.backbones import backbone_config

    ds, aux = config.dataset, config.aux
    targets = D.TARGETS if ds == "sentihood" else (None,)
    labels = D.LABELS[ds] if aux in D.B_VARIANTS else (None,)
    longest = 0 if aux in ("none", "single") else max(
        len(tokenizer.tokenize(D.auxiliary_sentence(ds, aux, t, a, lab)))
        for t in targets for a in D.ASPECTS[ds] for lab in labels)
    low = (3 if longest else 2) + longest + 1
    high = backbone_config(config.backbone).max_position_embeddings
    if not low <= config.max_length <= high:
        raise AbsaError(f"max_length={config.max_length} is out of range: expected {low} to {high} tokens "
                        f"(aux {aux} needs {low - 1} for the special tokens and its longest auxiliary sentence "
                        f"plus one word; backbone {config.backbone} has {high} positions)")


def _fresh_run_folder(path: Path, force: bool) -> None:
    """Create the run folder (emptied first with ``force``) and check that files can be written in it."""
    import shutil

    from absa_lib.paths import ensure_writable

    fix = "choose a writable folder with --out (or $ABSA_RUNS_DIR)"
    if force and path.exists():
        try:
            shutil.rmtree(path)
        except OSError as err:
            raise AbsaError(f"--force cannot delete {err.filename} ({err.strerror}); {fix}") from None
    ensure_writable(path, fix)


def _resume(last: Path, model, optimizer) -> dict | None:
    """Restore the model, optimizer and RNG state saved after the last completed epoch; return the
    trainer state, or None when there is nothing to resume."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    from absa_lib.checkpoint import verify_checksums
    from absa_lib.errors import one_line

    fix = "the resume state is corrupt: rerun with --force to train this run from the start"
    verify_checksums(last, fix)
    try:
        state = load_trainer_state(last, optimizer)
        if state is not None:
            model.load_state_dict(load_file(last / "model.safetensors"), strict=True)
    except (OSError, SafetensorError, ValueError, KeyError, TypeError, RuntimeError) as err:
        raise AbsaError(f"{last}: cannot resume ({one_line(err)}); {fix}") from None
    return state


def _metrics_record(epochs: list[dict], sel_metric: str, complete: bool) -> dict:
    """Per-epoch rows plus the three selections; ties go to the earlier epoch."""
    def pick(split: str) -> dict:
        best = max(epochs, key=lambda r: (r[split][sel_metric], -r["epoch"]))
        return {"epoch": best["epoch"], "dev": best["dev"], "test": best["test"]}

    selection = {"dev_best": pick("dev"), "test_best": pick("test"),
                 "last": {"epoch": epochs[-1]["epoch"], "dev": epochs[-1]["dev"], "test": epochs[-1]["test"]}}
    return {"epochs": epochs, "selection": selection, "selection_metric": sel_metric, "complete": complete}
