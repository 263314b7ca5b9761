"""Notebook support: the session (profiles, folders), the grid of runs, the ablation list, the manifest,
and the figure data (tiny model)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch

from absa_lib.data import datasets as data
from absa_lib.data import features
from absa_lib.errors import AbsaError
from absa_lib.harness import grid, manifest, profiles, session
from absa_lib.harness.ablations import ABLATIONS, changed_fields, reference_of
from absa_lib.paths import repo_root
from absa_lib.reports import figure_data


def write_run(root, dataset="sentihood", model="qacg-bert", aux="NLI-M", seed=1, complete=True, **cfg):
    from absa_lib.evaluation.metrics import selection_metric
    from absa_lib.training.config import config_hash
    from absa_lib.training.records import select_epochs
    from absa_lib.training.records.upgrade import config_identity as recorded_identity

    config = {"dataset": dataset, "model": model, "aux": aux, "seed": seed, "preset": "paper", "sampler": "uniform",
              "model_overrides": {}, "backbone": "minilm", "epochs": 1, **cfg}
    config["run_id"] = run_id = config_hash(recorded_identity(config))      # what load_run checks
    path = root / dataset / model / run_id
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps(config))
    metric = selection_metric(dataset)                                        # one epoch, selected as recorded
    epochs = [{"epoch": 1, "dev": {metric: 0.5}, "test": {metric: 0.5}}]
    record = {"complete": complete, "epochs": epochs, "selection_metric": metric,
              "selection": select_epochs(epochs, metric)}
    (path / "metrics.json").write_text(json.dumps(record))
    (path / "env.json").write_text("{}")
    (path / "predictions_test.csv").write_text("x\n")
    (path / "checkpoints" / "best").mkdir(parents=True)
    (path / "checkpoints" / "best" / "model.safetensors").write_bytes(b"0")
    return path


def test_render_mode_collects_existing_records_only(tmp_path):
    write_run(tmp_path, seed=1)
    write_run(tmp_path, seed=2, backbone_note="x")
    write_run(tmp_path, seed=3, complete=False)                       # unfinished: ignored
    write_run(tmp_path, aux="none", seed=1)
    write_run(tmp_path, seed=4, preset="official")
    specs = [grid.Spec("QACG aux", "qacg-bert", "NLI-M"), grid.Spec("CG", "cg-bert", "none")]
    found = grid.run_grid(specs, ["sentihood"], [42], {}, tmp_path, allow_training=False)
    assert sorted(r.config.seed for r in found[("sentihood", "QACG aux")]) == [1, 2]
    assert found[("sentihood", "CG")] == []
    runs = grid.flatten(found)
    written = grid.export_records(runs, tmp_path / "results")
    assert sorted({p.name for p in written}) == ["config.json", "env.json", "metrics.json"]
    assert len(written) == 6 and not list((tmp_path / "results").rglob("*.csv"))
    assert not list((tmp_path / "results").rglob("*.safetensors"))


def test_table_specs_follow_the_paper_rows():
    specs = grid.table_specs("semeval", ("qacg-bert", "bert-pair"))
    assert [(s.label, s.model, s.aux) for s in specs] == [
        ("BERT-pair (Sun et al. 2019)", "bert-pair", "NLI-M"), ("QACG-BERT", "qacg-bert", "none"),
        ("QACG-BERT (auxiliary sentences)", "qacg-bert", "NLI-M")]
    cfgs = grid.make_configs(specs[1], "semeval", [1, 2], backbone="tiny", epochs=1)
    assert [(c.seed, c.model, c.aux, c.preset, c.sampler) for c in cfgs] == [
        (1, "qacg-bert", "none", "paper", "uniform"), (2, "qacg-bert", "none", "paper", "uniform")]


def test_paths_and_profiles(tmp_path):
    assert session.resolve_dir("executed/x", create=False) == repo_root() / "executed" / "x"
    assert session.resolve_dir(tmp_path / "a" / "b") == tmp_path / "a" / "b" and (tmp_path / "a" / "b").is_dir()
    smoke = profiles.load_profile("smoke")
    assert profiles.check_profile("smoke", dict(smoke), verbose=False) == []
    assert profiles.check_profile("smoke", {**smoke, "epochs": 7, "seeds": [1]}, verbose=False) == ["epochs", "seeds"]
    with pytest.raises(AbsaError, match="no such profile"):
        profiles.load_profile("huge")
    base = grid.train_base({**smoke, "train_options": {"precision": "fp32"}})
    assert base == {**{k: smoke[k] for k in grid.TRAIN_FIELDS}, "precision": "fp32"}
    with pytest.raises(AbsaError, match="missing"):
        grid.train_base({"profile": "smoke", "epochs": 1})


def test_setup_takes_the_parameters_the_notebook_declares(tmp_path, capsys, monkeypatch):
    checked = []                                   # every notebook checks the data first, so each runs alone
    monkeypatch.setattr(session, "ensure_data", checked.append)
    namespace = {"__annotations__": {"profile": str, "results_dir": str, "figures_dir": str},
                 "profile": "smoke", "results_dir": str(tmp_path / "r"), "figures_dir": str(tmp_path / "f"),
                 "session": session, "In": [""], "_": None}       # a module, IPython's own names: not parameters
    nb = session.setup("01_data", namespace)
    assert checked == [None]
    session.setup("02_cg_bert", {"__annotations__": {"profile": str, "data_dir": str}, "profile": "smoke",
                                 "data_dir": str(tmp_path / "d")})
    assert checked == [None, str(tmp_path / "d")]
    assert nb.params == {"profile": "smoke", "results_dir": str(tmp_path / "r"), "figures_dir": str(tmp_path / "f")}
    assert nb.dirs.results == tmp_path / "r" and nb.dirs.results.is_dir() and nb.dirs.runs is None
    out = capsys.readouterr().out                                 # only declared names are compared
    assert nb.data_dir is None and "changed parameters: figures_dir=" in out
    (tmp_path / "r" / "t.csv").write_text("x\n")
    nb.outputs.append(tmp_path / "r" / "t.csv")
    nb.finish()
    entry = manifest.load(tmp_path / "r")["notebooks"]["01_data"]
    assert entry["parameters"] == nb.params and entry["outputs"] == ["r/t.csv"]
    # the profile's name does not vouch for values it does not hold: the manifest names them
    assert entry["changed_parameters"] == ["figures_dir", "results_dir"]
    assert "(profile smoke, changed: figures_dir, results_dir)" in capsys.readouterr().out


def test_manifest_records_notebooks_and_finds_unclaimed_files(tmp_path):
    results, figures = tmp_path / "results", tmp_path / "figures"
    results.mkdir(), figures.mkdir()
    (results / "t.csv").write_text("a\n")
    (figures / "f.png").write_bytes(b"png")
    (figures / "stray.png").write_bytes(b"?")
    for folder in (results, figures, figures / "sub"):          # the folders' own READMEs are docs, not outputs
        folder.mkdir(exist_ok=True)
        (folder / "README.md").write_text("# what is here\n")
    (results / "reference" / "runs").mkdir(parents=True)
    (results / "reference" / "runs" / "config.json").write_text("{}")
    manifest.record(results, "03_qacg_bert", "smoke", [results / "t.csv", figures / "f.png"], ["abc", "abc"], {"seeds": [1]})
    manifest.record(results, "05_figures", "smoke", [])
    m = manifest.finalize(results, figures)
    assert m["files"]["results/t.csv"]["notebook"] == "03_qacg_bert"
    assert m["files"]["figures/f.png"]["sha256"] == manifest.sha256(figures / "f.png")
    assert m["notebooks"]["03_qacg_bert"]["run_ids"] == ["abc"] and m["profile"] == "smoke"
    assert m["unattributed"] == ["figures/stray.png", "figures/sub/README.md"]
    assert m["reference"] == ["results/reference/runs/config.json"]
    # a notebook's new entry replaces the old one; identical outputs give identical bytes
    before = (results / "MANIFEST.json").read_bytes()
    manifest.record(results, "03_qacg_bert", "smoke", [results / "t.csv", figures / "f.png"], ["abc"], {"seeds": [1]})
    manifest.finalize(results, figures)
    assert (results / "MANIFEST.json").read_bytes() == before
    manifest.record(results, "03_qacg_bert", "smoke", [results / "t.csv"])
    assert "figures/f.png" not in manifest.load(results)["files"]
    (results / "t.csv").unlink()
    with pytest.raises(AbsaError, match="missing"):
        manifest.finalize(results, figures)
    assert manifest.main(["--results-dir", str(results), "--figures-dir", str(figures)]) == 2


# ---------------------------------------------------------------------------------------------
# figure data on a tiny random QACG-BERT


def ex(sid, text, target, aspect, label):
    return data.Example("sentihood", "test", sid, text, target, aspect, label, data.context_id("sentihood", target, aspect))


@pytest.fixture(scope="module")
def tiny():
    from absa_lib.models import build_model, load_tokenizer

    torch.manual_seed(0)
    model = build_model("qacg-bert", backbone="tiny", num_labels=3, num_contexts=8, preset="official").eval()
    return model, load_tokenizer("tiny")


EXAMPLES = [ex("1", "LOCATION1 is nice , but it 's not cheap", "LOCATION1", a, lab)
            for a, lab in zip(data.ASPECTS["sentihood"], ("Positive", "Negative", "None", "None"),
                              strict=True)]
EXAMPLES += [ex("2", "LOCATION1 posh ; LOCATION2 cheap and shabby", t, a, lab)
             for t in ("LOCATION1", "LOCATION2")
             for a, lab in zip(data.ASPECTS["sentihood"], ("None", "Negative", "None", "None"), strict=True)]


def test_histograms_count_every_unpadded_entry_of_non_none_examples(tiny):
    model, tok = tiny
    h = figure_data.component_histograms(model, tok, EXAMPLES, n=50, seed=0, batch_size=2)
    chosen = [e for e in EXAMPLES if e.label != "None"]
    assert h["n_examples"] == len(chosen) == 4 and [tuple(k) for k in h["keys"]] == [e.key for e in chosen]
    lengths = [len(features.encode_batch([e], "none", tok)[1][0]) for e in chosen]
    L, H = h["layers"], h["heads"]
    assert (L, H) == (2, 4)
    hist = h["histograms"]
    assert hist["a_hat"]["n"] == L * H * sum(t * t for t in lengths)           # padding excluded
    assert hist["lambda_a"]["n"] == L * H * sum(lengths)
    assert sum(hist["a_self"]["counts"]) == hist["a_self"]["n"]                 # softmax: all in [0, 1]
    assert hist["a_quasi"]["below"] == hist["a_quasi"]["above"] == 0
    assert -1 <= hist["lambda_a"]["min"] and hist["lambda_a"]["max"] <= 1
    assert -1 <= hist["a_hat"]["min"] and hist["a_hat"]["max"] <= 2           # the paper's Â ∈ [-1, 2]
    # every row of A_self sums to 1, so the mean entry is 1/T per example
    assert hist["a_self"]["sum"] == pytest.approx(L * H * sum(lengths), rel=1e-4)


def test_per_layer_summary_says_whether_the_quasi_attention_depends_on_the_key(tiny):
    """A_quasi = σ(C_Q C_Kᵀ/√d): with Z = 0 it is ½ for every pair (spread 0 across keys); with a
    large Z it varies across keys. (Z changes λ_A too; its mean size is only checked to be in [0, 1].)"""
    import copy

    model, tok = tiny
    flat, spread = copy.deepcopy(model), copy.deepcopy(model)
    torch.manual_seed(1)
    for a, b in zip(flat.modules(), spread.modules(), strict=True):
        if hasattr(a, "context_for_q"):
            for lin_a, lin_b in ((a.context_for_q, b.context_for_q), (a.context_for_k, b.context_for_k)):
                torch.nn.init.zeros_(lin_a.weight), torch.nn.init.zeros_(lin_a.bias)
                torch.nn.init.normal_(lin_b.weight, std=1.0)
    rows = {name: figure_data.component_histograms(m, tok, EXAMPLES, n=50, seed=0, batch_size=2)["per_layer"]
            for name, m in (("flat", flat), ("spread", spread))}
    assert [r["layer"] for r in rows["flat"]] == [0, 1]
    for r in rows["flat"]:
        assert r["a_quasi_mean"] == pytest.approx(0.5, abs=1e-6) and r["a_quasi_key_sd"] == pytest.approx(0.0, abs=1e-6)
        assert 0 <= r["lambda_a_abs_mean"] <= 1
    assert all(r["a_quasi_key_sd"] > 0.05 for r in rows["spread"])


def test_relevance_rows_cover_the_sentence_and_peak_at_one(tiny):
    model, tok = tiny
    panels = [{"title": "LOC1", "sentence_id": "1", "contexts": [("LOCATION1", "general"), ("LOCATION1", "price")]},
              {"title": "price", "sentence_id": "2", "contexts": [("LOCATION1", "price"), ("LOCATION2", "price")]}]
    plain = figure_data.relevance_data(model, tok, EXAMPLES, panels, aux="none")
    paired = figure_data.relevance_data(model, tok, EXAMPLES, panels, aux="NLI-M")
    for a, b in zip(plain, paired, strict=True):
        assert a["tokens"] == b["tokens"] and a["tokens"][0] == "[CLS]" and a["tokens"][-1] == "[SEP]"
        for row in list(a["rows"].values()) + list(b["rows"].values()):
            assert len(row) == len(a["tokens"]) and max(row) == pytest.approx(1.0) and min(row) >= 0
    assert [c["gold"] for c in plain[0]["contexts"]] == ["Positive", "Negative"]
    assert {c["predicted"] for p in plain for c in p["contexts"]} <= set(data.LABELS["sentihood"])
    with pytest.raises(AbsaError, match="no example"):
        figure_data.relevance_data(model, tok, EXAMPLES, [{"title": "x", "sentence_id": "9", "contexts": [("LOCATION1", "price")]}])


def test_attention_example_column_sums(tiny):
    model, tok = tiny
    data = figure_data.attention_example(model, tok, EXAMPLES[1], layer=0)
    T = len(data["tokens"])
    assert len(data["a_hat"]) == 4 and all(len(h) == T for h in data["a_hat"])
    for h in range(4):                                  # rows of A_self sum to 1 -> column sums total T
        assert sum(data["a_self"][h]) == pytest.approx(T, rel=1e-4)
        assert np.allclose(np.array(data["a_hat"][h]), np.array(data["a_self"][h]) + np.array(data["quasi_term"][h]),
                           atol=1e-4)
    assert min(data["quasi_term"][data["head"]]) == min(min(h) for h in data["quasi_term"])
    rows = figure_data.figure5_rows(data)
    assert len(rows) == 3 and all(len(v) == T for v in rows.values())


def test_ablations_change_one_thing_each():
    from absa_lib.reports.variant_tables import ablation_variants

    assert len({s.label for s in ABLATIONS}) == len(ABLATIONS)
    for spec in ABLATIONS:
        ref = reference_of(spec)
        assert len(changed_fields(spec, ref)) == (0 if spec is ref else 1), spec.label
    assert {"quasi": False} in [s.model_overrides for s in ABLATIONS]
    assert {"gate_activation": "sigmoid"} in [s.model_overrides for s in ABLATIONS]
    no_aux = [s for s in ABLATIONS if s.model == "cg-bert" and s.aux == "none"]
    assert [reference_of(s).label for s in no_aux] == ["CG-BERT (no aux)"] * 3    # not the CG-BERT (aux) row
    assert [changed_fields(s, reference_of(s)) for s in no_aux] == [[], ["model_overrides"], ["model_overrides"]]
    with pytest.raises(AbsaError, match="is not a spec label"):
        reference_of(grid.Spec("typo", "cg-bert", "none", reference="CG-BERT (no aux"))
    changed = grid.Spec("two changes", "qacg-bert", "none", sampler="balanced")
    assert changed_fields(changed, ABLATIONS[0]) == ["aux", "sampler"]
    found = {("sentihood", s.label): [f"run-{i}"] for i, s in enumerate(ABLATIONS)}
    variants = ablation_variants(found, "sentihood", ABLATIONS)
    assert [v.protocol for v in variants] == ["dev_best"] * len(ABLATIONS) + ["test_best", "test_best"]
    assert variants[-2].runs == found[("sentihood", ABLATIONS[0].label)]


def test_compute_or_load_computes_or_falls_back_to_the_reference(tmp_path, capsys):
    dirs = session.Folders(results=tmp_path / "results", figures=tmp_path / "figures", runs=tmp_path / "runs",
                           reference=tmp_path / "reference")
    data, path = session.compute_or_load("x.json", dirs, lambda: {"a": [1, 2]}, True, {"run_id": "r"})
    assert data == {"a": [1, 2]} and json.loads(path.read_text()) == {"data": {"a": [1, 2]}, "meta": {"run_id": "r"}}
    with pytest.raises(AbsaError, match="no analysis arrays"):
        session.compute_or_load("y.json", dirs, lambda: 1 / 0, False)
    session.save_json({"data": [3], "meta": {}}, tmp_path / "reference" / "analysis" / "y.json")
    data, path = session.compute_or_load("y.json", dirs, lambda: 1 / 0, False)
    assert data == [3] and path == tmp_path / "results" / "analysis" / "y.json" and path.is_file()
    assert "y.json: loaded from" in capsys.readouterr().out


def test_arrays_loaded_from_the_reference_name_the_run_they_were_computed_from(tmp_path, capsys):
    """Under render a reader sees which run drew the figures, not only which file."""
    dirs = session.Folders(results=tmp_path / "results", figures=tmp_path / "figures", runs=tmp_path / "runs",
                           reference=tmp_path / "reference")
    run = tmp_path / "reference" / "runs" / "sentihood" / "qacg-bert" / "abc123"
    run.mkdir(parents=True)
    (run / "metrics.json").write_text(json.dumps({"complete": True}))
    meta = {"run_id": "abc123", "backbone": "minilm", "epochs": 25, "seed": 44}
    session.save_json({"data": [1], "meta": meta}, tmp_path / "reference" / "analysis" / "one.json")
    session.compute_or_load("one.json", dirs, lambda: 1 / 0, False)
    assert "computed from run abc123 (minilm, 25 epochs, seed 44)" in capsys.readouterr().out
    assert session.sources_text({"run_id": "abc123", "epochs": 1}) == "run abc123 (1 epoch)"
    assert session.sources_text({"MAN-BERT": "a1", "OA-BERT": "b2"}) == "runs MAN-BERT a1, OA-BERT b2"


def test_arrays_from_a_run_the_reference_no_longer_holds_are_refused(tmp_path):
    dirs = session.Folders(results=tmp_path / "results", figures=tmp_path / "figures", runs=tmp_path / "runs",
                           reference=tmp_path / "reference")
    analysis = tmp_path / "reference" / "analysis"
    session.save_json({"data": [1], "meta": {"run_id": "abc123", "seed": 42}}, analysis / "one.json")
    session.save_json({"data": [2], "meta": {"MAN-BERT": "abc123", "OA-BERT": "def456"}}, analysis / "many.json")
    with pytest.raises(AbsaError, match=r"one.json: computed from run abc123, which .* does not hold"):
        session.compute_or_load("one.json", dirs, lambda: 1 / 0, False)
    run = tmp_path / "reference" / "runs" / "sentihood" / "qacg-bert" / "abc123"
    run.mkdir(parents=True)
    (run / "metrics.json").write_text(json.dumps({"complete": False}))
    with pytest.raises(AbsaError, match="abc123"):                  # an unfinished run is no source either
        session.compute_or_load("one.json", dirs, lambda: 1 / 0, False)
    (run / "metrics.json").write_text(json.dumps({"complete": True}))
    assert session.compute_or_load("one.json", dirs, lambda: 1 / 0, False)[0] == [1]
    with pytest.raises(AbsaError, match="many.json: computed from run def456"):
        session.compute_or_load("many.json", dirs, lambda: 1 / 0, False)
    (analysis / "bad.json").write_text(json.dumps([1, 2]))
    with pytest.raises(AbsaError, match="bad.json: expected a JSON object with 'data'"):
        session.compute_or_load("bad.json", dirs, lambda: 1 / 0, False)
    assert not (tmp_path / "results" / "analysis" / "many.json").exists()


def test_a_list_given_as_text_by_papermill_is_refused_with_the_way_to_give_it(tmp_path, monkeypatch):
    # `papermill 03_qacg_bert.ipynb out.ipynb -p seeds '[7]'` set seeds to the text '[7]': the grid
    # then failed in int('[') (and seeds: [7.5] was truncated to 7)
    monkeypatch.setattr(session, "ensure_data", lambda data_dir: None)
    for seeds, needle in (("[7]", "seeds is '[7]', expected a list, [a, b] in YAML"),
                          ([7.5], "seeds is [7.5]: 7.5 is not a whole number; expected a list of whole numbers")):
        namespace = {"__annotations__": {"profile": str, "seeds": list}, "profile": "smoke", "seeds": seeds}
        with pytest.raises(AbsaError, match=re.escape(f"03_qacg_bert: parameter: {needle}") + r".*-y '\{seeds: \[7\]\}'"):
            session.setup("03_qacg_bert", namespace)


@pytest.mark.parametrize("name, value, expected", [
    ("epochs", -1, "a positive integer"), ("max_train_examples", 0, "a positive integer, or unset for all"),
    ("lr", float("inf"), "a finite positive number"), ("train_options", {"precision": "fp8"}, "one of auto, fp32")])
def test_a_value_a_run_would_refuse_is_refused_in_the_setup_cell(tmp_path, monkeypatch, name, value, expected):
    """`-p epochs -1` failed in the cell that made the first run (cell 7), not in the setup cell (issue 87)."""
    monkeypatch.setattr(session, "ensure_data", lambda data_dir: None)
    namespace = {"__annotations__": {"profile": str, name: type(value)}, "profile": "smoke", name: value}
    where = "parameter train_options: precision is 'fp8'" if name == "train_options" else f"parameter: {name} is {value!r}"
    with pytest.raises(AbsaError, match=f"^03_qacg_bert: {re.escape(where)}, expected {re.escape(expected)}"):
        session.setup("03_qacg_bert", namespace)


def test_a_name_the_notebook_does_not_declare_is_refused_naming_those_it_does(tmp_path, monkeypatch):
    """papermill -p seed 7 (for seeds) only warns and runs on the defaults; the first cell refuses it."""
    monkeypatch.setattr(session, "ensure_data", lambda data_dir: None)
    namespace = {"__annotations__": {"profile": str, "seeds": list, "epochs": int}, "profile": "smoke",
                 "seeds": [42], "epochs": 1, "seed": 7}
    with pytest.raises(AbsaError, match=r"^03_qacg_bert: no parameter 'seed' \(did you mean 'seeds'\?\); its "
                                        r"parameters: profile, seeds, epochs$"):
        session.setup("03_qacg_bert", namespace)


NOTEBOOKS = sorted((repo_root() / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def papermill_namespace(notebook, profile_file, out, **p) -> dict:
    """A notebook's globals as papermill leaves them for its setup cell under ``-f profile_file`` (and
    ``-p NAME VALUE`` for each of ``p``): papermill prepares the notebook (its copy into ``out``), then
    its parameters cell runs, and the cell papermill injected after it."""
    import papermill as pm
    from papermill.iorw import read_yaml_file

    nb = pm.execute_notebook(str(notebook), str(out), parameters={**read_yaml_file(str(profile_file)), **p},
                             kernel_name="python3", prepare_only=True, progress_bar=False)
    namespace = {}
    for cell in nb.cells:
        if {"parameters", "injected-parameters"} & set(cell.metadata.get("tags", [])):
            exec(compile(cell.source, str(notebook), "exec"), namespace)   # noqa: S102
    return namespace


@pytest.fixture
def quiet_setup(tmp_path, monkeypatch):
    """setup() without touching the machine: no data check, torch's threads kept, folders in tmp_path."""
    monkeypatch.setattr(session, "ensure_data", lambda data_dir: None)
    monkeypatch.setattr(session, "set_threads", lambda n: None)
    monkeypatch.setattr(session, "resolve_dir", lambda path, create=True: tmp_path / str(path).replace("/", "_"))


