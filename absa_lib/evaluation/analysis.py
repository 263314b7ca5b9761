"""Analysis tools behind the paper's Figures 3-5 (docs/paper_notes.md §6).

- :func:`extract_components`: per layer, the attention components of CG-BERT (gates λ_Q, λ_K and
  the attention of Q̂/K̂) or QACG-BERT (A_self, the raw quasi-attention A_quasi = σ(·) before λ,
  λ_Q, λ_K, λ_A and the combined Â). Figure 4 pools them into histograms, Figure 5 draws column
  sums of Â and of λ_A ⊙ A_quasi for one head. Unlike the official HEAD code, the raw A_quasi is
  available (docs/paper_notes.md §7.1 item 11).
- :func:`gradient_sensitivity`: Figure 3's token relevance, the official notebook's
  ``backward_gradient``: with z the pre-softmax logits and E the output of the embedding block
  (word + position + segment, LayerNorm, dropout off in eval mode)::

      r_t = ‖∂z_c / ∂E_t‖²₂ / max_t′ ‖∂z_c / ∂E_t′‖²₂          (normalised to max 1 per example)

  The official notebook hard-codes c = Positive and batch size 1; here c is an argument and each
  example of a batch gets its own relevance (examples do not interact in eval mode).
- :func:`context_signal`: how much a context-guided model's output depends on the context id, and
  the gradient that reaches the context embedding: at initialisation it tells whether the target and
  aspect can steer the model at all (CG-BERT without auxiliary sentence stalls for epochs when not).
- :func:`attention_entropy`: how peaked CG-BERT's attention is (a gate that starts open flattens the
  pretrained attention before any training).
- :func:`extract_attention`: the attention maps the other attention systems return (ATAE-LSTM's α,
  MAN's aspect heads, OA's query-axis and self-attention weights), and :func:`token_attention`,
  one weight per token for comparing where each model looks (notebook 06).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from absa_lib.errors import AbsaError

_INPUTS = ("input_ids", "attention_mask", "token_type_ids", "context_ids")


def batch_inputs(model, batch: dict) -> dict:
    """The model's inputs of a ``features.collate`` batch (labels and the rest left out), on its device."""
    device = next(model.parameters()).device
    return {k: batch[k].to(device) for k in _INPUTS if batch.get(k) is not None}


@contextmanager
def eval_mode(model) -> Iterator[None]:
    """The model in eval mode (no dropout) inside the block, in the mode it had after it."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


@torch.no_grad()
def predicted_ids(model, batch: dict) -> list[int]:
    """The model's predicted label id for each row of ``batch``, in eval mode."""
    with eval_mode(model):
        return model(**batch_inputs(model, batch)).logits.argmax(-1).tolist()


@torch.no_grad()
def extract_components(model, batch: dict) -> list[dict[str, torch.Tensor]]:
    """Attention components of every layer, computed in eval mode.

    Args:
        model: a ``cg-bert`` or ``qacg-bert`` :class:`~absa_lib.models.AbsaModel`.
        batch: ``input_ids``, ``attention_mask``, ``token_type_ids`` (B, T), ``context_ids`` (B,),
            as made by ``absa_lib.data.features.collate`` (other keys are ignored).

    Returns:
        One dict per layer. QACG: ``a_self``, ``a_quasi``, ``a_hat`` (B, H, T, T) and ``lambda_q``,
        ``lambda_k``, ``lambda_a`` (B, H, T, 1). CG: ``attention`` (B, H, T, T), ``lambda_q``,
        ``lambda_k`` (B, H, T, 1); with ``quasi=False`` only ``a_self`` and ``a_hat``. Rows and
        columns of padded positions are included; mask them with ``attention_mask`` before pooling.
    """
    if not getattr(model, "uses_context", False):
        name = getattr(model, "name", type(model).__name__)
        raise AbsaError(f"attention components exist for cg-bert and qacg-bert only, not {name}")
    with eval_mode(model):
        out = model(**batch_inputs(model, batch), output_components=True)
    return [{k: v.detach().contiguous() for k, v in layer.items()} for layer in out.components]


def gradient_sensitivity(model, batch: dict, target_class: int | torch.Tensor) -> torch.Tensor:
    """Token relevance ‖∂z_c/∂E_t‖², normalised to max 1 per example (Figure 3).

    Args:
        model: any :class:`~absa_lib.models.AbsaModel` (all four models).
        batch: as for :func:`extract_components`.
        target_class: the class c whose logit is differentiated: an int for all examples or a
            (B,) tensor of class ids.

    Returns:
        (B, T) float tensor on the CPU, in [0, 1], 0 at padded positions.
    """
    if not hasattr(model, "bert"):
        raise AbsaError(f"gradient sensitivity needs one AbsaModel (with .bert), not {type(model).__name__}")
    inputs = batch_inputs(model, batch)
    captured = {}

    def keep(module, args, output):                  # E: the embedding block's output (B, T, d)
        if not output.requires_grad:                 # frozen embeddings: still differentiate w.r.t. E
            output = output.detach().requires_grad_(True)
        captured["E"] = output
        return output

    handle = model.bert.embeddings.register_forward_hook(keep)
    try:
        with eval_mode(model), torch.enable_grad():
            logits = model(**inputs).logits                                   # z: (B, C)
            target = torch.as_tensor(target_class, device=logits.device).expand(logits.size(0))
            z_c = logits.gather(1, target[:, None].long()).sum()              # examples are independent
            (grad,) = torch.autograd.grad(z_c, captured["E"])                # (B, T, d)
    finally:
        handle.remove()
    relevance = grad.float().pow(2).sum(-1) * inputs["attention_mask"].float()  # (B, T)
    return (relevance / relevance.amax(dim=1, keepdim=True).clamp_min(1e-30)).cpu()


