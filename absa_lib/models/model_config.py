"""The model configuration: :class:`AbsaConfig`, the presets and the fields each model reads.

An :class:`AbsaConfig` is the backbone's ``BertConfig`` plus the fields of this package: which model
(``absa_model``), its preset and backbone, the label and context counts, the objective, and the
model fields of :data:`FIELDS` and :data:`OTHER_FIELDS` (their meaning: the docstring of
:mod:`absa_lib.models.absa_model` and of each other system's module). It is registered with
``AutoConfig`` under ``model_type = "absa-bert"``, so ``AutoConfig.from_pretrained`` reads the
``config.json`` of any model this package saved.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from transformers import AutoConfig, BertConfig

from absa_lib.errors import AbsaError, one_line
from absa_lib.models import backbones, joint


class AbsaConfig(BertConfig):
    """A ``BertConfig`` with this package's fields (set by :func:`model_config`)."""

    model_type = "absa-bert"


AutoConfig.register(AbsaConfig.model_type, AbsaConfig)

MODELS = ("bert-single", "bert-pair", "cg-bert", "qacg-bert", "atae-lstm", "ae-lstm", "at-lstm", "man-bert",
          "oa-bert")    # the last five: absa_lib.models.alstm, .man, .orthogonal (docs/other_attention.md)
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
HEAD_LR = {"atae-lstm": 1e-3, "ae-lstm": 1e-3, "at-lstm": 1e-3, "man-bert": 1e-4, "oa-bert": 1e-4}
_ALSTM = ("alstm_hidden", "alstm_aspect_dim", "alstm_vectors", "head_lr")
MODEL_FIELDS = {  # the fields each model reads
    "bert-single": ("pooling",),
    "bert-pair": ("pooling",),
    "cg-bert": ("gate_activation", "lambda_bias", "lambda_per_head", "init_std", "lambda_init_std",
                "context_residual", "pooling"),
    "qacg-bert": ("quasi_proj", "context_dropout", "lambda_bias", "lambda_per_head", "init_std", "lambda_init_std",
                  "quasi", "context_residual", "pooling"),
    "atae-lstm": _ALSTM + ("alstm_score",),
    "ae-lstm": _ALSTM,
    "at-lstm": _ALSTM + ("alstm_score",),
    "man-bert": ("man_lambda", "man_ortho", "man_query", "man_target", "man_rank", "head_lr"),
    "oa-bert": ("oa_variant", "oa_layers", "oa_block", "oa_mask_context", "oa_pool", "oa_filters", "oa_kernel",
                "oa_stride", "head_lr"),
}
for _name in MODELS[1:]:                      # every model but bert-single can take the joint objective
    MODEL_FIELDS[_name] = MODEL_FIELDS.get(_name, ()) + ("joint_tau",)


def preset_fields(name: str, preset: str, **overrides) -> dict:
    """The context fields of model ``name`` under ``preset`` (plus the :data:`OTHER_FIELDS` it reads,
    ``joint_tau`` only when overridden), with ``overrides`` applied and checked."""
    if preset not in PRESETS:
        raise AbsaError(f"preset={preset!r} is not one of {', '.join(PRESETS)}")
    fields = {k: v[PRESETS.index(preset)] for k, v in FIELDS.items()}
    if fields["lambda_bias"] is None:
        fields["lambda_bias"] = name == "qacg-bert"
    fields.update({k: v[0] for k, v in OTHER_FIELDS.items() if k in MODEL_FIELDS.get(name, ()) and k != "joint_tau"})
    if "head_lr" in fields:
        fields["head_lr"] = HEAD_LR[name]
    known = {**FIELDS, **OTHER_FIELDS}
    for key, value in overrides.items():
        if key not in known:
            raise AbsaError(f"model override {key!r} is unknown; expected one of {', '.join(known)}")
        if key not in MODEL_FIELDS.get(name, ()):
            raise AbsaError(f"model override {key!r} does not apply to {name}; it reads "
                            f"{', '.join(MODEL_FIELDS.get(name, ())) or 'no model fields'}")
        allowed = known[key][2]
        number = (isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0
                  and math.isfinite(value))
        ok = value in allowed if isinstance(allowed, tuple) else (
            isinstance(value, bool) if allowed is bool else isinstance(value, str) if allowed is str else
            number and value == int(value) if allowed is int else number)
        if not ok:
            raise AbsaError(f"model override {key}={value!r} is invalid; expected "
                            + (' or '.join(allowed) if isinstance(allowed, tuple) else
                               f"a finite number >= 0 ({allowed.__name__})" if allowed in (int, float)
                               else allowed.__name__))
        fields[key] = float(value) if allowed is float else int(value) if allowed is int else value
    if not 0 < fields.get("joint_tau", 0.5) < 1:
        raise AbsaError(f"model override joint_tau={fields['joint_tau']!r} is invalid; expected 0 < τ < 1")
    return fields


