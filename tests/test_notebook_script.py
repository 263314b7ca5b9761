"""Notebooks without Jupyter: a profile's values go after the parameters cell of the paired script."""

from __future__ import annotations

from pathlib import Path

import pytest

from absa_lib.errors import AbsaError
from absa_lib.harness.notebook_script import run_script, with_parameters
from absa_lib.harness.profiles import notebook_parameters

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = '''# %%
before = "cell 1"

# %% tags=["parameters"]
profile: str = "smoke"    # a comment
seeds: list = [42]
plain = 3

# %%
after = (profile, seeds, plain)
'''


def test_declared_parameters_get_the_profile_values_after_their_cell(tmp_path):
    script = tmp_path / "99_x.py"
    script.write_text(SCRIPT)
    source = with_parameters(script, {"profile": "gpu", "seeds": [42, 43], "other_notebooks_name": 1})
    namespace: dict = {}
    exec(compile(source, str(script), "exec"), namespace)  # noqa: S102
    assert namespace["after"] == ("gpu", [42, 43], 3)            # declared ones replaced, in order
    assert "other_notebooks_name" not in namespace              # names this notebook does not declare


def test_a_script_without_one_parameters_cell_is_refused(tmp_path):
    script = tmp_path / "99_x.py"
    script.write_text(SCRIPT.replace('# %% tags=["parameters"]', "# %%"))
    with pytest.raises(AbsaError, match="99_x.py: expected one cell marked"):
        with_parameters(script, {})


def test_a_value_that_is_not_plain_data_is_refused(tmp_path):
    script = tmp_path / "99_x.py"
    script.write_text(SCRIPT)
    with pytest.raises(AbsaError, match="parameter seeds=.* is not plain data"):
        with_parameters(script, {"seeds": object()})


def test_run_script_runs_from_the_scripts_folder_and_restores_the_cwd(tmp_path, monkeypatch):
    script = tmp_path / "nb" / "99_x.py"
    script.parent.mkdir()
    script.write_text(SCRIPT + "import os\nopen('cwd.txt', 'w').write(os.getcwd())\n")
    (tmp_path / "p.yaml").write_text("profile: cpu\n")
    monkeypatch.chdir(tmp_path)
    run_script(script, tmp_path / "p.yaml")
    assert (script.parent / "cwd.txt").read_text() == str(script.parent) and Path.cwd() == tmp_path


def test_the_scripts_declare_what_papermill_sees_in_the_notebooks():
    pm = pytest.importorskip("papermill")
    from_notebooks: dict[str, list[str]] = {}
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        for name in pm.inspect_notebook(str(path)):
            from_notebooks.setdefault(name, []).append(path.stem)
    assert notebook_parameters() == from_notebooks


def test_a_missing_script_is_one_line(tmp_path, capsys):
    from absa_lib.harness.notebook_script import main

    (tmp_path / "p.yaml").write_text("profile: cpu\n")
    assert main([str(tmp_path / "07_missing.py"), str(tmp_path / "p.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "07_missing.py: cannot be read (No such file or directory)" in err[0]


def test_a_misspelt_parameter_in_the_file_is_refused(tmp_path, capsys):
    # it ran with the default (n_hist_examples 20) and exit status 0
    from absa_lib.harness.notebook_script import main

    (tmp_path / "typo.yaml").write_text("profile: smoke\nn_hist_exampels: 10\n")
    assert main([str(ROOT / "notebooks" / "05_figures.py"), str(tmp_path / "typo.yaml")]) == 2
    assert capsys.readouterr().err.strip() == (f"[notebook_script] error: {tmp_path / 'typo.yaml'}: n_hist_exampels: "
                                               "no notebook has this parameter; expected names as in params/smoke.yaml")


def test_markdown_a_script_shows_is_printed_as_text(capsys):
    from absa_lib.harness.session import show_markdown

    show_markdown("| a | b |\n|---|---|")
    assert capsys.readouterr().out == "| a | b |\n|---|---|\n"        # not <IPython.core.display.Markdown object>
