"""``absa compare A B``: two sets of runs, metric by metric, paired by seed, with a verdict each."""

from __future__ import annotations

import argparse
import sys

from absa_lib.commands import parse_overrides, print_json

MAX_SAMPLES = 100_000
RULE_HELP = ("verdict: A better when the paired t-test over seeds rejects at 5% (Holm over the metrics compared) with "
             "A-B > 0, ASO's eps(A>B) < 0.2 (deepsig) and, where every run kept its predictions, the paired bootstrap 95% "
             "CI of A-B over test sentences above 0; otherwise B better symmetrically, or undecided at that many seeds")


HELP = "compare two sets of runs metric by metric: per-seed differences and a verdict"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help=HELP,
                       description="Compare the runs under folder A with those under folder B (each one configuration's "
                       "seeds, after the filters), paired by seed, at the epoch the protocol selects. " + RULE_HELP + ".")
    p.add_argument("a", help="a folder of runs (a run folder, or any folder above runs)")
    p.add_argument("b", help="a folder of runs")
    p.add_argument("--a-filter", action="append", default=[], metavar="FIELD=VALUE",
                   help="keep A's runs whose config has this value (repeatable), e.g. model=qacg-bert aux='\"none\"'")
    p.add_argument("--b-filter", action="append", default=[], metavar="FIELD=VALUE", help="the same for B")
    p.add_argument("--protocol", default="dev_best", help="dev_best (default) | test_best (the official code's) | last")
    p.add_argument("--metric", action="append", default=[], help="only this metric (repeatable; default: every "
                   "metric of the dataset's table; each takes a few seconds)")
    p.add_argument("--samples", type=int, default=1000, help="bootstrap draws of the test set (default 1000; SentiHood's "
                   "AUCs take about a minute at 1000, the other metrics seconds)")
    p.add_argument("--json", action="store_true", help="the rows as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from absa_lib.errors import AbsaError
    from absa_lib.reports.compare import compare, to_text
    from absa_lib.training.records import find_runs

    for side, folder in (("A", args.a), ("B", args.b)):
        if not Path(folder).is_dir():
            raise AbsaError(f"{side}: {folder}: {'not a folder' if Path(folder).exists() else 'no such folder'}; give "
                            "a folder of runs (a run folder, or any folder above runs)")
    from absa_lib.reports.summary import headless_lines

    for folder in dict.fromkeys((args.a, args.b)):          # a run that lost its config record is not counted: say so
        for line in headless_lines(folder):
            print(f"[compare] not counted: {line}", file=sys.stderr)
    sides = [find_runs(Path(folder), **parse_overrides(filters, option))
             for folder, filters, option in ((args.a, args.a_filter, "--a-filter"), (args.b, args.b_filter, "--b-filter"))]
    for side, folder, filters, runs in (("A", args.a, args.a_filter, sides[0]), ("B", args.b, args.b_filter, sides[1])):
        if not runs:
            raise AbsaError(f"{side}: no finished run under {folder}" + (f" matching {' '.join(filters)}" if filters else "")
                            + f"; `absa summary {folder}` lists the runs there, finished or not, and their fields")
    if not 100 <= args.samples <= MAX_SAMPLES:
        raise AbsaError(f"--samples {args.samples}: expected 100 to {MAX_SAMPLES:,} bootstrap draws (a 95% interval "
                        "from fewer is noise; 10,000 already gives it to a tenth of a point, and each draw rescoring "
                        "every seed of both sides takes milliseconds)")
    table = compare(*sides, protocol=args.protocol, metrics=tuple(args.metric) or None, samples=args.samples)
    if args.json:
        print_json(table.to_dict(orient="records")
                   + [{"metric": key, "not_compared": why} for key, why in table.attrs["not_compared"].items()])
    else:
        print(to_text(table, *sides, args.protocol))
    return 0
