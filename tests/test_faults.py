"""Fault injection: every bad input or damaged file is refused with one line naming the
file, field or value and what was expected, with no traceback, and nothing left behind claims to be
complete; the faults that used to give silently wrong answers are refused. docs/bad_inputs.md lists
the cases. Runs on the tiny backbone with a few dozen real examples.
"""

from __future__ import annotations

import errno
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from absa_lib.apply import predict_text, predict_texts
from absa_lib.cli import main
from absa_lib.data import datasets as D
from absa_lib.errors import AbsaError, RunBusy
from absa_lib.fileio import atomic_write_json, exclusive_lock, lock_holder
from absa_lib.paths import repo_root
from absa_lib.training.checkpoint import CHECKSUMS
from absa_lib.training.loop import train
from absa_lib.training.records import find_runs

pytestmark = pytest.mark.usefixtures("real_data_dir")

ROOT = repo_root()
as_root = pytest.mark.skipif(os.geteuid() == 0, reason="root reads and writes whatever the permissions say")


def nothing_claims_complete(root: Path) -> None:
    for metrics in Path(root).rglob("metrics.json"):
        assert not json.loads(metrics.read_text()).get("complete"), metrics


def flip_byte(path: Path, offset: int = -100) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.fixture
def trained(tiny_run) -> Path:
    """The finished tiny run of the session (conftest), its resume state kept: copied, never changed, by the tests."""
    return tiny_run()


@pytest.fixture
def runs(trained, tmp_path) -> Path:
    """A copy of the runs folder holding the finished run."""
    shutil.copytree(trained.parents[2], tmp_path / "runs")
    return tmp_path / "runs"


@pytest.fixture
def run(runs, trained) -> Path:
    return runs / trained.relative_to(trained.parents[2])


# ---------------------------------------------------------------------------------------------- 1. run identity


@pytest.mark.parametrize("field,value", [("dataset", "semeval"), ("aux", "NLI-B"), ("model", "cg-bert")])
def test_an_edited_run_config_is_refused(run, field, value, review, refused, edit_json):
    edit_json(run / "config.json", lambda r: {**r, field: value})
    refused(["predict", "--run", str(run), review], str(run / "config.json"), "is not the hash",
            "--force")
    with pytest.raises(AbsaError, match="is not the hash"):          # rendering never uses it either
        find_runs(run.parents[2])


@pytest.mark.parametrize("record,needle", [({}, "got no run_id, dataset, model, aux, backbone"), ([], "got list"),
                                           ("epochs", "epochs must be a positive integer, got '1'")])
def test_a_run_config_that_is_not_a_record_is_refused(run, record, needle, review, refused):
    if record == "epochs":
        record = {**json.loads((run / "config.json").read_text()), "epochs": "1"}
    (run / "config.json").write_text(json.dumps(record))
    refused(["predict", "--run", str(run), review], str(run / "config.json"), needle)


def _set_selected_p(record: dict, value) -> dict:
    record["selection"]["dev_best"]["test"]["aspect_p"] = value
    return record


def _set_selected(record: dict, **fields) -> dict:
    record["selection"]["dev_best"].update(fields)
    return record


