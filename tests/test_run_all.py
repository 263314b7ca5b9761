"""run_all.sh's front door: a thin bash entry that hands over to one Python driver
(absa_lib/harness/run_all.py), one quiet line per notebook, each notebook handed only the parameters
it declares, a failure named by its cell's error, and under `render` the readable executed notebooks
committed in notebooks/executed/.

The end-to-end tests run run_all.sh in a made-up checkout (this package, two tiny notebooks and a
`render` profile of their own) in tmp_path: a few seconds of papermill each, nothing written here.
The committed notebooks/executed/ are checked against their source notebooks without executing
anything; the byte-for-byte check is `bash run_all.sh render` followed by an empty `git status`.
"""

from __future__ import annotations

import ast
import collections
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

from absa_lib.errors import AbsaError
from absa_lib.harness import default_profile, profiles, run_all
from absa_lib.harness.profiles import PROFILES

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
EXECUTED = ROOT / "notebooks" / "executed"


def _declared_in_ipynb(path: Path) -> set[str]:
    """The names the .ipynb's own cell tagged `parameters` assigns (independently of the paired scripts)."""
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    return {node.target.id for node in ast.parse(cell.source).body
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)}


# ------------------------------------------------------------------------------ parameters per notebook


def test_each_notebook_is_handed_only_the_parameters_it_declares(tmp_path):
    profile = yaml.safe_load((ROOT / "params" / "smoke.yaml").read_text())
    assert run_all.main(["params", str(ROOT / "params" / "smoke.yaml"), str(tmp_path)]) == 0
    files = sorted(tmp_path.glob("*.params.yaml"))
    assert [f.name.removesuffix(".params.yaml") for f in files] == [nb.stem for nb in NOTEBOOKS]
    for nb in NOTEBOOKS:
        given = yaml.safe_load((tmp_path / f"{nb.stem}.params.yaml").read_text())
        assert set(given) == _declared_in_ipynb(nb) & set(profile), nb.stem
        assert given == {k: profile[k] for k in given}, nb.stem               # the profile's values
    # not the whole profile for every notebook (the filter does something): 01_data declares few
    assert len(yaml.safe_load((tmp_path / "01_data.params.yaml").read_text())) < len(profile)


