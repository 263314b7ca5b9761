"""Attention-based LSTMs with aspect embedding: AE-LSTM, AT-LSTM and ATAE-LSTM (Wang, Huang, Zhu &
Zhao, EMNLP 2016), the cheap baseline of the comparison tables.

Word vectors x_i ∈ R^{d_w} are frozen: by default the chosen backbone's input (WordPiece) embedding
table, so the tokenizer is the one every other model uses; or a GloVe text file (model field
``alstm_vectors``), whose vectors are placed on the WordPiece vocabulary (tokens GloVe lacks get
U(−0.01, 0.01), as the paper initialised out-of-vocabulary words). The aspect vector v_a ∈ R^{d_a}
is a learned embedding of the context id c = (t, a) in mode S; in mode P (auxiliary sentence) it is
the mean of the auxiliary words' vectors projected to d_a, and the LSTM reads the sentence only.

    x̃_i = [x_i ; v_a]  (AE, ATAE)          x̃_i = x_i  (AT)
    H = [h_1 … h_N] = LSTM(x̃_1 … x̃_N)       h_N: the last state of the sentence (not of padding)

AE-LSTM classifies from h* = h_N. AT-LSTM and ATAE-LSTM attend (d = LSTM width)::

    M = tanh([W_h H ; W_v v_a ⊗ e_N]) ∈ R^{(d + d_a) × N}     α = softmax(wᵀ M)   (padding masked)
    r = H αᵀ,    h* = tanh(W_p r + W_x h_N),    ŷ = softmax(W_s Dropout(h*) + b_s)

A property of this score worth knowing: the block W_v v_a ⊗ e_N is the same at every position, so
its share of wᵀM is a constant that the softmax removes. With the paper's score (``alstm_score =
"paper"``), the aspect does not change α at all; ATAE-LSTM still sees the aspect through its LSTM
input, but **AT-LSTM's prediction does not depend on the aspect** (a test checks this). The option
``alstm_score = "joint"`` scores wᵀ tanh(W_h h_i + W_v v_a), which lets the aspect steer α.

Sizes (paper): d = d_a = 300 (``alstm_hidden``, ``alstm_aspect_dim``); W_h, W_p, W_x ∈ R^{d×d},
W_v ∈ R^{d_a×d_a}, w ∈ R^{d+d_a}, no biases. New layers start at U(−0.01, 0.01) and train at
``head_lr`` = 1e-3 (AdamW here, AdaGrad in the paper).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from absa_lib.errors import AbsaError
from absa_lib.models import backbones, joint
from absa_lib.models.model_config import AbsaConfig
from absa_lib.models.other.encoders import OtherModel, masked_mean, masked_softmax, second_segment
from absa_lib.models.pretrained import AbsaOutput

VARIANTS = {"atae-lstm": (True, True), "ae-lstm": (True, False), "at-lstm": (False, True)}  # (input, attention)
INIT = 0.01


class ALSTMModel(OtherModel):
    """AE-LSTM, AT-LSTM or ATAE-LSTM (``config.absa_model``) over frozen word vectors."""

    GROUPS = {"word_embeddings": "word vectors (frozen)", "aspect_embeddings": "aspect embeddings v_a",
              "aspect_proj": "aspect projection (mode P)", "lstm": "LSTM", "attention": "attention W_h, W_v, w",
              "final": "final W_p, W_x", "classifier": "classifier"}

    def __init__(self, config: AbsaConfig) -> None:
        super().__init__(config)
        self.aspect_in_input, self.attends = VARIANTS[config.absa_model]
        d_w = getattr(config, "alstm_word_dim", None) or config.hidden_size
        d, d_a = config.alstm_hidden, config.alstm_aspect_dim
        if min(d, d_a) < 1:
            raise AbsaError(f"alstm_hidden and alstm_aspect_dim must be positive, got {d} and {d_a}")
        self.word_embeddings = nn.Embedding(config.vocab_size, d_w)
        self.word_embeddings.weight.requires_grad_(False)
        self.aspect_embeddings = nn.Embedding(config.num_contexts, d_a)
        self.aspect_proj = nn.Linear(d_w, d_a)
        self.lstm = nn.LSTM(d_w + (d_a if self.aspect_in_input else 0), d, batch_first=True)
        if self.attends:
            paper = config.alstm_score == "paper"
            self.attention = nn.ModuleDict({"w_h": nn.Linear(d, d, bias=False),
                                            "w_v": nn.Linear(d_a, d_a if paper else d, bias=False),
                                            "w": nn.Linear(d + d_a if paper else d, 1, bias=False)})
            self.final = nn.ModuleDict({"w_p": nn.Linear(d, d, bias=False), "w_x": nn.Linear(d, d, bias=False)})
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.classifier = nn.Linear(d, config.num_labels)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if not name.startswith("word_embeddings"):
                    nn.init.uniform_(p, -INIT, INIT)
            nn.init.normal_(self.word_embeddings.weight, std=config.initializer_range)
        self.post_init()

    @classmethod
    def from_backbone(cls, config: AbsaConfig, backbone: str) -> ALSTMModel:
        """Word vectors from a GloVe file (``alstm_vectors``) or the backbone's embedding table."""
        if config.alstm_vectors:
            table = glove_table(Path(config.alstm_vectors), backbones.load_tokenizer(backbone).get_vocab(),
                                config.vocab_size)
            config.alstm_word_dim = table.size(1)
            model = cls(config)
            model.word_embeddings.weight.data.copy_(table)
            return model
        model = cls(config)
        path = backbones.backbone_dir(backbone)
        if path is not None:
            weights = {k.removeprefix("bert."): v for k, v in backbones.read_weights(path).items()}
            table = weights.get("embeddings.word_embeddings.weight")
            if table is None or table.shape != model.word_embeddings.weight.shape:
                raise AbsaError(f"{path}: no embeddings.word_embeddings.weight of shape "
                                f"{tuple(model.word_embeddings.weight.shape)} to use as word vectors")
            model.word_embeddings.weight.data.copy_(table)
        return model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                token_type_ids: torch.Tensor | None = None, context_ids: torch.Tensor | None = None,
                labels: torch.Tensor | None = None, output_components: bool = False) -> AbsaOutput:
        """Inputs as :meth:`AbsaModel.forward`. ``attentions``: ``token_weights`` α (B, T), 0 outside
        the sentence (AT and ATAE only)."""
        x = self.word_embeddings(input_ids)                                     # (B, T, d_w)
        aux = second_segment(token_type_ids, attention_mask)
        if aux.any():                                                           # mode P
            v = self.aspect_proj(masked_mean(x, aux))                           # (B, d_a)
            sentence = attention_mask.bool() & ~aux
        else:                                                                   # mode S
            if context_ids is None:
                raise AbsaError(f"{self.name} needs context_ids (or an auxiliary sentence)")
            v = self.aspect_embeddings(context_ids.view(-1))
            sentence = attention_mask.bool()
        T = x.size(1)
        if self.aspect_in_input:
            x = torch.cat([x, v[:, None, :].expand(-1, T, -1)], dim=-1)        # (B, T, d_w + d_a)
        lengths = sentence.sum(1).clamp_min(1)
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, (h_n, _) = self.lstm(packed)
        H = pad_packed_sequence(out, batch_first=True, total_length=T)[0]      # (B, T, d)
        h_last = h_n[-1]                                                        # (B, d)
        attentions = None
        if self.attends:
            a = self.attention
            if self.config.alstm_score == "paper":                              # w·[tanh(W_h h_i); tanh(W_v v)]
                M = torch.cat([torch.tanh(a["w_h"](H)), torch.tanh(a["w_v"](v))[:, None, :].expand(-1, T, -1)], -1)
            else:                                                               # w·tanh(W_h h_i + W_v v)
                M = torch.tanh(a["w_h"](H) + a["w_v"](v)[:, None, :])
            alpha = masked_softmax(a["w"](M).squeeze(-1), sentence)             # (B, T)
            r = torch.einsum("bt,btd->bd", alpha, H)
            h_star = torch.tanh(self.final["w_p"](r) + self.final["w_x"](h_last))
            attentions = {"token_weights": alpha}
        else:
            h_star = h_last
        logits, loss = joint.head(self, self.classifier(self.dropout(h_star)), labels)
        return AbsaOutput(logits=logits, loss=loss, attentions=attentions)


