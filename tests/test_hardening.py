"""Issue 89, fourth pass: the cases a fault sweep found that were silent, wrong or a traceback, each
refused in one line or handled (the rest of the sweep's faults: tests/test_faults.py)."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import pytest

from absa_lib.evaluation.significance import Verdict
from absa_lib.training.records import find_runs

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "results" / "reference" / "runs"


def _with_test_metric(run, key: str, value: float):
    """``run`` with its dev-best epoch's test ``key`` set to ``value``."""
    selection = {**run.metrics.selection}
    chosen = selection["dev_best"]
    selection["dev_best"] = {**chosen, "test": {**chosen["test"], key: value}}
    return dataclasses.replace(run, metrics=dataclasses.replace(run.metrics, selection=selection))


def test_a_claims_row_lists_only_the_seeds_it_compared():
    """A seed whose selection metric is undefined on one side is not compared; the row's seeds and runs
    leave it out too (they listed it, beside two differences)."""
    from absa_lib.reports.claims import claims_table

    runs = find_runs(RUNS, dataset="semeval")
    target = next(r for r in runs if r.config.model == "bert-pair" and r.config.epochs == 25 and r.config.seed == 43
                  and r.config.sampler == "uniform")
    runs = [_with_test_metric(r, "aspect_f1", math.nan) if r is target else r for r in runs]
    table = claims_table(runs, {"semeval": 40.8}, ("semeval",))
    assert len(table)
    for row in table.itertuples():
        assert len(row.seeds.split()) == len(row.differences.split()) == len(row.runs_a.split()) == len(row.runs_b.split())
    touched = table[table["runs_b"].str.contains(target.run_id) | table["runs_a"].str.contains(target.run_id)]
    assert touched.empty
    assert (table["seeds"] == "42 44").any()


def test_identical_differences_are_not_a_verdict_at_p_0():
    """Three identical differences have no spread: the t-test cannot decide, and the verdict says so."""
    verdict = Verdict.of([80.0, 81.0, 82.0], [79.0, 80.0, 81.0])
    assert verdict.seeds.p == 1.0 and verdict.p_adjusted == 1.0
    assert verdict.verdict == "undecided: 3 identical differences (+1.0 each), no spread to test"
    zero = Verdict.of([80.0, 81.0], [80.0, 81.0])
    assert zero.verdict.startswith("undecided") and zero.seeds.p == 1.0


def test_compare_prints_no_verdict_for_identical_differences():
    from absa_lib.reports.compare import compare, to_text

    runs = find_runs(RUNS, dataset="semeval", model="bert-pair", epochs=25, sampler="uniform")
    shifted = [_with_test_metric(r, "aspect_f1", r.selected("dev_best")["test"]["aspect_f1"] - 0.01) for r in runs]
    table = compare(runs, shifted, metrics=("aspect_f1",))
    assert table["verdict"].iloc[0] == "undecided: 3 identical differences (+1.0 each), no spread to test"
    assert table["seeds"].iloc[0] == "42 43 44"
    assert "no spread to test" in to_text(table, runs, shifted, "dev_best")
