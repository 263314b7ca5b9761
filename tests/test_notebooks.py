"""Every notebook executes under the smoke profile (papermill, as run_all.sh does) and writes its files.

The notebooks run in order in one session, sharing a run folder in tmp_path, so later notebooks
reuse earlier runs from the cache (as under run_all.sh); each still trains what it lacks, so one
notebook can be run alone (``pytest tests/test_notebooks.py -k 05``). Nothing is written to the
repository's results/ or figures/ (the last test checks it).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import papermill as pm
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

pytestmark = [pytest.mark.slow, pytest.mark.notebooks, pytest.mark.usefixtures("real_data_dir")]

# files each notebook must write (relative to the smoke folder)
EXPECTED = {
    "01_data": ["results/data_statistics.csv", "results/data_statistics.md",
                "figures/data_label_distribution.png", "figures/data_label_distribution.pdf"],
    "02_cg_bert": ["figures/curves_cg_bert.png", "figures/curves_cg_bert.pdf"],
    "03_qacg_bert": ["results/table1_sentihood.csv", "results/table1_sentihood.md",
                     "results/table2_semeval.csv", "results/table2_semeval.md",
                     "figures/curves_qacg_bert.png", "figures/curves_qacg_bert.pdf",
                     "figures/summary.png", "figures/summary.pdf",
                     "results/selection_spread.csv", "results/selection_spread.md"],
    "04_ablations": ["results/ablations.csv", "results/ablations.md", "figures/ablations.png", "figures/ablations.pdf",
                     "figures/curves_cg_no_aux.png", "figures/curves_cg_no_aux.pdf"],
    "05_figures": [f"{folder}/{name}.{ext}" for name in ("fig3_relevance", "fig4_histograms", "fig5_attention")
                   for folder, ext in (("figures", "png"), ("figures", "pdf"), ("results/analysis", "json"))],
    "06_other_attention": ["results/other_attention_sentihood.csv", "results/other_attention_sentihood.md",
                           "results/other_attention_semeval.csv", "results/other_attention_semeval.md",
                           "results/analysis/other_attention.json", "figures/other_attention_maps.png",
                           "figures/other_attention_maps.pdf", "results/claims.csv", "results/claims.md",
                           "results/claims_outcomes.csv", "results/claims_outcomes.md",
                           "figures/claims.png", "figures/claims.pdf"],
}


def _snapshot() -> dict:
    return {str(p.relative_to(ROOT)): p.stat().st_mtime_ns for d in ("results", "figures")
            for p in (ROOT / d).rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """Smoke-profile parameters with every output folder in tmp_path, and the repo's outputs before."""
    base = tmp_path_factory.mktemp("smoke")
    params = yaml.safe_load((ROOT / "params" / "smoke.yaml").read_text())
    params.update(runs_dir=str(base / "runs"), results_dir=str(base / "results"), figures_dir=str(base / "figures"))
    return {"base": base, "params": params, "before": _snapshot()}


def execute(notebook: Path, out: Path, parameters: dict) -> nbformat.NotebookNode:
    """Run ``notebook`` with papermill, given the profile's values of the parameters it declares (as
    run_all.sh does; ``test_papermill_runs_a_notebook_with_a_whole_profile_file`` gives one all of them);
    a failing cell fails the test naming the notebook and cell."""
    from absa_lib.harness.profiles import notebook_parameters

    declared = {name for name, notebooks in notebook_parameters().items() if notebook.stem in notebooks}
    parameters = {k: v for k, v in parameters.items() if k in declared}
    try:
        return pm.execute_notebook(str(notebook), str(out), parameters=parameters, kernel_name="python3",
                                   cwd=str(ROOT / "notebooks"), progress_bar=False, start_timeout=120,
                                   execution_timeout=600)
    except pm.PapermillExecutionError as err:
        pytest.fail(f"{notebook.name}: cell {err.exec_count} raised {err.ename}: {err.evalue} "
                    f"(executed copy: {out})", pytrace=False)


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_under_smoke(notebook, smoke):
    base = smoke["base"]
    nb = execute(notebook, base / f"{notebook.stem}.executed.ipynb", smoke["params"])
    assert nb.metadata.papermill.parameters["profile"] == "smoke"
    missing = [f for f in EXPECTED[notebook.stem] if not (base / f).is_file()]
    assert not missing, f"{notebook.name} did not write {missing}"
    manifest = json.loads((base / "results" / "MANIFEST.json").read_text())
    entry = manifest["notebooks"][notebook.stem]
    assert set(EXPECTED[notebook.stem]) <= set(entry["outputs"]) and entry["profile"] == "smoke"
    for f in entry["outputs"]:
        assert manifest["files"][f]["notebook"] == notebook.stem
    if notebook.stem == "03_qacg_bert":
        import pandas as pd

        t1 = pd.read_csv(base / "results" / "table1_sentihood.csv")
        assert len(t1[t1.source == "reported"]) == 5 and len(t1[t1.source == "ours"]) == 12  # 6 rows x 2 protocols
        ours = t1[t1.source == "ours"]
        assert set(ours.backbone) == {smoke["params"]["backbone"]}
        assert set(ours.n_seeds) == {len(smoke["params"]["seeds"])}
    if notebook.stem == "05_figures":
        fig4 = json.loads((base / "results" / "analysis" / "fig4_histograms.json").read_text())
        assert fig4["data"]["n_examples"] == smoke["params"]["n_hist_examples"]
        assert fig4["meta"]["backbone"] == smoke["params"]["backbone"]


