"""Tables 1 and 2 of the paper, beside our runs: mean ± sd over seeds next to the paper's numbers.

Table 1 (SentiHood, test set): aspect strict accuracy, aspect macro-F1, aspect AUC, sentiment
accuracy, sentiment AUC. Table 2 (SemEval-2014 Task 4, test set): aspect precision, recall, F1,
sentiment accuracy binary / 3-class / 4-class. All values are percentages here (run records keep
fractions). The paper's numbers are data in :mod:`absa_lib.reports.paper_numbers`; rows we do not train
(LR, LSTM-Final, LSTM-Loc, SenticLSTM, Dmu-Entnet, XRCE, NRC-Canada) carry them only, marked
``reported``. Beside every table: the trivial predictors (all-None, majority polarity), marked
``trivial`` (:func:`trivial_baselines`).

Aggregation over seeds (the paper: "means and standard deviations across runs"):

    mean_m = (1/S) Σ_s m_s,    sd_m = sqrt( Σ_s (m_s − mean_m)² / (S − 1) )     (sample sd)

SemEval aspect F1 is the paper's way, from the mean precision and mean recall (its "(-)" sd):

    F1 = 2 · mean_P · mean_R / (mean_P + mean_R)

Every run is reported at the epoch chosen by a selection protocol: ``dev_best`` (default; chosen
on the dev split) or ``test_best`` (the official code's protocol: chosen on the test set itself,
so optimistic), both recorded in each run's metrics record.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pandas as pd

from absa_lib.data import datasets as D
from absa_lib.errors import AbsaError
from absa_lib.evaluation.metrics import (
    F1_OF_MEANS,
    NOT_RECORDED,
    aggregate_seeds,
    recall_metric,
    selection_metric,
    table_metrics,
)
from absa_lib.evaluation.trivial import trivial_floor, trivial_predictors  # noqa: F401 (trivial_floor: the notebooks')
from absa_lib.fileio import atomic_write_bytes
from absa_lib.reports import PROTOCOL_LABELS
from absa_lib.reports.paper_numbers import TITLES, PaperRow, paper_rows
from absa_lib.training.config import budget_fields, budget_parts, describe, epochs_text
from absa_lib.training.records import RunConfig

PROTOCOLS = ("dev_best", "test_best")
OURS = "ours"           # source of a row of our runs
REPORTED = "reported"   # source of a row that shows the paper's numbers only
TRIVIAL = "trivial"     # source of a row computed from the test labels alone (the floor of every metric)

STEMS = {"sentihood": "table1_sentihood", "semeval": "table2_semeval"}

# What makes a run part of the main grid (the tables): the paper preset, no overrides, one head, and
# the row's sampler (uniform; per-context for bert-single).
MAIN_GRID = {"preset": "paper", "model_overrides": {}, "objective": "single"}
# What, besides the row's configuration (TrainConfig's "grid" fields) and the seed, tells budgets apart:
# every other TrainConfig field (its declaration is the only list) and the backbone's weights. Runs of
# one dataset differing in any of them, or in the version of its data files (data_key), are never
# averaged or compared as one configuration.
GROUP_FIELDS = (*budget_fields(), "backbone_fingerprint")
DEVICE_SEP = "; "                        # between the machines of one row (a CPU's name has commas)


def run_ids(runs: list) -> str:
    return " ".join(r.run_id for r in runs)


def matches(config: RunConfig, row: PaperRow, dataset: str) -> bool:
    """Whether a run's config reproduces ``row`` (main grid only)."""
    return (row.model is not None and config.dataset == dataset and config.model == row.model
            and config.aux == row.aux and config.sampler == row.sampler
            and all(getattr(config, k) == v for k, v in MAIN_GRID.items()))


