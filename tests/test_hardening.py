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
    text = to_text(table, runs, shifted, "dev_best")
    assert "no spread to test" in text
    row = next(line for line in text.splitlines() if line.startswith("aspect_f1"))
    assert math.isnan(table["min_detectable"].iloc[0]) and " – " in row and " 0.0 " not in row   # MDD: none, not 0


def test_a_notebooks_figures_do_not_depend_on_the_callers_matplotlib_backend(tmp_path, monkeypatch):
    """``MPLBACKEND=Agg`` where run_all.sh is started (the tests set it) no longer strips the figures from
    the executed notebooks: the kernel gets no MPLBACKEND and shows them inline."""
    import json
    import sys

    import nbformat

    from absa_lib.harness import run_all

    pytest.importorskip("papermill")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot([0, 1], [1, 0]);")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    source, executed = tmp_path / "00_fig.ipynb", tmp_path / "out" / "00_fig.ipynb"
    executed.parent.mkdir()
    source.write_text(nbformat.writes(nb), encoding="utf-8")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    command = [sys.executable, "-m", "papermill", str(source), str(executed), "-k", "python3", "--cwd", str(tmp_path),
               "--no-progress-bar", "--start-timeout", "120"]
    assert run_all.run_notebook("00_fig", command, profile="render", params={}, out=executed.parent, root=tmp_path,
                                executed=executed, render_to=None)
    outputs = json.loads(executed.read_text(encoding="utf-8"))["cells"][0]["outputs"]
    assert any("image/png" in o.get("data", {}) for o in outputs)
    assert run_all.notebook_env("scripts")["MPLBACKEND"] == "Agg" and "MPLBACKEND" not in run_all.notebook_env("papermill")


def test_a_profile_file_that_is_a_folder_is_named_a_folder(tmp_path):
    from absa_lib.errors import AbsaError
    from absa_lib.harness.profiles import read_profile_file

    (tmp_path / "mine.yaml").mkdir()
    with pytest.raises(AbsaError, match=r"mine.yaml: a folder, not a profile file; give the path of a .yaml profile"):
        read_profile_file(tmp_path / "mine.yaml")


@pytest.fixture
def runs(tiny_run, tmp_path) -> Path:
    """A copy of a runs folder holding the session's finished tiny run."""
    import shutil

    trained = tiny_run()
    shutil.copytree(trained.parents[2], tmp_path / "runs")
    return tmp_path / "runs"


def _run_of(runs: Path) -> Path:
    from absa_lib.training.records import run_folders

    return run_folders(runs)[0][0]


def test_a_run_folder_without_its_config_record_is_named_not_left_out(runs, capsys, refused):
    """It was invisible: summary and compare counted the runs beside it and said nothing of it."""
    import shutil

    from absa_lib.cli import main
    from absa_lib.training.records import RunFolder

    run = _run_of(runs)
    shutil.copytree(run, run.parent / "copy")
    RunFolder(run.parent / "copy").config.unlink()
    assert main(["summary", str(runs)]) == 0
    out = capsys.readouterr().out
    assert f"Not counted, no config record:\n- {run.parent / 'copy'}: holds metrics.json but no config.json" in out
    main(["compare", str(runs), str(runs)])
    assert f"[compare] not counted: {run.parent / 'copy'}: holds metrics.json but no config.json" in capsys.readouterr().err
    RunFolder(run).config.unlink()                         # none left that can be counted
    refused(["summary", str(runs)], "no run can be counted", "holds metrics.json but no config.json", "restore its")


def test_a_killed_exports_staging_folder_and_an_export_are_not_runs(runs, capsys):
    """A killed export leaves ``.NAME.*.partial`` (a model's config.json in it): summary listed it as a run
    to resume."""
    import shutil

    from absa_lib.cli import main
    from absa_lib.training.records import run_folders

    run = _run_of(runs)
    partial = runs / ".model.x1y2.partial"
    partial.mkdir()
    (partial / "config.json").write_text("{}")
    assert main(["export", str(run), str(runs / "exported")]) == 0
    shutil.copytree(runs / "exported", runs / "exported2")
    capsys.readouterr()
    assert [f for f, _ in run_folders(runs)] == [run]
    assert main(["summary", str(runs)]) == 0
    out = capsys.readouterr().out
    assert "Not counted" not in out and "partial" not in out and "exported" not in out


def test_export_onto_a_full_disk_says_so_not_a_damaged_checkpoint(runs, tmp_path, monkeypatch, refused):
    """safetensors reports a full disk as its own error, which was taken for a damaged checkpoint."""
    import transformers.modeling_utils as mu
    from safetensors import SafetensorError

    def full(*args, **kwargs):
        raise SafetensorError('Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No space '
                              'left on device" })')
    monkeypatch.setattr(mu, "safe_save_file", full)
    line = refused(["export", str(_run_of(runs)), str(tmp_path / "out")], "out: the export could not be written",
                   "No space left on device", "Free some space")
    assert "damaged" not in line
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.*"))


