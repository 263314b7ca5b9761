"""The compiled training step (``compile``): its identity, its padding, and bert-single's routing
(per-context batches: each classifier compiled on its own, sparse; mixed batches: the K stacked into
one batched model, or, for the benchmark, dense by parts).

Compiling with inductor is slow on a CPU (a minute for the tiny model), so these tests check what the
compiled step relies on, not a compiled run; two trace bert-single's parts with dynamo's ``eager``
backend (seconds) to count the graphs, and one (marked slow) compiles its stacked step with inductor. The GPU speed is in the README's measured table.
"""

from __future__ import annotations

import re

import pytest
import torch

from absa_lib import device as DV
from absa_lib.data.features import Encoded, collate
from absa_lib.errors import AbsaError
from absa_lib.models import build_model
from absa_lib.models.registry import build_per_context
from absa_lib.training import config as run_config


def test_compile_is_validated_and_left_out_of_the_identity_when_off():
    with pytest.raises(AbsaError, match="compile='fast' is not one of none, default, reduce-overhead"):
        run_config.TrainConfig(compile="fast")
    off = run_config.run_identity(run_config.TrainConfig(backbone="tiny"))
    on = run_config.run_identity(run_config.TrainConfig(backbone="tiny", compile="reduce-overhead"))
    assert "compile" not in off["config"]                 # runs trained before the option keep their ids
    assert on["config"]["compile"] == "reduce-overhead"
    assert run_config.config_hash(off) != run_config.config_hash(on)


def test_padding_to_a_multiple_changes_the_shape_not_the_tokens():
    enc = [Encoded([5] * 7, [0] * 7, 1, 0), Encoded([6] * 19, [0] * 10 + [1] * 9, 2, 1)]
    plain, padded = collate(enc, 0), collate(enc, 0, pad_multiple=16)
    assert plain["input_ids"].shape == (2, 19) and padded["input_ids"].shape == (2, 32)
    for key in ("input_ids", "attention_mask", "token_type_ids"):
        assert torch.equal(padded[key][:, :19], plain[key])
        assert not padded[key][:, 19:].any()
    exact = collate([Encoded([5] * 32, [0] * 32, 0, 0)], 0, pad_multiple=16)
    assert exact["input_ids"].shape == (1, 32)
    assert DV.pad_multiple("none") == 1 and DV.pad_multiple("reduce-overhead") == DV.pad_multiple("default") == 16


def test_padding_to_a_multiple_leaves_the_model_output_unchanged():
    torch.manual_seed(0)
    model = build_model("qacg-bert", backbone="tiny", num_labels=3, num_contexts=8, num_aspects=4).eval()
    enc = [Encoded(list(range(5, 5 + n)), [0] * (n - 4) + [1] * 4, n % 8, 0) for n in (9, 13, 6)]
    with torch.no_grad():
        outs = [model(**{k: v for k, v in collate(enc, 0, m).items() if k != "labels"}).logits for m in (1, 16)]
    torch.testing.assert_close(outs[0], outs[1], atol=1e-5, rtol=1e-5)


def test_compiled_returns_the_model_when_off_and_a_wrapper_sharing_its_parameters_when_on():
    model = build_model("bert-pair", backbone="tiny", num_labels=3, num_contexts=8, num_aspects=4)
    assert DV.compiled(model, "none") is model
    wrapped = DV.compiled(model, "default")                # compiles lazily, on the first call
    assert wrapped is not model and wrapped._orig_mod is model
    assert [p.data_ptr() for p in wrapped.parameters()] == [p.data_ptr() for p in model.parameters()]
    with pytest.raises(AbsaError, match="compile='eager'"):
        DV.compiled(model, "eager")


def _batch():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 100, (6, 9), generator=g)
    mask = torch.ones(6, 9, dtype=torch.long)
    mask[0, 6:] = 0
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids),
            "context_ids": torch.tensor([0, 3, 5, 3, 0, 6]), "labels": torch.tensor([0, 1, 2, 1, 0, 2])}


