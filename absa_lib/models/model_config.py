"""The model configuration: :class:`AbsaConfig`, with the presets and the model fields (declared in
:mod:`absa_lib.models.registry`, which needs no torch, and re-exported here).

An :class:`AbsaConfig` is the backbone's ``BertConfig`` plus the fields of this package: which model
(``absa_model``), its preset and backbone, the label and context counts, the objective, and the
model fields of :data:`FIELDS` and :data:`OTHER_FIELDS` (their meaning: the docstring of
:mod:`absa_lib.models.absa_model` and of each other system's module). It is registered with
``AutoConfig`` under ``model_type = "absa-bert"``, so ``AutoConfig.from_pretrained`` reads the
``config.json`` of any model this package saved.
"""

from __future__ import annotations

import json
from pathlib import Path

from transformers import AutoConfig, BertConfig

from absa_lib.checks import is_int
from absa_lib.errors import AbsaError, one_line
from absa_lib.models.registry import FIELDS, OTHER_FIELDS, PRESETS  # noqa: F401  (kept here too, where they were)


class AbsaConfig(BertConfig):
    """A ``BertConfig`` with this package's fields (set by :func:`model_config`)."""

    model_type = "absa-bert"


AutoConfig.register(AbsaConfig.model_type, AbsaConfig)

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
    if not isinstance(getattr(config, "absa_model", None), str):
        raise AbsaError(f"{source}: absa_model is missing; not a model saved by absa_lib")
    for key in ("num_labels", "num_contexts", "hidden_size", "num_attention_heads", "per_context_models"):
        value = getattr(config, key, 1)
        if not is_int(value) or value < 1:
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
        except (OSError, ValueError, TypeError, KeyError, RecursionError) as err:
            raise AbsaError(f"{marker}: cannot be read ({one_line(err)}); {DAMAGED}") from None
        if not is_int(k) or k < 1:
            raise AbsaError(f"{marker}: expected {{\"num_models\": K}} with K >= 1, got {k!r}; {DAMAGED}")
        raw["per_context_models"] = k
    return as_absa_config(raw, str(path))