def metric_columns(dataset: str) -> tuple[tuple[str, str, int], ...]:
    """``(metric key, column title, decimals)`` of a dataset's table, as the metric registry declares them
    (:data:`absa_lib.evaluation.metrics.REGISTRY`, read when called): the paper's columns for SentiHood
    and SemEval, your own data's metrics for yours."""

    return tuple((m.key, m.title, m.decimals) for m in table_metrics(dataset))


def aggregate_metrics(dataset: str, per_run: list[dict]) -> dict[str, tuple[float, float]]:
    """Mean ± sd (in %) of each table metric over runs; SemEval F1 from mean P and mean R (sd NaN).

    Uses :func:`absa_lib.evaluation.metrics.aggregate_seeds` (sample sd, ddof=1).
    """

    columns = metric_columns(dataset)
    if not per_run:
        return {key: (math.nan, math.nan) for key, _, _ in columns}
    agg = aggregate_seeds(per_run, dataset)
    if D.get(dataset).f1_of_means:
        agg["mean"]["aspect_f1"], agg["sd"]["aspect_f1"] = agg["mean"][F1_OF_MEANS], agg["sd"][F1_OF_MEANS]
    return {key: (100.0 * agg["mean"][key], 100.0 * agg["sd"][key]) for key, _, _ in columns}


def budget_key(config: RunConfig) -> tuple:
    """What, besides the seed, makes runs of one system comparable (backbone and training budget)."""
    return tuple(str(getattr(config, k)) for k in GROUP_FIELDS)


def data_key(config: RunConfig) -> str:
    """The version of the data files a run was trained and scored on (a digest of their checksums)."""
    return "sha256:" + hashlib.sha256(json.dumps(config.data_sha256, sort_keys=True).encode()).hexdigest()[:8]


def split_by_budget(runs: list) -> list[list]:
    """``runs`` in groups of one :func:`budget_key` and :func:`data_key` each (most runs first): runs of
    different budgets (other backbone weights included) or data files are never averaged together. Two
    runs of one seed in a group (a copy of a run in a subfolder) are refused, never averaged as two seeds."""
    groups: dict[tuple, list] = {}
    for r in runs:
        groups.setdefault((*budget_key(r.config), data_key(r.config)), []).append(r)
    for group in groups.values():                  # a mean over seeds, not over copies of one seed
        first: dict = {}
        for r in group:
            other = first.setdefault(r.config.seed, r)
            if other is not r:
                raise AbsaError(f"{other.path} and {r.path} are both seed {r.config.seed} of "
                                f"{describe(r.config, seed=False)} at one budget: a row averages distinct seeds, "
                                "so move one of them out of the runs folder (`absa summary` shows copies apart)")
    return sorted(groups.values(), key=lambda g: (-len(g), budget_key(g[0].config)))


def budget_label(config: RunConfig) -> str:
    """A short name of a run's budget for table cells, e.g. ``minilm, 25 epochs``."""
    return f"{config.backbone}, {epochs_text(config.epochs)}"


def budget_labels(configs: list[RunConfig]) -> dict[tuple, str]:
    """A name for each budget (:func:`budget_key`) among ``configs``, unique among them: its
    :func:`budget_label`, and where two budgets share that, the fields that tell them apart, e.g.
    ``minilm, 1 epoch [lr=5e-05]`` beside ``minilm, 1 epoch [lr=2e-05]``, as `absa summary` names rows."""
    keys: dict[str, dict[tuple, None]] = {}
    for cfg in configs:
        keys.setdefault(budget_label(cfg), {})[budget_key(cfg)] = None
    out = {}
    for label, same in keys.items():
        differ = [i for i, field in enumerate(GROUP_FIELDS) if len({key[i] for key in same}) > 1]
        for key in same:
            out[key] = label if len(same) == 1 else f"{label} [{' '.join(f'{GROUP_FIELDS[i]}={key[i]}' for i in differ)}]"
    return out