def test_bert_single_dense_routing_gives_the_sparse_loss_gradients_and_skipped_models(monkeypatch):
    torch.manual_seed(0)
    model = build_per_context(backbone="tiny", num_labels=3, num_contexts=8, num_aspects=4).eval()  # no dropout
    grads = {}
    for dense in (False, True):
        monkeypatch.setattr(torch.compiler, "is_compiling", lambda dense=dense: dense)   # dense: as compiled
        model.zero_grad(set_to_none=True)
        out = model(**_batch())
        out.loss.backward()
        if dense:
            model.drop_absent_grads(_batch()["context_ids"])
        grads[dense] = (out.loss.detach(), {n: p.grad for n, p in model.named_parameters()})
    torch.testing.assert_close(grads[True][0], grads[False][0])
    for name, g in grads[False][1].items():
        dense_g = grads[True][1][name]
        if g is None:                                        # contexts 1, 2, 4, 7: absent from the batch
            assert dense_g is None, name
        else:
            torch.testing.assert_close(dense_g, g, atol=1e-6, rtol=1e-5)
    absent = {int(n.split(".")[1]) for n, g in grads[True][1].items() if g is None}
    assert absent == {1, 2, 4, 7}


def test_bert_single_routes_densely_under_torch_compile_and_sparsely_in_eager(monkeypatch):
    """Compiled (``torch.compiler.is_compiling()``), every classifier sees the whole batch; eager
    (evaluation included), each sees only its context's rows. ``compiled`` changes nothing on the model."""
    model = build_per_context(backbone="tiny", num_labels=3, num_contexts=8, num_aspects=4).eval()
    DV.compiled(model, "reduce-overhead")
    seen = {}
    for c, sub in enumerate(model.models):
        sub.register_forward_hook(lambda m, args, out, c=c: seen.setdefault(c, []).append(args[0].size(0)))
    with torch.no_grad():
        model(**_batch())
        eager, seen = seen, {}
        monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
        model(**_batch())
    assert eager == {0: [2], 3: [2], 5: [1], 6: [1]}
    assert seen == {c: [6] for c in range(8)}


def test_bert_single_on_per_context_batches_compiles_each_classifier_and_routes_sparsely(monkeypatch):
    """``parts``: every classifier is compiled on its own (torch.compile then shares one graph among
    them), each batch runs only its rows' classifiers, and the loss is the eager model's."""
    model = build_per_context(backbone="tiny", num_labels=3, num_contexts=8, num_aspects=4).eval()
    calls = []
    monkeypatch.setattr(torch, "compile", lambda m, mode=None: calls.append((m, mode)) or m)
    step = DV.compiled(model, "reduce-overhead", "sparse")
    assert [m for m, _ in calls] == list(model.models) and {mode for _, mode in calls} == {"reduce-overhead"}
    assert [p.data_ptr() for p in step.parameters()] == [p.data_ptr() for p in model.parameters()]
    DV.compiled(model, "default", "sparse")
    assert {mode for _, mode in calls[8:]} == {None}                  # torch.compile's own default
    seen = {}
    for c, sub in enumerate(model.models):
        sub.register_forward_hook(lambda m, args, out, c=c: seen.setdefault(c, []).append(args[0].size(0)))
    with torch.no_grad():
        loss = step(**_batch()).loss
        assert seen == {0: [2], 3: [2], 5: [1], 6: [1]}
        torch.testing.assert_close(loss, model(**_batch()).loss)
    with pytest.raises(AbsaError, match="bert-single needs context_ids"):
        step(**{k: v for k, v in _batch().items() if k != "context_ids"})


