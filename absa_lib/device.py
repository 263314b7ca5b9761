"""Where and in which precision tensors are computed.

``--precision`` (training, evaluation, ``predict``, ``bench``):

- ``fp32``: everything in float32.
- ``bf16``: matrix products and attention under ``torch.autocast(dtype=bfloat16)``; the master
  weights, the optimizer state, the loss, the softmax outputs and the context gates (λ) stay float32.
- ``fp16``: the same under ``dtype=float16``, with loss scaling in training (:func:`grad_scaler`):
  float16 keeps 10 mantissa bits but its range ends at 65504 and its gradients underflow below
  6e-8, so the loss is scaled up before ``backward`` and the gradients down before clipping.
- ``auto``: ``bf16`` where it is native: GPUs with bf16 units (compute capability 8.0 on: A100,
  H100, L4) and CPUs with AVX512-BF16 / AMX; ``fp16`` on older GPUs (a T4 or V100 has float16 units
  only, and would emulate bf16); ``fp32`` on other CPUs, where emulated bf16 is much slower (a bf16
  matrix product measured 37x slower than fp32 on an AVX2-only CPU).

A run records the *resolved* precision (``bf16``, ``fp16`` or ``fp32``), never ``auto``: the same
request on a machine without bf16 is a different run.

``--compile`` (training): the training step's forward and backward through ``torch.compile``.

- ``none``: eager PyTorch.
- ``default``: TorchInductor's fused kernels (fewer, larger kernels; the first batches of each
  new input shape pay for compilation).
- ``reduce-overhead``: the same, replayed as CUDA graphs: a MiniLM-size step is bound by kernel
  launches on a GPU, and a graph replay launches the whole step at once. On a CPU it is ``default``.

Compiled training pads each batch to a multiple of :data:`COMPILE_PAD_MULTIPLE` tokens, so a run
sees a handful of input shapes instead of one per length (padding is masked out; the math is the
same), and after the second length one graph serves them all. BERT-single's stacked step (mixed
batches) pads every batch to the run's ``max_length``: its graph cannot take a length as a
variable, so each length would be compiled anew (``PerContextModel.stacked``). The compiled step
draws its dropout masks from a different random stream, so a compiled run is a different run
(the setting is part of its identity), as a different seed would be.
"""

from __future__ import annotations

import contextlib
import functools
from typing import TYPE_CHECKING

from absa_lib.errors import AbsaError

if TYPE_CHECKING:       # torch is imported where it is used: the names below cost nothing (absa train --help)
    import torch

PRECISIONS = ("auto", "fp32", "bf16", "fp16")
_AUTOCAST = {"bf16": "bfloat16", "fp16": "float16"}     # the precisions computed under autocast (torch dtypes)
COMPILE_MODES = ("none", "default", "reduce-overhead")
COMPILE_PAD_MULTIPLE = 16


def default_device() -> torch.device:
    import torch

    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


@functools.cache
def cpu_has_native_bf16() -> bool:
    """True when this CPU executes bf16 dot products natively (oneDNN reports AVX512-BF16 or AMX)."""
    import torch

    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def native_bf16(device: torch.device) -> bool:
    """True when ``device`` computes bf16 in hardware (not emulated through float32)."""
    import torch

    if device.type == "cuda":
        return torch.cuda.is_bf16_supported(including_emulation=False)
    return cpu_has_native_bf16()


def resolve_precision(precision: str, device: torch.device) -> str:
    """``auto`` -> ``bf16``, ``fp16`` or ``fp32`` for ``device``; the others are returned unchanged."""
    if precision not in PRECISIONS:
        raise AbsaError(f"precision={precision!r} is not one of {', '.join(PRECISIONS)}")
    if precision != "auto":
        return precision
    if native_bf16(device):
        return "bf16"
    return "fp16" if device.type == "cuda" else "fp32"


def autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    """The autocast context for a resolved ``precision`` (a no-op for ``fp32``)."""
    import torch

    return torch.autocast(device.type, dtype=getattr(torch, _AUTOCAST.get(precision, "bfloat16")),
                          enabled=precision in _AUTOCAST)


def grad_scaler(device: torch.device, precision: str) -> torch.amp.GradScaler:
    """Loss scaling for ``fp16`` training: ``scale(loss).backward()``, ``unscale_`` before clipping,
    ``step`` (skipped when a gradient overflowed, the scale then halved), ``update``. For ``fp32`` and
    ``bf16`` (float32's range) it is disabled: every call passes through, the step is the optimizer's."""
    import torch

    return torch.amp.GradScaler(device.type, enabled=precision == "fp16")


def pad_multiple(mode: str, routing: str | None = None, max_length: int = 128) -> int:
    """What batches are padded to a multiple of under compile ``mode`` (1: the longest input), for a
    step that routes by ``routing`` (``compiled``'s): ``max_length``, one length, for ``stacked``."""
    if mode == "none":
        return 1
    return max_length if routing == "stacked" else COMPILE_PAD_MULTIPLE


def compiled(model: torch.nn.Module, mode: str, routing: str | None = None):
    """``model`` itself for ``none``, else its ``torch.compile`` wrapper (shares the parameters;
    save and evaluate through ``model``). Shapes start static; a second length makes them dynamic.
    ``routing`` (bert-single): its compiled step instead, ``model.compiled_step``: ``sparse`` or
    ``dense`` with each classifier compiled on its own, or ``stacked`` as one batched model."""
    if mode not in COMPILE_MODES:
        raise AbsaError(f"compile={mode!r} is not one of {', '.join(COMPILE_MODES)}")
    if mode == "none":
        return model
    import torch

    mode = None if mode == "default" else mode
    return model.compiled_step(mode, routing) if routing else torch.compile(model, mode=mode)
