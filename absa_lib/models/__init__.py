"""Models: BERT-single/pair, CG-BERT and QACG-BERT on a choice of backbones (see the submodules).

    model = build_model("qacg-bert", backbone="minilm", num_labels=3, num_contexts=8, preset="paper")
    out = model(input_ids, attention_mask, token_type_ids, context_ids, labels)   # AbsaOutput
"""

from __future__ import annotations

from absa_lib.models.absa_model import (
    FIELDS,
    MODELS,
    PRESETS,
    AbsaModel,
    AbsaOutput,
    build_model,
    count_parameters,
    model_config,
    parameter_breakdown,
    preset_fields,
)
from absa_lib.models.attention import CGBertSelfAttention, QACGBertSelfAttention
from absa_lib.models.backbones import BACKBONES, load_tokenizer

__all__ = ["BACKBONES", "FIELDS", "MODELS", "PRESETS", "AbsaModel", "AbsaOutput", "CGBertSelfAttention",
           "QACGBertSelfAttention", "build_model", "count_parameters", "load_tokenizer", "model_config",
           "parameter_breakdown", "preset_fields"]
