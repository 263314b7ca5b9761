"""What determines a run: :class:`TrainConfig`, its validation, and the run's identity.

A run is identified by a hash of its configuration (precision resolved for the machine, a local
backbone as an absolute path), the data files' checksums, the backbone's fingerprint and the
library version (:func:`run_identity`). Fields added after the first runs were recorded are left
out of the hash while they hold the value that reproduces the earlier behaviour
(:data:`NEUTRAL_DEFAULTS`), so earlier runs keep their ids. A run's ``config.json`` records all of
it; :func:`config_from_record` rebuilds the config and refuses a record whose ``run_id`` is not the
hash of what it records (an edited file).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path

from absa_lib import __version__
from absa_lib import data as D
from absa_lib.device import COMPILE_MODES, PRECISIONS, default_device, resolve_precision
from absa_lib.download import dataset_checksums, file_sha256
from absa_lib.errors import AbsaError
from absa_lib.inputs import B_VARIANTS, INPUT_VARIANTS, SENTENCE_ONLY, auxiliary_sentence
from absa_lib.models import MODELS, PRESETS
from absa_lib.models.backbones import BACKBONES, backbone_config, backbone_dir, backbone_fingerprint
from absa_lib.models.joint import OBJECTIVES
from absa_lib.paths import default_runs_dir
from absa_lib.runs import config_hash

SAMPLERS = ("uniform", "balanced", "per-context")
SCHEDULES = ("linear", "constant")
# Fields added after the first runs were recorded. At these values they reproduce the earlier
# behaviour, so they are left out of the run identity and earlier runs keep their ids.
NEUTRAL_DEFAULTS = {"group_by_length": False, "schedule": "linear", "head_lr_mult": 1.0,
                    "objective": "single", "compile": "none"}


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v) -> bool:
    return (_is_int(v) or isinstance(v, float)) and math.isfinite(v)


# The fields that are not a choice from a list: (test, what is expected). A subset size of 0 would
# train on nothing, -5 on all but five; a learning rate of inf would fail an epoch later.
FIELD_CHECKS = {
    "backbone": (lambda v: isinstance(v, str) and v != "", "a backbone name or a model folder"),
    "seed": (lambda v: _is_int(v) and 0 <= v < 2**32, "an integer from 0 to 2**32 - 1 (numpy's seed range)"),
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
    sampler: str = "uniform"        # uniform shuffling | balanced: the official WeightedRandomSampler |
                                    # per-context: each batch from one context (bert-single, Sun et al.)
    eval_batch_size: int = 64
    precision: str = "auto"         # auto | fp32 | bf16 (autocast); runs record the resolved value
    group_by_length: bool = False   # batches of similar length (less padding, same examples per epoch)
    max_train_examples: int | None = None   # a seeded (seed 0) subset, the same for every run seed
    max_eval_examples: int | None = None    # the first examples (whole groups) of dev and test
    model_overrides: dict = field(default_factory=dict)
    objective: str = "single"       # single C-way head | joint | joint-dwa (absa_lib.models.joint)
    compile: str = "none"           # none | default | reduce-overhead: torch.compile the training step

    def __post_init__(self) -> None:
        if not D.known(self.dataset):
            raise AbsaError(f"dataset={self.dataset!r} is not one of {', '.join(D.DATASETS)}, nor a dataset "
                            "of your own registered in this process (absa train --dataset FOLDER, or "
                            "absa_lib.register_dataset(FOLDER); see docs/own_data.md)")
        checks = [("model", self.model, MODELS),
                  ("preset", self.preset, PRESETS), ("aux", self.aux, INPUT_VARIANTS),
                  ("sampler", self.sampler, SAMPLERS), ("schedule", self.schedule, SCHEDULES),
                  ("precision", self.precision, PRECISIONS), ("compile", self.compile, COMPILE_MODES),
                  ("objective", self.objective, OBJECTIVES)]
        for name, value, allowed in checks:
            if value not in allowed:
                raise AbsaError(f"{name}={value!r} is not one of {', '.join(allowed)}")
        for name, (ok, expected) in FIELD_CHECKS.items():
            if not ok(getattr(self, name)):
                raise AbsaError(f"{name} must be {expected}, got {getattr(self, name)!r}")
        if self.model == "bert-single" and self.aux not in SENTENCE_ONLY:
            raise AbsaError("bert-single reads the sentence only: use aux='single'")
        if self.sampler == "per-context" and self.model != "bert-single":
            raise AbsaError(f"sampler='per-context' batches each context apart for bert-single's per-context "
                            f"classifiers; {self.model} has one model for every context: use uniform or balanced")
        if self.model == "bert-pair" and self.aux in SENTENCE_ONLY:
            raise AbsaError("bert-pair needs an auxiliary sentence: aux in NLI-M, QA-M, NLI-B, QA-B")
        if self.objective != "single" and (self.model == "bert-single" or self.aux in B_VARIANTS):
            raise AbsaError(f"objective={self.objective!r} needs one model reading C-way labels: not "
                            "bert-single, and aux none, single, NLI-M or QA-M")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def run_identity(config: TrainConfig) -> dict:
    """What the run id hashes: the config (precision resolved; fields at their neutral default left
    out), the data files' checksums (for your own data also its scheme), the backbone's fingerprint,
    the library version and, for an ATAE-LSTM on GloVe vectors, the vector file's SHA-256."""
    config = resolved(config)
    fields = {k: v for k, v in config.to_dict().items()
              if not (k in NEUTRAL_DEFAULTS and v == NEUTRAL_DEFAULTS[k])}
    identity = {"config": fields, "data_sha256": data_checksums(config.dataset),
                "backbone_fingerprint": backbone_fingerprint(config.backbone), "absa_lib_version": __version__}
    if config.dataset in D.OWN:                    # your own data: its scheme travels with the run
        identity["dataset_scheme"] = D.OWN[config.dataset].scheme.to_dict()
    vectors = config.model_overrides.get("alstm_vectors")
    if vectors:                        # a GloVe file: its contents, not only its name (absent otherwise)
        path = Path(vectors).expanduser()
        if not path.is_file():
            raise AbsaError(f"alstm_vectors={vectors}: no such file; expected a GloVe text file")
        identity["vectors_sha256"] = file_sha256(path)
    return identity


