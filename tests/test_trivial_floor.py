"""A run no better than the best trivial predictor is named: at the end of `absa train`, in its
metrics record (``trivial_floor``), and under its row in `absa summary` (issue 87)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from absa_lib.cli import main
from absa_lib.data import datasets as D
from absa_lib.errors import AbsaError
from absa_lib.evaluation.trivial import floor_record, trivial_predictors
from absa_lib.reports.summary import summary_markdown, summary_table
from absa_lib.reports.tables import trivial_baselines, trivial_floor
from absa_lib.training.records import RunFolder, RunMetrics, load_run


def _epochs(test_values: list[float], metric: str = "aspect_strict_acc") -> list[dict]:
    """Epoch rows whose dev metric rises with the epoch, with the given test values."""
    return [{"epoch": i, "train_loss": 1.0, "seconds": 1.0, "dev": {metric: 0.1 * i}, "test": {metric: v}}
            for i, v in enumerate(test_values, 1)]


def test_the_floor_a_run_records_is_the_tables_floor(real_data_dir):
    for dataset in ("sentihood", "semeval"):
        train = [e.label_id for e in D.load_examples(dataset, "train", data_dir=real_data_dir)]
        test = [e.label_id for e in D.load_examples(dataset, "test", data_dir=real_data_dir)]
        name, value = trivial_floor(dataset, trivial_baselines(dataset, real_data_dir))
        record = floor_record(dataset, train, test)
        assert record == {"predictor": name.removesuffix(" (trivial)"), "test": pytest.approx(value / 100, abs=1e-12)}


def test_the_floor_is_the_better_trivial_predictor_on_the_selection_metric():
    # SemEval's groups of five aspects: gold present in 2 of 5, all positive; All-none finds nothing
    gold = np.array([0, 4, 0, 4, 4] * 4)
    trivial = trivial_predictors("semeval", [0, 0, 2, 4], gold)
    assert set(trivial) == {"All-none (trivial)", "Majority polarity: positive (trivial)"}
    assert floor_record("semeval", [0, 0, 2, 4], gold) == {"predictor": "Majority polarity: positive",
                                                           "test": pytest.approx(2 * 0.4 / 1.4)}


def test_a_run_at_the_floor_is_flagged_and_one_above_it_is_not(tmp_path):
    floor = {"predictor": "All-None", "test": 0.479}
    at = RunMetrics.of(_epochs([0.6, 0.479]), "aspect_strict_acc", True, trivial_floor=floor)
    line = at.at_trivial_level()
    assert line == ("test aspect_strict_acc 47.9 at the dev-best epoch 2 is no better than the trivial All-None's "
                    "47.9 (+0.0 points)")
    assert at.at_trivial_level("test_best") is None             # epoch 1, 60.0: above it
    above = RunMetrics.of(_epochs([0.3, 0.48]), "aspect_strict_acc", True, trivial_floor=floor)
    assert above.at_trivial_level() is None
    assert RunMetrics.of(_epochs([0.3, 0.2]), "aspect_strict_acc", True).at_trivial_level() is None   # no floor
    # what training writes is what loading reads; a record without the field (format 2) still loads
    record = at.to_record()
    assert record["trivial_floor"] == floor
    assert RunMetrics.from_record(record, tmp_path / "metrics.json", 2).at_trivial_level() == line
    del record["trivial_floor"]
    assert RunMetrics.from_record(record, tmp_path / "metrics.json", 2).trivial_floor is None


@pytest.mark.parametrize("floor", [{"predictor": "All-None", "test": 47.9}, {"predictor": 3, "test": 0.5},
                                   {"test": 0.5}, "All-None", {"predictor": "All-None", "test": 0.5, "x": 1}])
def test_a_damaged_floor_is_refused_in_one_line_naming_the_field(tmp_path, floor):
    record = {**RunMetrics.of(_epochs([0.5]), "aspect_strict_acc", True).to_record(), "trivial_floor": floor}
    with pytest.raises(AbsaError, match=r"metrics.json: trivial_floor is .*expected \{\"predictor\": name"):
        RunMetrics.from_record(record, tmp_path / "metrics.json", 1)


def test_absa_train_ends_with_the_line_and_summary_names_the_run(tmp_path, tiny_argv, capsys, real_data_dir):
    # the tiny run (tiny random backbone, 32 examples, one epoch) learns nothing: below All-None
    assert main(["train", *tiny_argv, "--out", str(tmp_path), "--data-dir", str(real_data_dir)]) == 0
    printed = capsys.readouterr()
    err, run = printed.err.strip().splitlines(), load_run(json.loads(printed.out)["run"])
    assert run.metrics.trivial_floor == {"predictor": "All-None", "test": pytest.approx(
        trivial_baselines("sentihood", real_data_dir, 20)["All-None (trivial)"]["aspect_strict_acc"])}
    assert "trivial_floor" in json.loads(RunFolder(run.path).metrics.read_text())
    assert err[-1].startswith(f"[absa] {run.path}: test aspect_strict_acc ")
    assert "no better than the trivial All-None's" in err[-1]
    # the cached run says it again, last
    assert main(["train", *tiny_argv, "--out", str(tmp_path), "--data-dir", str(real_data_dir)]) == 0
    assert capsys.readouterr().err.strip().splitlines()[-1] == err[-1]
    df = summary_table("sentihood", [run], ("dev_best",))
    assert df["trivial_level"].iloc[0].startswith("seed 3: test aspect_strict_acc")
    text = summary_markdown(df, "sentihood")
    assert "no better than the best trivial predictor, seed 3: test aspect_strict_acc" in text
    # a run that beat the floor (or whose record has none) adds neither the column nor a footnote
    better = dataclasses.replace(run, metrics=RunMetrics.of(_epochs([0.9]), "aspect_strict_acc", True,
                                                            trivial_floor=run.metrics.trivial_floor))
    df = summary_table("sentihood", [better], ("dev_best",))
    assert "trivial_level" not in df and "trivial predictor" not in summary_markdown(df, "sentihood")
