"""How far one configuration field moves the test metrics, beside how far a change of seed does.

    python scripts/paired_runs.py precision results/reference/checks/cpu_profile_bf16 results/reference/runs
    python scripts/paired_runs.py group_by_length results/reference/checks/group_by_length results/reference/runs
    python scripts/paired_runs.py machine results/reference/checks/fp32_other_cpu results/reference/runs
    python scripts/paired_runs.py sampler,compile results/reference/checks/bert_single_mixed_25ep_cpu results/reference/runs
    python scripts/paired_runs.py precision results/reference/checks/qacg_precision_25ep_cpu \
        results/reference/checks/qacg_precision_25ep_cpu --epochs-from 10
    python scripts/paired_runs.py objective results/reference/checks/other_bert_25ep_cpu \
        results/reference/checks/other_bert_25ep_cpu --epochs-from 10 --base-value joint

For every finished run under NEW it looks under BASE for its pair, the run whose configuration is
the same but for FIELD (several fields: comma-separated, the pair differing in at least one), and
for the pair's scale, the SCALE run (default: under BASE) with the pair's configuration and the one
that differs from it only in the seed (the next seed up that SCALE holds; the highest seed has none
and shows no seed difference). It prints, per run, the test metrics at the dev-best epoch (in %, as
the tables show them) of the pair and of NEW, and the two differences, and their training losses at
the last epoch (a relative difference of 1e-9 is a different summation order that did not reach the
metrics); then, per dataset and metric, the median and the largest |difference| made by FIELD and
by the seed.

FIELD ``machine`` is no configuration field: the pair is the BASE record of the same configuration
(the same run id) that NEW retrained elsewhere; each side is named by the GPU or CPU model its
env.json records (records older than that field name only the device).

NEW and BASE may be the same folder (runs of both values side by side): each pair is then counted
once, from the side whose pair has a seed scale, or with --base-value V from the side whose pair
has FIELD = V (``V -> other``, V's seed step as the scale). With --epochs-from E it also compares
each pair, and its seed scale, at the same epoch: the median (largest) |difference| over epochs E to the last,
on test and dev (the selected epoch aside). A NEW run without a pair is listed as such, never
dropped silently, and a run with several pairs under BASE says which it used. Numbers, not
timings.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys

from absa_lib.commands import positive
from absa_lib.errors import AbsaError
from absa_lib.reports.paper_numbers import METRICS
from absa_lib.reports.tables import aggregate_metrics
from absa_lib.training.config import TrainConfig, describe
from absa_lib.training.records import find_runs

NOT_COMPARED = ("run_id", "absa_lib_version")      # bookkeeping, not configuration
MACHINE = "machine"                                # the pseudo-field: same configuration, another machine


def key(config: dict, *leave_out: str) -> str:
    """The configuration without ``leave_out`` (and bookkeeping), as a comparable string."""
    return json.dumps({k: v for k, v in config.items() if k not in (*NOT_COMPARED, *leave_out)}, sort_keys=True)


def percent(dataset: str, split_metrics: dict) -> dict[str, float]:
    """One split's metrics of one epoch, in %, keyed as the tables are."""
    return {k: mean for k, (mean, _) in aggregate_metrics(dataset, [split_metrics]).items()}


def scores(run) -> dict[str, float]:
    """The run's test metrics at its dev-best epoch, in %, keyed as the tables are."""
    return percent(run.config.dataset, run.selected("dev_best")["test"])


def same_epoch(a, b, first: int) -> dict[str, dict[str, list[float]]]:
    """|b − a| in points at each epoch from ``first`` that both runs reached: split -> metric -> list."""
    dataset = a.config.dataset
    at_a, at_b = ({e["epoch"]: e for e in r.metrics.epochs if e["epoch"] >= first} for r in (a, b))
    both = sorted(at_a.keys() & at_b.keys())
    out = {}
    for split in ("test", "dev"):
        pa, pb = ([percent(dataset, at[e][split]) for e in both] for at in (at_a, at_b))
        out[split] = {m: [abs(y[m] - x[m]) for x, y in zip(pa, pb, strict=True)]
                      for m, _, _ in METRICS[dataset]}
    return out


