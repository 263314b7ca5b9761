"""The evaluation metrics of the paper's Tables 1 (SentiHood) and 2 (SemEval-2014), docs/paper_notes.md §5.

They reproduce ``evaluation.py`` of Sun et al. (HSLCY/ABSA-BERT-pair), which the official CG-BERT /
QACG-BERT code copied with zero-division guards, on label ids ``gold`` (N,) and class
probabilities ``probs`` (N, C) in canonical dataset order. The prediction is ``argmax(probs)``
(ties to the lower index). Rows come in consecutive groups: 4 for SentiHood (one (sentence,
target), aspects general, price, safety, transit-location), 5 for SemEval (one sentence, aspects
price, anecdotes/miscellaneous, food, ambience, service). Label ids: SentiHood None=0, Positive=1,
Negative=2; SemEval positive=0, neutral=1, negative=2, conflict=3, none=4.

SentiHood, with g a group, A_g = {aspects with pred != None}, G_g = {aspects with gold != None}:

    strict acc  = #{g : pred_g == gold_g (all 4 three-way labels)} / #groups
    P_g = |A_g ∩ G_g| / |A_g|,  R_g = |A_g ∩ G_g| / |G_g|   (both 0 if A_g ∩ G_g = ∅);
    macro P, R  = means of P_g, R_g over groups with G_g != ∅   (all-None gold groups are skipped)
    macro F1    = 2 P R / (P + R)                                 (0 if P + R = 0)
    aspect AUC  = mean over the 4 aspect positions (LOC1 and LOC2 pooled) of
                  roc_auc(y = [gold == None], score = P(None))
    p_neg       = P(Neg) / (P(Pos) + P(Neg))    (None renormalised away)
    sentiment acc = accuracy of [p_neg > 0.5 -> Negative, else Positive] on gold != None
    sentiment AUC = mean over the 4 aspect positions of roc_auc(y = [gold == Negative], p_neg)

SemEval, with S_s / G_s the aspects predicted / gold != none in sentence s having G_s != ∅:

    P = Σ|S_s ∩ G_s| / Σ|S_s|,  R = Σ|S_s ∩ G_s| / Σ|G_s|,  F1 = 2 P R / (P + R)   (micro)
    4-class acc on gold != none: a predicted none becomes argmax over {pos, neu, neg, conflict}
    3-class acc on gold in {pos, neu, neg}: predicted conflict/none -> argmax over {pos, neu, neg}
    binary acc on gold in {pos, neg}: predicted neu/conflict/none -> pos if P(pos) >= P(neg) else neg

Your own data (:mod:`absa_lib.data.own_data`; none label first, then the K declared sentiments), with
groups of one (sentence, target) × every aspect: strict acc, macro P/R/F1 and aspect AUC as
SentiHood's (the none label for None), and on gold != none, with None renormalised away
(pred_s = argmax over the K sentiments):

    sentiment acc      = accuracy of pred_s
    sentiment macro-F1 = unweighted mean over the K sentiments of the F1 of pred_s

Undefined values are ``nan``, never an exception (the reference raises ZeroDivisionError there,
or, for a one-class AUC, raises with older scikit-learn and warns + returns nan with newer):
- an AUC whose aspect position has only one class (or no example) in the evaluated subset: that
  aspect's AUC is nan, and so is the macro AUC (the paper's metric is a mean over all 4 aspects;
  a mean over fewer would be a different number). Full dev/test splits always have both classes.
- macro P/R/F1 when no group has a gold aspect; a sentiment accuracy with no eligible example.
- P(Pos) + P(Neg) = 0 (both underflowed) is not nan: p_neg is taken as 0.5, i.e. Positive, which
  is what ``nan > 0.5`` gives where the reference divides numpy floats, and an uninformative score
  for the AUC.
Where the official code guards a zero division (SemEval P, R, F; macro F1 with P + R = 0), the
value is 0.0 as there. Sums and divisions are done in the reference's order, so the values are
bit-for-bit those of the reference on the same float64 inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from sklearn.metrics import f1_score, roc_auc_score

from absa_lib.data.datasets import DATASETS, LABELS, OWN, SENTIMENTS, get, group_size, known, none_id
from absa_lib.errors import AbsaError

# Label ids, in the order of absa_lib.data.datasets.LABELS (the published files' order, as the reference's):
SH_NONE, SH_POSITIVE, SH_NEGATIVE = (LABELS["sentihood"].index(x) for x in ("None", "Positive", "Negative"))
SE_POSITIVE, SE_NEGATIVE, SE_CONFLICT, SE_NONE = (LABELS["semeval"].index(x)
                                                   for x in ("positive", "negative", "conflict", "none"))
SE_SENTIMENTS = len(SENTIMENTS["semeval"])   # positive, neutral, negative, conflict come first (4-class task);
                                             # those before conflict are the 3-class task
OWN_DATA = "own"     # in a Metric's datasets: every dataset of your own (absa_lib.data.own_data)


@dataclass(frozen=True)
class Metric:
    """One metric, declared once: everything else (the keys a run records, the tables' columns,
    ``absa summary``, ``absa compare``, the epoch selection) reads :data:`REGISTRY`."""

    key: str                          # its name in the run records (a run's metrics record)
    title: str                        # its column title in the tables
    datasets: tuple[str, ...]         # the datasets it is computed for (OWN_DATA: your own data)
    higher_is_better: bool = True     # its direction
    decimals: int = 1                 # the decimals its column prints (in %)
    table: tuple[str, ...] | None = None   # the datasets whose table shows it (None: all of datasets)
    selects: tuple[str, ...] = ()     # the datasets whose epoch it selects on dev (one per dataset)
    recall: tuple[str, ...] = ()      # the datasets whose aspect recall it is (0: no aspect found)
    compute: Callable | None = None   # compute(dataset, gold, probs) -> float; None: the dataset's function below

    def of(self, dataset: str, field: tuple[str, ...] | None = None) -> bool:
        """Whether ``dataset`` is among ``field`` (default: the datasets it is computed for)."""
        names = self.datasets if field is None else field
        return dataset in names or (OWN_DATA in names and dataset in OWN)


REGISTRY: tuple[Metric, ...] = (
    Metric("aspect_strict_acc", "Strict Acc", ("sentihood", OWN_DATA), selects=("sentihood", OWN_DATA)),
    Metric("aspect_macro_p", "Macro-P", ("sentihood", OWN_DATA), table=(OWN_DATA,)),
    Metric("aspect_macro_r", "Macro-R", ("sentihood", OWN_DATA), table=(OWN_DATA,), recall=("sentihood", OWN_DATA)),
    Metric("aspect_macro_f1", "Macro-F1", ("sentihood", OWN_DATA)),
    Metric("aspect_auc", "Aspect AUC", ("sentihood", OWN_DATA)),
    Metric("sentiment_acc", "Sentiment Acc", ("sentihood", OWN_DATA)),
    Metric("sentiment_auc", "Sentiment AUC", ("sentihood",)),
    Metric("sentiment_macro_f1", "Sentiment Macro-F1", (OWN_DATA,)),
    Metric("aspect_p", "P", ("semeval",), decimals=2),
    Metric("aspect_r", "R", ("semeval",), decimals=2, recall=("semeval",)),
    Metric("aspect_f1", "F1", ("semeval",), decimals=2, selects=("semeval",)),
    Metric("sentiment_acc_binary", "Binary", ("semeval",)),
    Metric("sentiment_acc_3class", "3-class", ("semeval",)),
    Metric("sentiment_acc_4class", "4-class", ("semeval",)),
)
"""Every metric, in the tables' order. A new one is a line here; with ``compute`` it needs no other code."""


