"""A record, a checkpoint and a copy are bound to their run: what lies in a run's folder is used only
when it says it is that run's (the silently wrong answers of a fault sweep, each now one line)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from absa_lib.apply import predictions_csv, spreadsheet_safe
from absa_lib.errors import AbsaError
from absa_lib.fileio import read_json
from absa_lib.training.checkpoint import CHECKSUMS, IDENTITY
from absa_lib.training.loop import train
from absa_lib.training.records import load_run

pytestmark = pytest.mark.usefixtures("real_data_dir")


@pytest.fixture
def two(tiny_run) -> tuple[Path, Path]:
    """Two finished tiny runs of the session (conftest: seeds 3 and 4, the second of two epochs), each with
    its resume state, as a run killed after its last epoch leaves it: never changed by the tests."""
    return tiny_run(), tiny_run(seed=4, epochs=2)


@pytest.fixture
def runs(two, tmp_path) -> tuple[Path, Path, Path]:
    """A copy of both runs in one runs folder: (its root, run A, run B)."""
    for path in two:
        shutil.copytree(path.parents[2], tmp_path / "runs", dirs_exist_ok=True)
    return tmp_path / "runs", *(tmp_path / "runs" / p.relative_to(p.parents[2]) for p in two)


def test_a_backup_copy_in_the_runs_folder_is_not_a_second_seed(runs, refused):
    root, a, _ = runs
    shutil.copytree(a, a.with_name(a.name + ".bak"))
    refused(["summary", str(root)], f"{a}.bak: the folder of run {a.name}", f"name it {a.name}")
    with pytest.raises(AbsaError, match="under another name"):
        load_run(a.with_name(a.name + ".bak"))


def test_another_runs_record_under_this_runs_id_is_not_a_cache_hit(runs, tiny_argv, refused):
    root, a, b = runs
    shutil.rmtree(a)
    shutil.copytree(b, a)                          # B's files in A's folder
    refused(["train", *tiny_argv, "--out", str(root)], str(a), f"the folder of run {b.name}")


def test_a_checkpoint_of_another_run_or_epoch_is_refused(runs, review, refused, edit_json, rewrite_checksums):
    root, a, b = runs
    best = a / "checkpoints" / "best"
    shutil.rmtree(best)
    shutil.copytree(b / "checkpoints" / "best", best)          # another run's dev-best, its checksums intact
    refused(["predict", "--run", str(a), review], f"{best}: holds run {b.name}", f"expected run {a.name}")
    chosen = load_run(b).selected("dev_best")["epoch"]        # a checkpoint of B's other epoch as its best
    edit_json(b / "checkpoints" / "best" / IDENTITY, lambda held: {**held, "epoch": 3 - chosen})
    rewrite_checksums(b / "checkpoints" / "best")
    refused(["predict", "--run", str(b), review], f"after epoch {3 - chosen}", f"after epoch {chosen}")


def test_a_link_for_a_checkpoint_is_refused(runs, review, refused):
    root, a, b = runs
    best = a / "checkpoints" / "best"
    shutil.rmtree(best)
    best.symlink_to(b / "checkpoints" / "best", target_is_directory=True)
    refused(["predict", "--run", str(a), review], f"{best}: a link to")


def test_resuming_from_another_runs_state_is_refused(runs, tiny_argv, refused, edit_json, rewrite_checksums):
    root, a, b = runs
    metrics = read_json(b / "metrics.json")
    edit_json(b / "metrics.json", lambda m: {**m, "complete": False})   # B killed after its last epoch
    last = b / "checkpoints" / "last"
    identity = read_json(last / IDENTITY)
    (last / IDENTITY).write_text(json.dumps({**identity, "run_id": a.name}))
    rewrite_checksums(last)
    argv = ["train", *tiny_argv[:tiny_argv.index("--seed")], "--seed", "4", "--epochs", "2", *tiny_argv[tiny_argv.index("--epochs") + 2:]]
    refused([*argv, "--out", str(root)], f"{last}: holds run {a.name}", f"expected run {b.name}", "--force")
    assert metrics["complete"] is True


@pytest.mark.parametrize("name", ["/dev/zero", "../../config.json", "../../../../../etc/passwd", ".hidden"])
def test_checksums_name_only_the_folders_own_files(runs, name, review, refused, edit_json):
    _, a, _ = runs
    best = a / "checkpoints" / "best"
    edit_json(best / CHECKSUMS, lambda sums: {**sums, name: "0" * 64})
    refused(["predict", "--run", str(a), review], f"{name!r} is not a file of this folder")


def test_a_checkpoint_without_checksums_or_without_its_run_is_refused(runs, review, refused, rewrite_checksums):
    _, a, _ = runs
    best = a / "checkpoints" / "best"
    (best / IDENTITY).unlink()
    rewrite_checksums(best)
    refused(["predict", "--run", str(a), review], f"no {IDENTITY}")
    (best / CHECKSUMS).unlink()
    refused(["predict", "--run", str(a), review], f"no {CHECKSUMS}")


def test_non_finite_probabilities_are_refused_not_printed(runs, monkeypatch, review):
    from absa_lib import apply

    _, a, _ = runs
    monkeypatch.setattr(apply, "predict_probs", lambda *args, **kw: np.full((8, 3), np.nan))
    with pytest.raises(AbsaError, match="non-finite probabilities"):
        apply.predict_text(load_run(a), review)


@pytest.mark.parametrize("change,needle", [
    (lambda m: {**m, "epochs": m["epochs"][:1]}, "epochs [1] recorded, expected 1 to 2"),
    (lambda m: {**m, "epochs": [m["epochs"][0], {**m["epochs"][1], "epoch": 1}]}, "epochs [1, 1] recorded"),
])
def test_the_epochs_of_a_record_are_the_configs(runs, change, needle, refused, edit_json):
    from absa_lib.training.records import select_epochs

    root, _, b = runs

    def edit(m):
        m = change(m)
        return {**m, "selection": select_epochs(m["epochs"], m["selection_metric"])}   # consistent otherwise
    edit_json(b / "metrics.json", edit)
    refused(["summary", str(root)], str(b / "metrics.json"), needle)


def test_a_refused_training_leaves_no_folder_behind(tmp_path, monkeypatch, tiny_config):
    from absa_lib.training import loop

    def missing(*args, **kw):
        raise AbsaError("sentihood-train.json: missing")
    monkeypatch.setattr(loop, "prepare_split", missing)
    with pytest.raises(AbsaError, match="missing"):
        train(tiny_config(seed=9), runs_dir=tmp_path, progress=False)
    assert not list(tmp_path.glob("*/*/*")), list(tmp_path.rglob("*"))


def test_json_nested_thousands_deep_is_one_line(runs, review, refused):
    _, a, _ = runs
    (a / "metrics.json").write_text("[" * 5000 + "]" * 5000)
    refused(["predict", "--run", str(a), review], "nested too deep")


def test_prediction_files_do_not_carry_formulas_into_a_spreadsheet():
    assert [spreadsheet_safe(t) for t in ("=HYPERLINK(\"x\")", "+1", "-2", "@SUM(A1)", "\tx", "fine = ok")] == [
        "'=HYPERLINK(\"x\")", "'+1", "'-2", "'@SUM(A1)", "'\tx", "fine = ok"]
    results = [{"text": "=HYPERLINK(\"http://x\",\"y\")", "truncated": False,
                "predictions": [{"target": "LOCATION1", "aspect": "price", "label": "None",
                                 "probabilities": {"None": 1.0, "Positive": 0.0, "Negative": 0.0}}]}]
    text = predictions_csv("sentihood", results, [1])
    assert "'=HYPERLINK" in text and ",=HYPERLINK" not in text


def test_own_data_faults_are_one_line_each(tmp_path, fixtures_dir):
    from absa_lib.data.own_data import register_dataset, scheme_from_dict

    folder = tmp_path / "phones"
    shutil.copytree(fixtures_dir / "own_data" / "phones", folder)
    with open(folder / "train.csv", "a", encoding="utf-8") as f:          # one field of 200 KB, no quote at all
        f.write("x" * 200_000 + "\n")
    with pytest.raises(AbsaError, match="a field longer than 131,072 characters") as err:
        register_dataset(folder)
    assert "quote" not in str(err.value)
    with pytest.raises(AbsaError, match="without surrounding spaces or line breaks") as err:
        scheme_from_dict({"name": "x", "aspects": ["a"], "sentiments": ["pos\nitive"]}, "dataset.json")
    assert "\n" not in str(err.value)
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    with pytest.raises(AbsaError, match="cannot be followed to a folder"):
        register_dataset(loop)


def test_exporting_over_a_differing_record_of_the_same_run_is_refused(runs, tmp_path):
    from absa_lib.harness.grid import export_records

    _, a, _ = runs
    dest = tmp_path / "reference"
    export_records([load_run(a)], dest)
    held = dest / "runs" / "sentihood" / "qacg-bert" / a.name / "env.json"
    held.write_text(json.dumps({**read_json(held), "gpu": "NVIDIA H200"}))       # the same run, trained elsewhere
    before = held.read_bytes()
    with pytest.raises(AbsaError, match=f"already holds run {a.name} with another env.json"):
        export_records([load_run(a)], dest)
    assert held.read_bytes() == before
    assert export_records([load_run(a)], dest, replace=True) and held.read_bytes() != before


def test_a_busy_run_is_named_from_its_error_line_not_the_logs_last_line(tmp_path):
    from absa_lib.harness.runner import _refusal

    log = tmp_path / "run.log"
    log.write_text('{\n  "run": "x"\n}\nabsa: error: runs/x: another process is training this run (pid 7)\n{\n}\n')
    assert _refusal(str(log), tmp_path) == "runs/x: another process is training this run (pid 7)"
    log.write_text('{\n  "run": "x"\n}\n')                  # no error line at all: the exit status says it
    assert _refusal(str(log), tmp_path) == f"{tmp_path}: another process is training this run"


def test_a_profile_nested_thousands_deep_is_one_line(tmp_path):
    from absa_lib.harness.profiles import read_profile_file

    path = tmp_path / "deep.yaml"
    path.write_text("[" * 5000 + "]" * 5000)
    with pytest.raises(AbsaError, match="YAML nested too deep to be a profile"):
        read_profile_file(path)
