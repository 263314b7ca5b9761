"""Is a difference real? A paired t-test over seeds with Holm's correction, the Almost Stochastic
Order test, a paired bootstrap over test sentences, and the one verdict rule that combines them.

The paper's claims are differences of about one point between models trained with a few seeds.
Three kinds of evidence bear on each:

- **the seeds, paired**: A − B per seed (both runs of a seed share its data order), their mean and the
  95% t interval of the mean; the paired t-test's p-value (:class:`SeedTest`). Its error rate is 5% at
  any number of seeds when the per-seed differences are normal, which is what makes it the deciding
  test at three seeds;
- **the seeds' distributions**: ε_min(A, B) of the Almost Stochastic Order (ASO) test of Dror et al.
  (2019), as ``deepsig`` computes it (Ulmer et al. 2022; :func:`eps_min` gives deepsig's numbers for the
  same seed, a test checks it): an upper bound on how far A's score distribution violates stochastic
  dominance over B's (0: A is better everywhere; 1: B is). With three seeds a side it is 0 whenever
  all three of A's scores beat all three of B's, which happens in one case in 20 per direction when
  there is no difference at all: alone it names a false winner in about one row in six;
- **the test sentences**: when both sides' runs kept their predictions (:mod:`absa_lib.evaluation.kept`),
  :func:`paired_bootstrap`'s 95% interval of A − B (mean over the seeds) under resampling the test set
  (Berg-Kirkpatrick et al. 2012): whole SentiHood (sentence, target) groups and whole SemEval
  sentences, the same draws for A and B.

The rule, the same everywhere (``absa compare``, the claims table), for a family of m comparisons:

- **A better** when the paired t-test's p-value, Holm-adjusted over the family, is below
  :data:`ALPHA` with a positive mean, ε_min(A, B) < :data:`TAU`, and, where there is a bootstrap
  interval, it lies above 0;
- **B better** symmetrically;
- **undecided at n seeds** otherwise: the seeds cannot tell, which is not "equal".

The t-test decides; ASO and the bootstrap can only veto. So under no true difference a row names a
winner at most as often as the t-test alone (5%), and Holm keeps the chance of any false winner in the
family at 5%. The family: the rows of one budget in the claims table (the 25-epoch rows are the
paper's claims, the one-epoch rows early training; each is one reading of the evidence), the metrics
of one ``absa compare``. Beside each verdict, :func:`min_detectable` gives the smallest true gain the
rule would report 80% of the time with the row's seeds, on average over what those seeds leave
unknown about the spread of the differences (the spread is estimated from them, not known), at
Holm's first step (α/m); :func:`simulate_printed_mdd` checks it by simulation.
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass, replace

import numpy as np
from scipy import optimize, stats

from absa_lib.data.datasets import group_size
from absa_lib.errors import AbsaError
from absa_lib.evaluation.metrics import compute_metrics

ALPHA = 0.05                 # the family's error rate: the chance of naming any false winner
TAU = 0.2                    # ASO's veto: ε_min must be below it (Ulmer et al.'s threshold)
POWER = 0.8                  # the minimum detectable difference: found this often
RULE = (f"A better when the paired t-test over seeds rejects no difference at {ALPHA:.0%} after Holm's correction "
        f"over the family, the mean A − B is positive, ASO's ε_min(A, B) < {TAU} (deepsig) and, where the runs kept "
        "their predictions, the paired bootstrap 95% interval over test sentences lies above 0; B better "
        "symmetrically; otherwise undecided at that number of seeds (not \"equal\")")
DECIDED = ("A better", "B better")


def undecided(n: int) -> str:
    """The verdict when the evidence of ``n`` paired seeds cannot decide."""
    return f"undecided at {n} seeds"


def no_spread(n: int, difference: float) -> str:
    """The verdict when the ``n`` paired differences are all ``difference``: a t-test has no spread to
    test against (p is not 0), so nothing is decided."""
    return f"undecided: {n} identical differences ({difference:+.1f} each), no spread to test"


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


@functools.lru_cache(maxsize=64)
def _steps(n_a: int, n_b: int) -> tuple[np.ndarray, ...]:
    """deepsig's grid t = dt, 2dt, ... < 1 cut into the steps where both quantile functions are constant:
    the order statistic of A and of B on each step and the step's width (its grid points × dt), in all
    and without the first grid point (left out of the violation, as deepsig does)."""
    t = np.arange(DT, 1, DT)
    i_a, i_b = (np.clip(np.ceil(n * t).astype(int) - 1, 0, n - 1) for n in (n_a, n_b))
    starts = np.flatnonzero(np.r_[True, (i_a[1:] != i_a[:-1]) | (i_b[1:] != i_b[:-1])])
    width = np.diff(np.r_[starts, len(t)]) * DT
    violated = width.copy()
    violated[0] -= DT
    return i_a[starts], i_b[starts], width, violated


def _violation_ratio(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """ε_W2 of Dror et al. (2019), Eqs. 4-5, for each row pair of ``a`` (..., n) and ``b`` (..., m):
    the share of the squared Wasserstein distance between the quantile functions F⁻¹, G⁻¹ where
    F⁻¹(t) < G⁻¹(t), integrated over deepsig's grid (0.5 where the distance is 0). Both quantile
    functions are steps, so the integral is a sum over the steps (:func:`_steps`)."""
    i_a, i_b, width, violated_width = _steps(a.shape[-1], b.shape[-1])
    f, g = np.sort(a, axis=-1)[..., i_a], np.sort(b, axis=-1)[..., i_b]
    diff = g - f
    distance = np.sum(diff ** 2 * width, axis=-1)
    violated = np.sum(np.where(f >= g, 0.0, diff) ** 2 * violated_width, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(distance == 0, 0.5, violated / np.where(distance == 0, 1, distance))


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


def eps_min_rows(scores_a: np.ndarray, scores_b: np.ndarray, seed: int = 0) -> np.ndarray:
    """:func:`eps_min` of each row pair of ``scores_a`` (R, n) and ``scores_b`` (R, m), in one pass."""
    a, b = np.asarray(scores_a, dtype=float), np.asarray(scores_b, dtype=float)
    u_a, u_b = _uniform_draws(seed, a.shape[-1], b.shape[-1])
    sampled_a = _quantiles(a[:, None, :], u_a[None])                           # (R, BOOTSTRAP, n)
    sampled_b = _quantiles(b[:, None, :], u_b[None])
    observed = _violation_ratio(a, b)                                          # (R,)
    const = np.sqrt(a.shape[-1] * b.shape[-1] / (a.shape[-1] + b.shape[-1]))
    sigma = np.std(const * (_violation_ratio(sampled_a, sampled_b) - observed[:, None]), axis=-1)
    return np.clip(observed - sigma / const * stats.norm.ppf(1 - CONFIDENCE), 0, 1)


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
    return float(eps_min_rows(a[None], b[None], seed)[0])


@dataclass(frozen=True)
class SeedTest:
    """The paired seeds' evidence: ``n`` differences A − B, their ``mean`` and ``sd``, the 95% t interval
    of the mean (``low``, ``high``) and the paired t-test's two-sided ``p`` (no difference)."""

    n: int
    mean: float
    sd: float
    low: float
    high: float
    p: float

    @classmethod
    def of(cls, differences) -> SeedTest:
        d = np.asarray(differences, dtype=float)
        n, mean = len(d), float(np.mean(d))
        sd = float(np.std(d, ddof=1))
        half = float(stats.t.ppf(0.975, n - 1)) * sd / math.sqrt(n)
        if sd == 0:                                   # identical differences: no spread to test against, so
            p = 1.0                                   # no evidence (not p = 0; the verdict says why)
        else:
            p = float(2 * stats.t.sf(abs(mean) / (sd / math.sqrt(n)), n - 1))
        return cls(n, mean, sd, mean - half, mean + half, p)