def test_a_profile_with_a_name_no_notebook_declares_writes_no_parameter_files(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text((ROOT / "params" / "smoke.yaml").read_text() + "epocs: 3\n")
    assert run_all.main(["params", str(bad), str(tmp_path / "out")]) == 2
    assert "epocs: no notebook has this parameter" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------ the entry and the driver


def test_run_all_sh_is_a_thin_entry_that_hands_over_to_the_driver():
    """The logic lives in one Python driver: run_all.sh runs no inline Python and ends by handing
    over to it; its early check of the profile's name (before any setup) knows the driver's profiles."""
    text = (ROOT / "run_all.sh").read_text()
    code = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    assert not [ln for ln in code if re.search(r'"\$PY" +-c\b|python3? +-c\b', ln)], code
    assert code[-1] == 'exec "$PY" -m absa_lib.harness.run_all --python "$PY" "$@"'
    listed = re.search(r'^PROFILES="([^"]*)"', text, re.M)
    assert listed and tuple(listed.group(1).split()) == PROFILES
    assert text.startswith("#!/usr/bin/env bash\n# Run every notebook in order")            # the usage comment
    assert all(f"bash run_all.sh {name}" in text for name in PROFILES)


@pytest.mark.parametrize("argv", [["nonsense"], ["--python", sys.executable, "smok"]])
def test_the_driver_refuses_a_profile_that_is_not_in_the_list_as_run_all_sh_does(argv, capsys):
    assert run_all.main(argv) == 2
    err = capsys.readouterr().err
    res = subprocess.run(["bash", str(ROOT / "run_all.sh"), argv[-1]], capture_output=True, text=True, timeout=60,
                         check=False, env={**os.environ, "ABSA_VENV": "/nonexistent/venv"})
    assert res.returncode == 2 and err == res.stderr                                   # the same line
    assert err == f"[run_all] error: unknown profile '{argv[-1]}'; expected one of: {' '.join(PROFILES)} " \
                  "(params/<profile>.yaml)\n"


def test_without_a_profile_the_default_is_chosen_with_its_reason(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(default_profile, "_has_cuda", lambda: False)
    monkeypatch.setattr(default_profile, "reference_line", lambda root: f"[run_all] the reference: in {root}")
    assert default_profile.choose_profile(tmp_path) == "cpu"
    assert capsys.readouterr().err == ("[run_all] no profile given: using 'cpu' (no CUDA GPU was found and "
                                       "results/reference/ has no runs). Others: smoke cpu gpu paper render\n")
    run = tmp_path / "results" / "reference" / "runs" / "sentihood" / "qacg-bert" / "r1"
    run.mkdir(parents=True)
    (run / "config.json").write_text("{}")                              # a run's record, finished or not
    assert default_profile.choose_profile(tmp_path) == "render"
    assert capsys.readouterr().err.splitlines() == [
        f"[run_all] the reference: in {tmp_path}",
        "[run_all] no profile given: using 'render' (no CUDA GPU was found, and results/reference/ holds trained "
        "runs). Others: smoke cpu gpu paper render"]
    monkeypatch.setattr(default_profile, "_has_cuda", lambda: True)
    for cached in (False, True):
        monkeypatch.setattr(default_profile, "_bert_base_cached", lambda cached=cached: cached)
        assert default_profile.choose_profile(tmp_path) == "gpu"
        lines = capsys.readouterr().err.splitlines()
        assert lines[0] == "[run_all] no profile given: using 'gpu' (a CUDA GPU is available). Others: " \
                           "smoke cpu gpu paper render"
        assert lines[1:] == (["[run_all] bert-base-uncased is in the local cache: 'bash run_all.sh paper' runs the "
                              "paper's backbone"] if cached else [])


def test_the_reference_line_names_its_runs_and_how_to_retrain_them():
    line = default_profile.reference_line(ROOT)
    assert re.match(r"\[run_all\] the reference: \d+ runs: .* \(training and evaluation, summed over runs\)\. "
                    r"To retrain seed 42 here: bash run_all.sh cpu \(", line), line
    assert line.endswith("or gpu with CUDA (10 of its 12 table runs took 14 min on one H100; "
                         "docs/evidence/costs_and_speed.md)")


def test_the_driver_asks_for_the_default_in_a_process_of_its_own_and_a_named_profile_never_loads_torch():
    """Only without a profile are torch and the run records read (default_profile, a process apart)."""
    done = subprocess.run([sys.executable, "-c", "import sys, absa_lib.harness.run_all; "
                           "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"],
                          capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"
    assert run_all.choose_profile(sys.executable, ROOT) in PROFILES
    with pytest.raises(AbsaError, match=r"the default profile could not be chosen \(exit 1\); name one"):
        run_all.choose_profile("false", ROOT)


def _stand_in_grid(tmp_path: Path, status: int, lines: list[str]) -> str:
    """An interpreter that, asked for `-m absa_lib.cli grid`, prints ``lines`` (half of them to stderr) and exits."""
    fake = tmp_path / "python"
    body = "".join(f"printf '%s\\n' '{ln}' >&{1 + i % 2}\n" for i, ln in enumerate(lines))
    fake.write_text(f'#!/bin/sh\necho "$*" > {tmp_path / "argv.txt"}\n{body}exit {status}\n')
    fake.chmod(0o755)
    return str(fake)


GRID_LINES = ["[grid] 4 runs to train on cpu", "[grid] sentihood qacg-bert 42: trained in 3.0s; 1 runs done, 1 left",
              "noise from a run", "[grid] semeval qacg-bert 42: trained in 2.0s; 2 runs done, 0 left",
              "[grid] 2 runs: 2 trained, 0 skipped, 0 failed; summary: runs/grid_summary_smoke.json"]


def test_the_grid_goes_to_its_log_and_each_finished_run_to_the_terminal(tmp_path, capsys):
    out = tmp_path / "executed" / "smoke"
    out.mkdir(parents=True)
    python = _stand_in_grid(tmp_path, 0, GRID_LINES)
    assert run_all.train_grid(python, "smoke", out / "params.yaml", out, tmp_path)
    assert (tmp_path / "argv.txt").read_text().split() == ["-m", "absa_lib.cli", "grid", "--profile",
                                                           str(out / "params.yaml")]
    assert sorted((out / "grid.log").read_text().splitlines()) == sorted(GRID_LINES)    # all of it, both streams
    err = capsys.readouterr().err.splitlines()
    assert re.fullmatch(r"\[run_all\] \d\d:\d\d:\d\d training the grid of 'smoke' \(follow it: tail -f "
                        r"executed/smoke/grid\.log\)", err[0]), err
    assert err[1:3] == ["[run_all]   grid sentihood qacg-bert 42: trained in 3.0s; 1 runs done, 1 left",
                        "[run_all]   grid semeval qacg-bert 42: trained in 2.0s; 2 runs done, 0 left"]
    assert re.fullmatch(r"\[run_all\] \d\d:\d\d:\d\d \[grid\] 2 runs: 2 trained, 0 skipped, 0 failed", err[3]), err
    assert len(err) == 4


@pytest.mark.parametrize("lines, reason", [
    (GRID_LINES[:2] + ["[grid] 2 runs: 1 trained, 0 skipped, 1 failed; summary: s.json", "a last word"],
     "[grid] 2 runs: 1 trained, 0 skipped, 1 failed; summary: s.json"),
    (["Traceback (most recent call last):", "ValueError: bad"], "ValueError: bad"),     # no summary: its last line
    ([], ""),
])
def test_a_failed_grid_is_named_with_its_summary_or_last_line_and_its_log(tmp_path, capsys, lines, reason):
    out = tmp_path / "executed" / "cpu"
    out.mkdir(parents=True)
    assert not run_all.train_grid(_stand_in_grid(tmp_path, 3, lines), "cpu", out / "params.yaml", out, tmp_path)
    err = capsys.readouterr().err.splitlines()
    assert err[-2:] == [f"[run_all] FAILED: the grid of runs (profile cpu): {reason}",
                        f"[run_all]   see {out / 'grid.log'} and the run logs it names"]


def test_force_retrain_is_for_the_grid_the_notebooks_collect_its_runs(tmp_path, capsys):
    params = yaml.safe_load((ROOT / "params" / "smoke.yaml").read_text())
    assert run_all.without_force_retrain({**params, "force_retrain": False}, tmp_path) == {**params, "force_retrain": False}
    assert not (tmp_path / "params_notebooks.yaml").exists() and capsys.readouterr().err == ""
    given = run_all.without_force_retrain({**params, "force_retrain": True}, tmp_path)
    assert given == {**params, "force_retrain": False}
    written = tmp_path / "params_notebooks.yaml"
    assert written.read_text() == yaml.safe_dump({**params, "force_retrain": False}, sort_keys=False)
    assert capsys.readouterr().err == "[run_all] force_retrain: the grid retrained every run; the notebooks collect them\n"


@pytest.mark.parametrize("argv", [["render"], ["smoke", "-p", "epochs", "2", "-p", "force_retrain", "true"]])
def test_the_driver_reads_the_profile_once_and_parses_and_checks_each_thing_once(argv, tmp_path, monkeypatch):
    """One run of the driver, stopped short of the data, the grid and the notebooks: it reads the
    profile file once, parses each notebook's parameters cell once and checks each value once (the
    files it writes from them are not read back)."""
    reads, parses, checks = [], [], collections.Counter()
    read, parse, check = profiles.read_profile_file, profiles._parameters_cell, profiles.check_values
    monkeypatch.setattr(profiles, "read_profile_file", lambda path: reads.append(Path(path).name) or read(path))
    monkeypatch.setattr(run_all, "read_profile_file", profiles.read_profile_file)
    monkeypatch.setattr(profiles, "_parameters_cell", lambda lines, script: parses.append(script.name) or parse(lines, script))
    monkeypatch.setattr(profiles, "check_values", lambda params, source: checks.update(
        (k, repr(v)) for k, v in params.items()) or check(params, source))
    profiles._parsed_cell.cache_clear()
    (tmp_path / "params").symlink_to(ROOT / "params")
    (tmp_path / "notebooks").symlink_to(ROOT / "notebooks")
    monkeypatch.setattr(run_all, "_shown_root", lambda root: tmp_path)
    monkeypatch.setattr(run_all, "data_lines", lambda data_dir=None, reference=None: (True, []))
    monkeypatch.setattr(run_all, "train_grid", lambda *args: True)
    monkeypatch.setattr(run_all, "run_notebook", lambda *args, **kwargs: True)
    monkeypatch.setattr(run_all.manifest, "main", lambda args: 0)
    for name, value in {**run_all.OWN_ENV, **run_all.OFFLINE_ENV}.items():    # what the driver sets, undone after
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    assert run_all.run(list(argv), sys.executable) == 0
    assert reads == [f"{argv[0]}.yaml"]
    assert sorted(parses) == sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
    assert checks and set(checks.values()) == {1}
    profile = yaml.safe_load((ROOT / "params" / f"{argv[0]}.yaml").read_text())
    assert len(checks) == len(profile) + argv.count("-p")              # a -p value is checked as well
    assert len(list((tmp_path / "executed" / argv[0]).glob("*.params.yaml"))) == len(NOTEBOOKS)


def test_each_notebook_runs_with_papermill_or_its_paired_script(tmp_path):
    top, out = Path("/r"), Path("/r/executed/cpu")
    assert run_all.notebook_command("py", "scripts", top, out, "02_x") == \
        ["py", "-m", "absa_lib.harness.notebook_script", "/r/notebooks/02_x.py", "/r/executed/cpu/02_x.params.yaml"]
    assert run_all.notebook_command("py", "papermill", top, out, "02_x") == \
        ["py", "-m", "papermill", "/r/notebooks/02_x.ipynb", "/r/executed/cpu/02_x.ipynb", "-k", "python3",
         "--cwd", "/r/notebooks", "-f", "/r/executed/cpu/02_x.params.yaml", "--log-output", "--no-progress-bar",
         "--start-timeout", "120"]


def test_the_notebooks_run_without_papermill_when_asked(monkeypatch):
    monkeypatch.setenv("ABSA_NOTEBOOKS", "scripts")
    assert run_all.notebook_mode() == "scripts"
    monkeypatch.setenv("ABSA_NOTEBOOKS", "")                        # empty: as if unset
    assert run_all.notebook_mode() == "papermill"                   # (the test extras install it)
    monkeypatch.setenv("ABSA_NOTEBOOKS", "script")                  # a typo is refused, not read as papermill
    with pytest.raises(AbsaError, match="ABSA_NOTEBOOKS='script': expected papermill or scripts"):
        run_all.notebook_mode()


# ------------------------------------------------------------------------------ the helpers


def test_written_files_are_those_modified_since_the_start_without_manifest_or_runs(tmp_path):
    import time

    params = {"results_dir": str(tmp_path / "results"), "figures_dir": str(tmp_path / "figures"),
              "reference_dir": str(tmp_path / "results" / "reference"),
              "runs_dir": str(tmp_path / "results" / "reference" / "runs")}
    for f in ("results/old.csv", "results/reference/runs/r/metrics.json"):
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("x")
    old = time.time() - 60
    os.utime(tmp_path / "results" / "old.csv", (old, old))
    start = time.time() - 1
    for f in ("results/t.csv", "results/t.md", "results/analysis/a.json", "figures/f.png", "results/MANIFEST.json",
              "results/reference/runs/r/config.json", "results/reference/analysis/b.json"):
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("y")
    found = run_all.written_files(params, start, tmp_path)
    assert [p.relative_to(tmp_path).as_posix() for p in found] == \
        ["results/t.csv", "results/t.md", "results/analysis/a.json", "figures/f.png"]
    assert run_all.describe_written(found, tmp_path) == "4 files (results/ 2, results/analysis/ 1, figures/ 1)"
    assert run_all.describe_written([], tmp_path) == "no files written"
    assert run_all.describe_written(found[-1:], tmp_path) == "1 file (figures/ 1)"


def test_how_long_a_notebook_took_is_read_in_seconds_then_minutes():
    assert run_all.took(100.0, now=112.34) == "12.3s" and run_all.took(0.0, now=600.0) == "600s (10.0 min)"


def test_the_failing_cell_is_found_as_papermill_finds_it(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import sys; sys.exit(0)", execution_count=1),
                nbformat.v4.new_code_cell("raise ValueError('boom\\nsecond line')", execution_count=2)]
    nb.cells[0].outputs = [nbformat.v4.new_output("error", ename="SystemExit", evalue="0", traceback=[])]
    nb.cells[1].outputs = [nbformat.v4.new_output("error", ename="ValueError", evalue="boom\nsecond line",
                                                  traceback=["..."])]
    nbformat.write(nb, tmp_path / "x.ipynb")
    assert run_all.cell_error(tmp_path / "x.ipynb") == "cell 2 raised ValueError: boom second line"
    assert run_all.cell_error(tmp_path / "missing.ipynb") is None
    log = tmp_path / "x.log"
    log.write_text('Traceback (most recent call last):\n  File "/a/absa_lib/harness/notebook_script.py", line 9, in run\n'
                   '  File "/r/notebooks/02_x.py", line 41, in <module>\n    f()\n'
                   '  File "/r/notebooks/02_x.py", line 7, in f\nKeyError: \'seeds\'\n')
    assert run_all.log_error(log, "notebooks/02_x.py") == "notebooks/02_x.py line 7 raised KeyError: 'seeds'"
    assert run_all.log_error(log) == "KeyError: 'seeds'"


def test_a_normalized_notebook_holds_no_times_no_random_id_and_no_checkout_path(tmp_path):
    root = tmp_path / "checkout"
    nb = nbformat.v4.new_notebook(metadata={"papermill": {"start_time": "t0", "end_time": "t1", "duration": 1.5,
                                                          "input_path": f"{root}/notebooks/a.ipynb",
                                                          "output_path": "/x/a.ipynb", "parameters": {"n": 1}}})
    injected = nbformat.v4.new_code_cell("n = 1", execution_count=1,
                                         metadata={"tags": ["injected-parameters"], "execution": {"iopub": "t"},
                                                   "papermill": {"duration": 0.1, "start_time": "t", "status": "completed"}})
    out = nbformat.v4.new_code_cell("print(...)", execution_count=2)
    out.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"results: {root}/results\nroot: {root}\n"
                                          f"other: {root}2/results\n"),
                   nbformat.v4.new_output("stream", name="stderr",
                                          text="/tmp/ipykernel_25649/2720775883.py:13: UserWarning: w\n"),
                   nbformat.v4.new_output("display_data", data={"text/plain": f"{root}/figures/f.png",
                                                                "image/png": "iVBORw0KGgo="})]
    nb.cells = [injected, out]
    data = json.loads(json.dumps(nb))
    clean = run_all.normalized(data, root)
    assert clean["metadata"]["papermill"] == {"parameters": {"n": 1}}
    assert clean["cells"][0]["id"] == "injected-parameters"
    assert clean["cells"][0]["metadata"] == {"tags": ["injected-parameters"], "papermill": {"status": "completed"}}
    assert clean["cells"][1]["outputs"][0]["text"] == ["<cell>:13: UserWarning: w\n"]    # no process id
    assert clean["cells"][1]["outputs"][1]["text"] == ["results: results\n", "root: .\n", f"other: {root}2/results\n"]
    assert clean["cells"][1]["outputs"][2]["data"] == {"text/plain": "figures/f.png", "image/png": "iVBORw0KGgo="}
    assert data["metadata"]["papermill"]["duration"] == 1.5                 # the input is left as it was
    text = run_all.notebook_bytes(clean)
    assert text.endswith(b"}\n") and text == run_all.notebook_bytes(json.loads(text))
    nbformat.validate(nbformat.reads(text.decode(), as_version=4))


def test_a_cells_printing_is_the_same_however_the_kernel_cut_it_into_pieces():
    """The kernel sends printed text as its flush timer fires: one run cut `a\nb\n` into two stream
    outputs where the other sent one (the render of 04 and 06 differed so)."""
    def stream(name, text):
        return {"name": name, "output_type": "stream", "text": text}

    figure = {"output_type": "display_data", "data": {"image/png": "iVBORw0KGgo="}, "metadata": {}}
    one = [stream("stdout", ["a\n", "b\n"]), figure, stream("stdout", "c\n")]
    pieces = [stream("stdout", ["a\n"]), stream("stderr", "warn\n"), stream("stdout", "b\n"), figure,
              stream("stdout", "c"), stream("stdout", "\n")]
    assert run_all.merged_streams(one) == [stream("stdout", ["a\n", "b\n"]), figure, stream("stdout", ["c\n"])]
    assert run_all.merged_streams(pieces) == [stream("stderr", ["warn\n"]), stream("stdout", ["a\n", "b\n"]), figure,
                                              stream("stdout", ["c\n"])]


# ------------------------------------------------------------------------------ end to end, in a made-up checkout

WRITER = '''\
import sys
import warnings
from pathlib import Path

root = Path.cwd().parent                     # papermill --cwd notebooks/
for folder in (results_dir, figures_dir):
    (root / folder).mkdir(parents=True, exist_ok=True)
(root / results_dir / "table.csv").write_text("a,b\\n1,2\\n")
(root / results_dir / "table.md").write_text("| a | b |\\n")
(root / figures_dir / "fig.png").write_bytes(b"not a png")
print("NOISE on stdout: wrote into", root / results_dir)
print("NOISE on stderr", file=sys.stderr)
warnings.warn("NOISE as a warning", stacklevel=1)
{"a table": [1, 2, 3]}'''

CHECKER = '''\
seen = {k for k in globals() if not k.startswith("_")}
assert "results_dir" not in seen, "a parameter this notebook does not declare was injected"
if fail:
    raise ValueError("boom: the made-up failure")
print("checked")'''


def _write_notebook(folder: Path, name: str, parameters: str, body: str) -> None:
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                           "language": "python"}})
    nb.cells = [nbformat.v4.new_markdown_cell(f"# {name}"),
                nbformat.v4.new_code_cell(parameters, metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell(body)]
    for i, cell in enumerate(nb.cells):
        cell.id = str(i)
    nbformat.write(nb, folder / f"{name}.ipynb")
    (folder / f"{name}.py").write_text(f'# %% [markdown]\n# # {name}\n\n# %% tags=["parameters"]\n{parameters}\n\n'
                                       f"# %%\n{body}\n")


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """run_all.sh, this package and two tiny notebooks, with a `render` profile of their own."""
    root = tmp_path_factory.mktemp("checkout")
    shutil.copy(ROOT / "run_all.sh", root / "run_all.sh")
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")          # marks the checkout (repo_root)
    shutil.copytree(ROOT / "absa_lib", root / "absa_lib", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "notebooks").mkdir()
    (root / "params").mkdir()
    _write_notebook(root / "notebooks", "01_writer", 'profile: str = "render"\nresults_dir: str = "results"\n'
                    'figures_dir: str = "figures"\nallow_training: bool = False', WRITER)
    _write_notebook(root / "notebooks", "02_checker", 'profile: str = "render"\nfail: bool = False', CHECKER)
    profile = {"profile": "render", "results_dir": "out/results", "figures_dir": "out/figures",
               "allow_training": False, "fail": False}
    for name in PROFILES:
        (root / "params" / f"{name}.yaml").write_text(yaml.safe_dump({**profile, "profile": name}, sort_keys=False))
    return root


def _run(checkout: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ABSA_NOTEBOOKS")}
    return subprocess.run(["bash", str(checkout / "run_all.sh"), *args], cwd=checkout, capture_output=True, text=True,
                          timeout=300, check=False, env={**environ, "ABSA_PYTHON": sys.executable, **env})


@pytest.fixture(scope="module")
def rendered(checkout) -> dict:
    """`bash run_all.sh render` in the made-up checkout, twice: the second run's output and both runs'
    normalized notebooks."""
    first = _run(checkout, "render")
    assert first.returncode == 0, first.stdout + first.stderr
    copies = {p.name: p.read_bytes() for p in sorted((checkout / "notebooks" / "executed").glob("*.ipynb"))}
    second = _run(checkout, "render")
    assert second.returncode == 0, second.stdout + second.stderr
    return {"res": second, "first_copies": copies}


@pytest.mark.slow
def test_render_prints_one_line_per_notebook_and_the_summary(rendered, checkout):
    res = rendered["res"]
    terminal = (res.stdout + res.stderr).splitlines()
    lines = {name: [ln for ln in terminal if re.match(rf"\[run_all\] \d\d:\d\d:\d\d {name} ", ln)]
             for name in ("01_writer", "02_checker")}
    assert all(len(v) == 1 for v in lines.values()), terminal
    assert re.fullmatch(r"\[run_all\] \d\d:\d\d:\d\d 01_writer +\d+\.\ds  3 files \(out/results/ 2, out/figures/ 1\)"
                        r"  log: executed/render/01_writer\.log", lines["01_writer"][0]), lines
    assert re.fullmatch(r"\[run_all\] \d\d:\d\d:\d\d 02_checker +\d+\.\ds  no files written"
                        r"  log: executed/render/02_checker\.log", lines["02_checker"][0]), lines
    assert any(ln.startswith("[run_all] all notebooks ran under 'render' in ") for ln in terminal)
    assert any(ln.startswith("[manifest] ") for ln in terminal)
    assert len(terminal) <= 12, terminal


@pytest.mark.slow
def test_papermill_and_the_notebooks_output_go_to_the_log_not_the_terminal(rendered, checkout):
    res = rendered["res"]
    terminal = res.stdout + res.stderr
    log = (checkout / "executed" / "render" / "01_writer.log").read_text()
    for noise in ("NOISE on stdout", "NOISE on stderr", "NOISE as a warning", "Executing", "a table"):
        assert noise not in terminal and noise in log, noise
    for noise in ("Passed unknown parameter", "Input Notebook", "IProgress", "without encryption", "Traceback"):
        assert noise not in terminal, noise
    assert "Passed unknown parameter" not in log + (checkout / "executed" / "render" / "02_checker.log").read_text()


@pytest.mark.slow
def test_each_notebook_ran_with_only_its_declared_parameters(rendered, checkout):
    out = checkout / "executed" / "render"
    assert yaml.safe_load((out / "02_checker.params.yaml").read_text()) == {"profile": "render", "fail": False}
    executed = json.loads((out / "02_checker.ipynb").read_text())
    assert executed["metadata"]["papermill"]["parameters"] == {"profile": "render", "fail": False}
    assert "checked" in json.dumps(executed["cells"][-1]["outputs"])     # its own check of the injected names ran


@pytest.mark.slow
def test_render_writes_normalized_copies_that_a_second_run_reproduces_byte_for_byte(rendered, checkout):
    copies = {p.name: p.read_bytes() for p in sorted((checkout / "notebooks" / "executed").glob("*.ipynb"))}
    assert sorted(copies) == ["01_writer.ipynb", "02_checker.ipynb"]
    assert copies == rendered["first_copies"]
    text = copies["01_writer.ipynb"].decode()
    assert text.endswith("}\n") and str(checkout) not in text
    nb = nbformat.reads(text, as_version=4)
    nbformat.validate(nb)
    assert "start_time" not in text and "duration" not in text and "iopub" not in text
    outputs = json.dumps([c.get("outputs", []) for c in nb.cells])
    assert "wrote into out/results" in outputs and "a table" in outputs          # the outputs are kept
    assert [c.id for c in nb.cells] == ["0", "1", "injected-parameters", "2"]
    # papermill's own executed copy keeps its times
    assert "start_time" in (checkout / "executed" / "render" / "01_writer.ipynb").read_text()


@pytest.mark.slow
def test_a_failing_cell_is_named_with_the_log_and_the_executed_copy(rendered, checkout):
    before = {p.name: p.read_bytes() for p in (checkout / "notebooks" / "executed").glob("*.ipynb")}
    res = _run(checkout, "render", "-p", "fail", "true")
    assert res.returncode == 1
    out = checkout / "executed" / "render"
    err = res.stderr
    assert re.search(r"\[run_all\] \d\d:\d\d:\d\d 02_checker +FAILED after \d+\.\ds: "
                     r"cell 3 raised ValueError: boom: the made-up failure\n", err), err
    assert f"log:           {out / '02_checker.log'}" in err
    assert f"executed copy: {out / '02_checker.ipynb'} (with the error)" in err
    assert "Traceback" not in err and "[run_all] all notebooks ran" not in err
    # -p changes: the committed readable copies are left as they were
    assert {p.name: p.read_bytes() for p in (checkout / "notebooks" / "executed").glob("*.ipynb")} == before


def test_the_notebook_scripts_get_their_parameters_and_a_failure_names_the_script_line(checkout):
    res = _run(checkout, "render", "-p", "fail", "true", ABSA_NOTEBOOKS="scripts")
    assert res.returncode == 1
    out = checkout / "executed" / "render"
    assert re.search(r"\[run_all\] \d\d:\d\d:\d\d 01_writer +\d+\.\ds  3 files \(out/results/ 2, out/figures/ 1\)",
                     res.stderr), res.stderr
    assert re.search(r"02_checker +FAILED after \d+\.\ds: notebooks/02_checker\.py line 12 raised "
                     r"ValueError: boom: the made-up failure\n", res.stderr), res.stderr
    assert f"log:           {out / '02_checker.log'}" in res.stderr and "executed copy" not in res.stderr
    assert "NOISE" not in res.stdout + res.stderr
    ok = _run(checkout, "render", ABSA_NOTEBOOKS="scripts")
    assert ok.returncode == 0, ok.stderr
    assert "checked" in (out / "02_checker.log").read_text()     # the script saw only the names it declares


# ------------------------------------------------------------------------------ the committed readable notebooks


def _cells(nb) -> list[tuple]:
    return [(c.id, c.cell_type, c.source) for c in nb.cells if "injected-parameters" not in c.metadata.get("tags", [])]


def test_the_committed_executed_notebooks_are_those_of_the_source_notebooks():
    """notebooks/executed/ holds one copy per notebook, whose cells (code and markdown, the injected
    parameters aside) are the source notebook's: a notebook edited without `bash run_all.sh render`
    fails here."""
    assert sorted(p.name for p in EXECUTED.glob("*.ipynb")) == [p.name for p in NOTEBOOKS]
    for path in NOTEBOOKS:
        source, executed = nbformat.read(path, as_version=4), nbformat.read(EXECUTED / path.name, as_version=4)
        assert _cells(executed) == _cells(source), f"{path.name}: run `bash run_all.sh render` to refresh its copy"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_committed_executed_notebook_ran_under_render_and_holds_nothing_volatile(path):
    copy = EXECUTED / path.name
    text = copy.read_text(encoding="utf-8")
    nb = nbformat.reads(text, as_version=4)
    nbformat.validate(nb)
    assert run_all.notebook_bytes(json.loads(text)) == text.encode("utf-8"), "not written as run_all writes it"
    assert run_all.normalized(json.loads(text), ROOT) == json.loads(text), "volatile metadata left in"
    assert not set(run_all.VOLATILE) & set(nb.metadata.papermill)
    render = yaml.safe_load((ROOT / "params" / "render.yaml").read_text())
    assert nb.metadata.papermill.parameters == {k: v for k, v in render.items() if k in _declared_in_ipynb(path)}
    for cell in nb.cells:
        assert "execution" not in cell.metadata and not set(run_all.VOLATILE) & set(cell.metadata.get("papermill", {}))
        if cell.cell_type == "code":
            assert cell.execution_count is not None, f"{path.name}: a cell that did not run"
            assert not any(o.output_type == "error" for o in cell.outputs)
    assert "/work/" not in text and "/home/" not in text and "/tmp/" not in text      # no machine's path


def test_the_executed_notebooks_are_committed_not_ignored():
    res = subprocess.run(["git", "check-ignore", "-q", "notebooks/executed/01_data.ipynb"], cwd=ROOT,
                         check=False, timeout=30)
    assert res.returncode == 1                                          # 1: not ignored
    res = subprocess.run(["git", "check-ignore", "-q", "executed/render/01_data.ipynb"], cwd=ROOT,
                         check=False, timeout=30)
    assert res.returncode == 0
    assert (EXECUTED / "README.md").is_file()


def test_the_data_step_finds_the_files_or_says_how_to_point_at_a_copy(tmp_path, monkeypatch, real_data_dir):
    from absa_lib.errors import AbsaError
    from absa_lib.harness import run_all
    from absa_lib.harness.run_all import data_lines

    ok, lines = data_lines(str(real_data_dir))
    assert ok and lines == [f"[data] the benchmark files are in {real_data_dir}"]

    def offline(*args, **kwargs):
        raise AbsaError("could not download sentihood/sentihood-train.json (1,013,925 bytes): no network; check "
                          "the network, or place the file yourself")

    monkeypatch.setattr(run_all, "download", offline)
    ok, lines = data_lines(str(tmp_path))
    assert not ok and lines[0].startswith(f"[data] not in {tmp_path}: ") and "sentihood-train.json is missing" in lines[0]
    assert lines[2] == "[data] FAILED: could not download sentihood/sentihood-train.json (1,013,925 bytes): no network"
    assert "ABSA_DATA_DIR" in lines[3] and all(len(line) <= 100 for line in lines[3:])


def test_help_prints_the_usage_and_sets_nothing_up():
    """`bash run_all.sh --help`: the usage comment, exit 0, before any interpreter or venv is touched."""
    done = subprocess.run(["bash", str(ROOT / "run_all.sh"), "--help"], capture_output=True, text=True, timeout=30,
                          env={**os.environ, "ABSA_PYTHON": "/nonexistent/python"})
    assert done.returncode == 0, done.stderr
    assert "bash run_all.sh render     # no training" in done.stdout and "#" not in done.stdout.splitlines()[0]
    assert done.stderr == ""


def test_a_profile_that_trains_nothing_refuses_a_runs_folder_without_runs_and_writes_nothing(tmp_path, monkeypatch,
                                                                                              capsys):
    """render over an empty folder, a mistyped one or a profile without runs_dir would write empty tables
    over the committed ones (issue 89): refused before any notebook runs, and a mistyped folder is not made."""
    ran = []
    (tmp_path / "params").symlink_to(ROOT / "params")
    (tmp_path / "notebooks").symlink_to(ROOT / "notebooks")
    monkeypatch.setattr(run_all, "_shown_root", lambda root: tmp_path)
    monkeypatch.setattr(run_all, "data_lines", lambda data_dir=None, reference=None: (True, []))
    monkeypatch.setattr(run_all, "run_notebook", lambda *args, **kwargs: ran.append(args[0]) or True)
    monkeypatch.setattr(run_all.manifest, "main", lambda args: 0)
    for name, value in {**run_all.OWN_ENV, **run_all.OFFLINE_ENV}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty").mkdir()
    for folder, why in ((tmp_path / "empty", "no finished run records in it"), (tmp_path / "typo", "no such folder")):
        assert run_all.run(["render", "-p", "runs_dir", str(folder)], sys.executable) == 2
        err = capsys.readouterr().err
        assert f"[run_all] error: runs_dir {folder}: {why}; profile render trains nothing" in err, err
    assert not (tmp_path / "typo").exists() and ran == []
    monkeypatch.setattr(run_all.profiles, "write_with_changes", lambda *a: {       # a profile file without it
        k: v for k, v in yaml.safe_load((ROOT / "params" / "render.yaml").read_text()).items() if k != "runs_dir"})
    assert run_all.run(["render"], sys.executable) == 2
    assert "names no runs_dir to draw its tables from" in capsys.readouterr().err and ran == []


def test_a_notebook_that_trains_nothing_refuses_an_empty_runs_folder_in_its_setup_cell(tmp_path):
    with pytest.raises(AbsaError, match=r"runs_dir .*/nothing: no such folder; profile render trains nothing"):
        profiles.check_runs_to_draw(tmp_path / "nothing", "render")
    assert not (tmp_path / "nothing").exists()
    profiles.check_runs_to_draw(ROOT / "results" / "reference" / "runs", "render")       # the committed records
