"""The other attention systems (ATAE/AE/AT-LSTM, MAN-BERT, OA-BERT) and the joint objective: the
mechanisms' invariants on random inputs, parameter counts, saving, training through ``absa train``."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from absa_lib.cli import main
from absa_lib.errors import AbsaError
from absa_lib.models import MODELS, AbsaModel, build_model, count_parameters, joint, traits
from absa_lib.models.other.alstm import glove_table
from absa_lib.models.other.man import gram_distance, man_attention
from absa_lib.models.other.orthogonal import OrthogonalAttention, gather_query
from absa_lib.training import config as run_config

OTHER = tuple(name for name, m in MODELS.items() if m.head_lr is not None)    # the other papers' systems
SMALL_LSTM = {"alstm_hidden": 12, "alstm_aspect_dim": 6}


def make(name: str, **kw) -> AbsaModel:
    torch.manual_seed(0)
    extra = SMALL_LSTM if name.endswith("-lstm") else {}
    base = dict(backbone="tiny", num_labels=3, num_contexts=8, num_aspects=4)
    return build_model(name, **{**base, **extra, **kw}).eval()


def batch(pad_second: int = 3, pair: bool = False, B: int = 4, T_: int = 10) -> dict:
    """Random inputs; example 1 has ``pad_second`` padded positions; pair: the last 4 real tokens are
    the auxiliary sentence (segment 1)."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 100, (B, T_), generator=g)
    mask = torch.ones(B, T_, dtype=torch.long)
    mask[1, T_ - pad_second:] = 0
    ids[mask == 0] = 0
    types = torch.zeros_like(ids)
    if pair:
        for b in range(B):
            n = int(mask[b].sum())
            types[b, n - 4:n] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types,
            "context_ids": torch.tensor([0, 5, 3, 7])[:B], "labels": torch.tensor([0, 1, 2, 0])[:B]}


def padded_more(b: dict, extra: int = 3, fill: int = 42) -> dict:
    """The same batch with ``extra`` more padded positions holding junk token ids."""
    out = {}
    for k, v in b.items():
        if v.dim() == 2:
            pad = torch.full((v.size(0), extra), fill if k == "input_ids" else 0, dtype=v.dtype)
            out[k] = torch.cat([v, pad], dim=1)
        else:
            out[k] = v
    return out


def infer(model, b: dict):
    with torch.no_grad():
        return model(**{k: v for k, v in b.items() if k != "labels"})


# ----------------------------------------------------------------------------------------------
# ATAE-LSTM family


@pytest.mark.parametrize("name", ["atae-lstm", "at-lstm"])
def test_alstm_attention_sums_to_one_over_the_sentence_and_is_zero_on_padding(name):
    b = batch(pad_second=4)
    alpha = infer(make(name), b).attentions["token_weights"]
    assert torch.allclose(alpha.sum(-1), torch.ones(4), atol=1e-6)
    assert (alpha[b["attention_mask"] == 0] == 0).all()
    alpha_p = infer(make(name), batch(pair=True)).attentions["token_weights"]          # mode P: sentence only
    assert (alpha_p[batch(pair=True)["token_type_ids"] == 1] == 0).all()


@pytest.mark.parametrize("name", OTHER)
@pytest.mark.parametrize("pair", [False, True])
def test_padding_changes_nothing(name, pair):
    model, b = make(name), batch(pair=pair)
    assert torch.allclose(infer(model, b).logits, infer(model, padded_more(b)).logits, atol=1e-5)