def holm(pvalues) -> list[float]:
    """Holm's step-down adjustment: the k-th smallest of m p-values times (m − k + 1), kept monotone,
    at most 1. Rejecting where the adjusted value is below α keeps the chance of any false rejection
    among the m at α, whatever the dependence between them."""
    p = np.asarray(pvalues, dtype=float)
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, np.maximum.accumulate(p[order] * (len(p) - np.arange(len(p)))))
    out = np.empty_like(p)
    out[order] = scaled
    return out.tolist()


SPREAD_GRID = 4000           # equal-probability points of the spread's sampling distribution (expected power)


def _spread_ratios(df: int) -> np.ndarray:
    """σ̂/σ at the midpoints of ``SPREAD_GRID`` equal-probability bins of its sampling distribution,
    sqrt(χ²_df / df): what an sd estimated from df + 1 values may be, relative to the true one."""
    return np.sqrt(stats.chi2.ppf((np.arange(SPREAD_GRID) + 0.5) / SPREAD_GRID, df) / df)


def power_known(delta: float, sd: float, n: int, alpha: float = ALPHA) -> float:
    """The paired t-test's power (level ``alpha``, two-sided, the right sign) at a true mean difference
    ``delta`` for ``n`` seeds whose differences spread by exactly ``sd``: P(T > t_{1−α/2, n−1}) with T
    noncentral t (n − 1 degrees, noncentrality δ√n / sd)."""
    return float(stats.nct.sf(stats.t.ppf(1 - alpha / 2, n - 1), n - 1, delta * math.sqrt(n) / sd))


