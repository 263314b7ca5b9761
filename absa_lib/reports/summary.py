"""``absa summary``: the finished runs under a folder, one row per configuration and budget.

Runs whose configurations differ only in their seed are one row, mean ± sd over the seeds as in
Tables 1-2 (:func:`absa_lib.reports.tables.aggregate_metrics`: sample sd; SemEval F1 from the mean P and R),
each run at the epoch a selection protocol chose: ``dev_best`` (the default, chosen on dev), then
``test_best`` (the official code's protocol, chosen on the test set: optimistic), labelled. The
grouping is the whole recorded configuration but the seed, so runs of different budgets, backbone
weights or data files are never averaged; rows whose short names coincide are told apart by the
fields in which they differ. Each dataset's rows end with its trivial predictors when its data can
be read, and runs still training are listed by name, never counted.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from absa_lib.data import datasets as D
from absa_lib.data.own_data import register_dataset
from absa_lib.errors import AbsaError
from absa_lib.reports.paper_numbers import DATASET_NAMES
from absa_lib.reports.tables import (
    OURS,
    PROTOCOL_LABELS,
    TRIVIAL,
    budget_columns,
    budget_footnotes,
    budget_label,
    format_cell,
    metric_columns,
    no_aspect_footnotes,
    not_recorded_footnotes,
    run_ids,
    seed_cells,
    shared_eval_subset,
    trivial_baselines,
    trivial_values,
)
from absa_lib.training.config import describe
from absa_lib.training.records import (
    Run,
    RunConfig,
    find_runs,
    headless_folders,
    run_folders,
    unfinished_progress,
)

NOT_SHARED = ("seed", "run_id")
"""The fields in which runs of one row may differ."""


def _shared(config: RunConfig) -> tuple:
    """What the runs of one row have in common: the configuration (as upgraded, so records from before
    a field existed join their row) but the seed."""
    return tuple(sorted((k, json.dumps(v, sort_keys=True)) for k, v in config.items() if k not in NOT_SHARED))


def _shown(value: str) -> str:
    """A field's value (JSON, as :func:`_shared` keeps it) as a row name shows it: strings bare."""
    value = json.loads(value)
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def group_runs(runs: list[Run]) -> dict[str, list[Run]]:
    """``{row name: runs}``: the runs of each configuration (seeds aside), named by
    :func:`absa_lib.training.runs.describe` and their budget; where two configurations share that name, each
    name adds the fields that tell them apart (e.g. ``backbone_fingerprint=587e9ebe000b7363``). Copies
    of one run (the same run id in two runs folders, e.g. retrained on another machine) are never
    averaged as seeds: each copy makes a row of its own, named by the folder that holds it."""
    groups: dict[tuple, list[Run]] = {}
    for run in sorted(runs, key=lambda r: (r.config.seed, r.run_id)):
        groups.setdefault(_shared(run.config), []).append(run)
    for key, group in list(groups.items()):          # one run retrained elsewhere is not a second seed:
        if len({r.run_id for r in group}) < len(group):                        # a row per folder
            del groups[key]
            for run in group:
                groups.setdefault((*key, ("folder", json.dumps(str(run.path.parent)))), []).append(run)
    named: dict[str, list[tuple[dict, list[Run]]]] = {}
    for key, group in groups.items():
        cfg = group[0].config
        named.setdefault(f"{describe(cfg, seed=False, dataset=False)}, {budget_label(cfg)}", []).append(
            (dict(key), group))
    out = {}
    for name, members in sorted(named.items()):
        if len(members) == 1:
            out[name] = members[0][1]
            continue
        fields = sorted({k for values, _ in members for k in values})
        differ = [k for k in fields if len({values.get(k) for values, _ in members}) > 1]
        for values, group in members:
            shown = " ".join(_difference(k, values, [m for m, _ in members]) for k in differ if k in values)
            out[f"{name} [{shown}]"] = group
    return out


def _difference(field: str, values: dict, others: list[dict]) -> str:
    """``field=value`` for a row name; of a mapping (``data_sha256``: a checksum per file) only the
    entries that differ between the rows, each as ``field.key=value``, checksums cut to 12 digits."""
    value = json.loads(values[field])
    if not isinstance(value, dict):
        return f"{field}={_shown(values[field])}"
    mappings = [m for m in (json.loads(o[field]) for o in others if field in o) if isinstance(m, dict)]
    keys = [k for k in sorted(value) if len({json.dumps(m.get(k), sort_keys=True) for m in mappings}) > 1]
    def short(v):
        return v[:12] if isinstance(v, str) and re.fullmatch(r"[0-9a-f]{64}", v) else json.dumps(v, sort_keys=True)
    return " ".join(f"{field}.{k}={short(value[k])}" for k in keys) or f"{field}={_shown(values[field])}"


