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
embedding block: BERT-single, BERT-pair, CG-BERT, QACG-BERT (:data:`EXPLAINED`).
"""

from __future__ import annotations

import numpy as np
import torch

from absa_lib.data.datasets import LABELS
from absa_lib.data.features import Encoded, collate
from absa_lib.data.inputs import B_VARIANTS, model_text
from absa_lib.errors import AbsaError
from absa_lib.evaluation.analysis import gradient_sensitivity

EXPLAINED = ("bert-single", "bert-pair", "cg-bert", "qacg-bert")
ROWS_PER_PASS = 16           # inputs differentiated together (memory grows with it, time hardly)


def check_explainable(model_name: str) -> None:
    """One line for a model whose predictions cannot be explained this way."""
    if model_name not in EXPLAINED:
        raise AbsaError(f"--explain: word relevance is the gradient at a BERT embedding block, defined for "
                        f"{', '.join(EXPLAINED)}; a {model_name} model has none (the LSTMs embed words with "
                        "their own table, MAN-BERT and OA-BERT read BERT's token states through their own "
                        "attention): predict without --explain")


def word_pieces(dataset: str, words: list[str], tokenizer) -> list[int]:
    """How many WordPiece tokens the model reads for each word (after its rewriting of the text:
    lower case and spelt-out masks for SentiHood). Tokens never cross white space, so the counts of
    the words add up to the sentence's."""
    return [len(tokenizer(model_text(dataset, w), add_special_tokens=False)["input_ids"]) if w else 0 for w in words]


def explain_rows(model, dataset: str, aux: str, encoded: list[Encoded], predicted: list[int], words: list[list[str]],
                 tokenizer) -> list[dict]:
    """Each example's word relevance for its predicted label.

    Args:
        encoded: the model's inputs, one per example (or one per example and candidate label, B variants).
        predicted: (N,) the predicted label id of each example.
        words: each example's sentence split at white space.

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
    pad = tokenizer.pad_token_id or 0
    for start in range(0, len(rows), ROWS_PER_PASS):
        part = rows[start:start + ROWS_PER_PASS]
        batch = collate(part, pad)
        relevance = gradient_sensitivity(model, batch, torch.tensor(classes[start:start + ROWS_PER_PASS]))  # (B, T)
        for j, enc in enumerate(part):
            out.append(_word_shares(relevance[j].double().numpy(), enc, words[start + j],
                                    word_pieces(dataset, words[start + j], tokenizer)))
    return out


def _word_shares(relevance: np.ndarray, enc: Encoded, words: list[str], pieces: list[int]) -> dict:
    """Sum the sentence tokens' relevance (T,) per word; [CLS] sentence [SEP] come first (token type 0)."""
    types = np.asarray(enc.token_type_ids)
    n_sentence = int((types == 0).sum()) - 2                 # without [CLS] and the [SEP] after the sentence
    if n_sentence > sum(pieces) or (not enc.truncated and n_sentence != sum(pieces)):
        raise AbsaError(f"--explain: the sentence's {sum(pieces)} word pieces do not match the model's input "
                        f"({n_sentence} tokens); please report the sentence")
    sentence = relevance[1:1 + n_sentence]
    total, whole = float(sentence.sum()), float(relevance[:len(types)].sum())
    ends = np.cumsum(pieces)
    shares = []
    for end, count in zip(ends, pieces, strict=True):
        start = end - count
        if start >= n_sentence and count:
            shares.append(None)                              # cut off by --truncate
        else:
            value = float(sentence[start:min(end, n_sentence)].sum())
            shares.append(value / total if total > 0 else 0.0)
    return {"relevance": shares, "outside": 1 - total / whole if whole > 0 else 0.0}