def test_alstm_variants_structure_and_parameter_counts():
    d_w, d, d_a, C, K, V = 32, 12, 6, 3, 8, make("ae-lstm").config.vocab_size
    lstm = lambda d_in: 4 * d * (d_in + d) + 8 * d                                       # noqa: E731
    common = V * d_w + K * d_a + (d_w * d_a + d_a) + (d * C + C)                         # vectors, v_a, proj, W_s
    attention = d * d + d_a * d_a + (d + d_a) + 2 * d * d                                # W_h, W_v, w, W_p, W_x
    ae, at, atae = make("ae-lstm"), make("at-lstm"), make("atae-lstm")
    assert not hasattr(ae, "attention") and not hasattr(ae, "final")                     # AE: no attention
    assert ae.lstm.input_size == atae.lstm.input_size == d_w + d_a and at.lstm.input_size == d_w
    assert count_parameters(ae) == common + lstm(d_w + d_a)
    assert count_parameters(at) == common + lstm(d_w) + attention
    assert count_parameters(atae) == common + lstm(d_w + d_a) + attention
    assert not atae.word_embeddings.weight.requires_grad                                 # frozen word vectors


def _scaled(name: str, **kw) -> AbsaModel:
    model = make(name, **kw)
    with torch.no_grad():                                   # weights of a trained model's scale
        for p in model.parameters():
            p.normal_(std=0.3)
    return model


def test_context_reaches_atae_only_through_the_aspect_vector():
    model, b = _scaled("atae-lstm"), batch()
    b2 = {**b, "context_ids": torch.tensor([1, 2, 6, 4])}
    assert not torch.allclose(infer(model, b).logits, infer(model, b2).logits, atol=1e-4)
    with torch.no_grad():                                   # same v_a for the new ids: same logits
        model.aspect_embeddings.weight[b2["context_ids"]] = model.aspect_embeddings.weight[b["context_ids"]]
    assert torch.allclose(infer(model, b).logits, infer(model, b2).logits, atol=1e-6)


def test_at_lstm_paper_score_is_blind_to_the_aspect_and_the_joint_score_is_not():
    b = batch()
    b2 = {**b, "context_ids": torch.tensor([1, 6, 0, 4])}
    paper, joint_score = _scaled("at-lstm"), _scaled("at-lstm", alstm_score="joint")
    assert torch.allclose(infer(paper, b).logits, infer(paper, b2).logits, atol=1e-5)
    assert not torch.allclose(infer(joint_score, b).logits, infer(joint_score, b2).logits, atol=1e-3)


def test_glove_vectors_are_placed_on_the_vocabulary_and_malformed_files_fail_clearly(tmp_path):
    good = tmp_path / "glove.txt"
    good.write_text("price 1.0 2.0 3.0\nsafety -1 0 0.5\nnot-in-vocab 9 9 9\n")
    vocab = {"[PAD]": 0, "price": 1, "safety": 2, "xyz": 3}
    table = glove_table(good, vocab, 4)
    assert table.shape == (4, 3) and table[1].tolist() == [1.0, 2.0, 3.0] and table[2].tolist() == [-1.0, 0.0, 0.5]
    assert table[3].abs().max() <= 0.01                                                   # OOV: U(-0.01, 0.01)
    model = make("atae-lstm", alstm_vectors=str(good))
    assert model.word_embeddings.weight.shape[1] == 3 and model.lstm.input_size == 3 + 6
    vocab_ids = __import__("absa_lib.models", fromlist=["load_tokenizer"]).load_tokenizer("tiny").get_vocab()
    assert model.word_embeddings.weight[vocab_ids["price"]].tolist() == [1.0, 2.0, 3.0]
    cases = {"ragged": "price 1 2 3\nsafety 1 2\n", "text": "price 1 two 3\n", "empty": "",
             "none": "qqqqq 1 2\n"}
    messages = {"ragged": r":2: expected 'word' and 3 numbers", "text": r":1: expected", "empty": "empty",
                "none": "none of its words"}
    for key, text in cases.items():
        bad = tmp_path / f"{key}.txt"
        bad.write_text(text)
        with pytest.raises(AbsaError, match=messages[key]):
            glove_table(bad, vocab, 4)
    with pytest.raises(AbsaError, match="no such file"):
        glove_table(tmp_path / "missing.txt", vocab, 4)


