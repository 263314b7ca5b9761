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
    model_config  AbsaConfig, the presets (paper, official) and every model field
    backbones     bert-base-uncased, the offline MiniLM, random and tiny backbones
    joint         the joint aspect + sentiment objective
    other/        ATAE/AE/AT-LSTM, MAN-BERT, OA-BERT (docs/other_attention.md)
"""

from __future__ import annotations

from absa_lib.models.absa_model import AbsaModel, count_parameters, parameter_breakdown
from absa_lib.models.attention import CGBertSelfAttention, QACGBertSelfAttention
from absa_lib.models.backbones import BACKBONES, load_tokenizer
from absa_lib.models.bert_single import PerContextModel
from absa_lib.models.model_config import FIELDS, PRESETS, AbsaConfig
from absa_lib.models.pretrained import AbsaOutput, AbsaPreTrainedModel
from absa_lib.models.registry import (
           MODELS,
           build_for_training,
           build_model,
           checked_overrides,
           model_config,
           names_with,
           preset_fields,
           reads,
           traits,
)

__all__ = ["BACKBONES", "FIELDS", "MODELS", "PRESETS", "AbsaConfig", "AbsaModel", "AbsaOutput", "AbsaPreTrainedModel",
           "CGBertSelfAttention", "PerContextModel", "QACGBertSelfAttention", "build_for_training", "build_model",
           "checked_overrides", "count_parameters", "load_tokenizer", "model_config", "names_with", "parameter_breakdown", "preset_fields",
           "reads", "traits"]
