"""MAN-BERT: the Multiple-Attention Network head (Qiang, Li & Zhu, IJCNN 2020), put after BERT as the
BitBiggerBERT report does, for (targeted) aspect-based sentiment.

One head per aspect a = 1 … k (k = 4 SentiHood, 5 SemEval) reads the encoder's last states
H ∈ R^{n×d}. Per-aspect self-attention, then position-aware attention with a sentence query::

    A^a = softmax_j( tanh(H W_α^a Hᵀ + b_α^a) )                     (n × n, padded keys masked)
    g_t = mean(H) + e_T(t)                  mean over real tokens; e_T a learned target embedding
    β^a = softmax_j( tanh(g_t W_β^a Hᵀ + b_β^a) )                   (1 × n)
    r^a = β^a (A^a H) = w^a H,   w^a = β^a A^a                      (w^a: effective token weights)
    z^a = W_o^a Dropout(r^a) + b_o^a                                (C logits per aspect)

The example (s, t, a) is classified by z^a. Its one encoder pass is shared by every example with
the same input (:meth:`~absa_lib.models.other.encoders.EncoderModel.encode`); the k heads are cheap and
all of them feed the regulariser. Loss: CE(z^a, y) + λ R with λ = 0.5 (``man_lambda``); averaged
over a batch, this is Σ_a CE(z^a, y_{t,a}) / k + λ R per (sentence, target) in expectation.
SentiHood and SemEval have no overall rating, so MAN's overall head is not built.

Orthogonality regulariser (``man_ortho``), pushing the aspect heads onto different tokens:

- ``eq9`` (default): W = [w^1; …; w^k] (k × n), R = mean_batch ‖W Wᵀ − I_k‖_F. R ≥ 0, and R = 0
  exactly when the w^a are one-hot on distinct tokens.
- ``eq9_split``: R_β = ‖B Bᵀ − I_k‖_F with B = [β^1; …; β^k], plus R_α = the mean over real query
  positions i of ‖[A^1_i; …; A^k_i][…]ᵀ − I_k‖_F.
- ``none``: no regulariser.
- ``code_literal``: what the released script computes, for the ablation only: softmax over the
  query axis i instead of j, β = softmax over an axis of size 1 (all ones), no padding mask, and
  R = ‖MᵀM − I_n‖_F / n with M the (kn × n) stack of the A^a (plus the same, constant, term for
  β). Then Σ_i A^a_ij = 1 for every j, so r^a = Σ_j h_j for every aspect (padding included): all
  heads collapse to the plain sum of the states, and W_α gets gradients only through R.

Options: ``man_query = "input_emb"`` uses a linear map of the mean input embedding (word + position
+ segment) as g, as BitBiggerBERT did; ``man_target = "none"`` drops e_T; ``man_rank = r`` factors
each W = P Qᵀ with rank r (5 full d×d matrices are 2.9M parameters at d = 768). The MAN layers
train at ``head_lr`` = 1e-4, BERT at the run's lr.
"""

from __future__ import annotations

import torch
from torch import nn

from absa_lib.errors import AbsaError
from absa_lib.models import joint
from absa_lib.models.model_config import AbsaConfig
from absa_lib.models.other.encoders import EncoderModel, masked_mean, masked_softmax, split_context
from absa_lib.models.pretrained import AbsaOutput


class Bilinear(nn.Module):
    """k bilinear forms x W^a yᵀ + b^a, full rank (k, d, d) or factored W^a = P^a Q^aᵀ of rank r.

    Initialised so that x W yᵀ has variance ≈ 1 for unit-variance x, y (σ = 1/d full rank,
    r^(-1/4)/√d per factor), i.e. the tanh starts unsaturated; biases start at 0.
    """

    def __init__(self, k: int, d: int, rank: int) -> None:
        super().__init__()
        shapes = [(k, d, rank), (k, d, rank)] if rank else [(k, d, d)]
        std = rank ** -0.25 / d ** 0.5 if rank else 1.0 / d
        self.factors = nn.ParameterList([nn.Parameter(torch.randn(s) * std) for s in shapes])
        self.bias = nn.Parameter(torch.zeros(k))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """x (B, m, d), y (B, n, d) -> (B, k, m, n)."""
        if len(self.factors) == 1:
            xw = torch.einsum("bmd,kde->bkme", x, self.factors[0])
            return torch.einsum("bkme,bne->bkmn", xw, y) + self.bias[:, None, None]
        xp = torch.einsum("bmd,kdr->bkmr", x, self.factors[0])
        yq = torch.einsum("bnd,kdr->bknr", y, self.factors[1])
        return xp @ yq.transpose(-1, -2) + self.bias[:, None, None]


def gram_distance(rows: torch.Tensor) -> torch.Tensor:
    """‖X Xᵀ − I‖_F for X = rows (..., k, n) -> (...)."""
    gram = rows @ rows.transpose(-1, -2)
    eye = torch.eye(rows.size(-2), dtype=rows.dtype, device=rows.device)
    return (gram - eye).flatten(-2).norm(dim=-1)