def test_training_compiles_bert_single_sparse_on_per_context_batches_and_stacked_on_mixed(monkeypatch, tmp_path,
                                                                                          real_data_dir, tiny_config):
    from absa_lib.training import loop as training

    asked = []

    def record(model, mode, routing=None):
        asked.append((type(model).__name__, routing))
        return model

    monkeypatch.setattr(training, "compiled", record)
    for sampler in ("per-context", "uniform"):
        config = tiny_config(model="bert-single", aux="single", batch_size=8, max_train_examples=16,
                             max_eval_examples=40, compile="default", sampler=sampler)
        training.train(config, runs_dir=tmp_path, data_dir=real_data_dir, progress=False)
    config = tiny_config(batch_size=8, max_train_examples=16, max_eval_examples=40, compile="default")
    training.train(config, runs_dir=tmp_path, data_dir=real_data_dir, progress=False)
    assert asked == [("PerContextModel", "sparse"), ("PerContextModel", "stacked"), ("AbsaModel", None)]


def test_training_pads_the_stacked_steps_batches_to_one_length_so_one_graph_serves_them(monkeypatch, tmp_path,
                                                                                       real_data_dir, capsys, tiny_config):
    """Under ``vmap`` the stacked step's graph holds the input length as a constant (the batching
    rules of the embedding lookups and of layer norm read it), so padded to a multiple of 16 each new
    length was a graph compiled anew: on this CPU the 25-epoch run's first epoch compiled 8 and hit
    dynamo's limit, past which a step runs eager. Training pads the stacked step's batches to
    ``max_length``: one graph for the full batches, one for the short last batch (traced by dynamo's
    ``eager`` backend), which the epoch's line reports. Per-context batches keep the multiple of 16."""
    from functools import partial

    from torch._dynamo.utils import counters

    from absa_lib.training import loop as training

    assert DV.pad_multiple("default", "stacked", 96) == DV.pad_multiple("reduce-overhead", "stacked", 96) == 96
    assert DV.pad_multiple("default", "sparse", 96) == DV.pad_multiple("default", None, 96) == DV.COMPILE_PAD_MULTIPLE
    assert DV.pad_multiple("none", "stacked", 96) == 1
    torch._dynamo.reset()
    counters.clear()
    monkeypatch.setattr(torch, "compile", partial(torch.compile, backend="eager"))
    lengths = []
    monkeypatch.setattr(training, "_step_loss", lambda s, batch: lengths.append(batch["input_ids"].size(1))
                        or s.step_model(**batch).loss)
    config = tiny_config(model="bert-single", aux="single", batch_size=8, max_length=96, max_train_examples=124,
                         max_eval_examples=16, compile="default", sampler="uniform")
    training.train(config, runs_dir=tmp_path, data_dir=real_data_dir, progress=True)
    assert lengths == [96] * 16                                 # 15 batches of 8 and one of 4
    assert counters["stats"]["unique_graphs"] == 2
    assert counters["frames"]["total"] == counters["frames"]["ok"] == 2
    assert re.search(r"\[absa\] epoch 1/1 loss .*; 2 graphs compiled in this process\)", capsys.readouterr().err)
    torch._dynamo.reset()


def test_a_failed_compilation_is_one_line(monkeypatch, tmp_path, real_data_dir, tiny_config):
    from absa_lib.training import loop as training

    def broken(model, mode, routing=None):
        def step(**batch):
            raise torch._dynamo.exc.TorchDynamoException("backend='inductor' raised: no C++ compiler")
        return step if mode != "none" else model

    monkeypatch.setattr(training, "compiled", broken)
    config = tiny_config(batch_size=8, max_train_examples=16, max_eval_examples=40, compile="default")
    with pytest.raises(AbsaError, match=r"^compile='default': torch.compile failed \(backend='inductor' raised: "
                                        r"no C\+\+ compiler\); train with compile none"):
        training.train(config, runs_dir=tmp_path, data_dir=real_data_dir, progress=False)


