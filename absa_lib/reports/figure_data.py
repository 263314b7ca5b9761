"""The numbers behind every figure, computed from trained models and saved as JSON; no drawing here.

The notebooks save what these functions return under ``results/analysis/`` so that the
``render`` profile redraws the figures (:mod:`absa_lib.reports.plots`, which draws only) without a model.
The example sentences of Figures 3 and 5 are chosen in notebook 05.

* Figure 3 (:func:`relevance_data`): gradient sensitivity r_t = ‖∂z_c/∂E_t‖² / max_t′ ‖∂z_c/∂E_t′‖²
  (:func:`absa_lib.evaluation.analysis.gradient_sensitivity`) of the same test sentence under different
  contexts, with c the gold label of each (target, aspect), as the paper's examples (which the
  model classified correctly; we record the prediction beside it).
* Figure 4 (:func:`component_histograms`): histograms of Â, λ_A, A_self, the raw A_quasi (and the
  quasi term λ_A ⊙ A_quasi the official notebook pooled) over every entry of every head and layer of
  n test examples whose gold label is not None (padding excluded).
* Figure 5 (:func:`attention_example`): per head of one layer, the column sums Σ_i M_ij over
  query rows i of Â, A_self and λ_A ⊙ A_quasi, one value per key token j.
* Notebook 06 (:func:`attention_comparison`): where each attention system looks on one sentence.
* Notebooks 02/03 (:func:`component_table`): shape and range of every attention component;
  training curves (:func:`training_curve`, :func:`curves_from_runs`) from run records.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from absa_lib.data import datasets as D
from absa_lib.data.features import encode_batch
from absa_lib.errors import AbsaError
from absa_lib.evaluation.analysis import (
    extract_components,
    gradient_sensitivity,
    predicted_ids,
    token_attention,
)
from absa_lib.reports import tables
from absa_lib.reports.tables import budget_key, budget_labels
from absa_lib.training.records import RunMetrics

# Figure 4: the x-range of each component's bins (the quasi term λ_A ⊙ A_quasi is kept too)
HIST_RANGES = {"a_hat": (-1.0, 2.0), "lambda_a": (-1.0, 1.0), "a_self": (0.0, 1.0), "a_quasi": (0.0, 1.0),
               "quasi_term": (-1.0, 1.0)}
HIST_KEYS = tuple(HIST_RANGES)
FIG4_BINS = 50


def find_example(examples: list, key: tuple):
    """The example with ``key`` (SentiHood: (sentence_id, target, aspect))."""
    for ex in examples:
        if ex.key == key:
            return ex
    raise AbsaError(f"no example with key {key} in the {examples[0].dataset if examples else '?'} "
                    f"{examples[0].split if examples else ''} split; check the sentence id")


def relevance_data(model, tokenizer, examples: list, panels: list[dict], aux: str = "none",
                   max_length: int = 128) -> list[dict]:
    """Figure 3 panels: relevance of each sentence token under each context (sentence part only).

    Args:
        panels: each ``{"title", "sentence_id", "contexts": [(target, aspect), ...]}``.

    Returns:
        Per panel ``{"title", "sentence_id", "text", "tokens", "rows": {label: [r_t]}, "contexts":
        [{"target", "aspect", "gold", "predicted"}]}``; r_t in [0, 1] over ``[CLS] sentence [SEP]``
        (the auxiliary sentence, if any, is dropped after the gradient is taken).
    """
    labels = D.LABELS[examples[0].dataset]
    out = []
    for panel in panels:
        exs = [find_example(examples, (panel["sentence_id"], t, a)) for t, a in panel["contexts"]]
        batch, tokens = encode_batch(exs, aux, tokenizer, max_length)
        rel = gradient_sensitivity(model, batch, torch.tensor([ex.label_id for ex in exs]))   # (B, T)
        pred = predicted_ids(model, batch)
        keep = (batch["token_type_ids"][0] == 0) & (batch["attention_mask"][0] == 1)        # (T,)
        n = int(keep.sum())
        rows, contexts = {}, []
        for i, ex in enumerate(exs):
            r = rel[i, :n].numpy()
            r = r / r.max() if r.max() > 0 else r                  # max 1 within the sentence part
            rows[f"{ex.target} · {ex.aspect} ({ex.label})"] = [round(float(x), 6) for x in r]
            contexts.append({"target": ex.target, "aspect": ex.aspect, "gold": ex.label, "predicted": labels[pred[i]]})
        out.append({"title": panel["title"], "sentence_id": panel["sentence_id"], "text": exs[0].text,
                    "tokens": tokens[0][:n], "rows": rows, "contexts": contexts})
    return out


def histogram_counts(values: np.ndarray, lo: float, hi: float, bins: int = FIG4_BINS) -> dict:
    """Counts of ``values`` in ``bins`` equal bins over [lo, hi], plus what fell outside.

    Returns:
        ``{"edges": [bins+1], "counts": [bins], "below": int, "above": int, "n": int, "min", "max",
        "sum", "negative"}`` (JSON-serialisable; sums and counts, so adding two such dicts pools the
        data; the mean is ``sum / n``).
    """
    values = np.asarray(values, dtype=np.float64).ravel()
    edges = np.linspace(lo, hi, bins + 1)
    counts, _ = np.histogram(values, bins=edges)
    return {"edges": edges.tolist(), "counts": counts.astype(int).tolist(),
            "below": int((values < lo).sum()), "above": int((values > hi).sum()), "n": int(values.size),
            "min": float(values.min()) if values.size else math.nan,
            "max": float(values.max()) if values.size else math.nan,
            "sum": float(values.sum()), "negative": int((values < 0).sum())}


def merge_histograms(a: dict | None, b: dict) -> dict:
    """Pool two :func:`histogram_counts` results over the same bins."""
    if a is None:
        return dict(b)
    if a["edges"] != b["edges"]:
        raise ValueError("cannot merge histograms with different bins")
    return {"edges": a["edges"], "counts": [x + y for x, y in zip(a["counts"], b["counts"], strict=True)],
            "below": a["below"] + b["below"], "above": a["above"] + b["above"], "n": a["n"] + b["n"],
            "min": min(a["min"], b["min"]), "max": max(a["max"], b["max"]), "sum": a["sum"] + b["sum"],
            "negative": a["negative"] + b["negative"]}


def histogram_summary(hists: dict) -> pd.DataFrame:
    """Figure 4 in numbers: entries, mean, range, share negative, share in [0.25, 0.5) per component."""
    rows = []
    for key, h in hists.items():
        if h is None:
            continue
        edges, counts = h["edges"], h["counts"]
        mid = sum(c for lo, hi, c in zip(edges[:-1], edges[1:], counts, strict=True)
                  if lo >= 0.25 - 1e-9 and hi <= 0.5 + 1e-9)
        rows.append({"component": key, "entries": h["n"], "mean": h["sum"] / h["n"] if h["n"] else float("nan"),
                     "min": h["min"], "max": h["max"], "share negative": h["negative"] / h["n"] if h["n"] else 0.0,
                     "share in [0.25, 0.5)": mid / h["n"] if h["n"] else 0.0})
    return pd.DataFrame(rows)


def share_near(h: dict, centre: float = 0.5, width: float = 0.02) -> float:
    """The share of a histogram's entries in [centre − width, centre + width), from the bins wholly inside
    (Figure 4's A_quasi near σ(0) = ½: the README's "76% of A_quasi lies within 0.02 of ½")."""
    edges, counts = h["edges"], h["counts"]
    inside = sum(c for lo, hi, c in zip(edges[:-1], edges[1:], counts, strict=True)
                 if lo >= centre - width - 1e-9 and hi <= centre + width + 1e-9)
    return inside / h["n"] if h["n"] else 0.0


def per_layer_summary(fig4: dict) -> pd.DataFrame | None:
    """Figure 4's per-layer rows as a table (None for arrays saved before they were recorded)."""
    rows = fig4.get("per_layer")
    return pd.DataFrame(rows).set_index("layer") if rows else None


