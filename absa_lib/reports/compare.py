"""Two sets of runs compared metric by metric (``absa compare``): paired by seed, each metric's
differences seed by seed, their mean, and the verdict of :mod:`absa_lib.evaluation.significance`.

    table = compare(find_runs("results/reference/runs", dataset="semeval", model="qacg-bert", aux="none",
                              epochs=25),
                    find_runs("results/reference/runs", dataset="semeval", model="bert-pair", epochs=25))

Each side must be one configuration (its seeds), and both must be scored alike: the same dataset and
test examples, the same budget (backbone, epochs, learning rate, ...), at the epoch the same protocol
selects. Anything else is refused in one line: a difference between two budgets or two test sets is
not the models'.
"""

from __future__ import annotations

import pandas as pd

from absa_lib.errors import AbsaError
from absa_lib.evaluation.significance import RULE, Verdict, paired_differences
from absa_lib.reports.tables import budget_key, budget_label, metric_columns
from absa_lib.training.runs import Run, describe

PROTOCOLS = ("dev_best", "test_best", "last")


def _one_configuration(runs: list[Run], side: str) -> dict:
    if not runs:
        raise AbsaError(f"{side}: no finished run to compare")
    groups = sorted({(describe(r.config, seed=False), budget_label(r.config), budget_key(r.config)) for r in runs})
    if len(groups) > 1:
        names = "; ".join(f"{name}, {budget}" for name, budget, _ in groups[:4])
        raise AbsaError(f"{side}: runs of {len(groups)} configurations ({names}); give one configuration a side "
                        "(a folder of its seeds, or filters such as model=qacg-bert)")
    seeds = [r.config["seed"] for r in runs]
    twice = sorted({s for s in seeds if seeds.count(s) > 1})
    if twice:
        raise AbsaError(f"{side}: seed {twice[0]} twice (two copies of one run, or runs of two folders); give each "
                        "seed once")
    return runs[0].config


def compare(runs_a: list[Run], runs_b: list[Run], protocol: str = "dev_best", seed: int = 0,
            metrics: tuple[str, ...] | None = None) -> pd.DataFrame:
    """One row per metric of the dataset's table (or of ``metrics``): ``metric``, ``n_seeds``, ``a`` and ``b`` (means over
    the seeds, %), ``differences`` (A − B per seed, points), ``mean_difference``, ``eps_a_over_b``,
    ``eps_b_over_a`` and ``verdict`` (the rule of :data:`~absa_lib.evaluation.significance.RULE`).
    ``runs_a`` and ``runs_b``: the seeds of one configuration each, scored alike (else AbsaError)."""
    if protocol not in PROTOCOLS:
        raise AbsaError(f"protocol {protocol!r}: expected one of {', '.join(PROTOCOLS)}")
    a, b = _one_configuration(runs_a, "A"), _one_configuration(runs_b, "B")
    for field, what in (("dataset", "datasets"), ("max_eval_examples", "test sets (max_eval_examples)"),
                        ("data_sha256", "test sets (data files)")):
        if a.get(field) != b.get(field):
            raise AbsaError(f"A and B differ in their {what}: {a.get(field)!r} against {b.get(field)!r}; a "
                            "difference is the models' only on the same test examples")
    if budget_key(a) != budget_key(b):
        raise AbsaError(f"A and B differ in their budget ({budget_label(a)} against {budget_label(b)}, or a field "
                        "of it); compare runs of one budget")
    dataset, rows = a["dataset"], []
    known = [key for key, _, _ in metric_columns(dataset)]
    unknown = [m for m in metrics or () if m not in known]
    if unknown:
        raise AbsaError(f"metric {unknown[0]!r} is not one of {dataset}'s: {', '.join(known)}")
    for key in metrics or known:
        score = {side: {r.config["seed"]: 100.0 * r.selected(protocol)["test"].get(key, float("nan")) for r in runs}
                 for side, runs in (("a", runs_a), ("b", runs_b))}
        diffs = paired_differences(score["a"], score["b"])
        if len(diffs) < 2:
            raise AbsaError(f"{key}: {len(diffs)} seed(s) with the metric on both sides; the test needs two or more")
        verdict = Verdict.of([score["a"][s] for s in diffs], [score["b"][s] for s in diffs], seed)
        rows.append({"metric": key, "n_seeds": len(diffs),
                     "a": sum(score["a"][s] for s in diffs) / len(diffs),
                     "b": sum(score["b"][s] for s in diffs) / len(diffs),
                     "differences": " ".join(f"{d:+.1f}" for d in diffs.values()),
                     "mean_difference": sum(diffs.values()) / len(diffs),
                     "eps_a_over_b": verdict.eps_a_over_b, "eps_b_over_a": verdict.eps_b_over_a,
                     "verdict": verdict.verdict})
    return pd.DataFrame(rows)


def to_text(table: pd.DataFrame, runs_a: list[Run], runs_b: list[Run], protocol: str) -> str:
    """The comparison as ``absa compare`` prints it: what A and B are, one line per metric, the rule."""
    name = {side: describe(runs[0].config, seed=False) for side, runs in (("A", runs_a), ("B", runs_b))}
    lines = [f"A: {name['A']}, {budget_label(runs_a[0].config)}",
             f"B: {name['B']}, {budget_label(runs_b[0].config)}",
             f"test set, {protocol} epoch, %; seeds {' '.join(str(s) for s in sorted(r.config['seed'] for r in runs_a))}",
             f"{'metric':<22} {'A':>6} {'B':>6} {'A-B':>6}  {'per seed':<18} {'eps(A>B)':>8} {'eps(B>A)':>8}  verdict"]
    for r in table.itertuples():
        lines.append(f"{r.metric:<22} {r.a:6.1f} {r.b:6.1f} {r.mean_difference:+6.1f}  {r.differences:<18} "
                     f"{r.eps_a_over_b:8.2f} {r.eps_b_over_a:8.2f}  {r.verdict}")
    return "\n".join([*lines, f"rule: {RULE}"])
