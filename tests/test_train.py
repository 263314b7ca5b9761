"""Training, run records, cache and resume on the tiny backbone with a few dozen real examples."""

from __future__ import annotations

import itertools
import json
from functools import partial

import numpy as np
import pytest

from absa_lib.cli import main
from absa_lib.data import features
from absa_lib.errors import AbsaError
from absa_lib.evaluation import inference
from absa_lib.reports.plots import save_run_curve
from absa_lib.training import config as run_config
from absa_lib.training import loop as training
from absa_lib.training import optim, runs, splits
from absa_lib.training.records import RunFolder, load_run, write_env
from absa_lib.training.records.layout import LOCK
from absa_lib.training.records.upgrade import config_identity

pytestmark = pytest.mark.usefixtures("real_data_dir")


@pytest.fixture(scope="module")
def small(tiny_config):
    """``small(**changes)``: this file's runs, the tiny run (conftest) of 48 examples in batches of 8 for two
    epochs, seed 7."""
    return partial(tiny_config, seed=7, epochs=2, batch_size=8, max_train_examples=48, max_eval_examples=40)


@pytest.fixture(scope="module")
def first_run(tmp_path_factory, small):
    run = training.train(small(), runs_dir=tmp_path_factory.mktemp("runs"), progress=False)
    save_run_curve(run)                                      # as `absa train` and the grid do
    return run


def test_run_writes_every_record(first_run):
    p = first_run.path
    for name in ("config.json", "metrics.json", "env.json", "predictions_dev.csv",
                 "predictions_test.csv", "curve.png"):
        assert (p / name).is_file(), name
    assert (p / "checkpoints" / "best" / "model.safetensors").is_file()
    assert not list((p / "checkpoints" / "best").glob("*.bin"))
    assert not (p / "checkpoints" / "last").exists()         # finished: nothing resumes it, the resume state goes
    assert not first_run.cached
    m = json.loads((p / "metrics.json").read_text())
    assert m["complete"] is True and [r["epoch"] for r in m["epochs"]] == [1, 2]
    assert set(m["selection"]) == {"dev_best", "test_best", "last"}
    for row in m["epochs"]:
        assert 0.0 <= row["dev"]["aspect_strict_acc"] <= 1.0 and row["train_loss"] > 0
        assert "startup_seconds" not in row          # trained in this process, not launched by a grid
        assert row["runs_training"] == 1             # alone in its runs folder
    assert "process_seconds" not in m
    best = m["selection"]["test_best"]
    assert best["test"]["aspect_strict_acc"] == max(r["test"]["aspect_strict_acc"] for r in m["epochs"])
    cfg = json.loads((p / "config.json").read_text())
    assert cfg["run_id"] == p.name and cfg["n_train_examples"] == 48 and cfg["n_dev_examples"] == 40
    env = json.loads((p / "env.json").read_text())
    assert env["device"] == "cpu" and env["torch"]
    from absa_lib.device import cpu_has_native_bf16  # what "auto" meant here, and which CPU it was
    assert env["cpu_native_bf16"] is cpu_has_native_bf16() and env["cpu_model"] == runs.cpu_model()


def test_each_epoch_records_how_many_runs_of_its_folder_were_training(tmp_path, small):
    """Another run's lock held (a process training it) counts; a lock file nobody holds (a finished
    run) does not."""
    from absa_lib.fileio import exclusive_lock

    busy, idle = tmp_path / "semeval" / "bert-pair" / "0123456789ab", tmp_path / "sentihood" / "cg-bert" / "ba9876543210"
    for folder in (busy, idle):
        folder.mkdir(parents=True)
    (idle / LOCK).write_text("")
    with exclusive_lock(busy / LOCK, busy="training"):
        run = training.train(small(epochs=1, seed=11), runs_dir=tmp_path, progress=False)
    assert [row["runs_training"] for row in run.metrics.epochs] == [2]


def test_repeat_is_a_cache_hit(first_run, small):
    again = training.train(small(), runs_dir=first_run.path.parents[2], progress=False)
    assert again.cached and again.path == first_run.path and again.metrics == first_run.metrics


