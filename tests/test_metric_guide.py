"""docs/contributing.md's "A metric", done as it says: a metric declared at run time (a `Metric` with its
computation in the registry), trained on the tiny backbone, then read by `absa summary`, `absa compare` and
the tables, beside the committed SentiHood records, which lack it and show "–" with the reason, never fail."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from absa_lib.cli import main
from absa_lib.evaluation import metrics as M
from absa_lib.reports.compare import compare, to_text
from absa_lib.reports.summary import summarize
from absa_lib.reports.tables import build_table, to_markdown
from absa_lib.training.records import find_runs

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "results" / "reference" / "runs" / "sentihood"
WHY = "not recorded by runs written before it existed"


def row_accuracy(dataset: str, gold: np.ndarray, probs: np.ndarray) -> float:
    """The share of rows (sentence, target, aspect) whose most probable label is the gold one."""
    return float((probs.argmax(axis=1) == gold).mean())


ROW_ACC = M.Metric("row_acc", "Row Acc", ("sentihood",), compute=row_accuracy)


@pytest.fixture(scope="module")
def new_metric():
    """The guide's step 1, at run time: one `Metric` more in the registry, for this file's tests only."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(M, "REGISTRY", (*M.REGISTRY, ROW_ACC))
        yield ROW_ACC


@pytest.fixture(scope="module")
def new_runs(new_metric, tiny_systems, tmp_path_factory) -> Path:
    """Two tiny systems, two seeds each, trained with the new metric declared."""
    return tiny_systems(tmp_path_factory.mktemp("runs"), ("qacg-bert", "cg-bert"))


def test_the_guide_says_what_this_file_does():
    guide = (ROOT / "docs" / "contributing.md").read_text()
    section = guide.split("## A metric", 1)[1].split("\n## ", 1)[0]
    for needle in ("`REGISTRY`", "`Metric(", "compute", "paper_numbers.py", "tests/test_metric_guide.py", "–", WHY):
        assert needle in section, needle


def test_a_new_metric_is_computed_and_recorded(new_runs):
    assert M.metric_keys("sentihood")[-1] == "row_acc" and "row_acc" not in M.metric_keys("semeval")
    gold, probs = np.array([0, 1, 2, 0]), np.eye(3)[[0, 1, 1, 2]]
    assert M.compute_metrics("sentihood", gold, probs)["row_acc"] == 0.5                  # 2 of 4 rows right
    assert M.compute_metrics("sentihood", gold, probs, ("row_acc",)) == {"row_acc": 0.5}
    runs = find_runs(new_runs)
    assert len(runs) == 4 and all(0 <= r.selected("dev_best")["test"]["row_acc"] <= 1 for r in runs)


def test_summary_shows_it_and_a_dash_with_the_reason_for_old_records(new_runs, capsys):
    text, frame = summarize([RUNS / "qacg-bert", new_runs])
    assert "Row Acc" in text and f"Row Acc –, {WHY} (seeds " in text
    ours = frame[frame["source"] == "ours"]
    new = ours["budget"].str.startswith("tiny")                               # the rows of the new runs
    assert ours.loc[new, "row_acc"].notna().all() and ours.loc[~new, "row_acc"].isna().all()
    assert ours.loc[~new, "aspect_strict_acc"].notna().all()                   # the rest of old rows as before
    assert main(["summary", str(RUNS / "qacg-bert"), str(new_runs)]) == 0
    assert WHY in capsys.readouterr().out


def test_compare_compares_it_and_names_why_old_records_cannot_be(new_runs, capsys):
    a, b = find_runs(new_runs, model="qacg-bert"), find_runs(new_runs, model="cg-bert")
    table = compare(a, b, samples=100)
    assert "row_acc" in list(table["metric"]) and "row_acc" not in table.attrs["not_compared"]
    assert all(WHY not in why for why in table.attrs["not_compared"].values())   # (AUCs of 20 examples: undefined)
    assert main(["compare", str(new_runs), str(new_runs), "--a-filter", "model=qacg-bert", "--b-filter",
                 "model=cg-bert", "--metric", "row_acc", "--samples", "100"]) == 0
    assert "row_acc" in capsys.readouterr().out
    old = dict(dataset="sentihood", aux="NLI-M", epochs=25, preset="paper", sampler="uniform", model_overrides={})
    qacg, pair = find_runs(RUNS, model="qacg-bert", **old), find_runs(RUNS, model="bert-pair", **old)
    table = compare(qacg, pair, metrics=("aspect_strict_acc", "row_acc"), samples=100)
    assert list(table["metric"]) == ["aspect_strict_acc"]
    assert table.attrs["not_compared"]["row_acc"].startswith(f"{WHY} in seeds 42 43 44")
    assert "AUC" not in table.attrs["not_compared"]["row_acc"]
    assert f"row_acc                     –      –      –  not compared: {WHY}" in to_text(table, qacg, pair, "dev_best")


def test_table_1_has_its_column_with_a_dash_for_old_records_and_the_paper(new_runs):
    runs = find_runs(RUNS, model="qacg-bert") + find_runs(new_runs, model="qacg-bert")
    df = build_table("sentihood", runs)
    ours = df[df["source"] == "ours"]
    tiny = ours["backbone"] == "tiny"
    assert tiny.any() and (~tiny).any()
    assert ours.loc[tiny, "row_acc"].notna().all() and ours.loc[~tiny, "row_acc"].isna().all()
    assert df["row_acc_paper"].isna().all()                          # the paper prints no such column
    assert ours.loc[~tiny, "not_recorded"].str.startswith(f"Row Acc –, {WHY}").all()
    markdown = to_markdown(df, "sentihood")
    assert "| Row Acc |" in markdown and f": Row Acc –, {WHY} (seeds " in markdown
    assert not any(math.isnan(v) for v in ours.loc[~tiny, "aspect_strict_acc"])
