"""OA-BERT: Orthogonal Attention blocks (Khandelwal & Attar 2021, "Orthogonal Attention: A Cloze-Style
Approach to Negation Scope Resolution") over BERT, with the target and aspect as the query.

The cloze framing carries over: the context C ∈ R^{n×d} is the review sentence, the query
Q ∈ R^{m×d} is the target and aspect. The paper's symbols were lost in the text we have; this is
our reading of its prose. One head builds a key and a value for every (context word i, query
word j) pair and attends **over the query axis for each context word**, the axis orthogonal to
ordinary cross-attention (which attends over the context for each query)::

    Ĉ = C W_c,  Q̂ = Q W_q,  E_ij = Ĉ_i ⊙ Q̂_j,   K = E W_K,  V = E W_V              (n × m × d)
    s_ij = ⟨U_j, K_ij⟩ / √d_k  (padded query words masked),  a_i = softmax_j(s_i),  z_i = Σ_j a_ij V_ij
    MHOA(Q, C) = [z^1; …; z^h] W_O                                                (n × d, d_k = d/h)

The query vectors U (m × d) distinguish the variants (``oa_variant``):

- ``em`` (OA-EM): U = Q W_U;
- ``emb`` (OA-EMB, default; "bidirectional", a context-aware query): with C̃ = C W_1, Q̃ = Q W_2,
  S_j = tanh(W_out [Σ_i softmax_i(Q̃_j · C̃_i) C̃_i ; Q̃_j]) (PyTorchNLP's "dot" attention, W_out:
  2d → d without bias), U = (S ⊙ Q̃) W_3. The softmax over the context masks padding
  (``oa_mask_context``; False reproduces PyTorchNLP, which does not mask).

- ``c`` (OA-C): the pair features are convolutions instead of products. Each query word makes f
  filters of width κ and their biases, F_j = reshape(Q_j W_F) (f × κ), β_j = Q_j W_b; each Ĉ_i is
  read as a one-channel signal of length d and convolved with stride σ, G_ij = conv(Ĉ_i; F_j, β_j)
  (f × L′, L′ = ⌊(d − κ)/σ⌋ + 1), K = flat(G) W_K, V = flat(G) W_V; U = Q W_U;
- ``ca`` (OA-CA): the keys and values of OA-C, and a context-aware query: C̃, Q̃ and S as in OA-EMB,
  filters and biases made from S_j, convolved with Q̃_j, U = flat(conv(Q̃_j; F′_j, β′_j)) W_U′.

κ, σ and f were lost from the paper's text; they default to 8 (``oa_kernel``, ``oa_stride``,
``oa_filters``), so that f·L′ = d at d = 768 (and at MiniLM's 384). Parameters per OA layer at
d = 768: OA-EM 3,543,552 (6 d×d linears), OA-EMB 5,904,384 (8 d×d linears + W_out), OA-C 3,008,328
(5 d×d + the filter generators), OA-CA 5,424,528 (7 d×d + W_out + two filter generators), in the
paper's "around 4-7M" with its pairing OA-C ≈ OA-EM, OA-CA ≈ OA-EMB. The block (``oa_block = "standard"``, default, a post-LN
transformer layer with OA in front; ``"paper_literal"``: the two residual + LayerNorm pairs the
paper lists, no residual around the self-attention)::

    X₁ = LN(X + Dropout(MHOA(Q, X)));   X₂ = LN(X₁ + MHSA(X₁))   (paper_literal: X₂ = MHSA(X₁))
    Out = LN(X₂ + Dropout(FFN(X₂)))      FFN: d → 4d → d, GELU;  MHSA over the context tokens only

Model: two blocks (``oa_layers``) on the encoder's last states H, a residual R = Dropout(Y) + H,
and the readout R_[CLS] → Dropout → Linear(d, C) (``oa_pool = "masked_mean"``: mean over the
context tokens instead). The two input modes:

- mode S (``aux=none``): C = H; Q = [e_T(t); e_A(a)], learned target and aspect embeddings (m = 2:
  with m = 1 the softmax over the query axis would be trivially 1);
- mode P (auxiliary sentence): C = H over [CLS] and the sentence; Q = H at the auxiliary sentence's
  tokens, so BERT has already read the query (the paper's "Augment" setting).

OA layers train at ``head_lr`` = 1e-4, BERT at the run's lr.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from transformers import BertConfig

from absa_lib.errors import AbsaError
from absa_lib.models import joint
from absa_lib.models.model_config import OTHER_FIELDS, AbsaConfig
from absa_lib.models.other.encoders import (
    EncoderModel,
    masked_mean,
    masked_softmax,
    second_segment,
    split_context,
)
from absa_lib.models.pretrained import AbsaOutput


def query_filters(signals: torch.Tensor, filters: torch.Tensor, bias: torch.Tensor, kernel: int,
                  stride: int, paired: bool) -> torch.Tensor:
    """conv1d of each signal (a vector of width d, one channel) with query-generated filters.

    signals (B, a, d); filters (B, b, f, κ); bias (B, b, f). ``paired=False``: every signal with every
    query word's filters -> (B, a, b, f·L′); ``paired=True`` (a = b): signal j with filters j only ->
    (B, a, f·L′). L′ = ⌊(d − κ)/σ⌋ + 1 positions (stride σ), flattened filter-major.
    """
    windows = signals.unfold(-1, kernel, stride)                            # (B, a, L′, κ)
    if paired:
        return (torch.einsum("bjlk,bjfk->bjfl", windows, filters) + bias[..., None]).flatten(-2)
    return (torch.einsum("bilk,bjfk->bijfl", windows, filters) + bias[:, None, :, :, None]).flatten(-2)


class OrthogonalAttention(nn.Module):
    """Multi-head orthogonal attention, OA-EM, OA-EMB, OA-C or OA-CA (see the module docstring)."""

    def __init__(self, d: int, heads: int, variant: str = "emb", mask_context: bool = True,
                 filters: int = 8, kernel: int = 8, stride: int = 8) -> None:
        super().__init__()
        if d % heads:
            raise AbsaError(f"OA: width {d} is not a multiple of {heads} heads")
        self.h, self.variant, self.mask_context = heads, variant, mask_context
        if variant in ("em", "emb"):                   # E_ij = Ĉ_i ⊙ Q̂_j (the registration order is the init order)
            names = ["w_c", "w_q", "w_k", "w_v", "w_o"] + (["w_u"] if variant == "em" else ["w_1", "w_2", "w_3"])
            for name in names:
                setattr(self, name, nn.Linear(d, d))
            if variant == "emb":
                self.w_out = nn.Linear(2 * d, d, bias=False)
            return
        if not (1 <= kernel <= d and stride >= 1 and filters >= 1):
            raise AbsaError(f"OA-{variant.upper()}: needs 1 <= oa_kernel <= {d}, oa_stride >= 1 and oa_filters >= 1; "
                            f"got {kernel}, {stride}, {filters}")
        self.f, self.kernel, self.stride = filters, kernel, stride
        width = filters * ((d - kernel) // stride + 1)                        # f·L′
        self.w_c, self.w_f, self.w_b = nn.Linear(d, d), nn.Linear(d, filters * kernel), nn.Linear(d, filters)
        self.w_k, self.w_v, self.w_o = nn.Linear(width, d), nn.Linear(width, d), nn.Linear(d, d)
        if variant == "c":
            self.w_u = nn.Linear(d, d)
        else:                                                                  # ca
            self.w_1, self.w_2 = nn.Linear(d, d), nn.Linear(d, d)
            self.w_out = nn.Linear(2 * d, d, bias=False)
            self.w_f2, self.w_b2 = nn.Linear(d, filters * kernel), nn.Linear(d, filters)
            self.w_u = nn.Linear(width, d)

    def _bidirectional(self, C: torch.Tensor, Q: torch.Tensor, c_mask: torch.Tensor):
        """Q̃ = Q W_2 and S = tanh(W_out [Σ_i softmax_i(Q̃_j · C̃_i) C̃_i ; Q̃_j]), both (B, m, d)."""
        c, q = self.w_1(C), self.w_2(Q)                                       # C̃ (B, n, d), Q̃ (B, m, d)
        scores = q @ c.transpose(1, 2)                                        # (B, m, n)
        weights = masked_softmax(scores, c_mask[:, None, :]) if self.mask_context else scores.softmax(-1)
        return q, torch.tanh(self.w_out(torch.cat([weights @ c, q], dim=-1)))

    def query_vectors(self, C: torch.Tensor, Q: torch.Tensor, c_mask: torch.Tensor) -> torch.Tensor:
        """U (B, m, d): Q W_U (OA-EM, OA-C); (S ⊙ Q̃) W_3 (OA-EMB); the flattened conv of Q̃_j with
        filters generated from S_j, times W_U′ (OA-CA)."""
        if self.variant in ("em", "c"):
            return self.w_u(Q)
        q, S = self._bidirectional(C, Q, c_mask)
        if self.variant == "emb":
            return self.w_3(S * q)
        B, m, _ = S.shape
        filters = self.w_f2(S).view(B, m, self.f, self.kernel)
        return self.w_u(query_filters(q, filters, self.w_b2(S), self.kernel, self.stride, paired=True))

    def pair_features(self, C: torch.Tensor, Q: torch.Tensor) -> torch.Tensor:
        """The (context word i, query word j) interaction (B, n, m, ·): Ĉ_i ⊙ Q̂_j (OA-EM/EMB), or
        the conv of Ĉ_i with the filters generated from Q_j (OA-C/CA)."""
        if self.variant in ("em", "emb"):
            return self.w_c(C)[:, :, None, :] * self.w_q(Q)[:, None, :, :]      # (B, n, m, d)
        B, m, _ = Q.shape
        filters = self.w_f(Q).view(B, m, self.f, self.kernel)                  # F_j: (B, m, f, κ)
        return query_filters(self.w_c(C), filters, self.w_b(Q), self.kernel, self.stride, paired=False)

    def forward(self, C: torch.Tensor, Q: torch.Tensor, c_mask: torch.Tensor,
                q_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """C (B, n, d), Q (B, m, d), masks (B, n), (B, m) bool -> (B, n, d) and a (B, h, n, m)."""
        B, n, d = C.shape
        m, h = Q.size(1), self.h
        E = self.pair_features(C, Q)                                          # (B, n, m, d or f·L′)
        K = self.w_k(E).view(B, n, m, h, d // h)
        V = self.w_v(E).view(B, n, m, h, d // h)
        U = self.query_vectors(C, Q, c_mask).view(B, m, h, d // h)
        s = torch.einsum("bnmhe,bmhe->bhnm", K, U) / math.sqrt(d // h)       # (B, h, n, m)
        a = masked_softmax(s, q_mask[:, None, None, :])                       # over the query axis
        z = torch.einsum("bhnm,bnmhe->bnhe", a, V).reshape(B, n, d)
        return self.w_o(z), a


class OABlock(nn.Module):
    """OA, then self-attention over the context, then a feed-forward layer (post-LN)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        d, h, eps = config.hidden_size, config.num_attention_heads, config.layer_norm_eps
        self.standard = config.oa_block == "standard"
        self.oa = OrthogonalAttention(d, h, config.oa_variant, config.oa_mask_context,
                                      *(getattr(config, k, OTHER_FIELDS[k][0]) for k in ("oa_filters", "oa_kernel",
                                                                                        "oa_stride")))
        self.self_attention = nn.MultiheadAttention(d, h, dropout=config.attention_probs_dropout_prob,
                                                    batch_first=True)
        self.ffn = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.layer_norm_oa = nn.LayerNorm(d, eps=eps)
        if self.standard:
            self.layer_norm_sa = nn.LayerNorm(d, eps=eps)
        self.layer_norm_ff = nn.LayerNorm(d, eps=eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, X: torch.Tensor, Q: torch.Tensor, c_mask: torch.Tensor,
                q_mask: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        oa, a = self.oa(X, Q, c_mask, q_mask)
        x1 = self.layer_norm_oa(X + self.dropout(oa))
        sa, sa_weights = self.self_attention(x1, x1, x1, key_padding_mask=~c_mask, need_weights=True,
                                             average_attn_weights=False)     # (B, n, d), (B, h, n, n)
        x2 = self.layer_norm_sa(x1 + self.dropout(sa)) if self.standard else sa
        return self.layer_norm_ff(x2 + self.dropout(self.ffn(x2))), {"oa": a, "self_attention": sa_weights}


def gather_query(H: torch.Tensor, query: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The states at the ``query`` positions (B, T) bool, left-aligned: (B, m, d) and their mask (B, m)."""
    m = int(query.sum(1).max())
    order = torch.sort((~query).to(torch.int8), dim=1, stable=True).indices[:, :m]     # query positions first
    return H.gather(1, order[..., None].expand(-1, -1, H.size(-1))), query.gather(1, order)


class OABertModel(EncoderModel):
    """BERT + ``oa_layers`` OA blocks + residual + readout at [CLS] (see the module docstring)."""

    GROUPS = {"target_embeddings": "target/aspect embeddings (mode S)",
              "aspect_embeddings": "target/aspect embeddings (mode S)", "blocks": "OA blocks",
              "classifier": "classifier"}

    def __init__(self, config: AbsaConfig) -> None:
        super().__init__(config)
        if config.oa_layers < 1:
            raise AbsaError(f"oa_layers must be at least 1, got {config.oa_layers}")
        d = config.hidden_size
        self.target_embeddings = nn.Embedding(config.num_contexts // config.num_aspects, d)
        self.aspect_embeddings = nn.Embedding(config.num_aspects, d)
        self.blocks = nn.ModuleList(OABlock(config) for _ in range(config.oa_layers))
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.classifier = nn.Linear(d, config.num_labels)
        self.init_new_layers([self.target_embeddings, self.aspect_embeddings, self.blocks, self.classifier],
                             config.initializer_range)
        self.post_init()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                token_type_ids: torch.Tensor | None = None, context_ids: torch.Tensor | None = None,
                labels: torch.Tensor | None = None, output_components: bool = False) -> AbsaOutput:
        """Inputs as :meth:`AbsaModel.forward`. ``attentions`` (last block): ``oa`` (B, h, T, m) over
        the query, ``self_attention`` (B, h, T, T), ``token_weights`` (B, T): the [CLS] row of the
        self-attention averaged over heads (where the readout position gathers from)."""
        mask = attention_mask.bool()
        H, _ = self.encode(input_ids, attention_mask, token_type_ids)           # (B, T, d)
        aux = second_segment(token_type_ids, attention_mask)
        if aux.any():                                                            # mode P
            c_mask = mask & ~aux
            Q, q_mask = gather_query(H, aux)
        else:                                                                    # mode S
            if context_ids is None:
                raise AbsaError("oa-bert needs context_ids (or an auxiliary sentence)")
            target, aspect = split_context(self.config, context_ids.view(-1))
            Q = torch.stack([self.target_embeddings(target), self.aspect_embeddings(aspect)], dim=1)
            c_mask, q_mask = mask, torch.ones(Q.shape[:2], dtype=torch.bool, device=Q.device)
        Y = H
        for block in self.blocks:
            Y, maps = block(Y, Q, c_mask, q_mask)
        R = self.dropout(Y) + H                                                  # residual to the encoder
        pooled = R[:, 0] if self.config.oa_pool == "cls" else masked_mean(R, c_mask)
        logits, loss = joint.head(self, self.classifier(self.dropout(pooled)), labels)
        maps["token_weights"] = maps["self_attention"][:, :, 0, :].mean(1)
        return AbsaOutput(logits=logits, loss=loss, attentions=maps)
