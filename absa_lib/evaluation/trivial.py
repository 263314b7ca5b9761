"""The trivial predictors, the floor of every metric: constant answers scored on gold labels alone.

    all-None           every (target,) aspect predicted absent
    majority polarity  every aspect predicted present, with the sentiment most frequent in training

:func:`trivial_predictors` scores them on any gold labels (the test set's, for the tables:
:func:`absa_lib.reports.tables.trivial_baselines`; the examples a run was scored on, for the run's
record: :func:`floor_record`); :func:`trivial_floor` is the best of them on the selection metric.
"""

from __future__ import annotations

import numpy as np

from absa_lib.data import datasets as D
from absa_lib.evaluation.metrics import compute_metrics, selection_metric


def trivial_predictors(dataset: str, train_labels, gold) -> dict[str, dict]:
    """Metrics of the two trivial predictors on the label ids ``gold`` (rows in the dataset's groups);
    ``train_labels``: the training label ids the majority polarity is counted on.

    Returns ``{row name: metrics}`` (fractions, as :func:`~absa_lib.evaluation.metrics.compute_metrics`),
    e.g. ``{"All-None (trivial)": ..., "Majority polarity: Positive (trivial)": ...}``."""
    labels, none = D.LABELS[dataset], D.none_id(dataset)
    gold = np.asarray(gold)
    majority = int(np.argmax(np.bincount([int(y) for y in train_labels if y != none], minlength=len(labels))))
    out = {}
    for name, label in ((f"All-{labels[none]} (trivial)", none),
                        (f"Majority polarity: {labels[majority]} (trivial)", majority)):
        probs = np.zeros((len(gold), len(labels)))
        probs[:, label] = 1.0
        out[name] = compute_metrics(dataset, gold, probs)
    return out


def trivial_floor(dataset: str, trivial: dict[str, dict]) -> tuple[str, float]:
    """The best of the trivial predictors ``trivial`` (:func:`trivial_predictors` of ``dataset``) on
    the dataset's selection metric, ``(row name, value in %)``: the floor a run must beat (NaN
    values never win)."""
    metric = selection_metric(dataset)
    name, metrics = max(trivial.items(), key=lambda item: np.nan_to_num(item[1][metric], nan=-1.0))
    return name, 100 * metrics[metric]


def floor_record(dataset: str, train_labels, gold) -> dict | None:
    """What a run's metrics record keeps of :func:`trivial_floor` on its own test labels ``gold``
    (``train_labels``: those it trained on): ``{"predictor": "All-None", "test": 0.479}``, the
    selection metric as a fraction; None when it is undefined (NaN)."""
    trivial = trivial_predictors(dataset, train_labels, gold)
    name, _ = trivial_floor(dataset, trivial)
    value = float(trivial[name][selection_metric(dataset)])
    return None if np.isnan(value) else {"predictor": name.removesuffix(" (trivial)"), "test": value}