def metrics_of(dataset: str) -> tuple[Metric, ...]:
    """The metrics :func:`compute_metrics` returns for ``dataset``, in :data:`REGISTRY` order."""
    return tuple(m for m in REGISTRY if m.of(dataset))


def table_metrics(dataset: str) -> tuple[Metric, ...]:
    """The metrics ``dataset``'s table shows, in :data:`REGISTRY` order."""
    return tuple(m for m in metrics_of(dataset) if m.of(dataset, m.datasets if m.table is None else m.table))


def metric_keys(dataset: str) -> tuple[str, ...]:
    """The keys of the metrics :func:`compute_metrics` returns for ``dataset``."""
    return tuple(m.key for m in metrics_of(dataset))


def selection_metric(dataset: str) -> str:
    """The dev metric that selects the epoch: strict accuracy (SentiHood, your own data) or F1 (SemEval)."""
    return next(m.key for m in metrics_of(dataset) if m.of(dataset, m.selects))


def recall_metric(dataset: str) -> str:
    """The aspect recall of ``dataset`` (0: the run finds no aspect, the All-None answer)."""
    return next(m.key for m in metrics_of(dataset) if m.of(dataset, m.recall))


# The lists callers knew before the registry, derived from it (as at import; the functions above read it live):
METRIC_KEYS = {dataset: metric_keys(dataset) for dataset in ("sentihood", "semeval")}
OWN_METRIC_KEYS = tuple(m.key for m in REGISTRY if OWN_DATA in m.datasets)
SELECTION_METRIC = {dataset: selection_metric(dataset) for dataset in METRIC_KEYS}
NOT_RECORDED = "not recorded by runs written before it existed"
"""Why a run lacks a metric that the registry declares (the tables, ``absa summary``, ``absa compare``)."""
F1_OF_MEANS = "aspect_f1_of_means"    # SemEval Table 2 convention, see aggregate_seeds

