"""``absa remote carry|start|wait|import``: train a profile's grid on a GPU node reached only through
commands with a time limit, and bring back the run records (docs/remote.md).

    absa remote carry .carry                                   # here: fp16 MiniLM + raw data, checked
    absa remote start --profile gpu -p seeds '[44]' --grid tables:all:12     # node: detached grids
    absa remote wait --until 540 --bundle OUT/bundle.tar.gz    # node: wait, then bring back records
    absa remote import bundle.tar.gz                           # here: checked, into results/reference
"""

from __future__ import annotations

import argparse
from pathlib import Path

from absa_lib.commands import DATA_DIR_HELP

WORK = "executed/remote"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("remote", help="train on a GPU node with time-limited commands; bring back the records",
                       description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    c = actions.add_parser("carry", help="write what the node needs: a float16 MiniLM copy and the raw data")
    c.add_argument("dest", help="folder to write (e.g. .carry, git-ignored)")
    c.add_argument("--data-dir", default=None, help=DATA_DIR_HELP)
    c.add_argument("--reference", default="results/reference",
                   help="the copy must have the fingerprint of this reference's GPU runs (default: results/reference)")
    c.add_argument("--new-fingerprint", action="store_true",
                   help="accept a copy whose fingerprint the reference's GPU runs do not have (a new series of runs)")
    c.set_defaults(func=_carry)

    s = actions.add_parser("start", help="start grids as detached processes (nothing twice)")
    s.add_argument("--profile", default="gpu", help="a profile name (params/<name>.yaml) or a YAML file (default: gpu)")
    s.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                   help="change a profile parameter, as run_all.sh does (e.g. -p seeds '[44]')")
    s.add_argument("--grid", action="append", required=True, metavar="PARTS:MODELS:WORKERS[:SEEDS]",
                   help="one detached grid: parts joined by +, models by commas or 'all', its concurrent runs, "
                        "optionally seeds by commas (e.g. tables+ablations:cg-bert,qacg-bert:12, "
                        "tables:bert-single:2:42); repeat for several")
    s.add_argument("--reference", default="results/reference",
                   help="its finished runs are copied into the runs folder and not trained again ('' for none)")
    s.add_argument("--dry-run", action="store_true",
                   help="print the runs each grid would train, and start nothing (plan a node's time here)")
    s.add_argument("--collect", action="store_true",
                   help="start nothing: only check that an earlier command started these grids here (for a second "
                        "command on the same node); on a fresh node, fail at once instead of starting runs again")
    s.set_defaults(func=_start)

    w = actions.add_parser("wait", help="wait for the grids (at most --until seconds), then write the bundle")
    w.add_argument("--until", type=float, required=True, help="seconds to wait at most")
    w.add_argument("--bundle", required=True, help="the .tar.gz to write (records of the runs finished here)")
    w.add_argument("--analysis", action="store_true",
                   help="after waiting, compute the figure arrays (notebooks 05 and 06) from the runs finished here; "
                        "a notebook whose runs are not all finished stops at once and is tried at the next call")
    w.add_argument("--analysis-time", type=float, default=150.0,
                   help="seconds the analysis may take after --until (default 150)")
    w.add_argument("--analysis-seed", type=int, default=None,
                   help="the seed whose SentiHood runs are analysed (default: the profile's first)")
    w.add_argument("--every", type=float, default=60.0, help="seconds between progress lines (default 60)")
    w.set_defaults(func=_wait)

    i = actions.add_parser("import", help="check a bundle's records and add them to the reference")
    i.add_argument("bundle", help="a .tar.gz written by `absa remote wait`")
    i.add_argument("--reference", default="results/reference", help="default: results/reference")
    i.add_argument("--dry-run", action="store_true", help="check and say what would be added; write nothing")
    i.add_argument("--allow-tiny", action="store_true",
                   help="accept runs on the tiny random backbone (tests; their numbers mean nothing)")
    i.set_defaults(func=_import)

    for q in (s, w):
        q.add_argument("--work", default=WORK, help=f"the work folder on the node (default: {WORK})")


def _carry(args: argparse.Namespace) -> int:
    from absa_lib.remote import make_carry

    reference = _reference(args.reference)
    out = make_carry(Path(args.dest).resolve(), args.data_dir, reference, args.new_fingerprint)
    print(f"[remote] {out['minilm']} (fingerprint {out['fingerprint']}) and {out['data']}: {out['megabytes']:.1f} MiB; "
          f"on the node: ABSA_MINILM_DIR={out['minilm']} ABSA_DATA_DIR={out['data']}")
    return 0


def _start(args: argparse.Namespace) -> int:
    from absa_lib.device import default_device, resolve_precision
    from absa_lib.remote import GridSpec, backbone_note, plan, plan_lines, start, work_params
    from absa_lib.session import resolve_dir

    work = resolve_dir(args.work, create=not args.dry_run)
    params = work_params(args.profile, [x for name, value in args.p for x in ("-p", name, value)], work)
    reference = _reference(args.reference)
    specs = [GridSpec.parse(g) for g in args.grid]
    if args.dry_run:
        note = backbone_note(params, reference)
        if note:                                   # before the plan, which it explains (or its refusal)
            print(note, flush=True)
        print("\n".join(plan_lines(plan(params, specs, reference), specs, reference)))
        here = resolve_precision("auto", default_device())
        if "precision" not in (params.get("train_options") or {}) and here != "bf16":
            print(f"[remote] note: precision 'auto' is {here} here and bf16 on a CUDA node, and it is part of each "
                  "run's identity: add precision: bf16 to -p train_options to see the runs a node would train")
        return 0
    start(work, params, specs, reference, collect=args.collect)
    return 0


def _reference(value: str):
    """``--reference`` as a folder, or None for ``''``: a misspelt one was read as an empty reference,
    and a node would have trained every committed run again."""
    from absa_lib.errors import AbsaError
    from absa_lib.session import resolve_dir

    if not value:
        return None
    folder = resolve_dir(value, create=False)
    if not folder.is_dir():
        raise AbsaError(f"--reference {value}: no such folder ({folder}); give the reference's folder "
                        "(default results/reference), or '' for none")
    return folder


def _wait(args: argparse.Namespace) -> int:
    from absa_lib.remote import analyse, wait, write_bundle
    from absa_lib.session import resolve_dir

    work = resolve_dir(args.work, create=False)
    ended = wait(work, args.until, args.every,       # the bundle so far after each progress line: a command
                 on_progress=lambda: write_bundle(work, Path(args.bundle)))     # cut off still brings one back
    outcome = analyse(work, args.analysis_seed, args.analysis_time) if args.analysis else {}
    out = write_bundle(work, Path(args.bundle), {"grids_ended": ended, "analysis_outcome": outcome})
    print(f"[remote] {args.bundle}: {out['runs']} finished runs, analysis {out['analysis'] or 'none'}, "
          f"{out['bytes'] / 1024:.0f} KiB; {out['progress']}")
    return 0


def _import(args: argparse.Namespace) -> int:
    from absa_lib.remote import import_bundle
    from absa_lib.session import resolve_dir

    import_bundle(Path(args.bundle), resolve_dir(args.reference, create=False), args.dry_run, args.allow_tiny)
    return 0
