"""``absa train``: train (or fetch from the cache, or resume) one run and print where it lives."""

from __future__ import annotations

import argparse
from types import SimpleNamespace

from absa_lib.commands import DATA_DIR_HELP, RUNS_DIR_HELP, parse_overrides, print_json
from absa_lib.config import TrainConfig
from absa_lib.training import train

# The defaults shown in --help, read without building a config (that would import the models).
_DEFAULTS = SimpleNamespace(**{name: f.default for name, f in TrainConfig.__dataclass_fields__.items()})


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train a model; prints the run folder and its dev/test metrics",
                       description="Train a model. A run with the same configuration is returned from "
                       "the cache instantly (unless --force); an interrupted run resumes. The defaults are "
                       "the paper's hyper-parameters (25 epochs: for SentiHood, hours on a CPU); for a first try give "
                       "--epochs 1, or --max-train-examples N.")
    p.add_argument("--dataset", required=True, help="sentihood | semeval | a folder of your own data "
                   "(dataset.json, train.csv, dev.csv, test.csv: docs/own_data.md)")
    p.add_argument("--model", required=True, help="bert-single | bert-pair | cg-bert | qacg-bert | atae-lstm | "
                   "ae-lstm | at-lstm | man-bert | oa-bert")
    p.add_argument("--preset", default=_DEFAULTS.preset, help="paper (default) | official")
    p.add_argument("--aux", default=None,
                   help="input variant: NLI-M (default; 'single' for bert-single) | QA-M | NLI-B | QA-B | none | single")
    p.add_argument("--backbone", default=_DEFAULTS.backbone,
                   help="bert-base-uncased | minilm (default, offline) | bert-base-random | tiny | a local folder")
    p.add_argument("--seed", type=int, default=_DEFAULTS.seed, help="default: %(default)s")
    p.add_argument("--epochs", type=int, default=_DEFAULTS.epochs, help="default: %(default)s, the paper's")
    p.add_argument("--batch-size", type=int, default=_DEFAULTS.batch_size, help="default: %(default)s")
    p.add_argument("--lr", type=float, default=_DEFAULTS.lr, help="default: %(default)s")
    p.add_argument("--max-length", type=int, default=_DEFAULTS.max_length, help="tokens (default: %(default)s)")
    p.add_argument("--sampler", default=_DEFAULTS.sampler,
                   help="uniform (default) | balanced (official code) | per-context (bert-single only: each batch "
                   "from one context, as in Sun et al.'s separate runs; the tables' bert-single rows use it)")
    p.add_argument("--objective", default=_DEFAULTS.objective,
                   help="single (default: one C-way head) | joint (aspect + sentiment heads) | joint-dwa "
                   "(joint with dynamic task weights from the dev losses)")
    p.add_argument("--max-train-examples", type=int, default=None, help="train on a seeded subset")
    p.add_argument("--max-eval-examples", type=int, default=None, help="evaluate on the first K dev/test examples")
    p.add_argument("--eval-batch-size", type=int, default=_DEFAULTS.eval_batch_size, help="default: %(default)s")
    p.add_argument("--weight-decay", type=float, default=_DEFAULTS.weight_decay, help="default: %(default)s")
    p.add_argument("--adam-eps", type=float, default=_DEFAULTS.adam_eps, help="default: %(default)s")
    p.add_argument("--max-grad-norm", type=float, default=_DEFAULTS.max_grad_norm,
                   help="global gradient norm clip (default: %(default)s)")
    p.add_argument("--warmup", type=float, default=_DEFAULTS.warmup, help="fraction of steps with linear warm-up")
    p.add_argument("--schedule", default=_DEFAULTS.schedule,
                   help="after warm-up: linear (default, the paper's: decay to 0) | constant")
    p.add_argument("--head-lr-mult", type=float, default=_DEFAULTS.head_lr_mult,
                   help="learning-rate multiplier for the classifier, pooler and context layers (default 1)")
    p.add_argument("--precision", default=_DEFAULTS.precision,
                   help="auto (default: bf16 on CUDA and CPUs with native bf16, else fp32) | fp32 | bf16")
    p.add_argument("--group-by-length", action="store_true",
                   help="batches of inputs of similar length (less padding; part of the run's identity)")
    p.add_argument("--compile", default=_DEFAULTS.compile,
                   help="none (default) | default | reduce-overhead: torch.compile the training step "
                   "(reduce-overhead: as CUDA graphs, for a GPU); part of the run's identity")
    p.add_argument("--override", action="append", default=[], metavar="KEY=JSON",
                   help='model config override, e.g. --override quasi=false --override gate_activation=\'"sigmoid"\'')
    p.add_argument("--out", default=None, help=RUNS_DIR_HELP)
    p.add_argument("--data-dir", default=None, help=DATA_DIR_HELP)
    p.add_argument("--force", action="store_true", help="retrain even if the run exists")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.set_defaults(func=run)


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The TrainConfig an ``absa train`` command line describes (a dataset folder is registered)."""
    from absa_lib.own_data import dataset_name

    return TrainConfig(
        dataset=dataset_name(args.dataset, args.data_dir), model=args.model, preset=args.preset,
        aux=args.aux or ("single" if args.model == "bert-single" else _DEFAULTS.aux), backbone=args.backbone,
        seed=args.seed, epochs=args.epochs, batch_size=args.batch_size, lr=args.lr,
        max_length=args.max_length, sampler=args.sampler, max_train_examples=args.max_train_examples,
        max_eval_examples=args.max_eval_examples, eval_batch_size=args.eval_batch_size, warmup=args.warmup,
        weight_decay=args.weight_decay, adam_eps=args.adam_eps, max_grad_norm=args.max_grad_norm,
        schedule=args.schedule, head_lr_mult=args.head_lr_mult, precision=args.precision,
        group_by_length=args.group_by_length, compile=args.compile,
        model_overrides=parse_overrides(args.override, "--override"), objective=args.objective)


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    result = train(config, runs_dir=args.out, data_dir=args.data_dir, force=args.force, progress=not args.quiet)
    summary = {"run": str(result.path), "run_id": result.run_id, "cached": result.cached,
               "selection_metric": result.metrics["selection_metric"],
               "dev_best": result.selected("dev_best"),
               "test_best (official protocol: selected on test)": result.selected("test_best")}
    print_json(summary)
    return 0
