"""Inference: from encoded inputs to class probabilities, shared by training (dev and test after
every epoch), ``absa predict`` and the figure notebooks.

Inputs go through the model in length-sorted batches (each batch carries almost no padding; the
result does not depend on the order) under the run's precision, and come back in input order. For
the binary input variants (NLI-B, QA-B: one yes/no input per candidate label) the per-label "yes"
scores are pooled into one probability vector per example, as Sun et al.'s evaluation does.
"""

from __future__ import annotations

import numpy as np
import torch

from absa_lib.data.features import Encoded, batches, by_length
from absa_lib.data.inputs import B_VARIANTS, pool_binary_scores
from absa_lib.device import autocast, resolve_precision


def to_device(batch: dict[str, torch.Tensor], device: torch.device, labels: bool = True) -> dict:
    """The batch's tensors on ``device`` (without ``labels`` for inference)."""
    return {k: v.to(device) for k, v in batch.items() if labels or k != "labels"}


@torch.inference_mode()
def predict_probs(model, encoded: list[Encoded], batch_size: int = 64, pad_id: int = 0,
                  precision: str = "fp32") -> np.ndarray:
    """Softmax probabilities (N, C) of the model's outputs, in input order."""
    model.eval()
    device = next(model.parameters()).device
    precision = resolve_precision(precision, device)
    out = [None] * len(encoded)
    for idx, batch in batches(encoded, by_length(encoded, batch_size), pad_id):
        with autocast(device, precision):
            logits = model(**to_device(batch, device, labels=False)).logits
        for i, row in zip(idx, torch.softmax(logits.float(), dim=-1).cpu().numpy(), strict=True):
            out[i] = row
    return np.stack(out)


def class_probabilities(dataset: str, aux: str, probs: np.ndarray) -> np.ndarray:
    """Per-example class probabilities (N, C): the model's own for the C-way variants; for NLI-B and
    QA-B, the per-label yes-scores (N·C rows of 2) pooled into one row per example."""
    if aux in B_VARIANTS:
        return pool_binary_scores(dataset, aux, probs[:, 1])
    return probs
