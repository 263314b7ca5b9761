"""Tables with one row per variant of a grid: the ablations of notebook 04 and the other attention
systems of notebook 06, each a mean ± sd (%) over seeds of the paper's test metrics
(:func:`absa_lib.reports.tables.aggregate_metrics`).

* :func:`ablation_variants`, :func:`ablation_table`: every ablation at the dev-best epoch, then the
  two references at the test-best epoch (the official code's selection on the test set).
* :func:`comparison_table`: every spec of notebook 06 at the dev-best epoch with the test-best
  epoch beside it.

Runs of different budgets (backbone, epochs, learning rate...: :func:`absa_lib.reports.tables.budget_key`)
are never averaged together: a variant run at two budgets has one row per budget, named in the
``budget`` column, with the full budget in a footnote. Every variant has a row for every budget of
its table (:func:`budget_groups`): one not run at a budget shows it with 0 seeds and '–' cells
rather than leaving it out, so a missing cell is seen as missing.

Both end with the trivial predictors (all-None, majority polarity) when given
(:func:`absa_lib.reports.tables.trivial_baselines`), in the row format of Tables 1-2: ``source`` is
``trivial`` (our rows: ``ours``), values in %, no sd.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from absa_lib.reports.paper_numbers import METRICS
from absa_lib.reports.tables import (
    OURS,
    TRIVIAL,
    budget_columns,
    budget_footnotes,
    budget_key,
    budget_labels,
    format_cell,
    no_aspect_footnotes,
    run_ids,
    seed_cells,
    split_by_budget,
    trivial_values,
)

TRIVIAL_CHANGE = "constant predictor scored on the test set (the floor of each metric)"


@dataclass
class Variant:
    """One ablation setting: a label, what changed, and its runs."""

    label: str
    change: str
    runs: list = field(default_factory=list)
    protocol: str = "dev_best"


def ablation_variants(grid: dict, dataset: str, specs: list) -> list[Variant]:
    """Every spec at dev-best, then the two references (first QACG and first CG spec) at test-best,
    the official code's selection on the test set."""
    out = [Variant(s.label, s.change, grid.get((dataset, s.label), []), "dev_best") for s in specs]
    for model in ("qacg-bert", "cg-bert"):
        ref = next((s for s in specs if s.model == model), None)
        if ref is not None:
            out.append(Variant(ref.label, "epoch selected on the test set (official protocol, optimistic)",
                               grid.get((dataset, ref.label), []), "test_best"))
    return out


def budget_groups(per_variant: list[list]) -> list[list[tuple[dict, list]]]:
    """Per variant (its runs, one list each): ``(budget columns, runs)`` for each of its budgets
    (:func:`absa_lib.reports.tables.split_by_budget`, most runs first), then, with no runs, each budget
    that another variant of the table has and it lacks (in the order the table first shows them);
    one empty group when the table has no run."""
    names = budget_labels([r.config for runs in per_variant for r in runs])   # unique in the table
    split = [{budget_key(g[0].config): (budget_columns(g, names), g) for g in split_by_budget(runs)}
             for runs in per_variant]
    every: dict[tuple, dict] = {}                       # budget -> its columns, in order of appearance
    for groups in split:
        for key, (columns, _) in groups.items():
            every.setdefault(key, {**columns, "device": ""})               # no runs: trained nowhere
    return [list(groups.values()) + [(columns, []) for key, columns in every.items() if key not in groups]
            or [(budget_columns([]), [])] for groups in split]


def ablation_table(dataset: str, variants: list[Variant], trivial: dict[str, dict] | None = None) -> pd.DataFrame:
    """Tidy ablation table: one row per variant and budget (0 seeds where not run), mean ± sd (%) of
    every table metric, then one row per trivial predictor (``trivial``:
    :func:`absa_lib.reports.tables.trivial_baselines` of ``dataset``)."""
    records = []
    for v, groups in zip(variants, budget_groups([v.runs for v in variants]), strict=True):
        for budget, runs in groups:
            cells, no_aspect = seed_cells(dataset, runs, v.protocol)
            records.append({"variant": v.label, "change": v.change, "selection": v.protocol, "n_seeds": len(runs),
                            **budget, "run_ids": run_ids(runs), "no_aspect_seeds": no_aspect, "source": OURS,
                            **cells})
    records += [{"variant": name, "change": TRIVIAL_CHANGE, "selection": "", "n_seeds": 0, **budget_columns([]),
                 "run_ids": "", "source": TRIVIAL, **trivial_values(dataset, metrics)}
                for name, metrics in (trivial or {}).items()]
    return pd.DataFrame.from_records(records)