def expected_power(delta: float, sd: float, n: int, alpha: float = ALPHA, spread_df: int | None = None) -> float:
    """:func:`power_known` averaged over what ``sd`` leaves unknown when it was estimated from
    ``spread_df`` + 1 values (default: the ``n`` seeds themselves, ``n − 1`` degrees): the true spread
    is ``sd`` · sqrt(df / χ²_df). Equivalently (everything scales with the spread) the chance that a
    fresh set of ``n`` seeds finds a true gain of ``delta`` when ``delta`` was set from an estimated
    ``sd``, averaged over the estimate."""
    df = n - 1 if spread_df is None else spread_df
    crit = stats.t.ppf(1 - alpha / 2, n - 1)
    return float(np.mean(stats.nct.sf(crit, n - 1, delta * math.sqrt(n) / sd * _spread_ratios(df))))


def _solve(found, sd: float) -> float:
    high = sd
    while found(high) < 0:
        high *= 2
    return float(optimize.brentq(found, 0.0, high, xtol=1e-9 * sd))


def min_detectable_known(sd: float, n: int, alpha: float = ALPHA, power: float = POWER) -> float:
    """The MDD as if the seeds' spread ``sd`` were the true one (:func:`power_known` = ``power``): the
    figure the claims table printed before issue 86. With the spread estimated from three seeds, a
    true gain of this size is found about 62% of the time on average, not 80% (docs/evidence/verdict_rule.md).
    NaN without a spread, as :func:`min_detectable`."""
    if n < 2 or not math.isfinite(sd) or sd == 0:
        return math.nan
    return _solve(lambda delta: power_known(delta, sd, n, alpha) - power, sd)


def min_detectable(sd: float, n: int, alpha: float = ALPHA, power: float = POWER, spread_df: int | None = None) -> float:
    """The minimum detectable difference: the true mean difference δ that the paired t-test at level
    ``alpha`` (two-sided) finds with the right sign ``power`` of the time *on average over the
    uncertainty of the spread*, for ``n`` seeds whose differences were seen to spread by ``sd``
    (:func:`expected_power` = ``power``; the spread estimated from ``spread_df`` + 1 values, default the
    ``n`` seeds). It is ``sd`` times a factor of ``n``, ``alpha`` and ``power`` alone; at 3 seeds about
    1.55 times :func:`min_detectable_known` (α and α/15 alike), at 5 seeds about 1.25 times, at 10 about 1.1
    (docs/evidence/verdict_rule.md). ASO and the bootstrap only veto,
    so the whole rule needs at least this. NaN without a spread (``sd`` 0: identical differences,
    which the rule does not test, :func:`no_spread`) or without two seeds."""
    if n < 2 or not math.isfinite(sd) or sd == 0:
        return math.nan
    return _solve(lambda delta: expected_power(delta, sd, n, alpha, spread_df) - power, sd)