@pytest.mark.parametrize("change,needle", [
    (lambda r: _set_selected_p(r, 0.95), "the recorded dev_best selection is not what its epochs give"),
    (lambda r: _set_selected_p(r, "0.95"), "the recorded dev_best selection is not what its epochs give"),
    (lambda r: _set_selected(r, epoch=3 - r["selection"]["dev_best"]["epoch"]),        # the other of 2 epochs
     "the recorded dev_best selection"),
    (lambda r: {k: v for k, v in r.items() if k != "selection"}, "its epochs cannot be read ('selection')"),
])
def test_an_edited_selection_in_metrics_json_is_refused(run, change, needle, refused, edit_json):
    # the tables, summary and predict read the recorded selection: an edit used to be reported as is
    edit_json(run / "metrics.json", change)
    refused(["summary", str(run.parents[2])], str(run / "metrics.json"), needle, "--force")
    with pytest.raises(AbsaError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        find_runs(run.parents[2])


def _everywhere(record: dict, key: str, value) -> dict:
    """An edit made consistently: ``key`` of the test metrics of every epoch and every selection."""
    for block in [*record["epochs"], *record["selection"].values()]:
        block["test"][key] = value
    return record


@pytest.mark.parametrize("change,needle", [
    (lambda r: _everywhere(r, "aspect_macro_f1", "abc"),
     "epoch 1, test aspect_macro_f1 is 'abc', expected a fraction in [0, 1] (or NaN: undefined)"),
    (lambda r: _everywhere(r, "aspect_macro_f1", 7.5), "test aspect_macro_f1 is 7.5, expected a fraction"),
    (lambda r: _everywhere(r, "aspect_auc", True), "test aspect_auc is True"),
    (lambda r: _everywhere(r, "aspect_auc", [1]), "test aspect_auc is [1]"),
    (lambda r: _everywhere(r, "aspect_auc", -0.1), "test aspect_auc is -0.1"),
    (lambda r: {**r, "complete": "yes"}, "complete is 'yes', expected true"),
    (lambda r: {**r, "epochs": []}, "no epochs recorded (epochs is [])"),
    (lambda r: {k: v for k, v in r.items() if k != "selection_metric"}, "selection_metric is None, expected"),
])
def test_metrics_json_with_values_no_run_writes_is_refused(run, change, needle, refused, edit_json):
    # edited in the epochs and the selections alike, these passed the selection check: a string was
    # a traceback, 7.5 a Macro-F1 of 750 %, "complete": "yes" a finished run
    edit_json(run / "metrics.json", change)
    refused(["summary", str(run.parents[2])], str(run / "metrics.json"), needle, "--force")


def test_undefined_metrics_in_metrics_json_are_accepted(capsys, run, edit_json):
    edit_json(run / "metrics.json", lambda r: _everywhere(r, "aspect_auc", float("nan")))    # no positives
    assert main(["summary", str(run.parents[2])]) == 0


@pytest.mark.parametrize("listed", [lambda sums: {k: v for k, v in sums.items() if k != "model.safetensors"},
                                    lambda sums: {}])
def test_a_checksum_list_that_leaves_a_file_out_is_refused(run, listed, review, refused, edit_json):
    # the file left out was read unchecked: flipped weights predicted without a word
    ckpt = run / "checkpoints" / "best"
    edit_json(ckpt / CHECKSUMS, listed)
    flip_byte(ckpt / "model.safetensors")
    refused(["predict", "--run", str(run), review], str(ckpt / CHECKSUMS), "does not list",
            "model.safetensors", "--force")


def test_a_checkpoint_folder_given_as_the_run_is_named(run, review, refused):
    refused(["predict", "--run", str(run / "checkpoints" / "best"), review],
            "a model's config (a checkpoint, or an exported folder", "not a run record; give the run folder")


def test_an_output_that_is_a_folder_is_refused_before_any_work(run, tmp_path, review, refused):
    refused(["summary", str(run.parents[2]), "--csv", str(tmp_path)], f"{tmp_path}: is a folder")
    (tmp_path / "reviews.txt").write_text(review + "\n")
    refused(["predict", "--run", str(run), "--file", str(tmp_path / "reviews.txt"), "--out", str(tmp_path)],
            f"{tmp_path}: is a folder; give the name of a file to write")


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_written_files_get_the_mode_the_umask_gives_not_owner_only(tmp_path, umask):
    # every record went through mkstemp (0o600): colleagues sharing a group could not read runs
    old = os.umask(umask)
    try:
        atomic_write_json(tmp_path / "a.json", {"x": 1})
    finally:
        os.umask(old)
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o666 & ~umask


def test_a_trained_runs_records_are_readable_as_the_umask_allows(trained):
    umask = os.umask(0)
    os.umask(umask)
    for name in ("config.json", "metrics.json", "env.json", "predictions_test.csv", "checkpoints/best/checksums.json",
                 "checkpoints/best/model.safetensors", "checkpoints/last/trainer_state.safetensors"):
        assert (trained / name).stat().st_mode & 0o777 == 0o666 & ~umask, name


def test_the_checkpoint_must_be_the_runs_model(run, review, refused, edit_json, rewrite_checksums):
    ckpt = run / "checkpoints" / "best"
    edit_json(ckpt / "config.json", lambda c: {**c, "absa_backbone": "/elsewhere/bert-base-uncased"})
    rewrite_checksums(ckpt)
    refused(["predict", "--run", str(run), review], str(ckpt / "config.json"), "absa_backbone",
            "'tiny'", "not this run's model")


def test_a_run_written_by_this_code_passes_the_identity_check(capsys, run, review):
    assert main(["predict", "--run", str(run), review]) == 0
    assert len(json.loads(capsys.readouterr().out)["predictions"]) == 8
    assert [r.path for r in find_runs(run.parents[2])] == [run]


# ---------------------------------------------------------------------------------------------- 2. checksums


@pytest.mark.parametrize("name", ["model.safetensors", "config.json"])
def test_flipped_bytes_in_a_checkpoint_are_refused(run, name, review, refused):
    ckpt = run / "checkpoints" / "best"
    assert json.loads((ckpt / CHECKSUMS).read_text()).keys() == {"config.json", "model.safetensors", "checkpoint.json"}
    flip_byte(ckpt / name, -100 if name == "model.safetensors" else -3)
    refused(["predict", "--run", str(run), review], str(ckpt / name), "corrupt", "--force")


@pytest.fixture
def incomplete(edit_json):
    """``incomplete(run)``: make the run look interrupted after its last epoch, so that `absa train` resumes it."""
    return lambda run: edit_json(run / "metrics.json", lambda m: {**m, "complete": False})


@pytest.mark.parametrize("name,damage", [
    ("trainer_state.safetensors", "flip"), ("model.safetensors", "flip"), ("trainer_state.safetensors", "truncate"),
    ("trainer_state.json", "flip")])
def test_corrupt_resume_state_is_refused_and_force_recovers(capsys, runs, run, name, damage, tiny_argv, refused, incomplete):
    incomplete(run)
    path = run / "checkpoints" / "last" / name
    if damage == "flip":
        flip_byte(path, -3)
    else:
        path.write_bytes(path.read_bytes()[:200])
    refused(["train", *tiny_argv, "--out", str(runs)], str(path), "resume state is corrupt", "--force")
    nothing_claims_complete(runs)
    assert main(["train", *tiny_argv, "--out", str(runs), "--force"]) == 0
    assert json.loads(capsys.readouterr().out)["cached"] is False


def test_a_resume_state_without_checksums_is_refused_not_read_unchecked(runs, run, tiny_argv, refused, incomplete):
    """Deleting checksums.json would turn the check off: the resume state is refused instead."""
    incomplete(run)
    (run / "checkpoints" / "last" / CHECKSUMS).unlink()
    state = run / "checkpoints" / "last" / "trainer_state.safetensors"
    state.write_bytes(state.read_bytes()[:200])
    refused(["train", *tiny_argv, "--out", str(runs)], str(run / "checkpoints" / "last"), "no checksums.json",
            "--force")
    nothing_claims_complete(runs)


@pytest.mark.parametrize("damage,needle", [("header", "not a readable safetensors file"),
                                           ("truncate", "not a readable safetensors file"),
                                           ("config", "not a valid model config")])
def test_a_damaged_checkpoint_without_checksums_is_one_line(run, damage, needle, review, refused):
    """A run's checkpoint without checksums.json is refused before its files are read; a model folder
    of your own (no checksums: from_pretrained) that is damaged is one line naming what is wrong."""
    from absa_lib.models import AbsaPreTrainedModel

    ckpt = run / "checkpoints" / "best"
    (ckpt / CHECKSUMS).unlink()
    weights = ckpt / "model.safetensors"
    if damage == "header":
        weights.write_bytes(b"\xff" * 8 + weights.read_bytes()[8:])
    elif damage == "truncate":
        weights.write_bytes(weights.read_bytes()[:1000])
    else:
        (ckpt / "config.json").write_text("{not json")
    refused(["predict", "--run", str(run), review], str(ckpt), "no checksums.json", "--force")
    with pytest.raises(AbsaError, match=needle) as err:
        AbsaPreTrainedModel.from_pretrained(ckpt)
    assert "\n" not in str(err.value) and str(ckpt) in str(err.value)


@pytest.mark.parametrize("content", ["{not json", "[]", '{"num_models": 0}', '{"models": 8}'])
def test_an_invalid_per_context_file_is_one_error(tmp_path, content):
    """Checkpoints written before AbsaConfig said "K bert-single classifiers" in per_context.json."""
    from absa_lib.models import AbsaModel
    from absa_lib.models.model_config import PER_CONTEXT_MARKER
    from absa_lib.models.registry import build_per_context

    build_per_context(backbone="tiny", num_labels=3, num_contexts=2).save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    del config["per_context_models"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / PER_CONTEXT_MARKER).write_text(content)
    with pytest.raises(AbsaError, match=f"{PER_CONTEXT_MARKER}.*retrain"):
        AbsaModel.from_pretrained(tmp_path)


@pytest.mark.parametrize("value", [0, -1, "8", True])
def test_an_invalid_classifier_count_is_one_error(tmp_path, value):
    from absa_lib.models import AbsaModel
    from absa_lib.models.registry import build_per_context

    build_per_context(backbone="tiny", num_labels=3, num_contexts=2).save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "per_context_models": value}))
    with pytest.raises(AbsaError, match=f"config.json: per_context_models must be a positive integer, got {value!r}"):
        AbsaModel.from_pretrained(tmp_path)