def ablation_markdown(df: pd.DataFrame, dataset: str, title: str) -> str:
    """Markdown version of :func:`ablation_table` (cells mean ± sd, %), the budgets in footnotes."""
    metrics = METRICS[dataset]
    header = ["Variant", "Change", "Selection", "Budget", "Seeds"] + [t for _, t, _ in metrics]
    lines = [f"# {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for rec in df.to_dict("records"):
        trivial = rec["source"] == TRIVIAL
        cells = [rec["variant"], rec["change"]] + (["–", "–", "–"] if trivial else [
            rec["selection"], rec["budget"] or "–", str(rec["n_seeds"])])
        cells += [format_cell(rec.get(k), rec.get(f"{k}_sd"), d) if rec["n_seeds"] or trivial else "–"
                  for k, _, d in metrics]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines + budget_footnotes(df) + no_aspect_footnotes(df, "variant")) + "\n"


def comparison_table(dataset: str, grid: dict, specs: list, trivial: dict[str, dict] | None = None) -> pd.DataFrame:
    """Tidy table: ``label``, ``model``, ``aux``, ``objective``, ``change``, ``n_seeds``, ``backbone``,
    ``run_ids``, ``source`` and per metric ``<m>``, ``<m>_sd`` (dev-best) and ``<m>_test_best``,
    ``<m>_test_best_sd``; then one row per trivial predictor (``trivial``:
    :func:`absa_lib.reports.tables.trivial_baselines` of ``dataset``), the same under both selections."""
    records = []
    groups_of = budget_groups([grid.get((dataset, spec.label), []) for spec in specs])
    for spec, groups in zip(specs, groups_of, strict=True):
        for budget, runs in groups:
            rec = {"label": spec.label, "model": spec.model, "aux": spec.aux, "objective": spec.objective,
                   "change": spec.change, "n_seeds": len(runs), "epochs": runs[0].config.epochs if runs else None,
                   "backbone": str(runs[0].config.backbone) if runs else "", **budget,
                   "run_ids": run_ids(runs), "source": OURS}
            cells, rec["no_aspect_seeds"] = seed_cells(dataset, runs, "dev_best")   # the footnote: dev-best cells
            rec.update(cells)
            rec.update(seed_cells(dataset, runs, "test_best", "_test_best")[0])
            records.append(rec)
    for name, metrics in (trivial or {}).items():
        values = trivial_values(dataset, metrics)
        records.append({"label": name, "model": "", "aux": "", "objective": "", "change": TRIVIAL_CHANGE,
                        "n_seeds": 0, "epochs": None, "backbone": "", **budget_columns([]), "run_ids": "",
                        "source": TRIVIAL,
                        **{f"{key}{suffix}{sd}": values[key + sd] for key, _, _ in METRICS[dataset]
                           for suffix in ("", "_test_best") for sd in ("", "_sd")}})
    return pd.DataFrame.from_records(records)


def comparison_markdown(df: pd.DataFrame, dataset: str, title: str) -> str:
    """Cells ``dev-best mean ± sd [test-best mean ± sd]`` in % ('–': no run); trivial rows: the value."""
    metrics = METRICS[dataset]
    header = ["Model", "Input", "Objective", "Budget", "Seeds"] + [t for _, t, _ in metrics]
    lines = [f"# {title}", "",
             ("Test set, %: mean ± sd over seeds at the **dev-best** epoch, and in brackets at the "
              "test-best epoch (the official code's selection on the test set, optimistic)."), "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for rec in df.to_dict("records"):
        if rec["source"] == TRIVIAL:
            cells = [rec["label"], "–", "–", "–", "–"] + [format_cell(rec[k], rec[f"{k}_sd"], d) for k, _, d in metrics]
            lines.append("| " + " | ".join(cells) + " |")
            continue
        cells = [rec["label"], "sentence + auxiliary" if rec["aux"] != "none" else "sentence + context id",
                 rec["objective"], rec["budget"] or "–", str(rec["n_seeds"])]
        for key, _, dec in metrics:
            if not rec["n_seeds"]:
                cells.append("–")
                continue
            dev = format_cell(rec[key], rec[f"{key}_sd"], dec)
            cells.append(f"{dev} [{format_cell(rec[f'{key}_test_best'], rec[f'{key}_test_best_sd'], dec)}]")
        lines.append("| " + " | ".join(cells) + " |")
    lines += budget_footnotes(df) + no_aspect_footnotes(df, "label", "the dev-best epoch") + one_epoch_dwa_footnotes(df)
    if (df["source"] == TRIVIAL).any():
        lines += ["", f"_`(trivial)` rows: {TRIVIAL_CHANGE}; no epoch is selected._"]
    return "\n".join(lines) + "\n"


def one_epoch_dwa_footnotes(df: pd.DataFrame) -> list[str]:
    """A ``joint-dwa`` row of one epoch is the ``joint`` row again: its weights first change after
    epoch 1 (:func:`absa_lib.models.joint.updated_weights`), so say so under the table."""
    rows = df[(df["objective"] == "joint-dwa") & (df["epochs"] == 1) & (df["n_seeds"] > 0)]
    return [f"\n_{r['label']} ({r['budget']}): the dynamic weights first change after epoch 1, so a one-epoch "
            "run trains as the joint objective's does (weights ½ and ½): with the same seed, the same numbers._"
            for r in rows.to_dict("records")]
