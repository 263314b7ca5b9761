"""``absa export RUN DIR``: a run's dev-selected model as a Hugging Face folder with a model card."""

from __future__ import annotations

import argparse
import sys

from absa_lib.commands import DATA_DIR_HELP

HELP = "write a run's model as a Hugging Face folder with a model card (README.md)"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help=HELP,
                       description="Write the dev-selected checkpoint of RUN (its labels named), its tokenizer, a model "
                       "card (README.md: the model, backbone, data and its terms, budget, test metrics beside the paper's "
                       "and the trivial floor, intended use and limits, how to use it) and absa_export.json (the run "
                       "record, labels, what each context id stands for, every file's SHA-256) to DIR, a new folder. "
                       "`absa predict --run DIR` and predict_text(DIR, text) use it with nothing else, offline; "
                       "`huggingface-cli upload REPO DIR` publishes all of it.")
    p.add_argument("run", help="a run folder printed by `absa train`")
    p.add_argument("dir", help="the folder to write (new, or empty)")
    p.add_argument("--data-dir", default=None, help=DATA_DIR_HELP + " (for the trivial rows of the card)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from absa_lib.reports.model_card import export_run
    from absa_lib.training.records import load_run

    folder = export_run(load_run(args.run), args.dir, args.data_dir)
    print(f"[absa] model, tokenizer and model card -> {folder}", file=sys.stderr)
    return 0