# ---------------------------------------------------------------------------------------------- 4.-6. the numbers


@pytest.mark.parametrize("flag,value,needle", [
    ("--seed", "-1", "seed must be an integer from 0 to 2**32 - 1 (numpy's seed range), got -1"),
    ("--seed", "4294967296", "got 4294967296"),
    ("--max-train-examples", "0", "max_train_examples must be a positive integer, or unset for all, got 0"),
    ("--max-train-examples", "-5", "got -5"), ("--max-eval-examples", "0", "max_eval_examples"),
    ("--max-eval-examples", "-4", "got -4"),
    ("--lr", "inf", "lr must be a finite positive number, got inf"), ("--lr", "nan", "got nan"),
    ("--head-lr-mult", "-1", "head_lr_mult"), ("--adam-eps", "0", "adam_eps must be a finite positive"),
    ("--max-grad-norm", "inf", "max_grad_norm"), ("--weight-decay", "-0.1", "weight_decay must be a finite number >= 0"),
    ("--weight-decay", "nan", "weight_decay"), ("--warmup", "1", "warmup must be a fraction in [0, 1)"),
    ("--max-length", "2", "max_length=2 is out of range: expected 10 to 512 tokens (aux NLI-M"),
    ("--max-length", "1024", "max_length=1024 is out of range"),
])
def test_bad_numbers_are_refused_before_anything_is_written(tmp_path, flag, value, needle, tiny_argv, refused):
    refused(["train", *tiny_argv, "--out", str(tmp_path / "runs"), flag, value], needle)   # the last one counts
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("override,needle", [("quasi=\"maybe\"", "model override quasi='maybe' is invalid; expected bool"),
                                             ("nosuch=1", "model override 'nosuch' is unknown")])
