"""Context-guided self-attention (CG-BERT) and quasi-attention (QACG-BERT), Wu & Ong (AAAI-21) §3.3-3.6.

Both are subclasses of Hugging Face's ``BertSelfAttention`` that are swapped into a ``BertModel``
(:mod:`absa_lib.models.absa_model`). They keep HF's ``query``/``key``/``value`` so pretrained weights
load unchanged, and HF's return contract ``(attn_output, attn_weights)``. The context embedding
``e_c`` of each example arrives through ``BertModel.forward(..., context=e_c)``: transformers >= 5
passes extra keyword arguments down to every self-attention module.

Context matrix (§3.6; official code, docs/paper_notes.md §2.1): each layer l has its own W_c, applied to that
layer's input hidden states X, with a residual of the raw context embedding::

    C = [E_c ; X] W_cᵀ + b_c + E_c                     E_c = 1_n e_cᵀ,  C ∈ R^{n×d}

E_c is the same at every position, so [E_c ; X] W_cᵀ = X W_Xᵀ + 1_n (W_E e_c)ᵀ: the E_c half is
computed once per example, (B, d), and broadcast (exact algebra, not an approximation).

CG-BERT (Eq. 2-3), per head h, with C^h the h-th d_h-slice of C and U_Q, U_K, v shared by heads::

    C_Q = C^h U_Q + u_Q         λ_Q = act(C_Q v_Q^C + Q^h v_Q)        (n × 1, one gate per token)
    Q̂ = (1 - λ_Q) ⊙ Q^h + λ_Q ⊙ C_Q                 (same for K̂ with U_K, v_K^C, v_K)
    A = softmax(Q̂ K̂ᵀ / √d_h + M)                    act = tanh (paper) or sigmoid (official)

QACG-BERT (Eq. 4-8)::

    A_self  = softmax(Q^h K^hᵀ / √d_h + M)                               (Eq. 1)
    C_Q, C_K = C Z_Q + z_Q, C Z_K + z_K    Z: d×d_h shared by all heads (paper; our reading of an
                                           ambiguous Eq. 5, docs/paper_notes.md §3.1) or d×d split
                                           per head (official HEAD), then dropout (official only) (Eq. 5)
    A_quasi = σ(C_Q C_Kᵀ / √d_h + M)                                     (Eq. 6, α = 1)
    λ_Q = σ(C_Q v_Q^C + Q^h v_Q),  λ_K = σ(C_K v_K^C + K^h v_K)          (Eq. 7, + biases official)
    λ_A = 1 - (λ_Q + λ_K)                                                (Eq. 8, β = γ = 1)
    Â = A_self + λ_A ⊙ A_quasi,  then dropout, output Â V                (Eq. 4)

M is the additive −10000 key mask (added before the sigmoid too). λ_A has shape (n, 1): it scales
query *rows*; λ_K is computed from key vectors but applied to row i (the official broadcast,
docs/paper_notes.md §3.1). With the shared Z (paper), A_quasi is the same for every head, so it is
computed once, (B, 1, T, T), and broadcast; and since C only enters through C Zᵀ there, the product
Z W_X is formed once per batch instead of C per token (:meth:`QACGBertSelfAttention.shared_context_qk`).
Scaling divides by √d_h, as the official code does.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from transformers import BertConfig
from transformers.models.bert.modeling_bert import BertSelfAttention

# attribute names of the parameters these modules add on top of BertSelfAttention
NEW_MODULES = ("context_layer", "context_for_q", "context_for_k", "lambda_q_context_layer",
               "lambda_q_query_layer", "lambda_k_context_layer", "lambda_k_key_layer")
_ACT = {"sigmoid": torch.sigmoid, "tanh": torch.tanh}


def new_module(key: str) -> str | None:
    """The one of :data:`NEW_MODULES` a parameter key belongs to, else None:
    ``encoder.layer.0.attention.self.lambda_q_query_layer.weight`` -> ``lambda_q_query_layer``."""
    if ".attention.self." not in key:
        return None
    name = key.split(".attention.self.")[-1].split(".")[0]
    return name if name in NEW_MODULES else None


class PerHeadVector(nn.Module):
    """One gate vector per head, the paper's V_Q^h (Eq. 3, 7): x^h · v^h (+ b^h).

    (B, 1|H, T, d_h) -> (B, H, T, 1); a (B, 1, T, d_h) input (QACG's shared C_Q) meets every head's
    vector. The default, one ``nn.Linear(d_h, 1)`` per layer shared by its heads, is the official
    code's (``lambda_per_head=False``).
    """

    def __init__(self, heads: int, d_h: int, bias: bool) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(heads, d_h))                    # (H, d_h)
        self.bias = nn.Parameter(torch.zeros(heads)) if bias else None         # (H,)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = (x * self.weight[:, None, :]).sum(-1, keepdim=True)             # (B, H, T, 1)
        return out if self.bias is None else out + self.bias[:, None, None]


class _ContextSelfAttention(BertSelfAttention):
    """Shared parts: the per-layer context matrix C, head splitting, masked scores."""

    def __init__(self, config: BertConfig, ctx_in: int, ctx_out: int, lambda_bias: bool,
                 layer_idx: int | None = None) -> None:
        super().__init__(config, layer_idx=layer_idx)
        d, d_h = config.hidden_size, self.attention_head_size
        self.context_residual = bool(config.context_residual)
        self.context_layer = nn.Linear(2 * d, d)              # W_c: [E_c ; X] -> C
        self.context_for_q = nn.Linear(ctx_in, ctx_out)       # U_Q (CG) or Z_Q (QACG)
        self.context_for_k = nn.Linear(ctx_in, ctx_out)
        def gate_vector() -> nn.Module:                      # v_Q, v_Q^C, v_K, v_K^C
            if getattr(config, "lambda_per_head", False):
                return PerHeadVector(self.num_attention_heads, d_h, lambda_bias)
            return nn.Linear(d_h, 1, bias=lambda_bias)

        self.lambda_q_context_layer, self.lambda_q_query_layer = gate_vector(), gate_vector()
        self.lambda_k_context_layer, self.lambda_k_key_layer = gate_vector(), gate_vector()

    def context_offset(self, context: torch.Tensor) -> torch.Tensor:
        """r = W_E e_c + b_c (+ e_c): the E_c half of C, the same at every position: (B, d) -> (B, d)."""
        w_e = self.context_layer.weight[:, :context.size(-1)]                 # W_c = [W_E | W_X]: (d, 2d)
        r = F.linear(context, w_e, self.context_layer.bias)
        return r + context if self.context_residual else r

    def context_matrix(self, hidden_states: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        """C = [E_c ; X] W_cᵀ + b_c (+ E_c) = X W_Xᵀ + r: X (B, T, d), e_c (B, d) -> (B, T, d)."""
        w_x = self.context_layer.weight[:, hidden_states.size(-1):]           # (d, d)
        return F.linear(hidden_states, w_x) + self.context_offset(context)[:, None, :]

    def gates(self, q: torch.Tensor, k: torch.Tensor, c_q: torch.Tensor, c_k: torch.Tensor,
              act) -> tuple[torch.Tensor, torch.Tensor]:
        """λ_Q = act(C_Q v_Q^C + Q v_Q), λ_K = act(C_K v_K^C + K v_K) (Eq. 3, Eq. 7): (B, H, T, 1) each.

        In float32 even under bf16 autocast: QACG's λ_A = 1 - λ_Q - λ_K starts near 0, where bf16
        would round it to multiples of 2^-8 (and the gates cost little)."""
        lam_q = act((self.lambda_q_context_layer(c_q) + self.lambda_q_query_layer(q)).float())
        lam_k = act((self.lambda_k_context_layer(c_k) + self.lambda_k_key_layer(k)).float())
        return lam_q, lam_k

    def heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, H·d_h) -> (B, H, T, d_h)."""
        return x.view(*x.shape[:-1], -1, self.attention_head_size).transpose(1, 2)

    def qkv(self, hidden_states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """BERT's pretrained projections, split into heads: (B, T, d) -> 3 × (B, H, T, d_h)."""
        return tuple(self.heads(proj(hidden_states)) for proj in (self.query, self.key, self.value))

    def scores(self, q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """q kᵀ / √d_h + M: (B, H, T, d_h) x2 -> (B, H, T, T)."""
        s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.attention_head_size)
        return s if mask is None else s + mask

    def merge(self, probs: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """(B, H, T, T) @ (B, H, T, d_h) -> (B, T, H·d_h), in V's dtype: the float32 gates make
        ``probs`` float32 also in a model held in bf16 (autocast casts both to bf16 anyway)."""
        out = torch.matmul(probs.to(v.dtype), v).transpose(1, 2)
        return out.reshape(*out.shape[:2], -1)


class CGBertSelfAttention(_ContextSelfAttention):
    """Context-guided self-attention (Eq. 2-3): Q and K are gated toward the context per token and head.

    Config fields read: ``gate_activation`` ("tanh" = paper Eq. 3, "sigmoid" = official code),
    ``lambda_bias`` (official CG: False), ``lambda_per_head`` (True: a gate vector per head, as Eq. 3
    is printed; False, both presets: one per layer, as the official code), ``context_residual``.
    """

    def __init__(self, config: BertConfig, layer_idx: int | None = None) -> None:
        d_h = config.hidden_size // config.num_attention_heads
        super().__init__(config, d_h, d_h, bool(config.lambda_bias), layer_idx)
        self.gate_activation = config.gate_activation

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None,
                past_key_values=None, context: torch.Tensor | None = None,
                components: list | None = None, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
        # B batch, H heads, T tokens, d_h head dim
        q, k, v = self.qkv(hidden_states)                                  # (B, H, T, d_h) each
        c = self.heads(self.context_matrix(hidden_states, context))        # C^h: (B, H, T, d_h)
        c_q, c_k = self.context_for_q(c), self.context_for_k(c)            # C^h U_Q + u_Q
        lam_q, lam_k = self.gates(q, k, c_q, c_k, _ACT[self.gate_activation])  # Eq. 3: (B, H, T, 1)
        q_hat = (1 - lam_q) * q + lam_q * c_q                              # Eq. 2
        k_hat = (1 - lam_k) * k + lam_k * c_k
        attn = torch.softmax(self.scores(q_hat, k_hat, attention_mask), dim=-1)  # Eq. 1 on Q̂, K̂: (B, H, T, T)
        if components is not None:
            components.append({"lambda_q": lam_q, "lambda_k": lam_k, "attention": attn})
        probs = self.dropout(attn)
        return self.merge(probs, v), probs


class QACGBertSelfAttention(_ContextSelfAttention):
    """Quasi-attention (Eq. 4-8): Â = A_self + λ_A ⊙ A_quasi, with Â ∈ [-1, 2] elementwise.

    Config fields read: ``quasi_proj`` ("shared": Z ∈ R^{d×d_h}, one C_Q/C_K for all heads, as
    Eq. 5 prints and the Nov-2020 code did; "per_head": Z ∈ R^{d×d} split into heads, official
    HEAD), ``context_dropout`` (dropout p = attention_probs_dropout_prob on C_Q and C_K, official
    HEAD; with the shared Z one dropout mask serves all heads), ``lambda_bias`` (official HEAD:
    True), ``lambda_per_head`` (as in CG-BERT, Eq. 7), ``quasi`` (False: λ_A = 0, i.e. Â = A_self,
    the ablation; the context parameters then exist but are unused, and the components are only
    ``a_self`` and ``a_hat``), ``context_residual``.
    """

    def __init__(self, config: BertConfig, layer_idx: int | None = None) -> None:
        d, d_h = config.hidden_size, config.hidden_size // config.num_attention_heads
        self.shared = config.quasi_proj == "shared"
        super().__init__(config, d, d_h if self.shared else d, bool(config.lambda_bias), layer_idx)
        self.quasi = bool(config.quasi)
        p = config.attention_probs_dropout_prob if config.context_dropout else 0.0
        self.context_dropout = nn.Dropout(p)

    def shared_context_qk(self, hidden_states: torch.Tensor,
                          context: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """C_Q, C_K = C Z_Qᵀ + z_Q, C Z_Kᵀ + z_K for the shared Z (d -> d_h), without forming C.

        With C = X W_Xᵀ + r (r = W_E e_c + b_c + e_c, per example), C Zᵀ = X (Z W_X)ᵀ + r Zᵀ: the
        (2d_h × d) product Z W_X is formed once per batch, so the per-token cost is 2·d·d_h instead
        of d² + 2·d·d_h (exact algebra; gradients flow to W_c and Z as before). Returns (B, 1, T, d_h) ×2.
        """
        z_w = torch.cat([self.context_for_q.weight, self.context_for_k.weight])    # (2d_h, d)
        z_b = torch.cat([self.context_for_q.bias, self.context_for_k.bias])        # (2d_h,)
        w_x = self.context_layer.weight[:, hidden_states.size(-1):]                # (d, d)
        r = self.context_offset(context)                                           # (B, d)
        c_qk = F.linear(hidden_states, z_w @ w_x) + F.linear(r, z_w, z_b)[:, None, :]  # (B, T, 2d_h)
        return tuple(c_qk[:, None].split(self.attention_head_size, dim=-1))

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None,
                past_key_values=None, context: torch.Tensor | None = None,
                components: list | None = None, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
        q, k, v = self.qkv(hidden_states)                                  # (B, H, T, d_h) each
        a_self = torch.softmax(self.scores(q, k, attention_mask), dim=-1)   # Eq. 1: (B, H, T, T)
        if not self.quasi:
            if components is not None:
                components.append({"a_self": a_self, "a_hat": a_self})
            probs = self.dropout(a_self)
            return self.merge(probs, v), probs
        if self.shared:
            c_q, c_k = self.shared_context_qk(hidden_states, context)      # (B, 1, T, d_h): all heads
        else:
            c = self.context_matrix(hidden_states, context)                # (B, T, d)
            c_q, c_k = self.heads(self.context_for_q(c)), self.heads(self.context_for_k(c))  # (B, H, T, d_h)
        c_q, c_k = self.context_dropout(c_q), self.context_dropout(c_k)   # Eq. 5
        a_quasi = torch.sigmoid(self.scores(c_q, c_k, attention_mask))    # Eq. 6: (B, 1|H, T, T), in (0, 1)
        lam_q, lam_k = self.gates(q, k, c_q, c_k, torch.sigmoid)           # Eq. 7: (B, H, T, 1), float32
        lam_a = 1 - (lam_q + lam_k)                                        # Eq. 8: (B, H, T, 1), in (-1, 1)
        a_hat = a_self + lam_a * a_quasi                                   # Eq. 4: (B, H, T, T)
        if components is not None:
            components.append({"a_self": a_self, "a_quasi": a_quasi.expand_as(a_hat), "lambda_q": lam_q,
                               "lambda_k": lam_k, "lambda_a": lam_a, "a_hat": a_hat})
        probs = self.dropout(a_hat)
        return self.merge(probs, v), probs