def test_the_compiled_parts_share_one_set_of_graphs_among_all_classifiers(monkeypatch):
    """Traced for real by dynamo (its ``eager`` backend: no C++ compiler, the same guards and graphs
    as inductor): per-context batches of 8 classifiers, two lengths and a short last batch each,
    compile three graphs in all, not three per classifier, and give the eager loss and gradients.
    A guard on the module's identity would recompile per classifier and, past dynamo's recompile
    limit of 8, silently fall back to eager on the GPU."""
    from functools import partial

    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    monkeypatch.setattr(torch, "compile", partial(torch.compile, backend="eager"))
    torch.manual_seed(0)
    model = build_per_context(backbone="tiny", num_labels=3, num_contexts=8, num_aspects=4).eval()  # no dropout
    step = DV.compiled(model, "default", "sparse")
    g = torch.Generator().manual_seed(1)
    for c in range(8):
        for length, size in ((16, 6), (16, 3 + c % 2), (32, 6)):
            ids = torch.randint(5, 100, (size, length), generator=g)
            batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids),
                     "context_ids": torch.full((size,), c), "labels": torch.randint(0, 3, (size,), generator=g)}
            grads = []
            for run in (step, model):
                model.zero_grad(set_to_none=True)
                loss = run(**batch).loss
                loss.backward()
                grads.append((loss.detach(), [p.grad for p in model.models[c].parameters()]))
            torch.testing.assert_close(grads[0][0], grads[1][0])
            for compiled_grad, eager_grad in zip(grads[0][1], grads[1][1], strict=True):
                torch.testing.assert_close(compiled_grad, eager_grad, atol=1e-6, rtol=1e-5)
    assert counters["stats"]["unique_graphs"] == 3            # batch size, then length, made dynamic
    assert counters["frames"]["total"] == counters["frames"]["ok"] == 3
    torch._dynamo.reset()


@pytest.mark.parametrize("routing", ["stacked", "dense"])
def test_on_mixed_batches_the_compiled_step_has_one_set_of_graphs_and_the_eager_loss(monkeypatch, routing):
    """Mixed batches, traced for real by dynamo (``eager`` backend): training's stacked step (the 8
    classifiers as one batched model) and the benchmark's dense one by parts (each compiled
    classifier on the whole batch, all 8 sharing one classifier's graphs) have the batch's shapes
    however its rows divide among the contexts: three graphs for two lengths and a short batch,
    nothing falling back to eager. Loss and gradients are the eager model's (sparse routing) once
    the absent contexts' zero gradients are dropped, as training does."""
    from functools import partial

    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    monkeypatch.setattr(torch, "compile", partial(torch.compile, backend="eager"))
    torch.manual_seed(0)
    model = build_per_context(backbone="tiny", num_labels=3, num_contexts=8, num_aspects=4).eval()  # no dropout
    step = DV.compiled(model, "default", routing)
    assert step.dense                                       # training drops the absent contexts' gradients
    seen = {}
    for c, sub in enumerate(model.models):
        sub.register_forward_hook(lambda m, args, out, c=c: seen.setdefault(c, set()).add(args[0].size(0)))
    g = torch.Generator().manual_seed(1)
    for length, size in ((16, 6), (16, 6), (32, 6), (16, 3)):
        ids = torch.randint(5, 100, (size, length), generator=g)
        context_ids = torch.randint(0, 8, (size,), generator=g)      # a different mix of contexts each time
        batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids),
                 "context_ids": context_ids, "labels": torch.randint(0, 3, (size,), generator=g)}
        grads = []
        for run in (step, model):
            model.zero_grad(set_to_none=True)
            seen.clear()
            loss = run(**batch).loss
            loss.backward()
            if run is step:
                model.drop_absent_grads(context_ids)
                compiled_seen = dict(seen)
            grads.append((loss.detach(), [p.grad for p in model.parameters()]))
        torch.testing.assert_close(grads[0][0], grads[1][0])
        for compiled_grad, eager_grad in zip(grads[0][1], grads[1][1], strict=True):
            if eager_grad is None:
                assert compiled_grad is None
            else:
                torch.testing.assert_close(compiled_grad, eager_grad, atol=1e-6, rtol=1e-5)
        if routing == "dense":                                  # every classifier, on the whole batch
            assert compiled_seen == {c: {size} for c in range(8)}
        else:                                                   # one call of the first's code, vmapped
            assert set(compiled_seen) == {0}
    assert counters["stats"]["unique_graphs"] == 3
    assert counters["frames"]["total"] == counters["frames"]["ok"]
    torch._dynamo.reset()


