"""``absa train``: train (or fetch from the cache, or resume) one run and print where it lives.

Its options are :class:`~absa_lib.training.config.TrainConfig`'s fields, read from their one
declaration (default, help, type), so a new field is a new option without an edit here. SIGTERM
(``kill``, the grid, a scheduler) stops a run at the end of its batch, its resume state saved there.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import signal
import sys
import threading
from pathlib import Path

from absa_lib.commands import DATA_DIR_HELP, RUNS_DIR_HELP, parse_overrides, print_json
from absa_lib.errors import AbsaError


@functools.cache
def _fields() -> tuple[dataclasses.Field, ...]:
    """TrainConfig's fields, looked up when `absa train` is parsed (not for `absa --help`)."""
    from absa_lib.training.config import TrainConfig

    return dataclasses.fields(TrainConfig)


def _default(f: dataclasses.Field):
    return f.default_factory() if f.default is dataclasses.MISSING else f.default


def _flag(f: dataclasses.Field) -> str:
    return f.metadata["cli"].get("flag", "--" + f.name.replace("_", "-"))


def _cli_default(f: dataclasses.Field):
    """What the option holds when not given (a repeated option: an empty list)."""
    default = _default(f)
    return [] if isinstance(default, dict) else f.metadata["cli"].get("default", default)


HELP = "train a model; prints the run folder and its dev/test metrics"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help=HELP,
                       description="Train a model. A run with the same configuration is returned from "
                       "the cache instantly (unless --force); an interrupted run resumes. The defaults are "
                       "the paper's hyper-parameters (25 epochs: for SentiHood, hours on a CPU); for a first try give "
                       "--epochs 1, or --max-train-examples N.")
    for f in _fields():
        cli, default, flag = f.metadata["cli"], _default(f), _flag(f)
        if isinstance(default, bool):
            p.add_argument(flag, dest=f.name, action="store_true", help=f.metadata["help"])
        elif isinstance(default, dict):            # model_overrides: --override KEY=JSON, repeated
            p.add_argument(flag, dest=f.name, action="append", default=_cli_default(f), metavar=cli["metavar"],
                           help=f.metadata["help"])
        else:
            kind = int if default is None else type(default)
            p.add_argument(flag, dest=f.name, type=kind, default=_cli_default(f), help=f.metadata["help"])
    p.add_argument("--config", type=Path, default=None, metavar="FILE",
                   help="a JSON object of TrainConfig fields (e.g. a run's config.json); instead of the options above")
    p.add_argument("--out", default=None, help=RUNS_DIR_HELP)
    p.add_argument("--data-dir", default=None, help=DATA_DIR_HELP)
    p.add_argument("--force", action="store_true", help="retrain even if the run exists")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.set_defaults(func=run)


def config_from_args(args: argparse.Namespace):
    """The TrainConfig an ``absa train`` command line describes (a dataset folder is registered)."""
    from absa_lib.data.own_data import dataset_name
    from absa_lib.models import traits
    from absa_lib.training.config import TrainConfig

    given = {f.name: getattr(args, f.name) for f in _fields()}
    if args.config is not None:
        differ = [_flag(f) for f in _fields() if given[f.name] != _cli_default(f)]
        if differ:
            raise AbsaError(f"--config {args.config} gives every field; drop {differ[0]}")
        return TrainConfig.from_file(args.config)
    missing = [f"--{f.name}" for f in _fields() if f.metadata["cli"].get("required") and given[f.name] is None]
    if missing:
        raise AbsaError(f"the following arguments are required: {', '.join(missing)} (or --config FILE)")
    given["dataset"] = dataset_name(args.dataset, args.data_dir)
    given["aux"] = args.aux or traits(args.model).default_aux or _default(TrainConfig.__dataclass_fields__["aux"])
    given["model_overrides"] = parse_overrides(args.model_overrides, "--override")
    return TrainConfig(**given)


@contextlib.contextmanager
def _sigterm_stops(stop: threading.Event):
    """SIGTERM (``kill``, a grid stopping its runs, a scheduler) sets ``stop``: the loop saves the resume
    state at the end of the batch it is in and the run ends there (exit 143), to resume at that batch.
    A second SIGTERM changes nothing (a scheduler's and then the grid's reach a run one after the
    other); ``kill -9`` ends it at once."""
    if threading.current_thread() is not threading.main_thread():     # signals: main thread only
        yield
        return
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


def run(args: argparse.Namespace) -> int:
    from absa_lib.reports.plots import save_run_curve
    from absa_lib.training.loop import train
    from absa_lib.training.runs import Launch, folder_megabytes

    config = config_from_args(args)
    launch = Launch.from_environ()
    with _sigterm_stops(launch.stop):
        result = train(config, runs_dir=args.out, data_dir=args.data_dir, force=args.force, progress=not args.quiet,
                       launch=launch)
    save_run_curve(result)            # drawn once: also for a run a kill stopped before its curve
    summary = {"run": str(result.path), "run_id": result.run_id, "cached": result.cached,
               "size_mb": round(folder_megabytes(result.path), 1),
               "selection_metric": result.metrics.selection_metric,
               "dev_best": result.selected("dev_best"),
               "test_best (official protocol: selected on test)": result.selected("test_best")}
    print_json(summary)
    if (level := result.metrics.at_trivial_level()) is not None:     # the last line: the run did not learn
        print(f"[absa] {result.path}: {level}: a constant answer does as well; more data, more epochs or a higher "
              "--head-lr-mult may help", file=sys.stderr, flush=True)
    return 0