def unfinished_runs(runs_dir: str | Path) -> list[str]:
    """The run folders under ``runs_dir`` still training or stopped mid-way, each as
    ``path (k of n epochs)``: what a summary does not count."""

    return [f"{folder} ({done} of {planned} epochs)" for folder, complete in run_folders(runs_dir) if not complete
            for done, planned in [unfinished_progress(folder)]]


def headless_lines(runs_dir: str | Path) -> list[str]:
    """The folders under ``runs_dir`` holding a run's metrics record but no config record, each with its
    fix: runs nothing can count, named instead of left out silently."""
    return [f"{folder}: holds metrics.json but no config.json, so it is not a run that can be counted; restore "
            "its config.json (git, or the copy it came from) or remove the folder" for folder in headless_folders(runs_dir)]


def summary_table(dataset: str, runs: list[Run], protocols: tuple[str, ...] = ("dev_best", "test_best"),
                  trivial: dict[str, dict] | None = None) -> pd.DataFrame:
    """One row per (configuration, protocol) of ``dataset``'s runs, then the ``trivial`` predictors
    (:func:`absa_lib.reports.tables.trivial_baselines`). Columns: ``row``, ``source`` (``ours`` or
    ``trivial``), ``selection``, ``n_seeds``, ``seeds``, ``epochs_chosen`` (the selected epoch of each
    seed), ``budget``, ``budget_text``, ``device``, ``run_ids``, then ``<m>`` and ``<m>_sd`` (%); and,
    only where a row has one, ``not_recorded`` and ``trivial_level`` (seeds no better than the trivial
    floor their records keep)."""
    for p in protocols:
        if p not in PROTOCOL_LABELS:
            raise AbsaError(f"selection {p!r}: expected one of {', '.join(PROTOCOL_LABELS)}")
    records = []
    for protocol in protocols:
        for name, group in group_runs([r for r in runs if r.config.dataset == dataset]).items():
            cells, no_aspect = seed_cells(dataset, group, protocol)
            records.append({"row": name, "source": OURS, "selection": protocol, "n_seeds": len(group),
                            "seeds": " ".join(str(r.config.seed) for r in group),
                            "epochs_chosen": " ".join(str(r.selected(protocol)["epoch"]) for r in group),
                            **budget_columns(group), "run_ids": run_ids(group), "no_aspect_seeds": no_aspect,
                            **cells, **_trivial_level(group, protocol)})
    for name, metrics in (trivial or {}).items():
        records.append({"row": name, "source": TRIVIAL, "selection": "", "n_seeds": 0, "seeds": "",
                        "epochs_chosen": "", **budget_columns([]), "run_ids": "",
                        **trivial_values(dataset, metrics)})
    cols = ["row", "source", "selection", "n_seeds", "seeds", "epochs_chosen", "budget", "budget_text", "device",
            "run_ids", "no_aspect_seeds"]
    cols += [c for key, _, _ in metric_columns(dataset) for c in (key, f"{key}_sd")]
    if any(rec.get("not_recorded") for rec in records):     # only then: a summary of complete records is as before
        cols.append("not_recorded")
    if any(rec.get("trivial_level") for rec in records):    # likewise
        cols.append("trivial_level")
    return pd.DataFrame.from_records(records, columns=cols)


def _trivial_level(runs: list[Run], protocol: str) -> dict:
    """``{"trivial_level": "seed 42: <why>; ..."}`` for the seeds of ``runs`` whose epoch ``protocol``
    selects is no better than the trivial floor their records keep
    (:meth:`~absa_lib.training.records.RunMetrics.at_trivial_level`); ``{}`` when there are none."""
    levels = [f"seed {r.config.seed}: {level}" for r in runs
              if (level := r.metrics.at_trivial_level(protocol)) is not None]
    return {"trivial_level": "; ".join(levels)} if levels else {}


def trivial_level_footnotes(df: pd.DataFrame) -> list[str]:
    """One line per row of ``df`` whose column ``trivial_level`` (:func:`_trivial_level`) names seeds no
    better than the best trivial predictor (the column is there only when a row does)."""
    if "trivial_level" not in df:
        return []
    return [f"\n_{rec['row']}: no better than the best trivial predictor, {rec['trivial_level']}._"
            for rec in df.to_dict("records") if isinstance(rec["trivial_level"], str) and rec["trivial_level"]]


