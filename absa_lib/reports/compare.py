"""Two sets of runs compared metric by metric (``absa compare``): paired by seed, each metric's
differences seed by seed, their mean with its 95% interval over seeds and the paired t-test, ASO's
ε_min both ways, where every run kept its predictions the paired bootstrap interval of the
difference over test sentences, and the verdict of :mod:`absa_lib.evaluation.significance` (the
metrics of one comparison are one family: Holm over them).

    table = compare(find_runs("results/reference/runs", dataset="semeval", model="qacg-bert", aux="none",
                              epochs=25),
                    find_runs("results/reference/runs", dataset="semeval", model="bert-pair", epochs=25))

Each side must be one configuration (its seeds), and both must be scored alike: the same dataset and
test examples, the same budget (backbone, epochs, learning rate, ...), at the epoch the same protocol
selects. Anything else is refused in one line: a difference between two budgets or two test sets is
not the models'.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from absa_lib.errors import AbsaError
from absa_lib.evaluation.metrics import NOT_RECORDED
from absa_lib.evaluation.significance import (
    RULE,
    SAMPLES,
    Verdict,
    family,
    paired_bootstrap,
    paired_differences,
)
from absa_lib.reports.tables import budget_key, budget_label, budget_labels, data_key, metric_columns
from absa_lib.training.config import describe
from absa_lib.training.records import Run

PROTOCOLS = ("dev_best", "test_best", "last")


def _one_configuration(runs: list[Run], side: str) -> dict:
    if not runs:
        raise AbsaError(f"{side}: no finished run to compare")
    labels = budget_labels([r.config for r in runs])       # budgets told apart by the fields they differ in
    groups = sorted({(describe(r.config, seed=False), labels[budget_key(r.config)], budget_key(r.config)) for r in runs})
    versions = sorted({data_key(r.config) for r in runs})
    if len(groups) == 1 and len(versions) > 1:
        raise AbsaError(f"{side}: runs trained on {len(versions)} versions of the data files ({', '.join(versions)}; "
                        "data_sha256 in their run records); give the seeds of one version a side")
    if len(groups) > 1:
        names = "; ".join(f"{name}, {budget}" for name, budget, _ in groups)          # every one: the choice is the user's
        raise AbsaError(f"{side}: runs of {len(groups)} configurations ({names}); give one configuration a side "
                        "(a folder of its seeds, or filters such as model=qacg-bert)")
    seeds = [r.config.seed for r in runs]
    twice = sorted({s for s in seeds if seeds.count(s) > 1})
    if twice:
        raise AbsaError(f"{side}: seed {twice[0]} twice (two copies of one run, or runs of two folders); give each "
                        "seed once")
    return runs[0].config


class _NotKept(Exception):
    """Why a comparison has no interval over test sentences though its runs kept predictions."""


def _kept_test_probs(runs: list[Run], protocol: str, seeds: list[int]) -> tuple[list, np.ndarray, str] | None:
    """Each seed's kept test probabilities at the ``protocol`` epoch, the gold labels and the keys'
    digest; None when a run kept none (trained before runs kept them)."""
    by_seed = {r.config.seed: r for r in runs}
    kept = [by_seed[s].kept() for s in seeds]
    if any(k is None for k in kept):
        return None
    probs = [k.probs("test", by_seed[s].selected(protocol)["epoch"]) for k, s in zip(kept, seeds, strict=True)]
    if any(p is None for p in probs):
        raise _NotKept(f"the runs keep predictions at their dev- and test-selected epochs only, not at the {protocol} "
                       "epoch's")
    for k, s in zip(kept, seeds, strict=True):
        chosen = by_seed[s].selected(protocol)
        if differ := k.disagreement("test", chosen["epoch"], chosen["test"]):
            raise AbsaError(f"{by_seed[s].path}: its kept predictions do not give back the test {', '.join(differ)} "
                            f"its metrics record holds at epoch {chosen['epoch']} (the records were edited, or the "
                            "predictions kept before they were exact round near-ties); a difference needs both to "
                            "agree: retrain the run with --force")
    keys = {k.keys["test"] for k in kept}
    if len(keys) > 1 or any(not np.array_equal(k.gold["test"], kept[0].gold["test"]) for k in kept):
        raise AbsaError("the runs' kept predictions are for other test examples (their keys differ); a difference is "
                        "the models' only on the same test examples")
    return probs, kept[0].gold["test"], keys.pop()


def compare(runs_a: list[Run], runs_b: list[Run], protocol: str = "dev_best", seed: int = 0,
            metrics: tuple[str, ...] | None = None, samples: int = SAMPLES) -> pd.DataFrame:
    """One row per metric of the dataset's table (or of ``metrics``): ``metric``, ``n_seeds`` and ``seeds`` (those
    compared: a seed whose metric is undefined on a side is not), ``a`` and ``b`` (means over
    the seeds, %), ``differences`` (A − B per seed, points), ``mean_difference`` with ``seed_sd`` (the
    differences' sd), ``seed_low`` and ``seed_high`` (its 95% t interval over seeds), ``p`` (the paired t-test) and ``p_adjusted`` (Holm over the metrics compared),
    ``min_detectable`` (the true gain the rule finds 80% of the time at these seeds, on average over what they
    leave unknown about their spread: :func:`~absa_lib.evaluation.significance.min_detectable`; points),
    ``ci_low`` and ``ci_high`` (the paired bootstrap 95% interval of A − B over ``samples`` draws of the test set,
    points; NaN unless every run kept its predictions), ``eps_a_over_b``, ``eps_b_over_a``, ``verdict`` (the rule of
    :data:`~absa_lib.evaluation.significance.RULE`) and ``evidence`` (what it saw: seeds, or seeds and test sentences).
    ``runs_a`` and ``runs_b``: the seeds of one configuration each, scored alike (else AbsaError). A metric
    undefined in too many seeds to compare is left out and named with the reason in
    ``table.attrs["not_compared"]``; none comparable is an AbsaError. ``table.attrs["verdicts"]``: each
    row's :class:`~absa_lib.evaluation.significance.Verdict` (the claims table decides them again over
    its own family)."""
    if protocol not in PROTOCOLS:
        raise AbsaError(f"protocol {protocol!r}: expected one of {', '.join(PROTOCOLS)}")
    a, b = _one_configuration(runs_a, "A"), _one_configuration(runs_b, "B")
    for field, what in (("dataset", "datasets"), ("max_eval_examples", "test sets (max_eval_examples)"),
                        ("data_sha256", "test sets (data files)")):
        if getattr(a, field) != getattr(b, field):
            raise AbsaError(f"A and B differ in their {what}: {getattr(a, field)!r} against {getattr(b, field)!r}; a "
                            "difference is the models' only on the same test examples")
    if budget_key(a) != budget_key(b):
        raise AbsaError(f"A and B differ in their budget ({budget_label(a)} against {budget_label(b)}, or a field "
                        "of it); compare runs of one budget")
    dataset, rows = a.dataset, []
    known = [key for key, _, _ in metric_columns(dataset)]
    unknown = [m for m in metrics or () if m not in known]
    if unknown:
        raise AbsaError(f"metric {unknown[0]!r} is not one of {dataset}'s: {', '.join(known)}")
    shared = sorted({r.config.seed for r in runs_a} & {r.config.seed for r in runs_b})
    if len(shared) < 2 and set(r.config.seed for r in runs_a) == set(r.config.seed for r in runs_b):
        raise AbsaError(f"A and B share {len(shared)} seed{'s' if len(shared) != 1 else ''} "
                        f"({' '.join(map(str, shared))}); a comparison over seeds needs two or more a side")
    asked = tuple(metrics or known)
    scores, not_compared = {}, {}
    for key in asked:
        score = {side: {r.config.seed: 100.0 * r.selected(protocol)["test"].get(key, float("nan")) for r in runs}
                 for side, runs in (("a", runs_a), ("b", runs_b))}
        lacking = sorted({r.config.seed for r in (*runs_a, *runs_b) if key not in r.selected(protocol)["test"]})
        undefined = sorted({s for side in score.values() for s, v in side.items() if math.isnan(v)} - set(lacking))
        if len(paired_differences(score["a"], score["b"])) < 2:
            why = [f"{NOT_RECORDED} in seed{'s' if len(lacking) > 1 else ''} {' '.join(map(str, lacking))}"] * bool(lacking)
            why += [f"undefined in seed{'s' if len(undefined) > 1 else ''} {' '.join(map(str, undefined))} (an AUC "
                    "needs both classes of an aspect in the test set)"] * bool(undefined)
            not_compared[key] = f"{'; '.join(why)}, leaving fewer than two seeds with it on both sides"
        else:
            scores[key] = score
    if not scores:
        raise AbsaError("no metric can be compared: " + "; ".join(f"{k}: {why}" for k, why in not_compared.items()))
    keys = tuple(scores)
    seeds = list(paired_differences({r.config.seed: 0.0 for r in runs_a},   # the shared seeds; unpaired ones
                                    {r.config.seed: 0.0 for r in runs_b}))  # are refused in one line
    try:
        kept = [_kept_test_probs(runs, protocol, seeds) for runs in (runs_a, runs_b)]
        no_interval = "" if all(kept) else ("a run keeps no per-example predictions (trained before runs kept "
                                             "them, or its record names none)")
    except _NotKept as why:
        kept, no_interval = [None, None], str(why)
    intervals = {}
    if all(kept):
        if kept[0][2] != kept[1][2]:
            raise AbsaError("A's and B's kept predictions are for other test examples (their keys differ); a difference "
                            "is the models' only on the same test examples")
        intervals = paired_bootstrap(dataset, kept[0][1], kept[0][0], kept[1][0], keys, samples, seed)
    verdicts = []
    for key, score in scores.items():
        diffs = paired_differences(score["a"], score["b"])
        ci = intervals.get(key)
        if ci is not None and any(math.isnan(x) for x in ci):
            ci = None
        verdicts.append(Verdict.of([score["a"][s] for s in diffs], [score["b"][s] for s in diffs], seed, ci))
        rows.append({"metric": key, "n_seeds": len(diffs), "seeds": " ".join(map(str, diffs)),
                     "a": sum(score["a"][s] for s in diffs) / len(diffs),
                     "b": sum(score["b"][s] for s in diffs) / len(diffs),
                     "differences": " ".join(f"{d:+.1f}" for d in diffs.values())})
    verdicts = family(verdicts)
    for row, verdict in zip(rows, verdicts, strict=True):
        row.update(verdict_columns(verdict))
    table = pd.DataFrame(rows)
    table.attrs["verdicts"] = verdicts                   # per row: to be decided again in a larger family
    table.attrs["not_compared"] = not_compared           # metric: why it could not be compared
    table.attrs["no_interval"] = no_interval              # why there is no interval over test sentences
    return table


def verdict_columns(verdict: Verdict) -> dict:
    """A verdict as the columns of a comparison's row (points of the metric)."""
    s, ci = verdict.seeds, verdict.ci
    return {"mean_difference": s.mean, "seed_sd": s.sd, "seed_low": s.low, "seed_high": s.high, "p": s.p,
            "p_adjusted": verdict.p_adjusted, "min_detectable": verdict.min_detectable,
            "ci_low": ci[0] if ci else math.nan, "ci_high": ci[1] if ci else math.nan,
            "eps_a_over_b": verdict.eps_a_over_b, "eps_b_over_a": verdict.eps_b_over_a,
            "verdict": verdict.verdict, "evidence": "seeds and test sentences" if ci else "seeds"}