def component_histograms(model, tokenizer, examples: list, n: int = 200, seed: int = 0, aux: str = "none",
                         max_length: int = 128, batch_size: int = 16) -> dict:
    """Figure 4: pooled histograms of the QACG components over ``n`` non-None test examples.

    Examples are drawn uniformly without replacement (``seed``) from those whose gold label is not
    None. Every entry of every head and layer counts, except padded rows/columns.

    Returns:
        ``{"n_examples", "seed", "keys": [example keys], "layers", "heads", "histograms": {key:
        histogram_counts dict}, "per_layer": [...]}`` for keys ``a_hat``, ``lambda_a``, ``a_self``,
        ``a_quasi``, ``quasi_term``. ``per_layer`` has one row per layer: the mean of A_quasi, the
        mean over query rows of its standard deviation across key tokens (0: the quasi-attention
        does not depend on the key) and the mean |λ_A| (arrays saved before it existed lack it).
    """
    none = D.NONE_LABEL[examples[0].dataset]
    pool = [ex for ex in examples if ex.label != none]
    rng = np.random.default_rng(seed)
    chosen = [pool[i] for i in sorted(rng.choice(len(pool), size=min(n, len(pool)), replace=False))]
    hists: dict = {k: None for k in HIST_KEYS}
    layers = heads = 0
    sums: dict = {}                                     # layer -> running sums for per_layer
    for start in range(0, len(chosen), batch_size):
        batch, _ = encode_batch(chosen[start:start + batch_size], aux, tokenizer, max_length)
        comps = extract_components(model, batch)
        if "a_quasi" not in comps[0]:
            raise AbsaError("Figure 4 needs a qacg-bert model with the quasi term on (quasi=True)")
        valid = batch["attention_mask"].bool()                                  # (B, T)
        pair = valid[:, None, :, None] & valid[:, None, None, :]                # (B, 1, T, T)
        row = valid[:, None, :, None]                                           # (B, 1, T, 1)
        layers, heads = len(comps), comps[0]["a_hat"].shape[1]
        for li, layer in enumerate(comps):
            values = {k: layer[k].float().cpu() for k in ("a_hat", "lambda_a", "a_self", "a_quasi")}
            values["quasi_term"] = values["lambda_a"] * values["a_quasi"]
            _add_layer_sums(sums.setdefault(li, {}), values, valid)
            for key in HIST_KEYS:
                v = values[key]
                m = (row if key == "lambda_a" else pair).expand_as(v)
                lo, hi = HIST_RANGES[key]
                hists[key] = merge_histograms(hists[key], histogram_counts(v[m].numpy(), lo, hi, FIG4_BINS))
    per_layer = [{"layer": li, "a_quasi_mean": t["quasi"] / t["pairs"], "a_quasi_key_sd": t["key_sd"] / t["rows"],
                  "lambda_a_abs_mean": t["lambda_abs"] / t["rows"]} for li, t in sorted(sums.items())]
    return {"n_examples": len(chosen), "seed": seed, "aux": aux, "layers": layers, "heads": heads,
            "keys": [list(ex.key) for ex in chosen], "histograms": hists, "per_layer": per_layer}


