"""Shared parts of the other attention systems (ATAE-LSTM family, MAN-BERT, OA-BERT).

They plug into the same pipeline as the QACG models: one (sentence, [auxiliary sentence], context
id) example in, C logits out, through :class:`~absa_lib.models.AbsaOutput`, which also carries their
regularisers (``aux_losses``) and attention maps (``attentions``). Saving and loading are the
pretrained base's (:class:`~absa_lib.models.AbsaPreTrainedModel`), the joint objective
:mod:`absa_lib.models.joint`'s.

Both input modes of the QACG tables are read from the batch itself:

- mode S (sentence alone, ``aux=none``): ``[CLS] s [SEP]``; the target and aspect reach the model
  only through the context id c = num_aspects · t + a;
- mode P (auxiliary sentence, e.g. ``aux=NLI-M``): ``[CLS] s [SEP] t - a [SEP]``; the tokens with
  segment id 1 are the query (OA-BERT) or the aspect words (ATAE-LSTM).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn
from transformers import BertModel

from absa_lib.models import backbones, joint
from absa_lib.models.model_config import AbsaConfig
from absa_lib.models.pretrained import AbsaPreTrainedModel


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """softmax over ``dim`` with masked-out entries at exactly 0 (``mask`` broadcastable, bool)."""
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=dim)


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of x (B, T, d) over the positions where mask (B, T) is set -> (B, d)."""
    m = mask.to(x.dtype)[..., None]
    return (x * m).sum(1) / m.sum(1).clamp_min(1.0)


def second_segment(token_type_ids: torch.Tensor | None, attention_mask: torch.Tensor) -> torch.Tensor:
    """(B, T) bool: the auxiliary sentence's tokens (all False in mode S)."""
    if token_type_ids is None:
        return torch.zeros_like(attention_mask, dtype=torch.bool)
    return token_type_ids.bool() & attention_mask.bool()


def split_context(config: AbsaConfig, context_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(target t, aspect a) of each context id c = num_aspects · t + a."""
    return context_ids // config.num_aspects, context_ids % config.num_aspects


class OtherModel(AbsaPreTrainedModel):
    """Base of the other attention systems: the pretrained base's saving and loading, the joint
    objective's task weights; each system brings its own encoder, head and ``from_backbone``.

    Subclasses build their layers after ``super().__init__``, initialise them (MAN-BERT and OA-BERT
    with :meth:`init_new_layers`, the LSTMs with U(−0.01, 0.01)), and end with ``self.post_init()``.
    ``head_lr`` is the learning rate of every parameter outside ``bert.`` (the training loop's
    optimizer reads it); ``GROUPS`` names the top-level modules for ``absa info``.
    """

    GROUPS: dict[str, str] = {}

    def __init__(self, config: AbsaConfig) -> None:
        super().__init__(config)
        self.name = config.absa_model
        self.uses_context = False          # no CG/QACG components (analysis.extract_components)
        self.head_lr = config.head_lr
        joint.add_task_weights(self)

    @torch.no_grad()
    def init_new_layers(self, modules: list[nn.Module], std: float) -> None:
        """Linear/embedding weights N(0, std²), biases 0, LayerNorm 1 and 0 (BERT's head init)."""
        for root in modules:
            for m in root.modules():
                if isinstance(m, (nn.Linear, nn.Embedding)):
                    nn.init.normal_(m.weight, std=std)
                    if getattr(m, "bias", None) is not None:
                        nn.init.zeros_(m.bias)
                elif isinstance(m, nn.LayerNorm):
                    nn.init.ones_(m.weight)
                    nn.init.zeros_(m.bias)

    def new_keys(self) -> set[str]:
        return set()


class EncoderModel(OtherModel):
    """A BERT encoder (no pooler: these models read its last states) under a new head.

    :meth:`encode` runs BERT once per distinct input row of a batch and scatters the states back:
    in mode S the examples of one sentence (its targets and aspects) share one input, so they share
    one encoder pass (and, in training, one dropout mask), as a per-sentence model would.
    """

    def __init__(self, config: AbsaConfig) -> None:
        super().__init__(config)
        config._attn_implementation = "sdpa"
        self.bert = BertModel(config, add_pooling_layer=False)

    @classmethod
    def from_backbone(cls, config: AbsaConfig, backbone: str) -> EncoderModel:
        model = cls(config)
        path: Path | None = backbones.backbone_dir(backbone)
        if path is not None:
            backbones.load_backbone_weights(model.bert, path, set(), skip=("pooler.",))
        return model

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
               token_type_ids: torch.Tensor | None = None,
               embeddings: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Last hidden states H (B, T, d) and, when asked, the embedding block's output E (B, T, d)."""
        types = torch.zeros_like(input_ids) if token_type_ids is None else token_type_ids
        rows = torch.cat([input_ids, types, attention_mask.long()], dim=1)
        unique, inverse = torch.unique(rows, dim=0, return_inverse=True)
        T = input_ids.size(1)
        ids, tt, am = (unique[:, :T], unique[:, T:2 * T], unique[:, 2 * T:]) if len(unique) < len(rows) else (
            input_ids, types, attention_mask)
        dtype = self.bert.embeddings.word_embeddings.weight.dtype
        mask = (1.0 - am[:, None, None, :].to(dtype)) * -10000.0                     # (b, 1, 1, T)
        out = self.bert(input_ids=ids, attention_mask=mask, token_type_ids=tt, output_hidden_states=embeddings)
        H, E = out.last_hidden_state, (out.hidden_states[0] if embeddings else None)
        if len(unique) < len(rows):                                                   # scatter back
            H, E = H[inverse], (E[inverse] if E is not None else None)
        return H, E
