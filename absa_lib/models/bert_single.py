"""BERT-single (Sun et al. 2019): one independent sentence classifier per context.

For SentiHood that is one model per (target, aspect) pair (8), for SemEval one per aspect category
(5); each reads the sentence alone and sees only the examples of its own context. Here the K models
are held in one module and trained in the same loop; each row of a batch goes through its own
context's model. The parameters are disjoint, so these are K separate classifiers.

Batches (``TrainConfig.sampler``):

- ``per-context`` (the tables' rows): every batch holds the examples of one context, so each
  classifier trains on batches of 24 of its own examples, as in Sun et al.'s K separate runs.
  What the K share is the learning-rate schedule (each one's steps are spread over it) and the
  shuffled order of their batches; the gradient-norm clip and Adam's step count are per classifier,
  since only one has gradients at each step.
- ``uniform`` (mixed batches, an ablation): the K share every batch of 24, about 24/K rows each,
  so each takes many more, smaller steps per epoch.

Adam skips a model whose examples are absent from a batch (its gradients are None).

Routing: *sparse* (eager) sends each context's rows through its own model, so each example is
computed once, but the shapes depend on the batch's contents. *Dense* runs every model on the whole
batch and keeps, per row, its own context's logits: K times the arithmetic, fixed shapes. *Stacked*
computes what dense does in one call: each parameter stacked over the K models, the model's code
vmapped over that axis. The loss and every gradient are the same (a model's discarded rows
contribute exactly zero); after the backward pass :meth:`drop_absent_grads` sets the gradients of
models with no rows in the batch back to None, so that Adam skips them as under sparse routing
(where it changes nothing).

Compiled training (:meth:`PerContextModel.compiled_step`): per-context batches route sparsely, each
model compiled on its own (``torch.compile`` reuses one graph for all K, the
same code and shapes with the parameters as the graph's inputs, so compiling costs what one
classifier's does), and a batch runs one model. Mixed batches cannot route sparsely (a context's
share of a batch varies, and each new count would be a new shape to compile), so they route
stacked, compiled as one graph: one batched model instead of K calls of one
(on an H200 each call's forward and backward on a batch of 24, little arithmetic, took about 4 ms,
so eight calls made a mixed step's 5 times a per-context step's), with every batch padded to
``max_length`` (:meth:`PerContextModel.stacked`). Both are a :class:`RoutedStep`.
Dense routing by parts and over the whole set (under ``torch.compiler.is_compiling()``, K copies of the model in
one graph) stay for ``benchmarks/per_context_compile.py``, which compares them.
"""

from __future__ import annotations

import copy

import torch
from torch import nn
from torch.func import functional_call, vmap
from torch.nn.attention import SDPBackend, sdpa_kernel

from absa_lib.errors import AbsaError
from absa_lib.models.absa_model import AbsaModel
from absa_lib.models.model_config import AbsaConfig
from absa_lib.models.pretrained import AbsaOutput, AbsaPreTrainedModel