# ----------------------------------------------------------------------------------------------
# MAN


def test_man_rows_sum_to_one_and_padding_gets_no_weight():
    b = batch(pad_second=4)
    maps = infer(make("man-bert"), b).attentions
    valid = b["attention_mask"].bool()
    A, beta, w = maps["self_attention"], maps["beta"], maps["token_weights"]          # (B,k,T,T) (B,k,T) (B,T)
    assert torch.allclose(A.sum(-1), torch.ones_like(A.sum(-1)), atol=1e-5)             # every row of A^a
    assert torch.allclose(beta.sum(-1), torch.ones(4, 4), atol=1e-5)
    assert torch.allclose(w.sum(-1), torch.ones(4), atol=1e-5)
    assert (A.permute(0, 3, 1, 2)[~valid] == 0).all() and (beta.permute(0, 2, 1)[~valid] == 0).all()
    assert (w[~valid] == 0).all()


def test_man_regulariser_bounds_and_zero_case():
    k, n = 4, 9
    onehot = torch.zeros(2, k, n)
    onehot[:, torch.arange(k), torch.tensor([0, 3, 5, 8])] = 1.0                        # distinct tokens
    assert gram_distance(onehot).abs().max() < 1e-7
    same = torch.zeros(1, k, n)
    same[..., 2] = 1.0                                                                   # all heads on one token
    assert math.isclose(float(gram_distance(same)), math.sqrt(k * (k - 1)), rel_tol=1e-6)
    scores = torch.randn(3, k, n, n) * 3, torch.randn(3, k, 1, n) * 3
    mask = torch.ones(3, n, dtype=torch.bool)
    mask[0, 6:] = False
    for ortho in ("eq9", "eq9_split"):
        _, _, R = man_attention(*scores, mask, ortho)
        assert 0 <= float(R) <= (2 * k if ortho == "eq9_split" else k)                  # rows are distributions
    assert man_attention(*scores, mask, "none")[2] is None
    out = make("man-bert", man_ortho="none")(**batch())
    assert out.aux_losses == {}
    out = make("man-bert")(**batch())
    assert set(out.aux_losses) == {"ortho"} and out.aux_losses["ortho"] > 0


def test_man_code_literal_collapses_every_head_to_the_plain_sum():
    b = batch(pad_second=4)
    maps = infer(make("man-bert", man_ortho="code_literal"), b).attentions
    w = torch.einsum("bki,bkij->bkj", maps["beta"], maps["self_attention"])            # (B, k, T)
    assert torch.allclose(w, torch.ones_like(w), atol=1e-5)       # r^a = Σ_j h_j for every a, padding included
    intended = infer(make("man-bert"), b).attentions
    w2 = torch.einsum("bki,bkij->bkj", intended["beta"], intended["self_attention"])
    assert not torch.allclose(w2[:, 0], w2[:, 1], atol=1e-4)


def test_man_parameter_count_and_low_rank():
    d, k, C = 32, 4, 3
    bert = count_parameters(make("bert-pair")) - (32 * 32 + 32) - (d * C + C)          # minus pooler, classifier
    head = 2 * (k * d * d + k) + k * C * d + k * C + 2 * d                               # W_α, W_β, W_o, e_T
    assert count_parameters(make("man-bert")) == bert + head
    low = make("man-bert", man_rank=5, man_target="none", man_query="input_emb")
    assert count_parameters(low) == bert + 2 * (2 * k * d * 5 + k) + k * C * d + k * C + (d * d + d)
    b = batch()
    assert infer(low, b).logits.shape == (4, 3)