def trivial_baselines(dataset: str, data_dir=None, max_eval_examples: int | None = None) -> dict[str, dict]:
    """Metrics of the two trivial predictors (:func:`absa_lib.evaluation.trivial.trivial_predictors`:
    all-None, majority polarity in training) on the test set, the floor beside every table.

    ``max_eval_examples``: score them on the test examples that runs with this budget are scored on
    (:func:`absa_lib.data.datasets.eval_subset`; None: all), so that the floor and the rows share a test set.

    Returns ``{row name: metrics}`` (fractions, as :func:`absa_lib.evaluation.metrics.compute_metrics`)."""
    train = [e.label_id for e in D.load_examples(dataset, "train", data_dir=data_dir)]
    test = D.eval_subset(D.load_examples(dataset, "test", data_dir=data_dir), dataset, max_eval_examples)
    return trivial_predictors(dataset, train, [e.label_id for e in test])


def shared_eval_subset(dataset: str, runs: list) -> int | None:
    """The ``max_eval_examples`` that every run of ``dataset`` among ``runs`` was scored with, for
    :func:`trivial_baselines`; None (the whole test set) when they differ or there are none."""
    subsets = {r.config.max_eval_examples for r in runs if r.config.dataset == dataset}
    return next(iter(subsets)) if len(subsets) == 1 else None


def trivial_baselines_of(dataset: str, runs: list, data_dir=None) -> dict[str, dict]:
    """:func:`trivial_baselines` on the test examples that ``runs`` (of ``dataset``) were scored on
    (:func:`shared_eval_subset`): the trivial rows of a table of those runs."""
    return trivial_baselines(dataset, data_dir, shared_eval_subset(dataset, runs))


def budget_text(config: RunConfig) -> str:
    """The training budget of a run, as a table footnote shows it (the fields' ``shown``:
    :func:`absa_lib.training.config.budget_parts`)."""
    return ", ".join(budget_parts(config))


def budget_columns(runs: list, names: dict[tuple, str] | None = None) -> dict:
    """``budget`` (short: its name in ``names``, the :func:`budget_labels` of the whole table, else
    :func:`budget_label`) and ``budget_text`` (in full, :func:`budget_text`) of one budget's runs, and
    ``device``: the machines they trained on (:attr:`absa_lib.training.records.RunEnv.device_name`, sorted, joined by
    ``DEVICE_SEP``); all empty without runs. Every table names its rows' budgets with them."""
    if not runs:
        return {"budget": "", "budget_text": "", "device": ""}
    cfg = runs[0].config
    label = names[budget_key(cfg)] if names else budget_label(cfg)
    return {"budget": label, "budget_text": budget_text(cfg),
            "device": DEVICE_SEP.join(sorted({r.env.device_name for r in runs} - {""}))}


def no_aspect_seeds(dataset: str, runs: list, chosen: list[dict]) -> str:
    """The seeds (space-joined) of ``runs`` whose chosen test metrics ``chosen`` find no aspect
    (aspect recall 0: the All-None predictor's answer). A row's mean averages them in like any
    seed, so every table names them under the row (:func:`no_aspect_footnotes`)."""

    key = recall_metric(dataset)
    return " ".join(str(r.config.seed) for r, m in zip(runs, chosen, strict=True) if m.get(key) == 0)


