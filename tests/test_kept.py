"""Per-example predictions kept with a run's record, and the paired bootstrap over test sentences that
they allow: written by training, bound to the run, carried by exports, checked when read."""

from __future__ import annotations

import json
import shutil
from functools import partial

import numpy as np
import pytest
from conftest import with_record

from absa_lib.data.datasets import group_size
from absa_lib.errors import AbsaError
from absa_lib.evaluation import kept as K
from absa_lib.evaluation.metrics import compute_metrics, metric_keys
from absa_lib.evaluation.significance import Verdict, paired_bootstrap
from absa_lib.harness.grid import export_records
from absa_lib.reports.compare import compare, to_text
from absa_lib.training import loop as training
from absa_lib.training.records import RunMetrics, find_runs, load_run

pytestmark = pytest.mark.usefixtures("real_data_dir")


@pytest.fixture(scope="module")
def small(tiny_config):
    """``small(**changes)``: the tiny run (conftest) on SemEval, of 40 examples in batches of 8 for three
    epochs, seed 7."""
    return partial(tiny_config, dataset="semeval", seed=7, epochs=3, batch_size=8, max_train_examples=40,
                   max_eval_examples=40)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, small):
    """Two tiny SemEval configurations, two seeds each (the second: BERT-pair)."""
    folder = tmp_path_factory.mktemp("runs")
    return {(model, seed): training.train(small(model=model, seed=seed), runs_dir=folder, progress=False)
            for model in ("qacg-bert", "bert-pair") for seed in (7, 8)}


def test_a_run_keeps_the_test_set_of_both_selected_epochs_and_the_dev_set_of_the_dev_selected(runs):
    run = runs["qacg-bert", 7]
    entry, kept = run.metrics.predictions, run.kept()
    dev_best, test_best = run.selected("dev_best")["epoch"], run.selected("test_best")["epoch"]
    assert entry["epochs"] == {"dev": [dev_best], "test": sorted({dev_best, test_best})}
    assert entry["bytes"] == (run.path / "predictions.npz").stat().st_size
    assert kept.run_id == run.run_id and kept.labels == ("positive", "neutral", "negative", "conflict", "none")
    for protocol in ("dev_best", "test_best"):
        chosen = run.selected(protocol)
        probs = run.kept_probs(protocol)
        assert probs.shape == (40, 5) and np.allclose(probs.sum(axis=1), 1, atol=2e-3)
        assert compute_metrics("semeval", kept.gold["test"], probs) == chosen["test"]   # the recorded metrics
    assert compute_metrics("semeval", kept.gold["dev"], kept.probs("dev", dev_best)) == run.selected()["dev"]
    assert kept.to_bytes() == (run.path / "predictions.npz").read_bytes()             # the same rows, the same bytes


def test_kept_rows_are_the_probabilities_bit_for_bit_and_give_back_every_metric():
    """Near-ties stay apart (float16 logs made 0.500 and 0.5002 one number, flipping an argmax: a tiny run's
    sentiment accuracy came back 0.75 where 0.25 was recorded)."""
    gold = np.array([0, 2, 4, 4, 4], np.int8)                # one SemEval sentence: 5 aspects
    kept = K.Kept("r", "semeval", {"dev": gold, "test": gold}, {"dev": "", "test": ""},
                  ("positive", "neutral", "negative", "conflict", "none"))
    p = np.array([[0.5, 1e-4, 0.4998, 1e-4, 0.0], [0.4999, 1e-4, 0.5, 1e-4, 0.0], *[[0, 0, 0, 0, 1.0]] * 3],
                 dtype=np.float32)
    kept.add(1, {"dev": p, "test": p})
    back = K.Kept.from_bytes(kept.to_bytes(), "x", "r")
    assert back.probs("test", 1).dtype == np.float32 and np.array_equal(back.probs("test", 1), p)
    recorded = compute_metrics("semeval", kept.gold["test"], p)
    assert back.disagreement("test", 1, recorded) == []
    assert back.disagreement("test", 1, {**recorded, "aspect_f1": 0.5}) == ["aspect_f1"]


def test_a_record_edited_against_its_kept_predictions_is_refused_by_compare(runs):
    import dataclasses

    run = runs["qacg-bert", 7]
    metrics = json.loads(json.dumps(run.metrics.to_record()))
    metrics["selection"]["dev_best"]["test"]["aspect_f1"] = 0.99            # edited consistently elsewhere
    edited = dataclasses.replace(run, metrics=RunMetrics(**metrics))
    with pytest.raises(AbsaError, match=r"its kept predictions do not give back the test aspect_f1"):
        compare([edited, runs["qacg-bert", 8]], [runs["bert-pair", s] for s in (7, 8)], samples=100)


