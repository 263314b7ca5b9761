"""``absa grid``: train the runs of a profile's grid (the tables, the ablations) before the notebooks.

    absa grid --profile cpu                   # every run of params/cpu.yaml: one run per core at a time
    absa grid --profile gpu --workers 4       # 4 concurrent runs per visible GPU
    absa grid --profile gpu --list            # one `absa train` command per cell
    absa grid --profile gpu --cell 7          # only cell 7 (e.g. $SLURM_ARRAY_TASK_ID)
    absa grid --profile gpu --cell 7 --busy skip   # ... and exit 1 at once if another job trains it
    absa grid --profile gpu --chunk 12 --count     # the cells in slices of 12: how many slices (array tasks)
    absa grid --profile gpu --chunk 12 --task 2    # slice 2 (cells 24-35), all 12 at once on the GPU
    absa grid --profile gpu --model cg-bert qacg-bert    # only these models' cells
    absa grid --profile gpu --model bert-single --seed 42    # and only this seed's
    absa grid --profile cpu --export results/reference   # copy finished runs' records (no weights)

Finished runs are skipped, interrupted ones resume, and a run that another process is training
(another grid, a notebook) is waited for; ``--busy skip`` reports it busy instead. The summary goes to
``<runs_dir>/grid_summary_<profile>.json``. Stopping the grid (Ctrl-C, ``kill``, a scheduler's
SIGTERM) stops the runs it started; on SIGTERM each saves its resume state at the batch it reached
(``absa train``'s SIGTERM) and resumes there next time.
"""

from __future__ import annotations

import argparse
import shlex
import signal
import threading
import time
from pathlib import Path

from absa_lib.commands import non_negative, positive

HELP = "train every run of a profile (tables, ablations): a queue or a GPU pool"


def add_parser(sub: argparse._SubParsersAction) -> None:
    from absa_lib.harness.profiles import BUSY, PARTS

    p = sub.add_parser("grid", help=HELP,
                       description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--profile", required=True, help="a profile name (params/<name>.yaml) or a YAML file; "
                   "the runs go to its runs_dir (relative: from the checkout), not to $ABSA_RUNS_DIR")
    p.add_argument("--part", nargs="+", default=list(PARTS), choices=PARTS, help="which grids (default: all)")
    p.add_argument("--workers", type=positive, default=None,
                   help="concurrent runs per GPU (default 4; K with --chunk K); on a CPU (default: one single-threaded "
                   "run per core, at most 4; K with --chunk K)")
    p.add_argument("--threads", type=positive, default=None,
                   help="CPU threads per run (default: 1 when several runs share a CPU, else torch's choice)")
    p.add_argument("--busy", choices=BUSY, default="wait",
                   help="a run that another process is training: wait for it to end, then count it finished "
                        "or resume it (default), or skip it at once and report it busy (exit 1)")
    p.add_argument("--list", action="store_true", help="print one `absa train` command per cell and exit")
    p.add_argument("--count", action="store_true", help="print the number of cells and exit (the size of an "
                   "array job: cells 0 to N-1)")
    p.add_argument("--model", nargs="+", default=None, metavar="MODEL",
                   help="only the cells of these models (default: all; e.g. leave out the slow bert-single)")
    p.add_argument("--seed", nargs="+", type=int, default=None, metavar="SEED",
                   help="only the cells of these seeds (default: the profile's seeds and ablation seeds)")
    one = p.add_mutually_exclusive_group()
    one.add_argument("--cell", type=non_negative, default=None,
                     help="run only this cell (0-based, counted after --model and --seed; array jobs); with "
                     "--list, --count or --export, only this cell too")
    one.add_argument("--task", type=non_negative, default=None,
                     help="run only slice TASK of the --chunk slices (0-based; an array task trains K cells "
                     "at once); with --list, --count or --export, only its cells too")
    p.add_argument("--chunk", type=positive, default=None, metavar="K",
                   help="the cells in consecutive slices of K (default 1, with --task): --count prints the "
                   "number of slices (the array's size), --list heads each slice; --workers defaults to K")
    p.add_argument("--export", metavar="DIR", default=None,
                   help="train nothing: copy the records of the grid's finished runs to DIR/runs/ "
                        "(e.g. results/reference)")
    p.set_defaults(func=run)


def _params(profile: str) -> tuple[str, dict]:
    """(name, values) of a profile given by name or as a YAML file (e.g. run_all.sh's merged one)."""
    from absa_lib.harness.profiles import check_grid_keys, profile_path, read_profile_file

    path = profile_path(profile)
    params = read_profile_file(path)
    check_grid_keys(params, path)
    return str(params.get("profile") or path.stem), params