def no_aspect_footnotes(df: pd.DataFrame, name_column: str, where: str = "the selected epoch") -> list[str]:
    """One line per row of ``df`` with seeds that find no aspect (column ``no_aspect_seeds``,
    :func:`no_aspect_seeds`), naming the row by ``name_column`` and its budget."""
    lines = []
    for rec in df.to_dict("records"):
        seeds = rec.get("no_aspect_seeds")
        if not isinstance(seeds, str) or not seeds:
            continue
        seeds, name = seeds.split(), str(rec[name_column])
        if rec.get("budget") and rec["budget"] not in name:
            name += f" ({rec['budget']})"
        who = (f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {', '.join(seeds[:-1])} and {seeds[-1]}")
        mixed = len(seeds) < rec["n_seeds"]
        verb = "finds" if len(seeds) == 1 else "find"
        lines.append(f"\n_{name}: {who} of {rec['n_seeds']} {verb} no aspect in the test set at {where} "
                     "(aspect recall 0, the All-None answer)"
                     + (f"; the row's mean averages {'it' if len(seeds) == 1 else 'them'} in with the seeds "
                        "that learned._" if mixed else "._"))
    return lines


def not_recorded(dataset: str, runs: list, chosen: list[dict]) -> str:
    """Which of the table's metrics some of ``runs`` (their chosen test metrics ``chosen``) lack, as a
    footnote says it: records written before a metric was declared show ``–`` for it, never a mean of
    the seeds that have it (:func:`not_recorded_footnotes`); empty when every run has every metric."""
    parts = []
    for key, title, _ in metric_columns(dataset):
        seeds = [str(r.config.seed) for r, m in zip(runs, chosen, strict=True) if key not in m]
        if seeds:
            parts.append(f"{title} –, {NOT_RECORDED} (seed{'s' if len(seeds) > 1 else ''} {' '.join(seeds)})")
    return "; ".join(parts)


def not_recorded_footnotes(df: pd.DataFrame, name_column: str) -> list[str]:
    """One line per row of ``df`` whose column ``not_recorded`` (:func:`not_recorded`) names metrics
    shown as ``–`` because its runs lack them (the column is there only when a row does)."""
    if "not_recorded" not in df:
        return []
    return [f"\n_{rec[name_column]}: {rec['not_recorded']}._" for rec in df.to_dict("records")
            if isinstance(rec["not_recorded"], str) and rec["not_recorded"]]


NO_RUN = {"backbone": "", "n_seeds": 0, "seeds": "", "epochs": None, "max_train_examples": None,
          **budget_columns([]), "run_ids": "", "no_aspect_seeds": ""}
"""The run columns of a row that no run of ours fills (reported, not run, trivial)."""


def seed_cells(dataset: str, runs: list, protocol: str, suffix: str = "") -> tuple[dict, str]:
    """The cells of one row: ``runs`` (one configuration, its seeds) at the epochs ``protocol``
    selects, as ``(cells, no-aspect seeds)``: per metric ``<m><suffix>`` the mean and
    ``<m><suffix>_sd`` the sd over the seeds (%, :func:`aggregate_metrics`; NaN where a run lacks
    the metric, and then ``not_recorded`` says so: :func:`not_recorded`), and the
    :func:`no_aspect_seeds` among them. Every table of runs makes its rows' numbers here."""
    chosen = [r.selected(protocol)["test"] for r in runs]
    cells = {}
    for key, (mean, sd) in aggregate_metrics(dataset, chosen).items():
        cells[key + suffix], cells[f"{key}{suffix}_sd"] = mean, sd
    if lacking := not_recorded(dataset, runs, chosen):
        cells["not_recorded"] = lacking
    return cells, no_aspect_seeds(dataset, runs, chosen)


def _ours(dataset: str, protocol: str, group: list, names: dict[tuple, str]) -> dict:
    """The columns of one group of runs (same configuration but the seed) under ``protocol``;
    ``names``: the :func:`budget_labels` of the table's runs."""
    group = sorted(group, key=lambda r: (r.config.seed, r.run_id))
    cfg = group[0].config
    cells, no_aspect = seed_cells(dataset, group, protocol)
    return {"source": OURS, "selection": protocol, "backbone": cfg.backbone, "n_seeds": len(group),
            "seeds": " ".join(str(r.config.seed) for r in group), "epochs": cfg.epochs,
            "max_train_examples": cfg.max_train_examples, **budget_columns(group, names),
            "run_ids": run_ids(group), "no_aspect_seeds": no_aspect, **cells}


def trivial_values(dataset: str, metrics: dict[str, float]) -> dict[str, float]:
    """One trivial predictor's metrics (from :func:`trivial_baselines`) as table cells: ``<m>`` in %,
    ``<m>_sd`` NaN (a constant predictor has no seeds). Every table with trivial rows uses them."""
    values = {}
    for key, _, _ in metric_columns(dataset):
        values[key], values[f"{key}_sd"] = 100.0 * metrics.get(key, math.nan), math.nan
    return values


def _trivial_rows(dataset: str, trivial: dict[str, dict]) -> list[dict]:
    """Rows of the trivial predictors (:func:`trivial_baselines`), in %."""
    return [{"model": name, "note": "", "source": TRIVIAL, "selection": "", **NO_RUN, **trivial_values(dataset, metrics)}
            for name, metrics in trivial.items()]


def build_table(dataset: str, runs: list, protocols: tuple[str, ...] = PROTOCOLS,
                models: tuple[str, ...] | None = None, trivial: dict[str, dict] | None = None) -> pd.DataFrame:
    """Every paper row of ``dataset`` with our mean ± sd beside the paper's value.

    Args:
        dataset: ``sentihood`` (Table 1) or ``semeval`` (Table 2).
        runs: :class:`absa_lib.training.records.Run` objects; runs outside the main grid (other presets, samplers, overrides, datasets) are ignored.
        protocols: selection protocols to report, one block of rows each.
        models: keep only the rows these models reproduce (default: the whole table).
        trivial: :func:`trivial_baselines` of the dataset, added as rows with ``source == "trivial"``.

    Returns:
        One row per (paper row, protocol, group of runs that differ only in seed); a paper row
        without runs appears once per protocol with ``source == "not run"``, a reported-only row
        once with ``source == "reported"``. Columns: ``model``, ``source``, ``selection``,
        ``backbone``, ``n_seeds``, ``seeds``, ``epochs``, ``max_train_examples``, ``budget`` (short:
        :func:`budget_label`), ``budget_text`` (in full: :func:`budget_text`), ``device`` (the
        machines the runs trained on: :func:`budget_columns`), ``run_ids``, ``note``, then per
        metric ``<m>`` and ``<m>_sd`` (ours, %), ``<m>_paper`` and ``<m>_paper_sd``.
    """
    for p in protocols:
        if p not in PROTOCOL_LABELS:
            raise AbsaError(f"protocol={p!r}: expected one of {', '.join(PROTOCOL_LABELS)}")
    records, rows = [], paper_rows(dataset, models)
    shown = [r for r in runs if any(matches(r.config, row, dataset) for row in rows)]   # the table's runs
    names = budget_labels([r.config for r in shown])
    for row in rows:
        paper = {}
        for key, _, _ in metric_columns(dataset):
            mean, sd = row.values.get(key, (None, None))
            paper[f"{key}_paper"] = math.nan if mean is None else mean
            paper[f"{key}_paper_sd"] = math.nan if sd is None else sd
        base = {"model": row.name, "note": row.note}
        if row.model is None:
            records.append({**base, "source": REPORTED, "selection": "", **NO_RUN, **paper})
            continue
        groups = split_by_budget([r for r in runs if matches(r.config, row, dataset)])
        for protocol in protocols:
            if not groups:
                records.append({**base, "source": "not run", "selection": protocol, **NO_RUN, **paper})
            for group in groups:
                records.append({**base, **_ours(dataset, protocol, group, names), **paper})
    records += _trivial_rows(dataset, trivial or {})
    cols = ["model", "source", "selection", "backbone", "n_seeds", "seeds", "epochs", "max_train_examples",
            "budget", "budget_text", "device", "run_ids", "no_aspect_seeds", "note"]
    for key, _, _ in metric_columns(dataset):
        cols += [key, f"{key}_sd", f"{key}_paper", f"{key}_paper_sd"]
    if any(rec.get("not_recorded") for rec in records):     # only then: a table of complete records is as before
        cols.append("not_recorded")
    df = pd.DataFrame.from_records(records)
    for c in cols:
        if c not in df:
            df[c] = math.nan
    return df[cols]


def budget_footnotes(df: pd.DataFrame) -> list[str]:
    """One line per budget of the rows ``df`` (columns ``budget``, ``budget_text``, ``device``): the
    short name a row's Budget cell shows, the budget in full, then the machines its runs trained on."""
    lines = []
    for short, full in dict.fromkeys(zip(df["budget"], df["budget_text"], strict=True)):
        if not short:
            continue
        cells = df.loc[df["budget"] == short, "device"].dropna()
        devices = sorted({d for cell in cells for d in cell.split(DEVICE_SEP) if d})
        lines.append(f"\n_{short}: {full}" + (f"; trained on {', '.join(devices)}" if devices else "") + "._")
    return lines


def format_cell(mean: float, sd: float, decimals: int) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "–"
    if sd is None or (isinstance(sd, float) and math.isnan(sd)):
        return f"{mean:.{decimals}f}"
    return f"{mean:.{decimals}f} ± {sd:.{decimals}f}"


def to_markdown(df: pd.DataFrame, dataset: str, protocols: tuple[str, ...] = PROTOCOLS) -> str:
    """Human-readable Markdown: one block per selection protocol, cells ``ours (paper)``."""
    lines = [f"# {TITLES[dataset]}", "",
             "Cells: **ours** mean ± sd over seeds (paper's value in brackets, from BERT-base), in %. "
             "`reported` rows show the paper's numbers only; `not run` rows have no run yet; `trivial` rows are "
             "constant predictors scored on the same test set (the floor of each metric). "
             + ("SemEval F1 is computed from the mean P and mean R, as the paper does (so it has no sd). "
                if D.get(dataset).f1_of_means else ""), ""]
    metrics = metric_columns(dataset)
    for protocol in protocols:
        lines += [f"## Selection: {PROTOCOL_LABELS[protocol]}", ""]
        if protocol == "test_best":

            title = next(t for key, t, _ in metrics if key == selection_metric(dataset))
            lines += [f"Each run's epoch is the one with the best test {title}: that column is optimistic; the "
                      "others are read at the same epoch and can be lower than with dev-best.", ""]
        block = df[(df["selection"] == protocol) | df["source"].isin((REPORTED, TRIVIAL))]
        header = ["Model", "Source", "Budget", "Seeds"] + [title for _, title, _ in metrics]
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for rec in block.to_dict("records"):
            cells = [rec["model"], rec["source"], rec["budget"] or "–", str(rec["n_seeds"] or "–")]
            for key, _, dec in metrics:
                ours = format_cell(rec[key], rec[f"{key}_sd"], dec) if rec["source"] in (OURS, TRIVIAL) else "–"
                cells.append(f"{ours} [{format_cell(rec[f'{key}_paper'], rec[f'{key}_paper_sd'], dec)}]")
            lines.append("| " + " | ".join(cells) + " |")
        lines += budget_footnotes(block[block["source"] == OURS])
        lines += no_aspect_footnotes(block[block["source"] == OURS], "model")
        lines += not_recorded_footnotes(block[block["source"] == OURS], "model")
        notes = {r["note"] for r in block.to_dict("records") if r["note"]}
        lines += [f"\n_Note: {n}._" for n in sorted(notes)] + [""]
    return "\n".join(lines)


def write_table(df: pd.DataFrame, markdown: str, results_dir: str | Path, stem: str) -> list[Path]:
    """Write ``<stem>.csv`` (numbers rounded to 4 decimals) and ``<stem>.md`` atomically."""
    results_dir = Path(results_dir)
    csv = results_dir / f"{stem}.csv"
    md = results_dir / f"{stem}.md"
    atomic_write_bytes(csv, df.round(4).to_csv(index=False, lineterminator="\n").encode())
    atomic_write_bytes(md, (markdown.rstrip() + "\n").encode())
    return [csv, md]