def data_checksums(dataset: str) -> dict[str, str]:
    """The pinned checksums of a benchmark's files, or those of your own dataset's folder."""
    if dataset not in D.OWN:
        return dataset_checksums(dataset)
    if D.OWN[dataset].folder is None:
        raise AbsaError(f"dataset {dataset!r} is known from a run record only; register its folder to train "
                        "(absa train --dataset FOLDER, or absa_lib.own_data.register_dataset(FOLDER))")
    D.OWN[dataset].check_files()          # the run cache is keyed on these: never on stale ones
    return D.OWN[dataset].checksums()


# What a run's config.json records besides the TrainConfig fields (see train()).
RECORD_EXTRAS = ("run_id", "data_sha256", "dataset_scheme", "backbone_fingerprint", "absa_lib_version",
                 "vectors_sha256", "n_train_examples", "n_train_inputs", "n_dev_examples", "n_test_examples")


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
    for extra in ("dataset_scheme", "vectors_sha256"):
        if extra in record:
            identity[extra] = record[extra]
    return {**identity, "absa_lib_version": record.get("absa_lib_version")}


class _NameTaken(Exception):
    """A run record's own-data scheme clashes with another dataset of that name in this process."""


def config_from_record(record, source: Path) -> TrainConfig:
    """The TrainConfig of a run's config.json, after checking that it is one and that its run_id is
    the hash of what it records (an edited ``dataset``, ``aux`` or ``model`` would otherwise make
    ``absa predict`` answer confidently with the wrong labels).

    Raises:
        AbsaError: naming ``source``: not a JSON object, a missing or wrong-typed field, or a run_id
            that does not match.
    """
    fix = "restore the file, or train the run again with `absa train ... --force`"
    needed = ("run_id", "dataset", "model", "aux", "backbone")
    if not isinstance(record, dict) or not set(needed) <= set(record):
        if isinstance(record, dict) and "absa_model" in record:     # a checkpoint's config.json
            raise AbsaError(f"{source}: a checkpoint's config, not a run record; give the run folder (the one "
                            "holding checkpoints/), as `absa train` printed it")
        got = type(record).__name__ if not isinstance(record, dict) else \
            f"no {', '.join(k for k in needed if k not in record)}"
        raise AbsaError(f"{source}: expected a run record (a JSON object with run_id, dataset, model, aux, "
                        f"backbone and the other training fields), got {got}; {fix}")
    try:
        if "dataset_scheme" in record:              # your own data: the run knows its labels and aspects
            from absa_lib.own_data import register_scheme, scheme_from_dict

            scheme = scheme_from_dict(record["dataset_scheme"], "field dataset_scheme")
            if scheme.name != record["dataset"]:
                raise AbsaError(f"dataset_scheme names {scheme.name!r}, the run's dataset is "
                                f"{record['dataset']!r}")
            try:
                register_scheme(scheme)
            except AbsaError as err:                    # the record is fine: another dataset took the name
                raise _NameTaken(str(err)) from None
        config = TrainConfig(**{k: v for k, v in record.items() if k in TrainConfig.__dataclass_fields__})
    except AbsaError as err:
        raise AbsaError(f"{source}: {err}; {fix}") from None
    except _NameTaken as err:
        raise AbsaError(f"{source}: {err}; runs of two datasets of one name cannot be read together: "
                        "summarise or load them apart, or give one dataset another name") from None
    digest = config_hash(recorded_identity(record))
    if record["run_id"] != digest:
        raise AbsaError(f"{source}: run_id {record['run_id']!r} is not the hash of the recorded configuration "
                        f"({digest}): the file was edited or damaged; {fix}")
    return config


