"""``absa evaluate --dataset D --split S --predictions FILE``: the paper's metrics of a prediction file.

Prints :func:`absa_lib.evaluation.predictions.evaluate_file` (the dict of
:func:`absa_lib.evaluation.metrics.compute_metrics`) as JSON: sorted keys, fractions in
[0, 1] at full precision (``repr`` of the float). An undefined metric (nan, see
:mod:`absa_lib.evaluation.metrics`) is printed as ``null`` so the output stays valid JSON.
"""

from __future__ import annotations

import argparse

from absa_lib.commands import DATA_DIR_HELP, print_json

HELP = "score a prediction CSV with the paper's metrics"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("evaluate", help=HELP,
                       description="Score a prediction CSV against a dataset split with the metrics of the "
                       "paper's Tables 1 and 2, printed as JSON. The CSV has a row per example, in any order, "
                       "as every run's predictions_<split>.csv: id,target,aspect,p_none,p_positive,p_negative "
                       "for SentiHood; id,aspect,p_positive,p_neutral,p_negative,p_conflict,p_none for "
                       "SemEval (id,aspect or id,target,aspect, then p_none and p_<sentiment> for a dataset "
                       "of your own); an optional gold column is checked against the dataset. The p_ columns "
                       "are softmax probabilities (each row sums to 1).")
    p.add_argument("--dataset", required=True,
                   help="sentihood | semeval | a folder of your own data (docs/own_data.md)")
    p.add_argument("--split", required=True, choices=("train", "dev", "test"))
    p.add_argument("--predictions", required=True, metavar="FILE", help="the prediction CSV")
    p.add_argument("--data-dir", default=None, metavar="DIR", help=DATA_DIR_HELP)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from absa_lib.evaluation.predictions import evaluate_file

    metrics = evaluate_file(args.dataset, args.split, args.predictions, args.data_dir)   # a folder: registered
    print_json(metrics, sort_keys=True)
    return 0
