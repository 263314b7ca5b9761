"""``absa summary RUNS_DIR [...]``: one row per configuration of the finished runs under the folders,
mean ± sd over its seeds at the dev-selected epoch, then at the test-selected one (labelled), the
trivial predictors beside them (:mod:`absa_lib.reports.summary`)."""

from __future__ import annotations

import argparse

from absa_lib.commands import DATA_DIR_HELP

HELP = "mean ± sd over seeds of the runs under a folder, a row per configuration"


def add_parser(sub: argparse._SubParsersAction) -> None:
    from absa_lib.reports import PROTOCOL_LABELS

    p = sub.add_parser("summary", help=HELP,
                       description="Summarise the finished runs under a folder (what `absa train --out` or "
                       "`absa grid` wrote): one row per configuration and budget, mean ± sd over its seeds of "
                       "the test metrics at the epoch each selection protocol chose, the trivial predictors "
                       "beside them, and the runs not finished listed, not counted.")
    p.add_argument("runs_dirs", nargs="+", metavar="RUNS_DIR", help="folders of runs, e.g. runs/")
    p.add_argument("--selection", nargs="+", default=["dev_best", "test_best"], choices=tuple(PROTOCOL_LABELS),
                   help="selection protocols, one block each (default: dev_best test_best)")
    p.add_argument("--csv", metavar="FILE", help="also write every row, numbers in %% to 4 decimals, to FILE")
    p.add_argument("--data-dir", default=None, metavar="DIR",
                   help=f"for the trivial rows: {DATA_DIR_HELP}")
    p.add_argument("--data", nargs="+", default=[], metavar="FOLDER",
                   help="folders of your own data whose runs are summarised, for their trivial rows")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from absa_lib.fileio import atomic_write_bytes, output_file
    from absa_lib.reports.summary import summarize

    csv = output_file(args.csv) if args.csv else None
    text, frame = summarize(args.runs_dirs, tuple(dict.fromkeys(args.selection)), args.data_dir, tuple(args.data))
    print(text, end="")
    if csv:
        atomic_write_bytes(csv, frame.round(4).to_csv(index=False).encode())
        print(f"wrote {args.csv}")
    return 0