def test_one_encoder_pass_per_distinct_input_gives_the_same_states():
    model, b = make("man-bert"), batch()
    dup = {k: (v[[0, 0, 2, 2]] if v.dim() == 2 else v) for k, v in b.items()}          # 2 sentences x 2 contexts
    with torch.no_grad():
        H, _ = model.encode(dup["input_ids"], dup["attention_mask"], dup["token_type_ids"])
        H0, _ = model.encode(b["input_ids"][[0]], b["attention_mask"][[0]], b["token_type_ids"][[0]])
    assert torch.allclose(H[0], H[1]) and torch.allclose(H[0], H0[0], atol=1e-5)


# ----------------------------------------------------------------------------------------------
# Orthogonal attention


@pytest.mark.parametrize("variant", ["emb", "em", "c", "ca"])
def test_oa_weights_sum_to_one_over_the_query_and_padded_queries_change_nothing(variant):
    torch.manual_seed(0)
    oa = OrthogonalAttention(32, 4, variant).eval()
    C, Q = torch.randn(2, 7, 32), torch.randn(2, 5, 32)
    c_mask = torch.ones(2, 7, dtype=torch.bool)
    q_mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    out, a = oa(C, Q, c_mask, q_mask)
    assert out.shape == (2, 7, 32) and a.shape == (2, 4, 7, 5)
    assert torch.allclose(a.sum(-1), torch.ones(2, 4, 7), atol=1e-6) and (a[0, :, :, 3:] == 0).all()
    Q2 = Q.clone()
    Q2[0, 3:] = torch.randn(2, 32) * 10                                                 # junk in padded query slots
    assert torch.allclose(oa(C, Q2, c_mask, q_mask)[0], out, atol=1e-6)


def _pytorchnlp_dot(query: torch.Tensor, context: torch.Tensor, w_out: torch.nn.Linear) -> torch.Tensor:
    """PyTorchNLP's Attention(attention_type="dot") semantics, one query word at a time: softmax over
    the whole context (no mask), mix, then tanh(W_out [mix; query])."""
    rows = []
    for b in range(query.size(0)):
        for j in range(query.size(1)):
            weights = torch.softmax(context[b] @ query[b, j], dim=0)
            mix = weights @ context[b]
            rows.append(torch.tanh(w_out(torch.cat([mix, query[b, j]]))))
    return torch.stack(rows).view(query.size(0), query.size(1), -1)


def test_oa_emb_unmasked_query_matches_pytorchnlp_semantics():
    torch.manual_seed(0)
    oa = OrthogonalAttention(16, 2, "emb", mask_context=False).eval()
    C, Q = torch.randn(2, 6, 16), torch.randn(2, 3, 16)
    full = torch.ones(2, 6, dtype=torch.bool)
    q_tilde = oa.w_2(Q)
    expected = oa.w_3(_pytorchnlp_dot(q_tilde, oa.w_1(C), oa.w_out) * q_tilde)
    assert torch.allclose(oa.query_vectors(C, Q, full), expected, atol=1e-5)
    partial = full.clone()
    partial[0, 4:] = False                                         # the flag: padding leaks in, as in PyTorchNLP
    masked = OrthogonalAttention(16, 2, "emb", mask_context=True).eval()
    masked.load_state_dict(oa.state_dict())
    assert torch.allclose(oa.query_vectors(C, Q, partial), expected, atol=1e-5)
    assert not torch.allclose(masked.query_vectors(C, Q, partial)[0], expected[0], atol=1e-4)


def test_oa_layer_parameter_counts_at_bert_base_width():
    with torch.device("meta"):
        emb, em = OrthogonalAttention(768, 12, "emb"), OrthogonalAttention(768, 12, "em")
    assert count_parameters(emb) == 5_904_384 and count_parameters(em) == 3_543_552
    with torch.device("meta"):        # κ = σ = f = 8: f·L′ = 768, the reconstruction's ≈3.01M and ≈5.42M
        c, ca = OrthogonalAttention(768, 12, "c"), OrthogonalAttention(768, 12, "ca")
    assert count_parameters(c) == 3_008_328 and count_parameters(ca) == 5_424_528


