"""CG / QACG self-attention against hand-written docs/paper_notes.md §2.2 / §3.1 formulas, and their invariants."""

from __future__ import annotations

import math

import pytest
import torch
from transformers import BertModel

from absa_lib.models import build_model
from absa_lib.models.attention import NEW_MODULES, CGBertSelfAttention, QACGBertSelfAttention
from absa_lib.models.backbones import backbone_config


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("tiny_bert")
    BertModel(backbone_config("tiny")).save_pretrained(path)
    return path


def _model(name, preset, tiny_dir, **overrides):
    torch.manual_seed(1)
    model = build_model(name, backbone=str(tiny_dir), num_labels=3, num_contexts=8, preset=preset,
                        **overrides)
    with torch.no_grad():   # make every new weight and bias large, so each term matters in the checks
        for layer in model.bert.encoder.layer:
            for name_ in NEW_MODULES:
                for p in getattr(layer.attention.self, name_).parameters():
                    p.normal_(0.0, 0.3)
        model.context_embeddings.weight.normal_(0.0, 1.0)
    return model.eval()


def _batch():
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(5, 500, (3, 9), generator=g)
    mask = torch.ones(3, 9, dtype=torch.long)
    mask[1, 6:] = 0
    mask[2, 4:] = 0
    ids[mask == 0] = 0
    types = torch.zeros_like(ids)
    types[:, 5:] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types * mask,
            "context_ids": torch.tensor([0, 3, 7])}


# --- explicit formulas (docs/paper_notes.md §2.1-2.2, §3.1), written independently of absa_lib -----------------

def _context_matrix(att, x, e_c):
    """C = Linear_{2d→d}([E_c ; X]) + E_c with E_c = e_c broadcast to every position."""
    e = e_c[:, None, :].expand_as(x)
    return torch.cat([e, x], dim=-1) @ att.context_layer.weight.T + att.context_layer.bias + e


def _split(x, heads):
    b, t, d = x.shape
    return x.view(b, t, heads, d // heads).permute(0, 2, 1, 3)


def _lin(layer, x):
    return x @ layer.weight.T + (layer.bias if layer.bias is not None else 0.0)


def _gate(layer, x):
    """x (b, H, t, d_h) · v: one vector for every head (shape (1, d_h)), or head h's own (H, d_h)."""
    if layer.weight.shape[0] == 1:
        return _lin(layer, x)
    heads = range(layer.weight.shape[0])
    out = torch.stack([x[:, h] @ layer.weight[h] + (layer.bias[h] if layer.bias is not None else 0.0)
                       for h in heads], dim=1)
    return out[..., None]


def ref_cg(att, x, e_c, mask01, act):
    H = att.num_attention_heads
    d_h = x.shape[-1] // H
    M = (1.0 - mask01[:, None, None, :].float()) * -10000.0
    q, k, v = (_split(_lin(lin, x), H) for lin in (att.query, att.key, att.value))
    c = _split(_context_matrix(att, x, e_c), H)
    c_q, c_k = _lin(att.context_for_q, c), _lin(att.context_for_k, c)
    lam_q = act(_gate(att.lambda_q_context_layer, c_q) + _gate(att.lambda_q_query_layer, q))
    lam_k = act(_gate(att.lambda_k_context_layer, c_k) + _gate(att.lambda_k_key_layer, k))
    q_hat = (1 - lam_q) * q + lam_q * c_q
    k_hat = (1 - lam_k) * k + lam_k * c_k
    a = torch.softmax(q_hat @ k_hat.transpose(-1, -2) / math.sqrt(d_h) + M, dim=-1)
    return (a @ v).permute(0, 2, 1, 3).reshape(x.shape)


def ref_qacg(att, x, e_c, mask01, per_head):
    H = att.num_attention_heads
    b, t, d = x.shape
    d_h = d // H
    M = (1.0 - mask01[:, None, None, :].float()) * -10000.0
    q, k, v = (_split(_lin(lin, x), H) for lin in (att.query, att.key, att.value))
    a_self = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d_h) + M, dim=-1)
    c = _context_matrix(att, x, e_c)
    if per_head:
        c_q, c_k = _split(_lin(att.context_for_q, c), H), _split(_lin(att.context_for_k, c), H)
    else:
        c_q = _lin(att.context_for_q, c)[:, None].expand(b, H, t, d_h)
        c_k = _lin(att.context_for_k, c)[:, None].expand(b, H, t, d_h)
    a_quasi = torch.sigmoid(c_q @ c_k.transpose(-1, -2) / math.sqrt(d_h) + M)
    lam_q = torch.sigmoid(_gate(att.lambda_q_context_layer, c_q) + _gate(att.lambda_q_query_layer, q))
    lam_k = torch.sigmoid(_gate(att.lambda_k_context_layer, c_k) + _gate(att.lambda_k_key_layer, k))
    a_hat = a_self + (1 - (lam_q + lam_k)) * a_quasi
    return (a_hat @ v).permute(0, 2, 1, 3).reshape(x.shape)