NAN = float("nan")


def _validated(dataset: str, gold, probs) -> tuple[np.ndarray, np.ndarray]:
    """Check shapes and values; return gold as int64 (N,) and probs as float64 (N, C)."""
    if not known(dataset):
        raise AbsaError(f"unknown dataset {dataset!r}; expected one of {sorted(DATASETS)} or one registered")
    size, n_classes = group_size(dataset), len(LABELS[dataset])
    gold, probs = np.asarray(gold), np.asarray(probs, dtype=np.float64)
    if gold.ndim != 1 or probs.ndim != 2 or len(gold) != len(probs):
        raise AbsaError(f"{dataset} metrics: gold must be (N,) and probs (N, {n_classes}); got "
                        f"{gold.shape} and {probs.shape}")
    if probs.shape[1] != n_classes:
        raise AbsaError(f"{dataset} metrics: probs has {probs.shape[1]} columns, expected {n_classes} "
                        "(one per label, in LABELS order)")
    if len(gold) == 0 or len(gold) % size:
        raise AbsaError(f"{dataset} metrics: N = {len(gold)} is not a positive multiple of the group size "
                        f"{size}; pass whole groups in canonical dataset order")
    if gold.dtype.kind not in "iu":
        if gold.dtype.kind not in "fb" or not np.all(gold == np.round(gold)):
            raise AbsaError(f"{dataset} metrics: gold must hold integer label ids, got dtype {gold.dtype}")
    gold = gold.astype(np.int64)
    if gold.min() < 0 or gold.max() >= n_classes:
        raise AbsaError(f"{dataset} metrics: gold label ids must be in 0..{n_classes - 1}, "
                        f"found {int(gold.min())}..{int(gold.max())}")
    if not np.all(np.isfinite(probs)):
        row = int(np.argwhere(~np.isfinite(probs))[0, 0])
        raise AbsaError(f"{dataset} metrics: probs row {row} is not finite ({probs[row].tolist()})")
    if np.any(probs < 0):
        row = int(np.argwhere(probs < 0)[0, 0])
        raise AbsaError(f"{dataset} metrics: probs row {row} is negative ({probs[row].tolist()}); "
                        "pass probabilities (softmax), not logits")
    return gold, probs


def _ratio(num: float, den: int) -> float:
    """num / den as a float; nan when there is nothing to count."""
    return num / den if den else NAN