def test_oa_c_keys_are_the_context_convolved_with_filters_made_from_each_query_word():
    """OA-C's pair features against a direct torch conv1d, one (context word, query word) at a time."""
    torch.manual_seed(0)
    oa = OrthogonalAttention(16, 2, "c", filters=2, kernel=4, stride=3).eval()
    C, Q = torch.randn(1, 3, 16), torch.randn(1, 2, 16)
    with torch.no_grad():
        got = oa.pair_features(C, Q)                                   # (1, 3, 2, f·L′), L′ = 5
        c_hat = oa.w_c(C)
        for i in range(3):
            for j in range(2):
                weight = oa.w_f(Q[0, j]).view(2, 1, 4)                 # f filters of width κ
                conv = torch.nn.functional.conv1d(c_hat[0, i].view(1, 1, 16), weight, oa.w_b(Q[0, j]), stride=3)
                assert torch.allclose(got[0, i, j], conv.flatten(), atol=1e-6)


def test_oa_c_options_are_checked():
    with pytest.raises(AbsaError, match="needs 1 <= oa_kernel <= 32"):
        OrthogonalAttention(32, 4, "ca", kernel=40)


@pytest.mark.parametrize("variant", ["c", "ca"])
def test_oa_bert_runs_with_the_convolution_variants_in_both_modes(variant):
    model = make("oa-bert", oa_variant=variant)
    for pair in (False, True):
        out = infer(model, batch(pair=pair))
        assert out.logits.shape == (4, 3) and torch.isfinite(out.logits).all()


def test_oa_query_is_the_auxiliary_sentence_in_mode_p():
    H = torch.arange(2 * 6, dtype=torch.float).view(2, 6, 1)
    query = torch.tensor([[0, 0, 0, 1, 1, 0], [0, 0, 1, 1, 1, 0]], dtype=torch.bool)
    Q, q_mask = gather_query(H, query)
    assert Q.squeeze(-1).tolist() == [[3, 4, 0], [8, 9, 10]] and q_mask.tolist() == [[1, 1, 0], [1, 1, 1]]
    maps = infer(make("oa-bert"), batch(pair=True)).attentions
    assert maps["oa"].shape[-1] == 4                                  # m = the 4 auxiliary tokens
    assert infer(make("oa-bert"), batch()).attentions["oa"].shape[-1] == 2    # mode S: target, aspect


# ----------------------------------------------------------------------------------------------
# joint objective


def test_joint_decoding_thresholds_presence_and_inverts_exactly():
    torch.manual_seed(0)
    raw = torch.randn(50, 5) * 3
    for none, tau in ((4, 0.5), (0, 0.3)):
        probs = torch.softmax(joint.decode(raw, none, tau), -1)
        p = torch.sigmoid(raw[:, none])
        assert torch.equal(probs.argmax(-1) == none, p < tau)
        p_hat, s_hat = joint.split_probs(probs.double().numpy(), none, tau)
        others = [k for k in range(5) if k != none]
        assert np.allclose(p_hat, p.numpy(), atol=1e-5)
        assert np.allclose(s_hat, torch.softmax(raw[:, others], -1).numpy(), atol=1e-5)


def test_joint_loss_is_the_sum_of_both_tasks_and_weights_update_by_the_rule():
    model, b = make("qacg-bert", objective="joint", none_label=0), batch()
    raw = {}
    model.classifier.register_forward_hook(lambda m, args, out: raw.setdefault("z", out))
    out = model(**b)
    z, y = raw["z"].detach().double(), b["labels"]                              # (B, 3): None, Pos, Neg
    present = (y != 0).double()
    p = torch.sigmoid(z[:, 0])                                                   # presence from the None logit
    l_cat = -(present * p.log() + (1 - present) * (1 - p).log()).mean()
    kept = z[y != 0][:, 1:]                                                      # the polarity logits
    l_sent = -(kept.gather(1, (y[y != 0] - 1)[:, None]).squeeze(1) - kept.logsumexp(1)).mean()
    assert (y != 0).any() and (y == 0).any()                                     # both tasks have examples
    assert out.loss.item() == pytest.approx((l_cat + l_sent).item(), abs=1e-5)  # T · Σ ½ L_t, written out
    assert joint.updated_weights([0.5, 0.5], [3.0, 1.0]) == pytest.approx([0.5 * 0.9 + 0.075, 0.5 * 0.9 + 0.025])
    assert sum(joint.updated_weights([0.3, 0.7], [0.2, 0.9])) == pytest.approx(1.0)