def test_a_dangling_link_where_a_data_folder_should_be_is_named(tmp_path):
    from absa_lib.errors import AbsaError
    from absa_lib.paths import ensure_writable

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "sentihood").symlink_to(tmp_path / "gone")
    with pytest.raises(AbsaError, match=r"sentihood is a symbolic link to .*gone, which does not exist; create that "
                                        r"folder or remove the link; fix it"):
        ensure_writable(tmp_path / "data" / "sentihood", "fix it")


def test_a_notebook_without_its_paired_script_or_the_other_way_is_named(tmp_path):
    """A missing ``.ipynb`` left its notebook out of the run, silently; a missing ``.py`` was found late."""
    from absa_lib.errors import AbsaError
    from absa_lib.harness.run_all import notebook_names

    (tmp_path / "notebooks").mkdir()
    for name in ("01_a.ipynb", "01_a.py", "02_b.py"):
        (tmp_path / "notebooks" / name).write_text("")
    with pytest.raises(AbsaError, match=r"notebooks/02_b.ipynb: missing beside notebooks/02_b.py; restore it"):
        notebook_names(tmp_path)
    (tmp_path / "notebooks" / "02_b.ipynb").write_text("")
    (tmp_path / "notebooks" / "03_c.ipynb").write_text("")
    with pytest.raises(AbsaError, match=r"notebooks/03_c.py: missing beside notebooks/03_c.ipynb"):
        notebook_names(tmp_path)
    (tmp_path / "notebooks" / "03_c.py").write_text("")
    assert notebook_names(tmp_path) == ["01_a", "02_b", "03_c"]


@pytest.mark.parametrize(("name", "value", "needle"), [
    ("n_hist_examples", "0", "n_hist_examples is 0, expected a whole number of examples, 1 or more"),
    ("num_threads", "-1", "num_threads is -1, expected a number of threads"),
    ("datasets", "[foo]", "datasets is ['foo'], expected a non-empty list of sentihood and semeval"),
    ("ablation_dataset", "foo", "ablation_dataset is 'foo', expected one of sentihood and semeval"),
    ("seeds", "[]", "seeds is [], expected one seed or more"),
    ("seeds", "[42, 42]", "seeds is [42, 42], expected each seed once"),
    ("epochs", "0", "epochs is 0, expected"),
    ("backbone", "nope", "backbone is 'nope', expected one of bert-base-uncased, minilm, bert-base-random, tiny, or a"),
    ("runs_dir", "~nosuchuser89/runs", "runs_dir is '~nosuchuser89/runs', expected a folder's path; its ~user names no")])
def test_a_parameter_out_of_range_is_refused_before_any_notebook_runs(name, value, needle):
    """As the driver reads ``-p`` (and a profile file); a notebook's setup cell refuses the same."""
    from absa_lib.errors import AbsaError
    from absa_lib.harness.profiles import check_ranges, with_changes

    with pytest.raises(AbsaError, match=re.escape(f"-p {name} {value}: {needle}")):
        with_changes(ROOT / "params" / "render.yaml", ["-p", name, value])
    import yaml
    with pytest.raises(AbsaError, match=re.escape(f"05_figures: parameter: {needle}")):
        check_ranges({name: yaml.safe_load(value)}, "05_figures: parameter")


def test_a_file_where_the_results_folder_should_be_is_refused_before_any_notebook_runs(tmp_path, monkeypatch, capsys):
    """It ended in notebook 01's fourth cell as FileExistsError: [Errno 17] File exists."""
    from absa_lib.errors import AbsaError
    from absa_lib.harness import run_all, session

    (tmp_path / "afile").write_text("x")
    monkeypatch.setattr(run_all, "data_lines", lambda data_dir=None, reference=None: pytest.fail("the data step ran"))
    for name, value in {**run_all.OWN_ENV, **run_all.OFFLINE_ENV}.items():    # what the driver sets, undone after
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(ROOT)
    assert run_all.run(["render", "-p", "results_dir", str(tmp_path / "afile")], "python") == 2
    assert capsys.readouterr().err.strip() == (f"[run_all] error: results_dir: cannot write in {tmp_path / 'afile'}: "
                                               f"{tmp_path / 'afile'} is a file, not a folder; give results_dir a "
                                               "folder you can write to (-p results_dir FOLDER)")
    with pytest.raises(AbsaError, match="afile/figures: .*afile is a file, not a folder; give the parameter a folder"):
        session.resolve_dir(tmp_path / "afile" / "figures")