def to_text(table: pd.DataFrame, runs_a: list[Run], runs_b: list[Run], protocol: str) -> str:
    """The comparison as ``absa compare`` prints it: what A and B are, one line per metric, the rule."""
    name = {side: describe(runs[0].config, seed=False) for side, runs in (("A", runs_a), ("B", runs_b))}
    lines = [f"A: {name['A']}, {budget_label(runs_a[0].config)}",
             f"B: {name['B']}, {budget_label(runs_b[0].config)}",
             f"test set, {protocol} epoch, %; seeds {' '.join(str(s) for s in sorted(r.config.seed for r in runs_a))}",
             f"{'metric':<22} {'A':>6} {'B':>6} {'A-B':>6}  {'per seed':<18} {'95% CI (seeds)':<16} {'p (Holm)':>8} "
             f"{'MDD':>5} {'95% CI (test)':<15} {'eps(A>B)':>8} {'eps(B>A)':>8}  verdict"]
    for r in table.itertuples():
        ci = "–" if math.isnan(r.ci_low) else f"[{r.ci_low:+.1f}, {r.ci_high:+.1f}]"
        mdd = "–" if math.isnan(r.min_detectable) else f"{r.min_detectable:.1f}"      # no spread: nothing to detect with
        lines.append(f"{r.metric:<22} {r.a:6.1f} {r.b:6.1f} {r.mean_difference:+6.1f}  {r.differences:<18} "
                     f"{f'[{r.seed_low:+.1f}, {r.seed_high:+.1f}]':<16} {r.p_adjusted:8.3f} {mdd:>5} {ci:<15} "
                     f"{r.eps_a_over_b:8.2f} {r.eps_b_over_a:8.2f}  {r.verdict}")
    if table["ci_low"].isna().all():
        lines.append(f"95% CI (test): – ({table.attrs.get('no_interval') or 'no kept predictions'})")
    for key, why in table.attrs.get("not_compared", {}).items():
        lines.append(f"{key:<22} {'–':>6} {'–':>6} {'–':>6}  not compared: {why}")
    lines.append(f"p (Holm) and MDD: the family is the {len(table)} metric{'s' if len(table) != 1 else ''} compared here "
                 f"(Holm over them); MDD, the true gain the rule would find 80% of the time with these seeds, on average "
                 f"over what they leave unknown about their spread, at α/{len(table)}; results/claims.md's family is the "
                 "claims of one budget (its rows), so its p and MDD for the same pair differ")
    return "\n".join([*lines, f"rule: {RULE}"])
