"""Models: BERT-single/pair, CG-BERT and QACG-BERT, and the other attention systems, on a choice of
backbones (see the submodules).

    model = build_model("qacg-bert", backbone="minilm", num_labels=3, num_contexts=8, preset="paper")
    out = model(input_ids, attention_mask, token_type_ids, context_ids, labels)   # AbsaOutput
    model.save_pretrained("my-model"); AbsaModel.from_pretrained("my-model")      # transformers' API
"""

from __future__ import annotations

from absa_lib.models.absa_model import (
    AbsaModel,
    AbsaOutput,
    build_model,
    count_parameters,
    parameter_breakdown,
)
from absa_lib.models.attention import CGBertSelfAttention, QACGBertSelfAttention
from absa_lib.models.backbones import BACKBONES, load_tokenizer
from absa_lib.models.model_config import FIELDS, MODELS, PRESETS, AbsaConfig, model_config, preset_fields
from absa_lib.models.per_context import PerContextModel
from absa_lib.models.pretrained import AbsaPreTrainedModel

__all__ = ["BACKBONES", "FIELDS", "MODELS", "PRESETS", "AbsaConfig", "AbsaModel", "AbsaOutput", "AbsaPreTrainedModel",
           "CGBertSelfAttention", "PerContextModel", "QACGBertSelfAttention", "build_model", "count_parameters",
           "load_tokenizer", "model_config", "parameter_breakdown", "preset_fields"]