def _macro_auc(y: np.ndarray, score: np.ndarray, position: np.ndarray, size: int) -> float:
    """Unweighted mean over aspect positions of the binary ROC AUC; nan if any is undefined."""
    aucs = []
    for a in range(size):
        y_a, s_a = y[position == a], score[position == a]
        if len(np.unique(y_a)) < 2:     # one class only (or empty): AUC undefined
            return NAN
        aucs.append(roc_auc_score(y_a, s_a))
    return float(np.mean(aucs))


def _wanted(key: str, keys: tuple[str, ...] | None) -> bool:
    return keys is None or key in keys


def _only(keys: tuple[str, ...] | None, values: dict[str, float]) -> dict[str, float]:
    """``values`` restricted to ``keys`` (all of them when None), in the table's order."""
    return values if keys is None else {k: v for k, v in values.items() if k in keys}


def _group_detection(gold: np.ndarray, pred: np.ndarray, size: int, none: int) -> tuple[float, ...]:
    """Strict accuracy and macro P, R, F1 of aspect detection over groups of ``size`` (module docstring)."""
    g, p = gold.reshape(-1, size), pred.reshape(-1, size)         # (groups, size)
    strict_acc = int(np.all(g == p, axis=1).sum()) / len(g)

    # Macro P/R over groups with at least one gold aspect, summed in the reference's order: a sequential
    # cumulative sum adds left to right as its loop does (np.sum would add pairwise), so the floats agree.
    pred_set, gold_set = p != none, g != none
    n_gold, inter = gold_set.sum(axis=1), (pred_set & gold_set).sum(axis=1)
    counted, hit = n_gold > 0, (n_gold > 0) & (inter > 0)
    count = int(counted.sum())
    p_all = float(np.cumsum(inter[hit] / pred_set.sum(axis=1)[hit])[-1]) if hit.any() else 0.0
    r_all = float(np.cumsum(inter[hit] / n_gold[hit])[-1]) if hit.any() else 0.0
    macro_p, macro_r = _ratio(p_all, count), _ratio(r_all, count)
    if count == 0:
        macro_f1 = NAN
    else:
        macro_f1 = 2 * macro_p * macro_r / (macro_p + macro_r) if macro_p + macro_r else 0.0
    return float(strict_acc), float(macro_p), float(macro_r), float(macro_f1)


def sentihood_metrics(gold, probs, keys: tuple[str, ...] | None = None) -> dict[str, float]:
    """Table 1 metrics for SentiHood.

    Args:
        gold: (N,) label ids (None=0, Positive=1, Negative=2), N a multiple of 4, canonical order.
        probs: (N, 3) class probabilities in the same order.
        keys: only these metrics (default: all; a bootstrap that needs no AUC skips their cost).

    Returns:
        ``aspect_strict_acc, aspect_macro_p, aspect_macro_r, aspect_macro_f1, aspect_auc,
        sentiment_acc, sentiment_auc`` as python floats in [0, 1] (or nan, see module docstring).
    """
    gold, probs = _validated("sentihood", gold, probs)
    size = group_size("sentihood")
    strict_acc, macro_p, macro_r, macro_f1 = _group_detection(gold, probs.argmax(axis=1), size, SH_NONE)

    position = np.arange(len(gold)) % size                           # aspect position, LOC1/LOC2 pooled
    aspect_auc = (_macro_auc((gold == SH_NONE).astype(int), probs[:, SH_NONE], position, size)
                  if _wanted("aspect_auc", keys) else NAN)

    has = gold != SH_NONE                                              # sentiment subset
    pos, neg = probs[has, SH_POSITIVE], probs[has, SH_NEGATIVE]
    den = pos + neg
    p_neg = np.divide(neg, den, out=np.full_like(neg, 0.5), where=den > 0)
    is_neg = (gold[has] == SH_NEGATIVE).astype(int)
    sentiment_acc = _ratio(int(((p_neg > 0.5).astype(int) == is_neg).sum()), int(has.sum()))
    sentiment_auc = _macro_auc(is_neg, p_neg, position[has], size) if _wanted("sentiment_auc", keys) else NAN
    return _only(keys, {"aspect_strict_acc": float(strict_acc), "aspect_macro_p": float(macro_p),
                        "aspect_macro_r": float(macro_r), "aspect_macro_f1": float(macro_f1),
                        "aspect_auc": aspect_auc, "sentiment_acc": float(sentiment_acc), "sentiment_auc": sentiment_auc})