def test_objective_default_is_left_out_of_the_run_identity():
    cfg = run_config.TrainConfig(backbone="tiny")
    assert "objective" not in run_config.run_identity(cfg)["config"]
    assert run_config.run_identity(run_config.TrainConfig(backbone="tiny", objective="joint"))["config"]["objective"] == "joint"
    assert run_config.config_hash(run_config.run_identity(cfg)) != run_config.config_hash(run_config.run_identity(
        run_config.TrainConfig(backbone="tiny", objective="joint-dwa")))


# ----------------------------------------------------------------------------------------------
# saving, analysis, the command line


@pytest.mark.parametrize("name", OTHER)
def test_save_and_load_round_trip(name, tmp_path):
    model, b = make(name, objective="joint-dwa", none_label=0), batch()
    model.task_weights.copy_(torch.tensor([0.3, 0.7]))
    model.save_pretrained(tmp_path)
    loaded = AbsaModel.from_pretrained(tmp_path)
    assert type(loaded) is type(model) and loaded.task_weights.tolist() == pytest.approx([0.3, 0.7])
    assert torch.allclose(infer(model, b).logits, infer(loaded, b).logits)


def test_token_attention_of_each_model_and_a_clear_error_without_attention():
    from absa_lib.evaluation.analysis import extract_attention, token_attention

    b = batch(pad_second=4)
    for name in (n for n in MODELS if traits(n).context_ids and n != "ae-lstm"):    # all that read a context
        w = token_attention(make(name), b)
        assert w.shape == (4, 10) and (w[1, -4:] == 0).all() and w.abs().sum() > 0, name
    with pytest.raises(AbsaError, match="no attention maps"):
        extract_attention(make("ae-lstm"), b)


def small_args(dataset: str, model: str, aux: str, runs, *extra: str) -> list[str]:
    return ["train", "--dataset", dataset, "--model", model, "--aux", aux, "--backbone", "tiny", "--epochs", "2",
            "--batch-size", "8", "--max-length", "40", "--max-train-examples", "40", "--max-eval-examples", "40",
            "--out", str(runs), "--quiet", *extra]


@pytest.mark.usefixtures("real_data_dir")
@pytest.mark.parametrize("dataset,model,aux,extra", [
    ("sentihood", "atae-lstm", "none", ()), ("semeval", "ae-lstm", "none", ()),
    ("sentihood", "at-lstm", "NLI-M", ()), ("semeval", "man-bert", "none", ()),
    ("sentihood", "man-bert", "NLI-M", ("--override", "man_ortho=eq9_split")),
    ("semeval", "oa-bert", "NLI-M", ()), ("sentihood", "oa-bert", "none", ()),
    ("semeval", "qacg-bert", "none", ("--objective", "joint-dwa")),
    ("sentihood", "man-bert", "none", ("--objective", "joint")),
])
def test_tiny_training_run_through_absa_train(dataset, model, aux, extra, tmp_path, capsys):
    from absa_lib.evaluation.metrics import METRIC_KEYS

    assert main(small_args(dataset, model, aux, tmp_path, *extra)) == 0
    summary = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"{c} in the output"))
    metrics = json.loads((tmp_path / dataset / model / summary["run_id"] / "metrics.json").read_text())
    assert metrics["complete"] and len(metrics["epochs"]) == 2
    for row in metrics["epochs"]:
        assert set(METRIC_KEYS[dataset]) <= set(row["test"]) and row["train_loss"] > 0
    if "--objective" in extra:
        w = [row["task_weights"] for row in metrics["epochs"]]
        assert w[0] == {"aspect": 0.5, "sentiment": 0.5} and set(metrics["epochs"][0]["dev_task_losses"]) == {
            "aspect", "sentiment"}
        if "joint-dwa" in extra:
            assert w[1] != w[0] and sum(w[1].values()) == pytest.approx(1.0)
        else:
            assert w[1] == w[0]