def test_a_bad_override_is_refused_before_the_run_folder_exists(tmp_path, override, needle, tiny_argv, refused):
    # it was refused inside the run folder, which was left holding only its lock
    refused(["train", *tiny_argv, "--out", str(tmp_path / "runs"), "--override", override], needle)
    assert not (tmp_path / "runs").exists()


def test_json_output_is_valid_json_with_undefined_metrics_as_null(capsys):
    # absa train, absa data check --json, ... printed a bare NaN
    from absa_lib.commands import print_json

    print_json({"auc": float("nan"), "rows": [float("inf"), 0.5], "dev": {"f1": float("nan")}})
    strict = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"{c} is not JSON"))
    assert strict == {"auc": None, "rows": [None, 0.5], "dev": {"f1": None}}


@pytest.mark.parametrize("argv,needle", [
    (["bench", "--threads", "0"], "argument --threads: expected a whole number of at least 1, got '0'"),
    (["bench", "--threads", "-1"], "got '-1'"), (["bench", "--warmup", "-1"], "at least 0, got '-1'"),
    (["bench", "--steps", "2.5"], "got '2.5'"), (["bench", "--max-length", "x"], "got 'x'"),
    (["grid", "--profile", "smoke", "--workers", "0"], "argument --workers"),
    (["grid", "--profile", "smoke", "--cell", "-1"], "argument --cell: expected a whole number of at least 0"),
    (["info", "--model", "man-bert", "--num-aspects", "-2"], "argument --num-aspects: expected a whole number of at "
     "least 1, got '-2'"),                                 # a RuntimeError traceback; 0 used the default
])
def test_bad_counts_are_argparse_errors_before_anything_runs(capsys, argv, needle):
    with pytest.raises(SystemExit) as exit_:            # bench --threads 0 used to run with torch's choice,
        main(argv)                                     # -1 a traceback; grid --cell -1 the last cell
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err, err


@pytest.mark.parametrize("field,value", [("epochs", "3"), ("epochs", True), ("seed", 1.5), ("max_length", 48.0),
                                         ("max_train_examples", False), ("lr", "2e-5"), ("group_by_length", "yes"),
                                         ("model_overrides", ["quasi"]), ("backbone", None)])
def test_wrong_types_in_a_config_are_refused(field, value, tiny_config):
    with pytest.raises(AbsaError, match=f"^{field} must be .* got {re.escape(repr(value))}$"):
        tiny_config(**{field: value})


def test_max_length_lower_bound_follows_the_auxiliary_sentence(tmp_path, tiny_argv, tiny_config, refused):
    """QA-B's longest auxiliary sentence is longer than NLI-M's: its minimum is larger."""
    line = refused(["train", *tiny_argv, "--aux", "QA-B", "--max-length", "13", "--out", str(tmp_path)])
    low = int(line.split("expected ")[1].split(" ")[0])
    assert low > 13
    cfg = tiny_config(aux="QA-B", max_length=low, max_train_examples=8, max_eval_examples=4)
    assert train(cfg, runs_dir=tmp_path, progress=False).complete


# ---------------------------------------------------------------------------------------------- 7. run_all.sh


def test_unknown_parameter_names_are_an_error_before_anything_runs(tmp_path, capsys):
    from absa_lib.harness.profiles import main as profiles

    out = tmp_path / "params.yaml"
    assert profiles([str(ROOT / "params" / "smoke.yaml"), str(out), "-p", "epocs", "3"]) == 2
    err = capsys.readouterr().err
    assert "-p epocs: no notebook has this parameter; expected one of" in err and not out.exists()
    assert profiles([str(ROOT / "params" / "smoke.yaml"), str(out), "--epochs", "3"]) == 2
    assert "unexpected argument '--epochs'" in capsys.readouterr().err and not out.exists()
    assert profiles([str(ROOT / "params" / "smoke.yaml"), str(out), "-p", "epochs", "3"]) == 0
    assert "epochs: 3" in out.read_text()