def test_a_record_of_another_run_an_edited_file_or_a_missing_one_is_refused(runs, tmp_path):
    source = runs["qacg-bert", 7].path
    copy = tmp_path / source.name
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("checkpoints"))
    data = bytearray((copy / "predictions.npz").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (copy / "predictions.npz").write_bytes(bytes(data))
    with pytest.raises(AbsaError, match=r"predictions.npz: its bytes are not those metrics.json names"):
        load_run(copy).kept()

    other = runs["qacg-bert", 8].path / "predictions.npz"          # another run's file, its entry copied too
    shutil.copyfile(other, copy / "predictions.npz")
    metrics = json.loads((copy / "metrics.json").read_text())
    metrics["predictions"] = json.loads((other.parent / "metrics.json").read_text())["predictions"]
    (copy / "metrics.json").write_text(json.dumps(metrics))
    with pytest.raises(AbsaError, match=rf"holds the predictions of run {other.parent.name}, not of run {copy.name}"):
        load_run(copy).kept()

    (copy / "predictions.npz").unlink()
    with pytest.raises(AbsaError, match="predictions.npz: missing, but .*metrics.json says the run kept"):
        load_run(copy).kept()

    metrics["predictions"] = {"file": "predictions.npz", "bytes": 10, "sha256": "0" * 64, "epochs": {"dev": [9]}}
    (copy / "metrics.json").write_text(json.dumps(metrics))
    with pytest.raises(AbsaError, match=r"metrics.json: predictions is .*expected \{file: predictions.npz"):
        load_run(copy)


def test_not_an_archive_and_bad_arrays_are_one_line():
    with pytest.raises(AbsaError, match="x: not a kept-predictions archive"):
        K.Kept.from_bytes(b"not a zip", "x", "r")
    kept = K.Kept("r", "semeval", {"dev": np.zeros(5, np.int8), "test": np.full(5, 9, np.int8)},
                  {"dev": "", "test": ""}, ("positive", "neutral", "negative", "conflict", "none"))
    with pytest.raises(AbsaError, match=r"x: no gold_test label ids \(int8 in 0..4\)"):
        K.Kept.from_bytes(kept.to_bytes(), "x", "r")


def test_records_written_before_runs_kept_predictions_still_load_without_them():
    from pathlib import Path

    reference = Path(__file__).resolve().parent.parent / "results" / "reference" / "runs"
    run = find_runs(reference, dataset="semeval", model="bert-pair", epochs=1, seed=42)[0]
    assert run.metrics.predictions is None and run.kept() is None and run.kept_probs() is None


def test_an_export_carries_the_kept_predictions(runs, tmp_path):
    run = runs["bert-pair", 8]
    written = export_records([run], tmp_path)
    assert tmp_path / "runs" / "semeval" / "bert-pair" / run.run_id / "predictions.npz" in written
    copy = load_run(tmp_path / "runs" / "semeval" / "bert-pair" / run.run_id)
    assert np.array_equal(copy.kept_probs(), run.kept_probs())


def test_a_resumed_run_keeps_the_predictions_of_the_epochs_before_the_interruption(tmp_path):
    path = tmp_path / "run"
    kept = K.Kept.for_splits("r1", "semeval", {"dev": [], "test": []})
    kept.rows = {("test", 1): np.zeros((0, 5), np.float32), ("test", 3): np.zeros((0, 5), np.float32),
                 ("dev", 1): np.zeros((0, 5), np.float32)}
    path.mkdir()
    path = path / "predictions.npz"
    K.write_kept(path, kept)
    fresh = K.Kept.for_splits("r1", "semeval", {"dev": [], "test": []})
    assert K.resumed(path, "r1", 2, fresh).epochs == {"dev": [1], "test": [1]}   # epoch 3 was not finished
    assert K.resumed(path, "another", 2, K.Kept.for_splits("another", "semeval", {"dev": [], "test": []})).epochs == {
        "dev": [], "test": []}


# ----------------------------------------------------------------------------------------------
# the paired bootstrap over test sentences


def _predictions(gold: np.ndarray, right: float, rng, n_labels: int) -> np.ndarray:
    """Probabilities whose argmax is the gold label on about ``right`` of the examples."""
    wrong = (gold + rng.integers(1, n_labels, len(gold))) % n_labels
    label = np.where(rng.random(len(gold)) < right, gold, wrong)
    p = np.full((len(gold), n_labels), 0.1 / (n_labels - 1))
    p[np.arange(len(gold)), label] = 0.9
    return p


@pytest.mark.parametrize(("right_a", "right_b", "inside"), [(0.9, 0.6, "above"), (0.75, 0.75, "around"),
                                                            (0.6, 0.9, "below")])
def test_the_interval_on_predictions_whose_answer_is_known(right_a, right_b, inside):
    rng = np.random.default_rng(0)
    gold = rng.integers(0, 5, 5 * 300)
    a = [_predictions(gold, right_a, rng, 5) for _ in range(3)]
    b = [_predictions(gold, right_b, rng, 5) for _ in range(3)]
    low, high = paired_bootstrap("semeval", gold, a, b, ("sentiment_acc_4class",), samples=300)["sentiment_acc_4class"]
    assert low < high
    assert {"above": low > 0, "around": low < 0 < high, "below": high < 0}[inside]


def test_the_same_predictions_differ_by_exactly_nothing_and_sentihood_resamples_sentence_target_groups():
    rng = np.random.default_rng(1)
    gold = rng.integers(0, 3, group_size("sentihood") * 100)
    p = [_predictions(gold, 0.8, rng, 3) for _ in range(2)]
    intervals = paired_bootstrap("sentihood", gold, p, p, ("aspect_strict_acc", "sentiment_acc"), samples=50)
    assert intervals == {"aspect_strict_acc": (0.0, 0.0), "sentiment_acc": (0.0, 0.0)}
    with pytest.raises(AbsaError, match="pair each seed of A with B's"):
        paired_bootstrap("sentihood", gold, p, p[:1], ("sentiment_acc",))
    with pytest.raises(AbsaError, match="is not one of sentihood's"):
        paired_bootstrap("sentihood", gold, p, p, ("aspect_f1",), samples=5)


def test_the_verdict_needs_the_interval_to_agree_with_the_seeds():
    a, b = [80.1, 79.5, 80.4], [75.2, 75.0, 75.9]              # ASO alone: A better
    assert Verdict.of(a, b).verdict == "A better"
    assert Verdict.of(a, b, ci=(0.5, 9.0)).verdict == "A better"
    assert Verdict.of(a, b, ci=(-0.5, 9.0)).verdict == "undecided at 3 seeds"
    assert Verdict.of(b, a, ci=(-9.0, -0.5)).verdict == "B better"


def test_compare_adds_the_interval_where_every_run_kept_its_predictions(runs):
    a = [runs["qacg-bert", s] for s in (7, 8)]
    b = [runs["bert-pair", s] for s in (7, 8)]
    table = compare(a, b, metrics=("aspect_f1", "sentiment_acc_4class"), samples=200).set_index("metric")
    for metric in ("aspect_f1", "sentiment_acc_4class"):
        row = table.loc[metric]
        assert row["evidence"] == "seeds and test sentences"
        assert row["ci_low"] <= row["ci_high"]
    assert "95% CI (test)" in to_text(table.reset_index(), a, b, "dev_best")
    assert set(metric_keys("semeval")) >= set(table.index)


def test_the_documented_interval_is_what_the_committed_check_runs_give():
    """docs/evidence/per_example_predictions.md's table: `absa compare` on the six retrained one-epoch
    SemEval runs that kept their predictions, every interval and verdict as the page prints it."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    check = root / "results" / "reference" / "checks" / "kept_predictions_semeval_1ep"
    runs = find_runs(check)
    table = compare([r for r in runs if r.config.model == "qacg-bert"],
                    [r for r in runs if r.config.model == "bert-pair"])
    page = (root / "docs" / "evidence" / "per_example_predictions.md").read_text()
    for row in table.itertuples():
        cells = (f"{row.mean_difference:+.1f}", f"[{row.seed_low:+.1f}, {row.seed_high:+.1f}]", f"{row.p_adjusted:.3f}",
                 f"{row.min_detectable:.1f}", f"[{row.ci_low:+.1f}, {row.ci_high:+.1f}]", f"{row.eps_a_over_b:.2f}",
                 f"{row.eps_b_over_a:.2f}", row.verdict)
        line = " | ".join(c.replace("-", "−") for c in cells[:5]) + " | " + " | ".join(cells[5:])
        assert line in page.replace(f" | {row.differences.replace('-', '−')} | ", " | "), (row.metric, line)
    for run in runs:                                  # the kept rows give the recorded metrics, exactly
        kept, chosen = run.kept(), run.selected()
        for split in ("dev", "test"):
            assert compute_metrics("semeval", kept.gold[split], kept.probs(split, chosen["epoch"])) == chosen[split]


def test_compare_reports_the_metrics_it_can_and_names_those_it_cannot(runs):
    """A metric undefined in a side's seeds (an AUC whose test subset lacks a class) is left out with
    its reason; the others are compared, not the whole comparison refused."""
    import dataclasses
    import math

    def without(run, key):                              # (and without kept predictions, which would disagree)
        metrics = json.loads(json.dumps(run.metrics.to_record()))
        metrics["selection"]["dev_best"]["test"][key] = math.nan
        metrics.pop("predictions")
        return dataclasses.replace(run, metrics=RunMetrics(**metrics))

    a = [without(runs["qacg-bert", s], "sentiment_acc_4class") for s in (7, 8)]
    b = [dataclasses.replace(runs["bert-pair", s], metrics=dataclasses.replace(runs["bert-pair", s].metrics,
                                                                                predictions=None)) for s in (7, 8)]
    table = compare(a, b, metrics=("aspect_f1", "sentiment_acc_4class"), samples=100)
    assert list(table["metric"]) == ["aspect_f1"]
    assert table.attrs["not_compared"]["sentiment_acc_4class"].startswith("undefined in seeds 7 8")
    assert "sentiment_acc_4class        –      –      –  not compared: undefined in seeds 7 8" in to_text(
        table, a, b, "dev_best")
    with pytest.raises(AbsaError, match="no metric can be compared: sentiment_acc_4class: undefined"):
        compare(a, b, metrics=("sentiment_acc_4class",))


def test_a_side_whose_runs_differ_in_any_training_field_or_data_is_refused(runs):
    """weight_decay, adam_eps, max_grad_norm, eval_batch_size, the backbone's weights or the data files:
    runs differing in any are not one configuration's seeds (the fields come from TrainConfig)."""

    from absa_lib.reports.tables import GROUP_FIELDS

    assert {"weight_decay", "adam_eps", "max_grad_norm", "eval_batch_size", "backbone_fingerprint",
            } <= set(GROUP_FIELDS)
    b = [runs["bert-pair", s] for s in (7, 8)]

    def mixed(field, value):
        return [runs["qacg-bert", 7], with_record(runs["qacg-bert", 8], **{field: value})]

    for field, value in (("weight_decay", 0.1), ("eval_batch_size", 7), ("backbone_fingerprint", "0" * 16)):
        with pytest.raises(AbsaError, match=rf"A: runs of 2 configurations .*\[{field}="):
            compare(mixed(field, value), b)
    with pytest.raises(AbsaError, match=r"A: runs trained on 2 versions of the data files \(sha256:"):
        compare(mixed("data_sha256", {"semeval/x": "0" * 64}), b)


def test_runs_behind_symbolic_links_are_found_once_and_a_loop_ends(runs, tmp_path):
    root = tmp_path / "linked"
    (root / "semeval" / "qacg-bert").mkdir(parents=True)
    for seed in (7, 8):
        (root / "semeval" / "qacg-bert" / runs["qacg-bert", seed].run_id).symlink_to(runs["qacg-bert", seed].path)
    (root / "semeval" / "again").symlink_to(root, target_is_directory=True)        # a loop
    found = find_runs(root, model="qacg-bert")
    assert sorted(r.config.seed for r in found) == [7, 8]


def test_the_grid_export_refuses_damaged_kept_predictions_before_writing(runs, tmp_path):
    source = runs["bert-pair", 7].path
    copy = tmp_path / "src" / source.name
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("checkpoints"))
    (copy / "predictions.npz").write_bytes((copy / "predictions.npz").read_bytes()[:-3])
    with pytest.raises(AbsaError, match="predictions.npz: its bytes are not those metrics.json names"):
        export_records([load_run(copy)], tmp_path / "ref")
    assert not (tmp_path / "ref").exists()