def seeds_needed(gain: float, sd: float, alpha: float = ALPHA, power: float = POWER, most: int = 100,
                 spread_df: int | None = None) -> int | None:
    """The fewest seeds n at which the rule finds ``gain`` ``power`` of the time (None beyond ``most``, or
    without a gain): on average over the uncertainty of ``sd`` when it was estimated from
    ``spread_df`` + 1 seeds (:func:`expected_power`; the claims table passes its row's seeds less one),
    or, with ``spread_df`` None, as if ``sd`` were the true spread; None without a spread (``sd`` 0: the
    rule tests nothing there). Power rises with n: a bisection."""
    if not (math.isfinite(gain) and math.isfinite(sd)) or gain == 0 or sd == 0:
        return None
    def enough(n: int) -> bool:
        if spread_df is None:
            return power_known(abs(gain), sd, n, alpha) >= power
        return expected_power(abs(gain), sd, n, alpha, spread_df) >= power

    if not enough(most):
        return None
    low, high = 1, most                    # enough(high), not enough(low) (one seed has no test)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid, high)
    return high


@dataclass(frozen=True)
class Verdict:
    """The verdict on one comparison: the seeds' test, ε_min both ways, the bootstrap interval (or
    None), the p-value after the family's correction, the minimum detectable difference at the
    family's first step, and what the rule says."""

    seeds: SeedTest
    eps_a_over_b: float
    eps_b_over_a: float
    ci: tuple[float, float] | None
    p_adjusted: float
    min_detectable: float
    verdict: str

    @classmethod
    def of(cls, scores_a, scores_b, seed: int = 0, ci: tuple[float, float] | None = None) -> Verdict:
        """The rule applied to paired scores (position i of A and of B: one seed) and, when given, the
        bootstrap interval of A − B; a family of one (see :func:`family`)."""
        a, b = np.asarray(scores_a, dtype=float), np.asarray(scores_b, dtype=float)
        seeds = SeedTest.of(a - b)
        verdict = cls(seeds, eps_min(a, b, seed), eps_min(b, a, seed), ci, seeds.p, math.nan, "")
        return verdict._decided(seeds.p, 1)

    def _decided(self, p_adjusted: float, m: int) -> Verdict:
        s, ci = self.seeds, self.ci
        significant = p_adjusted < ALPHA
        a_better = significant and s.mean > 0 and self.eps_a_over_b < TAU and (ci is None or ci[0] > 0)
        b_better = significant and s.mean < 0 and self.eps_b_over_a < TAU and (ci is None or ci[1] < 0)
        if s.sd == 0:                                   # nothing to test: no verdict
            a_better = b_better = False
        verdict = (DECIDED[0] if a_better else DECIDED[1] if b_better else
                   no_spread(s.n, s.mean) if s.sd == 0 else undecided(s.n))
        return replace(self, p_adjusted=p_adjusted, min_detectable=min_detectable(s.sd, s.n, ALPHA / m),
                       verdict=verdict)


def family(verdicts: list[Verdict]) -> list[Verdict]:
    """The verdicts of one family of comparisons, decided together: each p-value Holm-adjusted over
    the family, each minimum detectable difference at Holm's first step (α/m)."""
    adjusted = holm([v.seeds.p for v in verdicts])
    return [v._decided(p, len(verdicts)) for v, p in zip(verdicts, adjusted, strict=True)]


