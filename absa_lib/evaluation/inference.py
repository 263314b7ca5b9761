"""Inference: from encoded inputs to class probabilities, shared by training (dev and test after
every epoch), ``absa predict`` and the figure notebooks.

Inputs go through the model in length-sorted batches (each batch carries almost no padding; the
result does not depend on the order) under the run's precision, and come back in input order. For
the binary input variants (NLI-B, QA-B: one yes/no input per candidate label) the per-label "yes"
scores are pooled into one probability vector per example, as Sun et al.'s evaluation does.

Applying a trained model (``absa predict``, not training's evaluation) can trade exactness for speed
(:func:`for_inference`, :data:`INFERENCE`): ``fp32`` (the default, the run's own numbers), ``bf16``
(autocast; faster only where the CPU or GPU computes bf16 natively) and ``int8`` (CPU: every BERT
linear layer as a dynamically quantized int8 matmul, weights per output channel, activations per
batch, so a row's answer can depend on the rows batched with it). Their price and speed-up, measured
on the full test sets, are in docs/evidence/costs_and_speed.md ("Faster inference on a CPU").
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable

import numpy as np
import torch

from absa_lib.data.features import Encoded, batches, by_length
from absa_lib.data.inputs import B_VARIANTS, pool_binary_scores
from absa_lib.device import autocast, resolve_precision
from absa_lib.errors import AbsaError

INFERENCE = ("fp32", "bf16", "int8")
# Linear layers whose weights the context-guided attention reads directly (the fused C Zᵀ of
# QACG-BERT, CG-BERT's W_c split): they stay float32, like the embeddings and LayerNorms.
READ_AS_WEIGHTS = ("context_layer", "context_for_q", "context_for_k")


def to_device(batch: dict[str, torch.Tensor], device: torch.device, labels: bool = True) -> dict:
    """The batch's tensors on ``device`` (without ``labels`` for inference)."""
    return {k: v.to(device) for k, v in batch.items() if labels or k != "labels"}


@torch.inference_mode()
def predict_probs(model, encoded: list[Encoded], batch_size: int = 64, pad_id: int = 0,
                  precision: str = "fp32", on_batch: Callable[[int], None] | None = None) -> np.ndarray:
    """Softmax probabilities (N, C) of the model's outputs, in input order; ``on_batch(n)`` is called
    after each batch of ``n`` inputs (progress)."""
    model.eval()
    device = next(model.parameters()).device
    precision = resolve_precision(precision, device)
    out = [None] * len(encoded)
    for idx, batch in batches(encoded, by_length(encoded, batch_size), pad_id):
        with autocast(device, precision):
            logits = model(**to_device(batch, device, labels=False)).logits
        for i, row in zip(idx, torch.softmax(logits.float(), dim=-1).cpu().numpy(), strict=True):
            out[i] = row
        if on_batch is not None:
            on_batch(len(idx))
    return np.stack(out)


def class_probabilities(dataset: str, aux: str, probs: np.ndarray) -> np.ndarray:
    """Per-example class probabilities (N, C): the model's own for the C-way variants; for NLI-B and
    QA-B, the per-label yes-scores (N·C rows of 2) pooled into one row per example."""
    if aux in B_VARIANTS:
        return pool_binary_scores(dataset, aux, probs[:, 1])
    return probs


def for_inference(model: torch.nn.Module, mode: str = "fp32") -> tuple[torch.nn.Module, str]:
    """``(model to run, precision to run it under)`` for inference ``mode`` (:data:`INFERENCE`) on the
    model's device: ``int8`` returns a quantized copy (CPU only); ``model`` itself is left as it was."""
    if mode not in INFERENCE:
        raise AbsaError(f"inference {mode!r}: expected one of {', '.join(INFERENCE)}")
    device = next(model.parameters()).device
    if mode != "int8":
        return model, mode
    if device.type != "cpu":
        raise AbsaError(f"inference int8 runs on a CPU (the model is on {device.type}); use bf16 or fast there")
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    linear = {name: per_channel_dynamic_qconfig for name, module in model.named_modules()
              if isinstance(module, torch.nn.Linear) and name.rsplit(".", 1)[-1] not in READ_AS_WEIGHTS}
    with warnings.catch_warnings():             # torch 2.13 marks its quantized tensors deprecated; they work
        warnings.filterwarnings("ignore", message=".*quantize_per_(tensor|channel).*deprecated", category=UserWarning)
        return quantize_dynamic(copy.deepcopy(model).eval(), linear, dtype=torch.qint8), "fp32"
