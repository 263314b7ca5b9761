"""What the epoch chosen on dev gives away against each run's plateau.

The tables report a run at the epoch where the dataset's selection metric (SentiHood: strict
accuracy; SemEval: aspect F1) is best on dev. When that metric stops moving early while another
is still rising or swinging, the choice falls among near-equal epochs and the other metric pays
for it (on SemEval, BERT-single's polarity). The plateau, the mean of the last ``last`` epochs, is a
choice-free reference beside it:

    plateau(m) = mean over the run's last K epochs of m(test)

Cells are computed as the tables compute theirs (:func:`absa_lib.reports.tables.aggregate_metrics`: the mean
over seeds, and for the plateau over seeds × epochs; SemEval F1 from the mean P and mean R).
"""

from __future__ import annotations

import pandas as pd

from absa_lib.errors import AbsaError
from absa_lib.reports.paper_numbers import METRICS, TITLES, paper_rows
from absa_lib.reports.tables import aggregate_metrics, budget_key, budget_labels, matches, split_by_budget
from absa_lib.training.config import describe

LAST = 5    # epochs in the plateau


def _check(run, last: int) -> None:
    if last < 1:
        raise AbsaError(f"last={last}: the plateau needs at least one epoch")
    if run.config.dataset not in METRICS:
        raise AbsaError(f"{run.path}: dataset {run.config.dataset!r} has no table metrics; expected one of "
                        f"{', '.join(METRICS)}")


def epoch_spread(run, last: int = LAST) -> dict[str, dict[str, float]]:
    """Per table metric of ``run`` (in %): the test value at the dev-best epoch (``dev_best``), the
    plateau (``plateau``), and the test set's own best epoch (``best``, ``best_epoch``; optimistic)."""
    _check(run, last)
    dataset, epochs = run.config.dataset, run.metrics.epochs
    curve = [{k: mean for k, (mean, _) in aggregate_metrics(dataset, [e["test"]]).items()} for e in epochs]
    chosen = run.selected("dev_best")["epoch"]
    plateau = aggregate_metrics(dataset, [e["test"] for e in epochs[-last:]])
    out = {}
    for metric, _, _ in METRICS[dataset]:
        values = [c[metric] for c in curve]
        best = max(range(len(values)), key=values.__getitem__)
        out[metric] = {"dev_best": values[chosen - 1], "plateau": plateau[metric][0], "best": values[best],
                       "best_epoch": best + 1}
    return out


def system_name(config: dict) -> str:
    """The Table 1/2 row a run reproduces (e.g. ``QACG-BERT (auxiliary sentences)``), else its
    configuration but the seed (an ablation: ``cg-bert NLI-M gate_activation=sigmoid (paper)``)."""
    row = next((r for r in paper_rows(config.dataset) if matches(config, r, config.dataset)), None)
    return row.name if row is not None else describe(config, seed=False, dataset=False)


def spread_table(runs: list, last: int = LAST) -> pd.DataFrame:
    """One row per dataset, system (:func:`system_name`) and budget, over the runs with more than
    ``last`` epochs: ``n_seeds``, ``seeds``, ``dev_epochs`` (the dev-best epoch of each seed), and per
    table metric ``<m>_dev_best``, ``<m>_plateau`` and ``<m>_gap`` (dev-best minus plateau), in %."""
    if last < 1:
        raise AbsaError(f"last={last}: the plateau needs at least one epoch")
    systems: dict[tuple[str, str], list] = {}
    for run in runs:
        _check(run, last)
        if len(run.metrics.epochs) > last:
            systems.setdefault((run.config.dataset, system_name(run.config)), []).append(run)
    records, columns = [], ["dataset", "system", "budget", "n_seeds", "seeds", "dev_epochs"]
    for (dataset, system), group in sorted(systems.items(), key=lambda item: _order(*item[0])):
        names = budget_labels([r.config for r in group])
        for same_budget in split_by_budget(group):
            same_budget = sorted(same_budget, key=lambda r: r.config.seed)
            chosen = aggregate_metrics(dataset, [r.selected("dev_best")["test"] for r in same_budget])
            plateau = aggregate_metrics(dataset, [e["test"] for r in same_budget for e in r.metrics.epochs[-last:]])
            record = {"dataset": dataset, "system": system, "budget": names[budget_key(same_budget[0].config)],
                      "n_seeds": len(same_budget), "seeds": " ".join(str(r.config.seed) for r in same_budget),
                      "dev_epochs": " ".join(str(r.selected("dev_best")["epoch"]) for r in same_budget)}
            for metric, _, _ in METRICS[dataset]:
                record |= {f"{metric}_dev_best": chosen[metric][0], f"{metric}_plateau": plateau[metric][0],
                           f"{metric}_gap": chosen[metric][0] - plateau[metric][0]}
            records.append(record)
    metric_columns = dict.fromkeys(c for record in records for c in record if c not in columns)
    return pd.DataFrame.from_records(records, columns=columns + list(metric_columns))


def _order(dataset: str, system: str) -> tuple:
    """Datasets as the paper's tables, and within one the paper's row order, then the other systems."""
    names = [r.name for r in paper_rows(dataset)]
    return list(METRICS).index(dataset), names.index(system) if system in names else len(names), system


def spread_markdown(df: pd.DataFrame, last: int = LAST) -> str:
    """The table of :func:`spread_table`, one block per dataset, cells ``dev-best / plateau (gap)``."""
    intro = (f"Cells: the test value at the epoch chosen on dev (the tables' default) / the mean over the "
             f"last {last} epochs (the plateau), and their difference; mean over seeds, SemEval F1 from the "
             f"mean P and mean R as in Table 2. Runs of more than {last} epochs only. A large gap means the "
             "selection metric had stopped moving while this one had not.")
    lines = ["# What the dev-selected epoch gives away (test set, %)", "", intro, ""]
    if df.empty:
        lines.append(f"_No finished run has more than {last} epochs yet._")
    for dataset in dict.fromkeys(df["dataset"]):
        block, metrics = df[df["dataset"] == dataset], METRICS[dataset]
        header = ["System", "Budget", "Seeds", "Dev-best epochs"] + [title for _, title, _ in metrics]
        lines += [f"## {TITLES[dataset]}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for rec in block.to_dict("records"):
            cells = [rec["system"], rec["budget"], rec["seeds"], rec["dev_epochs"]]
            cells += [f"{rec[f'{m}_dev_best']:.{d}f} / {rec[f'{m}_plateau']:.{d}f} ({rec[f'{m}_gap']:+.{d}f})"
                      for m, _, d in metrics]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)
