"""The joint objective: aspect categorization and sentiment as two explicit tasks, optionally with
dynamic task weighting.

QACG-BERT trains one C-way head in which "none" is a class. The joint objective splits the same
output layer into two heads on the shared representation (``--objective joint`` or ``joint-dwa``):

    u = z[none]                    presence logit,  p = σ(u) = P(aspect mentioned)
    s = softmax(z[¬none])          polarity given presence (2 classes SentiHood, 4 SemEval)
    L_cat  = BCE(u, 1[y ≠ none])                      over every example of the batch
    L_sent = CE(z[¬none], y)                          over the examples with y ≠ none only
    L      = T · (w_cat L_cat + w_sent L_sent)        T = 2 tasks, w_cat + w_sent = 1

The two heads are the presence column and the polarity columns of the one ``Linear(d, C)``, so
the parameter count is the single objective's. The factor T keeps the effective learning rate of
the unweighted sum: with the static weights (½, ½) of ``joint``, L = L_cat + L_sent.

Decoding back into the C-way label space, so that every metric of Tables 1-2 is computed from a
probability vector exactly as for the other models (argmax; P(None) for the aspect AUC;
P(Neg) / (P(Pos) + P(Neg)) for the sentiment metrics). With a presence threshold τ
(model field ``joint_tau``, default 0.5), the decoded logits are

    none:  log(1 − p) − log(1 − τ)          polarity k:  log p − log τ + z_k − max_j z_j

so after the softmax the argmax is "none" exactly when p < τ and otherwise the most probable
polarity, the ratios between polarities are those of s, and P(None) ranks examples by 1 − p up to
the confidence of the polarity head. Both p and s are recovered exactly from the decoded
probabilities (:func:`split_probs`), which is how the dev losses are measured without another pass.

Dynamic task weighting (``joint-dwa``): after every epoch, with L̄_t the mean loss of task t on
the dev split (dev rather than train loss, so that a merely noisy task does not capture the weight),

    w_t ← (1 − α) w_t + α · L̄_t / Σ_t′ L̄_t′          α = 0.1, w_t = 1/T at the start

The weights used in each epoch and the dev losses that updated them are recorded per epoch in the
run's metrics record (``task_weights``, ``dev_task_losses``). The weights live in the model's
``task_weights`` buffer, so a resumed run continues with the weights it had.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from absa_lib.errors import AbsaError
from absa_lib.models.registry import OBJECTIVES  # noqa: F401  (absa_lib.models.joint.OBJECTIVES, as before)

TASKS = ("aspect", "sentiment")
DWA_ALPHA = 0.1


def is_joint(config) -> bool:
    return getattr(config, "absa_objective", "single") != "single"


def add_task_weights(model: torch.nn.Module) -> None:
    """Register the ``task_weights`` buffer (1/T each) on a model built with a joint objective."""
    if is_joint(model.config):
        if model.config.num_labels < 3:
            raise AbsaError(f"objective {model.config.absa_objective!r} needs a 'none' class and at least "
                            f"two polarities; this model has {model.config.num_labels} outputs")
        model.register_buffer("task_weights", torch.full((len(TASKS),), 1.0 / len(TASKS)))


def decode(raw: torch.Tensor, none: int, tau: float) -> torch.Tensor:
    """Decoded C-way logits (B, C) from the raw output layer (B, C); see the module docstring."""
    u = raw[:, none]                                                    # (B,)
    others = [k for k in range(raw.size(1)) if k != none]
    z = raw[:, others]                                                  # (B, C-1)
    out = torch.empty_like(raw)
    out[:, none] = F.logsigmoid(-u) - math.log(1 - tau)
    out[:, others] = (F.logsigmoid(u) - math.log(tau))[:, None] + z - z.max(dim=1, keepdim=True).values
    return out


def task_losses(raw: torch.Tensor, labels: torch.Tensor, none: int) -> torch.Tensor:
    """(L_cat, L_sent) of a batch; L_sent is 0 when no example of the batch has an aspect present."""
    present = labels != none
    l_cat = F.binary_cross_entropy_with_logits(raw[:, none], present.to(raw.dtype))
    others = [k for k in range(raw.size(1)) if k != none]
    if not present.any():
        return torch.stack([l_cat, raw.sum() * 0.0])
    target = labels[present] - (labels[present] > none).long()         # polarity index among the others
    return torch.stack([l_cat, F.cross_entropy(raw[present][:, others], target)])


def head(model: torch.nn.Module, raw: torch.Tensor,
         labels: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The model's output logits and loss from its raw output layer (B, C).

    Single objective: ``raw`` and the mean cross-entropy. Joint: decoded logits and
    T · Σ_t w_t L_t with the model's ``task_weights``.
    """
    config = model.config
    if not is_joint(config):
        return raw, (F.cross_entropy(raw, labels) if labels is not None else None)
    none, tau = config.none_label, config.joint_tau
    logits = decode(raw.float(), none, tau)
    if labels is None:
        return logits, None
    weights = model.task_weights.to(raw.dtype)
    return logits, len(TASKS) * (weights * task_losses(raw.float(), labels, none)).sum()


