"""BERT-single (Sun et al. 2019): one independent sentence classifier per context.

For SentiHood that is one model per (target, aspect) pair (8), for SemEval one per aspect category
(5); each reads the sentence alone and sees only the examples of its own context. Here the K models
are held in one module and trained in the same loop: every batch is split by context id and each
part goes through its own model. The parameters are disjoint, so this is K separate classifiers;
what they share is the learning-rate schedule, the global gradient-norm clip and the batches they
are drawn from (Sun et al. trained K separate runs). Adam skips a sub-model whose examples are
absent from a batch (its gradients are None).
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from absa_lib.errors import AbsaError
from absa_lib.models.absa_model import AbsaModel, AbsaOutput, build_model
from absa_lib.models.model_config import AbsaConfig
from absa_lib.models.pretrained import AbsaPreTrainedModel


class PerContextModel(AbsaPreTrainedModel):
    """K :class:`AbsaModel` sentence classifiers, routed by ``context_ids``.

    Its config is the classifiers' with ``per_context_models = K``, which is how
    ``from_pretrained`` tells a saved set from a single model.
    """

    def __init__(self, config: AbsaConfig, models: list[AbsaModel] | None = None) -> None:
        config = copy.deepcopy(config)
        k = getattr(config, "per_context_models", None) or len(models or ())
        if k < 1:
            raise AbsaError("a bert-single set needs at least one classifier")
        config.per_context_models = k
        super().__init__(config)
        inner = copy.deepcopy(config)
        del inner.per_context_models
        self.models = nn.ModuleList(models if models is not None else [AbsaModel(inner) for _ in range(k)])
        self.post_init()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                token_type_ids: torch.Tensor | None = None, context_ids: torch.Tensor | None = None,
                labels: torch.Tensor | None = None, output_components: bool = False) -> AbsaOutput:
        if context_ids is None:
            raise AbsaError("bert-single needs context_ids: it keeps one classifier per context")
        logits = None
        for c in context_ids.unique().tolist():
            rows = (context_ids == c).nonzero(as_tuple=True)[0]               # this context's examples
            part = self.models[c](input_ids[rows], attention_mask[rows],
                                  None if token_type_ids is None else token_type_ids[rows]).logits
            if logits is None:
                logits = part.new_zeros((input_ids.size(0), part.size(-1)))    # (B, C)
            logits = logits.index_copy(0, rows, part)
        loss = nn.functional.cross_entropy(logits, labels) if labels is not None else None
        return AbsaOutput(logits=logits, loss=loss)


def build_per_context(*, backbone: str, num_labels: int, num_contexts: int, **kwargs) -> PerContextModel:
    """``num_contexts`` independently initialised ``bert-single`` classifiers on ``backbone``."""
    models = [build_model("bert-single", backbone=backbone, num_labels=num_labels, num_contexts=num_contexts,
                          **kwargs) for _ in range(num_contexts)]
    return PerContextModel(models[0].config, models)
