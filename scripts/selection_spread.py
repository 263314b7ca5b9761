"""What the epoch chosen on dev gives away against each run's own plateau, metric by metric.

    python scripts/selection_spread.py results/reference/runs --dataset semeval --epochs 25
    python scripts/selection_spread.py results/reference/runs --epochs 25 --last 5

The tables report each run at the epoch where the dataset's selection metric (SentiHood: strict
accuracy; SemEval: aspect F1) is best on dev (absa_lib/reports/plateau.py says why that can cost another
metric). For every finished run under RUNS (of DATASET and with EPOCHS epochs, when given) this
prints, per table metric (in %, as the tables show them), the test value at the dev-best epoch,
the mean over the last K epochs (the plateau) and the test set's best epoch (optimistic, for scale);
then the per-system table that notebook 03 writes to results/selection_spread.md, here over every
run found (ablations included). Numbers, not timings.
"""

from __future__ import annotations

import argparse
import sys

from absa_lib.commands import positive
from absa_lib.errors import AbsaError
from absa_lib.reports.paper_numbers import METRICS
from absa_lib.reports.plateau import LAST, epoch_spread, spread_markdown, spread_table
from absa_lib.training.config import describe
from absa_lib.training.records import find_runs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", help="a folder of runs (searched recursively)")
    ap.add_argument("--dataset", choices=sorted(METRICS), default=None, help="only this dataset's runs")
    ap.add_argument("--epochs", type=positive, default=None, help="only runs of this many epochs")
    ap.add_argument("--last", type=positive, default=LAST, help=f"the plateau: the mean over this many last epochs ({LAST})")
    args = ap.parse_args(argv)
    filters = {k: v for k, v in (("dataset", args.dataset), ("epochs", args.epochs)) if v is not None}
    try:
        runs = find_runs(args.runs, **filters)
    except AbsaError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    runs = [r for r in runs if r.config.dataset in METRICS and len(r.metrics.epochs) > args.last]
    if not runs:
        print(f"error: {args.runs}: no finished {args.dataset or 'SentiHood or SemEval'} run"
              + (f" of {args.epochs} epochs" if args.epochs else "")
              + f" with more than --last {args.last} epochs", file=sys.stderr)
        return 2
    for run in sorted(runs, key=lambda r: (describe(r.config, seed=False), r.config.seed)):
        titles = {metric: title for metric, title, _ in METRICS[run.config.dataset]}
        print(f"{describe(run.config)}: dev-best epoch {run.selected('dev_best')['epoch']} of {len(run.metrics.epochs)}")
        print(f"    {'test metric':<14} {'dev-best':>8} {f'last {args.last}':>8} {'gap':>6}   test-best (epoch)")
        for metric, r in epoch_spread(run, args.last).items():
            print(f"    {titles[metric]:<14} {r['dev_best']:8.1f} {r['plateau']:8.1f} {r['dev_best'] - r['plateau']:+6.1f}"
                  f"   {r['best']:.1f} ({r['best_epoch']})")
    print()
    print(spread_markdown(spread_table(runs, args.last), args.last))
    return 0


if __name__ == "__main__":
    sys.exit(main())
