"""The paper's claims, each a comparison of two rows, beside our measured difference and its verdict
(``results/claims.{md,csv}``, ``figures/claims.{png,pdf}``; notebook 06 draws them from the runs).

A claim is "A over B" on the table's selection metric (SentiHood: aspect strict accuracy; SemEval:
aspect F1): the paper's gain where its tables print both rows, our difference A − B seed by seed and
on average, and the verdict of :func:`absa_lib.reports.compare.compare` (the Almost Stochastic
Order test over the seeds both rows share). One row per claim, dataset and budget with two or more
shared seeds; the rest is left out (the ablations run on SentiHood only).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from absa_lib.evaluation.metrics import SELECTION_METRIC
from absa_lib.evaluation.significance import RULE
from absa_lib.reports.compare import compare
from absa_lib.reports.paper_numbers import PAPER_TABLES
from absa_lib.reports.tables import budget_key, budget_labels
from absa_lib.training.config import NEUTRAL_DEFAULTS

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
COLUMNS = ("source", "claim", "dataset", "budget", "seeds", "metric", "paper_gain", "difference", "differences",
           "ci_low", "ci_high", "eps_a_over_b", "eps_b_over_a", "verdict", "runs_a", "runs_b")


def _matches(config: dict, fields: dict) -> bool:
    return all(config.get(k, NEUTRAL_DEFAULTS.get(k)) == v for k, v in fields.items())


def _paper_gain(dataset: str, rows: tuple[str, str] | None, metric: str) -> float:
    if rows is None:
        return math.nan
    values = {r.name: r.values.get(metric, (math.nan, None))[0] for r in PAPER_TABLES[dataset]}
    return values[rows[0]] - values[rows[1]]


def claims_table(runs: list, datasets: tuple[str, ...] = ("sentihood", "semeval"), protocol: str = "dev_best") -> pd.DataFrame:
    """One row per claim, dataset and budget whose two rows share two or more seeds (columns
    :data:`COLUMNS`; ``difference``, ``paper_gain`` in points of the selection metric)."""
    names = budget_labels([r.config for r in runs])
    records = []
    for claim in CLAIMS:
        for dataset in datasets:
            metric = SELECTION_METRIC[dataset]
            sides = [[r for r in runs if r.config["dataset"] == dataset and _matches(r.config, fields)]
                     for fields in (claim.a, claim.b)]
            for budget in sorted({budget_key(r.config) for r in sides[0]}, key=lambda key: names[key]):
                a, b = ([r for r in side if budget_key(r.config) == budget] for side in sides)
                seeds = sorted({r.config["seed"] for r in a} & {r.config["seed"] for r in b})
                if len(seeds) < 2:
                    continue
                a, b = ([r for r in side if r.config["seed"] in seeds] for side in (a, b))
                row = compare(a, b, protocol, metrics=(metric,)).iloc[0]
                records.append({"source": claim.source, "claim": claim.text, "dataset": dataset,
                                "budget": names[budget], "seeds": " ".join(map(str, seeds)), "metric": metric,
                                "paper_gain": _paper_gain(dataset, claim.paper, metric),
                                "difference": row["mean_difference"], "differences": row["differences"],
                                "ci_low": row["ci_low"], "ci_high": row["ci_high"],
                                "eps_a_over_b": row["eps_a_over_b"], "eps_b_over_a": row["eps_b_over_a"],
                                "verdict": row["verdict"],
                                "runs_a": " ".join(r.run_id for r in sorted(a, key=lambda r: r.config["seed"])),
                                "runs_b": " ".join(r.run_id for r in sorted(b, key=lambda r: r.config["seed"]))})
    return pd.DataFrame.from_records(records, columns=list(COLUMNS))


def claims_markdown(table: pd.DataFrame) -> str:
    """The claims as a Markdown table, the rule below it (a column for the bootstrap interval when a
    claim has one)."""
    intervals = bool(table["ci_low"].notna().any())
    lines = ["# The paper's claims, measured", "",
             "Each claim is A over B on the table's selection metric (SentiHood: aspect strict accuracy; SemEval: "
             "aspect F1), test set at the dev-selected epoch, in points: the paper's gain, ours on average and seed by "
             "seed, ε_min both ways and the verdict.", "",
             "| claim | dataset | budget | seeds | paper | ours | per seed | " + ("95% CI (test) | " if intervals else "")
             + "ε_min(A>B) | ε_min(B>A) | verdict |",
             "|---|---|---|---|---|---|---|" + ("---|" if intervals else "") + "---|---|---|"]
    for r in table.itertuples():
        paper = "–" if math.isnan(r.paper_gain) else f"{r.paper_gain:+.2f}"
        ci = ("–" if math.isnan(r.ci_low) else f"[{r.ci_low:+.2f}, {r.ci_high:+.2f}]") + " | " if intervals else ""
        lines.append(f"| {r.claim} | {r.dataset} | {r.budget} | {r.seeds} | {paper} | {r.difference:+.2f} | {r.differences} "
                     f"| {ci}{r.eps_a_over_b:.2f} | {r.eps_b_over_a:.2f} | {r.verdict} |")
    return "\n".join([*lines, "", f"Verdict rule: {RULE}. With three seeds a side only large, consistent gaps are "
                      "detected: \"no detectable difference\" is not \"no difference\".", ""])