def context_signal(model, batch: dict, num_contexts: int) -> dict[str, float]:
    """The context id's hold on a CG-BERT / QACG-BERT, in eval mode (no dropout).

    - ``logit_sd_contexts``: the same sentences under every context id c = 0..K-1; the sd of the
      logits over the K contexts, averaged over sentences and classes. 0 when the context is ignored.
    - ``logit_sd_sentences``: the sd over the sentences of one context, averaged the same way (the
      scale to compare with).
    - ``grad_context_embedding``: ‖∂L/∂E_ctx‖₂ of the cross-entropy of the batch's ``labels`` with
      each example's own context id: what the optimizer gets to make the context matter.

    Args:
        model: a model with a ``context_embeddings`` table (``cg-bert``, ``qacg-bert``).
        batch: as :func:`absa_lib.data.features.collate` makes it, ``context_ids`` (B,) and ``labels`` (B,)
            included.
        num_contexts: K, the rows of the context table.
    """
    table = getattr(model, "context_embeddings", None)
    if table is None:
        raise AbsaError(f"{getattr(model, 'name', type(model).__name__)} has no context embedding table; "
                        "the context signal is defined for cg-bert and qacg-bert")
    missing = [k for k in ("context_ids", "labels") if batch.get(k) is None]
    if missing:
        raise AbsaError(f"context signal: the batch has no {missing[0]!r}; give a batch from features.collate")
    inputs = batch_inputs(model, batch)
    with eval_mode(model):
        with torch.no_grad():
            every = torch.stack([model(**{**inputs, "context_ids": torch.full_like(inputs["context_ids"], c)}).logits
                                 for c in range(num_contexts)])                     # (K, B, C)
        loss = torch.nn.functional.cross_entropy(model(**inputs).logits, batch["labels"].to(every.device))
        (grad,) = torch.autograd.grad(loss, table.weight)                          # (K, d)
    return {"logit_sd_contexts": every.std(0).mean().item(), "logit_sd_sentences": every.std(1).mean().item(),
            "grad_context_embedding": grad.norm().item()}


def attention_entropy(model, batch: dict) -> dict[str, float]:
    """How peaked CG-BERT's attention (the softmax of Q̂K̂ᵀ) is, in eval mode.

    - ``entropy``: the entropy (nats) of each real query token's attention row, averaged over the
      layers, heads and the batch's real tokens;
    - ``uniform``: the same average for attention spread evenly over the sentence (ln of its length),
      the largest value the entropy can take.

    Q̂ = (1 − λ_Q) Q + λ_Q C_Q (Eq. 3), with C_Q tiny at initialisation: a tanh gate starts at
    λ ≈ 0 and leaves the pretrained attention as it is; a sigmoid gate starts at λ ≈ 0.5, which
    halves Q and K and divides every attention score by 4.

    Args:
        model: a ``cg-bert`` :class:`~absa_lib.models.AbsaModel`.
        batch: as for :func:`extract_components`.
    """
    layers = extract_components(model, batch)
    if "attention" not in layers[0]:
        raise AbsaError("attention entropy is defined for cg-bert's softmax attention; qacg-bert's Â is not a "
                        "distribution (it lies in [-1, 2])")
    real = batch["attention_mask"].to(layers[0]["attention"].device).bool()          # (B, T)
    per_layer = [-torch.special.xlogy(a, a).sum(-1).transpose(1, 2)[real].mean()      # (B, T, H)[real] -> mean
                 for a in (layer["attention"] for layer in layers)]                   # a: (B, H, T, T)
    lengths = real.sum(-1, keepdim=True).expand_as(real)                              # (B, T)
    return {"entropy": torch.stack(per_layer).mean().item(),
            "uniform": torch.log(lengths[real].double()).mean().item()}


@torch.no_grad()
def extract_attention(model, batch: dict) -> dict[str, torch.Tensor]:
    """The ``attentions`` of an AT/ATAE-LSTM, MAN-BERT or OA-BERT forward pass in eval mode.

    Returns:
        Always ``token_weights`` (B, T); MAN also ``beta`` (B, k, T) and ``self_attention``
        (B, k, T, T); OA ``oa`` (B, h, T, m) and ``self_attention`` (B, h, T, T) of its last block.
    """
    with eval_mode(model):
        out = model(**batch_inputs(model, batch))
    if not out.attentions:
        name = getattr(model, "name", type(model).__name__)
        raise AbsaError(f"{name} returns no attention maps (AE-LSTM and the plain BERT models have none)")
    return {k: v.detach().contiguous() for k, v in out.attentions.items()}


def token_attention(model, batch: dict) -> torch.Tensor:
    """One attention weight per token (B, T), 0 at padding: where each model looks.

    AT/ATAE-LSTM: α. MAN-BERT: w^a = β^a A^a of the example's aspect. OA-BERT: the [CLS] row of
    its last self-attention (the readout position), mean over heads. CG-BERT / QACG-BERT: the
    [CLS] row of the last layer's attention (QACG: Â, which can be negative), mean over heads.
    The models normalise differently (Â rows need not sum to 1); compare shapes, not scales.
    """
    if getattr(model, "uses_context", False):
        last = extract_components(model, batch)[-1]
        weights = (last["a_hat"] if "a_hat" in last else last["attention"])[:, :, 0, :].mean(1)
    else:
        weights = extract_attention(model, batch)["token_weights"]
    return (weights.float() * batch["attention_mask"].to(weights.device).float()).cpu()