@pytest.mark.parametrize("name,value,needle", [
    ("epochs", "abc", "-p epochs abc: epochs is 'abc', expected int"),     # rendered, and recorded as the
    ("seeds", "42", "seeds is 42, expected a list, [a, b] in YAML"),       # manifest's epochs; a traceback
    ("allow_training", "maybe", "allow_training is 'maybe', expected bool"),
    ("max_train_examples", "None", "expected int (or null: all)"),         # YAML's None is null
    ("datasets", "sentihood", "datasets is 'sentihood', expected a list"),
])
def test_a_parameter_value_of_the_wrong_type_is_an_error_before_anything_runs(tmp_path, capsys, name, value, needle):
    from absa_lib.harness.profiles import main as profiles

    out = tmp_path / "params.yaml"
    assert profiles([str(ROOT / "params" / "smoke.yaml"), str(out), "-p", name, value]) == 2
    assert needle in capsys.readouterr().err and not out.exists()
    assert profiles([str(ROOT / "params" / "smoke.yaml"), str(out), "-p", "max_train_examples", "null"]) == 0


def test_a_misspelt_reference_folder_is_refused_not_read_as_empty(capsys, tmp_path):
    # a node would have trained every committed run again
    import importlib.util

    spec = importlib.util.spec_from_file_location("remote", ROOT / "scripts" / "remote.py")
    remote = importlib.util.module_from_spec(spec)
    sys.modules["remote"] = remote
    spec.loader.exec_module(remote)
    assert remote.main(["start", "--profile", "gpu", "--grid", "tables:qacg-bert:1:42", "--work", str(tmp_path / "work"),
                        "--reference", str(tmp_path / "refrence"), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"remote: error: --reference {tmp_path / 'refrence'}: no such folder")
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("profile", ["../params/smoke", "smok", "params/smoke.yaml"])
def test_run_all_refuses_a_profile_that_is_not_in_the_list(profile):
    res = subprocess.run(["bash", str(ROOT / "run_all.sh"), profile], capture_output=True, text=True, timeout=60,
                         cwd=ROOT)
    assert res.returncode == 2 and f"unknown profile '{profile}'" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


# ---------------------------------------------------------------------------------------------- data


def test_an_unreadable_data_file_is_named(monkeypatch, refused):
    """(Mocked: root reads any file; test_data_files_without_permission is the real check.)"""
    from absa_lib import fileio
    from absa_lib.data import download

    def denied(path, *args, **kw):
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(download, "_VERIFIED", {})
    monkeypatch.setattr(download, "open", denied, raising=False)
    monkeypatch.setattr(fileio, "open", denied, raising=False)       # file_sha256 reads the file there
    refused(["data", "verify"], "sentihood-train.json cannot be read (Permission denied)")


@as_root
def test_data_files_without_permission(tmp_path, real_data_dir, tiny_argv, refused):
    data = tmp_path / "data"
    shutil.copytree(real_data_dir, data, ignore=shutil.ignore_patterns("nli_m"))
    for path in [data, *data.rglob("*")]:                 # the copy keeps the source's read-only modes
        path.chmod(0o755 if path.is_dir() else 0o644)
    (data / "sentihood" / "sentihood-dev.json").chmod(0)
    refused(["data", "verify", "--data-dir", str(data)], "sentihood-dev.json cannot be read")
    refused(["data", "stats", "--data-dir", str(data)], "sentihood-dev.json cannot be read")
    refused(["train", *tiny_argv, "--data-dir", str(data), "--out", str(tmp_path / "runs")],
            "sentihood-dev.json cannot be read")
    (data / "sentihood" / "sentihood-dev.json").chmod(0o644)
    (data / "semeval2014" / "Restaurants_Train.xml").unlink()
    (data / "semeval2014").chmod(0o500)
    refused(["data", "download", "--data-dir", str(data)], f"cannot write in {data / 'semeval2014'}")


def test_download_into_a_folder_that_cannot_be_written(tmp_path, refused):
    """A file where the data folder should be: refused before any download is tried."""
    (tmp_path / "data").write_text("not a folder")
    refused(["data", "download", "--data-dir", str(tmp_path / "data")],
            f"cannot write in {tmp_path / 'data' / 'sentihood'}", "--data-dir")


def test_opinions_null_is_a_clear_error_without_verification(tmp_path):
    (tmp_path / "sentihood").mkdir()
    (tmp_path / "sentihood" / "sentihood-train.json").write_text(json.dumps(
        [{"id": 1, "text": "LOCATION1 is nice", "opinions": None}]))
    with pytest.raises(AbsaError, match="sentence id 1: field 'opinions' must be a list, got None"):
        D.load_examples("sentihood", "train", data_dir=tmp_path, verify=False)


# ---------------------------------------------------------------------------------------------- the run folder


def test_out_is_a_file(tmp_path, tiny_argv, refused):
    (tmp_path / "runs").write_text("")
    refused(["train", *tiny_argv, "--out", str(tmp_path / "runs")], "cannot write in", "--out")


@as_root
def test_out_is_read_only(tmp_path, tiny_argv, refused):
    (tmp_path / "runs").mkdir(mode=0o500)
    refused(["train", *tiny_argv, "--out", str(tmp_path / "runs")], "Permission denied", "--out")


def test_the_run_folder_is_checked_before_tokenizing(tmp_path, monkeypatch, tiny_argv, refused):
    monkeypatch.setattr(sys.modules["absa_lib.training.loop"], "prepare_split", lambda *a, **k: pytest.fail("tokenized"))
    (tmp_path / "runs").write_text("")
    refused(["train", *tiny_argv, "--out", str(tmp_path / "runs")], "cannot write in")


@pytest.fixture
def file_size_limit():
    """Files may grow to ``n`` bytes (writes beyond fail with EFBIG, as on a full disk)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    old = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    yield lambda n: resource.setrlimit(resource.RLIMIT_FSIZE, (n, hard))
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    signal.signal(signal.SIGXFSZ, old)


@pytest.mark.parametrize("limit,needle", [(600, "config.json: could not be written (File too large)"),
                                          (60_000, "could not write the checkpoint")])
def test_disk_full_while_writing_records_or_checkpoints(tmp_path, file_size_limit, limit, needle, tiny_argv, refused):
    file_size_limit(limit)
    refused(["train", *tiny_argv, "--out", str(tmp_path)], needle, "run the same command again")
    file_size_limit(resource.RLIM_INFINITY)
    nothing_claims_complete(tmp_path)
    assert not list(tmp_path.rglob("*.tmp")) and not list(tmp_path.rglob("checkpoints/*.tmp"))


def test_kill_9_at_any_point_resumes_to_identical_weights(trained, tmp_path, tiny_argv, tiny_config):
    """A subprocess killed with SIGKILL right after its first epoch's checkpoint; resuming gives the
    bytes of the uninterrupted run (weights, predictions)."""
    argv = [sys.executable, "-m", "absa_lib.cli", "train", *tiny_argv, "--out", str(tmp_path)]
    argv[argv.index("--epochs") + 1] = "2"
    # one thread, as the tests run in-process (conftest): the thread count changes float sums
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    last = None
    try:
        deadline = time.time() + 240
        while time.time() < deadline and proc.poll() is None:
            last = next(tmp_path.glob("sentihood/qacg-bert/*/checkpoints/last/trainer_state.json"), None)
            if last is not None:
                break
            time.sleep(0.02)
    finally:
        proc.kill()
        proc.wait()
    assert last is not None, "the first epoch's checkpoint never appeared"
    nothing_claims_complete(tmp_path)
    resumed = train(tiny_config(epochs=2), runs_dir=tmp_path, progress=False)
    reference = train(tiny_config(epochs=2), runs_dir=tmp_path / "reference", progress=False)
    assert resumed.run_id == reference.run_id
    assert resumed.env.record["from_epoch"] == 2 and reference.env.record["from_epoch"] == 1    # resumed, not retrained
    for name in ("checkpoints/best/model.safetensors", "predictions_dev.csv", "predictions_test.csv"):
        assert (resumed.path / name).read_bytes() == (reference.path / name).read_bytes(), name


def test_a_run_being_trained_by_another_process_is_refused_and_freed_when_it_dies(capsys, tmp_path, tiny_argv):
    """Two processes training one run would interleave their epochs in one folder: the second is
    refused with one line naming the first's pid (exit 75); once the first is killed (-9) the run is free."""
    argv = [sys.executable, "-m", "absa_lib.cli", "train", *tiny_argv, "--out", str(tmp_path)]
    argv[argv.index("--epochs") + 1] = "500"                # still training when the second one starts
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        lock, deadline = None, time.time() + 120
        while time.time() < deadline and proc.poll() is None and lock is None:
            found = next(tmp_path.glob("sentihood/qacg-bert/*/.lock"), None)
            lock = found if found is not None and found.read_text().strip() == str(proc.pid) else None
            time.sleep(0.05)
        assert lock is not None, "the first process never took its run's lock"
        second = [*tiny_argv, "--out", str(tmp_path)]
        second[second.index("--epochs") + 1] = "500"
        assert main(["train", *second]) == 75                # EX_TEMPFAIL: not a bad input, try later
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"absa: error: {lock.parent}: another process is training "
                                                   "this run") and err[0].endswith(f"(pid {proc.pid})"), err
        assert proc.poll() is None                          # the refusal left the first one alone
    finally:
        proc.kill()
        proc.wait()
    with exclusive_lock(lock, "busy"):                      # the OS freed it with its holder
        assert lock.read_text().strip() == str(os.getpid())