def test_unclear_messages_now_say_what_happened(runs, tmp_path, capsys):
    import dataclasses

    from absa_lib.cli import main
    from absa_lib.reports.model_card import export_run

    assert main(["compare", str(tmp_path / "typo"), str(runs["bert-pair", 7].path)]) == 2     # a mistyped folder
    assert "A: " + str(tmp_path / "typo") + ": no such folder" in capsys.readouterr().err

    def last_not_kept(run):                 # the last epoch is one the run did not keep predictions of
        metrics = json.loads(json.dumps(run.metrics.to_record()))
        metrics["selection"]["last"] = {**metrics["selection"]["last"], "epoch": 99}
        return dataclasses.replace(run, metrics=RunMetrics(**metrics))

    a = [last_not_kept(runs["qacg-bert", s]) for s in (7, 8)]
    b = [last_not_kept(runs["bert-pair", s]) for s in (7, 8)]
    table = compare(a, b, protocol="last", metrics=("aspect_f1",))
    assert "not at the last epoch's" in to_text(table, a, b, "last")

    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(AbsaError, match=r"dangling: a symbolic link \(to .*nowhere\), not a folder"):
        export_run(runs["bert-pair", 7], tmp_path / "dangling")


def test_an_own_dataset_whose_csv_is_a_folder_says_so(fixtures_dir, tmp_path):
    from absa_lib.data import datasets as D
    from absa_lib.data import own_data

    folder = shutil.copytree(fixtures_dir / "own_data" / "phones", tmp_path / "phones")
    (folder / "train.csv").unlink()
    (folder / "train.csv").mkdir()
    tables = (D.OWN, D.REGISTRY)
    saved = [dict(t) for t in tables]
    try:
        with pytest.raises(AbsaError, match=r"train.csv: a folder, not a CSV file; a dataset folder holds the CSV"):
            own_data.register_dataset(folder)
    finally:                                              # the scheme was registered before the files were read
        for table, before in zip(tables, saved, strict=True):
            table.clear()
            table.update(before)