def test_any_result_affecting_field_changes_the_run_id(small):
    base = run_config.config_hash(run_config.run_identity(small()))
    for change in (dict(seed=8), dict(lr=3e-5), dict(preset="official"), dict(aux="QA-M"),
                   dict(sampler="balanced"), dict(model_overrides={"quasi": False})):
        assert run_config.config_hash(run_config.run_identity(small(**change))) != base, change


def timeless(metrics) -> list[dict]:
    """The epoch rows without their timings, which differ from one training to the next."""
    return [{k: v for k, v in r.items() if k not in ("seconds", "eval_seconds")} for r in metrics.epochs]


def interrupted_in_epoch_two(small, runs_dir, monkeypatch) -> None:
    """Train small() into ``runs_dir`` and stop it (KeyboardInterrupt) in epoch 2's evaluation."""
    calls = {"n": 0}
    real = inference.predict_probs

    def dies_in_epoch_two(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:                       # epoch 1 evaluated dev+test; die in epoch 2
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(training, "predict_probs", dies_in_epoch_two)
    with pytest.raises(KeyboardInterrupt):
        training.train(small(), runs_dir=runs_dir, progress=False)
    monkeypatch.setattr(training, "predict_probs", real)


def test_same_seed_same_metrics_and_resume_after_interruption(first_run, tmp_path, monkeypatch, capsys, small):
    interrupted_in_epoch_two(small, tmp_path, monkeypatch)
    run_dir = tmp_path / "sentihood" / "qacg-bert" / first_run.run_id
    with pytest.raises(AbsaError, match="did not finish"):
        load_run(run_dir)
    interrupted_epoch1 = json.loads((run_dir / "metrics.json").read_text())["epochs"][0]
    first_env = json.loads((run_dir / "env.json").read_text())
    assert first_env["from_epoch"] == 1 and "earlier" not in first_env
    (run_dir / "env.json").write_text(json.dumps({**first_env, "cpu_model": "the first session's CPU"}))
    capsys.readouterr()
    resumed = training.train(small(), runs_dir=tmp_path, progress=True)
    assert not resumed.cached and "resuming" in capsys.readouterr().err
    assert resumed.metrics.epochs[0] == interrupted_epoch1   # epoch 1 was not trained again
    env = resumed.env.record                           # each machine that trained a kept epoch is named
    assert env["from_epoch"] == 2 and env["cpu_model"] == runs.cpu_model()
    assert [(e["from_epoch"], e["cpu_model"]) for e in env["earlier"]] == [(1, "the first session's CPU")]
    assert timeless(resumed.metrics) == timeless(first_run.metrics)
    a = np.loadtxt(first_run.path / "predictions_test.csv", delimiter=",", skiprows=1, usecols=(4, 5, 6))
    b = np.loadtxt(resumed.path / "predictions_test.csv", delimiter=",", skiprows=1, usecols=(4, 5, 6))
    np.testing.assert_array_equal(a, b)


def dies_at_step(monkeypatch, step: int) -> dict:
    """Training stops (KeyboardInterrupt) at its ``step``-th batch; the count, ``{"n": ...}``, is returned
    so that a test can move it past ``step`` for the resumed run."""
    calls, real = {"n": 0}, training._step_loss

    def dies(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == step:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(training, "_step_loss", dies)
    return calls


def test_an_epoch_interrupted_midway_resumes_at_its_batch_and_ends_as_an_uninterrupted_run(
        first_run, tmp_path, monkeypatch, capsys, small):
    """With the resume state saved inside the epoch (here after every batch), a run killed in epoch 2's
    third batch resumes at that batch and writes the records an uninterrupted run writes."""
    every_batch = runs.Launch(checkpoint_seconds=0)
    per_epoch = len(splits.epoch_batches(small(), [None] * first_run.config["n_train_inputs"], 1))
    calls = dies_at_step(monkeypatch, per_epoch + 3)
    with pytest.raises(KeyboardInterrupt):
        training.train(small(), runs_dir=tmp_path, progress=False, launch=every_batch)
    last = tmp_path / "sentihood" / "qacg-bert" / first_run.run_id / "checkpoints" / "last"
    assert json.loads((last / "trainer_state.json").read_text())["partial"]["batches"] == 2
    calls["n"] = -10**6                                 # counts the resumed run's steps from here
    capsys.readouterr()
    resumed = training.train(small(), runs_dir=tmp_path, progress=True, launch=every_batch)
    err = capsys.readouterr().err
    assert "after epoch 1 and batch 2 of epoch 2" in err and "examples/s" in err
    assert calls["n"] + 10**6 == per_epoch - 2          # epoch 1 and epoch 2's first two batches were not redone
    assert timeless(resumed.metrics) == timeless(first_run.metrics)
    assert not last.exists()                            # finished: the resume state is gone


def test_fp16_steps_through_the_loss_scaler_and_a_resume_restores_its_scale(tmp_path, monkeypatch, small):
    """fp16 (what ``auto`` picks on a T4): a scale so large that the first gradients overflow makes the
    scaler skip those steps and halve the scale; the scale is part of the resume state, and a run stopped
    inside epoch 2 resumes to the records of the run that was not stopped."""
    import torch

    huge = 2.0 ** 20                                 # the first four steps overflow, the next eight train
    monkeypatch.setattr(training, "grad_scaler", lambda device, precision: torch.amp.GradScaler(
        device.type, init_scale=huge, enabled=precision == "fp16"))
    config = small(precision="fp16")
    whole = training.train(config, runs_dir=tmp_path / "whole", progress=False, launch=runs.Launch(keep_last=True))
    state = json.loads((whole.path / "checkpoints" / "last" / "trainer_state.json").read_text())
    assert whole.config.precision == "fp16" and state["grad_scaler"]["scale"] < huge   # overflowed steps halved it
    assert all(np.isfinite(row["train_loss"]) for row in whole.metrics.epochs)

    every_batch = runs.Launch(checkpoint_seconds=0)
    per_epoch = len(splits.epoch_batches(config, [None] * whole.config.n_train_inputs, 1))
    calls = dies_at_step(monkeypatch, per_epoch + 3)                # epoch 2's third batch
    with pytest.raises(KeyboardInterrupt):
        training.train(config, runs_dir=tmp_path / "stopped", progress=False, launch=every_batch)
    last = tmp_path / "stopped" / "sentihood" / "qacg-bert" / whole.run_id / "checkpoints" / "last"
    saved = json.loads((last / "trainer_state.json").read_text())["grad_scaler"]
    assert saved["scale"] < huge
    calls["n"] = -10**6
    resumed = training.train(config, runs_dir=tmp_path / "stopped", progress=False, launch=every_batch)
    assert timeless(resumed.metrics) == timeless(whole.metrics)


def test_the_seconds_between_saves_inside_an_epoch_are_checked():
    assert runs.Launch.from_environ({"ABSA_CHECKPOINT_SECONDS": "60"}).checkpoint_seconds == 60
    for bad in ("-1", "soon", "nan"):
        with pytest.raises(AbsaError, match=r"^ABSA_CHECKPOINT_SECONDS="):
            runs.Launch.from_environ({"ABSA_CHECKPOINT_SECONDS": bad})


def test_a_resume_keeps_the_environments_of_the_starts_that_trained_a_kept_epoch(tmp_path):
    """Started on machine A (epochs 1-8), resumed on B (cut off in epoch 9), resumed again after epoch 8:
    A is kept, B trained nothing that is kept; a run trained from the start keeps none."""
    folder = RunFolder(tmp_path)
    previous = {"cpu_model": "B", "from_epoch": 9, "earlier": [{"cpu_model": "A"}]}   # older records lack from_epoch
    folder.env.write_text(json.dumps(previous))
    write_env(folder, {"cpu_model": "C"}, resumed_after=8)
    env = json.loads(folder.env.read_text())
    assert env["from_epoch"] == 9 and [e["cpu_model"] for e in env["earlier"]] == ["A"]
    folder.env.write_text(json.dumps(previous))
    write_env(folder, {"cpu_model": "C"}, resumed_after=0)
    assert "earlier" not in json.loads(folder.env.read_text())
    for bad in ("[]", '{"earlier": 3}', '{"earlier": ["A"]}'):
        folder.env.write_text(bad)
        with pytest.raises(AbsaError, match=r"env.json: expected a JSON object whose 'earlier' is a list of "
                                            r"objects; delete it"):
            write_env(folder, {"cpu_model": "C"}, resumed_after=8)


def test_without_resume_state_a_run_is_the_same_and_an_earlier_resume_state_is_used_then_dropped(
        first_run, tmp_path, monkeypatch, capsys, small):
    interrupted_in_epoch_two(small, tmp_path, monkeypatch)    # with the resume state on
    last = tmp_path / "sentihood" / "qacg-bert" / first_run.run_id / "checkpoints" / "last"
    assert (last / "model.safetensors").is_file()
    monkeypatch.setenv("ABSA_RESUME_STATE", "0")
    no_resume_state = runs.Launch.from_environ()            # as `absa train` and the grid read it
    capsys.readouterr()
    run = training.train(small(), runs_dir=tmp_path, progress=True, launch=no_resume_state)
    assert "resuming" in capsys.readouterr().err and not last.exists()
    assert (run.path / "checkpoints" / "best" / "model.safetensors").is_file()
    assert run.run_id == first_run.run_id and timeless(run.metrics) == timeless(first_run.metrics)
    other = training.train(small(seed=8), runs_dir=tmp_path, progress=False, launch=no_resume_state)  # from the start
    assert not (other.path / "checkpoints" / "last").exists()
    monkeypatch.setenv("ABSA_RESUME_STATE", "no")
    with pytest.raises(AbsaError, match=r"^ABSA_RESUME_STATE='no': expected 1 \(save the resume state"):
        training.train(small(seed=9), runs_dir=tmp_path, progress=False, launch=runs.Launch.from_environ())
    assert not (tmp_path / "sentihood" / "qacg-bert").joinpath(
        run_config.config_hash(run_config.run_identity(small(seed=9)))).exists()


def test_lr_schedule_warms_up_then_decays_to_zero():
    f = [optim.lr_factor(s, 100, 0.1) for s in range(100)]
    assert f[0] == pytest.approx(0.1) and f[9] == pytest.approx(1.0)
    assert f[10] == pytest.approx(1.0) and f[55] == pytest.approx(0.5) and f[-1] == pytest.approx(1 / 90)
    assert all(a >= b for a, b in itertools.pairwise(f[9:]))


def test_balanced_sampler_equalises_classes(small):
    enc = [features.Encoded([1], [0], 0, label) for label in [0] * 90 + [1] * 9 + [2] * 1]
    order = sum(splits.epoch_batches(small(sampler="balanced"), enc, epoch=1) + splits.epoch_batches(
        small(sampler="balanced", seed=8), enc, epoch=1), [])
    counts = np.bincount([enc[i].label for i in order], minlength=3) / len(order)
    assert np.allclose(counts, 1 / 3, atol=0.1)
    uniform = sum(splits.epoch_batches(small(), enc, epoch=1), [])
    assert sorted(uniform) == list(range(100))


def test_per_context_batches_hold_one_context_each_and_every_input_once(small):
    enc = [features.Encoded([1] * (1 + i % 7), [0] * (1 + i % 7), i % 5, i % 3) for i in range(103)]
    for grouped in (False, True):
        config = small(model="bert-single", aux="single", sampler="per-context", group_by_length=grouped)
        epoch = splits.epoch_batches(config, enc, epoch=1)
        assert sorted(i for b in epoch for i in b) == list(range(103))
        contexts = [{enc[i].context_id for i in b} for b in epoch]
        assert all(len(c) == 1 for c in contexts)
        first = [c.pop() for c in contexts]
        for c in range(5):                       # 20 or 21 inputs per context: batches of 8, 8 and the rest
            sizes = sorted(len(b) for b, k in zip(epoch, first, strict=True) if k == c)
            assert sizes in ([4, 8, 8], [5, 8, 8])
        assert first != sorted(first)            # the contexts' batches are shuffled together
        assert epoch == splits.epoch_batches(config, enc, epoch=1)   # seeded: a resumed run draws the same
        assert epoch != splits.epoch_batches(config, enc, epoch=2)
    mixed = splits.epoch_batches(small(model="bert-single", aux="single"), enc, epoch=1)
    assert any(len({enc[i].context_id for i in b}) > 1 for b in mixed)


@pytest.mark.parametrize("field,value,needle", [
    ("dataset", "yelp", "dataset='yelp'"), ("model", "gpt", "model='gpt'"), ("aux", "XYZ", "aux='XYZ'"),
    ("sampler", "random", "sampler='random'"), ("epochs", 0, "epochs must be"),
    ("sampler", "per-context", "sampler='per-context' batches each context apart for the per-context classifiers of bert-single"),
])
def test_bad_config_is_a_clear_error(field, value, needle, small):
    with pytest.raises(AbsaError, match=needle.replace("(", r"\(")):
        small(**{field: value})


def test_cli_train_prints_where_the_run_lives(first_run, capsys):
    runs_dir = first_run.path.parents[2]
    rc = main(["train", "--dataset", "sentihood", "--model", "qacg-bert", "--backbone", "tiny",
               "--seed", "7", "--epochs", "2", "--batch-size", "8", "--max-length", "48",
               "--max-train-examples", "48", "--max-eval-examples", "40", "--eval-batch-size", "32",
               "--out", str(runs_dir), "--quiet"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["run"] == str(first_run.path) and out["cached"] is True
    undefined_as_null = {k: None if v != v else v for k, v in first_run.selected("dev_best")["test"].items()}
    assert out["dev_best"]["test"] == undefined_as_null                   # valid JSON: NaN is printed as null
    assert out["test_best (official protocol: selected on test)"]["epoch"] in (1, 2)


def test_cli_train_bad_argument(capsys):
    rc = main(["train", "--dataset", "sentihood", "--model", "bert-pair", "--aux", "none", "--backbone", "tiny"])
    assert rc == 2 and "auxiliary sentence" in capsys.readouterr().err


def test_the_summary_scores_the_trivial_rows_on_the_runs_test_examples(first_run, real_data_dir):
    from absa_lib.data import datasets as data
    from absa_lib.reports.summary import summarize

    text, frame = summarize(first_run.path.parent.parent.parent, ("dev_best",), data_dir=real_data_dir)
    assert "scored on the same first part of the test set (max_eval_examples 40)" in text
    gold = [e.label for e in data.load_examples("sentihood", "test", real_data_dir)[:40]]
    none = frame[frame["row"] == "All-None (trivial)"].iloc[0]
    expected = sum(gold[i:i + 4] == ["None"] * 4 for i in range(0, 40, 4)) / 10
    assert none["aspect_strict_acc"] == pytest.approx(100 * expected)


def test_predict_every_target_and_aspect(first_run, capsys):
    rc = main(["predict", "--run", str(first_run.path), "LOCATION1 is cheap but LOCATION2 is not safe"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["truncated"] is False
    rows = out["predictions"]
    assert [(r["target"], r["aspect"]) for r in rows] == [
        (t, a) for t in ("LOCATION1", "LOCATION2") for a in ("general", "price", "safety", "transit-location")]
    for r in rows:
        assert sum(r["probabilities"].values()) == pytest.approx(1.0, abs=1e-5)
        assert r["label"] == max(r["probabilities"], key=r["probabilities"].get)
    only = main(["predict", "--run", str(first_run.path), "LOCATION1 or LOCATION2", "--targets", "LOCATION2"])
    assert only == 0 and {r["target"] for r in json.loads(capsys.readouterr().out)["predictions"]} == {"LOCATION2"}


@pytest.mark.parametrize("text,extra,needle", [
    ("the area is lovely", [], "LOCATION1"),
    ("   ", [], "empty"),
    ("LOCATION1 is nice", ["--targets", "LOCATION2"], "does not occur"),
    ("LOCATION1 " + "very " * 80 + "nice", [], "longer than the model's limit"),
])
def test_predict_bad_text_is_a_clear_error(first_run, capsys, text, extra, needle):
    rc = main(["predict", "--run", str(first_run.path), text, *extra])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and "Traceback" not in err


def test_predict_can_truncate_and_says_so(first_run):
    from absa_lib.apply import predict_text

    out = predict_text(first_run.path, "LOCATION1 " + "very " * 80 + "nice", truncate=True)
    assert out["truncated"] is True and len(out["predictions"]) == 4


def test_predict_a_file_of_sentences_as_csv(first_run, tmp_path, capsys):
    """Each non-blank line is predicted as the single-sentence command predicts it (same labels and
    probabilities), and the CSV names the line it came from."""
    import csv

    from absa_lib.apply import predict_text

    lines = ["LOCATION1 is cheap but LOCATION2 is not safe", "", "LOCATION2 has great transport  "]
    (tmp_path / "reviews.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "preds.csv"
    assert main(["predict", "--run", str(first_run.path), "--file", str(tmp_path / "reviews.txt"),
                 "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert [(r["line"], r["target"]) for r in rows] == [("1", "LOCATION1")] * 4 + [("1", "LOCATION2")] * 4 + [
        ("3", "LOCATION2")] * 4
    for line, text in ((1, lines[0]), (3, lines[2])):
        alone = predict_text(first_run.path, text)["predictions"]
        mine = [r for r in rows if r["line"] == str(line)]
        assert [r["label"] for r in mine] == [a["label"] for a in alone]
        for r, a in zip(mine, alone, strict=True):
            assert r["text"] == text.strip() and r["truncated"] == "0"
            for lab, v in a["probabilities"].items():
                assert float(r[f"p_{lab.lower()}"]) == pytest.approx(v, abs=1e-6)
    assert "2 sentences, 12 predictions" in capsys.readouterr().err


def test_sentences_are_read_line_by_line_whatever_the_line_ends(tmp_path):
    from absa_lib.apply import read_sentences

    for end in ("\n", "\r\n", "\r"):                  # a file with old Mac line ends was one long sentence
        path = tmp_path / "r.txt"
        path.write_bytes(f"\ufeffLOCATION1 is nice{end}{end}LOCATION2 is not{end}".encode())
        assert read_sentences(path) == [(1, "LOCATION1 is nice"), (3, "LOCATION2 is not")], repr(end)


@pytest.mark.parametrize("content,extra,needle", [
    (b"LOCATION1 is nice\nthe area is lovely\n", [], "reviews.txt: line 2: a SentiHood model needs"),
    (b"LOCATION1 is nice\nLOCATION1 \xff\n", [], "reviews.txt: line 2: not UTF-8 text (byte 0xff)"),
    (b"\n  \n", [], "no sentence in the file"),
    (b"LOCATION1 is nice\n" + b"LOCATION1 " + b"very " * 80 + b"\n", [], "line 2: the text is longer"),
    (b"LOCATION1 is nice\n", ["LOCATION1 is nice"], "not both or neither"),
])
def test_predict_a_bad_file_is_one_line_naming_the_line(first_run, tmp_path, capsys, content, extra, needle):
    path = tmp_path / "reviews.txt"
    path.write_bytes(content)
    out = tmp_path / "preds.csv"
    rc = main(["predict", "--run", str(first_run.path), "--file", str(path), "--out", str(out), *extra])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_predict_reads_standard_input_and_writes_standard_output(first_run, monkeypatch, capsys):
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"LOCATION2 is safe\n")))
    assert main(["predict", "--run", str(first_run.path), "--file", "-"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("line,target,aspect,label,p_none,") and len(lines) == 1 + 4
    assert all(line.startswith("1,LOCATION2,") for line in lines[1:])


def test_predict_masks_named_locations_as_the_dataset_does(first_run, tmp_path, capsys):
    import csv

    from absa_lib.apply import mask_locations, predict_text

    assert mask_locations("camden is nicer than Camden  Town or Brixton's market, said Camdenite",
                          ["camden", "Camden Town"]) == (
        "LOCATION1 is nicer than LOCATION2 or Brixton's market, said Camdenite",
        {"LOCATION1": "camden", "LOCATION2": "Camden Town"})
    # numbered per sentence: a sentence naming only the second place calls it LOCATION1, as SentiHood does
    assert mask_locations("BRIXTON is safe", ["Camden", "Brixton"]) == (
        "LOCATION1 is safe", {"LOCATION1": "Brixton"})
    masked = predict_text(first_run.path, "LOCATION1 is cheap, LOCATION2 is not")
    named = predict_text(first_run.path, "Camden is cheap, brixton is not", locations=["camden", "Brixton"])
    assert named["text"] == "LOCATION1 is cheap, LOCATION2 is not"
    unnamed = [{k: v for k, v in r.items() if k != "location"} for r in named["predictions"]]
    assert unnamed == masked["predictions"]
    assert [r["location"] for r in named["predictions"]] == ["camden"] * 4 + ["Brixton"] * 4
    (tmp_path / "r.txt").write_text("Brixton is safe\n", encoding="utf-8")
    assert main(["predict", "--run", str(first_run.path), "--file", str(tmp_path / "r.txt"),
                 "--locations", "Camden", "Brixton", "--out", str(tmp_path / "r.csv")]) == 0
    rows = list(csv.DictReader((tmp_path / "r.csv").open(encoding="utf-8")))
    assert {(r["target"], r["location"], r["text"]) for r in rows} == {
        ("LOCATION1", "Brixton", "LOCATION1 is safe")}
    assert main(["predict", "--run", str(first_run.path), "Soho is cheap", "--locations", "Camden"]) == 2
    assert "none of the locations 'Camden' occurs in the text" in capsys.readouterr().err
    assert main(["predict", "--run", str(first_run.path), "Soho is cheap", "--locations", "Soho",
                 "--targets", "LOCATION1"]) == 2
    assert "give one of them" in capsys.readouterr().err
    # a text masked already: Soho would become a second LOCATION1 (or LOCATION2 a target with no place)
    for text in ("LOCATION1 is dearer than Soho", "Soho is dearer than LOCATION2"):
        assert main(["predict", "--run", str(first_run.path), text, "--locations", "Soho"]) == 2
        err = capsys.readouterr().err
        assert "the text already contains LOCATION" in err and "Traceback" not in err
    # the sentence after --locations is taken as a name: say so instead of only "give a sentence"
    assert main(["predict", "--run", str(first_run.path), "--locations", "Soho", "Soho is cheap"]) == 2
    assert "--locations takes several values, so give the sentence before them" in capsys.readouterr().err


@pytest.mark.parametrize("texts", [["Soho is cheap", "Camden is safe"], ["Soho", "is", "cheap"]])
def test_predict_given_several_texts_says_one_goes_as_an_argument_and_many_with_file(tmp_path, capsys, texts):
    """Two sentences, or one unquoted, were argparse's bare "unrecognized arguments" (issue 87)."""
    assert main(["predict", "--run", str(tmp_path / "no-run"), *texts]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "unrecognized" not in err, err
    assert f"takes one sentence, quoted, as its argument, got {len(texts)}" in err and "--file PATH" in err


def test_predict_texts_refuses_a_string_or_mismatched_names(first_run):
    from absa_lib.apply import predict_texts

    with pytest.raises(AbsaError, match="one string"):
        predict_texts(first_run.path, "LOCATION1 is nice")
    with pytest.raises(AbsaError, match="names has 1 entries for 2 texts"):
        predict_texts(first_run.path, ["LOCATION1 is nice", "LOCATION2 too"], names=["a"])
    with pytest.raises(AbsaError, match="text 2: a SentiHood model needs"):
        predict_texts(first_run.path, ["LOCATION1 is nice", "the area is nice"])
    with pytest.raises(AbsaError, match=r"LOCATION1 \(and LOCATION2, upper case\) .*\(or name the places with "
                                        r"--locations, e.g. --locations Camden Brixton\)$"):
        predict_texts(first_run.path, ["location1 is nice"])
    with pytest.raises(AbsaError, match=r"text 1: the text is empty; give a review sentence, e.g. \"LOCATION1"):
        predict_texts(first_run.path, ["  "])


def test_predict_out_needs_a_file(first_run, capsys):
    assert main(["predict", "--run", str(first_run.path), "LOCATION1 is nice", "--out", "x.csv"]) == 2
    assert "--out is for --file" in capsys.readouterr().err


def test_predict_on_a_missing_run(tmp_path, capsys):
    assert main(["predict", "--run", str(tmp_path), "LOCATION1 is nice"]) == 2
    assert "not a run folder" in capsys.readouterr().err


def test_bert_single_keeps_one_classifier_per_context(tmp_path, small):
    from absa_lib.models import AbsaModel, PerContextModel

    run = training.train(small(model="bert-single", aux="single", epochs=1), runs_dir=tmp_path, progress=False)
    model = AbsaModel.from_pretrained(run.path / "checkpoints" / "best")
    assert isinstance(model, PerContextModel) and len(model.models) == 8
    # each classifier only ever sees its own context: changing model 0 leaves context-1 outputs alone
    import torch

    batch = {"input_ids": torch.tensor([[2, 5, 6, 3], [2, 7, 8, 3]]), "attention_mask": torch.ones(2, 4, dtype=torch.long),
             "context_ids": torch.tensor([0, 1])}
    before = model(**batch).logits
    with torch.no_grad():
        model.models[0].classifier.bias.add_(1.0)
    after = model(**batch).logits
    assert not torch.allclose(before[0], after[0]) and torch.equal(before[1], after[1])


def test_public_api_is_importable_from_the_package():
    import absa_lib

    for name in absa_lib.__all__:
        assert getattr(absa_lib, name) is not None, name
    assert absa_lib.train is training.train and absa_lib.TrainConfig is run_config.TrainConfig
    with pytest.raises(AttributeError):
        absa_lib.fit  # noqa: B018


def test_a_glove_file_is_part_of_the_run_identity_by_its_contents(tmp_path, small):
    """Replacing the vector file under the same name makes a new run, never a stale cache hit; the
    record's identity (config_identity) is still the run id."""
    vectors = tmp_path / "glove.txt"
    cfg = small(model="atae-lstm", aux="none", model_overrides={"alstm_vectors": str(vectors)})
    vectors.write_text("the 0.1 0.2\nlocation1 0.3 0.4\n")
    first = run_config.run_identity(cfg)
    vectors.write_text("the 0.5 0.2\nlocation1 0.3 0.4\n")
    second = run_config.run_identity(cfg)
    assert first["vectors_sha256"] != second["vectors_sha256"]
    assert run_config.config_hash(first) != run_config.config_hash(second)
    assert "vectors_sha256" not in run_config.run_identity(small(model="atae-lstm", aux="none"))
    record = {**run_config.resolved(cfg).to_dict(), **{k: v for k, v in second.items() if k != "config"}}
    assert config_identity(record) == run_config.run_identity(run_config.resolved(cfg))
    vectors.unlink()
    with pytest.raises(AbsaError, match="alstm_vectors=.*glove.txt: no such file"):
        run_config.run_identity(cfg)


def test_the_resume_state_of_a_finished_run_is_kept_on_request(tmp_path, small):
    run = training.train(small(epochs=1, seed=12), runs_dir=tmp_path, progress=False, launch=runs.Launch(keep_last=True))
    assert (run.path / "checkpoints" / "last" / "trainer_state.safetensors").is_file()
    assert run.load_model("last") is not None
    assert runs.Launch.from_environ({"ABSA_KEEP_LAST": "1"}).keep_last and not runs.Launch.from_environ({}).keep_last
    gone = training.train(small(epochs=1, seed=13), runs_dir=tmp_path, progress=False)
    with pytest.raises(AbsaError, match="ABSA_KEEP_LAST=1"):
        gone.load_model("last")
    assert runs.folder_megabytes(gone.path) < runs.folder_megabytes(run.path)
