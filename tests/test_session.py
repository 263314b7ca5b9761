"""Notebook helpers: profiles, folders, run collection, the manifest, and the figure data (tiny model)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from absa_lib import companion as C
from absa_lib import data as D
from absa_lib import figure_data as FD
from absa_lib import manifest as M
from absa_lib.errors import AbsaError
from absa_lib.paths import repo_root


def write_run(root, dataset="sentihood", model="qacg-bert", aux="NLI-M", seed=1, complete=True, **cfg):
    from absa_lib.runs import config_hash
    from absa_lib.train import recorded_identity

    config = {"dataset": dataset, "model": model, "aux": aux, "seed": seed, "preset": "paper", "sampler": "uniform",
              "model_overrides": {}, "backbone": "minilm", **cfg}
    config["run_id"] = run_id = config_hash(recorded_identity(config))      # what load_run checks
    path = root / dataset / model / run_id
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps(config))
    (path / "metrics.json").write_text(json.dumps({"complete": complete, "epochs": [], "selection": {}}))
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
    specs = [C.Spec("QACG aux", "qacg-bert", "NLI-M"), C.Spec("CG", "cg-bert", "none")]
    grid = C.run_grid(specs, ["sentihood"], [42], {}, tmp_path, allow_training=False)
    assert sorted(r.config["seed"] for r in grid[("sentihood", "QACG aux")]) == [1, 2]
    assert grid[("sentihood", "CG")] == []
    runs = C.flatten(grid)
    written = C.export_records(runs, tmp_path / "results")
    assert sorted({p.name for p in written}) == ["config.json", "env.json", "metrics.json"]
    assert len(written) == 6 and not list((tmp_path / "results").rglob("*.csv"))
    assert not list((tmp_path / "results").rglob("*.safetensors"))


def test_table_specs_follow_the_paper_rows():
    specs = C.table_specs("semeval", ("qacg-bert", "bert-pair"))
    assert [(s.label, s.model, s.aux) for s in specs] == [
        ("BERT-pair (Sun et al. 2019)", "bert-pair", "NLI-M"), ("QACG-BERT", "qacg-bert", "none"),
        ("QACG-BERT (auxiliary sentences)", "qacg-bert", "NLI-M")]
    cfgs = C.make_configs(specs[1], "semeval", [1, 2], backbone="tiny", epochs=1)
    assert [(c.seed, c.model, c.aux, c.preset, c.sampler) for c in cfgs] == [
        (1, "qacg-bert", "none", "paper", "uniform"), (2, "qacg-bert", "none", "paper", "uniform")]


def test_paths_and_profiles(tmp_path):
    assert C.resolve_dir("executed/x", create=False) == repo_root() / "executed" / "x"
    assert C.resolve_dir(tmp_path / "a" / "b") == tmp_path / "a" / "b" and (tmp_path / "a" / "b").is_dir()
    smoke = C.load_profile("smoke")
    assert smoke["backbone"] == "tiny" and set(smoke) == set(C.PARAMETER_NAMES)
    assert C.check_profile("smoke", dict(smoke), verbose=False) == []
    assert C.check_profile("smoke", {**smoke, "epochs": 7, "seeds": [1]}, verbose=False) == ["epochs", "seeds"]
    with pytest.raises(AbsaError, match="no such profile"):
        C.load_profile("huge")
    assert C.train_base(smoke) == {k: smoke[k] for k in ("backbone", "epochs", "batch_size", "lr", "max_length",
                                                          "max_train_examples", "max_eval_examples", "eval_batch_size")}


def test_manifest_records_notebooks_and_finds_unclaimed_files(tmp_path):
    results, figures = tmp_path / "results", tmp_path / "figures"
    results.mkdir(), figures.mkdir()
    (results / "t.csv").write_text("a\n")
    (figures / "f.png").write_bytes(b"png")
    (figures / "stray.png").write_bytes(b"?")
    (results / "reference" / "runs").mkdir(parents=True)
    (results / "reference" / "runs" / "config.json").write_text("{}")
    M.record(results, "03_qacg_bert", "smoke", [results / "t.csv", figures / "f.png"], ["abc", "abc"], {"seeds": [1]})
    M.record(results, "05_figures", "smoke", [])
    m = M.finalize(results, figures)
    assert m["files"]["results/t.csv"]["notebook"] == "03_qacg_bert"
    assert m["files"]["figures/f.png"]["sha256"] == M.sha256(figures / "f.png")
    assert m["notebooks"]["03_qacg_bert"]["run_ids"] == ["abc"] and m["profile"] == "smoke"
    assert m["unattributed"] == ["figures/stray.png"]
    assert m["reference"] == ["results/reference/runs/config.json"]
    # a notebook's new entry replaces the old one; identical outputs give identical bytes
    before = (results / "MANIFEST.json").read_bytes()
    M.record(results, "03_qacg_bert", "smoke", [results / "t.csv", figures / "f.png"], ["abc"], {"seeds": [1]})
    M.finalize(results, figures)
    assert (results / "MANIFEST.json").read_bytes() == before
    M.record(results, "03_qacg_bert", "smoke", [results / "t.csv"])
    assert "figures/f.png" not in M.load(results)["files"]
    (results / "t.csv").unlink()
    with pytest.raises(AbsaError, match="missing"):
        M.finalize(results, figures)
    assert M.main(["--results-dir", str(results), "--figures-dir", str(figures)]) == 2


# ---------------------------------------------------------------------------------------------
# figure data on a tiny random QACG-BERT


def ex(sid, text, target, aspect, label):
    return D.Example("sentihood", "test", sid, text, target, aspect, label, D.context_id("sentihood", target, aspect))


@pytest.fixture(scope="module")
def tiny():
    from absa_lib.models import build_model, load_tokenizer

    torch.manual_seed(0)
    model = build_model("qacg-bert", backbone="tiny", num_labels=3, num_contexts=8, preset="official").eval()
    return model, load_tokenizer("tiny")


EXAMPLES = [ex("1", "LOCATION1 is nice , but it 's not cheap", "LOCATION1", a, lab)
            for a, lab in zip(D.ASPECTS["sentihood"], ("Positive", "Negative", "None", "None"))]
EXAMPLES += [ex("2", "LOCATION1 posh ; LOCATION2 cheap and shabby", t, a, lab)
             for t in ("LOCATION1", "LOCATION2") for a, lab in zip(D.ASPECTS["sentihood"], ("None", "Negative", "None", "None"))]


def test_histograms_count_every_unpadded_entry_of_non_none_examples(tiny):
    model, tok = tiny
    h = FD.component_histograms(model, tok, EXAMPLES, n=50, seed=0, batch_size=2)
    chosen = [e for e in EXAMPLES if e.label != "None"]
    assert h["n_examples"] == len(chosen) == 4 and [tuple(k) for k in h["keys"]] == [e.key for e in chosen]
    lengths = [len(FD.encode_batch([e], "none", tok)[1][0]) for e in chosen]
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


def test_relevance_rows_cover_the_sentence_and_peak_at_one(tiny):
    model, tok = tiny
    panels = [{"title": "LOC1", "sentence_id": "1", "contexts": [("LOCATION1", "general"), ("LOCATION1", "price")]},
              {"title": "price", "sentence_id": "2", "contexts": [("LOCATION1", "price"), ("LOCATION2", "price")]}]
    plain = FD.relevance_data(model, tok, EXAMPLES, panels, aux="none")
    paired = FD.relevance_data(model, tok, EXAMPLES, panels, aux="NLI-M")
    for a, b in zip(plain, paired):
        assert a["tokens"] == b["tokens"] and a["tokens"][0] == "[CLS]" and a["tokens"][-1] == "[SEP]"
        for row in list(a["rows"].values()) + list(b["rows"].values()):
            assert len(row) == len(a["tokens"]) and max(row) == pytest.approx(1.0) and min(row) >= 0
    assert [c["gold"] for c in plain[0]["contexts"]] == ["Positive", "Negative"]
    assert {c["predicted"] for p in plain for c in p["contexts"]} <= set(D.LABELS["sentihood"])
    with pytest.raises(AbsaError, match="no example"):
        FD.relevance_data(model, tok, EXAMPLES, [{"title": "x", "sentence_id": "9", "contexts": [("LOCATION1", "price")]}])


def test_attention_example_column_sums(tiny):
    model, tok = tiny
    data = FD.attention_example(model, tok, EXAMPLES[1], layer=0)
    T = len(data["tokens"])
    assert len(data["a_hat"]) == 4 and all(len(h) == T for h in data["a_hat"])
    for h in range(4):                                  # rows of A_self sum to 1 -> column sums total T
        assert sum(data["a_self"][h]) == pytest.approx(T, rel=1e-4)
        assert np.allclose(np.array(data["a_hat"][h]), np.array(data["a_self"][h]) + np.array(data["quasi_term"][h]),
                           atol=1e-4)
    assert min(data["quasi_term"][data["head"]]) == min(min(h) for h in data["quasi_term"])
    rows = FD.figure5_rows(data)
    assert len(rows) == 3 and all(len(v) == T for v in rows.values())


def test_ablation_specs_change_one_thing_each():
    specs = C.ablation_specs()
    assert len({s.label for s in specs}) == len(specs)
    refs = {"qacg-bert": specs[0], "cg-bert": next(s for s in specs if s.model == "cg-bert")}
    for s in specs:
        ref = refs[s.model]
        diff = [k for k in ("aux", "preset", "sampler", "model_overrides") if getattr(s, k) != getattr(ref, k)]
        assert len(diff) == (0 if s is ref else 1), (s.label, diff)
    assert {"quasi": False} in [s.model_overrides for s in specs]
    assert {"gate_activation": "sigmoid"} in [s.model_overrides for s in specs]
    grid = {("sentihood", s.label): [f"run-{i}"] for i, s in enumerate(specs)}
    variants = C.ablation_variants(grid, "sentihood", specs)
    assert [v.protocol for v in variants] == ["dev_best"] * len(specs) + ["test_best", "test_best"]
    assert variants[-2].runs == grid[("sentihood", specs[0].label)]


def test_compute_or_load_computes_or_falls_back_to_the_reference(tmp_path):
    dirs = C.Folders(tmp_path / "runs", tmp_path / "results", tmp_path / "figures", tmp_path / "reference")
    data, path = C.compute_or_load("x.json", dirs, lambda: {"a": [1, 2]}, True, {"run_id": "r"})
    assert data == {"a": [1, 2]} and json.loads(path.read_text()) == {"data": {"a": [1, 2]}, "meta": {"run_id": "r"}}
    with pytest.raises(AbsaError, match="no analysis arrays"):
        C.compute_or_load("y.json", dirs, lambda: 1 / 0, False)
    C.save_json({"data": [3], "meta": {}}, tmp_path / "reference" / "analysis" / "y.json")
    data, path = C.compute_or_load("y.json", dirs, lambda: 1 / 0, False)
    assert data == [3] and path == tmp_path / "results" / "analysis" / "y.json" and path.is_file()