class _sigterm_exits:
    """SIGTERM (``kill``, a scheduler ending the job) ends the grid like Ctrl-C does: through
    ``run_cells``' cleanup, which stops the runs it started, instead of leaving them training unwatched."""

    def __enter__(self):
        self.installed = threading.current_thread() is threading.main_thread()   # signals: main thread only
        if self.installed:
            self.previous = signal.signal(signal.SIGTERM, self._exit)

    def __exit__(self, *exc):
        if self.installed:
            signal.signal(signal.SIGTERM, self.previous or signal.SIG_DFL)

    @staticmethod
    def _exit(signum, frame):
        raise SystemExit(128 + signum)


def run(args: argparse.Namespace) -> int:
    from absa_lib.device import default_device
    from absa_lib.errors import AbsaError
    from absa_lib.harness.runner import (
        export_finished,
        profile_cells,
        run_cells,
        select,
        train_argv,
        write_summary,
    )
    from absa_lib.harness.session import resolve_dir

    name, params = _params(args.profile)
    if not params.get("allow_training", True):
        raise AbsaError(f"profile {name!r} does not train (allow_training: false); nothing to run")
    cells = select(profile_cells(params, tuple(args.part)), args.model, args.seed,
                   f"profile {name!r} in --part {' '.join(args.part)}")
    trains = not (args.count or args.list or args.export)      # the others only read: no folder made
    runs_dir, data_dir = resolve_dir(params["runs_dir"], create=trains), params.get("data_dir") or None
    if args.cell is not None:               # --list, --count and --export too speak of that cell alone
        if args.cell >= len(cells):
            raise AbsaError(f"--cell {args.cell} is out of range: profile {name!r} has {len(cells)} cells (0-{len(cells) - 1})")
        cells = [cells[args.cell]]
    chunk = args.chunk or (1 if args.task is not None else None)
    slices = [cells[i:i + chunk] for i in range(0, len(cells), chunk)] if chunk else [cells]
    if args.task is not None:                # one array task's slice: K cells trained side by side
        if args.task >= len(slices):
            raise AbsaError(f"--task {args.task} is out of range: profile {name!r} has {len(cells)} cells, "
                            f"{len(slices)} slices of --chunk {chunk} (tasks 0-{len(slices) - 1})")
        cells = slices[args.task]
        slices = [cells]
    if args.count:
        print(len(slices) if chunk and args.task is None else len(cells))
        return 0
    if args.list:
        for task, part in enumerate(slices):
            if chunk and args.task is None:
                print(f"# --task {task}: cells {task * chunk}-{task * chunk + len(part) - 1}")
            for cell in part:
                print(shlex.join(train_argv(cell.config, runs_dir, data_dir)))
        return 0
    if args.export:
        target = Path(args.export).expanduser().absolute()       # from the working folder, as any path given
        if target.exists() and not target.is_dir():
            raise AbsaError(f"--export {args.export}: {target} is a file, not a folder; give the folder to write "
                            "runs/<dataset>/<model>/<run_id>/ under")
        written = export_finished(cells, runs_dir, target)
        print(f"[grid] exported {len(written)} record files of finished runs to {target / 'runs'}")
        return 0
    t0 = time.time()
    with _sigterm_exits():
        rows = run_cells(cells, runs_dir, data_dir, workers=args.workers or chunk, threads=args.threads,
                         busy=args.busy, force=bool(params.get("force_retrain")))
    suffix = (("_" + "+".join(args.model) if args.model else "") + ("_seed" + "+".join(map(str, args.seed)) if args.seed else "")
              + (f"_cell{args.cell}" if args.cell is not None else "")
              + (f"_chunk{chunk}_task{args.task}" if args.task is not None else ""))
    summary = write_summary(rows, runs_dir / f"grid_summary_{name}{suffix}.json", time.time() - t0,
                            {"profile": name, "parts": args.part, "models": args.model or "all", "seeds": args.seed or "all",
                             "device": str(default_device()),
                             "workers_per_gpu": args.workers or chunk, "busy": args.busy})
    busy = f"{summary['busy']} busy in another process, " if summary["busy"] else ""
    print(f"[grid] {summary['runs']} runs: {summary['trained']} trained, {summary['cached']} finished before, "
          f"{busy}{summary['failed']} failed, in {summary['wall_seconds']:.0f}s; summary: "
          f"{runs_dir / f'grid_summary_{name}{suffix}.json'}")
    return 1 if summary["failed"] or summary["busy"] else 0     # busy: not finished when the grid ends
