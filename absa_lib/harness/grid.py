"""The grid of runs: which configurations make up a table row, an ablation or a comparison; training
them (or fetching them from the run cache); collecting existing run records (``render``).

A grid is a list of :class:`Spec` (what varies: model, input variant, preset, sampler, overrides)
times datasets times seeds; everything else (backbone, budget) comes from the notebook's parameters
(:func:`train_base`). The ablation specs are listed in :mod:`absa_lib.harness.ablations`.
:func:`absa_lib.training.loop.train` returns a finished run with the same configuration instantly, so
notebooks can share runs: ``03`` reuses ``02``'s CG-BERT runs, ``04`` and ``05`` reuse ``03``'s. A run
that another process is training (``absa grid`` in a terminal beside the notebook) is waited for.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from absa_lib.errors import AbsaError, RunBusy
from absa_lib.fileio import atomic_write_bytes, lock_holder
from absa_lib.reports.paper_numbers import paper_rows
from absa_lib.reports.plots import save_run_curve
from absa_lib.training import runs
from absa_lib.training.config import TrainConfig, resolved, run_path
from absa_lib.training.loop import train
from absa_lib.training.records import Run, RunFolder, find_runs
from absa_lib.training.runs import Launch

# The notebook parameters that are TrainConfig fields (the training budget): every notebook that
# trains declares them, and every profile sets them.
TRAIN_FIELDS = TrainConfig.fields_of("budget")
GRID_FIELDS = TrainConfig.fields_of("grid")


@dataclass(frozen=True)
class Spec:
    """What varies between runs of a grid (the rest comes from the notebook's parameters)."""

    label: str
    model: str
    aux: str
    preset: str = "paper"
    sampler: str = "uniform"
    model_overrides: dict = field(default_factory=dict)
    change: str = ""                 # what differs from the reference setting (ablations)
    reference: str = ""              # label of that reference (ablations; "": the first spec of the model)
    objective: str = "single"        # single | joint | joint-dwa (absa_lib.models.joint)

    def filters(self) -> dict:
        return {"model": self.model, "aux": self.aux, "preset": self.preset, "sampler": self.sampler,
                "model_overrides": dict(self.model_overrides), "objective": self.objective}


def table_specs(dataset: str, models: tuple[str, ...]) -> list[Spec]:
    """The runs behind the paper-table rows that ``models`` reproduce (main grid)."""

    return [Spec(r.name, r.model, r.aux, sampler=r.sampler) for r in paper_rows(dataset, models)]


def other_attention_specs(dataset: str) -> list[Spec]:
    """06_other_attention: the other attention systems, beside the BERT-pair, CG-BERT and QACG-BERT
    rows of the main grid (shared with 02/03), and QACG-BERT under the joint objectives."""
    new = "new in 06"
    return table_specs(dataset, ("bert-pair", "cg-bert", "qacg-bert")) + [
        Spec("ATAE-LSTM", "atae-lstm", "none", change=f"{new}: frozen word vectors, aspect in input and attention"),
        Spec("AE-LSTM", "ae-lstm", "none", change=f"{new}: aspect in the LSTM input only"),
        Spec("AT-LSTM", "at-lstm", "none", change=f"{new}: aspect in the attention score only"),
        Spec("MAN-BERT", "man-bert", "none", change=f"{new}: k aspect heads, orthogonality regulariser eq9"),
        Spec("OA-BERT", "oa-bert", "none", change=f"{new}: OA-EMB, query = target and aspect embeddings"),
        Spec("OA-BERT (auxiliary sentences)", "oa-bert", "NLI-M", change=f"{new}: OA-EMB, query = auxiliary sentence"),
        Spec("QACG-BERT, joint", "qacg-bert", "none", objective="joint",
             change=f"{new}: aspect and sentiment heads, L = L_cat + L_sent"),
        Spec("QACG-BERT, joint + dynamic weights", "qacg-bert", "none", objective="joint-dwa",
             change=f"{new}: task weights from the dev losses after each epoch"),
    ]


def train_base(params: dict) -> dict:
    """The TrainConfig fields that come from the notebook parameters (the rest varies per spec/seed):
    the budget parameters, then ``train_options`` (any other field: precision, batching, schedule)."""

    missing = [k for k in TRAIN_FIELDS if k not in params]
    if missing:
        raise AbsaError(f"parameters {', '.join(missing)} are missing: a notebook that trains declares all of "
                        f"{', '.join(TRAIN_FIELDS)}")
    options = params.get("train_options") or {}
    if not isinstance(options, dict):
        raise AbsaError(f"train_options={options!r}: expected a mapping of TrainConfig fields to values, "
                        "e.g. {group_by_length: true, precision: fp32}")
    options = dict(options)
    unknown = sorted(set(options) - set(TrainConfig.__dataclass_fields__) | set(options) & {*GRID_FIELDS, *TRAIN_FIELDS})
    if unknown:
        raise AbsaError(f"train_options: {unknown[0]!r} is not a TrainConfig field set there (the grid sets "
                        "dataset, model, aux, preset, sampler, seed and overrides; budgets have their own "
                        "parameters). A model, preset or override of your own is a grid row: "
                        "grid.Spec('mine', 'qacg-bert', 'NLI-M', model_overrides={...}) given to grid.run_grid in "
                        "a cell, or `absa train --override KEY=JSON` for one run")
    return {**{k: params[k] for k in TRAIN_FIELDS}, **options}


def train_when_free(config: TrainConfig, runs_dir=None, log=print, **kwargs) -> Run:
    """:func:`train`, but a run that another process is training (a grid beside this notebook) is
    waited for, with one line saying so, instead of refused: once that process lets go of it, the run
    comes from the cache, or resumes from the last epoch that process finished."""
    lock = RunFolder(run_path(resolved(config), runs_dir)).lock
    while True:
        try:
            return train(config, runs_dir=runs_dir, **kwargs)
        except RunBusy:
            if (holder := lock_holder(lock)) is not None:
                log(f"[runs] {lock.parent}: another process is training this run (pid {holder}); waiting for it")
            while lock_holder(lock) is not None:
                time.sleep(runs.BUSY_POLL)


def make_configs(spec: Spec, dataset: str, seeds: list[int], **base) -> list:
    """One TrainConfig per seed: ``base`` holds backbone, epochs, batch size, budgets..."""

    return [TrainConfig(dataset=dataset, seed=int(s), **spec.filters(), **base) for s in seeds]


def run_grid(specs: list[Spec], datasets: list[str], seeds: list[int], base: dict, runs_dir: Path,
             allow_training: bool = True, force: bool = False, data_dir=None,
             progress: bool = True) -> dict[tuple[str, str], list]:
    """Train (or fetch from the cache) every spec × dataset × seed.

    Args:
        specs: the grid's rows.
        datasets: e.g. ``["sentihood", "semeval"]``.
        seeds: one run per seed.
        base: the other TrainConfig fields (backbone, epochs, batch_size, lr, max_length, ...).
        runs_dir: where run folders live.
        allow_training: False (``render``): collect existing run records only, whatever their
            backbone, budget and seeds, and never train.
        force: retrain even when a finished run exists.

    Returns:
        ``{(dataset, spec.label): [Run, ...]}``; empty lists where nothing exists (render).
    """
    launch = Launch.from_environ()           # ABSA_CACHE_ONLY: a notebook that only reads a grid's runs

    out = {}
    for dataset in datasets:
        for spec in specs:
            if not allow_training:
                found = find_runs(runs_dir, dataset=dataset, **spec.filters())
                print(f"[runs] {dataset} {spec.label}: {len(found)} run record(s) found in {runs_dir}")
                out[(dataset, spec.label)] = found
                continue
            trained = []
            for config in make_configs(spec, dataset, seeds, **base):
                run = train_when_free(config, runs_dir=runs_dir, data_dir=data_dir or None, force=force,
                                      progress=progress, launch=launch)
                save_run_curve(run)      # drawn once: also after a kill before the curve
                print(f"[runs] {dataset} {spec.label} seed {config.seed}: {'cached' if run.cached else 'trained'} "
                      f"{run.run_id}")
                trained.append(run)
            out[(dataset, spec.label)] = trained
    return out


def flatten(grid: dict) -> list:
    """All runs of a :func:`run_grid` result, in order, without duplicates."""
    seen, out = set(), []
    for cell_runs in grid.values():
        for r in cell_runs:
            if r.path not in seen:
                seen.add(r.path)
                out.append(r)
    return out


def export_records(runs: list, results_dir: Path, replace: bool = False) -> list[Path]:
    """Copy the records of ``runs`` (config/metrics/env JSON and the kept predictions, no weights) into
    ``<results_dir>/runs/<dataset>/<model>/<run_id>/``, the layout ``results/reference/`` uses.

    A record already there with other bytes (the same configuration trained again, e.g. a GPU record
    and a CPU one), or kept predictions that do not check out as its import checks them (missing,
    damaged, another run's), is refused before anything is written, unless ``replace`` (a notebook's
    ``force_retrain``: the run was retrained on purpose) for the first."""
    written, plan = [], []
    for run in runs:
        dest = Path(results_dir) / "runs" / run.config.dataset / run.config.model / run.run_id
        if dest.resolve() == Path(run.path).resolve():
            continue
        run.kept()                  # a kept-predictions file that is missing, damaged or another run's: refused
        differ = [src.name for src in run.folder.record_files() if (dest / src.name).is_file()
                  and (dest / src.name).read_bytes() != src.read_bytes()]
        if differ and not replace:
            raise AbsaError(f"{dest}: already holds run {run.run_id} with another {differ[0]} (the same configuration "
                            f"trained again gives other numbers); keep one: remove that record first if {run.path} "
                            "should replace it")
        plan.append((run, dest))
    for run, dest in plan:
        for src in run.folder.record_files():
            atomic_write_bytes(dest / src.name, src.read_bytes())
            written.append(dest / src.name)
    return written


def run_with_checkpoint(runs: list):
    """The first run whose dev-best checkpoint is on disk (analysis needs weights), else None."""
    for run in runs:
        if (run.folder.checkpoint("best") / "config.json").is_file():
            return run
    return None