def _call(routing, models, batch):
    return routing(models, batch["input_ids"], batch["attention_mask"], batch["token_type_ids"],
                   batch["context_ids"], batch["labels"])


def test_bert_single_stacked_routing_gives_the_sparse_logits_loss_and_gradients():
    """Stacked routing (the K models vmapped over their stacked parameters, one call) computes each
    row with its own context's model, as sparse routing does, padding mask included, and its
    gradients reach each model's own parameters; the absent contexts' zero gradients are dropped."""
    from absa_lib.models.bert_single import PerContextModel

    torch.manual_seed(0)
    model = build_per_context(backbone="tiny", num_labels=3, num_contexts=8, num_aspects=4).eval()  # no dropout
    out = {}
    for name, routing in (("sparse", PerContextModel.route), ("stacked", PerContextModel.stacked)):
        model.zero_grad(set_to_none=True)
        res = _call(routing, list(model.models), _batch())
        res.loss.backward()
        if name == "stacked":
            model.drop_absent_grads(_batch()["context_ids"])
        out[name] = (res.logits.detach(), res.loss.detach(), dict(model.named_parameters()))
        out[name] = (*out[name][:2], {n: None if p.grad is None else p.grad.clone() for n, p in out[name][2].items()})
    torch.testing.assert_close(out["stacked"][0], out["sparse"][0], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(out["stacked"][1], out["sparse"][1])
    for name, g in out["sparse"][2].items():
        stacked_g = out["stacked"][2][name]
        if g is None:                                        # contexts 1, 2, 4, 7: absent from the batch
            assert stacked_g is None, name
        else:
            torch.testing.assert_close(stacked_g, g, atol=1e-6, rtol=1e-5)
    assert sum(g is not None for g in out["stacked"][2].values()) == 4 * len(list(model.models[0].parameters()))


def test_bert_single_stacked_routing_draws_each_models_own_dropout():
    """In training mode the K models drop different units. With all K made identical, the same batch
    sent to model 0 and then, from the same random state, to model 1 gives different logits (each
    model its own draw; vmap's ``randomness='same'`` would give both model 0's draw, correlating the K
    classifiers' noise, which dense routing, K separate calls, never did). Without dropout they agree."""
    from absa_lib.models.bert_single import PerContextModel

    torch.manual_seed(0)
    model = build_per_context(backbone="tiny", num_labels=3, num_contexts=4, num_aspects=4).train()
    for other in model.models[1:]:
        other.load_state_dict(model.models[0].state_dict())

    def logits(context: int) -> torch.Tensor:                   # every row through one model
        torch.manual_seed(7)
        batch = {**_batch(), "context_ids": torch.full((6,), context)}
        return _call(PerContextModel.stacked, list(model.models), batch).logits.detach()

    assert not torch.allclose(logits(0), logits(1))
    torch.testing.assert_close(logits(0), logits(0))            # the same draw for the same model
    model.eval()
    torch.testing.assert_close(logits(0), logits(1))


@pytest.fixture
def gpu_like_attention(monkeypatch):
    """Attention as a GPU computes it, on this CPU: ``scaled_dot_product_attention`` takes the fused
    memory-efficient path (the mask expanded to (B, H, T, T), then aten's
    ``_scaled_dot_product_efficient_attention``), and that op and its backward, which have no CPU
    kernels, get plain ones here that refuse a mask whose batch is not the queries', as the CUDA
    kernels do, and return the CUDA kernels' memory layout. Under ``vmap`` torch's own rule for the
    op runs between the two, eager or traced (AOT autograd). Where ``sdpa_kernel`` has left the
    memory-efficient kernel out, attention is computed as the math kernel does. Yields the list of
    the fused op's calls (each call's batch size)."""
    from torch.library import Library

    calls = []

    def check(q, bias):
        if bias is not None and bias.size(0) not in (1, q.size(0)):
            raise RuntimeError("attn_bias: wrong shape (batch dimension)")

    def probs(q, k, bias, scale):                                          # (B, H, T, T)
        scores = q @ k.transpose(-1, -2) * (scale or q.size(-1) ** -0.5)
        return torch.softmax(scores if bias is None else scores + bias, -1)

    def cuda_layout(t):                                                    # (B, H, T, d) stored as (B, T, H, d)
        return t.transpose(1, 2).contiguous().transpose(1, 2)

    def forward(q, k, v, bias, compute_log_sumexp, dropout_p=0.0, is_causal=False, scale=None):
        check(q, bias)
        calls.append(q.size(0))
        lse = q.new_zeros(q.size(0), q.size(1), -(-q.size(2) // 32) * 32 if compute_log_sumexp else 0)
        seed = torch.zeros((), dtype=torch.long)
        return cuda_layout(probs(q, k, bias, scale) @ v), lse, seed, seed

    def backward(g, q, k, v, bias, out, lse, seed, offset, dropout_p, grad_input_mask, is_causal=False,
                 scale=None):
        check(q, bias)
        p = probs(q, k, bias, scale)
        dp = g @ v.transpose(-1, -2)
        ds = p * (dp - (dp * p).sum(-1, keepdim=True)) * (scale or q.size(-1) ** -0.5)
        dbias = torch.zeros_like(bias) if bias is not None and grad_input_mask[3] else None
        return cuda_layout(ds @ k), cuda_layout(ds.transpose(-1, -2) @ q), cuda_layout(p.transpose(-1, -2) @ g), dbias

    def sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **_):
        if not torch.backends.cuda.mem_efficient_sdp_enabled():         # sdpa_kernel left it out: math
            return probs(q, k, attn_mask, scale) @ v
        if attn_mask is not None:
            attn_mask = attn_mask.expand(q.size(0), q.size(1), q.size(2), k.size(2))
        return torch.ops.aten._scaled_dot_product_efficient_attention(
            q, k, v, attn_mask, True, dropout_p, is_causal, scale=scale)[0]

    lib = Library("aten", "IMPL")
    lib.impl("_scaled_dot_product_efficient_attention", forward, "CPU")
    lib.impl("_scaled_dot_product_efficient_attention_backward", backward, "CPU")
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", torch._dynamo.allow_in_graph(sdpa))
    yield calls
    lib._destroy()
    torch._dynamo.reset()


@pytest.mark.parametrize("backend", [None, "aot_eager", pytest.param("inductor", marks=pytest.mark.slow)])
def test_bert_single_stacked_routing_runs_on_the_gpus_fused_attention(gpu_like_attention, backend):
    """The mixed-batch run failed twice at its first step on an H200: first torch's vmap rule for
    the fused memory-efficient attention folded the model axis into the batch (K·B rows) but passed
    a mask without that axis on unfolded (B rows), then, with a mask per model, the compiled backward
    refused its saved log-sum-exp. The stacked step leaves that kernel out (the sparse step, here
    and in the tables' runs, still uses it), and, eager, traced as ``torch.compile`` traces it, or
    compiled by inductor (CPU code; about 20 s), gives the sparse logits, loss and gradients
    (padding included)."""
    from absa_lib.models.bert_single import PerContextModel, RoutedStep

    torch.manual_seed(0)
    model = build_per_context(backbone="tiny", num_labels=3, num_contexts=4, num_aspects=4).eval()
    batch = {**_batch(), "context_ids": torch.tensor([0, 3, 3, 0, 1, 0])}      # context 2 absent
    stacked = RoutedStep(model, PerContextModel.stacked, list(model.models))
    out, fused_calls = {}, {}
    for name, step in (("sparse", RoutedStep(model, PerContextModel.route, list(model.models))),
                       ("stacked", stacked if backend is None else torch.compile(stacked, backend=backend))):
        model.zero_grad(set_to_none=True)
        before = len(gpu_like_attention)
        res = step(**batch)
        res.loss.backward()
        fused_calls[name] = len(gpu_like_attention) - before
        model.drop_absent_grads(batch["context_ids"])
        out[name] = res.logits.detach(), {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    assert fused_calls == {"sparse": 3 * 2, "stacked": 0}         # 3 contexts present, 2 layers each
    torch.testing.assert_close(out["stacked"][0], out["sparse"][0], atol=1e-6, rtol=1e-5)
    assert out["stacked"][1].keys() == out["sparse"][1].keys()
    for name, g in out["sparse"][1].items():
        torch.testing.assert_close(out["stacked"][1][name], g, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("backend", [None, "aot_eager", pytest.param("inductor", marks=pytest.mark.slow)])
def test_bert_single_stacked_routing_trains_on_the_math_attention(backend):
    """The stacked step computes attention with the math kernel on every device (products, softmax
    and dropout, under ``vmap``), as a GPU takes it. In eval mode it gives the sparse logits; in
    training, under bf16 autocast, each model draws its own dropout and exactly the present
    contexts' models get gradients, eager, traced, or compiled by inductor (about 30 s)."""
    import absa_lib.models.bert_single as per_context

    torch.manual_seed(0)
    model = build_per_context(backbone="tiny", num_labels=3, num_contexts=4, num_aspects=4).eval()
    batch = {**_batch(), "context_ids": torch.tensor([0, 3, 3, 0, 1, 0])}      # context 2 absent
    step = per_context.RoutedStep(model, per_context.PerContextModel.stacked, list(model.models))
    step = step if backend is None else torch.compile(step, backend=backend)
    sparse = per_context.RoutedStep(model, per_context.PerContextModel.route, list(model.models))
    torch.testing.assert_close(step(**batch).logits, sparse(**batch).logits, atol=1e-6, rtol=1e-5)

    model.train()
    for other in model.models[1:]:
        other.load_state_dict(model.models[0].state_dict())
    model.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = step(**batch)
    out.loss.backward()
    model.drop_absent_grads(batch["context_ids"])
    assert torch.isfinite(out.loss)
    has_grads = [all(p.grad is not None for p in m.parameters()) for m in model.models]
    assert has_grads == [True, True, False, True]

    def logits(context: int) -> torch.Tensor:                   # every row through one model
        torch.manual_seed(7)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return step(**{**batch, "context_ids": torch.full((6,), context)}).logits.detach().float()

    assert not torch.allclose(logits(0), logits(1))              # identical models, own dropout draws


def test_an_unknown_routing_is_one_line():
    model = build_per_context(backbone="tiny", num_labels=3, num_contexts=2, num_aspects=2)
    with pytest.raises(AbsaError, match="routing='batched' is not one of sparse, dense, stacked"):
        DV.compiled(model, "default", "batched")


def test_after_a_stacked_step_the_absent_contexts_get_no_adam_step():
    """`PerContextModel.after_backward`, which training and `absa bench` call after the backward pass: a
    stacked (dense) step leaves zero gradients on the classifiers without rows in the batch, and
    they become None, so AdamW skips them; after a sparse step there is nothing to do."""
    from absa_lib.models.bert_single import PerContextModel, RoutedStep

    torch.manual_seed(0)
    model = build_per_context(backbone="tiny", num_labels=3, num_contexts=4, num_aspects=4)
    batch = {**_batch(), "context_ids": torch.tensor([0, 3, 3, 0, 1, 0])}      # context 2 absent
    for routing in (PerContextModel.stacked, PerContextModel.route):
        step = RoutedStep(model, routing, list(model.models))
        model.zero_grad(set_to_none=True)
        step(**batch).loss.backward()
        model.after_backward(step, batch["context_ids"])
        with_grads = [c for c, m in enumerate(model.models) if all(p.grad is not None for p in m.parameters())]
        assert with_grads == [0, 1, 3]
        assert all(p.grad is None for p in model.models[2].parameters())
