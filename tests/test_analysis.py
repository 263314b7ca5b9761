"""Component extraction and gradient sensitivity (Figures 3-5)."""

from __future__ import annotations

import pytest
import torch

from absa_lib.errors import AbsaError
from absa_lib.evaluation.analysis import (
    attention_entropy,
    context_signal,
    extract_components,
    gradient_sensitivity,
)
from absa_lib.models import build_model, load_tokenizer


def _model(name, tiny_dir, **kw):
    torch.manual_seed(1)
    return build_model(name, backbone=str(tiny_dir), num_labels=3, num_contexts=8, preset="official", **kw)


def _batch(tiny_dir):
    tok = load_tokenizer(str(tiny_dir))
    enc = tok(["location - 1 is quiet and cheap", "too loud"],
              ["location - 1 - price", "location - 2 - general"], padding=True, return_tensors="pt")
    return {**enc, "context_ids": torch.tensor([1, 4]), "labels": torch.tensor([0, 1])}


def test_extract_components_shapes_and_mode(tiny_dir):
    model = _model("qacg-bert", tiny_dir)           # train mode on purpose
    batch = _batch(tiny_dir)
    layers = extract_components(model, batch)
    assert model.training                           # restored
    T = batch["input_ids"].shape[1]
    assert len(layers) == 2
    assert {k: tuple(v.shape) for k, v in layers[0].items()} == {
        "a_self": (2, 4, T, T), "a_quasi": (2, 4, T, T), "lambda_q": (2, 4, T, 1), "lambda_k": (2, 4, T, 1),
        "lambda_a": (2, 4, T, 1), "a_hat": (2, 4, T, T)}
    again = extract_components(model, batch)        # eval mode: deterministic despite dropout
    assert all(torch.equal(a[k], b[k]) for a, b in zip(layers, again, strict=True) for k in a)
    cg = extract_components(_model("cg-bert", tiny_dir), batch)
    assert set(cg[1]) == {"lambda_q", "lambda_k", "attention"}
    with pytest.raises(AbsaError, match="cg-bert and qacg-bert only"):
        extract_components(_model("bert-pair", tiny_dir), batch)


def _finite_difference_relevance(model, batch, c, eps=1e-6):
    """‖∂z_c/∂E_t‖² by central differences on the embedding output (float64): for each example, one
    forward over 2·T·d copies of it, each with ±eps added to one coordinate (t, j) of E."""
    B, T = batch["input_ids"].shape
    d = model.config.hidden_size
    n = T * d
    delta = torch.zeros(2 * n, T, d, dtype=torch.float64)
    rows = torch.arange(n)
    delta.view(2 * n, n)[rows, rows] = eps
    delta.view(2 * n, n)[n + rows, rows] = -eps
    handle = model.bert.embeddings.register_forward_hook(lambda m, a, out: out + delta)
    relevance = []
    with torch.no_grad():
        for b in range(B):
            copies = {k: batch[k][b:b + 1].expand(2 * n, *batch[k].shape[1:])
                      for k in ("input_ids", "attention_mask", "token_type_ids", "context_ids")}
            z = model(**copies).logits[:, c]
            grad = ((z[:n] - z[n:]) / (2 * eps)).view(T, d)
            relevance.append(grad.pow(2).sum(-1) * batch["attention_mask"][b])
    handle.remove()
    r = torch.stack(relevance)
    return r / r.amax(dim=1, keepdim=True)


@pytest.mark.parametrize("name", ["qacg-bert", "bert-pair"])
def test_gradient_sensitivity_matches_finite_differences(tiny_dir, name):
    model = _model(name, tiny_dir).double().eval()
    batch = _batch(tiny_dir)
    r = gradient_sensitivity(model, batch, target_class=1)
    assert r.shape == batch["input_ids"].shape
    expected = _finite_difference_relevance(model, batch, 1)
    torch.testing.assert_close(r.double(), expected, rtol=1e-4, atol=1e-6)
    assert torch.allclose(r.amax(dim=1), torch.ones(2, dtype=r.dtype))
    assert (r[batch["attention_mask"] == 0] == 0).all()
    assert all(p.grad is None for p in model.parameters())     # nothing accumulated into .grad


def test_gradient_sensitivity_per_example_class_and_independence(tiny_dir):
    model = _model("qacg-bert", tiny_dir)
    batch = _batch(tiny_dir)
    both = gradient_sensitivity(model, batch, torch.tensor([2, 0]))
    assert model.training                                       # mode restored
    n = int(batch["attention_mask"][1].sum())
    single = {k: v[1:2, :n] for k, v in batch.items() if v.dim() == 2}
    single["context_ids"] = batch["context_ids"][1:2]
    alone = gradient_sensitivity(model, single, 0)              # no padding, batch of one
    torch.testing.assert_close(both[1, :n], alone[0], rtol=1e-4, atol=1e-6)
    assert not torch.allclose(both[0], gradient_sensitivity(model, batch, 1)[0])   # the class matters


def test_context_signal_measures_the_context_ids_hold_on_the_model(tiny_dir):
    batch = _batch(tiny_dir)

    def signal(**overrides):
        torch.manual_seed(1)
        model = build_model("cg-bert", backbone=str(tiny_dir), num_labels=3, num_contexts=8, preset="paper",
                            **overrides).double()                  # float64: at init the effect is ~1e-14
        return context_signal(model, batch, 8), model

    paper, model = signal()
    assert model.training                                           # restored
    assert 0 < paper["logit_sd_contexts"] < 1e-6 * paper["logit_sd_sentences"]
    for stronger in (signal(init_std=0.02)[0], signal(gate_activation="sigmoid")[0]):
        assert stronger["logit_sd_contexts"] > 10 * paper["logit_sd_contexts"]
        assert stronger["grad_context_embedding"] > 10 * paper["grad_context_embedding"]
    with torch.no_grad():
        model.context_embeddings.weight[:] = 0.3                    # every context the same row
    assert context_signal(model, batch, 8)["logit_sd_contexts"] == 0.0
    with pytest.raises(AbsaError, match="the batch has no 'labels'"):
        context_signal(model, {k: v for k, v in batch.items() if k != "labels"}, 8)
    with pytest.raises(AbsaError, match="no context embedding table"):
        context_signal(build_model("bert-pair", backbone=str(tiny_dir), num_labels=3, num_contexts=8),
                       batch, 8)


def test_attention_entropy_shows_a_gate_that_starts_open_flattening_the_attention(tiny_dir):
    batch = _batch(tiny_dir)

    def entropy(model_name="cg-bert", **overrides):
        torch.manual_seed(1)
        model = build_model(model_name, backbone=str(tiny_dir), num_labels=3, num_contexts=8, preset="paper",
                            **overrides)
        return attention_entropy(model, batch)

    tanh, sigmoid = entropy(), entropy(gate_activation="sigmoid")
    assert tanh["uniform"] == sigmoid["uniform"]
    assert 0 < tanh["entropy"] < sigmoid["entropy"] <= tanh["uniform"] + 1e-6    # scores / 4: flatter rows
    n = batch["attention_mask"].sum(-1).double()
    assert tanh["uniform"] == pytest.approx(float((n * n.log()).sum() / n.sum()))  # ln(length) per real token
    with pytest.raises(AbsaError, match="not a distribution"):
        entropy("qacg-bert")
