"""Prediction files: one CSV row per example with the model's class probabilities.

Formats (UTF-8, comma-separated, one header row, ``\\n`` line ends; columns are found by name, so
their order does not matter when reading, and extra columns are ignored)::

    sentihood: id,target,aspect,gold,p_none,p_positive,p_negative
    semeval:   id,aspect,gold,p_positive,p_neutral,p_negative,p_conflict,p_none
    your own:  id,[target,]aspect,gold,p_none,p_<sentiment>...   (target if it declares targets)

- ``id`` is the sentence id as in the raw file (SentiHood: an integer, unique within a split;
  SemEval test: e.g. ``32897564#894393#2``); ``target`` is ``LOCATION1`` / ``LOCATION2``;
  ``aspect`` is the raw aspect name (``transit-location``, ``anecdotes/miscellaneous``). The key
  (id, target, aspect) or (id, aspect) identifies the example, so rows may come in any order.
- ``p_<label>`` are the probabilities of each label (softmax output): non-negative finite numbers
  whose row sums to 1 within :data:`SUM_TOLERANCE` (room for rounding to 3 decimals). Scores that do
  not (``exp(logits)``, logits) are refused: the AUCs rank P(None) as written, so they would change
  silently. Written with ``repr`` so floats round-trip exactly.
- ``gold`` is informational (the dataset's label, for a human reading the file). It is optional
  when reading (the column, or a cell left empty) and never used for scoring, but if present it must
  agree with the dataset: a disagreement means the file was made from different data (or a label
  misspelt: ``none`` for ``None``), and is an error, not a warning.

:func:`read_predictions` returns the probabilities aligned to the examples' canonical order, ready
for :func:`absa_lib.evaluation.metrics.compute_metrics`.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from absa_lib.data.datasets import LABELS, known, load_examples, targets_of
from absa_lib.data.own_data import dataset_name
from absa_lib.errors import AbsaError
from absa_lib.evaluation.metrics import compute_metrics
from absa_lib.fileio import atomic_write_bytes, csv_rows, decode_utf8

SUM_TOLERANCE = 0.01     # |sum of a row's probabilities - 1| allowed


def label_columns(dataset: str) -> tuple[str, ...]:
    """``p_<label>`` for each label, in ``LABELS`` order."""
    return tuple(f"p_{label.lower()}" for label in LABELS[dataset])


def key_columns(dataset: str) -> tuple[str, ...]:
    """(id, target, aspect), or (id, aspect) for a dataset without targets."""
    return ("id", "aspect") if targets_of(dataset) == (None,) else ("id", "target", "aspect")


def columns(dataset: str) -> tuple[str, ...]:
    return (*key_columns(dataset), "gold", *label_columns(dataset))


def _dataset_of(examples) -> str:
    """The one dataset all examples come from."""
    if not examples:
        raise AbsaError("no examples given; load them with absa_lib.data.datasets.load_examples(dataset, split)")
    names = {e.dataset for e in examples}
    if len(names) != 1 or not known(next(iter(names))):
        raise AbsaError(f"examples must all come from one dataset, one of sentihood, semeval or one "
                        f"registered (absa_lib.data.own_data), got datasets {sorted(names)}")
    return names.pop()


def _key(example) -> tuple[str, ...]:
    """The file key of an example: its :attr:`~absa_lib.data.datasets.Example.key` (id, target, aspect) or
    (id, aspect), as strings."""
    return tuple(str(part) for part in example.key)


def _match_key(parts) -> tuple[str, ...]:
    """A key as it is matched: without surrounding spaces. Two SemEval test ids end in a space in the
    raw XML (``33068425#562449#4 ``), which a spreadsheet or ``str.strip`` drops; no two keys of a
    split differ only in spaces."""
    return tuple(str(part).strip() for part in parts)


def _show(dataset: str, key: tuple[str, ...]) -> str:
    return ", ".join(f"{c}={v}" for c, v in zip(key_columns(dataset), key, strict=True))


def write_predictions(path: str | Path, examples, probs) -> None:
    """Write one row per example (in the examples' order) to ``path``, atomically.

    Args:
        path: the CSV to write; parent folders are created.
        examples: (N) ``absa_lib.data.datasets.Example`` of one dataset.
        probs: (N, C) class probabilities, columns in ``LABELS[dataset]`` order.
    """
    dataset = _dataset_of(examples)
    probs = np.asarray(probs, dtype=np.float64)
    n_labels = len(label_columns(dataset))
    if probs.shape != (len(examples), n_labels):
        raise AbsaError(f"{path}: probs has shape {probs.shape}, expected ({len(examples)}, {n_labels}) "
                        f"for {len(examples)} {dataset} examples")
    if not np.all(np.isfinite(probs)) or np.any(probs < 0):
        row = int(np.argwhere(~np.isfinite(probs) | (probs < 0))[0, 0])
        raise AbsaError(f"{path}: probabilities of row {row} are not finite non-negative numbers "
                        f"({probs[row].tolist()})")
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns(dataset))
    for example, row in zip(examples, probs.tolist(), strict=True):
        writer.writerow([*_key(example), example.label, *map(repr, row)])
    atomic_write_bytes(Path(path), buf.getvalue().encode("utf-8"))


def _parse_prob(path: Path, line: int, column: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise AbsaError(f"{path}: line {line}, column {column}: {text!r} is not a number; "
                        "expected a probability like 0.25") from None
    if not math.isfinite(value) or value < 0:
        raise AbsaError(f"{path}: line {line}, column {column}: {text!r} is not a non-negative finite "
                        "probability; write softmax probabilities, not logits")
    return value


def read_predictions(path: str | Path, examples) -> np.ndarray:
    """Read a prediction CSV and align it to ``examples`` by key.

    Args:
        path: a CSV in the format of this module's docstring.
        examples: (N) ``absa_lib.data.datasets.Example`` of one dataset and split, in canonical order.

    Returns:
        (N, C) float64 probabilities, row i for ``examples[i]``, columns in ``LABELS`` order.

    Raises:
        AbsaError: missing file; missing columns; a row with the wrong number of fields; duplicate,
            missing or unknown keys; a probability that is not a non-negative finite number; a row
            that does not sum to 1 (within :data:`SUM_TOLERANCE`); a gold
            column that disagrees with the dataset.
    """
    path = Path(path)
    dataset = _dataset_of(examples)
    header, rows = _read_rows(path, dataset)
    probs, seen, unknown, bad_gold = _align(path, dataset, examples, header, rows)
    _check_alignment(path, dataset, examples, seen, unknown, bad_gold)
    return probs


def _read_rows(path: Path, dataset: str) -> tuple[list[str], Iterator[tuple[int, list[str]]]]:
    """The file's header (checked: every key and label column, no duplicates) and its data rows."""
    try:
        text = decode_utf8(path.read_bytes(), str(path))
    except FileNotFoundError:
        raise AbsaError(f"{path}: prediction file not found; write it with absa_lib.evaluation.predictions."
                        "write_predictions or train a run") from None
    except OSError as err:
        raise AbsaError(f"{path}: cannot read the prediction file ({err.strerror})") from None
    rows = csv_rows(text, path)
    header = next(rows, (1, None))[1]
    if not header:
        raise AbsaError(f"{path}: empty file; expected the header {','.join(columns(dataset))}")
    header = [h.strip() for h in header]
    missing = [c for c in (*key_columns(dataset), *label_columns(dataset)) if c not in header]
    if missing:
        raise AbsaError(f"{path}: missing column(s) {','.join(missing)}; a {dataset} prediction file has "
                        f"the header {','.join(columns(dataset))} (gold optional), as a run's predictions_test.csv")
    if len(set(header)) != len(header):
        raise AbsaError(f"{path}: duplicate column names in the header {','.join(header)}")
    return header, rows


def _align(path: Path, dataset: str, examples, header: list[str], rows: Iterator[tuple[int, list[str]]]):
    """Each row's probabilities at its example's index (NaN where no row came); the line of each key
    seen, the rows whose key matches no example, and the rows whose gold label disagrees."""
    index = {_match_key(e.key): i for i, e in enumerate(examples)}
    label_cols, key_cols = label_columns(dataset), key_columns(dataset)
    col = {name: j for j, name in enumerate(header)}
    gold_col = col.get("gold")
    probs = np.full((len(examples), len(label_cols)), np.nan)
    seen: dict[tuple[str, ...], int] = {}
    unknown, bad_gold = [], []
    for line, row in rows:
        if not row:                                                # tolerate blank lines
            continue
        if len(row) != len(header):
            raise AbsaError(f"{path}: line {line} has {len(row)} fields, expected {len(header)} "
                            f"({','.join(header)})")
        key = _match_key(row[col[c]] for c in key_cols)
        if key in seen:
            raise AbsaError(f"{path}: line {line} repeats the key {_show(dataset, key)} of line {seen[key]}; "
                            "write one row per example")
        seen[key] = line
        i = index.get(key)
        if i is None:
            unknown.append((line, key))
            continue
        if gold_col is not None and row[gold_col] not in ("", examples[i].label):    # an empty cell: no gold
            bad_gold.append((line, key, row[gold_col], examples[i].label))
        probs[i] = [_parse_prob(path, line, c, row[col[c]]) for c in label_cols]
        total = math.fsum(probs[i])
        if abs(total - 1) > SUM_TOLERANCE:
            raise AbsaError(f"{path}: line {line}: the probabilities sum to {total:.6g}; expected softmax "
                            f"probabilities summing to 1 (within {SUM_TOLERANCE}), not scores or exp(logits)")
    return probs, seen, unknown, bad_gold


def _check_alignment(path: Path, dataset: str, examples, seen: dict, unknown: list, bad_gold: list) -> None:
    """Refuse rows that match no example, examples without a row, and gold labels that disagree."""
    split = examples[0].split
    if unknown:
        line, key = unknown[0]
        raise AbsaError(f"{path}: {len(unknown)} row(s) match no {dataset} {split} example (first: line "
                        f"{line}, {_show(dataset, key)}); is the file for this dataset and split?")
    absent = [_key(e) for e in examples if _match_key(e.key) not in seen]
    if absent:
        raise AbsaError(f"{path}: {len(absent)} of {len(examples)} {dataset} {split} examples have no row "
                        f"(first: {_show(dataset, absent[0])}); write one row per example")
    if bad_gold:
        line, key, found, expected = bad_gold[0]
        why = ("gold labels are spelt as the dataset spells them (case too); fix the column or leave it out"
               if all(f.lower() == e.lower() for _, _, f, e in bad_gold) else
               "the file was made from different data; regenerate it from these examples")
        raise AbsaError(f"{path}: {len(bad_gold)} row(s) have a gold label that disagrees with the dataset "
                        f"(first: line {line}, {_show(dataset, key)}: {found!r}, dataset says {expected!r}); {why}")


def evaluate_file(dataset: str, split: str, predictions: str | os.PathLike,
                  data_dir: str | os.PathLike | None = None) -> dict[str, float]:
    """The paper's metrics (Tables 1–2) of a prediction file for ``dataset``/``split``: its rows are
    aligned to the split's examples by key and checked (see :func:`read_predictions`). ``dataset``:
    a benchmark, a registered dataset's name, or a folder of your own data (registered here)."""

    dataset = dataset_name(str(dataset), data_dir)
    examples = load_examples(dataset, split, data_dir)
    probs = read_predictions(predictions, examples)
    gold = np.array([e.label_id for e in examples], dtype=np.int64)
    return compute_metrics(dataset, gold, probs)
