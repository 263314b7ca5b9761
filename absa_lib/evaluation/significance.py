"""Is a difference real? The Almost Stochastic Order test over seeds, and the one verdict rule.

The paper's claims are differences of about one point between models trained with a few seeds.
The companion decides each with the Almost Stochastic Order (ASO) test of Dror et al. (2019), as
``deepsig`` implements it (Ulmer et al. 2022): for the scores of A and B over seeds, ε_min(A, B) is
an upper bound on how far A's score distribution violates stochastic dominance over B's (0: A is
better everywhere; 1: B is). The rule, the same everywhere (``absa compare``, the claims table):

- **A better** when ε_min(A, B) < :data:`TAU`;
- **B better** when ε_min(B, A) < :data:`TAU`;
- **no detectable difference** otherwise.

``TAU`` = 0.2 is the threshold Ulmer et al. recommend (ε_min < 0.5 is the bare definition of almost
stochastic dominance; 0.2 keeps the error rate low with few seeds). With three seeds a side the test
can only see large, consistent gaps: "no detectable difference" is not "no difference".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from deepsig import aso

from absa_lib.errors import AbsaError

TAU = 0.2
RULE = (f"A better when ε_min(A, B) < {TAU}; B better when ε_min(B, A) < {TAU}; otherwise no detectable "
        "difference (the Almost Stochastic Order test over seeds, Dror et al. 2019, deepsig)")
VERDICTS = ("A better", "B better", "no detectable difference")


def eps_min(scores_a, scores_b, seed: int = 0) -> float:
    """ASO's ε_min(A, B) for the scores of A and B (higher is better), seeded: the same scores give
    the same number."""
    a, b = np.asarray(scores_a, dtype=float), np.asarray(scores_b, dtype=float)
    if a.ndim != 1 or b.ndim != 1 or len(a) < 2 or len(b) < 2:
        raise AbsaError(f"ASO needs at least two scores a side, got {len(np.atleast_1d(a))} and "
                        f"{len(np.atleast_1d(b))}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise AbsaError("ASO needs finite scores; a NaN metric (undefined, e.g. an AUC without both classes) "
                        "cannot be compared")
    return float(aso(a, b, seed=seed, show_progress=False, num_jobs=1))


@dataclass(frozen=True)
class Verdict:
    """The verdict on one metric: ε_min both ways and what the rule says."""

    eps_a_over_b: float
    eps_b_over_a: float
    verdict: str

    @classmethod
    def of(cls, scores_a, scores_b, seed: int = 0) -> Verdict:
        ab, ba = eps_min(scores_a, scores_b, seed), eps_min(scores_b, scores_a, seed)
        words = VERDICTS[0] if ab < TAU else VERDICTS[1] if ba < TAU else VERDICTS[2]
        return cls(ab, ba, words)


def paired_differences(scores_a: dict, scores_b: dict) -> dict[int, float]:
    """A − B per seed, for the seeds both sides have (each side: ``{seed: score}``); unpaired seeds
    are an error naming them (a seed-by-seed difference needs both runs of each seed)."""
    only = sorted(set(scores_a) ^ set(scores_b))
    if only:
        raise AbsaError(f"seeds {', '.join(map(str, only))} are on one side only; compare runs of the same seeds "
                        f"(A has {sorted(scores_a)}, B has {sorted(scores_b)})")
    return {s: scores_a[s] - scores_b[s] for s in sorted(scores_a)
            if not (math.isnan(scores_a[s]) or math.isnan(scores_b[s]))}