class PerContextModel(AbsaPreTrainedModel):
    """K :class:`AbsaModel` sentence classifiers, routed by ``context_ids``.

    Its config is the classifiers' with ``per_context_models = K``, which is how
    ``from_pretrained`` tells a saved set from a single model.
    """

    def __init__(self, config: AbsaConfig, models: list[AbsaModel] | None = None) -> None:
        config = copy.deepcopy(config)
        k = getattr(config, "per_context_models", None) or len(models or ())
        if k < 1:
            raise AbsaError("a bert-single set needs at least one classifier")
        config.per_context_models = k
        super().__init__(config)
        inner = copy.deepcopy(config)
        del inner.per_context_models
        self.models = nn.ModuleList(models if models is not None else [AbsaModel(inner) for _ in range(k)])
        self.post_init()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                token_type_ids: torch.Tensor | None = None, context_ids: torch.Tensor | None = None,
                labels: torch.Tensor | None = None, output_components: bool = False) -> AbsaOutput:
        if context_ids is None:
            raise AbsaError("bert-single needs context_ids: it keeps one classifier per context")
        routing = self.dense if torch.compiler.is_compiling() else self.route
        return routing(self.models, input_ids, attention_mask, token_type_ids, context_ids, labels)

    @staticmethod
    def dense(models, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor | None,
              context_ids: torch.Tensor, labels: torch.Tensor | None) -> AbsaOutput:
        """Dense routing: every one of ``models`` (the K models, or their compiled wrappers) on the
        whole batch; each row keeps its own context's logits."""
        every = torch.stack([m(input_ids, attention_mask, token_type_ids).logits for m in models])  # (K, B, C)
        return PerContextModel._own_rows(every, context_ids, labels)

    @staticmethod
    def stacked(models, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor | None,
                context_ids: torch.Tensor, labels: torch.Tensor | None) -> AbsaOutput:
        """Stacked routing: dense routing's result in one call of a batched model. Each parameter is
        stacked over the K ``models`` (plain models, not compiled wrappers) and the first model's code
        is vmapped over that axis, with its own dropout draws per model. The stack is in the graph,
        so every model's gradients reach its own parameters.

        The padding mask goes in stacked too, one copy per model: on a GPU the fused attention
        kernels' vmap rules fold the model axis into the batch (K·B rows) but pass an attention bias
        without that axis on as it is (B rows), which the kernels refuse ("attn_bias: wrong shape
        (batch dimension)"); a mask with the axis is folded with the rest.

        Attention is the math kernel's (matrix products and a softmax, which inductor compiles with
        the rest), on every device: on an H200 the memory-efficient kernel's backward, compiled
        under ``vmap``, refused the log-sum-exp it had saved ("LSE is not correctly aligned
        (strideH)"), and a CPU's flash kernel has no vmap rule (torch calls it once per model).

        Compiled, the step's graph holds the batch's shape as constants: under ``vmap`` the batching
        rules of the embedding lookups and of layer norm read the sizes as numbers, so a new input
        length is a new graph (``device.pad_multiple`` pads its batches to one length)."""
        per_model = [dict(m.named_parameters()) for m in models]
        params = {name: torch.stack([p[name] for p in per_model]) for name in per_model[0]}   # (K, *shape)
        masks = attention_mask.expand(len(models), *attention_mask.shape)                      # (K, B, T)

        def one(p: dict, ids: torch.Tensor, mask: torch.Tensor, types: torch.Tensor | None) -> torch.Tensor:
            return functional_call(models[0], p, (ids, mask, types)).logits                    # (B, C)

        with sdpa_kernel([SDPBackend.MATH]):
            every = vmap(one, in_dims=(0, None, 0, None), randomness="different")(
                params, input_ids, masks, token_type_ids)                                       # (K, B, C)
        return PerContextModel._own_rows(every, context_ids, labels)

    @staticmethod
    def _own_rows(every: torch.Tensor, context_ids: torch.Tensor, labels: torch.Tensor | None) -> AbsaOutput:
        """From every model's logits ``every`` (K, B, C), each row's own context's, and their loss."""
        logits = every[context_ids, torch.arange(every.size(1), device=every.device)]          # (B, C)
        loss = nn.functional.cross_entropy(logits, labels) if labels is not None else None
        return AbsaOutput(logits=logits, loss=loss)

    @staticmethod
    def route(models, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor | None,
              context_ids: torch.Tensor, labels: torch.Tensor | None) -> AbsaOutput:
        """Sparse routing: each context's rows through ``models[context]`` (the K models, or their
        compiled wrappers), each row computed once."""
        logits = None
        for c in context_ids.unique().tolist():
            rows = (context_ids == c).nonzero(as_tuple=True)[0]               # this context's examples
            part = models[c](input_ids[rows], attention_mask[rows],
                             None if token_type_ids is None else token_type_ids[rows]).logits
            if logits is None:
                logits = part.new_zeros((input_ids.size(0), part.size(-1)))    # (B, C)
            logits = logits.index_copy(0, rows, part)
        loss = nn.functional.cross_entropy(logits, labels) if labels is not None else None
        return AbsaOutput(logits=logits, loss=loss)

    def compiled_step(self, mode: str | None, routing: str) -> nn.Module:
        """The compiled training step (``mode``: ``torch.compile``'s) with ``routing``: ``sparse``
        (per-context batches) or ``dense``, each model compiled on its own, or ``stacked`` (mixed
        batches), the K compiled as one batched model."""
        if routing == "stacked":                   # one graph: the K stacked into one batched model
            return torch.compile(RoutedStep(self, PerContextModel.stacked, list(self.models)), mode=mode)
        if routing not in ("sparse", "dense"):
            raise AbsaError(f"routing={routing!r} is not one of sparse, dense, stacked")
        parts = [torch.compile(m, mode=mode) for m in self.models]   # one graph for all K: the same code and shapes
        return RoutedStep(self, PerContextModel.route if routing == "sparse" else PerContextModel.dense, parts)

    def drop_absent_grads(self, context_ids: torch.Tensor) -> None:
        """After a backward pass: gradients of the models whose context has no row in the batch
        (exactly zero after dense routing, already None after sparse) to None, so that the optimizer
        skips them."""
        present = set(context_ids.unique().tolist())
        for c, model in enumerate(self.models):
            if c not in present:
                for p in model.parameters():
                    p.grad = None

    def step_routing(self, sampler: str) -> str:
        """``sparse`` on per-context batches, ``stacked`` on mixed ones (:func:`step_routing`)."""
        return step_routing("bert-single", sampler)

    def after_backward(self, step_model: nn.Module, context_ids: torch.Tensor) -> None:
        """The gradients of the classifiers with no row in the batch to None when ``step_model`` routed
        densely (bert-single's stacked step on mixed batches, :class:`RoutedStep`): those classifiers got
        zero gradients, and None lets Adam skip them, as under sparse routing."""
        if getattr(step_model, "dense", False):
            self.drop_absent_grads(context_ids)


class RoutedStep(nn.Module):
    """A :class:`PerContextModel`'s training step: ``routing`` (:meth:`PerContextModel.route`,
    ``dense`` or ``stacked``) over ``models``, the K classifiers or their compiled wrappers. Built by
    :meth:`PerContextModel.compiled_step`. ``dense``: every classifier runs on every batch, so the
    absent contexts' gradients are zero, for training to drop. It shares the model's parameters;
    save and evaluate through the model."""

    def __init__(self, model: PerContextModel, routing, models) -> None:
        super().__init__()
        self.model = model
        self.routing, self.models = routing, models       # a plain list or the model's own: not submodules
        self.dense = routing is not PerContextModel.route

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                token_type_ids: torch.Tensor | None = None, context_ids: torch.Tensor | None = None,
                labels: torch.Tensor | None = None) -> AbsaOutput:
        if context_ids is None:
            raise AbsaError("bert-single needs context_ids: it keeps one classifier per context")
        return self.routing(self.models, input_ids, attention_mask, token_type_ids, context_ids, labels)


def step_routing(name: str, sampler: str) -> str | None:
    """How a training step of model ``name`` routes a batch (``device.compiled``'s ``routing``):
    for ``bert-single`` (a :class:`PerContextModel`), ``sparse`` on per-context batches (one
    classifier a batch) and ``stacked`` on mixed ones (all K as one batched model); None for any
    other model."""
    if name != "bert-single":
        return None
    return "sparse" if sampler == "per-context" else "stacked"