def test_the_sweeps_last_faults_are_refused_in_one_line(runs, tmp_path, capsys, monkeypatch):
    """The third pass's own sweep: kept epochs that are not the selected ones, ABSA_KEEP_LAST=no, an
    export missing a file, one shared seed, a filter that matches nothing, a data file that is a folder,
    --export onto a file, a folder given as a profile."""
    from absa_lib.cli import main
    from absa_lib.data.download import verify
    from absa_lib.reports.model_card import export_run
    from absa_lib.training import runs as R

    source = runs["qacg-bert", 7].path
    copy = tmp_path / "edited" / source.name
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("checkpoints"))
    metrics = json.loads((copy / "metrics.json").read_text())
    others = [e for e in range(1, 4) if e != metrics["predictions"]["epochs"]["dev"][0]]
    metrics["predictions"]["epochs"]["dev"] = others[:1]                 # an epoch the selection does not choose
    (copy / "metrics.json").write_text(json.dumps(metrics))
    with pytest.raises(AbsaError, match=r"its kept predictions are of epochs .*but its selections are dev epoch"):
        load_run(copy)

    with pytest.raises(AbsaError, match=r"^ABSA_KEEP_LAST='no': expected 1"):
        R.Launch.from_environ({"ABSA_KEEP_LAST": "no"})

    folder = export_run(runs["bert-pair", 7], tmp_path / "export")
    recorded = json.loads((folder / "absa_export.json").read_text())["sha256"]
    victim = next(n for n in sorted(recorded) if n.startswith("tokenizer") or n == "vocab.txt")
    (folder / victim).unlink()                            # read before the weights: named, not a tokenizer error
    assert main(["predict", "--run", str(folder), "The pasta was great"]) == 2
    assert f"{victim}: missing (its sha256 is recorded in absa_export.json); export the run again" in \
        capsys.readouterr().err

    with pytest.raises(AbsaError, match=r"A and B share 1 seed \(7\); a comparison over seeds needs two or more"):
        compare([runs["qacg-bert", 7]], [runs["bert-pair", 7]])
    parent = runs["qacg-bert", 7].path.parents[2]
    assert main(["compare", str(parent), str(parent), "--a-filter", "model=qacg-bertx", "--b-filter",
                 "model=bert-pair"]) == 2
    assert "A: no finished run under" in (err := capsys.readouterr().err) and "matching model=qacg-bertx" in err

    data = tmp_path / "data"
    shutil.copytree(__import__("os").environ["ABSA_DATA_DIR"], data)
    (data / "semeval2014" / "Restaurants_Train.xml").unlink()
    (data / "semeval2014" / "Restaurants_Train.xml").mkdir()
    with pytest.raises(AbsaError, match=r"Restaurants_Train.xml is a folder, not the file"):
        verify(data)

    (tmp_path / "afile").write_text("x")
    assert main(["grid", "--profile", "smoke", "--export", str(tmp_path / "afile")]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err
    assert main(["grid", "--profile", str(tmp_path), "--list"]) == 2
    assert f"{tmp_path}: a folder; give a profile's name" in capsys.readouterr().err
