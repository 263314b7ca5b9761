"""Is a difference real? The Almost Stochastic Order test over seeds, a paired bootstrap over test
sentences, and the one verdict rule.

The paper's claims are differences of about one point between models trained with a few seeds.
The companion decides each with the Almost Stochastic Order (ASO) test of Dror et al. (2019), as
``deepsig`` implements it (Ulmer et al. 2022; :func:`eps_min` is deepsig's ``aso`` in numpy arrays,
the same numbers for the same seed, a test checks it, a thousand times faster): for the scores of A
and B over seeds, ε_min(A, B) is
an upper bound on how far A's score distribution violates stochastic dominance over B's (0: A is
better everywhere; 1: B is). It sees the variation between seeds (training), not that of the test
set: when both sides' runs kept their predictions (:mod:`absa_lib.evaluation.kept`),
:func:`paired_bootstrap` adds a 95% interval of the difference A − B (mean over the seeds) under
resampling the test set (Berg-Kirkpatrick et al. 2012): whole SentiHood (sentence, target) groups and
whole SemEval sentences, the units the metrics are computed over, the same draws for A and B.

The rule, the same everywhere (``absa compare``, the claims table):

- **A better** when ε_min(A, B) < :data:`TAU` and, where there is an interval, it lies above 0;
- **B better** when ε_min(B, A) < :data:`TAU` and, where there is an interval, it lies below 0;
- **no detectable difference** otherwise.

``TAU`` = 0.2 is the threshold Ulmer et al. recommend (ε_min < 0.5 is the bare definition of almost
stochastic dominance; 0.2 keeps the error rate low with few seeds). A gain must survive both sources
of variation the evidence covers. With three seeds a side the ASO test can only see large, consistent
gaps: "no detectable difference" is not "no difference".
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from absa_lib.data.datasets import group_size
from absa_lib.errors import AbsaError
from absa_lib.evaluation.metrics import compute_metrics

TAU = 0.2
RULE = (f"A better when ε_min(A, B) < {TAU}, B better when ε_min(B, A) < {TAU} (the Almost Stochastic Order "
        "test over seeds, Dror et al. 2019, deepsig), and, where the runs kept their predictions, the paired bootstrap "
        "95% CI of A − B over test sentences on the same side of 0; otherwise no detectable difference")
VERDICTS = ("A better", "B better", "no detectable difference")


DT = 0.005                   # deepsig's step of the integral over t in (0, 1)
BOOTSTRAP = 1000             # deepsig's bootstrap iterations
CONFIDENCE = 0.95            # deepsig's confidence level


def _quantiles(scores: np.ndarray, p: np.ndarray) -> np.ndarray:
    """The empirical quantile function of each row of ``scores`` (..., n) at ``p`` (..., k), as deepsig
    defines it: the ceil(n p)-th smallest score."""
    ordered = np.sort(scores, axis=-1)
    n = scores.shape[-1]
    index = np.clip(np.ceil(n * p).astype(int) - 1, 0, n - 1)
    lead = np.broadcast_shapes(ordered.shape[:-1], index.shape[:-1])
    return np.take_along_axis(np.broadcast_to(ordered, (*lead, n)), np.broadcast_to(index, (*lead, index.shape[-1])),
                              axis=-1)


def _violation_ratio(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """ε_W2 of Dror et al. (2019), Eqs. 4-5, for each row pair of ``a`` (..., n) and ``b`` (..., m):
    the share of the squared Wasserstein distance between the quantile functions F⁻¹, G⁻¹ where
    F⁻¹(t) < G⁻¹(t), integrated over t = dt, 2dt, ... < 1 (0.5 where the distance is 0)."""
    t = np.arange(DT, 1, DT)
    f, g = _quantiles(a, t), _quantiles(b, t)
    diff = g - f
    distance = np.sum(diff ** 2 * DT, axis=-1)
    violated = np.where(f >= g, 0.0, diff)[..., 1:]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(distance == 0, 0.5, np.sum(violated ** 2 * DT, axis=-1) / np.where(distance == 0, 1, distance))


@functools.lru_cache(maxsize=64)
def _uniform_draws(seed: int, n_a: int, n_b: int) -> tuple[np.ndarray, np.ndarray]:
    """deepsig's bootstrap draws: iteration k takes n_a then n_b uniforms from RandomState(seed + k).
    The same for every pair of score lists of these sizes, so made once (a thousand generators cost
    more than the rest of the test)."""
    draws = [np.random.RandomState(seed + k) for k in range(1, BOOTSTRAP + 1)]
    u = [(r.uniform(0, 1, n_a), r.uniform(0, 1, n_b)) for r in draws]
    u_a, u_b = np.stack([x for x, _ in u]), np.stack([y for _, y in u])        # (BOOTSTRAP, n) each
    u_a.flags.writeable = u_b.flags.writeable = False
    return u_a, u_b


def eps_min(scores_a, scores_b, seed: int = 0) -> float:
    """ASO's ε_min(A, B) for the scores of A and B (higher is better), as deepsig's ``aso(scores_a,
    scores_b, seed=seed)`` computes it: the violation ratio less a bootstrap bound on its error
    (iteration k draws from numpy's generator seeded ``seed + k``), clipped to [0, 1]."""
    a, b = np.asarray(scores_a, dtype=float), np.asarray(scores_b, dtype=float)
    if a.ndim != 1 or b.ndim != 1 or len(a) < 2 or len(b) < 2:
        raise AbsaError(f"ASO needs at least two scores a side, got {len(np.atleast_1d(a))} and "
                        f"{len(np.atleast_1d(b))}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise AbsaError("ASO needs finite scores; a NaN metric (undefined, e.g. an AUC without both classes) "
                        "cannot be compared")
    u_a, u_b = _uniform_draws(seed, len(a), len(b))
    sampled_a = _quantiles(a[None, :], u_a)
    sampled_b = _quantiles(b[None, :], u_b)
    observed = float(_violation_ratio(a, b))
    const = np.sqrt(len(a) * len(b) / (len(a) + len(b)))
    sigma = np.std(const * (_violation_ratio(sampled_a, sampled_b) - observed))
    return float(np.clip(observed - sigma / const * norm.ppf(1 - CONFIDENCE), 0, 1))


@dataclass(frozen=True)
class Verdict:
    """The verdict on one metric: ε_min both ways and what the rule says."""

    eps_a_over_b: float
    eps_b_over_a: float
    verdict: str

    @classmethod
    def of(cls, scores_a, scores_b, seed: int = 0, ci: tuple[float, float] | None = None) -> Verdict:
        """The rule applied to the seeds' scores and, when given, the bootstrap interval of A − B."""
        ab, ba = eps_min(scores_a, scores_b, seed), eps_min(scores_b, scores_a, seed)
        a_better = ab < TAU and (ci is None or ci[0] > 0)
        b_better = ba < TAU and (ci is None or ci[1] < 0)
        return cls(ab, ba, VERDICTS[0] if a_better else VERDICTS[1] if b_better else VERDICTS[2])


def paired_differences(scores_a: dict, scores_b: dict) -> dict[int, float]:
    """A − B per seed, for the seeds both sides have (each side: ``{seed: score}``); unpaired seeds
    are an error naming them (a seed-by-seed difference needs both runs of each seed)."""
    only = sorted(set(scores_a) ^ set(scores_b))
    if only:
        raise AbsaError(f"seeds {', '.join(map(str, only))} are on one side only; compare runs of the same seeds "
                        f"(A has {sorted(scores_a)}, B has {sorted(scores_b)})")
    return {s: scores_a[s] - scores_b[s] for s in sorted(scores_a)
            if not (math.isnan(scores_a[s]) or math.isnan(scores_b[s]))}


SAMPLES = 1000               # bootstrap draws of the test set


def paired_bootstrap(dataset: str, gold, probs_a: list, probs_b: list, metrics: tuple[str, ...],
                     samples: int = SAMPLES, seed: int = 0, level: float = 0.95) -> dict[str, tuple[float, float]]:
    """The ``level`` interval (percentile bootstrap) of A − B for each metric, in points: each draw
    takes the test set's groups (SentiHood: a (sentence, target)'s 4 aspects; SemEval: a sentence's 5)
    with replacement, scores every seed's predictions of A and of B on it and records the mean over the
    seeds of A − B.

    Args:
        gold: (N,) label ids of the test set, in canonical order (whole groups).
        probs_a, probs_b: each seed's (N, C) class probabilities, paired by position (the same seeds).
        metrics: the metric keys of :func:`~absa_lib.evaluation.metrics.compute_metrics`.

    A draw where a metric is undefined (an AUC whose resampled aspect has one class) is left out of
    that metric's interval.
    """
    gold = np.asarray(gold)
    if not probs_a or len(probs_a) != len(probs_b):
        raise AbsaError(f"paired bootstrap: {len(probs_a)} and {len(probs_b)} runs; pair each seed of A with B's")
    if any(np.shape(p) != np.shape(probs_a[0]) or len(p) != len(gold) for p in (*probs_a, *probs_b)):
        raise AbsaError("paired bootstrap: every run's probabilities must cover the same test examples (N, C)")
    size = group_size(dataset)
    n_groups = len(gold) // size
    rng = np.random.default_rng(seed)
    diffs = np.empty((samples, len(metrics)))
    for i in range(samples):
        rows = (rng.integers(0, n_groups, n_groups)[:, None] * size + np.arange(size)).ravel()
        g = gold[rows]
        per_seed = [[ma[k] - mb[k] for k in metrics] for ma, mb in
                    ((compute_metrics(dataset, g, pa[rows], metrics), compute_metrics(dataset, g, pb[rows], metrics))
                     for pa, pb in zip(probs_a, probs_b, strict=True))]
        diffs[i] = 100.0 * np.mean(per_seed, axis=0)
    tail = 100 * (1 - level) / 2
    with np.errstate(all="ignore"):
        return {k: (float(np.nanpercentile(diffs[:, j], tail)), float(np.nanpercentile(diffs[:, j], 100 - tail)))
                for j, k in enumerate(metrics)}