def man_attention(scores_a: torch.Tensor, scores_b: torch.Tensor, mask: torch.Tensor,
                  ortho: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """A (B, k, n, n), β (B, k, n) and R from the bilinear scores (B, k, n, n) and (B, k, 1, n).

    ``mask`` (B, n) bool marks real tokens; R is None with ``man_ortho = "none"``.
    """
    if ortho == "code_literal":                                           # the released script's axes
        A = torch.softmax(torch.tanh(scores_a), dim=-2)                   # over queries i, no mask
        beta = torch.softmax(torch.tanh(scores_b), dim=-2).squeeze(-2)    # over a size-1 axis: ones
        n = A.size(-1)
        M = A.flatten(1, 2)                                               # (B, k·n, n)
        r_alpha = gram_distance(M.transpose(-1, -2)) / n                  # ‖MᵀM − I_n‖_F / n
        r_beta = gram_distance(beta.transpose(-1, -2)) / n
        return A, beta, (r_alpha + r_beta).mean()
    keys = mask[:, None, None, :]
    A = masked_softmax(torch.tanh(scores_a), keys)                        # (B, k, n, n)
    beta = masked_softmax(torch.tanh(scores_b), keys).squeeze(-2)         # (B, k, n)
    if ortho == "none":
        return A, beta, None
    if ortho == "eq9":
        w = torch.einsum("bki,bkij->bkj", beta, A)                        # (B, k, n)
        return A, beta, gram_distance(w).mean()
    per_query = gram_distance(A.transpose(1, 2))                          # (B, n): rows [A^1_i; …; A^k_i]
    m = mask.to(per_query.dtype)
    r_alpha = ((per_query * m).sum(1) / m.sum(1)).mean()
    return A, beta, r_alpha + gram_distance(beta).mean()


class MANBertModel(EncoderModel):
    """BERT + the MAN head: k aspect heads, orthogonality regulariser (see the module docstring)."""

    GROUPS = {"w_alpha": "MAN self-attention W_α", "w_beta": "MAN position-aware W_β",
              "target_embeddings": "target embeddings e_T", "query_proj": "query projection (input_emb)",
              "heads": "aspect heads W_o", "heads_bias": "aspect heads W_o"}

    def __init__(self, config: AbsaConfig) -> None:
        super().__init__(config)
        d, k, std = config.hidden_size, config.num_aspects, config.initializer_range
        self.w_alpha = Bilinear(k, d, config.man_rank)
        self.w_beta = Bilinear(k, d, config.man_rank)
        if config.man_target == "embedding":
            self.target_embeddings = nn.Embedding(config.num_contexts // k, d)
        if config.man_query == "input_emb":
            self.query_proj = nn.Linear(d, d)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.heads = nn.Parameter(torch.randn(k, config.num_labels, d) * std)    # W_o^a: (k, C, d)
        self.heads_bias = nn.Parameter(torch.zeros(k, config.num_labels))
        self.init_new_layers([m for m in (getattr(self, "target_embeddings", None),
                                          getattr(self, "query_proj", None)) if m is not None], std)
        self.post_init()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                token_type_ids: torch.Tensor | None = None, context_ids: torch.Tensor | None = None,
                labels: torch.Tensor | None = None, output_components: bool = False) -> AbsaOutput:
        """Inputs as :meth:`AbsaModel.forward`. ``attentions``: ``token_weights`` w^a (B, T) of each
        example's aspect, ``beta`` (B, k, T), ``self_attention`` A (B, k, T, T); ``aux_losses``:
        ``ortho`` R (unweighted; λ R is in ``loss``)."""
        if context_ids is None:
            raise AbsaError("man-bert needs context_ids (one context id per example)")
        cfg = self.config
        mask = attention_mask.bool()
        H, E = self.encode(input_ids, attention_mask, token_type_ids, embeddings=cfg.man_query == "input_emb")
        target, aspect = split_context(cfg, context_ids.view(-1))
        g = self.query_proj(masked_mean(E, mask)) if E is not None else masked_mean(H, mask)     # (B, d)
        if cfg.man_target == "embedding":
            g = g + self.target_embeddings(target)
        A, beta, R = man_attention(self.w_alpha(H, H), self.w_beta(g[:, None, :], H), mask, cfg.man_ortho)
        w = torch.einsum("bki,bkij->bkj", beta, A)                            # (B, k, n) token weights
        r = torch.einsum("bkj,bjd->bkd", w, H)                                # r^a: (B, k, d)
        z = torch.einsum("bkd,kcd->bkc", self.dropout(r), self.heads) + self.heads_bias   # (B, k, C)
        rows = torch.arange(z.size(0), device=z.device)
        logits, loss = joint.head(self, z[rows, aspect], labels)               # z^{a(c)}: (B, C)
        aux = {} if R is None else {"ortho": R}
        if loss is not None and R is not None:
            loss = loss + cfg.man_lambda * R
        return AbsaOutput(logits=logits, loss=loss, aux_losses=aux,
                          attentions={"token_weights": w[rows, aspect], "beta": beta, "self_attention": A})