class _Msvcrt:
    """``msvcrt.locking``'s contract on Windows, for a machine without it: a byte range locked through
    one open file is refused to every other open file, in this process too, until it is unlocked; the
    range starts at the file's position."""
    LK_UNLCK, LK_NBLCK = 0, 2

    def __init__(self):
        self.held = {}                                      # (file, start, length) -> fd

    def locking(self, fd, mode, nbytes):
        key = (os.fstat(fd).st_ino, os.lseek(fd, 0, os.SEEK_CUR), nbytes)
        if mode == self.LK_NBLCK and key not in self.held:
            self.held[key] = fd
        elif mode == self.LK_UNLCK and self.held.get(key) == fd:
            del self.held[key]
        else:
            raise PermissionError(errno.EACCES, "Permission denied")


@pytest.mark.parametrize("system", ["posix", "windows"])
def test_a_held_lock_refuses_a_second_holder_until_its_block_ends(monkeypatch, tmp_path, system):
    """A second `absa train` of one run on Windows used to go ahead (no `flock` there) and write the
    folder beside the first; `msvcrt.locking` now refuses it as `flock` does elsewhere."""
    if system == "windows":
        msvcrt = _Msvcrt()
        monkeypatch.setitem(sys.modules, "fcntl", None)      # `import fcntl` raises ImportError
        monkeypatch.setitem(sys.modules, "msvcrt", msvcrt)
    lock = tmp_path / ".lock"
    assert lock_holder(lock) is None                        # no file: nobody holds it
    with exclusive_lock(lock, "busy"):
        assert lock_holder(lock) == str(os.getpid())        # the grid's look at a busy run
        with pytest.raises(RunBusy) as refused:
            with exclusive_lock(lock, "busy"):
                pass
        assert str(refused.value) == f"{tmp_path}: busy (pid {os.getpid()})"
    assert lock_holder(lock) is None                        # freed, and the look took nothing
    with pytest.raises(RuntimeError):                       # a block that fails frees it too
        with exclusive_lock(lock, "busy"):
            raise RuntimeError
    with exclusive_lock(lock, "busy"):
        assert lock.read_text() == f"{os.getpid()}\n"
    if system == "windows":
        assert msvcrt.held == {}


