"""Where and in which precision tensors are computed.

``--precision`` (training, evaluation, ``predict``, ``bench``):

- ``fp32``: everything in float32.
- ``bf16``: matrix products and attention under ``torch.autocast(dtype=bfloat16)``; the master
  weights, the optimizer state, the loss, the softmax outputs and the context gates (λ) stay float32.
- ``auto``: ``bf16`` on CUDA and on CPUs with native bf16 instructions (AVX512-BF16 / AMX);
  ``fp32`` elsewhere, where emulated bf16 is much slower (a bf16 matrix product measured 37x slower
  than fp32 on an AVX2-only CPU).

A run records the *resolved* precision (``bf16`` or ``fp32``), never ``auto``: the same request on a
machine without bf16 is a different run.
"""

from __future__ import annotations

import contextlib
import functools

import torch

from absa_lib.errors import AbsaError

PRECISIONS = ("auto", "fp32", "bf16")


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


@functools.cache
def cpu_has_native_bf16() -> bool:
    """True when this CPU executes bf16 dot products natively (oneDNN reports AVX512-BF16 or AMX)."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def resolve_precision(precision: str, device: torch.device) -> str:
    """``auto`` -> ``bf16`` or ``fp32`` for ``device``; ``fp32`` / ``bf16`` are returned unchanged."""
    if precision not in PRECISIONS:
        raise AbsaError(f"precision={precision!r} is not one of {', '.join(PRECISIONS)}")
    if precision != "auto":
        return precision
    return "bf16" if device.type == "cuda" or cpu_has_native_bf16() else "fp32"


def autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    """The autocast context for a resolved ``precision`` (a no-op for ``fp32``)."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16")