def summary_markdown(df: pd.DataFrame, dataset: str, trivial_note: str = "") -> str:
    """``df`` (:func:`summary_table`) as one Markdown block per selection protocol, trivial rows
    last in each, then the budgets in full and ``trivial_note`` (why trivial rows are missing)."""
    columns = metric_columns(dataset)
    title = DATASET_NAMES.get(dataset, dataset)
    lines = [f"# {title}: test set, %, mean ± sd over seeds"
             + (" (F1 from the mean P and R, as the paper)" if D.get(dataset).f1_of_means else ""), ""]
    ours, trivial = df[df["source"] == OURS], df[df["source"] == TRIVIAL]
    for protocol in dict.fromkeys(ours["selection"]):
        block = ours[ours["selection"] == protocol]
        header = ["Run", "Seeds", "Epochs chosen"] + [t for _, t, _ in columns]
        lines += [f"## Selection: {PROTOCOL_LABELS[protocol]}", "",
                  "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for rec in pd.concat([block, trivial]).to_dict("records"):
            cells = [rec["row"], rec["seeds"] or "–", rec["epochs_chosen"] or "–"]
            cells += [format_cell(rec[k], rec[f"{k}_sd"], dec) for k, _, dec in columns]
            lines.append("| " + " | ".join(cells) + " |")
        lines += budget_footnotes(block) + no_aspect_footnotes(block, "row") + not_recorded_footnotes(block, "row")
        lines += trivial_level_footnotes(block)
        lines += [""]
    if trivial_note:
        lines += [f"_{trivial_note}_", ""]
    return "\n".join(lines)


def summarize(runs_dirs, protocols: tuple[str, ...] = ("dev_best", "test_best"),
              data_dir=None, own_folders: tuple = ()) -> tuple[str, pd.DataFrame]:
    """Markdown for every dataset with finished runs under ``runs_dirs`` (one folder or several; a
    run found twice through nested folders counts once), then the unfinished runs, and the rows of
    all of them in one frame (a ``dataset`` column first). ``data_dir``: the benchmarks' data, for
    their trivial rows; ``own_folders``: folders of your own data, registered first for theirs (a
    dataset known from its run records alone has no test labels to score)."""

    folders = [Path(runs_dirs)] if isinstance(runs_dirs, str | Path) else [Path(d) for d in runs_dirs]
    for folder in folders:
        if not folder.is_dir():
            raise AbsaError(f"{folder}: not a folder; give the folder that `absa train --out` wrote to")
    named: dict[str, Path] = {}
    for folder in own_folders:
        name = register_dataset(folder)
        if named.setdefault(name, Path(folder).resolve()) != Path(folder).resolve():   # one would hide the other
            raise AbsaError(f"--data {named[name]} and {folder} both hold dataset {name!r}; give one folder per "
                            "dataset name (summarise the other's runs in a second call)")
    runs = list({r.path.resolve(): r for folder in folders for r in find_runs(folder)}.values())
    unfinished = list(dict.fromkeys(u for folder in folders for u in unfinished_runs(folder)))
    headless = list(dict.fromkeys(h for folder in folders for h in headless_lines(folder)))
    if not runs and not unfinished and headless:
        raise AbsaError(f"no run can be counted: {headless[0]}" + (f" (and {len(headless) - 1} more)" if len(headless) > 1 else ""))
    if not runs and not unfinished:
        raise AbsaError(f"{', '.join(map(str, folders))}: no run records below it; give a folder "
                        "that `absa train --out` or `absa grid` wrote to")
    parts, frames = [], []
    found = {r.config.dataset for r in runs}
    for dataset in [d for d in D.DATASETS if d in found] + sorted(found - set(D.DATASETS)):   # the paper's order
        own = D.OWN.get(dataset)
        subset = shared_eval_subset(dataset, runs)                      # the trivial rows' test examples
        if own and own.folder is None:
            trivial, note = {}, (f"Trivial rows not shown: {dataset!r} is known from its run records alone; "
                                 "give its folder (`absa summary --data FOLDER`) to score them.")
        elif own and (other := [r for r in runs if r.config.dataset == dataset
                                and r.config.data_sha256 != own.checksums()]):
            trivial, note = {}, (f"Trivial rows not shown: {len(other)} run(s) (e.g. {other[0].path}) were "
                                 f"trained on other files than those in {own.folder}; give the folder they "
                                 "were trained on.")
        else:
            try:
                trivial, note = trivial_baselines(dataset, data_dir, subset), ""
            except AbsaError as err:
                trivial, note = {}, f"Trivial rows not shown: {err}"
        if subset is None and any(r.config.max_eval_examples is not None
                                  for r in runs if r.config.dataset == dataset):
            note += (" " if note else "") + ("Rows are scored on different parts of the test set "
                                             "(max_eval_examples); the trivial rows on all of it.")
        elif subset is not None:
            note += (" " if note else "") + ("Every row, the trivial ones too, is scored on the same first "
                                             f"part of the test set (max_eval_examples {subset}).")
        df = summary_table(dataset, runs, protocols, trivial)
        parts.append(summary_markdown(df, dataset, note))
        frames.append(df.assign(dataset=dataset)[["dataset", *df.columns]])
    if unfinished:
        parts.append("Not counted, still training or stopped (rerun the same command to resume):\n"
                     + "\n".join(f"- {u}" for u in unfinished) + "\n")
    if headless:
        parts.append("Not counted, no config record:\n" + "\n".join(f"- {h}" for h in headless) + "\n")
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return "\n".join(parts), frame
