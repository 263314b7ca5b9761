"""The one list of models: each name, the class that implements it and the model fields it reads.

Everything that needs the models asks here: :func:`build_model` (a new model on a backbone),
:func:`build_for_training` (what ``absa train`` trains: bert-single's K classifiers), the fields and
checks of :func:`preset_fields` and :func:`model_config`, ``TrainConfig``'s check of a model name and
its overrides (:func:`checked_overrides`), the CLI's choices, and loading a saved model
(``AbsaPreTrainedModel.from_pretrained`` finds its class by the saved ``absa_model`` here). It imports
no torch: a class is named by where it is (``"module:Class"``) and imported when first asked for
(:func:`model_class`), so the names and traits cost nothing to list (``absa train --help``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from absa_lib.checks import is_number
from absa_lib.errors import AbsaError
from absa_lib.models.backbones import backbone_config

# The presets and every model field, declared here with no torch (model_config re-exports them)
PRESETS = ("paper", "official")
FIELDS = {  # field: (paper, official, allowed values or type)
    "gate_activation": ("tanh", "sigmoid", ("tanh", "sigmoid")),
    "quasi_proj": ("shared", "per_head", ("shared", "per_head")),
    "context_dropout": (False, True, bool),
    "lambda_bias": (False, None, bool),        # None: True for qacg-bert, False for cg-bert
    "lambda_per_head": (False, False, bool),   # the paper prints V_Q^h per head; both presets: per layer
    "init_std": (1e-3, 0.02, float),
    "lambda_init_std": (1e-3, 0.01, float),
    "quasi": (True, True, bool),
    "context_residual": (True, True, bool),
    "pooling": ("cls", "cls", ("cls", "cls_state", "mean")),
}
OTHER_FIELDS = {  # the other attention systems' fields (one default for both presets; see their modules)
    "head_lr": (None, None, float),            # None: the model's own (ATAE 1e-3, MAN and OA 1e-4)
    "joint_tau": (0.5, 0.5, float),            # presence threshold of the joint objective
    "alstm_hidden": (300, 300, int),
    "alstm_aspect_dim": (300, 300, int),
    "alstm_score": ("paper", "paper", ("paper", "joint")),
    "alstm_vectors": ("", "", str),            # a GloVe text file; "": the backbone's input embeddings
    "man_lambda": (0.5, 0.5, float),
    "man_ortho": ("eq9", "eq9", ("eq9", "eq9_split", "none", "code_literal")),
    "man_query": ("mean", "mean", ("mean", "input_emb")),
    "man_target": ("embedding", "embedding", ("embedding", "none")),
    "man_rank": (0, 0, int),                   # 0: full-rank W_α, W_β; r > 0: W = P Qᵀ of rank r
    "oa_variant": ("emb", "emb", ("emb", "em", "c", "ca")),
    "oa_filters": (8, 8, int),                 # OA-C/CA: f filters per query word, width κ, stride σ
    "oa_kernel": (8, 8, int),
    "oa_stride": (8, 8, int),
    "oa_layers": (2, 2, int),
    "oa_block": ("standard", "standard", ("standard", "paper_literal")),
    "oa_mask_context": (True, True, bool),     # False: PyTorchNLP's unmasked dot attention in OA-EMB
    "oa_pool": ("cls", "cls", ("cls", "masked_mean")),
}
OBJECTIVES = ("single", "joint", "joint-dwa")      # the training objectives (absa_lib.models.joint)


@dataclass(frozen=True)
class Model:
    """One model: its class, the model fields it reads (:data:`FIELDS`, :data:`OTHER_FIELDS`), for the
    other attention systems the learning rate of their new layers (``head_lr``), and what it can do; the
    rest of the package asks these traits, never a model's name."""

    cls: type | str                # the class, or where it is ("module:Class"), imported when first asked for
    fields: tuple[str, ...]
    head_lr: float | None = None
    joint: bool = True             # can take the joint objective (every model but bert-single)
    reads: str = "any"             # its input: "sentence" only, a sentence "pair" (an auxiliary sentence), or "any"
    per_context: bool = False      # one classifier per context, as Sun et al. trained BERT-single
    context_ids: bool = True       # reads the context id (BERT-single and BERT-pair do not)
    presets: bool = False          # the context-guided models: the paper's and the official code's presets
    quasi: bool = False            # has QACG-BERT's quasi-attention (Figure 5)
    table_row: bool = False        # a row of the paper's Tables 1-2
    explainable: bool = False      # a BERT embedding block for Figure 3's gradient sensitivity

    @property
    def default_aux(self) -> str | None:
        """The input variant ``absa train`` gives it when none is named (None: TrainConfig's default)."""
        return "single" if self.reads == "sentence" else None


