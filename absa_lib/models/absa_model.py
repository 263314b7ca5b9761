"""The four models behind one interface: BERT-single, BERT-pair, CG-BERT and QACG-BERT.

Every model is a Hugging Face ``BertModel`` plus the official head (docs/paper_notes.md §4.1)::

    logits = W_o · Dropout(tanh(W_p h_[CLS] + b_p)) + b_o          loss = mean cross-entropy

``bert-single`` and ``bert-pair`` are plain BERT sequence classification (their inputs, sentence
alone or with an auxiliary sentence, are decided by the data variant). ``cg-bert`` and ``qacg-bert``
add a context embedding table (one row per context id, §3.6) and swap every layer's
``BertSelfAttention`` for :class:`~absa_lib.models.attention.CGBertSelfAttention` or
:class:`~absa_lib.models.attention.QACGBertSelfAttention`; they work with or without the auxiliary
sentence. Padded keys are masked with the official additive −10000 mask (docs/paper_notes.md §2.2).

Presets (:data:`~absa_lib.models.model_config.PRESETS`; any field can be overridden by name in :func:`build_model`):

======================  ===================  ==========================  =============================
field                   ``paper``            ``official`` (repo HEAD)    meaning
======================  ===================  ==========================  =============================
``gate_activation``     tanh (Eq. 3)         sigmoid                     CG gates λ_Q, λ_K
``quasi_proj``          shared (d→d_h)       per_head (d→d, split)       QACG Z_Q, Z_K (Eq. 5)
``context_dropout``     False                True                        dropout on QACG C_Q, C_K
``lambda_bias``         False                QACG True, CG False         bias in the λ-layers
``init_std``            1e-3                 0.02                        E_ctx, W_c, U/Z weights
``lambda_init_std``     1e-3                 0.01                        λ-layer weights
``quasi``               True                 True                        False: λ_A = 0 (ablation)
``context_residual``    True                 True                        C = [E_c; X] W_cᵀ + b + E_c
``pooling``             cls                  cls                         cls: BERT's pooler on h_[CLS];
                                                                         cls_state: §3.5's head;
                                                                         mean: masked mean of the last
                                                                         states (not the paper's)
======================  ===================  ==========================  =============================

``pooling="cls_state"`` is the paper's head as §3.5 writes it, y = softmax(e_CLS W_CLSᵀ): the last
[CLS] state, dropout, and a linear layer without bias; the pretrained pooler stays in the model
unused (``absa info`` still counts it). Both presets keep the official pooler head (the option is
measured at one CPU epoch only: docs/evidence/ablations.md). ``pooling="mean"`` is an option for backbones
trained as sentence encoders with mean pooling (the offline MiniLM): their [CLS] pooler was never
trained for classification. Neither is ever a default.

Reading of the paper preset: §3.7 says new layers start at N(0, σ²) with "σ = e−3". We read it
as 10⁻³ (the "1" of "1e−3" lost in extraction): e^{-3} ≈ 0.05 would be larger than BERT's own 0.02,
contradicting "small random numbers" and "the gating factors start at values close to zero",
which holds with σ = 10⁻³ (tanh gate ≈ 0 for CG, λ_A ≈ 1 − 2σ(0) = 0 for QACG). The classifier is
initialised like every BERT fine-tuning head, N(0, 0.02²), in both presets; all new biases are 0.
The paper does not describe the context matrix beyond "[E_c, E] W_cᵀ with a residual connection",
so both presets use the official per-layer W_c on each layer's input with the +E_c residual, and
both keep the biases of W_c and U/Z ("linear layers"). With σ = 10⁻³ the context's effect on the
logits at initialisation is far below float32 resolution for CG (products of three 10⁻³ terms);
it grows during training (Adam's steps do not shrink with the gradient's scale).
The plain BERT models use HF's ``sdpa`` attention; CG and QACG use their own eager math.
Parameter counts with bert-base (3 labels, 8 contexts): BERT-pair 109,484,547; CG (both presets)
123,758,595; QACG official 137,833,011; QACG paper 124,839,939 (per layer Z: 2·(768·64 + 64),
λ: 4·64), the paper's "about 124M". The official counts lack the unused pooler ``attention_gate``
(24,641), which is not built here.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import BertModel

from absa_lib.errors import AbsaError
from absa_lib.models import backbones, joint
from absa_lib.models.attention import NEW_MODULES, CGBertSelfAttention, QACGBertSelfAttention, new_module
from absa_lib.models.model_config import AbsaConfig
from absa_lib.models.pretrained import AbsaOutput, AbsaPreTrainedModel

ATTENTION = {"cg-bert": CGBertSelfAttention, "qacg-bert": QACGBertSelfAttention}


class AbsaModel(AbsaPreTrainedModel):
    """BERT + (optionally) context-guided attention + the pooler/dropout/linear head.

    Args:
        config: an :class:`~absa_lib.models.model_config.AbsaConfig` carrying ``absa_model``,
            ``num_labels``, ``num_contexts`` and the model fields; it travels with ``save_pretrained``.
    """

    def __init__(self, config: AbsaConfig) -> None:
        super().__init__(config)
        self.name = config.absa_model
        self.uses_context = self.name in ATTENTION
        config._attn_implementation = "eager" if self.uses_context else "sdpa"
        self.bert = BertModel(config)
        d = config.hidden_size
        if self.uses_context:
            for i, layer in enumerate(self.bert.encoder.layer):     # swap before the first forward
                new = ATTENTION[self.name](config, layer_idx=i).train(self.bert.training)
                new.load_state_dict(layer.attention.self.state_dict(), strict=False)
                layer.attention.self = new
            self.context_embeddings = nn.Embedding(config.num_contexts, d)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        pooling = getattr(config, "pooling", "cls")
        self.classifier = nn.Linear(d, config.num_labels, bias=pooling != "cls_state")   # W_CLS: no bias in §3.5
        joint.add_task_weights(self)
        self._init_new_weights()
        self.post_init()                 # transformers' bookkeeping; draws nothing (see init_weights)

    @torch.no_grad()
    def _init_new_weights(self) -> None:
        cfg = self.config
        nn.init.normal_(self.classifier.weight, std=cfg.initializer_range)
        if self.classifier.bias is not None:
            nn.init.zeros_(self.classifier.bias)
        if not self.uses_context:
            return
        nn.init.normal_(self.context_embeddings.weight, std=cfg.init_std)
        for layer in self.bert.encoder.layer:
            for name in NEW_MODULES:
                module = getattr(layer.attention.self, name)
                std = cfg.lambda_init_std if name.startswith("lambda") else cfg.init_std
                nn.init.normal_(module.weight, std=std)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)

    @classmethod
    def from_backbone(cls, config: AbsaConfig, backbone: str) -> AbsaModel:
        """The model of ``config`` with the backbone's pretrained weights (key-checked; none for the
        random backbones)."""
        model = cls(config)
        path = backbones.backbone_dir(backbone)
        if path is not None:
            backbones.load_backbone_weights(model.bert, path, model.new_keys())
        return model

    def new_keys(self) -> set[str]:
        """Keys of ``self.bert`` that are not BERT's own (the context layers inside attention)."""
        return {k for k in self.bert.state_dict() if new_module(k)}

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                token_type_ids: torch.Tensor | None = None, context_ids: torch.Tensor | None = None,
                labels: torch.Tensor | None = None, output_components: bool = False) -> AbsaOutput:
        """Args: ``input_ids``, ``attention_mask``, ``token_type_ids`` (B, T); ``context_ids``,
        ``labels`` (B,) int64. ``output_components``: also return per-layer attention components
        (CG: lambda_q, lambda_k, attention; QACG: a_self, a_quasi, lambda_q, lambda_k, lambda_a,
        a_hat), shapes (B, H, T, T) or (B, H, T, 1); None for the plain BERT models."""
        dtype = self.bert.embeddings.word_embeddings.weight.dtype
        mask = (1.0 - attention_mask[:, None, None, :].to(dtype)) * -10000.0   # (B, 1, 1, T)
        extra, components = {}, None
        if self.uses_context:
            if context_ids is None:
                raise AbsaError(f"{self.name} needs context_ids (one context id per example)")
            extra["context"] = self.context_embeddings(context_ids.view(-1))       # e_c: (B, d)
            if output_components:
                extra["components"] = components = []
        out = self.bert(input_ids=input_ids, attention_mask=mask, token_type_ids=token_type_ids, **extra)
        pooling = getattr(self.config, "pooling", "cls")
        if pooling == "mean":                                     # not the paper's: see the docstring
            keep = attention_mask[:, :, None].to(out.last_hidden_state.dtype)      # (B, T, 1)
            pooled = (out.last_hidden_state * keep).sum(1) / keep.sum(1)           # (B, d)
        elif pooling == "cls_state":                              # §3.5: y = softmax(e_CLS W_CLSᵀ)
            pooled = out.last_hidden_state[:, 0]                                   # e_CLS: (B, d)
        else:
            pooled = out.pooler_output                                             # tanh(W_p h_[CLS] + b_p)
        logits = self.classifier(self.dropout(pooled))                             # (B, C)
        logits, loss = joint.head(self, logits, labels)                            # cross-entropy or joint
        return AbsaOutput(logits=logits, loss=loss, components=components)

    def load_official_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Load a state_dict of the official ``CGBertForSequenceClassification`` or
        ``QACGBertForSequenceClassification`` (frankaging/Quasi-Attention-ABSA; ``official`` preset
        and num_contexts = 8 for identical shapes): renames ``bert.encoder.context_layer.{l}`` to
        ``bert.encoder.layer.{l}.attention.self.context_layer``, ``bert.context_embeddings`` to
        ``context_embeddings``, TF-style ``gamma/beta`` to ``weight/bias``; drops the unused
        ``bert.pooler.attention_gate``. The official table has 8 context rows; with fewer contexts
        (SemEval: 5, ids 0-4 as in the official code) the first ``num_contexts`` rows are kept."""
        mapped = {}
        for key, value in state.items():
            key = key.removeprefix("module.")
            if key.startswith("bert.pooler.attention_gate."):
                continue
            if key.startswith("bert.encoder.context_layer."):
                layer, rest = key.removeprefix("bert.encoder.context_layer.").split(".", 1)
                key = f"bert.encoder.layer.{layer}.attention.self.context_layer.{rest}"
            key = key.replace("bert.context_embeddings.", "context_embeddings.")
            if "LayerNorm." in key:
                key = key.replace(".gamma", ".weight").replace(".beta", ".bias")
            mapped[key] = value
        table = mapped.get("context_embeddings.weight")
        if table is not None and self.uses_context and table.shape[0] > self.config.num_contexts:
            mapped["context_embeddings.weight"] = table[:self.config.num_contexts]
        self.load_checked(mapped, "official state_dict")


def parameter_breakdown(model: AbsaModel) -> dict[str, int]:
    """Parameter counts by component (sums to :func:`count_parameters`)."""
    groups = {"bert embeddings": 0, "bert encoder": 0, "bert pooler": 0, "context embeddings": 0,
              "context transform W_c": 0, "context projections U/Z": 0, "gates λ": 0, "classifier": 0}
    for key, p in model.named_parameters():
        new = new_module(key) or ""
        group = ("context transform W_c" if new == "context_layer" else
                 "context projections U/Z" if new.startswith("context_for_") else
                 "gates λ" if new.startswith("lambda_") else
                 "context embeddings" if key.startswith("context_embeddings") else
                 "classifier" if key.startswith("classifier") else
                 "bert " + key.split(".")[1] if key.startswith("bert.") else getattr(model, "GROUPS", {}).get(
                     key.split(".")[0], key.split(".")[0]))
        groups[group] = groups.get(group, 0) + p.numel()
    return {k: v for k, v in groups.items() if v}


def count_parameters(model: nn.Module) -> int:
    """Number of parameters (all are trainable)."""
    return sum(p.numel() for p in model.parameters())