def resolved(config: TrainConfig) -> TrainConfig:
    """``config`` with ``precision`` resolved for this machine (``auto`` -> ``bf16`` or ``fp32``) and
    a local backbone folder as an absolute path (a run does not depend on the working directory)."""

    if config.backbone not in BACKBONES:
        backbone_dir(config.backbone)          # a misspelt name is refused as typed, not as an absolute path
    backbone = config.backbone if config.backbone in BACKBONES else str(Path(config.backbone).expanduser().resolve())
    return dataclasses.replace(config, backbone=backbone,
                               precision=resolve_precision(config.precision, default_device()))


def run_path(config: TrainConfig, runs_dir=None) -> Path:
    """The folder of the run ``config`` describes: ``<runs_dir>/<dataset>/<model>/<run_id>``."""

    run_id = config_hash(run_identity(config))
    return Path(runs_dir or default_runs_dir()) / config.dataset / config.model / run_id



def check_max_length(config: TrainConfig, tokenizer) -> None:
    """``max_length`` must hold the special tokens, the longest auxiliary sentence of the input variant
    and one word of the sentence (below that nothing can be truncated as it should), and at most the
    backbone's ``max_position_embeddings``."""

    ds, aux = config.dataset, config.aux
    targets = D.targets_of(ds)
    labels = D.LABELS[ds] if aux in B_VARIANTS else (None,)
    longest = 0 if aux in SENTENCE_ONLY else max(
        len(tokenizer.tokenize(auxiliary_sentence(ds, aux, t, a, lab)))
        for t in targets for a in D.ASPECTS[ds] for lab in labels)
    low = (3 if longest else 2) + longest + 1
    high = backbone_config(config.backbone).max_position_embeddings
    if not low <= config.max_length <= high:
        raise AbsaError(f"max_length={config.max_length} is out of range: expected {low} to {high} tokens "
                        f"(aux {aux} needs {low - 1} for the special tokens and its longest auxiliary sentence "
                        f"plus one word; backbone {config.backbone} has {high} positions)")
