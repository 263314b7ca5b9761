"""The compiled training step (``compile``): its identity, its padding, and bert-single's routing
(each classifier compiled on its own: sparse on per-context batches, dense on mixed ones).

Compiling with inductor is slow on a CPU (a minute for the tiny model), so these tests check what the
compiled step relies on, not a compiled run; two trace bert-single's parts with dynamo's ``eager``
backend (seconds) to count the graphs. The GPU speed is in the README's measured table.
"""

from __future__ import annotations

import pytest
import torch

from absa_lib import config as run_config
from absa_lib import device as DV
from absa_lib.errors import AbsaError
from absa_lib.features import Encoded, collate
from absa_lib.models import build_model
from absa_lib.models.per_context import build_per_context


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


def test_bert_single_dense_routing_gives_the_sparse_loss_gradients_and_skipped_models():
    torch.manual_seed(0)
    model = build_per_context(backbone="tiny", num_labels=3, num_contexts=8, num_aspects=4).eval()  # no dropout
    grads = {}
    for dense in (False, True):
        model.dense_routing = dense
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
    assert model.dense_routing is False
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
    step = DV.compiled(model, "reduce-overhead", parts=True)
    assert [m for m, _ in calls] == list(model.models) and {mode for _, mode in calls} == {"reduce-overhead"}
    assert [p.data_ptr() for p in step.parameters()] == [p.data_ptr() for p in model.parameters()]
    DV.compiled(model, "default", parts=True)
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


def test_training_compiles_bert_single_by_parts_densely_only_on_mixed_batches(monkeypatch, tmp_path, real_data_dir):
    from absa_lib import training

    asked = []

    def record(model, mode, parts=False, dense=False):
        asked.append((type(model).__name__, parts, dense))
        return model

    monkeypatch.setattr(training, "compiled", record)
    for sampler in ("per-context", "uniform"):
        config = run_config.TrainConfig(dataset="sentihood", model="bert-single", aux="single", backbone="tiny",
                                        epochs=1, batch_size=8, max_length=48, max_train_examples=16,
                                        max_eval_examples=40, compile="default", sampler=sampler)
        training.train(config, runs_dir=tmp_path, data_dir=real_data_dir, progress=False)
    config = run_config.TrainConfig(dataset="sentihood", model="qacg-bert", backbone="tiny", epochs=1, batch_size=8,
                                    max_length=48, max_train_examples=16, max_eval_examples=40, compile="default")
    training.train(config, runs_dir=tmp_path, data_dir=real_data_dir, progress=False)
    assert asked == [("PerContextModel", True, False), ("PerContextModel", True, True), ("AbsaModel", False, False)]


def test_a_failed_compilation_is_one_line(monkeypatch, tmp_path, real_data_dir):
    from absa_lib import training

    def broken(model, mode, parts=False, dense=False):
        def step(**batch):
            raise torch._dynamo.exc.TorchDynamoException("backend='inductor' raised: no C++ compiler")
        return step if mode != "none" else model

    monkeypatch.setattr(training, "compiled", broken)
    config = run_config.TrainConfig(dataset="sentihood", model="qacg-bert", backbone="tiny", epochs=1, batch_size=8,
                                    max_length=48, max_train_examples=16, max_eval_examples=40, compile="default")
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
    step = DV.compiled(model, "default", parts=True)
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
            for compiled_grad, eager_grad in zip(grads[0][1], grads[1][1]):
                torch.testing.assert_close(compiled_grad, eager_grad, atol=1e-6, rtol=1e-5)
    assert counters["stats"]["unique_graphs"] == 3            # batch size, then length, made dynamic
    assert counters["frames"]["total"] == counters["frames"]["ok"] == 3
    torch._dynamo.reset()


def test_on_mixed_batches_the_compiled_parts_route_densely_with_one_set_of_graphs(monkeypatch):
    """Mixed batches: every compiled classifier sees the whole batch, so however its rows divide among
    the contexts the shapes are the batch's, and the 8 classifiers share the graphs of one (three for
    two lengths and a short batch). Loss and gradients are the eager model's (sparse routing) once
    the absent contexts' zero gradients are dropped, as training does."""
    from functools import partial

    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    monkeypatch.setattr(torch, "compile", partial(torch.compile, backend="eager"))
    torch.manual_seed(0)
    model = build_per_context(backbone="tiny", num_labels=3, num_contexts=8, num_aspects=4).eval()  # no dropout
    step = DV.compiled(model, "default", parts=True, dense=True)
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
            loss = run(**batch).loss
            loss.backward()
            if run is step:
                model.drop_absent_grads(context_ids)
            grads.append((loss.detach(), [p.grad for p in model.parameters()]))
        torch.testing.assert_close(grads[0][0], grads[1][0])
        for compiled_grad, eager_grad in zip(grads[0][1], grads[1][1]):
            if eager_grad is None:
                assert compiled_grad is None
            else:
                torch.testing.assert_close(compiled_grad, eager_grad, atol=1e-6, rtol=1e-5)
    assert all(6 in sizes for sizes in seen.values()) and len(seen) == 8      # every classifier, whole batches
    assert counters["stats"]["unique_graphs"] == 3
    torch._dynamo.reset()
