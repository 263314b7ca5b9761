"""The fast path: precision, length-grouped batches, sorted inference, identity, head learning rate."""

from __future__ import annotations

import shutil
from functools import partial

import numpy as np
import pytest
import torch

from absa_lib import device as DV
from absa_lib.data.features import Encoded, by_length, length_grouped, sequential
from absa_lib.errors import AbsaError
from absa_lib.evaluation import inference
from absa_lib.training import config as run_config
from absa_lib.training import optim, splits


@pytest.fixture(scope="module")
def small(tiny_config):
    """``small(**changes)``: the tiny run (conftest) of 48 examples in batches of 8, seed 7."""
    return partial(tiny_config, seed=7, batch_size=8, max_train_examples=48, max_eval_examples=40)


def fake_encoded(lengths):
    return [Encoded([1] * n, [0] * n, 0, i % 3) for i, n in enumerate(lengths)]


# ---------------------------------------------------------------------------------------------- batching


def padding(batches, lengths):
    return sum(len(b) * max(lengths[i] for i in b) - sum(lengths[i] for i in b) for b in batches)


def test_length_grouped_batches_cover_every_input_once_with_less_padding():
    rng = np.random.default_rng(0)
    lengths = rng.integers(5, 60, size=1000).tolist()
    order = torch.randperm(1000, generator=torch.Generator().manual_seed(1)).tolist()
    grouped = length_grouped(order, lengths, 24, torch.Generator().manual_seed(2), chunk_batches=10)
    assert sorted(i for b in grouped for i in b) == list(range(1000))
    assert all(len(b) <= 24 for b in grouped)
    plain = sequential(order, 24)
    assert padding(grouped, lengths) < 0.2 * padding(plain, lengths)
    again = length_grouped(order, lengths, 24, torch.Generator().manual_seed(2), chunk_batches=10)
    assert again == grouped                                   # seeded: a resumed run draws the same
    other = length_grouped(order, lengths, 24, torch.Generator().manual_seed(3), chunk_batches=10)
    assert other != grouped


def test_epoch_batches_grouped_is_a_permutation_that_changes_per_epoch(small):
    enc = fake_encoded(np.random.default_rng(0).integers(3, 40, 200).tolist())
    cfg = small(group_by_length=True, batch_size=16)
    e1, e2 = splits.epoch_batches(cfg, enc, 1), splits.epoch_batches(cfg, enc, 2)
    assert sorted(sum(e1, [])) == list(range(200)) and e1 != e2
    assert splits.epoch_batches(cfg, enc, 1) == e1


def test_by_length_sorts_inference_batches():
    enc = fake_encoded([9, 3, 7, 3, 12, 1])
    batches = by_length(enc, 2)
    assert [[len(enc[i].input_ids) for i in b] for b in batches] == [[1, 3], [3, 7], [9, 12]]


def test_predict_probs_is_in_input_order_whatever_the_batching():
    from absa_lib.models import build_model

    torch.manual_seed(0)
    model = build_model("qacg-bert", backbone="tiny", num_labels=3, num_contexts=8)
    rng = np.random.default_rng(0)
    enc = [Encoded(rng.integers(5, 100, n).tolist(), [0] * n, int(rng.integers(0, 8)), 0)
           for n in rng.integers(4, 30, 23)]
    together = inference.predict_probs(model, enc, batch_size=5)
    one_by_one = np.concatenate([inference.predict_probs(model, [e], batch_size=1) for e in enc])
    np.testing.assert_allclose(together, one_by_one, atol=1e-5)


# ---------------------------------------------------------------------------------------------- precision


