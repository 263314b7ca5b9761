"""What the epoch chosen on dev gives away against each run's own plateau, metric by metric.

    python scripts/selection_spread.py results/reference/runs --dataset semeval --epochs 25
    python scripts/selection_spread.py results/reference/runs --dataset sentihood --epochs 25 --last 5

The tables report each run at the epoch where the dataset's selection metric (SentiHood: strict
accuracy; SemEval: aspect F1) is best on dev. When that metric stops moving early while another is
still rising, the choice falls among near-equal epochs and the other metric pays for it. For every
finished run of DATASET under RUNS (with EPOCHS epochs, when given) this prints, per table metric
(in %, as the tables show them), the test value at the dev-best epoch, the mean over the last K
epochs (the plateau) and the best epoch on the test set (optimistic, for scale); then, per
configuration, the mean over its seeds of "dev-best minus plateau". Numbers, not timings.
"""

from __future__ import annotations

import argparse
import statistics
import sys

from absa_lib.errors import AbsaError
from absa_lib.paper_numbers import METRICS
from absa_lib.runs import describe, find_runs
from absa_lib.tables import aggregate_metrics


def per_epoch(run) -> list[dict[str, float]]:
    """The run's test metrics after each epoch, in %, keyed as the tables are."""
    dataset = run.config["dataset"]
    return [{k: mean for k, (mean, _) in aggregate_metrics(dataset, [row["test"]]).items()}
            for row in run.metrics["epochs"]]


def spread(run, last: int) -> dict[str, dict[str, float]]:
    """Per table metric: ``dev_best`` (test at the dev-best epoch), ``plateau`` (mean of the last
    ``last`` epochs), ``best`` and ``best_epoch`` (the test set's own best epoch)."""
    curve, chosen = per_epoch(run), run.selected("dev_best")["epoch"]
    out = {}
    for metric, _, _ in METRICS[run.config["dataset"]]:
        values = [epoch[metric] for epoch in curve]
        best = max(range(len(values)), key=values.__getitem__)
        out[metric] = {"dev_best": values[chosen - 1], "plateau": statistics.mean(values[-last:]),
                       "best": values[best], "best_epoch": best + 1}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", help="a folder of runs (searched recursively)")
    ap.add_argument("--dataset", required=True, choices=sorted(METRICS))
    ap.add_argument("--epochs", type=int, default=None, help="only runs of this many epochs")
    ap.add_argument("--last", type=int, default=5, help="the plateau: the mean over this many last epochs")
    args = ap.parse_args(argv)
    try:
        runs = find_runs(args.runs, dataset=args.dataset, **({"epochs": args.epochs} if args.epochs else {}))
    except AbsaError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    runs = [r for r in runs if len(r.metrics["epochs"]) >= args.last]
    if not runs or args.last < 1:
        print(f"error: {args.runs}: no finished {args.dataset} run" + (f" of {args.epochs} epochs" if args.epochs else "")
              + f" with at least --last {args.last} (>= 1) epochs", file=sys.stderr)
        return 2
    titles = {metric: title for metric, title, _ in METRICS[args.dataset]}
    gaps: dict[str, dict[str, list[float]]] = {}          # configuration -> metric -> dev-best minus plateau
    for run in sorted(runs, key=lambda r: (describe(r.config, seed=False), r.config["seed"])):
        rows = spread(run, args.last)
        print(f"{describe(run.config)}: dev-best epoch {run.selected('dev_best')['epoch']} of {len(run.metrics['epochs'])}")
        print(f"    {'test metric':<14} {'dev-best':>8} {f'last {args.last}':>8} {'gap':>6}   test-best (epoch)")
        for metric, r in rows.items():
            gap = r["dev_best"] - r["plateau"]
            gaps.setdefault(describe(run.config, seed=False), {}).setdefault(metric, []).append(gap)
            print(f"    {titles[metric]:<14} {r['dev_best']:8.1f} {r['plateau']:8.1f} {gap:+6.1f}   "
                  f"{r['best']:.1f} ({r['best_epoch']})")
    print(f"\nper configuration: dev-best minus the mean of the last {args.last} epochs, mean over seeds (n)")
    names = {name: f"{name} ({len(next(iter(by_metric.values())))})" for name, by_metric in gaps.items()}
    width, cell = max(map(len, names.values())), max(map(len, titles.values())) + 1
    print(f"    {'configuration':<{width}} " + " ".join(f"{titles[m]:>{cell}}" for m in titles))
    for name, by_metric in gaps.items():
        print(f"    {names[name]:<{width}} " + " ".join(f"{statistics.mean(by_metric[m]):+{cell}.1f}" for m in titles))
    return 0


if __name__ == "__main__":
    sys.exit(main())
