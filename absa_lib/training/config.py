"""What determines a run: :class:`TrainConfig`, its validation, and the run's identity.

A run is identified by a hash of its configuration (precision resolved for the machine, a local
backbone as an absolute path), the data files' checksums, the backbone's fingerprint and the
library version (:func:`run_identity`). Fields added after the first runs were recorded are left
out of the hash while they hold the value that reproduces the earlier behaviour
(:data:`NEUTRAL_DEFAULTS`), so earlier runs keep their ids. A run's config record holds all of it
(:class:`absa_lib.training.records.RunConfig` rebuilds the config and refuses a record whose
``run_id`` is not the hash of what it records).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from absa_lib._version import __version__
from absa_lib.checks import is_int, is_number
from absa_lib.data import datasets as D
from absa_lib.data.inputs import B_VARIANTS, INPUT_VARIANTS, SENTENCE_ONLY, auxiliary_sentence
from absa_lib.device import COMPILE_MODES, PRECISIONS, default_device, resolve_precision
from absa_lib.errors import AbsaError
from absa_lib.fileio import file_sha256, read_json
from absa_lib.models.backbones import BACKBONES, backbone_config, backbone_dir, backbone_fingerprint
from absa_lib.models.registry import MODELS, OBJECTIVES, PRESETS, checked_overrides, names_with, traits
from absa_lib.paths import default_runs_dir

# Fields added after the first runs were recorded. At these values they reproduce the earlier
# behaviour, so they are left out of the run identity and earlier runs keep their ids.
NEUTRAL_DEFAULTS = {"group_by_length": False, "schedule": "linear", "head_lr_mult": 1.0,
                    "objective": "single", "compile": "none"}


def _field(default, help: str, *, choices=None, check=None, expected: str = "", role: str = "option",
           cli: dict | None = None, shown: tuple | None = None):
    """One training field, declared once: its default, what it means (``absa train --help`` shows
    it), what it accepts (``choices``, or ``check`` with the ``expected`` it names when refusing) and
    its ``role`` in a grid: ``grid`` (what a grid row sets: model, input variant, seed, ...),
    ``budget`` (a notebook parameter of its own) or ``option`` (a profile's ``train_options``).
    Every field but the ``grid`` ones tells budgets apart (tables, ``absa compare``).
    ``cli``: how ``absa train`` takes it, where not as ``--name VALUE`` of the default's type.
    ``shown``: ``(rank, text)``, where a table's budget footnote names it and how (``text(value)``,
    None to leave it out); :func:`budget_parts`."""
    meta = {"help": help, "choices": choices, "check": check, "expected": expected, "role": role, "cli": cli or {},
            "shown": shown}
    if isinstance(default, dict):
        return field(default_factory=dict, metadata=meta)
    return field(default=default, metadata=meta)


def _positive(v) -> bool:
    return is_int(v) and v >= 1


def _positive_or_all(v) -> bool:
    return v is None or _positive(v)


def _positive_number(v) -> bool:
    return is_number(v) and v > 0


def epochs_text(n) -> str:
    """``1 epoch``, ``25 epochs``."""
    return f"{n} epoch{'' if n == 1 else 's'}"


def _all_or(n) -> str:
    return "all" if n is None else f"{int(n):,}"


# A subset size of 0 would train on nothing, -5 on all but five; a learning rate of inf would fail an
# epoch later: every field is checked when a TrainConfig is made.
POSITIVE, ALL_OR_POSITIVE = "a positive integer", "a positive integer, or unset for all"
FINITE_POSITIVE = "a finite positive number"


@dataclass(frozen=True)
class TrainConfig:
    """Everything that determines a run's result (the run id is a hash of these fields). Each field is
    declared here once; the checks, ``absa train``'s options and the grid's roles are read from it."""

    dataset: str = _field("sentihood", "sentihood | semeval | a folder of your own data (dataset.json, train.csv, "
                          "dev.csv, test.csv: docs/own_data.md)", role="grid", cli={"required": True, "default": None})
    model: str = _field("qacg-bert", " | ".join(MODELS), choices=MODELS, role="grid", cli={"required": True, "default": None})
    preset: str = _field("paper", "paper (default) | official (ignored by bert-single and bert-pair)",
                         choices=PRESETS, role="grid")
    aux: str = _field("NLI-M", "input variant: NLI-M (default; 'single' for bert-single) | QA-M | NLI-B | QA-B | "
                      "none | single", choices=INPUT_VARIANTS, role="grid", cli={"default": None})
    backbone: str = _field("minilm", "bert-base-uncased | minilm (default, offline) | bert-base-random | tiny | "
                           "a local folder", check=lambda v: isinstance(v, str) and v != "",
                           expected="a backbone name or a model folder", role="budget")
    seed: int = _field(42, "default: %(default)s", check=lambda v: is_int(v) and 0 <= v < 2**32,
                       expected="an integer from 0 to 2**32 - 1 (numpy's seed range)", role="grid")
    epochs: int = _field(25, "default: %(default)s, the paper's", check=_positive, expected=POSITIVE, role="budget",
                         shown=(0, epochs_text))
    batch_size: int = _field(24, "default: %(default)s", check=_positive, expected=POSITIVE, role="budget",
                             shown=(6, "batch {}".format))
    lr: float = _field(2e-5, "default: %(default)s", check=_positive_number, expected=FINITE_POSITIVE, role="budget",
                       shown=(2, "lr {}".format))
    warmup: float = _field(0.1, "fraction of steps with linear warm-up (default: %(default)s)",
                           check=lambda v: is_number(v) and 0 <= v < 1, expected="a fraction in [0, 1)")
    schedule: str = _field("linear", "after warm-up: linear (default, the paper's: decay to 0) | constant",
                           choices=("linear", "constant"), shown=(3, "schedule {}".format))
    head_lr_mult: float = _field(1.0, "learning-rate multiplier for the classifier, pooler and context layers "
                                 "(default 1)", check=_positive_number, expected=FINITE_POSITIVE,
                                 shown=(4, "head lr x{}".format))
    weight_decay: float = _field(0.01, "default: %(default)s", check=lambda v: is_number(v) and v >= 0,
                                 expected="a finite number >= 0")
    adam_eps: float = _field(1e-6, "default: %(default)s, the official BERTAdam's", check=_positive_number,
                             expected=FINITE_POSITIVE)
    max_grad_norm: float = _field(1.0, "global gradient norm clip (default: %(default)s; the official code clips "
                                  "per tensor)", check=_positive_number, expected=FINITE_POSITIVE)
    max_length: int = _field(128, "tokens (default: %(default)s)", check=_positive, expected=POSITIVE, role="budget",
                             shown=(5, "max length {}".format))
    sampler: str = _field("uniform", "uniform (default) | balanced (official code: WeightedRandomSampler) | "
                          "per-context (bert-single only: each batch from one context, as in Sun et al.'s separate "
                          "runs; the tables' bert-single rows use it)", choices=("uniform", "balanced", "per-context"),
                          role="grid")
    eval_batch_size: int = _field(64, "default: %(default)s", check=_positive, expected=POSITIVE, role="budget")
    precision: str = _field("auto", "auto (default: bf16 where native, fp16 on older GPUs, else fp32) | fp32 | "
                            "bf16 | fp16 (autocast; fp16 with loss scaling); runs record the resolved value", choices=PRECISIONS, shown=(7, str))
    group_by_length: bool = _field(False, "batches of inputs of similar length (less padding, the same examples "
                                   "per epoch; part of the run's identity)", check=lambda v: isinstance(v, bool),
                                   expected="true or false",
                                   shown=(8, lambda v: "length-grouped batches" if v else "random batches"))
    max_train_examples: int | None = _field(None, "train on a seeded subset (seed 0: the same for every run seed)",
                                            check=_positive_or_all, expected=ALL_OR_POSITIVE, role="budget",
                                            shown=(1, lambda n: f"train examples: {_all_or(n)}"))
    max_eval_examples: int | None = _field(None, "evaluate on the first K dev/test examples (whole groups)",
                                           check=_positive_or_all, expected=ALL_OR_POSITIVE, role="budget",
                                           shown=(10, lambda n: None if n is None else
                                                  f"scored on the first {int(n):,} examples of dev and test"))
    model_overrides: dict = _field({}, "model config override, e.g. --override quasi=false --override "
                                   "gate_activation='\"sigmoid\"'", check=lambda v: isinstance(v, dict),
                                   expected="a mapping of model fields to values", role="grid",
                                   cli={"flag": "--override", "metavar": "KEY=JSON"})
    objective: str = _field("single", "single (default: one C-way head) | joint (aspect + sentiment heads) | "
                            "joint-dwa (joint with dynamic task weights from the dev losses)",
                            choices=OBJECTIVES, role="grid")
    compile: str = _field("none", "none (default) | default | reduce-overhead: torch.compile the training step "
                          "(reduce-overhead: as CUDA graphs, for a GPU); part of the run's identity",
                          choices=COMPILE_MODES, shown=(9, lambda v: None if v == "none" else f"compiled ({v})"))

    def __post_init__(self) -> None:
        if not D.known(self.dataset):
            raise AbsaError(f"dataset={self.dataset!r} is not one of {', '.join(D.DATASETS)}, nor a dataset "
                            "of your own registered in this process (absa train --dataset FOLDER, or "
                            "absa_lib.register_dataset(FOLDER); see docs/own_data.md)")
        for f in dataclasses.fields(self):
            value, allowed = getattr(self, f.name), f.metadata["choices"]
            if allowed is not None and value not in allowed:
                raise AbsaError(f"{f.name}={value!r} is not one of {', '.join(allowed)}")
        for f in dataclasses.fields(self):
            check, value = f.metadata["check"], getattr(self, f.name)
            if check is not None and not check(value):
                raise AbsaError(f"{f.name} must be {f.metadata['expected']}, got {value!r}")
        checked_overrides(self.model, self.model_overrides)       # a bad override: when the config is made
        model = traits(self.model)
        if model.reads == "sentence" and self.aux not in SENTENCE_ONLY:
            raise AbsaError(f"{self.model} reads the sentence only: use aux='single'")
        if self.sampler == "per-context" and not model.per_context:
            raise AbsaError(f"sampler='per-context' batches each context apart for the per-context classifiers of "
                            f"{', '.join(names_with(per_context=True))}; {self.model} has one model for every context: "
                            "use uniform or balanced")
        if model.reads == "pair" and self.aux in SENTENCE_ONLY:
            raise AbsaError(f"{self.model} needs an auxiliary sentence: aux in NLI-M, QA-M, NLI-B, QA-B")
        if self.objective != "single" and (not model.joint or self.aux in B_VARIANTS):
            raise AbsaError(f"objective={self.objective!r} needs one model reading C-way labels: not "
                            f"{', '.join(names_with(joint=False))}, and aux none, single, NLI-M or QA-M")

    @classmethod
    def fields_of(cls, role: str) -> tuple[str, ...]:
        """The names of the fields of ``role`` (grid, budget, option), in declaration order."""
        return tuple(f.name for f in dataclasses.fields(cls) if f.metadata["role"] == role)

    @classmethod
    def from_file(cls, path: Path) -> TrainConfig:
        """The config a JSON file of its fields describes (``absa train --config``; the grid runner
        hands each process its run this way)."""
        fields = read_json(path)
        if not isinstance(fields, dict):
            raise AbsaError(f"{path}: expected a JSON object of TrainConfig fields, got {type(fields).__name__}")
        unknown = sorted(set(fields) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise AbsaError(f"{path}: {unknown[0]!r} is not a TrainConfig field")
        return cls(**fields)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def check_field_values(values: dict, source: str) -> None:
    """Each of ``values`` that names a TrainConfig field, checked as a TrainConfig checks it (its choices,
    its check): a notebook's ``epochs = -1`` is refused in its setup cell, not by the first run it makes.
    The others (``seeds``, ``datasets``, ...) are left to their own checks."""
    fields = {f.name: f for f in dataclasses.fields(TrainConfig)}
    for name, value in values.items():
        f = fields.get(name)
        if f is None:
            continue
        allowed, check = f.metadata["choices"], f.metadata["check"]
        if allowed is not None and value not in allowed:
            raise AbsaError(f"{source}: {name} is {value!r}, expected one of {', '.join(allowed)}")
        if check is not None and not check(value):
            raise AbsaError(f"{source}: {name} is {value!r}, expected {f.metadata['expected']}")


def budget_fields(cls: type = TrainConfig) -> tuple[str, ...]:
    """The fields that tell budgets apart: every field but what a grid row sets (its ``role``)."""
    return tuple(f.name for f in dataclasses.fields(cls) if f.metadata["role"] != "grid")


def budget_parts(config, cls: type = TrainConfig) -> list[str]:
    """A run's budget (a :class:`TrainConfig`, or a run's record of one) as its footnote names it: each
    field that says how it is ``shown``, in its rank."""
    shown = sorted((f.metadata["shown"][0], f.name, f.metadata["shown"][1]) for f in dataclasses.fields(cls)
                   if f.metadata["shown"])
    parts = (text(getattr(config, name)) for _, name, text in shown)
    return [part for part in parts if part is not None]


def describe(config, seed: bool = True, dataset: bool = True) -> str:
    """A run's configuration (a :class:`TrainConfig`, or a run's record of one) in a few words, for
    scripts that list runs, e.g. ``semeval cg-bert NLI-M gate_activation=sigmoid (paper) seed 42``,
    ``sentihood qacg-bert (no aux) (paper) seed 43`` or ``semeval bert-single per-context batches (paper)
    seed 42`` (without ``seed``: what its seeds share; without ``dataset``: a row of a dataset's table)."""
    aux = {"single": "", "none": " (no aux)"}.get(config.aux, f" {config.aux}")
    overrides = "".join(f" {k}={v}" for k, v in sorted(config.model_overrides.items()))
    objective = f" {config.objective}" if config.objective != "single" else ""
    sampler = f" {config.sampler} batches" if config.sampler != "uniform" else ""
    return ((f"{config.dataset} " if dataset else "") + f"{config.model}{aux}{overrides}{objective}{sampler} ({config.preset})"
            + (f" seed {config.seed}" if seed else ""))


def config_hash(identity: dict) -> str:
    """12 hex digits of SHA-256 over the canonical JSON of everything that affects a result."""
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def run_identity(config: TrainConfig) -> dict:
    """What the run id hashes: the config (precision resolved; fields at their neutral default left
    out), the data files' checksums (for your own data also its scheme), the backbone's fingerprint,
    the library version and, for an ATAE-LSTM on GloVe vectors, the vector file's SHA-256."""
    config = resolved(config)
    fields = {k: v for k, v in config.to_dict().items()
              if not (k in NEUTRAL_DEFAULTS and v == NEUTRAL_DEFAULTS[k])}
    identity = {"config": fields, "data_sha256": D.data_checksums(config.dataset),
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


def resolved(config: TrainConfig) -> TrainConfig:
    """``config`` with ``precision`` resolved for this machine (``auto`` -> ``bf16``, ``fp16`` or ``fp32``) and
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