def split_probs(probs: np.ndarray, none: int, tau: float) -> tuple[np.ndarray, np.ndarray]:
    """Invert :func:`decode` after the softmax: (p (N,), s (N, C-1)) from decoded probabilities (N, C)."""
    probs = np.asarray(probs, dtype=np.float64)
    others = [k for k in range(probs.shape[1]) if k != none]
    pol = probs[:, others]
    s = pol / np.clip(pol.sum(axis=1, keepdims=True), 1e-300, None)
    ratio = probs[:, none] / np.clip(pol.max(axis=1), 1e-300, None)     # ((1-p)/(1-τ)) / (p/τ)
    return 1.0 / (1.0 + ratio * (1 - tau) / tau), s


def after_epoch(model: torch.nn.Module, gold: np.ndarray, dev_probs: np.ndarray) -> dict:
    """What an epoch of a joint model records (``{}`` for the single objective), from the dev labels
    ``gold`` (N,) and the dev class probabilities (N, C); ``joint-dwa`` also updates the task weights
    from the dev losses.

    Returns ``{"task_weights": {task: w used this epoch}, "dev_task_losses": {task: L̄}}``.
    """
    config = model.config
    if not is_joint(config):
        return {}
    losses = dev_task_losses(dev_probs, gold, config.none_label, config.joint_tau)
    used = [float(w) for w in model.task_weights.tolist()]
    if config.absa_objective == "joint-dwa":
        new = updated_weights(used, losses)
        model.task_weights.copy_(torch.tensor(new, dtype=model.task_weights.dtype))
    return {"task_weights": dict(zip(TASKS, used, strict=True)),
            "dev_task_losses": dict(zip(TASKS, losses, strict=True))}


def dev_task_losses(probs: np.ndarray, gold: np.ndarray, none: int, tau: float) -> list[float]:
    """Mean L_cat over all dev examples and mean L_sent over those with an aspect present."""
    p, s = split_probs(probs, none, tau)
    p = np.clip(p, 1e-7, 1 - 1e-7)
    present = np.asarray(gold) != none
    l_cat = float(-np.mean(np.where(present, np.log(p), np.log(1 - p))))
    if not present.any():
        return [l_cat, 0.0]
    idx = gold[present] - (gold[present] > none)
    l_sent = float(-np.mean(np.log(np.clip(s[present, idx], 1e-12, None))))
    return [l_cat, l_sent]


def updated_weights(weights: list[float], losses: list[float], alpha: float = DWA_ALPHA) -> list[float]:
    """w_t ← (1 − α) w_t + α L̄_t / Σ L̄ (unchanged when every loss is 0)."""
    total = sum(losses)
    if total <= 0:
        return list(weights)
    return [(1 - alpha) * w + alpha * loss / total for w, loss in zip(weights, losses, strict=True)]
