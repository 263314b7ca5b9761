"""Why did the model say that? Each word's share of Figure 3's gradient sensitivity, for any sentence.

For an example (a sentence under one target and aspect) and the label the model predicts, c, Figure
3's relevance of input token t is (:func:`~absa_lib.evaluation.analysis.gradient_sensitivity`)::

    g_t = ‖∂z_c / ∂E_t‖²₂        z: the pre-softmax logits, E: the embedding block's output

Here it is summed over the WordPiece tokens of each word of the sentence as it was given (split at
white space: "LOCATION1's" and "cheap," are one word each, though the model reads them as several
tokens, lower-cased and with its masks spelt out) and divided by the sum over the sentence's words::

    relevance_w = Σ_{t ∈ w} g_t / Σ_{t ∈ sentence} g_t          (Σ_w relevance_w = 1)

``outside`` is the share of Σ_t g_t on the rest of the input: [CLS], [SEP] and the auxiliary
sentence ("location - 1 - price"), which name the target and aspect rather than say anything about
them. For the B input variants (one yes/no input per candidate label) the explained input is the one
of the predicted label, and c its "yes". Defined for the models whose words go through a BERT
embedding block: BERT-single, BERT-pair, CG-BERT, QACG-BERT (``names_with(explainable=True)``).

For QACG-BERT, :func:`attention_words` adds Figure 5's view of one layer and head: the column sums
over the query tokens of Â = A_self + λ_A ⊙ A_quasi (Eq. 4), of A_self and of λ_A ⊙ A_quasi, each
summed over a word's tokens: how much attention each word receives, and how much the context-guided
quasi-attention adds (> 0) or takes away (< 0).
"""

from __future__ import annotations

import numpy as np
import torch

from absa_lib.data.datasets import LABELS
from absa_lib.data.features import Encoded, collate
from absa_lib.data.inputs import B_VARIANTS, model_text
from absa_lib.errors import AbsaError
from absa_lib.evaluation.analysis import extract_components, gradient_sensitivity
from absa_lib.models import MODELS, names_with, traits

ROWS_PER_PASS = 16           # inputs differentiated together (memory grows with it, time hardly)


def check_explainable(model_name: str) -> None:
    """One line for a model whose predictions cannot be explained this way."""
    explained = names_with(explainable=True)       # asked now: a model registered later counts
    if model_name not in explained:
        raise AbsaError(f"--explain: word relevance is the gradient at a BERT embedding block, defined for "
                        f"{', '.join(explained)}; a {model_name} model has none (the LSTMs embed words with "
                        "their own table, MAN-BERT and OA-BERT read BERT's token states through their own "
                        "attention): predict without --explain")


def word_pieces(dataset: str, words: list[str], tokenizer) -> list[int]:
    """How many WordPiece tokens the model reads for each word (after its rewriting of the text:
    lower case and spelt-out masks for SentiHood). Tokens never cross white space, so the counts of
    the words add up to the sentence's."""
    return [len(tokenizer(model_text(dataset, w), add_special_tokens=False)["input_ids"]) if w else 0 for w in words]


def explain_rows(model, dataset: str, aux: str, encoded: list[Encoded], predicted: list[int],
                 pieces: list[list[int]], pad_id: int = 0) -> list[dict]:
    """Each example's word relevance for its predicted label.

    Args:
        encoded: the model's inputs, one per example (or one per example and candidate label, B variants).
        predicted: (N,) the predicted label id of each example.
        pieces: each example's :func:`word_pieces` (its sentence's words, split at white space).

    Returns:
        Per example ``{"relevance": [share per word, None for a word cut off by truncation], "outside": share
        of the gradient on the rest of the input}``.
    """
    n_labels = len(LABELS[dataset])
    if aux in B_VARIANTS:                    # the input of the predicted label; its "yes"
        rows, classes = [encoded[i * n_labels + c] for i, c in enumerate(predicted)], [1] * len(predicted)
    else:
        rows, classes = list(encoded), list(predicted)
    out = []
    for start in range(0, len(rows), ROWS_PER_PASS):
        part = rows[start:start + ROWS_PER_PASS]
        relevance = gradient_sensitivity(model, collate(part, pad_id),
                                         torch.tensor(classes[start:start + ROWS_PER_PASS])).double().numpy()  # (B, T)
        for j, enc in enumerate(part):
            n_sentence = _sentence_length(enc, pieces[start + j])
            total = float(relevance[j, 1:1 + n_sentence].sum())
            whole = float(relevance[j, :len(enc.input_ids)].sum())
            words = _per_word(relevance[j], pieces[start + j], n_sentence)
            out.append({"relevance": [None if w is None else (w / total if total > 0 else 0.0) for w in words],
                        "outside": 1 - total / whole if whole > 0 else 0.0})
    return out