DAMAGED = "the checkpoint is damaged: retrain with `absa train ... --force`"
PER_CONTEXT_MARKER = "per_context.json"    # how checkpoints written before AbsaConfig said "K bert-single models"


def as_absa_config(raw: dict, source: str) -> AbsaConfig:
    """An :class:`AbsaConfig` from the dict of a ``config.json``, checked; ``source`` names the file.

    Also reads the ``config.json`` of checkpoints written before :class:`AbsaConfig` existed
    (``model_type`` "bert" with the same fields).
    """
    try:
        config = AbsaConfig.from_dict({k: v for k, v in raw.items() if k != "model_type"})
    except (ValueError, TypeError) as err:
        raise AbsaError(f"{source}: not a valid model config ({one_line(err)}); {DAMAGED}") from None
    if getattr(config, "absa_model", None) not in MODELS:
        raise AbsaError(f"{source}: absa_model is missing or not one of "
                        f"{', '.join(MODELS)}; not a model saved by absa_lib")
    for key in ("num_labels", "num_contexts", "hidden_size", "num_attention_heads", "per_context_models"):
        value = getattr(config, key, 1)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise AbsaError(f"{source}: {key} must be a positive integer, got {value!r}; {DAMAGED}")
    return config


def read_saved_config(directory: str | Path) -> AbsaConfig:
    """The checked :class:`AbsaConfig` of a model folder written by ``save_pretrained``."""
    directory = Path(directory)
    path = directory / "config.json"
    if not path.is_file() or not (directory / "model.safetensors").is_file():
        raise AbsaError(f"{directory}: expected config.json and model.safetensors written by "
                        "AbsaModel.save_pretrained")
    try:
        raw, _ = AbsaConfig.get_config_dict(directory)
    except (OSError, ValueError, TypeError) as err:
        raise AbsaError(f"{path}: not a valid model config ({one_line(err)}); {DAMAGED}") from None
    marker = directory / PER_CONTEXT_MARKER
    if marker.is_file() and "per_context_models" not in raw:
        try:
            k = json.loads(marker.read_text())["num_models"]
        except (OSError, ValueError, TypeError, KeyError) as err:
            raise AbsaError(f"{marker}: cannot be read ({one_line(err)}); {DAMAGED}") from None
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise AbsaError(f"{marker}: expected {{\"num_models\": K}} with K >= 1, got {k!r}; {DAMAGED}")
        raw["per_context_models"] = k
    return as_absa_config(raw, str(path))


def model_config(name: str, *, backbone: str, num_labels: int, num_contexts: int,
                 preset: str = "paper", num_aspects: int | None = None, objective: str = "single",
                 none_label: int | None = None, **overrides) -> AbsaConfig:
    """The backbone's config as an :class:`AbsaConfig` with the model fields set (see
    :func:`~absa_lib.models.absa_model.build_model`)."""
    if name not in MODELS:
        raise AbsaError(f"model {name!r} is not one of {', '.join(MODELS)}")
    if num_labels < 1 or num_contexts < 1:
        raise AbsaError(f"num_labels and num_contexts must be positive, got {num_labels} and {num_contexts}")
    num_aspects = num_aspects or num_contexts
    if num_contexts % num_aspects:
        raise AbsaError(f"num_contexts={num_contexts} is not a multiple of num_aspects={num_aspects}")
    if objective not in joint.OBJECTIVES:
        raise AbsaError(f"objective={objective!r} is not one of {', '.join(joint.OBJECTIVES)}")
    config = AbsaConfig.from_dict({k: v for k, v in backbones.backbone_config(backbone).to_dict().items()
                                   if k != "model_type"})
    fields = preset_fields(name, preset, **overrides)
    for key, value in {**fields, "absa_model": name, "absa_preset": preset, "absa_backbone": str(backbone),
                       "num_labels": num_labels, "num_contexts": num_contexts, "num_aspects": num_aspects,
                       "absa_objective": objective, "joint_tau": fields.get("joint_tau", OTHER_FIELDS["joint_tau"][0]),
                       "none_label": num_labels - 1 if none_label is None else none_label}.items():
        setattr(config, key, value)
    return config
