"""The verdict rule's error rates and power, simulated: how often it names a winner when there is no
true difference, and how often it finds a true gain, beside ASO alone (the rule before) and the paired
t-test alone; the analytic minimum detectable difference against the simulated one, as if the spread
were known; and the MDD printed beside a row, whose spread is estimated from the row's own seeds: how
often the rule finds a true gain equal to it, the old MDD (spread taken as known) beside the new
(80% expected power over the spread's uncertainty).

    python scripts/verdict_rule_rates.py            # 20,000 draws per cell: 5 min 21 s on 2 cores

A and B's scores over n seeds are independent normal with sd 1 (one seed-sd), A's mean ``shift`` above
B's; the differences A − B then have sd √2. Numbers are fractions of the draws (docs/evidence/verdict_rule.md).
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from scipy import stats

from absa_lib.evaluation import significance as S


def aso_alone(n: int, shift: float, draws: int, seed: int) -> float:
    """Any winner by ε_min < 0.2 alone (the rule before), over the same kind of draws."""
    rng = np.random.default_rng(seed)
    a, b = rng.normal(shift, 1.0, (draws, n)), rng.normal(0.0, 1.0, (draws, n))
    return float(np.mean((S.eps_min_rows(a, b) < S.TAU) | (S.eps_min_rows(b, a) < S.TAU)))


def t_alone(n: int, shift: float, draws: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    d = rng.normal(shift, 1.0, (draws, n)) - rng.normal(0.0, 1.0, (draws, n))
    p = 2 * stats.t.sf(np.abs(d.mean(1)) / (d.std(1, ddof=1) / math.sqrt(n)), n - 1)
    return float(np.mean(p < S.ALPHA))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--printed-mdd", action="store_true", help="only the printed MDD's table")
    args = parser.parse_args()
    if args.printed_mdd:
        printed_mdd(args.draws, args.seed)
        return
    print(f"any winner named, {args.draws:,} draws a cell (family of one)")
    print(f"{'seeds':>5} {'shift (seed-sd)':>15} {'rule':>7} {'ASO alone':>9} {'t alone':>8}")
    for n in (3, 5, 10):
        for shift in (0.0, 1.0, 3.0):
            rule = sum(S.simulate(n, shift, args.draws, args.seed).values())
            print(f"{n:>5} {shift:>15.1f} {rule:>7.4f} {aso_alone(n, shift, args.draws, args.seed):>9.4f} "
                  f"{t_alone(n, shift, args.draws, args.seed):>8.4f}")
    print("\nminimum detectable difference (80% power, seed-sd units), analytic against the whole rule simulated")
    print(f"{'seeds':>5} {'family':>6} {'MDD':>6} {'found at 0.9 MDD':>16} {'at MDD':>7} {'at 1.1 MDD':>10}")
    for n, m in ((3, 1), (5, 1), (10, 1), (3, 15), (5, 15)):
        mdd = S.min_detectable_known(math.sqrt(2), n, S.ALPHA / m)
        found = [S.simulate(n, k * mdd, args.draws, args.seed, m)["A better"] for k in (0.9, 1.0, 1.1)]
        print(f"{n:>5} {m:>6} {mdd:>6.2f} {found[0]:>16.4f} {found[1]:>7.4f} {found[2]:>10.4f}")
    printed_mdd(args.draws, args.seed)


def printed_mdd(draws: int, seed: int) -> None:
    """The MDD as the tables print it, from the row's estimated spread: found how often at that gain."""
    print("\nthe printed MDD, from the spread of the row's own seeds: how often the rule finds a true gain equal to it")
    print(f"{'seeds':>5} {'family':>6} {'factor old':>10} {'found':>7} {'factor new':>10} {'found':>7} "
          f"{'expected (new)':>14}")
    for n, m in ((3, 1), (3, 14), (3, 15), (5, 1), (5, 15), (10, 1)):
        old, new = (f(1.0, n, S.ALPHA / m) for f in (S.min_detectable_known, S.min_detectable))
        found = [S.simulate_printed_mdd(n, m, draws, seed, mdd=f) for f in (S.min_detectable_known, S.min_detectable)]
        print(f"{n:>5} {m:>6} {old:>10.2f} {found[0]:>7.4f} {new:>10.2f} {found[1]:>7.4f} "
              f"{S.expected_power(new, 1.0, n, S.ALPHA / m):>14.4f}")


if __name__ == "__main__":
    main()