def test_auto_precision_resolves_by_device(monkeypatch):
    """bf16 only where it is native; fp16 on a GPU without bf16 units (a T4), never emulated bf16."""
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    monkeypatch.setattr(DV, "cpu_has_native_bf16", lambda: False)
    assert DV.resolve_precision("auto", cpu) == "fp32"
    monkeypatch.setattr(DV, "cpu_has_native_bf16", lambda: True)
    assert DV.resolve_precision("auto", cpu) == "bf16"
    asked = []
    for native, expected in ((True, "bf16"), (False, "fp16")):          # an H100; a T4
        monkeypatch.setattr(torch.cuda, "is_bf16_supported",
                            lambda including_emulation=True, native=native: asked.append(including_emulation) or native)
        assert DV.resolve_precision("auto", cuda) == expected
    assert asked == [False, False]                     # native units asked for, not emulation
    assert DV.resolve_precision("fp32", cuda) == "fp32" and DV.resolve_precision("fp16", cpu) == "fp16"
    with pytest.raises(AbsaError, match="precision='fp8'"):
        DV.resolve_precision("fp8", cpu)


def test_fp16_autocasts_to_float16_and_scales_the_loss_only_under_fp16():
    cpu = torch.device("cpu")
    with DV.autocast(cpu, "fp16"):
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.float16
    with DV.autocast(cpu, "fp32"):
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.float32
    assert DV.grad_scaler(cpu, "fp16").is_enabled()
    assert not DV.grad_scaler(cpu, "bf16").is_enabled() and not DV.grad_scaler(cpu, "fp32").is_enabled()


def test_bf16_inference_close_to_fp32_and_gates_stay_fp32():
    from absa_lib.data.features import collate
    from absa_lib.models import build_model

    torch.manual_seed(0)
    model = build_model("qacg-bert", backbone="tiny", num_labels=3, num_contexts=8).eval()
    enc = [Encoded(list(range(5, 5 + n)), [0] * n, c, 0) for n, c in ((7, 1), (12, 3))]
    fp32 = inference.predict_probs(model, enc, precision="fp32")
    bf16 = inference.predict_probs(model, enc, precision="bf16")
    assert np.abs(fp32 - bf16).max() < 0.05 and not np.array_equal(fp32, bf16)
    batch = {k: v for k, v in collate(enc).items() if k != "labels"}
    with torch.no_grad(), DV.autocast(torch.device("cpu"), "bf16"):
        comps = model(**batch, output_components=True).components
    assert comps[0]["lambda_a"].dtype == torch.float32


# ---------------------------------------------------------------------------------------------- identity


def test_run_identity_records_resolved_precision_and_leaves_neutral_fields_out(monkeypatch, small):
    monkeypatch.setattr(DV, "cpu_has_native_bf16", lambda: False)
    ident = run_config.run_identity(small())
    assert ident["config"]["precision"] == "fp32"
    assert run_config.run_identity(small(precision="fp32")) == ident          # auto resolved here = fp32
    for field in run_config.NEUTRAL_DEFAULTS:
        assert field not in ident["config"]
    for change in ({"group_by_length": True}, {"schedule": "constant"}, {"head_lr_mult": 10.0},
                   {"precision": "bf16"}):
        other = run_config.run_identity(small(**change))
        assert run_config.config_hash(other) != run_config.config_hash(ident), change


def test_local_backbone_identity_follows_its_weights(tiny_dir, tmp_path, monkeypatch, small):
    folder = tmp_path / "bb"
    shutil.copytree(tiny_dir, folder)
    monkeypatch.chdir(tmp_path)
    relative = small(backbone="bb")
    ident = run_config.run_identity(relative)
    assert ident["config"]["backbone"] == str(folder.resolve())     # absolute: cwd does not matter
    from safetensors.torch import load_file, save_file

    weights = load_file(folder / "model.safetensors")
    key = sorted(weights)[0]
    weights[key] = weights[key] + 1.0
    save_file(weights, folder / "model.safetensors")
    assert run_config.config_hash(run_config.run_identity(relative)) != run_config.config_hash(ident)