def simulate(n: int, shift, draws: int = 2000, seed: int = 0, m: int = 1) -> dict[str, float]:
    """How often the rule names each winner when A's and B's scores over ``n`` seeds are independent
    normal with sd 1 and A's mean is ``shift`` above B's (in seed-sd; a number, or one per draw), in a
    family of ``m`` (the row decided at Holm's first step, α/m): ``{"A better": rate, "B better": rate}``
    over ``draws`` draws. ASO is computed only where the t-test rejects (elsewhere it cannot change the
    verdict)."""
    rng = np.random.default_rng(seed)
    shift = np.broadcast_to(np.asarray(shift, dtype=float), (draws,))[:, None]
    a, b = rng.normal(shift, 1.0, (draws, n)), rng.normal(0.0, 1.0, (draws, n))
    d = a - b
    mean, sd = d.mean(axis=1), d.std(axis=1, ddof=1)
    p = 2 * stats.t.sf(np.abs(mean) / (sd / math.sqrt(n)), n - 1)
    rates = {}
    for name, sign, (x, y) in ((DECIDED[0], 1, (a, b)), (DECIDED[1], -1, (b, a))):
        rows = np.flatnonzero((p < ALPHA / m) & (sign * mean > 0))
        eps = eps_min_rows(x[rows], y[rows]) if len(rows) else np.empty(0)
        rates[name] = float(np.sum(eps < TAU)) / draws
    return rates


def simulate_printed_mdd(n: int, m: int = 1, draws: int = 2000, seed: int = 0, mdd=None) -> float:
    """How often the whole rule finds a true gain equal to the MDD printed beside a row, when that MDD
    came from the row's own estimated spread: each draw estimates the spread from ``n`` pilot seeds
    (A and B normal with sd 1: differences of sd √2), sets the true gain to ``mdd(sd_hat, n, α/m)``
    (default :func:`min_detectable`) and runs the rule on ``n`` fresh seeds at that gain
    (:func:`simulate`). The rate of "A better"; the printed MDD holds its power when it is ``POWER``."""
    mdd = min_detectable if mdd is None else mdd
    rng = np.random.default_rng(seed + 10_000)
    pilot = rng.normal(0.0, 1.0, (draws, n)) - rng.normal(0.0, 1.0, (draws, n))
    factor = mdd(1.0, n, ALPHA / m)                   # every MDD here is the spread times a factor
    return simulate(n, factor * pilot.std(axis=1, ddof=1), draws, seed, m)[DECIDED[0]]


def paired_differences(scores_a: dict, scores_b: dict) -> dict[int, float]:
    """A − B per seed, for the seeds both sides have (each side: ``{seed: score}``); unpaired seeds
    are an error naming them (a seed-by-seed difference needs both runs of each seed)."""
    only = sorted(set(scores_a) ^ set(scores_b))
    if only:
        raise AbsaError(f"seeds {', '.join(map(str, only))} are on one side only; compare runs of the same seeds "
                        f"(A has {sorted(scores_a)}, B has {sorted(scores_b)}; a run folder that is unfinished or lacks "
                        "its records is not counted: `absa summary FOLDER` lists them)")
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
        with warnings.catch_warnings(), np.errstate(all="ignore"):   # an undefined draw is NaN, left out below
            warnings.simplefilter("ignore")
            per_seed = [[ma[k] - mb[k] for k in metrics] for ma, mb in
                        ((compute_metrics(dataset, g, pa[rows], metrics), compute_metrics(dataset, g, pb[rows], metrics))
                         for pa, pb in zip(probs_a, probs_b, strict=True))]
            diffs[i] = 100.0 * np.mean(per_seed, axis=0)
    tail = 100 * (1 - level) / 2
    with np.errstate(all="ignore"):
        return {k: (float(np.nanpercentile(diffs[:, j], tail)), float(np.nanpercentile(diffs[:, j], 100 - tail)))
                for j, k in enumerate(metrics)}