def semeval_metrics(gold, probs, keys: tuple[str, ...] | None = None) -> dict[str, float]:
    """Table 2 metrics for SemEval-2014 Task 4 (restaurants).

    Args:
        gold: (N,) label ids (positive=0, neutral=1, negative=2, conflict=3, none=4), N a multiple
            of 5, canonical order.
        probs: (N, 5) class probabilities in the same order.

    Returns:
        ``aspect_p, aspect_r, aspect_f1, sentiment_acc_binary, sentiment_acc_3class,
        sentiment_acc_4class`` as python floats in [0, 1] (or nan, see module docstring).
    """
    gold, probs = _validated("semeval", gold, probs)
    pred = probs.argmax(axis=1)                                    # (N,)
    size = group_size("semeval")
    g_set, s_set = gold.reshape(-1, size) != SE_NONE, pred.reshape(-1, size) != SE_NONE   # (sentences, 5)
    keep = g_set.any(axis=1)                                       # sentences with a gold aspect
    s_all, g_all = int(s_set[keep].sum()), int(g_set[keep].sum())
    sg_all = int((s_set & g_set)[keep].sum())
    p = sg_all / s_all if s_all else 0.0
    r = sg_all / g_all if g_all else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0

    # 4 classes: gold != none; a predicted none becomes the best of the 4 sentiment classes.
    m4 = gold != SE_NONE
    pred4 = np.where(pred == SE_NONE, probs[:, :SE_SENTIMENTS].argmax(axis=1), pred)
    # 3 classes: gold in {pos, neu, neg}; predicted conflict/none -> best of pos/neu/neg.
    m3 = gold < SE_CONFLICT
    pred3 = np.where(pred >= SE_CONFLICT, probs[:, :SE_CONFLICT].argmax(axis=1), pred)
    # binary: gold in {pos, neg}; predicted neu/conflict/none -> pos if P(pos) >= P(neg).
    m2 = (gold == SE_POSITIVE) | (gold == SE_NEGATIVE)
    pred2 = np.where((pred == SE_POSITIVE) | (pred == SE_NEGATIVE), pred,
                     np.where(probs[:, SE_POSITIVE] >= probs[:, SE_NEGATIVE], SE_POSITIVE, SE_NEGATIVE))

    def acc(mask: np.ndarray, remapped: np.ndarray) -> float:
        return _ratio(int((remapped[mask] == gold[mask]).sum()), int(mask.sum()))

    return _only(keys, {"aspect_p": float(p), "aspect_r": float(r), "aspect_f1": float(f),
                        "sentiment_acc_binary": acc(m2, pred2), "sentiment_acc_3class": acc(m3, pred3),
                        "sentiment_acc_4class": acc(m4, pred4)})


def own_metrics(dataset: str, gold, probs, keys: tuple[str, ...] | None = None) -> dict[str, float]:
    """The metrics of your own data (module docstring): SentiHood's aspect metrics, and the sentiment
    accuracy and macro-F1 over the declared sentiments.

    Args:
        dataset: a registered own dataset (:mod:`absa_lib.data.own_data`).
        gold: (N,) label ids (none = 0, then the sentiments), N a multiple of the aspect count.
        probs: (N, C) class probabilities in the same order.
    """
    gold, probs = _validated(dataset, gold, probs)
    size, none = group_size(dataset), none_id(dataset)
    strict_acc, macro_p, macro_r, macro_f1 = _group_detection(gold, probs.argmax(axis=1), size, none)
    position = np.arange(len(gold)) % size                         # aspect position, targets pooled
    aspect_auc = (_macro_auc((gold == none).astype(int), probs[:, none], position, size)
                  if _wanted("aspect_auc", keys) else NAN)
    sentiments = [k for k in range(probs.shape[1]) if k != none]
    has = gold != none
    pred_s = np.array(sentiments)[probs[has][:, sentiments].argmax(axis=1)]    # none renormalised away
    gold_s = gold[has]
    return _only(keys, {"aspect_strict_acc": strict_acc, "aspect_macro_p": macro_p, "aspect_macro_r": macro_r,
            "aspect_macro_f1": macro_f1, "aspect_auc": aspect_auc,
            "sentiment_acc": _ratio(int((pred_s == gold_s).sum()), int(has.sum())),
            "sentiment_macro_f1": float(f1_score(gold_s, pred_s, labels=sentiments, average="macro",
                                                 zero_division=0)) if has.any() else NAN})