def ref_logits(model, batch, layer_fn):
    """Whole model by hand: HF embeddings / self-output / FFN / pooler, attention from ``layer_fn``."""
    bert = model.bert
    x = bert.embeddings(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"])
    e_c = model.context_embeddings.weight[batch["context_ids"]]
    for layer in bert.encoder.layer:
        o = layer_fn(layer.attention.self, x, e_c, batch["attention_mask"])
        h = layer.attention.output(o, x)
        x = layer.output(layer.intermediate(h), h)
    pooled = torch.tanh(_lin(bert.pooler.dense, x[:, 0]))
    return _lin(model.classifier, pooled)


# --- tests ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("preset", ["official", "paper"])
def test_qacg_matches_hand_formulas(tiny_dir, preset):
    model = _model("qacg-bert", preset, tiny_dir)
    att = model.bert.encoder.layer[0].attention.self
    assert isinstance(att, QACGBertSelfAttention)
    assert (att.lambda_q_query_layer.bias is not None) == (preset == "official")
    assert att.context_for_q.out_features == (32 if preset == "official" else 8)   # d×d vs d×d_h
    batch = _batch()
    g = torch.Generator().manual_seed(3)
    x, e_c = torch.randn(3, 9, 32, generator=g), torch.randn(3, 32, generator=g)
    mask4 = (1.0 - batch["attention_mask"][:, None, None, :].float()) * -10000.0
    with torch.no_grad():
        out, _ = att(x, attention_mask=mask4, context=e_c)
        ref = ref_qacg(att, x, e_c, batch["attention_mask"], per_head=preset == "official")
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
        logits = model(**batch).logits
        ref_l = ref_logits(model, batch, lambda a, x_, e, m: ref_qacg(a, x_, e, m, preset == "official"))
    torch.testing.assert_close(logits, ref_l, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("preset,act", [("official", torch.sigmoid), ("paper", torch.tanh)])
def test_cg_matches_hand_formulas(tiny_dir, preset, act):
    model = _model("cg-bert", preset, tiny_dir)
    att = model.bert.encoder.layer[1].attention.self
    assert isinstance(att, CGBertSelfAttention) and att.lambda_q_query_layer.bias is None
    batch = _batch()
    g = torch.Generator().manual_seed(4)
    x, e_c = torch.randn(3, 9, 32, generator=g), torch.randn(3, 32, generator=g)
    mask4 = (1.0 - batch["attention_mask"][:, None, None, :].float()) * -10000.0
    with torch.no_grad():
        out, _ = att(x, attention_mask=mask4, context=e_c)
        ref = ref_cg(att, x, e_c, batch["attention_mask"], act)
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
        logits = model(**batch).logits
        ref_l = ref_logits(model, batch, lambda a, x_, e, m: ref_cg(a, x_, e, m, act))
    torch.testing.assert_close(logits, ref_l, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name,preset", [("cg-bert", "paper"), ("cg-bert", "official"), ("qacg-bert", "paper"),
                                         ("qacg-bert", "official")])
def test_gate_vectors_per_head_as_the_paper_prints_them(tiny_dir, tmp_path, name, preset):
    # lambda_per_head: V_Q^h, V_K^h per head (Eq. 3, 7); the presets share one per layer
    from transformers import AutoModel

    model = _model(name, preset, tiny_dir, lambda_per_head=True)
    att = model.bert.encoder.layer[0].attention.self
    assert att.lambda_q_query_layer.weight.shape == (4, 8)                      # (H, d_h)
    assert (att.lambda_k_key_layer.bias is not None) == (name == "qacg-bert" and preset == "official")
    act = torch.sigmoid if (name == "qacg-bert" or preset == "official") else torch.tanh
    ref = (lambda a, x_, e, m: ref_qacg(a, x_, e, m, preset == "official")) if name == "qacg-bert" else (
        lambda a, x_, e, m: ref_cg(a, x_, e, m, act))
    batch = _batch()
    with torch.no_grad():
        logits = model(**batch).logits
        torch.testing.assert_close(logits, ref_logits(model, batch, ref), rtol=1e-5, atol=1e-5)
        model.save_pretrained(tmp_path / "m")                                   # strict loading, same shapes
        again = AutoModel.from_pretrained(tmp_path / "m").eval()
        torch.testing.assert_close(again(**batch).logits, logits)
        shared = _model(name, preset, tiny_dir)
        assert shared.bert.encoder.layer[0].attention.self.lambda_q_query_layer.weight.shape == (1, 8)


def test_context_dropout_only_in_official_qacg(tiny_dir):
    official = _model("qacg-bert", "official", tiny_dir).bert.encoder.layer[0].attention.self
    paper = _model("qacg-bert", "paper", tiny_dir).bert.encoder.layer[0].attention.self
    assert official.context_dropout.p == official.dropout.p == 0.1
    assert paper.context_dropout.p == 0.0


@pytest.mark.parametrize("preset", ["official", "paper"])
def test_qacg_components_ranges_and_masking(tiny_dir, preset):
    batch = _batch()
    layers = _model("qacg-bert", preset, tiny_dir)(**batch, output_components=True).components
    assert len(layers) == 2
    pad = batch["attention_mask"] == 0                                   # (B, T) padded keys
    saw_negative = False
    for c in layers:
        assert c["a_self"].shape == c["a_quasi"].shape == c["a_hat"].shape == (3, 4, 9, 9)
        assert c["lambda_a"].shape == (3, 4, 9, 1)
        torch.testing.assert_close(c["lambda_a"], 1 - c["lambda_q"] - c["lambda_k"])
        torch.testing.assert_close(c["a_hat"], c["a_self"] + c["lambda_a"] * c["a_quasi"])
        assert c["a_hat"].min() >= -1 and c["a_hat"].max() <= 2
        assert 0 <= c["a_quasi"].min() and c["a_quasi"].max() <= 1
        torch.testing.assert_close(c["a_self"].sum(-1), torch.ones(3, 4, 9))
        for name in ("a_self", "a_quasi", "a_hat"):                      # padded keys: weight exactly 0
            assert (c[name][pad[:, None, None, :].expand_as(c[name])] == 0).all()
        saw_negative |= bool((c["a_hat"] < 0).any())
        if preset == "paper":                                            # shared Z: one A_quasi for all heads
            assert torch.equal(c["a_quasi"][:, 0], c["a_quasi"][:, 3])
    assert saw_negative                                                  # quasi-attention can subtract


@pytest.mark.parametrize("preset", ["official", "paper"])
def test_cg_attention_rows_sum_to_one_and_mask_padding(tiny_dir, preset):
    batch = _batch()
    layers = _model("cg-bert", preset, tiny_dir)(**batch, output_components=True).components
    pad = batch["attention_mask"] == 0
    for c in layers:
        torch.testing.assert_close(c["attention"].sum(-1), torch.ones(3, 4, 9))
        assert (c["attention"][pad[:, None, None, :].expand_as(c["attention"])] == 0).all()
        lo, hi = (0, 1) if preset == "official" else (-1, 1)
        assert lo <= c["lambda_q"].min() and c["lambda_k"].max() <= hi
    if preset == "paper":
        assert any((c["lambda_q"] < 0).any() for c in layers)            # tanh gate: zero-symmetric


def test_components_only_on_request(tiny_dir):
    out = _model("qacg-bert", "paper", tiny_dir)(**_batch())
    assert out.components is None