def test_a_lock_held_for_a_moment_delays_the_next_holder_instead_of_refusing_it(monkeypatch, tmp_path):
    """The grid's look at a busy run's lock (`lock_holder`) takes it for a moment; a trainer starting
    in that moment must wait for it, not be refused as if another trainer held the run."""
    import threading

    from absa_lib import fileio

    lock, taken = tmp_path / ".lock", threading.Event()

    def brief_holder(seconds):
        with exclusive_lock(lock, "busy"):
            taken.set()
            time.sleep(seconds)

    for patience, refused in ((0.0, True), (10.0, False)):
        monkeypatch.setattr(fileio, "_PATIENCE", patience)
        taken.clear()
        thread = threading.Thread(target=brief_holder, args=(0.3,))
        thread.start()
        taken.wait(10)
        try:
            with exclusive_lock(lock, "busy"):
                assert not refused
        except RunBusy:
            assert refused
        thread.join()


def test_a_notebook_waits_for_a_run_that_another_process_trains_then_resumes_it(monkeypatch, tmp_path, capsys,
                                                                                 other_trainer):
    """Notebook 02 run beside `absa grid` used to stop with RunBusy on the grid's run; it now waits
    for it (one line), then finds it finished or, as here, resumes what the other process left."""
    import threading

    from absa_lib.harness.grid import Spec, make_configs, run_grid
    from absa_lib.training import runs
    from absa_lib.training.config import run_path

    monkeypatch.setattr(runs, "BUSY_POLL", 0.1)
    spec, base = Spec("QACG-BERT", "qacg-bert", "none"), dict(backbone="tiny", epochs=1, batch_size=16, max_length=48,
                                                              max_train_examples=32, max_eval_examples=20)
    run = run_path(make_configs(spec, "sentihood", [3], **base)[0], tmp_path)
    run.mkdir(parents=True)
    release = other_trainer(run / ".lock")                  # holds the run, then stops without finishing it
    threading.Timer(1.0, release.set).start()
    grid = run_grid([spec], ["sentihood"], [3], base, tmp_path, progress=False)
    out = capsys.readouterr().out
    assert f"[runs] {run}: another process is training this run (pid {os.getpid()}); waiting for it" in out, out
    assert out.count("waiting for it") == 1
    [trained] = grid[("sentihood", "QACG-BERT")]
    assert Path(trained.path) == run and not trained.cached and json.loads((run / "metrics.json").read_text())["complete"]