def test_config_rejects_non_finite_numbers(small):
    for field, value in (("lr", float("inf")), ("lr", float("nan")), ("head_lr_mult", 0.0), ("warmup", 1.5)):
        with pytest.raises(AbsaError, match=field):
            small(**{field: value})
    with pytest.raises(AbsaError, match="schedule='cosine'"):
        small(schedule="cosine")


# ---------------------------------------------------------------------------------------------- optimizer


def test_head_learning_rate_multiplier_reaches_head_and_context_layers_only(small):
    from absa_lib.models import build_model

    model = build_model("qacg-bert", backbone="tiny", num_labels=3, num_contexts=8)
    config = small(head_lr_mult=10.0)
    opt = optim.build_optimizer(model, config)
    mult = {id(p): g["base_lr"] / config.lr for g in opt.param_groups for p in g["params"]}
    names = dict(model.named_parameters())
    assert mult[id(names["classifier.weight"])] == pytest.approx(10.0)
    assert mult[id(names["bert.pooler.dense.weight"])] == pytest.approx(10.0)
    assert mult[id(names["context_embeddings.weight"])] == pytest.approx(10.0)
    assert mult[id(names["bert.encoder.layer.0.attention.self.context_layer.weight"])] == pytest.approx(10.0)
    assert mult[id(names["bert.encoder.layer.0.attention.self.query.weight"])] == 1.0
    assert mult[id(names["bert.embeddings.word_embeddings.weight"])] == 1.0
    assert sum(len(g["params"]) for g in opt.param_groups) == len(names)


def test_constant_schedule_holds_after_warmup():
    f = [optim.lr_factor(s, 100, 0.1, "constant") for s in range(100)]
    assert f[9] == 1.0 and f[-1] == 1.0 and f[0] == pytest.approx(0.1)


def test_mean_pooling_is_an_option_not_the_default():
    from absa_lib.data.features import collate
    from absa_lib.models import build_model

    torch.manual_seed(0)
    cls = build_model("bert-pair", backbone="tiny", num_labels=3, num_contexts=8).eval()
    torch.manual_seed(0)
    mean = build_model("bert-pair", backbone="tiny", num_labels=3, num_contexts=8, pooling="mean").eval()
    assert cls.config.pooling == "cls"
    enc = [Encoded(list(range(5, 15)), [0] * 10, 0, 0), Encoded(list(range(5, 9)), [0] * 4, 0, 0)]
    batch = {k: v for k, v in collate(enc).items() if k != "labels"}
    with torch.no_grad():
        a, b = cls(**batch).logits, mean(**batch).logits
    assert not torch.allclose(a, b)
    # padding does not change the mean-pooled output of the short input
    with torch.no_grad():
        alone = mean(**{k: v for k, v in collate(enc[1:]).items() if k != "labels"}).logits
    torch.testing.assert_close(alone[0], b[1], atol=1e-5, rtol=1e-5)
    with pytest.raises(AbsaError, match="pooling"):
        build_model("bert-pair", backbone="tiny", num_labels=3, num_contexts=8, pooling="max")


@pytest.mark.parametrize("name", ["bert-pair", "qacg-bert"])
def test_the_papers_head_reads_the_last_cls_state_without_a_bias(name, tmp_path):
    # §3.5: y = softmax(e_CLS W_CLSᵀ); the presets keep the official pooler head
    from transformers import AutoModel

    from absa_lib.data.features import collate
    from absa_lib.models import build_model

    model = build_model(name, backbone="tiny", num_labels=3, num_contexts=8, pooling="cls_state").eval()
    assert model.classifier.bias is None and "classifier.bias" not in model.state_dict()
    enc = [Encoded(list(range(5, 15)), [0] * 10, 0, 2), Encoded(list(range(5, 9)), [0] * 4, 0, 5)]
    batch = {k: v for k, v in collate(enc).items() if k != "labels"}
    with torch.no_grad():
        logits = model(**batch).logits                                             # (2, 3)
        mask = (1.0 - batch["attention_mask"][:, None, None, :].float()) * -10000.0
        extra = {"context": model.context_embeddings(batch["context_ids"])} if name == "qacg-bert" else {}
        states = model.bert(input_ids=batch["input_ids"], attention_mask=mask,
                            token_type_ids=batch["token_type_ids"], **extra).last_hidden_state
        torch.testing.assert_close(logits, states[:, 0] @ model.classifier.weight.T)
        pooled = model.bert.pooler(states)                                         # the official head's input
        assert not torch.allclose(logits, pooled @ model.classifier.weight.T)
        model.save_pretrained(tmp_path / "m")                                      # strict loading, no bias
        torch.testing.assert_close(AutoModel.from_pretrained(tmp_path / "m").eval()(**batch).logits, logits)


