"""The optimizer and learning-rate schedule of training (docs/paper_notes.md §4.2).

AdamW with weight decay except on biases and LayerNorm; learning rate ``lr`` for the pretrained
encoder and ``lr × head_lr_mult`` for the head (classifier, pooler and context layers); linear
warm-up over the first ``warmup`` fraction of the steps, then linear decay to 0 (the paper's) or
constant. ``absa bench`` times its training steps with the same AdamW.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from absa_lib.models.attention import new_module
from absa_lib.training.config import TrainConfig

# Parameters outside the pretrained encoder: the classifier, the pooler (MiniLM's was never trained
# for classification) and the context layers of CG/QACG. ``head_lr_mult`` scales their learning rate.
HEAD_PREFIXES = ("classifier", "bert.pooler", "context_embeddings")


def adamw(params: Iterable, **kwargs) -> torch.optim.AdamW:
    """``torch.optim.AdamW``, with the fused kernel (one pass over all tensors, ~5x faster than the
    for-each one on a CPU) where this torch build has it."""
    params = list(params)
    try:
        return torch.optim.AdamW(params, fused=True, **kwargs)
    except (RuntimeError, ValueError):
        return torch.optim.AdamW(params, **kwargs)


def build_optimizer(model: torch.nn.Module, config: TrainConfig) -> torch.optim.AdamW:
    """AdamW; weight decay except on biases and LayerNorm. Base rates: ``config.lr``, or the model's
    own ``head_lr`` for the new layers of ATAE, MAN and OA; × ``head_lr_mult`` for the head. Each
    parameter group keeps its rate as ``base_lr`` (the schedule scales it)."""
    head_lr = getattr(model, "head_lr", None)
    groups = {}
    for name, p in model.named_parameters():
        if p.requires_grad:
            decay = not (name.endswith("bias") or "LayerNorm" in name or "layer_norm" in name)
            lr = head_lr if head_lr and not name.startswith("bert.") else config.lr
            lr *= config.head_lr_mult if is_head(name) else 1.0
            group = groups.setdefault((decay, lr), {"params": [], "base_lr": lr,
                                                    "weight_decay": config.weight_decay if decay else 0.0})
            group["params"].append(p)
    return adamw(list(groups.values()), lr=config.lr, eps=config.adam_eps)


def is_head(name: str) -> bool:
    """The classifier, pooler and context layers (bert-single: of each of its ``models.<k>.``)."""
    if name.startswith("models."):
        name = name.split(".", 2)[-1]
    return name.startswith(HEAD_PREFIXES) or new_module(name) is not None


def lr_factor(step: int, total: int, warmup: float, schedule: str = "linear") -> float:
    """Linear warm-up to 1 over ``warmup·total`` steps, then linear decay to 0 at ``total``
    (``linear``, the paper's) or 1 until the end (``constant``)."""
    w = max(1, int(round(warmup * total)))
    if step < w:
        return (step + 1) / w
    return 1.0 if schedule == "constant" else max(0.0, (total - step) / max(1, total - w))


def set_lr(optimizer: torch.optim.Optimizer, step: int, total: int, warmup: float, schedule: str = "linear") -> None:
    """Each parameter group's rate for optimizer step ``step`` of ``total``: its ``base_lr`` (set by
    :func:`build_optimizer`) × :func:`lr_factor`."""
    factor = lr_factor(step, total, warmup, schedule)
    for group in optimizer.param_groups:
        group["lr"] = group["base_lr"] * factor