def glove_table(path: Path, vocab: dict[str, int], size: int) -> torch.Tensor:
    """A (size, D) table: the GloVe vector of each vocabulary token, U(−0.01, 0.01) for the others.

    Raises:
        AbsaError: the file is missing or empty, a line is not ``word v1 … vD`` with D floats,
            D differs between lines, or no vocabulary token has a vector.
    """
    if not path.is_file():
        raise AbsaError(f"alstm_vectors={str(path)!r}: no such file; expected a GloVe text file "
                        "(one 'word v1 v2 … vD' per line)")
    found: dict[int, list[float]] = {}
    dim = None
    with path.open(encoding="utf-8", errors="strict") as fh:
        try:
            for n, line in enumerate(fh, 1):
                parts = line.rstrip("\n").rstrip(" ").split(" ")
                if n == 1 and len(parts) == 2 and all(p.isdigit() for p in parts):
                    continue                                                    # word2vec-style header
                try:
                    values = [float(p) for p in parts[1:]]
                except ValueError:
                    values = []
                if not values or (dim is not None and len(values) != dim):
                    raise AbsaError(f"{path}:{n}: expected 'word' and {dim or 'D'} numbers separated by single "
                                    f"spaces (a GloVe text file), got {line[:60]!r}")
                dim = len(values)
                if parts[0] in vocab and vocab[parts[0]] < size:
                    found[vocab[parts[0]]] = values
        except UnicodeDecodeError:
            raise AbsaError(f"{path}: not UTF-8 text; expected a GloVe text file") from None
    if dim is None:
        raise AbsaError(f"{path}: empty; expected a GloVe text file (one 'word v1 v2 … vD' per line)")
    if not found:
        raise AbsaError(f"{path}: none of its words is in the backbone's vocabulary (uncased WordPiece)")
    table = torch.empty(size, dim).uniform_(-INIT, INIT)
    ids = torch.tensor(sorted(found))
    table[ids] = torch.tensor([found[i] for i in sorted(found)], dtype=table.dtype)
    return table