# ---------------------------------------------------------------------------------------------- backbones


@pytest.mark.parametrize("damage,needle", [
    ("config_json", "config.json: cannot be read as JSON"),
    ("heads", "hidden_size 30 is not a multiple of num_attention_heads 4"),
    ("vocab", "vocab.txt: lacks [PAD], [UNK], [CLS], [SEP]"),
    ("truncated", "model.safetensors: not a readable safetensors file"),
    ("header", "model.safetensors: not a readable safetensors file"),
])
def test_a_damaged_backbone_folder_is_one_line(tiny_dir, tmp_path, damage, needle, tiny_argv, refused, edit_json):
    folder = tmp_path / "bb"
    shutil.copytree(tiny_dir, folder)
    weights = folder / "model.safetensors"
    if damage == "config_json":
        (folder / "config.json").write_text('{"model_type": "bert", ')
    elif damage == "heads":
        edit_json(folder / "config.json", lambda c: {**c, "hidden_size": 30})
    elif damage == "vocab":
        (folder / "vocab.txt").write_text("")
    elif damage == "truncated":
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    else:
        weights.write_bytes(b"\xff" * 8 + weights.read_bytes()[8:])
    argv = ["train", *tiny_argv, "--out", str(tmp_path / "runs")]
    argv[argv.index("--backbone") + 1] = str(folder)
    refused(argv, str(folder), needle)
    nothing_claims_complete(tmp_path)


# ---------------------------------------------------------------------------------------------- predict


def test_invalid_utf8_text_is_one_line(trained, refused):
    text = b"LOCATION1 is \xff nice".decode("utf-8", "surrogateescape")     # how Python reads such argv bytes
    refused(["predict", "--run", str(trained), text], "not valid UTF-8 (byte 0xff at position 13)")


def test_a_target_given_twice_is_predicted_once(capsys, trained, review):
    assert main(["predict", "--run", str(trained), review, "--targets", "LOCATION2", "LOCATION2"]) == 0
    rows = json.loads(capsys.readouterr().out)["predictions"]
    assert [(r["target"], r["aspect"]) for r in rows] == [("LOCATION2", a) for a in D.ASPECTS["sentihood"]]


@pytest.mark.parametrize("call,needle", [
    (lambda run, text: predict_text(run, None), "each text must be a string (a review sentence), got NoneType None"),
    (lambda run, text: predict_text(run, b"LOCATION1 is ok"), "got bytes b'LOCATION1 is ok'"),
    (lambda run, text: predict_texts(run, [text, 42]), "got int 42"),
    (lambda run, text: predict_text(run, text, targets="LOCATION1"),
     "targets must be a list of names, got one string 'LOCATION1'; give ['LOCATION1']"),
    (lambda run, text: predict_text(run, "Camden is nice", locations="Camden"), "locations must be a list of names"),
    (lambda run, text: train("sentihood"), "train() takes a TrainConfig, got str"),
])
def test_the_library_names_a_wrong_argument_type(trained, review, call, needle):
    # an AttributeError deep inside, or a string read letter by letter ("--targets 'L'")
    with pytest.raises(AbsaError) as err:
        call(trained, review)
    assert needle in str(err.value)


# ---------------------------------------------------------------------------------------------- the safety net


@pytest.mark.parametrize("err,needle", [
    (PermissionError(errno.EACCES, "Permission denied", "/some/file.json"), "/some/file.json: Permission denied"),
    (json.JSONDecodeError("Expecting value", "", 0), "a JSON file is not valid (Expecting value at line 1)"),
])
def test_the_cli_turns_an_escaped_file_error_into_one_line(monkeypatch, err, needle, refused):
    from absa_lib.commands import info

    def fail(args):
        raise err

    monkeypatch.setattr(info, "run", fail)
    refused(["info", "--model", "qacg-bert", "--backbone", "tiny"], needle)


def test_the_cli_turns_an_unreadable_safetensors_file_into_one_line(monkeypatch, tmp_path, refused):
    from safetensors.torch import load_file

    from absa_lib.commands import info

    (tmp_path / "x.safetensors").write_bytes(b"\xff" * 16)
    monkeypatch.setattr(info, "run", lambda args: load_file(tmp_path / "x.safetensors"))
    refused(["info", "--model", "qacg-bert", "--backbone", "tiny"], "a safetensors file cannot be read")


def test_a_misspelt_backbone_is_named_as_typed(tmp_path, monkeypatch, tiny_argv, refused):
    monkeypatch.chdir(tmp_path)                 # it was named as <working folder>/minlm
    argv = [*tiny_argv, "--out", str(tmp_path / "runs")]
    argv[argv.index("tiny")] = "minlm"
    refused(["train", *argv], "backbone 'minlm' is neither one of")
    assert not (tmp_path / "runs").exists()
