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

import json
import os
from pathlib import Path

import torch
from safetensors.torch import save_file
from torch import nn

from absa_lib.errors import AbsaError, one_line
from absa_lib.models import backbones
from absa_lib.models.absa_model import DAMAGED, AbsaModel, AbsaOutput, build_model, read_saved_config

MARKER = "per_context.json"


class PerContextModel(nn.Module):
    """K :class:`AbsaModel` sentence classifiers, routed by ``context_ids``."""

    def __init__(self, models: list[AbsaModel]) -> None:
        super().__init__()
        self.models = nn.ModuleList(models)
        self.config = models[0].config

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

    def save_pretrained(self, directory: str | os.PathLike) -> None:
        """``config.json`` (shared), ``model.safetensors`` (all K) and a ``per_context.json`` marker."""
        directory = Path(directory)
        self.models[0].save_pretrained(directory)       # config.json (+ a model file replaced below)
        state = {k: v.detach().cpu().contiguous() for k, v in self.state_dict().items()}
        save_file(state, directory / "model.safetensors", metadata={"format": "pt"})
        (directory / MARKER).write_text(json.dumps({"num_models": len(self.models)}))

    @classmethod
    def from_pretrained(cls, directory: str | os.PathLike) -> PerContextModel:
        directory = Path(directory)
        try:
            k = json.loads((directory / MARKER).read_text())["num_models"]
        except (OSError, ValueError, TypeError, KeyError) as err:
            raise AbsaError(f"{directory / MARKER}: cannot be read ({one_line(err)}); {DAMAGED}") from None
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise AbsaError(f"{directory / MARKER}: expected {{\"num_models\": K}} with K >= 1, got {k!r}; {DAMAGED}")
        config = read_saved_config(directory)
        model = cls([AbsaModel(config) for _ in range(k)])
        state = backbones.read_safetensors(directory / "model.safetensors", DAMAGED)
        missing, unexpected = set(model.state_dict()) - set(state), set(state) - set(model.state_dict())
        if missing or unexpected:
            raise AbsaError(f"{directory / 'model.safetensors'}: keys do not match a {k}-model bert-single "
                            f"({len(missing)} missing, {len(unexpected)} unexpected)")
        model.load_state_dict(state, strict=True)
        return model.eval()


def build_per_context(*, backbone: str, num_labels: int, num_contexts: int, **kwargs) -> PerContextModel:
    """``num_contexts`` independently initialised ``bert-single`` classifiers on ``backbone``."""
    return PerContextModel([build_model("bert-single", backbone=backbone, num_labels=num_labels,
                                        num_contexts=num_contexts, **kwargs) for _ in range(num_contexts)])


def load_model(directory: str | os.PathLike) -> AbsaModel | PerContextModel:
    """Load any saved absa_lib model (a single model or a bert-single set)."""
    if (Path(directory) / MARKER).is_file():
        return PerContextModel.from_pretrained(directory)
    return AbsaModel.from_pretrained(directory)
