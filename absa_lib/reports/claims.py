"""The paper's claims, each a comparison of two rows, beside our measured difference and its verdict
(``results/claims.{md,csv}``, ``figures/claims.{png,pdf}``; notebook 06 draws them from the runs).

A claim is "A over B" on the table's selection metric (SentiHood: aspect strict accuracy; SemEval:
aspect F1): the paper's gain where its tables print both rows (against BERT-pair: Sun et al.'s NLI-M
variant, the input ours uses, not the paper's best of four), our difference A − B seed by seed and on
average, and the verdict of :mod:`absa_lib.evaluation.significance`. One row per claim, dataset and
budget with two or more shared seeds; the rest is left out (the ablations run on SentiHood only).

Two things are kept apart from the comparisons:

- **training failures**: a side any of whose seeds does not beat the best trivial predictor by
  :data:`FAILURE_MARGIN` points measures a run that did not train, not an architecture; the row says
  so instead of a verdict and is not tested;
- **budgets**: each budget is its own family for Holm's correction. The paper's claims are judged on
  its budget (25 epochs); shorter budgets are early training, shown apart.

Two questions the seeds' means cannot answer are answered apart:

- **run outcomes** (:func:`outcomes_table`): whether a configuration's runs leave the trivial level
  (the training failure's test, run by run) more often than another's, a rate over runs, decided by
  a one-sided Fisher exact test, Holm's correction over its own family (:data:`OUTCOMES`);
- **the paper's gain against our interval** (``paper_in_ci``): whether the paper's gain lies inside
  our 95% interval over seeds. Ours is MiniLM, the paper's BERT-base: "outside" says the paper's gain
  is not what our backbone's seeds show, not that the paper is wrong.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from dataclasses import dataclass

import pandas as pd
from scipy import stats

from absa_lib.evaluation.metrics import selection_metric
from absa_lib.evaluation.significance import ALPHA, POWER, RULE, TAU, family, holm, seeds_needed
from absa_lib.reports.compare import compare, verdict_columns
from absa_lib.reports.paper_numbers import (
    DATASET_NAMES,
    METRIC_TITLES,
    PAIR_NLI_M,
    PAPER_TABLES,
    REFERENCE_SOURCES,
)
from absa_lib.reports.tables import GROUP_FIELDS, budget_key, budget_label, budget_labels
from absa_lib.training.config import TrainConfig
from absa_lib.training.records import RunConfig

FAILURE_MARGIN = 10.0
"""Points of the selection metric a side's every seed must beat the best trivial predictor by to count
as trained (SentiHood: All-None's 47.9 strict accuracy; SemEval: 40.8 aspect F1, every aspect present)."""
PAPER_EPOCHS = next(f.default for f in dataclasses.fields(TrainConfig) if f.name == "epochs")
PAIR = "BERT-pair (Sun et al. 2019)"

_MAIN = {"preset": "paper", "sampler": "uniform", "model_overrides": {}, "objective": "single"}


def _row(model: str, aux: str, **fields) -> dict:
    return {"model": model, "aux": aux, **_MAIN, **fields}


@dataclass(frozen=True)
class Claim:
    """``text``: "A over B"; ``a``, ``b``: the config fields of each row's runs; ``paper``: the paper
    table rows of A and B (None where the paper prints no such pair)."""

    source: str
    text: str
    a: dict
    b: dict
    paper: tuple[str, str] | None = None


CLAIMS = (
    Claim("Tables 1-2", "QACG-BERT over CG-BERT (auxiliary sentences)", _row("qacg-bert", "NLI-M"),
          _row("cg-bert", "NLI-M"), ("QACG-BERT (auxiliary sentences)", "CG-BERT (auxiliary sentences)")),
    Claim("Tables 1-2", "QACG-BERT over CG-BERT (no auxiliary sentence)", _row("qacg-bert", "none"),
          _row("cg-bert", "none"), ("QACG-BERT", "CG-BERT")),
    Claim("Tables 1-2", "CG-BERT over BERT-pair (auxiliary sentences)", _row("cg-bert", "NLI-M"),
          _row("bert-pair", "NLI-M"), ("CG-BERT (auxiliary sentences)", "BERT-pair (Sun et al. 2019)")),
    Claim("Tables 1-2", "QACG-BERT over BERT-pair (auxiliary sentences)", _row("qacg-bert", "NLI-M"),
          _row("bert-pair", "NLI-M"), ("QACG-BERT (auxiliary sentences)", "BERT-pair (Sun et al. 2019)")),
    Claim("Tables 1-2", "QACG-BERT (no auxiliary sentence) over BERT-pair", _row("qacg-bert", "none"),
          _row("bert-pair", "NLI-M"), ("QACG-BERT", "BERT-pair (Sun et al. 2019)")),
    Claim("Tables 1-2", "BERT-pair over BERT-single", _row("bert-pair", "NLI-M"),
          _row("bert-single", "single", sampler="per-context"),
          ("BERT-pair (Sun et al. 2019)", "BERT-single (Sun et al. 2019)")),
    Claim("Tables 1-2", "QACG-BERT with the auxiliary sentence over without", _row("qacg-bert", "NLI-M"),
          _row("qacg-bert", "none"), ("QACG-BERT (auxiliary sentences)", "QACG-BERT")),
    Claim("ablation", "the quasi-attention over λ_A = 0 (QACG-BERT, aux)", _row("qacg-bert", "NLI-M"),
          _row("qacg-bert", "NLI-M", model_overrides={"quasi": False})),
    Claim("ablation", "the paper preset over the official one (QACG-BERT, aux)", _row("qacg-bert", "NLI-M"),
          _row("qacg-bert", "NLI-M", preset="official")),
    Claim("ablation", "CG-BERT's tanh gate over the official sigmoid (aux)", _row("cg-bert", "NLI-M"),
          _row("cg-bert", "NLI-M", model_overrides={"gate_activation": "sigmoid"})),
    Claim("joint objective", "joint aspect and sentiment heads over one head (QACG-BERT, no aux)",
          _row("qacg-bert", "none", objective="joint"), _row("qacg-bert", "none")),
)
COLUMNS = ("source", "claim", "dataset", "budget", "paper_budget", "seeds", "metric", "paper_gain", "difference",
           "differences", "seed_sd", "seed_low", "seed_high", "paper_in_ci", "p", "p_adjusted", "min_detectable",
           "seeds_needed", "ci_low",
           "ci_high", "eps_a_over_b", "eps_b_over_a", "verdict", "runs_a", "runs_b")


def _matches(config: RunConfig, fields: dict) -> bool:
    return all(getattr(config, k) == v for k, v in fields.items())


def _paper_value(dataset: str, row: str, metric: str) -> float:
    if row == PAIR:                                   # like for like: our BERT-pair is the NLI-M variant
        return PAIR_NLI_M[dataset][metric]
    return {r.name: r.values.get(metric, (math.nan, None))[0] for r in PAPER_TABLES[dataset]}[row]


def _paper_gain(dataset: str, rows: tuple[str, str] | None, metric: str) -> float:
    if rows is None:
        return math.nan
    return _paper_value(dataset, rows[0], metric) - _paper_value(dataset, rows[1], metric)


def _failed(dataset: str, runs: list, protocol: str, floors: dict[str, float]) -> bool:
    """Whether any seed of a side stays within :data:`FAILURE_MARGIN` of the trivial floor."""
    metric = selection_metric(dataset)
    return any(100.0 * r.selected(protocol)["test"][metric] < floors[dataset] + FAILURE_MARGIN for r in runs)


def failure(sides_failed: tuple[bool, bool]) -> str:
    """The verdict of a row one or both of whose sides did not train."""
    return "training failure (" + " and ".join(s for s, f in zip("AB", sides_failed, strict=True) if f) + ")"


def claims_table(runs: list, floors: dict[str, float], datasets: tuple[str, ...] = ("sentihood", "semeval"),
                 protocol: str = "dev_best") -> pd.DataFrame:
    """One row per claim, dataset and budget whose two rows share two or more seeds (columns
    :data:`COLUMNS`; differences, intervals, ``paper_gain`` and ``min_detectable`` in points of the
    selection metric). ``floors``: per dataset, the best trivial predictor's selection metric in %
    (:func:`absa_lib.reports.tables.trivial_floor`), for the training failures. The paper's budget
    first; each budget's comparisons decided together (:func:`~absa_lib.evaluation.significance.family`)."""
    names = budget_labels([r.config for r in runs])
    records, verdicts = [], []
    for claim in CLAIMS:
        for dataset in datasets:
            metric = selection_metric(dataset)
            sides = [[r for r in runs if r.config.dataset == dataset and _matches(r.config, fields)]
                     for fields in (claim.a, claim.b)]
            for budget in sorted({budget_key(r.config) for r in sides[0]}, key=lambda key: names[key]):
                a, b = ([r for r in side if budget_key(r.config) == budget] for side in sides)
                seeds = sorted({r.config.seed for r in a} & {r.config.seed for r in b})
                if len(seeds) < 2:
                    continue
                a, b = ([r for r in side if r.config.seed in seeds] for side in (a, b))
                compared = compare(a, b, protocol, metrics=(metric,))
                row = compared.iloc[0]
                seeds = [int(s) for s in row["seeds"].split()]       # those compared: an undefined metric's seed is not
                a, b = ([r for r in side if r.config.seed in seeds] for side in (a, b))
                failed = (_failed(dataset, a, protocol, floors), _failed(dataset, b, protocol, floors))
                records.append({"source": claim.source, "claim": claim.text, "dataset": dataset,
                                "budget": names[budget], "paper_budget": a[0].config.epochs == PAPER_EPOCHS,
                                "seeds": " ".join(map(str, seeds)), "metric": metric,
                                "paper_gain": _paper_gain(dataset, claim.paper, metric),
                                "differences": row["differences"], "failed": failed,
                                "runs_a": " ".join(r.run_id for r in sorted(a, key=lambda r: r.config.seed)),
                                "runs_b": " ".join(r.run_id for r in sorted(b, key=lambda r: r.config.seed))})
                verdicts.append(compared.attrs["verdicts"][0])
    for budget in dict.fromkeys(r["budget"] for r in records):      # each budget one family
        members = [i for i, r in enumerate(records) if r["budget"] == budget and not any(r["failed"])]
        for i, decided in zip(members, family([verdicts[i] for i in members]), strict=True):
            verdicts[i] = decided
    sizes = Counter(r["budget"] for r in records if not any(r["failed"]))      # each family's m
    for record, verdict in zip(records, verdicts, strict=True):
        record.update(verdict_columns(verdict))
        record["seeds_needed"] = seeds_needed(record["paper_gain"], verdict.seeds.sd, ALPHA / max(1, sizes[record["budget"]]),
                                              spread_df=verdict.seeds.n - 1)
        gain = record["paper_gain"]
        record["paper_in_ci"] = (None if not math.isfinite(gain) else
                                 "inside" if record["seed_low"] <= gain <= record["seed_high"] else "outside")
        if any(record["failed"]):
            record.update(verdict=failure(record["failed"]), p_adjusted=math.nan, min_detectable=math.nan,
                          seeds_needed=None, paper_in_ci=None)
        record["difference"] = record.pop("mean_difference")
    table = pd.DataFrame.from_records(records, columns=list(COLUMNS))
    table["seeds_needed"] = table["seeds_needed"].astype("Int64")
    order = table.sort_values("paper_budget", ascending=False, kind="stable").index
    return table.loc[order].reset_index(drop=True)


@dataclass(frozen=True)
class OutcomeClaim:
    """"A's runs leave the trivial level more often than B's": ``a``, the config fields of A's runs (any
    of several configurations, pooled), ``b`` those of B's."""

    source: str
    text: str
    a: tuple[dict, ...]
    b: dict


_CG_NO_AUX = _row("cg-bert", "none")
_SIGMOID = {**_CG_NO_AUX, "model_overrides": {"gate_activation": "sigmoid"}}
_INIT = {**_CG_NO_AUX, "model_overrides": {"init_std": 0.02}}
OUTCOMES = (
    OutcomeClaim("stall", "CG-BERT (no aux): the official sigmoid gate over the paper's settings", (_SIGMOID,), _CG_NO_AUX),
    OutcomeClaim("stall", "CG-BERT (no aux): the official 0.02 initialisation over the paper's settings", (_INIT,),
                 _CG_NO_AUX),
    OutcomeClaim("stall", "CG-BERT (no aux): either official change (their runs pooled) over the paper's settings",
                 (_SIGMOID, _INIT), _CG_NO_AUX),
)
"""The claims over run outcomes, one family: does a change of CG-BERT without the auxiliary sentence
leave the trivial level (the stall, docs/findings.md 5-6) more often than the paper's settings?"""
OUTCOME_COLUMNS = ("source", "claim", "dataset", "budget", "left_a", "n_a", "left_b", "n_b", "p", "p_adjusted",
                   "verdict", "runs_a", "runs_b")


def left_trivial(run, dataset: str, protocol: str, floors: dict[str, float]) -> bool:
    """Whether a run leaves the trivial level: its selection metric beats the best trivial predictor by
    :data:`FAILURE_MARGIN` points (the training failure's test, for one run)."""
    return 100.0 * run.selected(protocol)["test"][selection_metric(dataset)] >= floors[dataset] + FAILURE_MARGIN


def _outcome_budget(config: RunConfig) -> tuple:
    """What makes runs comparable for an outcome: the budget without how the graph was compiled (the GPU
    runs were compiled, the CPU runs not; both are counted, docs/evidence/cg_bert_without_aux.md)."""
    return tuple(v for field, v in zip(GROUP_FIELDS, budget_key(config), strict=True) if field != "compile")


def outcomes_table(runs: list, floors: dict[str, float], datasets: tuple[str, ...] = ("sentihood", "semeval"),
                   protocol: str = "dev_best") -> pd.DataFrame:
    """One row per claim of :data:`OUTCOMES`, dataset and budget (the paper's, 25 epochs) with runs on
    both sides (columns :data:`OUTCOME_COLUMNS`): how many of A's ``n_a`` runs and of B's ``n_b`` left
    the trivial level (:func:`left_trivial`), the one-sided Fisher exact test's p (A leaves more often)
    and its Holm adjustment over the rows, and the verdict: "A leaves more often" below :data:`ALPHA`,
    else undecided at those runs. Every run counts, whatever its seed or device (a run is one draw of
    the outcome); a run folder found twice counts once."""
    unique = list({r.run_id: r for r in runs}.values())
    records = []
    for claim in OUTCOMES:
        for dataset in datasets:
            ours = [r for r in unique if r.config.dataset == dataset and r.config.epochs == PAPER_EPOCHS]
            a_all = [r for r in ours if any(_matches(r.config, f) for f in claim.a)]
            b_all = [r for r in ours if _matches(r.config, claim.b)]
            for budget in dict.fromkeys(_outcome_budget(r.config) for r in b_all):
                a, b = ([r for r in side if _outcome_budget(r.config) == budget] for side in (a_all, b_all))
                if not a or not b:
                    continue
                left_a, left_b = (sum(left_trivial(r, dataset, protocol, floors) for r in side) for side in (a, b))
                p = float(stats.fisher_exact([[left_a, len(a) - left_a], [left_b, len(b) - left_b]],
                                             alternative="greater")[1])
                records.append({"source": claim.source, "claim": claim.text, "dataset": dataset,
                                "budget": budget_label(a[0].config), "left_a": left_a, "n_a": len(a), "left_b": left_b,
                                "n_b": len(b), "p": p,
                                "runs_a": " ".join(r.run_id for r in sorted(a, key=lambda r: (r.config.seed, r.run_id))),
                                "runs_b": " ".join(r.run_id for r in sorted(b, key=lambda r: (r.config.seed, r.run_id)))})
    for record, adjusted in zip(records, holm([r["p"] for r in records]) if records else [], strict=True):
        record["p_adjusted"] = adjusted
        record["verdict"] = ("A leaves more often" if adjusted < ALPHA else
                             f"undecided at {record['n_a']} and {record['n_b']} runs")
    return pd.DataFrame.from_records(records, columns=list(OUTCOME_COLUMNS))


def outcomes_markdown(table: pd.DataFrame) -> str:
    """The run outcomes as a Markdown section of ``results/claims.md`` (empty without rows)."""
    if table.empty:
        return ""
    lines = ["## Run outcomes: which runs leave the trivial level", "",
             "A run leaves the trivial level when its selection metric (test set, dev-selected epoch) beats the best "
             f"trivial predictor by {FAILURE_MARGIN:.0f} points, the training failure's test run by run; every run of a "
             "configuration counts (GPU and CPU, any seed). **p**: the one-sided Fisher exact test that A's runs leave "
             f"it more often than B's; **p (Holm)**: adjusted over the {len(table)} rows of this family, apart from "
             f"the comparisons above; A leaves more often when it is below {ALPHA:.0%}. The test takes the runs as "
             "independent draws; a CPU run repeats a GPU run's seed on another device, where whether a run leaves the "
             "plateau can turn on rounding (docs/evidence/cg_bert_without_aux.md), so it is not a wholly independent "
             "one.", "",
             "| claim | dataset | budget | A: left / runs | B: left / runs | p (Fisher) | p (Holm) | verdict |",
             "|---|---|---|---|---|---|---|---|"]
    for r in table.itertuples():
        lines.append(f"| {r.claim} | {r.dataset} | {r.budget} | {r.left_a} / {r.n_a} | {r.left_b} / {r.n_b} | "
                     f"{_p(r.p)} | {_p(r.p_adjusted)} | {r.verdict} |")
    return "\n".join([*lines, ""])


def _cell(value: float, spec: str) -> str:
    return "–" if value is None or pd.isna(value) else format(value, spec)


def _p(value: float) -> str:
    return "–" if pd.isna(value) else "<0.001" if value < 0.001 else f"{value:.3f}"


def claims_markdown(table: pd.DataFrame, outcomes: pd.DataFrame | None = None) -> str:
    """The claims as Markdown: one table per budget (the paper's first), the run outcomes
    (:func:`outcomes_markdown`), where each reference number comes from, the rule and what each column
    means (a column for the bootstrap interval when a claim has one)."""
    intervals = bool(table["ci_low"].notna().any())
    nli_m = ", ".join(f"{DATASET_NAMES[ds]} {METRIC_TITLES[m]} {v}" for ds, values in PAIR_NLI_M.items()
                      for m, v in values.items())
    lines = ["# The paper's claims, measured", "",
             "Each claim is A over B on the table's selection metric (SentiHood: aspect strict accuracy; SemEval: aspect "
             "F1), test set at the dev-selected epoch, in points. **paper**: the paper's gain (against BERT-pair, Sun et "
             f"al.'s NLI-M variant, the input ours uses: {nli_m}; the paper's Table 1-2 value is the best of their four "
             "variants per column; each number's source below). **ours**: the mean A − B over the seeds, each seed, and "
             "the 95% interval of the mean over seeds. **paper in CI**: whether the paper's gain lies inside that "
             "interval; ours is MiniLM and the paper's BERT-base, so \"outside\" says our seeds do not show the paper's "
             "gain on this backbone, not that the paper is wrong. **p (Holm)**: the paired t-test over seeds, "
             f"Holm-adjusted over the budget's comparisons. **MDD**: the true gain the rule finds {POWER:.0%} of the time "
             "with these seeds, on average over what they leave unknown about the spread (the spread is estimated from "
             "the seeds, not known; docs/evidence/verdict_rule.md checks it by simulation). **seeds needed**: how many "
             f"seeds the rule would need to find the paper's gain {POWER:.0%} of the time, on the same average over our "
             "seeds' spread (– where the paper gives no gain or the row is a training failure; over 100 where the "
             "paper's gain is too small for 100 seeds).", ""]
    for budget, part in table.groupby("budget", sort=False):
        paper = bool(part["paper_budget"].iloc[0])
        tested = part[~part["verdict"].str.startswith("training failure")]
        lines += [f"## {budget}: " + ("the paper's budget, its claims" if paper else
                                      "early training, not the paper's claims"), "",
                  "| claim | dataset | seeds | paper | ours | per seed | 95% CI (seeds) | paper in CI | p (Holm) | MDD | "
                  "seeds needed | " + ("95% CI (test) | " if intervals else "") + "ε_min(A>B) | ε_min(B>A) | verdict |",
                  "|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if intervals else "") + "---|---|---|"]
        for r in part.itertuples():
            ci = (("–" if pd.isna(r.ci_low) else f"[{r.ci_low:+.2f}, {r.ci_high:+.2f}]") + " | ") if intervals else ""
            needed = (_cell(r.seeds_needed, "d") if not pd.isna(r.seeds_needed) or pd.isna(r.paper_gain)
                      or r.verdict.startswith("training failure") else "over 100")
            lines.append(f"| {r.claim} | {r.dataset} | {r.seeds} | {_cell(r.paper_gain, '+.2f')} | {r.difference:+.2f} | "
                         f"{r.differences} | [{r.seed_low:+.2f}, {r.seed_high:+.2f}] | "
                         f"{r.paper_in_ci if isinstance(r.paper_in_ci, str) else '–'} | "
                         f"{_p(r.p_adjusted)} | {_cell(r.min_detectable, '.2f')} | {needed} | {ci}{r.eps_a_over_b:.2f} | "
                         f"{r.eps_b_over_a:.2f} | {r.verdict} |")
        failures = len(part) - len(tested)
        lines += ["", f"Holm's correction over the {len(tested)} comparisons of this budget"
                  + (f"; {failures} row{'s' if failures != 1 else ''} with a training failure "
                     f"{'are' if failures != 1 else 'is'} not tested." if failures else "."), ""]
    if outcomes is not None:
        lines.append(outcomes_markdown(outcomes))
    lines += ["## Where the reference numbers come from", "",
              f"- the paper's rows: {REFERENCE_SOURCES['paper']};",
              *(f"- {DATASET_NAMES[ds]} {METRIC_TITLES[m]} {v} (BERT-pair-NLI-M): {REFERENCE_SOURCES[ds]};"
                for ds, values in PAIR_NLI_M.items() for m, v in values.items()),
              f"- the variant named per column of the paper's BERT-pair row: {REFERENCE_SOURCES['variants']}.", ""]
    return "\n".join([*lines, f"Verdict rule: {RULE}. Training failure: a side any of whose seeds does not beat the best "
                      f"trivial predictor by {FAILURE_MARGIN:.0f} points; the row measures a run that did not train, not "
                      f"the architecture, and is not tested. Error rates, simulated with no true difference: at most "
                      f"{ALPHA:.0%} of rows name a winner at any number of seeds (the t-test decides, ASO's ε_min < {TAU} "
                      f"and the test-sentence interval can only veto); MDD at {POWER:.0%} expected power.", ""])