def test_render_profile_rebuilds_figures_from_saved_arrays(smoke):
    """render: no training, the figure data come from a reference folder (here: the smoke results)."""
    base = smoke["base"]
    if not (base / "results" / "analysis" / "fig5_attention.json").is_file():
        pytest.skip("needs the smoke run of 05_figures first")
    params = yaml.safe_load((ROOT / "params" / "render.yaml").read_text())
    params.update(runs_dir=str(base / "results" / "runs"), reference_dir=str(base / "results"),
                  results_dir=str(base / "render" / "results"), figures_dir=str(base / "render" / "figures"))
    for name in ("03_qacg_bert", "05_figures"):
        execute(ROOT / "notebooks" / f"{name}.ipynb", base / f"{name}.render.ipynb", params)
    out = base / "render"
    for f in ("figures/fig3_relevance.png", "figures/fig4_histograms.pdf", "figures/fig5_attention.png",
              "results/table1_sentihood.md", "results/table2_semeval.csv"):
        assert (out / f).is_file(), f
    for name in ("fig3_relevance", "fig4_histograms", "fig5_attention"):    # same data -> same bytes
        assert (out / "figures" / f"{name}.png").read_bytes() == (base / "figures" / f"{name}.png").read_bytes()
    assert (out / "results" / "table1_sentihood.csv").read_bytes() == (base / "results" / "table1_sentihood.csv").read_bytes()
    assert not (out / "results" / "runs").exists()                           # render never copies records


def test_the_paired_scripts_run_without_jupyter_and_write_the_same_files(smoke, tmp_path):
    """ABSA_NOTEBOOKS=scripts (no papermill): the render of 03 and 05 from their .py scripts gives the
    same bytes as the papermill render above."""
    from absa_lib.harness.notebook_script import run_script

    base = smoke["base"]
    if not (base / "render" / "figures" / "fig5_attention.png").is_file():
        pytest.skip("needs the papermill render first")
    params = yaml.safe_load((ROOT / "params" / "render.yaml").read_text())
    params.update(runs_dir=str(base / "results" / "runs"), reference_dir=str(base / "results"),
                  results_dir=str(tmp_path / "results"), figures_dir=str(tmp_path / "figures"))
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    for name in ("03_qacg_bert", "05_figures"):
        run_script(ROOT / "notebooks" / f"{name}.py", tmp_path / "params.yaml")
    for f in ("figures/fig3_relevance.png", "figures/fig5_attention.png", "results/table1_sentihood.csv",
              "results/analysis/fig4_histograms.json"):
        assert (tmp_path / f).read_bytes() == (base / "render" / f).read_bytes(), f


def test_a_failing_cell_names_the_notebook(tmp_path):
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                           "language": "python"}})
    nb.cells = [nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_code_cell("raise ValueError('boom')")]
    path = tmp_path / "99_broken.ipynb"
    nbformat.write(nb, path)
    with pytest.raises(pytest.fail.Exception, match=r"99_broken.ipynb: cell 2 raised ValueError: boom"):
        execute(path, tmp_path / "out.ipynb", {})


def test_the_repository_outputs_were_not_touched(smoke):
    assert _snapshot() == smoke["before"]


def test_papermill_runs_a_notebook_with_a_whole_profile_file(tmp_path):
    """``papermill NB out -f params/smoke.yaml`` as a user types it, with ``-p`` on top (the folders, so
    that nothing is written into the checkout): the notebook skips the other notebooks' parameters in
    one line and runs. 01_data, the cheapest: it trains nothing."""
    folders = [arg for name in ("results_dir", "figures_dir", "runs_dir") for arg in ("-p", name, str(tmp_path / name))]
    done = subprocess.run([sys.executable, "-m", "papermill", str(ROOT / "notebooks" / "01_data.ipynb"),
                           str(tmp_path / "out.ipynb"), "-f", str(ROOT / "params" / "smoke.yaml"), *folders,
                           "-k", "python3", "--cwd", str(ROOT / "notebooks"), "--no-progress-bar"],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    nb = json.loads((tmp_path / "out.ipynb").read_text())
    text = "".join("".join(out.get("text", "")) for cell in nb["cells"] for out in cell.get("outputs", []))
    skipped = [line for line in text.splitlines() if line.startswith("[profile] not parameters of 01_data, skipped")]
    assert len(skipped) == 1 and "ablation_dataset" in skipped[0] and "backbone" not in skipped[0], skipped
    assert "IProgress" not in text and "TqdmWarning" not in text
    assert (tmp_path / "results_dir" / "data_statistics.csv").is_file()