BENCHMARK_METRICS = {"sentihood": sentihood_metrics, "semeval": semeval_metrics}
"""Each benchmark's own metrics: the columns of its table in the paper, computed as its authors do."""


def compute_metrics(dataset: str, gold, probs, keys: tuple[str, ...] | None = None) -> dict[str, float]:
    """All metrics of ``dataset``'s table (or only ``keys``): :func:`sentihood_metrics` or
    :func:`semeval_metrics`, or :func:`own_metrics` for your own data."""
    if keys is not None and (unknown := [k for k in keys if k not in metric_keys(dataset)]):
        raise AbsaError(f"metric {unknown[0]!r} is not one of {dataset}'s: {', '.join(metric_keys(dataset))}")
    declared = [m for m in metrics_of(dataset) if m.compute is not None and _wanted(m.key, keys)]
    builtin = None if keys is None else tuple(k for k in keys if k not in {m.key for m in declared})
    if dataset in OWN:
        values = own_metrics(dataset, gold, probs, builtin)
    elif dataset in BENCHMARK_METRICS:
        values = BENCHMARK_METRICS[dataset](gold, probs, builtin)
    else:
        raise AbsaError(f"unknown dataset {dataset!r}; expected one of {sorted(DATASETS)}")
    if declared:                                      # metrics of the registry that bring their computation
        gold, probs = _validated(dataset, gold, probs)
        values |= {m.key: float(m.compute(dataset, gold, probs)) for m in declared}
    return values


def aggregate_seeds(runs: list[dict[str, float]], dataset: str) -> dict:
    """Mean and sample standard deviation (ddof=1) of each metric over runs (seeds).

    For SemEval also ``aspect_f1_of_means`` = 2·mean(P)·mean(R) / (mean(P) + mean(R)), the value
    the paper's Table 2 reports as F1 (its sd is shown as "(-)"; here nan).

    Args:
        runs: one metrics dict per run, with the keys of :func:`metric_keys` of ``dataset`` (extra keys
            are ignored; a key that some run lacks, a metric declared after it was written, is nan).
        dataset: a benchmark, or a dataset of your own registered in this process.

    Returns:
        ``{"n": number of runs, "mean": {metric: float}, "sd": {metric: float}, "not_recorded":
        {metric: indices of the runs that lack it}}``. With a single run every sd is nan; a nan in any
        run, or a run without the metric, makes that metric's mean and sd nan.
    """
    if not known(dataset):
        raise AbsaError(f"unknown dataset {dataset!r}; expected one of {sorted(DATASETS)} or one "
                        "registered")
    if not runs:
        raise AbsaError(f"aggregate_seeds: no runs given for {dataset}; pass at least one metrics dict")
    mean, sd, not_recorded = {}, {}, {}
    for key in metric_keys(dataset):
        missing = [i for i, r in enumerate(runs) if key not in r]
        if missing:                                   # runs written before the metric existed
            mean[key], sd[key], not_recorded[key] = NAN, NAN, missing
            continue
        values = np.array([float(r[key]) for r in runs], dtype=np.float64)
        mean[key] = float(values.mean())
        sd[key] = float(values.std(ddof=1)) if len(values) > 1 else NAN
    if get(dataset).f1_of_means:
        mp, mr = mean["aspect_p"], mean["aspect_r"]
        mean[F1_OF_MEANS] = 2 * mp * mr / (mp + mr) if mp + mr else 0.0     # nan stays nan
        sd[F1_OF_MEANS] = NAN
    return {"n": len(runs), "mean": mean, "sd": sd, "not_recorded": not_recorded}