def _sentence_length(enc: Encoded, pieces: list[int]) -> int:
    """How many of the sentence's word pieces the input holds ([CLS] sentence [SEP] come first, token
    type 0); fewer than the words' only when the input was truncated."""
    n_sentence = int((np.asarray(enc.token_type_ids) == 0).sum()) - 2     # without [CLS] and its [SEP]
    if n_sentence > sum(pieces) or (not enc.truncated and n_sentence != sum(pieces)):
        raise AbsaError(f"--explain: the sentence's {sum(pieces)} word pieces do not match the model's input "
                        f"({n_sentence} tokens); please report the sentence")
    return n_sentence


def _per_word(values: np.ndarray, pieces: list[int], n_sentence: int) -> list[float | None]:
    """Per-token ``values`` (T,) of an input summed over each word's pieces (None for a word cut off)."""
    sentence, ends = values[1:1 + n_sentence], np.cumsum(pieces)
    return [None if end - count >= n_sentence and count else float(sentence[end - count:min(end, n_sentence)].sum())
            for end, count in zip(ends, pieces, strict=True)]


def attention_words(model, aux: str, encoded: list[Encoded], pieces: list[list[int]], layer: int, head: int,
                    pad_id: int = 0) -> list[dict]:
    """Figure 5 per word for each example (one input each: none or an M variant): ``{"layer", "head",
    "a_hat", "a_self", "quasi_term"}``, each a list of per-word column sums (None for a word cut off)."""
    name = getattr(model, "name", None)
    if name not in MODELS or not traits(name).quasi or not getattr(model.config, "quasi", True):
        raise AbsaError("--explain-head shows QACG-BERT's quasi-attention (Figure 5); this model has none")
    if aux in B_VARIANTS:
        raise AbsaError(f"--explain-head needs one input per example (none or an M variant), not {aux}")
    out = []
    for start in range(0, len(encoded), ROWS_PER_PASS):
        part = encoded[start:start + ROWS_PER_PASS]
        batch = collate(part, pad_id)
        layers = extract_components(model, batch)
        if not 0 <= layer < len(layers) or not 0 <= head < layers[0]["a_hat"].size(1):
            raise AbsaError(f"--explain-head {layer} {head}: the model has layers 0..{len(layers) - 1} and heads "
                            f"0..{layers[0]['a_hat'].size(1) - 1}")
        c = {k: v[:, head].float().cpu() for k, v in layers[layer].items()}            # (B, T, T) / (B, T, 1)
        mask = batch["attention_mask"].float()[:, :, None]                               # (B, T, 1): real queries
        sums = {key: (m * mask).sum(1).double().numpy()                                   # column sums: (B, T)
                for key, m in (("a_hat", c["a_hat"]), ("a_self", c["a_self"]),
                               ("quasi_term", c["lambda_a"] * c["a_quasi"]))}
        for j, enc in enumerate(part):
            n_sentence = _sentence_length(enc, pieces[start + j])
            out.append({"layer": layer, "head": head,
                        **{key: _per_word(values[j], pieces[start + j], n_sentence) for key, values in sums.items()}})
    return out