@pytest.mark.parametrize("profile", profiles.PROFILES)
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_notebook_takes_a_whole_profile_file_as_papermill_f_gives_it(notebook, profile, quiet_setup, capsys,
                                                                           tmp_path):
    """papermill NB out -f params/PROFILE.yaml injects every notebook's parameters: the notebook takes
    its own and skips the others in one line."""
    values = profiles.load_profile(profile)
    declared = {name for name, nbs in profiles.notebook_parameters().items() if notebook.stem in nbs}
    nb = session.setup(notebook.stem, papermill_namespace(notebook, profiles.profile_path(profile), tmp_path / "out.ipynb"))
    assert nb.params == {k: v for k, v in values.items() if k in declared} and nb.changed == []
    skipped = [line for line in capsys.readouterr().out.splitlines() if "skipped" in line]
    others = sorted(set(values) - declared)
    assert skipped == ([f"[profile] not parameters of {notebook.stem}, skipped (a profile holds every notebook's): "
                        + ", ".join(others)] if others else [])


def test_with_a_profile_file_p_still_changes_a_parameter_and_a_typo_is_still_refused(quiet_setup, capsys,
                                                                                       tmp_path):
    notebook = repo_root() / "notebooks" / "03_qacg_bert.ipynb"
    smoke = profiles.profile_path("smoke")
    nb = session.setup("03_qacg_bert", papermill_namespace(notebook, smoke, tmp_path / "out.ipynb", epochs=2))
    assert nb.params["epochs"] == 2 and nb.changed == ["epochs"]
    assert "changed parameters: epochs=2 (profile: 1)" in capsys.readouterr().out
    with pytest.raises(AbsaError, match=r"^03_qacg_bert: no parameter 'seed' \(did you mean 'seeds'\?\)"):
        session.setup("03_qacg_bert", papermill_namespace(notebook, smoke, tmp_path / "out.ipynb", seed=7))
