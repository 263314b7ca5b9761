"""The end of a run is one ordered commit: a kill at any step of it leaves the run resumable or complete,
never bricked or silently poorer (issue 89). Each test kills a two-epoch tiny run at one step of its
last epoch's bookkeeping or of its finish, runs the same command again, and compares the result with
an uninterrupted run: the same epochs, the same kept predictions, no resume state left, a curve."""

from __future__ import annotations

import json
import shutil
from functools import partial

import pytest

from absa_lib.errors import AbsaError
from absa_lib.training import checkpoint, recorder
from absa_lib.training import loop as training
from absa_lib.training.records import RunFolder, load_run

pytestmark = pytest.mark.usefixtures("real_data_dir")


class Killed(BaseException):
    """A kill: nothing below it runs (not an Exception, so no cleanup handler catches it)."""


@pytest.fixture(scope="module")
def small(tiny_config):
    return partial(tiny_config, seed=11, epochs=2, batch_size=8, max_train_examples=48, max_eval_examples=40)


@pytest.fixture(scope="module")
def whole(tmp_path_factory, small):
    run = training.train(small(), runs_dir=tmp_path_factory.mktemp("whole"), progress=False)
    return run


def timeless(run) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in ("seconds", "eval_seconds")} for r in run.metrics.epochs]


def assert_as_uninterrupted(run, whole) -> None:
    assert run.complete and timeless(run) == timeless(whole)
    assert run.metrics.predictions is not None and run.kept().epochs == whole.kept().epochs
    assert run.metrics.predictions["sha256"] == whole.metrics.predictions["sha256"]      # the same rows, bit for bit
    assert not run.folder.checkpoint("last").exists()                                    # nothing resumes it now
    run.load_model("best")                                                               # its model is there


def kill_at(monkeypatch, module, name, when):
    """Replace ``module.name`` by a call that raises :class:`Killed` when ``when(*args)`` is true."""
    real = getattr(module, name)

    def maybe_killed(*args, **kwargs):
        if when(*args, **kwargs):
            raise Killed
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, maybe_killed)


STEPS = {
    # after the last epoch's kept predictions, before its resume state
    "before the resume state": (recorder, "save_checkpoint", lambda d, m, run_id, epoch, *a: d.name == "last" and epoch == 2),
    # after the resume state, before the epoch's record
    "before the epoch's record": (recorder, "write_metrics", lambda folder, m: len(m.epochs) == 2 and not m.complete),
    # after the epoch's record, before the record marked complete
    "before the final record": (recorder, "write_metrics", lambda folder, m: m.complete),
    # after the final record, before the resume state goes
    "before the resume state goes": (recorder.shutil, "rmtree", lambda path, *a, **k: str(path).endswith("last")),
}


@pytest.mark.parametrize("step", list(STEPS))
def test_a_kill_at_each_step_of_the_end_leaves_a_run_the_rerun_completes(step, small, whole, tmp_path, monkeypatch):
    module, name, when = STEPS[step]
    with monkeypatch.context() as m:
        kill_at(m, module, name, when)
        with pytest.raises(Killed):
            training.train(small(), runs_dir=tmp_path, progress=False)
    run = training.train(small(), runs_dir=tmp_path, progress=False)
    assert_as_uninterrupted(run, whole)


def test_a_kill_between_the_two_renames_of_a_save_resumes_from_the_saved_state(small, whole, tmp_path,
                                                                               monkeypatch, capsys):
    def first_rename_only(tmp, final):          # the old state moved aside, the new one not yet in place
        if final.name == "last" and final.exists():
            final.rename(final.with_name(final.name + ".old"))
            raise Killed
        real(tmp, final)

    real = checkpoint.replace_dir
    with monkeypatch.context() as m:
        m.setattr(checkpoint, "replace_dir", first_rename_only)   # as the save calls it
        with pytest.raises(Killed):
            training.train(small(), runs_dir=tmp_path, progress=False)
    folder = RunFolder(tmp_path / "sentihood" / small().model / whole.run_id)
    assert not folder.checkpoint("last").exists()
    run = training.train(small(), runs_dir=tmp_path, progress=True)
    err = capsys.readouterr().err
    assert "finished a save that was interrupted" in err and "resuming" in err and "after epoch 2" in err
    assert_as_uninterrupted(run, whole)


def test_a_kill_after_the_run_before_its_curve_gets_the_curve_from_the_next_command(small, whole, tmp_path,
                                                                                   tiny_argv):
    from absa_lib.cli import main

    run = training.train(small(), runs_dir=tmp_path, progress=False)   # `absa train` killed before the curve
    assert not run.folder.curve.exists()
    argv = ["train", *tiny_argv, "--seed", "11", "--epochs", "2", "--batch-size", "8", "--max-train-examples", "48",
            "--max-eval-examples", "40", "--out", str(tmp_path)]
    assert main(argv) == 0 and run.folder.curve.is_file()


@pytest.mark.parametrize("damage", ["missing", "damaged"])
def test_a_resume_without_the_kept_predictions_of_its_selected_epochs_is_refused_before_training(
        damage, small, whole, tmp_path, monkeypatch):
    """Killed after epoch 1 with predictions.npz then lost: the resume cannot make epoch 1's predictions
    again, so it is refused in one line before it trains, not at the end with a record every command refuses."""
    with monkeypatch.context() as m:
        kill_at(m, recorder, "write_metrics", lambda folder, metrics: len(metrics.epochs) == 2)
        with pytest.raises(Killed):
            training.train(small(), runs_dir=tmp_path, progress=False)
    folder = RunFolder(tmp_path / "sentihood" / small().model / whole.run_id)
    folder.kept.unlink() if damage == "missing" else folder.kept.write_bytes(b"PK\x03\x04 not a zip")
    calls = []
    monkeypatch.setattr(training, "_train_epoch", lambda *a: calls.append(a) or pytest.fail("trained"))
    with pytest.raises(AbsaError, match=r"predictions.npz: missing or damaged, and it held the predictions of the "
                                        r"selected epochs \(dev \[\d\], test \[[\d, ]+\]\).*rerun with --force"):
        training.train(small(), runs_dir=tmp_path, progress=False)
    assert calls == []


def test_a_resume_without_the_dev_best_checkpoint_is_refused(small, whole, tmp_path, monkeypatch):
    with monkeypatch.context() as m:
        kill_at(m, recorder, "write_metrics", lambda folder, metrics: len(metrics.epochs) == 2)
        with pytest.raises(Killed):
            training.train(small(), runs_dir=tmp_path, progress=False)
    folder = RunFolder(tmp_path / "sentihood" / small().model / whole.run_id)
    shutil.rmtree(folder.checkpoint("best"))
    with pytest.raises(AbsaError, match=r"checkpoints/best.*which a resume cannot bring back; rerun with --force"):
        training.train(small(), runs_dir=tmp_path, progress=False)
    assert json.loads(folder.metrics.read_text())["complete"] is False
    with pytest.raises(AbsaError, match="did not finish"):
        load_run(folder.path)
