"""``absa predict --run DIR "text"``: labels and probabilities for each target × aspect, as JSON."""

from __future__ import annotations

import argparse
import json


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("predict", help="apply a trained run to a review sentence",
                       description="Predict the sentiment of every (target ×) aspect of a sentence with the "
                       "dev-best model of a run. SentiHood text must mask locations as LOCATION1/LOCATION2.")
    p.add_argument("--run", required=True, help="a run folder printed by `absa train`")
    p.add_argument("text", help="the review sentence")
    p.add_argument("--targets", nargs="+", default=None, metavar="LOCATIONn",
                   help="SentiHood only: the targets to predict (default: every mask in the text)")
    p.add_argument("--truncate", action="store_true", help="cut over-long text instead of refusing it")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from absa_lib.apply import predict_text

    print(json.dumps(predict_text(args.run, args.text, targets=args.targets, truncate=args.truncate), indent=2))
    return 0
