"""Models: BERT-single/pair, CG-BERT and QACG-BERT, and the other attention systems, on a choice of
backbones.

    model = build_model("qacg-bert", backbone="minilm", num_labels=3, num_contexts=8, preset="paper")
    out = model(input_ids, attention_mask, token_type_ids, context_ids, labels)   # AbsaOutput
    model.save_pretrained("my-model"); AbsaModel.from_pretrained("my-model")      # transformers' API

    registry      the one list of models (name -> class, fields read), build_model, build_for_training
    pretrained    AbsaPreTrainedModel, the base of every model: saving, checked loading; AbsaOutput
    attention     CG-BERT's and QACG-BERT's self-attention (Eqs. 2-7)
    absa_model    BERT-single/pair, CG-BERT and QACG-BERT: BERT + context-guided attention + the head
    bert_single   BERT-single's K per-context classifiers, routed by context
    model_config  AbsaConfig: the backbone's BertConfig with the model fields (declared in the registry)
    backbones     bert-base-uncased, the offline MiniLM, random and tiny backbones
    joint         the joint aspect + sentiment objective
    other/        ATAE/AE/AT-LSTM, MAN-BERT, OA-BERT (docs/other_attention.md)

The registry (names, traits, presets, fields, objectives) and the backbones' names import no torch;
the classes are imported when first asked for.
"""

from __future__ import annotations

import sys
import types

from absa_lib.lazy import lazy_names
from absa_lib.models.backbones import BACKBONES
from absa_lib.models.registry import (
    FIELDS,
    MODELS,
    PRESETS,
    build_for_training,
    build_model,
    checked_overrides,
    model_config,
    names_with,
    preset_fields,
    reads,
    traits,
)

_LAZY = {  # name: the module that defines it, imported when first asked for (torch, transformers)
    "AbsaModel": "absa_model", "count_parameters": "absa_model", "parameter_breakdown": "absa_model",
    "CGBertSelfAttention": "attention", "QACGBertSelfAttention": "attention", "load_tokenizer": "backbones",
    "PerContextModel": "bert_single", "AbsaConfig": "model_config", "AbsaOutput": "pretrained",
    "AbsaPreTrainedModel": "pretrained",
}
__all__ = ["BACKBONES", "FIELDS", "MODELS", "PRESETS", "AbsaConfig", "AbsaModel", "AbsaOutput", "AbsaPreTrainedModel",
           "CGBertSelfAttention", "PerContextModel", "QACGBertSelfAttention", "build_for_training", "build_model",
           "checked_overrides", "count_parameters", "load_tokenizer", "model_config", "names_with", "parameter_breakdown", "preset_fields",
           "reads", "traits"]


__getattr__ = lazy_names(__name__, _LAZY)   # the names above, imported when first asked for


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


class _Package(types.ModuleType):
    """``absa_lib.models.model_config`` stays the registry's function (as when every submodule was imported
    here, before it): loading the submodule of that name later would otherwise set the attribute to it."""

    def __setattr__(self, name: str, value) -> None:
        if name == "model_config" and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
