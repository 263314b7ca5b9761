"""A run's data: the examples of each split and their encoded inputs (tokenized once per process),
and each epoch's batches."""

from __future__ import annotations

import torch

from absa_lib.data import datasets as D
from absa_lib.data.features import Encoded, encode_examples, length_grouped, per_context, sequential
from absa_lib.training.config import TrainConfig

_ENCODED: dict[tuple, tuple[list, list[Encoded]]] = {}     # one tokenization per split per process


def prepare_split(config: TrainConfig, split: str, tokenizer, data_dir=None) -> tuple[list, list[Encoded]]:
    """Examples of a split (subset as configured) and their encoded inputs, tokenized once per
    process (a notebook or grid that trains many runs on the same split reuses them)."""
    subset = config.max_train_examples if split == "train" else config.max_eval_examples
    key = (config.dataset, split, config.aux, subset, config.max_length, tokenizer.name_or_path,
           len(tokenizer), str(data_dir),
           tuple(sorted(D.data_checksums(config.dataset).items())))     # your own data's files can change
    if key not in _ENCODED:
        examples = D.load_examples(config.dataset, split, data_dir=data_dir)
        examples = (D.train_subset(examples, subset) if split == "train"
                    else D.eval_subset(examples, config.dataset, subset))
        _ENCODED[key] = examples, encode_examples(examples, config.aux, tokenizer, config.max_length)
    return _ENCODED[key]


def epoch_batches(config: TrainConfig, encoded: list[Encoded], epoch: int) -> list[list[int]]:
    """The epoch's batches (lists of input indices), seeded per (seed, epoch) so that a resumed run
    draws exactly the batches an uninterrupted one would."""
    g = torch.Generator().manual_seed(config.seed * 1000 + epoch)
    if config.sampler == "balanced":
        labels = torch.tensor([e.label for e in encoded])
        counts = torch.bincount(labels).float()
        weights = (len(labels) / counts)[labels]       # official: N / count(label), with replacement
        order = torch.multinomial(weights, len(labels), replacement=True, generator=g).tolist()
    else:                                               # uniform, per-context: every input once
        order = torch.randperm(len(encoded), generator=g).tolist()
    lengths = [len(e.input_ids) for e in encoded] if config.group_by_length else None
    if config.sampler == "per-context":                 # bert-single: one context per batch
        return per_context(order, [e.context_id for e in encoded], config.batch_size, g, lengths)
    if lengths is not None:
        return length_grouped(order, lengths, config.batch_size, g)
    return sequential(order, config.batch_size)
