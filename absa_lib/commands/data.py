"""``absa data download|verify|stats``: fetch, check and summarise the benchmark files;
``absa data check FOLDER``: check and summarise a folder of your own data; ``absa data export``: a
benchmark in that format; ``absa data facts``: what render needs of the raw files, committed beside
the reference runs."""

from __future__ import annotations

import argparse

from absa_lib.commands import DATA_DIR_HELP, print_json

HELP = "download, verify or summarise SentiHood and SemEval-2014"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("data", help=HELP,
                       description="Manage the benchmark files (pinned URLs, sizes and SHA-256). The data "
                       "folder is --data-dir, else $ABSA_DATA_DIR, else data/ in the checkout (or "
                       "~/.cache/absa_lib/data when the package is installed outside one).")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    d = actions.add_parser("download", help="fetch the raw files (checked before they are put in place)")
    d.add_argument("--force", action="store_true", help="download again even if the files verify")
    d.add_argument("--with-nli-m", action="store_true",
                   help="also fetch the published NLI_M files (only used to check the rebuilt examples)")
    d.set_defaults(func=_download)
    v = actions.add_parser("verify", help="check sizes and SHA-256 of the files in the data folder")
    v.set_defaults(func=_verify)
    s = actions.add_parser("stats", help="examples and label counts per dataset and split")
    s.add_argument("--json", action="store_true", help="print the full statistics as JSON")
    s.set_defaults(func=_stats)
    for q in (d, v, s):
        q.add_argument("--data-dir", default=None, help=DATA_DIR_HELP)
    c = actions.add_parser("check", help="check a folder of your own data and summarise it "
                                         "(docs/own_data.md)")
    c.add_argument("folder", help="holds dataset.json, train.csv, dev.csv and test.csv")
    c.add_argument("--json", action="store_true", help="print the full statistics as JSON")
    c.set_defaults(func=_check)
    e = actions.add_parser("export", help="write SentiHood or SemEval in the own-data format "
                                          "(docs/own_data.md)")
    e.add_argument("dataset", choices=("sentihood", "semeval"))
    e.add_argument("folder", help="where dataset.json and the three CSV files go")
    e.add_argument("--data-dir", default=None, help=DATA_DIR_HELP)
    e.add_argument("--force", action="store_true", help="write into a folder that is not empty, replacing "
                                                        "its dataset.json and CSV files")
    e.set_defaults(func=_export)
    f = actions.add_parser("facts", help="write the counts, trivial rows and shown sentences that render reads "
                                         "when the raw files are absent (results/reference/data/benchmarks.json)")
    f.add_argument("--reference", default="results/reference",
                   help="the committed records' folder: the file goes in its data/, the trivial rows are scored "
                        "for the test subsets its runs/ use (default: %(default)s, from the repository root)")
    f.add_argument("--check", action="store_true", help="write nothing: exit 1 when the file differs from what "
                                                        "the raw files give")
    f.add_argument("--data-dir", default=None, help=DATA_DIR_HELP)
    f.set_defaults(func=_facts)


def _print_report(report: dict[str, str], data_dir) -> None:
    from absa_lib.paths import resolve_data_dir

    print(f"data folder: {resolve_data_dir(data_dir)}")
    for path, status in report.items():
        print(f"  {status:<18} {path}")


def _download(args: argparse.Namespace) -> int:
    from absa_lib.data.download import download

    _print_report(download(args.data_dir, force=args.force, nli_m=args.with_nli_m), args.data_dir)
    return 0


def _verify(args: argparse.Namespace) -> int:
    from absa_lib.data.download import verify

    _print_report(verify(args.data_dir), args.data_dir)
    return 0


def _check(args: argparse.Namespace) -> int:
    from absa_lib.data.datasets import SPLITS, split_stats, texts_in_train
    from absa_lib.data.own_data import register_dataset
    from absa_lib.reports.tables import trivial_baselines

    name = register_dataset(args.folder)
    result = {name: {split: split_stats(name, split) for split in SPLITS}}
    floor = trivial_baselines(name)                  # what a trained model must beat, on test
    seen = texts_in_train(name)                      # sentences of dev/test that train has verbatim
    if args.json:
        print_json({**result, "trivial_test": floor, "texts_in_train": seen})
        return 0
    _print_stats(result, as_json=False)
    if any(seen.values()):
        print(f"  sentences whose text train has too (seen in training; they flatter the scores): "
              f"dev {seen['dev']}, test {seen['test']}")
    print("  trivial predictors on test (the floor a model must beat):")
    for row, metrics in floor.items():
        values = ", ".join(f"{k} {100 * v:.1f}" for k, v in metrics.items())
        print(f"    {row.removesuffix(' (trivial)')}: {values}")
    return 0


def _export(args: argparse.Namespace) -> int:
    from absa_lib.data.own_data import export_benchmark

    print(export_benchmark(args.dataset, args.folder, args.data_dir, force=args.force))
    return 0


def _facts(args: argparse.Namespace) -> int:
    from absa_lib.fileio import read_json
    from absa_lib.paths import from_root
    from absa_lib.reports.dataset_facts import FACTS_FILE, REWRITE, facts_from_raw, write_facts
    from absa_lib.training.records import find_runs

    reference = from_root(args.reference)
    runs = find_runs(reference / "runs") if (reference / "runs").is_dir() else []
    subsets = {r.config.max_eval_examples for r in runs} | {None}
    path = reference / FACTS_FILE
    if args.check:
        if not path.is_file() or read_json(path, REWRITE) != facts_from_raw(args.data_dir, subsets):
            print(f"{path}: differs from what the raw files give (or is missing); {REWRITE}")
            return 1
        print(f"{path}: up to date with the raw files")
        return 0
    write_facts(path, args.data_dir, subsets)
    shown = ", ".join("whole test set" if k is None else f"first {k} examples" for k in
                      sorted(subsets, key=lambda k: -1 if k is None else k))
    print(f"wrote {path} (trivial rows on: {shown})")
    return 0


def _stats(args: argparse.Namespace) -> int:
    from absa_lib.data.datasets import stats

    _print_stats(stats(args.data_dir), args.json)
    return 0


def _print_stats(result: dict, as_json: bool) -> None:
    from absa_lib.data.datasets import LABELS

    if as_json:
        print_json(result)
        return
    for dataset, splits in result.items():
        labels = LABELS[dataset]
        print(f"{dataset}:")
        head = " ".join(f"{x:>8}" for x in labels)
        print(f"  {'split':<6} {'sentences':>9} {'groups':>7} {'examples':>8}  {head}")
        for split, s in splits.items():
            counts = " ".join(f"{s['labels'][x]:>8}" for x in labels)
            print(f"  {split:<6} {s['sentences']:>9} {s['groups']:>7} {s['examples']:>8}  {counts}")
