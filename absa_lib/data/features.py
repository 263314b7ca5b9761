"""From examples to model tensors: WordPiece encoding, dynamic padding and batching.

:func:`encode_examples` is the one path from examples to encoded inputs (training, evaluation,
``absa predict``, ``absa bench`` and the figures all take it); :func:`encode_batch` collates them
into one batch with its WordPiece tokens (the figures and the notebooks' checks).

docs/paper_notes.md §1.3: ``[CLS] text_a [SEP] text_b [SEP]`` with segment ids 0 then 1, or
``[CLS] text_a [SEP]`` without an auxiliary sentence. Over-long pairs are truncated one token at a
time from the longer side (the official ``_truncate_seq_pair``; Hugging Face's
``truncation="longest_first"`` does the same). The official code pads every example to
``max_seq_length`` and then cuts each batch to its longest sequence; padding to the longest
sequence in the batch directly (``collate``) gives the same tensors with less work.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from absa_lib.data.datasets import Example
from absa_lib.data.inputs import B_VARIANTS, TextInput, build_inputs
from absa_lib.errors import AbsaError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase



@dataclass
class Encoded:
    """One encoded input. ``truncated`` says whether tokens were dropped to fit ``max_length``."""

    input_ids: list[int]
    token_type_ids: list[int]
    context_id: int
    label: int
    truncated: bool = False


def encode(inputs: list[TextInput], tokenizer: PreTrainedTokenizerBase, max_length: int = 128) -> list[Encoded]:
    """Tokenize text inputs in one batched call (fast tokenizers do this in Rust).

    Args:
        inputs: from :func:`absa_lib.data.inputs.build_inputs`.
        tokenizer: a BERT WordPiece tokenizer (uncased for every backbone shipped here).
        max_length: the official HEAD value is 128 (the paper does not say).

    Returns:
        One :class:`Encoded` per input, in order, unpadded.
    """
    if not inputs:
        return []
    pairs = [inp.text_b is not None for inp in inputs]
    if any(pairs) and not all(pairs):
        raise ValueError("encode() needs all inputs with an auxiliary sentence or all without")
    text_a = [inp.text_a for inp in inputs]
    text_b = [inp.text_b for inp in inputs] if pairs[0] else None
    enc = tokenizer(text_a, text_b, add_special_tokens=True, truncation="longest_first",
                    max_length=max_length, return_token_type_ids=True)
    out = [Encoded(ids, types, inp.context_id, inp.label)
           for inp, ids, types in zip(inputs, enc["input_ids"], enc["token_type_ids"], strict=True)]
    full = [i for i, e in enumerate(out) if len(e.input_ids) == max_length]   # only these can be cut
    if full:
        lengths = tokenizer([text_a[i] for i in full], [text_b[i] for i in full] if text_b else None,
                            add_special_tokens=True, truncation=False)["input_ids"]
        for i, ids in zip(full, lengths, strict=True):
            out[i].truncated = len(ids) > max_length
    return out


def encode_examples(examples: list[Example], aux: str, tokenizer: PreTrainedTokenizerBase,
                    max_length: int = 128) -> list[Encoded]:
    """The model's encoded inputs for ``examples`` under input variant ``aux``.

    :func:`absa_lib.data.inputs.build_inputs`, then :func:`encode`: one :class:`Encoded` per example, or
    one per (example, candidate label) for the B variants, in example order.
    """
    return encode(build_inputs(examples, aux), tokenizer, max_length)


def encode_batch(examples: list[Example], aux: str, tokenizer: PreTrainedTokenizerBase,
                 max_length: int = 128) -> tuple[dict[str, torch.Tensor], list[list[str]]]:
    """One collated batch with a row per example (see :func:`collate`) and each row's WordPiece tokens.

    Raises:
        AbsaError: for the B variants, which give several inputs per example.
    """
    if aux in B_VARIANTS:
        raise AbsaError(f"aux={aux!r}: one batch row per example needs none or an M variant, not a B variant")
    encoded = encode_examples(examples, aux, tokenizer, max_length)
    batch = collate(encoded, tokenizer.pad_token_id or 0)
    return batch, [tokenizer.convert_ids_to_tokens(e.input_ids) for e in encoded]


def collate(batch: list[Encoded], pad_token_id: int = 0, pad_multiple: int = 1) -> dict[str, torch.Tensor]:
    """Pad a batch to its longest sequence (rounded up to a multiple of ``pad_multiple``).

    Returns:
        ``input_ids``, ``attention_mask``, ``token_type_ids``: (B, T) int64; ``context_ids``: (B,);
        ``labels``: (B,).
    """
    T = -(-max(len(e.input_ids) for e in batch) // pad_multiple) * pad_multiple
    input_ids = torch.full((len(batch), T), pad_token_id, dtype=torch.long)
    token_type_ids = torch.zeros((len(batch), T), dtype=torch.long)
    attention_mask = torch.zeros((len(batch), T), dtype=torch.long)
    for i, e in enumerate(batch):
        n = len(e.input_ids)
        input_ids[i, :n] = torch.tensor(e.input_ids)
        token_type_ids[i, :n] = torch.tensor(e.token_type_ids)
        attention_mask[i, :n] = 1
    return {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "token_type_ids": token_type_ids,
        "context_ids": torch.tensor([e.context_id for e in batch], dtype=torch.long),
        "labels": torch.tensor([e.label for e in batch], dtype=torch.long),
    }


# ----------------------------------------------------------------------------------------------
# batching: which inputs go together. Padding is to the longest input of a batch, so batches of
# inputs of similar length waste less compute (random batches of 24 SentiHood inputs are ~48% padding).

GROUP_CHUNK = 50      # batches per length-sorted chunk (Hugging Face's "mega-batch" of the same idea)


def length_grouped(order: list[int], lengths: list[int], batch_size: int, generator: torch.Generator,
                   chunk_batches: int = GROUP_CHUNK) -> list[list[int]]:
    """Group a shuffled ``order`` into batches of similar length, in random batch order.

    Cut ``order`` into chunks of ``chunk_batches · batch_size`` inputs, sort each chunk by length
    (longest first), cut it into batches, then shuffle the batches with ``generator``. Which inputs
    meet in a batch stays random across epochs (the chunks follow ``order``); only the padding goes.
    """
    size = batch_size * chunk_batches
    batches = []
    for start in range(0, len(order), size):
        chunk = sorted(order[start:start + size], key=lambda i: -lengths[i])
        batches += [chunk[b:b + batch_size] for b in range(0, len(chunk), batch_size)]
    return [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]


def per_context(order: list[int], contexts: list[int], batch_size: int, generator: torch.Generator,
                lengths: list[int] | None = None) -> list[list[int]]:
    """Batches that each hold the inputs of one context, in random batch order (bert-single).

    Each context's inputs, in ``order``, are cut into batches of ``batch_size`` (length-grouped
    within the context when ``lengths`` is given), so each of the K per-context classifiers trains
    on batches of ``batch_size`` of its own examples, as K separate runs would (Sun et al. 2019);
    the last batch of a context may be smaller. The batches of all contexts are then shuffled
    together with ``generator``.
    """
    own: dict[int, list[int]] = {}
    for i in order:
        own.setdefault(contexts[i], []).append(i)
    batches = []
    for c in sorted(own):
        batches += (length_grouped(own[c], lengths, batch_size, generator) if lengths is not None
                    else sequential(own[c], batch_size))
    return [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]


def sequential(order: list[int], batch_size: int) -> list[list[int]]:
    """``order`` cut into consecutive batches."""
    return [order[b:b + batch_size] for b in range(0, len(order), batch_size)]


def by_length(encoded: list[Encoded], batch_size: int) -> list[list[int]]:
    """Batches for inference: inputs sorted by length, so each batch carries almost no padding.
    Callers put the outputs back in input order (the result does not depend on the order)."""
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i].input_ids))
    return sequential(order, batch_size)


def batches(encoded: list[Encoded], index_batches: list[list[int]], pad_token_id: int = 0,
            pad_multiple: int = 1) -> Iterator[tuple[list[int], dict[str, torch.Tensor]]]:
    """Yield ``(indices, collated batch)`` for each list of indices."""
    for idx in index_batches:
        yield idx, collate([encoded[i] for i in idx], pad_token_id, pad_multiple)