_CG = ("lambda_bias", "lambda_per_head", "init_std", "lambda_init_std", "context_residual", "pooling")
_ALSTM = ("alstm_hidden", "alstm_aspect_dim", "alstm_vectors", "head_lr")
_TABLE = {"table_row": True, "explainable": True}
_ABSA, _ALSTM_CLS = "absa_lib.models.absa_model:AbsaModel", "absa_lib.models.other.alstm:ALSTMModel"
MODELS: dict[str, Model] = {
    "bert-single": Model(_ABSA, ("pooling",), joint=False, reads="sentence", per_context=True, context_ids=False,
                         **_TABLE),
    "bert-pair": Model(_ABSA, ("pooling",), reads="pair", context_ids=False, **_TABLE),
    "cg-bert": Model(_ABSA, ("gate_activation", *_CG), presets=True, **_TABLE),
    "qacg-bert": Model(_ABSA, ("quasi_proj", "context_dropout", "lambda_bias", "lambda_per_head", "init_std",
                               "lambda_init_std", "quasi", "context_residual", "pooling"), presets=True, quasi=True,
                       **_TABLE),
    "atae-lstm": Model(_ALSTM_CLS, (*_ALSTM, "alstm_score"), head_lr=1e-3),    # absa_lib.models.other
    "ae-lstm": Model(_ALSTM_CLS, _ALSTM, head_lr=1e-3),
    "at-lstm": Model(_ALSTM_CLS, (*_ALSTM, "alstm_score"), head_lr=1e-3),
    "man-bert": Model("absa_lib.models.other.man:MANBertModel",
                      ("man_lambda", "man_ortho", "man_query", "man_target", "man_rank", "head_lr"), head_lr=1e-4),
    "oa-bert": Model("absa_lib.models.other.orthogonal:OABertModel",
                     ("oa_variant", "oa_layers", "oa_block", "oa_mask_context", "oa_pool", "oa_filters", "oa_kernel",
                      "oa_stride", "head_lr"), head_lr=1e-4),
}
PER_CONTEXT = "absa_lib.models.bert_single:PerContextModel"   # a saved set of bert-single classifiers
CONFIG = "absa_lib.models.model_config:AbsaConfig"             # the config every model is built from


def traits(name: str) -> Model:
    """What model ``name`` is and can do (its :class:`Model` record)."""
    check_name(name)
    return MODELS[name]


def names_with(**wanted) -> tuple[str, ...]:
    """The models whose traits have the ``wanted`` values, in the registry's order (e.g. ``table_row=True``)."""
    return tuple(name for name, m in MODELS.items() if all(getattr(m, k) == v for k, v in wanted.items()))


def check_name(name: str) -> None:
    if name not in MODELS:
        raise AbsaError(f"model {name!r} is not one of {', '.join(MODELS)}")


def reads(name: str) -> tuple[str, ...]:
    """The model fields model ``name`` reads (``joint_tau`` for every model that can train jointly)."""
    model = MODELS.get(name)
    return () if model is None else model.fields + (("joint_tau",) if model.joint else ())


def model_class(name: str) -> type:
    """The class that implements model ``name`` (an ``AbsaPreTrainedModel``), imported when first asked for."""
    check_name(name)
    return resolve(MODELS[name].cls)


def resolve(cls: type | str) -> type:
    """``cls`` itself, or the class a ``"module:Class"`` string names: the registry imports no torch."""
    if not isinstance(cls, str):
        return cls
    module, _, name = cls.partition(":")
    return getattr(importlib.import_module(module), name)


def checked_overrides(name: str, overrides: dict) -> dict:
    """``overrides`` of model ``name``'s fields, each checked (a field the model reads, a value of its
    type) and in its type (``TrainConfig`` refuses a bad one when it is made)."""
    known, checked = {**FIELDS, **OTHER_FIELDS}, {}
    for key, value in overrides.items():
        if key not in known:
            raise AbsaError(f"model override {key!r} is unknown; expected one of {', '.join(known)}")
        if key not in reads(name):
            raise AbsaError(f"model override {key!r} does not apply to {name}; it reads "
                            f"{', '.join(reads(name)) or 'no model fields'}")
        allowed = known[key][2]
        number = is_number(value) and value >= 0
        ok = value in allowed if isinstance(allowed, tuple) else (
            isinstance(value, bool) if allowed is bool else isinstance(value, str) if allowed is str else
            number and value == int(value) if allowed is int else number)
        if not ok:
            raise AbsaError(f"model override {key}={value!r} is invalid; expected "
                            + (' or '.join(allowed) if isinstance(allowed, tuple) else
                               f"a finite number >= 0 ({allowed.__name__})" if allowed in (int, float)
                               else allowed.__name__))
        checked[key] = float(value) if allowed is float else int(value) if allowed is int else value
    if not 0 < checked.get("joint_tau", 0.5) < 1:
        raise AbsaError(f"model override joint_tau={checked['joint_tau']!r} is invalid; expected 0 < τ < 1")
    return checked