def machine(run) -> str:
    """The machine a run was trained on, as its env.json names it."""
    env = run.env
    return env.gpu or env.cpu_model or f"{env.device or 'a'} (CPU model not recorded)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("field", help="the configuration field the pairs differ in, e.g. precision, or machine; "
                                  "several: comma-separated, e.g. sampler,compile")
    ap.add_argument("new", help="a folder of runs (searched recursively)")
    ap.add_argument("base", help="a folder of runs holding their pairs (and, without SCALE, the pairs' other seeds)")
    ap.add_argument("scale", nargs="?", help="a folder of runs holding the pairs' configuration at two seeds "
                                             "(default: BASE)")
    ap.add_argument("--epochs-from", type=positive, metavar="E",
                    help="also compare the runs epoch by epoch: per pair, the median (largest) |difference| at "
                         "the same epoch over epochs E to the last, on test and dev, beside the seed's")
    ap.add_argument("--base-value", metavar="V",
                    help="for pairs found from both sides (NEW and BASE overlap): show each as V -> the other "
                         "value, with the seed step of the side whose FIELD is V as the scale, e.g. "
                         "`objective F F --base-value joint`")
    args = ap.parse_args(argv)
    args.scale = args.scale or args.base
    try:
        new, base, scale = find_runs(args.new), find_runs(args.base), find_runs(args.scale)
    except AbsaError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for folder, runs in ((args.new, new), (args.base, base), (args.scale, scale)):
        if not runs:
            print(f"error: {folder}: no finished runs (expected a folder holding run records)", file=sys.stderr)
            return 2
    fields = [f.name for f in dataclasses.fields(TrainConfig)]
    asked = [] if args.field == MACHINE else args.field.split(",")
    for field in asked:
        if field not in fields or field == "seed":
            print(f"error: field {field!r}: expected a training configuration field other than seed, one of "
                  f"{', '.join(f for f in fields if f != 'seed')} (several: comma-separated), or {MACHINE} alone",
                  file=sys.stderr)
            return 2
    leave_out = () if args.field == MACHINE else tuple(asked)
    value = machine if args.field == MACHINE else (lambda r: "/".join(str(r.config.get(f)) for f in asked))
    by_key, by_seedless = {}, {}
    for run in base:
        by_key.setdefault(key(run.config, *leave_out), []).append(run)
    for run in scale:
        by_seedless.setdefault(key(run.config, "seed"), []).append(run)

    def scale_of(pair):
        """The SCALE runs of the pair's configuration at its seed and at the next seed up SCALE holds."""
        seeds = sorted(by_seedless.get(key(pair.config, "seed"), []), key=lambda r: r.config.seed)
        return ([r for r in seeds if r.config.seed == pair.config.seed],
                [r for r in seeds if r.config.seed > pair.config.seed])

    values = {str(value(r)) for r in (*new, *base)}
    if args.base_value is not None and args.base_value not in values:
        print(f"error: --base-value {args.base_value}: no run under {args.new} or {args.base} has {args.field} = "
              f"{args.base_value} (they have: {', '.join(sorted(values))})", file=sys.stderr)
        return 2

    def better(candidate, current) -> bool:
        """Whether ``candidate`` (run, pair) is the side of a pair found from both sides to show instead
        of ``current``: the side whose pair has FIELD = --base-value, else one whose pair has a scale."""
        on_base = [args.base_value is not None and str(value(p)) == args.base_value for _, p in (candidate, current)]
        return on_base[0] if on_base[0] != on_base[1] else not all(scale_of(current[1]))

    found = {}                                   # {run, pair} -> (run, pair): each pair once, not twice
    for run in sorted(new, key=lambda r: describe(r.config)):
        name = describe(run.config)
        if run.config.dataset not in METRICS:
            print(f"{name}: skipped (dataset {run.config.dataset!r} has no table metrics; "
                  f"expected one of {', '.join(METRICS)})")
            continue
        pair = [r for r in by_key.get(key(run.config, *leave_out), []) if r.path.resolve() != run.path.resolve()
                and (args.field == MACHINE or value(r) != value(run))]           # never the run itself
        if not pair:
            print(f"{name}: no pair under {args.base} (the same configuration with another {args.field})")
            continue
        if len(pair) > 1:                  # e.g. BASE holds a record and a retraining of the same run
            print(f"{name}: {len(pair)} pairs under {args.base} ({', '.join(str(r.path) for r in pair)}); "
                  f"using the first")
        both = frozenset((run.path.resolve(), pair[0].path.resolve()))
        if both not in found or better((run, pair[0]), found[both]):     # NEW and BASE overlap: one side
            found[both] = (run, pair[0])
    deltas: dict[str, dict[str, dict[str, list[float]]]] = {}      # dataset -> metric -> {field, seed}
    for run, pair in found.values():
        dataset, name = run.config.dataset, describe(run.config)
        anchor, others = scale_of(pair)
        a, b = scores(pair), scores(run)
        c0, c = (scores(anchor[0]), scores(others[0])) if anchor and others else ({}, {})
        print(f"{name}: {args.field} {value(pair)} -> {value(run)}"
              + (f"; scale: seed {others[0].config.seed}" if c else
                 f"; no scale: {args.scale} holds this configuration with "
                 + (f"no seed above {pair.config.seed}" if anchor else f"no seed {pair.config.seed}")))
        for metric, title, _ in METRICS[dataset]:
            d_field = b[metric] - a[metric]
            d_seed = c[metric] - c0[metric] if c else None
            shown = f"{d_seed:+5.1f}" if c else f"{'–':>5}"
            print(f"    {title:<22} {a[metric]:6.1f} -> {b[metric]:6.1f}  ({d_field:+5.1f})   seed: {shown}")
            slot = deltas.setdefault(dataset, {}).setdefault(title, {"field": [], "seed": []})
            slot["field"].append(abs(d_field))
            if c:
                slot["seed"].append(abs(d_seed))
        la, lb = (r.metrics.epochs[-1].get("train_loss") for r in (pair, run))
        if la is not None and lb is not None:          # last bits that need not reach the metrics
            print(f"    {'training loss':<22} {la:.7f} -> {lb:.7f}  (relative {abs(lb - la) / max(abs(la), 1e-300):.1e})")
        if args.epochs_from is not None:                  # the selected epoch aside: the same epoch
            by_field = same_epoch(pair, run, args.epochs_from)
            by_seed = same_epoch(anchor[0], others[0], args.epochs_from) if c else None
            n = len(next(iter(by_field["test"].values())))
            print(f"    same epoch, {n} epochs from {args.epochs_from}: |difference|, median (largest)")
            for split in ("test", "dev"):
                for metric, title, _ in METRICS[dataset]:
                    cells = [f"{statistics.median(v):.1f} ({max(v):.1f})" if v else "–"
                             for v in (by_field[split][metric], by_seed[split][metric] if by_seed else [])]
                    print(f"    {split + ' ' + title:<22} {cells[0]:>16}   seed: {cells[1]:>12}")
    for dataset, metrics in deltas.items():
        first = next(iter(metrics.values()))
        n, scaled = len(first["field"]), len(first["seed"])
        print(f"\n{dataset}: |difference| in points, median (largest) over {n} pairs"
              + (f" (the seed: over the {scaled} with a scale)" if scaled != n else ""))
        print(f"    {'metric':<22} {args.field:>16} {'seed':>16}")
        for title, d in metrics.items():
            cells = [f"{statistics.median(v):.1f} ({max(v):.1f})" if v else "–" for v in (d["field"], d["seed"])]
            print(f"    {title:<22} {cells[0]:>16} {cells[1]:>16}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