@pytest.mark.parametrize("argv,message", [
    (["--override", 'man_ortho="bogus"'], "man_ortho='bogus' is invalid"),
    (["--override", "alstm_hidden=8"], "does not apply to man-bert"),
    (["--override", "man_rank=Infinity"], "man_rank=inf is invalid; expected a finite number >= 0 (int)"),  # was a traceback
    (["--override", "man_lambda=Infinity"], "man_lambda=inf is invalid"),     # trained an epoch, then failed
    (["--objective", "pcgrad"], "objective='pcgrad' is not one of"),
])
def test_bad_options_are_one_clear_line(argv, message, tmp_path, capsys):
    assert main(small_args("sentihood", "man-bert", "none", tmp_path, *argv)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("absa: error:") and message in err and "\n" not in err


def test_joint_objective_rejects_binary_inputs_and_bert_single(tmp_path, capsys):
    for model, aux in (("qacg-bert", "NLI-B"), ("bert-single", "single")):
        assert main(small_args("sentihood", model, aux, tmp_path, "--objective", "joint")) == 2
        assert "objective='joint' needs" in capsys.readouterr().err


@pytest.mark.parametrize("name", OTHER)
def test_info_prints_the_parameter_count(name, capsys):
    assert main(["info", "--model", name, "--backbone", "tiny", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    model = make(name, **({k: 300 for k in SMALL_LSTM} if name.endswith("-lstm") else {}))
    assert info["parameters"] == count_parameters(model) and sum(info["breakdown"].values()) == info["parameters"]


@pytest.mark.usefixtures("real_data_dir")
def test_bench_accepts_the_new_models(capsys):
    assert main(["bench", "--model", *OTHER, "--backbone", "tiny", "--steps", "1", "--warmup", "0",
                 "--batch-size", "4", "--max-length", "32", "--no-inference", "--json", "--precision", "fp32"]) == 0
    rows = json.loads(capsys.readouterr().out)["results"]      # fp32 random batches: one setting
    assert [(r["model"], r["setting"]) for r in rows] == [(m, "fp32 random") for m in OTHER]
    assert all(r["train"]["examples_per_s"] > 0 for r in rows)


@pytest.mark.parametrize("dataset", ["sentihood", "semeval"])
def test_identical_one_epoch_joint_and_joint_dwa_rows_carry_the_footnote_that_says_why(dataset):
    """The committed table shows the one-epoch joint and joint-dwa rows with the same numbers: DWA's
    weights are the fixed ½ and ½ until after epoch 1 (joint.updated_weights), and a footnote says so."""
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "results" / f"other_attention_{dataset}.md").read_text(encoding="utf-8")
    rows = {cells[2]: cells[5:] for line in text.splitlines() if line.startswith("| QACG-BERT, joint")
            and (cells := [c.strip() for c in line.strip("|").split("|")])[3] == "minilm, 1 epoch"}
    assert set(rows) == {"joint", "joint-dwa"} and rows["joint"] == rows["joint-dwa"]
    assert ("_QACG-BERT, joint + dynamic weights (minilm, 1 epoch): the dynamic weights first change after epoch 1, "
            "so a one-epoch run trains as the joint objective's does (weights ½ and ½)") in text