def _add_layer_sums(sums: dict, values: dict, valid: torch.Tensor) -> None:
    """Add one batch of one layer to ``sums``: Σ A_quasi over real (query, key) pairs, Σ over real
    query rows of A_quasi's standard deviation across the real keys, Σ |λ_A| over real rows."""
    a_quasi, keys = values["a_quasi"], valid[:, None, None, :].float()          # (B, H, T, T), (B, 1, 1, T)
    rows = valid[:, None, :].expand(a_quasi.shape[:3])                         # (B, H, T)
    n_keys = keys.sum(-1).expand(rows.shape)                                    # (B, H, T)
    row_sum = (a_quasi * keys).sum(-1)                                          # (B, H, T)
    sd = (((a_quasi - (row_sum / n_keys)[..., None]) ** 2 * keys).sum(-1) / n_keys).sqrt()   # (B, H, T)
    for key, value in (("quasi", row_sum[rows].sum()), ("pairs", n_keys[rows].sum()), ("key_sd", sd[rows].sum()),
                       ("lambda_abs", values["lambda_a"][..., 0].abs()[rows].sum()), ("rows", rows.sum())):
        sums[key] = sums.get(key, 0.0) + float(value)


def attention_example(model, tokenizer, example, aux: str = "none", max_length: int = 128, layer: int = 0) -> dict:
    """Figure 5: column sums over query rows of Â, A_self and λ_A ⊙ A_quasi, for every head of ``layer``.

    Returns:
        ``{"sentence_id", "target", "aspect", "gold", "predicted", "text", "layer", "tokens",
        "a_hat", "a_self", "quasi_term": [H][T], "head": h}`` where ``h`` is the head whose quasi
        term has the most negative column sum (the paper shows "one of the heads"; we say which
        and keep all of them).
    """
    batch, tokens = encode_batch([example], aux, tokenizer, max_length)
    comps = extract_components(model, batch)
    if not 0 <= layer < len(comps) or "a_quasi" not in comps[layer]:
        raise AbsaError(f"layer {layer}: need a qacg-bert layer with the quasi term (model has {len(comps)} layers)")
    c = {k: v[0].float().cpu() for k, v in comps[layer].items()}               # (H, T, T) / (H, T, 1)
    sums = {"a_hat": c["a_hat"].sum(-2), "a_self": c["a_self"].sum(-2),
            "quasi_term": (c["lambda_a"] * c["a_quasi"]).sum(-2)}               # (H, T) each
    head = int(sums["quasi_term"].min(dim=-1).values.argmin())
    labels = D.LABELS[example.dataset]
    return {"sentence_id": example.sentence_id, "target": example.target, "aspect": example.aspect,
            "gold": example.label, "predicted": labels[predicted_ids(model, batch)[0]], "text": example.text,
            "layer": layer, "tokens": tokens[0], "head": head,
            **{k: [[round(float(x), 6) for x in h] for h in v] for k, v in sums.items()}}


