"""The grid runner: a profile's cells, one `absa train` command each, a queue that skips finished runs."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time

import pytest
import yaml

from absa_lib.cli import build_parser, main
from absa_lib.commands.train import config_from_args
from absa_lib.errors import AbsaError
from absa_lib.harness.profiles import load_profile
from absa_lib.harness.runner import PARTS, profile_cells, train_argv
from absa_lib.training.config import TrainConfig
from absa_lib.training.records import epoch_seconds


def config_from_argv(argv: list[str]) -> TrainConfig:
    """What `absa train` builds from a command line (the CLI's own parser and function)."""
    return config_from_args(build_parser().parse_args(argv[1:]))


@pytest.mark.parametrize("profile", ["smoke", "cpu", "gpu", "paper"])
def test_every_cell_is_one_train_command_that_rebuilds_its_config(profile, tmp_path):
    params = load_profile(profile)
    cells = profile_cells(params)
    n_seeds, n_abl = len(params["seeds"]), len(params["ablation_seeds"])
    # 6 table runs per dataset and seed; 12 ablations, 5 of which are table runs (QACG with and without
    # the auxiliary sentence, CG with and without it, BERT-single)
    # (the ablation dataset and seeds are among the tables'); notebook 06 adds 8 specs per dataset
    n_tables = 6 * n_seeds * len(params["datasets"])
    assert sum(c.part == "tables" for c in cells) == n_tables
    assert set(params["ablation_seeds"]) <= set(params["seeds"])
    assert sum(c.part == "ablations" for c in cells) == 7 * n_abl
    assert sum(c.part == "other" for c in cells) == 8 * n_seeds * len(params["datasets"])
    keys = [json.dumps(c.config.to_dict(), sort_keys=True) for c in cells]
    assert len(set(keys)) == len(keys)
    first_seed = params["seeds"][0]
    assert all(c.config.seed == first_seed for c in cells[:12 * len(params["datasets"]) // 2])
    for cell in cells:
        argv = train_argv(cell.config, tmp_path, None)
        assert config_from_argv(shlex.split(shlex.join(argv))) == cell.config


def test_unknown_part_and_bad_train_options_are_refused():
    params = load_profile("smoke")
    with pytest.raises(AbsaError, match="grid part 'figures'"):
        profile_cells(params, ("figures",))
    with pytest.raises(AbsaError, match="'epocs'"):
        profile_cells({**params, "train_options": {"epocs": 3}})
    with pytest.raises(AbsaError, match="'seed'"):
        profile_cells({**params, "train_options": {"seed": 3}})
    with pytest.raises(AbsaError, match=r"'model_overrides'.*is a grid row: grid.Spec\("):    # says where it goes
        profile_cells({**params, "train_options": {"model_overrides": {"quasi": False}}})
    with pytest.raises(AbsaError, match="train_options=3: expected a mapping"):
        profile_cells({**params, "train_options": 3})
    assert set(PARTS) == {"tables", "ablations", "other"}


@pytest.mark.usefixtures("real_data_dir")
def test_grid_trains_then_skips_finished_runs(tmp_path, capsys, monkeypatch):
    params = {**load_profile("smoke"), "profile": "mini", "datasets": ["semeval"], "max_train_examples": 40, "max_eval_examples": 20,
              "max_length": 32, "runs_dir": str(tmp_path / "runs"), "train_options": {"group_by_length": True}, "epochs": 2}
    profile = tmp_path / "mini.yaml"
    profile.write_text(yaml.safe_dump(params))
    assert main(["grid", "--profile", str(profile), "--part", "tables", "--count"]) == 0
    assert capsys.readouterr().out.strip() == "6"
    # --list and --count with --cell: what that array task runs (they listed all 6, and --cell 99 passed)
    assert main(["grid", "--profile", str(profile), "--part", "tables", "--list"]) == 0
    every = capsys.readouterr().out.splitlines()
    assert main(["grid", "--profile", str(profile), "--part", "tables", "--cell", "1", "--list"]) == 0
    assert capsys.readouterr().out.splitlines() == every[1:2]
    assert main(["grid", "--profile", str(profile), "--part", "tables", "--cell", "1", "--count"]) == 0
    assert capsys.readouterr().out.strip() == "1"
    assert main(["grid", "--profile", str(profile), "--part", "tables", "--cell", "99", "--list"]) == 2
    assert "--cell 99 is out of range" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()               # listing and counting made the runs folder
    assert main(["grid", "--profile", str(profile), "--part", "tables", "--cell", "1", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    assert "started" in out and "done in" in out and "1 of 1 runs done, 0 left" in out
    summary = json.loads((tmp_path / "runs" / "grid_summary_mini_cell1.json").read_text())
    assert summary["trained"] == 1 and summary["failed"] == 0 and summary["rows"][0]["examples_per_s"] > 0
    run = summary["rows"][0]["run"]
    assert json.loads((tmp_path / "runs" / run.split("/runs/")[1] / "config.json").read_text())["group_by_length"]
    # the grid launched it, so its first epoch says how long the process took to get there
    epochs = json.loads((tmp_path / "runs" / run.split("/runs/")[1] / "metrics.json").read_text())["epochs"]
    metrics = json.loads((tmp_path / "runs" / run.split("/runs/")[1] / "metrics.json").read_text())
    assert 0 < epochs[0]["startup_seconds"] < metrics["process_seconds"] <= summary["rows"][0]["wall_seconds"]
    assert len(epochs) == 2 and "startup_seconds" not in epochs[1]
    # the whole process holds its start-up and its epochs; the two launch-clock readings are rounded to
    # 0.1 s, and the rest (writing predictions, checkpoints) can take less than that on a 2-epoch run
    assert metrics["process_seconds"] >= epochs[0]["startup_seconds"] + epoch_seconds(metrics["epochs"]) - 0.1
    assert main(["grid", "--profile", str(profile), "--part", "tables", "--cell", "1"]) == 0
    assert "finished before" in capsys.readouterr().out
    # the profile's force_retrain retrains it once (the grid said "finished before", and the
    # notebooks then retrained every run one by one)
    forced = tmp_path / "forced.yaml"
    forced.write_text(yaml.safe_dump({**params, "force_retrain": True}))
    stamp = (tmp_path / "runs" / run.split("/runs/")[1] / "metrics.json").stat().st_mtime_ns
    assert main(["grid", "--profile", str(forced), "--part", "tables", "--cell", "1", "--threads", "1"]) == 0
    assert "1 runs: 1 trained, 0 finished before" in capsys.readouterr().out
    assert (tmp_path / "runs" / run.split("/runs/")[1] / "metrics.json").stat().st_mtime_ns > stamp
    # a finished run whose record was damaged is no cache hit (it was "finished before", exit 0)
    config = tmp_path / "runs" / run.split("/runs/")[1] / "config.json"
    good = config.read_text()
    config.write_text(good.replace('"seed": 42', '"seed": 7'))
    assert main(["grid", "--profile", str(profile), "--part", "tables", "--cell", "1"]) != 0
    out = capsys.readouterr().out
    assert "FAILED" in out and "is not the hash of the recorded configuration" in out and "1 failed" in out
    config.write_text(good)
    assert main(["grid", "--profile", str(profile), "--part", "tables", "--export", str(tmp_path / "ref")]) == 0
    exported = sorted(p.relative_to(tmp_path / "ref") for p in (tmp_path / "ref").rglob("*.json"))
    assert [p.name for p in exported] == ["config.json", "env.json", "metrics.json"]   # the one finished run
    assert exported[0].parts[:3] == ("runs", "semeval", run.split("/")[-2])
    monkeypatch.chdir(tmp_path)                         # a relative --export is from the working folder
    assert main(["grid", "--profile", str(profile), "--part", "tables", "--export", "ref2"]) == 0
    assert f"to {tmp_path / 'ref2' / 'runs'}" in capsys.readouterr().out and (tmp_path / "ref2" / "runs").is_dir()
    with pytest.raises(SystemExit):
        main(["grid", "--profile", str(profile), "--threads", "0"])
    assert "argument --threads: expected a whole number of at least 1, got '0'" in capsys.readouterr().err
    (tmp_path / "bad.yaml").write_text("profile: [unclosed\n")
    assert main(["grid", "--profile", str(tmp_path / "bad.yaml")]) == 2
    assert "bad.yaml: not valid YAML" in capsys.readouterr().err
    # a value of the wrong shape (was a traceback, or datasets iterated letter by letter), a key missing
    for change, needle in (({"seeds": 42}, "seeds is 42, expected a list, [a, b] in YAML"),
                           ({"datasets": "sentihood"}, "datasets is 'sentihood', expected a list"),
                           ({"epochs": "abc"}, "epochs is 'abc', expected int"),
                           ({"max_train_examples": "None"}, "expected int (or null: all)")):
        (tmp_path / "bad.yaml").write_text(yaml.safe_dump({**params, **change}))
        assert main(["grid", "--profile", str(tmp_path / "bad.yaml"), "--count"]) == 2
        assert needle in capsys.readouterr().err
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({k: v for k, v in params.items() if k != "datasets"}))
    assert main(["grid", "--profile", str(tmp_path / "bad.yaml"), "--count"]) == 2
    assert "bad.yaml: sets no datasets, which the grid needs" in capsys.readouterr().err
    assert main(["grid", "--profile", str(profile), "--cell", "99"]) == 2
    assert "out of range" in capsys.readouterr().err


@pytest.mark.usefixtures("real_data_dir")
def test_stopping_the_grid_stops_the_runs_it_started(tmp_path):
    """`kill <grid>` (a scheduler's SIGTERM) used to leave its `absa train` children training unwatched,
    beside the next grid's process for the same run. Now the grid stops them, says so, exits 143, and
    the run is free for the next grid."""
    from absa_lib.fileio import exclusive_lock

    params = {**load_profile("smoke"), "profile": "long", "datasets": ["semeval"], "epochs": 500,
              "max_train_examples": 40, "max_eval_examples": 20, "max_length": 32,
              "runs_dir": str(tmp_path / "runs")}
    profile = tmp_path / "long.yaml"
    profile.write_text(yaml.safe_dump(params))
    grid = subprocess.Popen([sys.executable, "-m", "absa_lib.cli", "grid", "--profile", str(profile),
                             "--part", "tables", "--cell", "1", "--threads", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lock, deadline = None, time.time() + 120
        while time.time() < deadline and grid.poll() is None and lock is None:
            found = next((tmp_path / "runs").glob("semeval/*/*/.lock"), None)
            lock = found if found is not None and found.read_text().strip() else None
            time.sleep(0.05)
        assert lock is not None, "the grid's run never started"
        child = int(lock.read_text())
        grid.terminate()
        out, _ = grid.communicate(timeout=60)
    finally:
        grid.kill()
    assert grid.returncode == 143, out
    assert "stopped" in out and "it saved its resume state at the batch it had reached" in out, out
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)                                   # gone, and reaped by the grid
    with exclusive_lock(lock, "busy"):
        pass


def mini_profile(tmp_path, **changes) -> tuple:
    """A one-dataset profile of tiny runs in ``tmp_path``: its YAML file, and the run folder of its cell 1."""
    from absa_lib.training.config import run_path

    params = {**load_profile("smoke"), "profile": "mini", "datasets": ["semeval"], "max_train_examples": 40,
              "max_eval_examples": 20, "max_length": 32, "runs_dir": str(tmp_path / "runs"), **changes}
    profile = tmp_path / "mini.yaml"
    profile.write_text(yaml.safe_dump(params))
    return profile, run_path(profile_cells(params, ("tables",))[1].config, tmp_path / "runs")


@pytest.mark.usefixtures("real_data_dir")
def test_with_busy_skip_a_cell_that_another_process_trains_is_busy_not_failed(tmp_path, capsys):
    from absa_lib.fileio import exclusive_lock

    profile, run = mini_profile(tmp_path)
    run.mkdir(parents=True)
    with exclusive_lock(run / ".lock", "busy"):              # another trainer of this run
        assert main(["grid", "--profile", str(profile), "--part", "tables", "--cell", "1", "--threads", "1",
                     "--busy", "skip"]) == 1
    out = capsys.readouterr().out
    assert f"busy, not trained here: {run}: another process is training this run (pid {os.getpid()})" in out, out
    assert "1 busy in another process, 0 failed" in out
    summary = json.loads((tmp_path / "runs" / "grid_summary_mini_cell1.json").read_text())
    assert (summary["busy"], summary["failed"], summary["trained"]) == (1, 0, 0)
    assert not (run / "metrics.json").exists()
    assert not (tmp_path / "runs" / "grid_logs" / f"{run.name}.log").exists()   # no process started for it


@pytest.mark.usefixtures("real_data_dir")
def test_by_default_the_grid_waits_for_a_busy_run_then_trains_what_its_holder_left(tmp_path, capsys, monkeypatch,
                                                                                   other_trainer):
    """`bash run_all.sh` started while a notebook trains one of its runs used to end with that cell
    "busy" (exit 1) and the notebooks then failing on it; the grid now waits, then resumes the run."""
    import threading

    from absa_lib.training import runs

    monkeypatch.setattr(runs, "BUSY_POLL", 0.2)
    profile, run = mini_profile(tmp_path)
    run.mkdir(parents=True)
    release = other_trainer(run / ".lock")                  # a trainer that stops before finishing
    threading.Timer(2.0, release.set).start()
    assert main(["grid", "--profile", str(profile), "--part", "tables", "--cell", "1", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    assert f"busy in another process ({run}: another process is training this run (pid {os.getpid()})); " \
           "waiting for it" in out, out
    assert "0 failed" in out and "busy in another process," not in out
    summary = json.loads((tmp_path / "runs" / "grid_summary_mini_cell1.json").read_text())
    assert (summary["busy"], summary["trained"]) == (0, 1)
    assert json.loads((run / "metrics.json").read_text())["complete"]


@pytest.mark.usefixtures("real_data_dir")
def test_a_run_taken_by_another_process_after_the_grid_looked_is_waited_for_too(tmp_path, capsys, monkeypatch,
                                                                               other_trainer):
    """The race: the grid saw the run free and started its trainer, but another process took the run
    first; the trainer is refused (exit 75) and the grid waits for the run instead of failing it."""
    import threading

    from absa_lib.harness import runner
    from absa_lib.training import runs

    monkeypatch.setattr(runs, "BUSY_POLL", 0.2)
    profile, run = mini_profile(tmp_path)
    run.mkdir(parents=True)
    release, looks, real_look = other_trainer(run / ".lock"), [], runner.lock_holder

    def look(path):                                         # the first look misses the holder (the race)
        looks.append(path)
        if len(looks) == 2:                                  # the grid waits: let the holder go soon
            threading.Timer(0.5, release.set).start()
        return None if len(looks) == 1 else real_look(path)

    monkeypatch.setattr(runner, "lock_holder", look)
    assert main(["grid", "--profile", str(profile), "--part", "tables", "--cell", "1", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    assert f"busy in another process ({run}: another process is training this run" in out and "waiting for it" in out, out
    summary = json.loads((tmp_path / "runs" / "grid_summary_mini_cell1.json").read_text())
    assert (summary["busy"], summary["failed"], summary["trained"]) == (0, 0, 1)
    assert "another process is training this run" in (tmp_path / "runs" / "grid_logs" / f"{run.name}.log").read_text()


@pytest.mark.usefixtures("real_data_dir")
def test_a_run_that_the_other_process_finishes_is_not_trained_again(tmp_path, capsys, monkeypatch):
    from absa_lib.training import runs

    monkeypatch.setattr(runs, "BUSY_POLL", 0.2)
    profile, run = mini_profile(tmp_path, epochs=20)     # still training when the grid looks (8 epochs: 5 s here)
    argv = subprocess.run([sys.executable, "-m", "absa_lib.cli", "grid", "--profile", str(profile), "--part",
                           "tables", "--list"], capture_output=True, text=True, check=True).stdout.splitlines()[1]
    other = subprocess.Popen([sys.executable, "-m", "absa_lib.cli", *shlex.split(argv)[1:]],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        deadline = time.time() + 120
        while time.time() < deadline and other.poll() is None and not (
                (run / ".lock").exists() and (run / ".lock").read_text().strip() == str(other.pid)):
            time.sleep(0.05)
        assert other.poll() is None, "the other process ended before the grid could see it train"
        assert main(["grid", "--profile", str(profile), "--part", "tables", "--cell", "1", "--threads", "1"]) == 0
        assert other.wait(60) == 0
    finally:
        other.kill()
        other.wait()
    out = capsys.readouterr().out
    assert "waiting for it" in out and f"finished by the other process ({run.name})" in out, out
    summary = json.loads((tmp_path / "runs" / "grid_summary_mini_cell1.json").read_text())
    assert (summary["busy"], summary["trained"], summary["cached"]) == (0, 0, 1)
    assert not (tmp_path / "runs" / "grid_logs" / f"{run.name}.log").exists()   # the grid started nothing


def test_grid_model_filter_keeps_only_those_models_cells(capsys):
    for models, n in ((["bert-pair", "cg-bert"], (1 + 2) * 2), (["bert-single"], 2)):   # per dataset: 1 + 2, 1
        assert main(["grid", "--profile", "smoke", "--part", "tables", "--model", *models, "--count"]) == 0
        assert capsys.readouterr().out.strip() == str(n)
    assert main(["grid", "--profile", "smoke", "--part", "tables", "--model", "bert-single", "--list"]) == 0
    assert all("--model bert-single" in line for line in capsys.readouterr().out.strip().splitlines())
    assert main(["grid", "--profile", "smoke", "--part", "ablations", "--model", "bert-single", "--count"]) == 0
    assert capsys.readouterr().out.strip() == "2"              # per-context batches (the tables' run), mixed
    assert main(["grid", "--profile", "smoke", "--part", "ablations", "--model", "man-bert", "--count"]) == 2
    assert "has no cell of these models" in capsys.readouterr().err
    assert main(["grid", "--profile", "smoke", "--model", "cg-bret", "--count"]) == 2
    assert "--model 'cg-bret' is not a model" in capsys.readouterr().err


def test_grid_seed_filter_keeps_only_those_seeds_cells(tmp_path, capsys):
    profile = tmp_path / "two_seeds.yaml"
    profile.write_text(yaml.safe_dump({**load_profile("smoke"), "seeds": [42, 43], "ablation_seeds": [42]}))
    base = ["grid", "--profile", str(profile), "--part", "tables", "--model", "bert-single"]
    assert main([*base, "--count"]) == 0 and capsys.readouterr().out.strip() == "4"        # 2 datasets x 2 seeds
    assert main([*base, "--seed", "43", "--list"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and all("--seed 43" in line for line in lines)
    assert main([*base, "--seed", "44", "--count"]) == 2
    assert "--model bert-single and --seed 44: profile 'smoke' in --part tables has no cell" in capsys.readouterr().err


def test_a_listing_cut_short_by_its_reader_ends_quietly(monkeypatch, capsys):
    """`absa grid --list | head -n 1`: once the reader has left, no "Broken pipe" error line."""
    from absa_lib.commands import grid as grid_command

    def cut_short(args):
        print("absa train ...")
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(grid_command, "run", cut_short)
    assert main(["grid", "--profile", "smoke", "--list"]) == 141
    assert capsys.readouterr().err == ""


def test_the_cost_of_the_reference_is_summed_per_device_from_finished_records(tmp_path):
    def record(name, env, seconds, complete=True):
        d = tmp_path / "runs" / "sentihood" / "qacg-bert" / name
        d.mkdir(parents=True)
        epochs = [{"epoch": i + 1, "seconds": s, "eval_seconds": 60.0} for i, s in enumerate(seconds)]
        (d / "metrics.json").write_text(json.dumps({"epochs": epochs, "complete": complete}))
        (d / "env.json").write_text(json.dumps(env))
        (d / "config.json").write_text("{}")                        # a run folder; its record is not read

    cpu = {"processor": "x86_64", "cpu_count": 2, "torch_threads": 1}
    record("a", cpu, [3540.0])                                    # 1 h with evaluation
    record("b", cpu, [1740.0, 1740.0])                            # 1 h
    record("c", {"gpu": "NVIDIA H100", **cpu}, [1740.0])          # 0.5 h
    record("d", {"gpu": "NVIDIA H100", **cpu}, [99999.0], complete=False)   # interrupted: not counted
    record("e", {"cpu_model": "AMD EPYC 9R14", **cpu}, [1740.0])  # newer records name the CPU: 0.5 h
    from absa_lib.harness.runner import cost_summary, recorded_cost

    cost = recorded_cost(tmp_path / "runs")
    assert cost["runs"] == 4 and cost["hours"] == pytest.approx(3.0)
    assert cost["devices"] == {"AMD EPYC 9R14 (2 cores, 1 thread)": {"runs": 1, "hours": pytest.approx(0.5)},
                               "NVIDIA H100": {"runs": 1, "hours": pytest.approx(0.5)},
                               "x86_64 (2 cores, 1 thread)": {"runs": 2, "hours": pytest.approx(2.0)}}
    assert cost_summary(tmp_path / "runs") == ("4 runs: 1 on AMD EPYC 9R14 (2 cores, 1 thread), 0.5 h; "
                                               "1 on NVIDIA H100, 0.5 h; 2 on x86_64 (2 cores, 1 thread), "
                                               "2.0 h (training and evaluation, summed over runs)")


def test_the_grid_says_how_many_runs_are_left_and_how_long_they_take():
    from absa_lib.harness.runner import _remaining

    rows = [{"status": "trained", "wall_seconds": 600.0}, {"status": "cached"}, {"status": "trained", "wall_seconds": 1200.0}]
    assert _remaining(rows, 10, 1) == "; 3 of 10 runs done, 7 left, about 1 h 45 min at this grid's pace"
    assert _remaining(rows, 10, 2) == "; 3 of 10 runs done, 7 left, about 1 h 00 min at this grid's pace"
    assert _remaining(rows[1:2], 4, 1) == "; 1 of 4 runs done, 3 left"           # nothing trained: no pace yet