@pytest.mark.usefixtures("real_data_dir")
def test_tokenized_once_per_process(monkeypatch, small):
    from absa_lib.models import load_tokenizer

    calls = []
    real = splits.encode_examples
    monkeypatch.setattr(splits, "encode_examples", lambda *a, **k: calls.append(1) or real(*a, **k))
    tok = load_tokenizer("tiny")
    cfg = small(max_train_examples=17)
    first = splits.prepare_split(cfg, "train", tok)
    second = splits.prepare_split(small(max_train_examples=17, seed=9, model="cg-bert"), "train", tok)
    assert first is second and len(calls) == 1
    splits.prepare_split(small(max_train_examples=17, max_length=40), "train", tok)
    assert len(calls) == 2


# ---------------------------------------------------------------------------------------------- faster inference


def test_int8_inference_quantizes_the_bert_linears_and_keeps_the_context_layers(tiny_dir):
    from absa_lib.data.inputs import model_sizes
    from absa_lib.models.registry import build_for_training

    torch.manual_seed(0)
    model = build_for_training("qacg-bert", backbone="tiny", preset="paper", **model_sizes("semeval", "NLI-M")).eval()
    runner, precision = inference.for_inference(model, "int8")
    kinds = {name: type(m).__module__ for name, m in runner.named_modules() if "Linear" in type(m).__name__
             and not type(m).__name__.endswith("Params")}
    assert precision == "fp32" and runner is not model
    assert all("quantized" in kind for name, kind in kinds.items() if name.rsplit(".", 1)[-1] not in inference.READ_AS_WEIGHTS)
    assert all("quantized" not in kind for name, kind in kinds.items() if name.rsplit(".", 1)[-1] in inference.READ_AS_WEIGHTS)
    assert not any("quantized" in type(m).__module__ for m in model.modules())           # the model itself untouched
    encoded = fake_encoded([9, 12, 7, 15])
    for e in encoded:
        e.context_id = 1
    exact = inference.predict_probs(model, encoded, 2)
    fast = inference.predict_probs(runner, encoded, 2, precision=precision)
    assert fast.shape == exact.shape and np.allclose(fast.sum(1), 1) and np.abs(fast - exact).max() < 0.05
    assert inference.for_inference(model, "bf16") == (model, "bf16")
    with pytest.raises(AbsaError, match=r"inference 'fast': expected one of fp32, bf16, int8"):
        inference.for_inference(model, "fast")


def test_absa_bench_times_int8_inference_beside_fp32_sorted(capsys, real_data_dir):
    import json

    from absa_lib.cli import main

    assert main(["bench", "--model", "bert-pair", "--backbone", "tiny", "--steps", "2", "--warmup", "1",
                 "--inference", "int8", "--json"]) == 0
    rows = {r["setting"]: r for r in json.loads(capsys.readouterr().out)["results"]}
    assert set(rows) == {"fp32 random", "fp32 grouped", "int8 grouped"}
    assert all("train" not in r for r in rows.values())                       # inference only
    assert rows["fp32 grouped"]["infer"]["vs_fp32_grouped"] == 1.0
    assert rows["int8 grouped"]["infer"]["examples_per_s"] > 0