def figure5_rows(data: dict, head: int | None = None) -> dict:
    """The three rows of Figure 5 for one head (default: the one recorded in ``data``)."""
    h = data["head"] if head is None else head
    return {r"$\hat{A}$": data["a_hat"][h], r"$A_{\mathrm{self}}$": data["a_self"][h],
            r"$\lambda_A \odot A_{\mathrm{quasi}}$": data["quasi_term"][h]}


def attention_comparison(models: dict, tokenizer, example, max_length: int = 128) -> dict:
    """Per-token attention of each model on one example (sentence alone, context id).

    Args:
        models: ``{label: trained model}``, all reading the sentence alone (``aux=none``) with the
            same tokenizer, so their tokens line up.
        example: an :class:`absa_lib.data.datasets.Example`.

    Returns:
        ``{"sentence_id", "target", "aspect", "gold", "text", "tokens", "rows": {label: [T]},
        "predicted": {label: label name}}``.
    """
    batch, tokens = encode_batch([example], "none", tokenizer, max_length)
    rows, predicted = {}, {}
    for label, model in models.items():
        rows[label] = [round(float(x), 6) for x in token_attention(model, batch)[0]]
        predicted[label] = D.LABELS[example.dataset][predicted_ids(model, batch)[0]]
    return {"sentence_id": example.sentence_id, "target": example.target, "aspect": example.aspect,
            "gold": example.label, "text": example.text, "tokens": tokens[0], "rows": rows, "predicted": predicted}


def component_table(components: list[dict]) -> pd.DataFrame:
    """Shape and range of every attention component of every layer (from ``extract_components``): min
    and max to two decimals, the mean to three. The digits beyond differ between CPU kernels (a sum's
    order: up to 6e-5 by the sixth layer of notebook 03's model, and a sigmoid's tail of 1e-17), and
    the table should read the same on every machine; three significant digits did not (a mean of
    -0.006465 printed -0.00647 with torch's AVX2 and AVX-512 kernels, -0.00646 with its plain ones)."""
    rows = []
    for layer, comps in enumerate(components):
        for key, v in comps.items():
            v = v.float()
            rows.append({"layer": layer, "component": key, "shape": tuple(v.shape),      # + 0.0: no -0.0
                         "min": round(float(v.min()), 2) + 0.0, "max": round(float(v.max()), 2) + 0.0,
                         "mean": round(float(v.mean()), 3) + 0.0})
    return pd.DataFrame(rows)