def preset_fields(name: str, preset: str, **overrides) -> dict:
    """The context fields of model ``name`` under ``preset`` (plus the :data:`OTHER_FIELDS` it reads,
    ``joint_tau`` only when overridden), with ``overrides`` applied and checked."""
    if preset not in PRESETS:
        raise AbsaError(f"preset={preset!r} is not one of {', '.join(PRESETS)}")
    fields = {k: v[PRESETS.index(preset)] for k, v in FIELDS.items()}
    if fields["lambda_bias"] is None:
        fields["lambda_bias"] = name == "qacg-bert"
    fields.update({k: v[0] for k, v in OTHER_FIELDS.items() if k in reads(name) and k != "joint_tau"})
    if "head_lr" in fields:
        fields["head_lr"] = MODELS[name].head_lr
    fields.update(checked_overrides(name, overrides))
    return fields


def model_config(name: str, *, backbone: str, num_labels: int, num_contexts: int,
                 preset: str = "paper", num_aspects: int | None = None, objective: str = "single",
                 none_label: int | None = None, **overrides):
    """The backbone's config as an :class:`AbsaConfig` with the model fields set (see
    :func:`build_model`)."""
    check_name(name)
    if num_labels < 1 or num_contexts < 1:
        raise AbsaError(f"num_labels and num_contexts must be positive, got {num_labels} and {num_contexts}")
    num_aspects = num_aspects or num_contexts
    if num_contexts % num_aspects:
        raise AbsaError(f"num_contexts={num_contexts} is not a multiple of num_aspects={num_aspects}")
    if objective not in OBJECTIVES:
        raise AbsaError(f"objective={objective!r} is not one of {', '.join(OBJECTIVES)}")
    config = resolve(CONFIG).from_dict({k: v for k, v in backbone_config(backbone).to_dict().items()
                                   if k != "model_type"})
    fields = preset_fields(name, preset, **overrides)
    for key, value in {**fields, "absa_model": name, "absa_preset": preset, "absa_backbone": str(backbone),
                       "num_labels": num_labels, "num_contexts": num_contexts, "num_aspects": num_aspects,
                       "absa_objective": objective, "joint_tau": fields.get("joint_tau", OTHER_FIELDS["joint_tau"][0]),
                       "none_label": num_labels - 1 if none_label is None else none_label}.items():
        setattr(config, key, value)
    return config


def build_model(name: str, *, backbone: str, num_labels: int, num_contexts: int,
                preset: str = "paper", num_aspects: int | None = None, objective: str = "single",
                none_label: int | None = None, **overrides):
    """Build model ``name`` on ``backbone`` with pretrained weights (random for the random backbones).

    Args:
        name: a key of :data:`MODELS`.
        backbone: one of :data:`~absa_lib.models.backbones.BACKBONES` or a local model directory.
        num_labels: classifier outputs (3 SentiHood, 5 SemEval, 2 for the B variants).
        num_contexts: rows of the context embedding table (8 SentiHood, 5 SemEval).
        preset: ``paper`` or ``official`` (see the module docstring); ignored by the plain BERT models.
        num_aspects: aspects per target (4 SentiHood, 5 SemEval; default ``num_contexts``): context id
            c = num_aspects · t + a. MAN-BERT has one head per aspect, OA-BERT embeds t and a.
        objective: ``single`` (one C-way head), ``joint`` or ``joint-dwa`` (:mod:`absa_lib.models.joint`).
        none_label: index of the "none" class (joint objective; default the last class).
        **overrides: any field the model reads (:func:`reads`), e.g. ``quasi=False`` or ``gate_activation="sigmoid"``.

    Returns:
        The model, in train mode. New layers are initialised as the preset says.
    """
    config = model_config(name, backbone=backbone, num_labels=num_labels, num_contexts=num_contexts,
                          preset=preset, num_aspects=num_aspects, objective=objective, none_label=none_label,
                          **overrides)
    return model_class(name).from_backbone(config, backbone)


def build_per_context(*, backbone: str, num_labels: int, num_contexts: int, **kwargs):
    """``num_contexts`` independently initialised ``bert-single`` classifiers on ``backbone``."""
    models = [build_model("bert-single", backbone=backbone, num_labels=num_labels, num_contexts=num_contexts,
                          **kwargs) for _ in range(num_contexts)]
    return resolve(PER_CONTEXT)(models[0].config, models)


def build_for_training(name: str, **kwargs):
    """The model ``absa train --model name`` trains: for ``bert-single`` the K per-context
    classifiers (:func:`build_per_context`), for any other model
    :func:`build_model`'s one."""
    if name == "bert-single":
        return build_per_context(**kwargs)
    return build_model(name, **kwargs)