def training_curve(metrics: RunMetrics, dataset: str, label: str, loss: bool = False, seed: int | None = None) -> dict:
    """One run's curve for :func:`absa_lib.reports.plots.training_curves` from its metrics record:
    the selection metric on dev and test per epoch (and the mean train loss with ``loss``)."""
    metric, rows = metrics.selection_metric, metrics.epochs
    curve = {"dataset": dataset, "label": label, "seed": seed, "metric": metric, "epochs": [r["epoch"] for r in rows],
             "dev": [r["dev"][metric] for r in rows], "test": [r["test"][metric] for r in rows]}
    if loss:
        curve["train_loss"] = [r["train_loss"] for r in rows]
    return curve


def curves_from_runs(runs: list, labels: list[str] | None = None) -> list[dict]:
    """Per-run curves for :func:`absa_lib.reports.plots.training_curves` from run records, labelled by
    system (model and input, or ``labels[i]`` for ``runs[i]``, e.g. an ablation's row) so that the
    seeds of one system share a colour; when the runs span several budgets, the label names the
    budget too (``minilm, 25 epochs``)."""

    if labels is None:
        labels = [f"{run.config.model} {run.config.aux}" for run in runs]
    if len(labels) != len(runs):
        raise ValueError(f"curves_from_runs: {len(labels)} labels for {len(runs)} runs")
    names = budget_labels([run.config for run in runs])
    several = len(names) > 1
    return [training_curve(run.metrics, run.config.dataset,
                           label + (f" ({names[budget_key(run.config)]})" if several else ""),
                           seed=run.config.seed)
            for run, label in zip(runs, labels, strict=True)]


# The summary figure's metrics: the selection metric of each table and one polarity metric
SUMMARY_METRICS = {"sentihood": ("aspect_strict_acc", "sentiment_acc"),
                   "semeval": ("aspect_f1", "sentiment_acc_4class")}


def summary_data(dataset: str, runs: list, trivial: dict[str, dict]) -> pd.DataFrame:
    """The numbers of the summary figure for one table: for each row of the paper's table that our
    runs reproduce, and each budget, every seed's test score at its dev-selected epoch (``kind``
    ``seed``), their mean as the table prints it (``mean``; SemEval F1 from the mean P and R) and
    the paper's value (``paper``); and per metric the best trivial row (``floor``). Columns:
    ``dataset, model, budget, kind, metric, value`` (%), ``seed`` and ``label`` (the floor's name)."""
    table = tables.build_table(dataset, runs, protocols=("dev_best",), trivial=trivial)
    by_id = {r.run_id: r for r in runs}
    records = []
    for _, row in table[table["source"] == tables.OURS].iterrows():
        chosen = [by_id[i] for i in row["run_ids"].split()]
        for metric in SUMMARY_METRICS[dataset]:
            base = {"dataset": dataset, "model": row["model"], "budget": row["budget"], "metric": metric}
            records.append({**base, "kind": "mean", "value": row[metric]})
            records.append({**base, "kind": "paper", "value": row[f"{metric}_paper"]})
            records += [{**base, "kind": "seed", "seed": r.config.seed,
                         "value": 100.0 * r.selected("dev_best")["test"][metric]} for r in chosen]
    floors = table[table["source"] == tables.TRIVIAL]
    for metric in SUMMARY_METRICS[dataset]:
        best = floors.loc[floors[metric].idxmax()] if len(floors) else None
        if best is not None:
            records.append({"dataset": dataset, "metric": metric, "kind": "floor", "value": best[metric],
                            "label": best["model"].removesuffix(" (trivial)")})
    return pd.DataFrame.from_records(records, columns=["dataset", "model", "budget", "kind", "metric", "value",
                                                       "seed", "label"])
