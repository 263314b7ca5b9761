"""Figures of the paper (3, 4, 5) and of the companion (label distributions, curves, ablations).

Every function takes plain data (lists, dicts, DataFrames: what the notebooks save under
``results/``) and returns a matplotlib Figure, so the ``render`` profile can redraw every figure
from files without a model; :func:`save_figure` writes it without timestamps. The numbers behind
the figures come from :mod:`absa_lib.reports.figure_data`; nothing here computes them.

* Figure 3 (paper §4.5): gradient sensitivity r_t = ‖∂z_c/∂E_t‖² / max_t′ ‖∂z_c/∂E_t′‖², one row
  of a heat map per context (aspects of one target; targets for one aspect).
* Figure 4 (paper §4.6): histograms of Â, λ_A, A_self and A_quasi over all entries of all heads and
  layers of n = 200 test examples whose gold label is not None; y on a log scale for (a) Â,
  (c) A_self and (d) A_quasi, as in the paper.
* Figure 5 (paper §4.6): for one head of the first layer, the column sums Σ_i M_ij of Â, A_self and
  λ_A ⊙ A_quasi per key token j, each divided by its max |·|. We fix the colour range to [−1, 1]
  with a diverging map so that the sign is visible (the official notebook's range was automatic).
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter

from absa_lib.fileio import atomic_write_bytes
from absa_lib.reports import figure_data
from absa_lib.reports.paper_numbers import DATASET_NAMES, METRIC_TITLES

# Figure 4 panels: (key in the analysis arrays, panel title, log-scale y)
FIG4_PANELS = (
    ("a_hat", r"(a) $\hat{A}$", True),
    ("lambda_a", r"(b) $\lambda_A$", False),
    ("a_self", r"(c) $A_{\mathrm{Self\text{-}Attn}}$", True),
    ("a_quasi", r"(d) $A_{\mathrm{Quasi\text{-}Attn}}$", True),
)


def save_figure(fig, figures_dir: str | Path, stem: str, formats: tuple[str, ...] = ("png", "pdf"),
                dpi: int = 150, close: bool = False) -> list[Path]:
    """Save ``fig`` as ``<stem>.png`` and ``<stem>.pdf`` with no timestamps or software versions.

    PNG metadata ``{"Software": None}``, PDF ``{"Creator": None, "Producer": None,
    "CreationDate": None}`` (pytest-mpl's recipe): the same figure gives the same bytes. ``close``:
    release the figure afterwards (when nothing will show it, e.g. a run's ``curve.png``).
    """
    meta = {"png": {"Software": None}, "pdf": {"Creator": None, "Producer": None, "CreationDate": None},
            "svg": {"Date": None, "Creator": None}}
    paths = []
    for fmt in formats:
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=dpi, metadata=meta.get(fmt), bbox_inches="tight")
        path = Path(figures_dir) / f"{stem}.{fmt}"
        atomic_write_bytes(path, buf.getvalue())
        paths.append(path)
    if close:
        plt.close(fig)
    return paths


def _new(figsize, nrows=1, ncols=1, **kw):
    fig, axes = plt.subplots(nrows, ncols, figsize=figsize, squeeze=False, layout="constrained", **kw)
    return fig, axes


# ----------------------------------------------------------------------------------------------
# 01_data


def label_distribution(counts: pd.DataFrame) -> Figure:
    """Share of each label per split, one panel per dataset.

    Args:
        counts: columns ``dataset``, ``split``, ``label``, ``count`` (one row per combination).
    """
    datasets = list(dict.fromkeys(counts["dataset"]))
    fig, axes = _new((5.2 * len(datasets), 3.4), 1, len(datasets))
    for ax, dataset in zip(axes[0], datasets, strict=True):
        sub = counts[counts["dataset"] == dataset]
        table = sub.pivot_table(index="label", columns="split", values="count", aggfunc="sum", sort=False)
        table = table[[s for s in ("train", "dev", "test") if s in table.columns]]
        share = table / table.sum(axis=0)
        x = np.arange(len(share.index))
        width = 0.8 / max(1, len(share.columns))
        for i, split in enumerate(share.columns):
            bars = ax.bar(x + (i - (len(share.columns) - 1) / 2) * width, share[split], width,
                          label=f"{split} (n={int(table[split].sum()):,})")
            for b, n in zip(bars, table[split], strict=True):
                ax.annotate(f"{int(n):,}", (b.get_x() + b.get_width() / 2, b.get_height()), ha="center",
                            va="bottom", fontsize=6, rotation=90, xytext=(0, 2), textcoords="offset points")
        ax.set_xticks(x, share.index, rotation=20)
        ax.set_yscale("log")
        ax.set_ylim(top=2.0)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{100 * y:g}%"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_ylabel("share of examples (log scale)")
        ax.set_title(DATASET_NAMES.get(dataset, dataset))
        ax.legend(fontsize=7)
    return fig


# ----------------------------------------------------------------------------------------------
# Figure 3


def relevance_heatmap(panels: list[dict]) -> Figure:
    """Figure 3: one heat map per panel (stacked), one row per context.

    Args:
        panels: each ``{"title": str, "tokens": [str], "rows": {context label: [relevance per token]}}``;
            relevance already normalised to max 1 within each row.
    """
    longest = max(len(p["tokens"]) for p in panels)
    heights = [0.6 + 0.4 * len(p["rows"]) for p in panels]
    fig, axes = _new((max(6.0, 0.34 * longest) + 2.5, sum(heights) + 0.9 * len(panels)), len(panels), 1,
                     gridspec_kw={"height_ratios": heights})
    image = None
    for ax, panel in zip(axes[:, 0], panels, strict=True):
        labels = list(panel["rows"])
        values = np.array([panel["rows"][k] for k in labels], dtype=float)     # (contexts, T)
        image = ax.imshow(values, cmap="Blues", vmin=0.0, vmax=1.0, aspect="auto")
        ax.set_xticks(range(len(panel["tokens"])), panel["tokens"], rotation=60, ha="right", fontsize=7)
        ax.set_yticks(range(len(labels)), labels, fontsize=8)
        ax.set_title(panel["title"], fontsize=9)
    if image is not None:
        fig.colorbar(image, ax=list(axes[:, 0]), fraction=0.02, pad=0.01, label="relevance (max = 1)")
    return fig


def explanation_figure(result: dict) -> Figure:
    """Why the model said what it said about one sentence, drawn as Figure 3 draws its panels: one row
    per (target ×) aspect, labelled with the predicted label, each word's relevance scaled to the row's
    largest (the share each word has is in ``result``).

    Args:
        result: :func:`absa_lib.apply.predict_text` with ``explain=True``.
    """
    if "words" not in result:
        raise ValueError("explanation_figure needs predict_text(..., explain=True)")
    rows = {}
    for p in result["predictions"]:
        shares = np.array([np.nan if v is None else v for v in p["explanation"]["relevance"]], dtype=float)
        top = np.nanmax(shares) if np.isfinite(shares).any() else 0.0
        name = " · ".join(x for x in (p.get("location") or p.get("target"), p["aspect"]) if x)
        rows[f"{name} → {p['label']}"] = list(shares / top if top > 0 else shares)
    return relevance_heatmap([{"title": "word relevance for the predicted label (max = 1 per row)",
                               "tokens": result["words"], "rows": rows}])


def explanation_attention_figure(result: dict, none_label: str | None = None) -> Figure:
    """Figure 5 for the predictions of one sentence (``predict_text(..., explain=True, explain_head=...)``):
    per prediction not labelled ``none_label``, three rows (Â, A_self, λ_A ⊙ A_quasi: the attention each
    word receives in the chosen layer and head), stacked, each normalised by its max |·| as Figure 5 is."""
    chosen = [p for p in result["predictions"] if p["label"] != none_label] or result["predictions"][:1]
    if "attention" not in chosen[0].get("explanation", {}):
        raise ValueError("explanation_attention_figure needs predict_text(..., explain=True, explain_head=(layer, head))")
    words, rows = result["words"], {}
    for p in chosen:
        seen = p["explanation"]["attention"]
        name = " · ".join(x for x in (p.get("location") or p.get("target"), p["aspect"]) if x) + f" → {p['label']}"
        for key, label in (("a_hat", r"$\hat{A}$"), ("a_self", r"$A_{\mathrm{self}}$"),
                           ("quasi_term", r"$\lambda_A \odot A_{\mathrm{quasi}}$")):
            rows[f"{name}: {label}"] = [0.0 if v is None else v for v in seen[key]]
    layer, head = chosen[0]["explanation"]["attention"]["layer"], chosen[0]["explanation"]["attention"]["head"]
    return attention_rows(words, rows, f"attention each word receives, layer {layer}, head {head} (Figure 5)")


# ----------------------------------------------------------------------------------------------
# Figure 4


def histograms(hists: dict, n_examples: int | None = None) -> Figure:
    """Figure 4: four histograms from :func:`absa_lib.reports.figure_data.histogram_counts` dicts keyed as in
    ``FIG4_PANELS``."""
    fig, axes = _new((12.0, 2.8), 1, 4)
    for ax, (key, title, log_y) in zip(axes[0], FIG4_PANELS, strict=True):
        h = hists.get(key)
        if h is None:
            ax.set_axis_off()
            ax.set_title(f"{title}: not available", fontsize=9)
            continue
        edges, counts = np.asarray(h["edges"]), np.asarray(h["counts"])
        ax.stairs(counts, edges, fill=True, alpha=0.8)
        if log_y:
            ax.set_yscale("log")
        mean = h["sum"] / h["n"] if h["n"] else math.nan
        ax.set_title(f"{title}  (mean {mean:.3f})", fontsize=9)
        ax.set_xlabel("value")
        ax.set_xlim(edges[0], edges[-1])
    axes[0][0].set_ylabel("count" + (f" (n = {n_examples} examples)" if n_examples else ""))
    return fig


# ----------------------------------------------------------------------------------------------
# Figure 5


def normalise_abs(values) -> np.ndarray:
    """``values / max|values|`` (zeros stay zeros)."""
    v = np.asarray(values, dtype=float)
    m = np.abs(v).max() if v.size else 0.0
    return v / m if m > 0 else v


def attention_rows(tokens: list[str], rows: dict, title: str = "") -> Figure:
    """Figure 5: one heat-map row per matrix (already column-summed over query tokens).

    Args:
        tokens: the T key tokens.
        rows: ``{label: [T values]}``, e.g. ``Â``, ``A_self``, ``λ_A·A_quasi``; each is normalised
            here by its max |·|, which its row label prints, so that a row of tiny values does
            not read as strong as the others.
    """
    labels = list(rows)
    values = np.stack([normalise_abs(rows[k]) for k in labels])              # (R, T)
    scales = [float(np.abs(np.asarray(rows[k], dtype=float)).max(initial=0.0)) for k in labels]
    fig, axes = _new((max(5.0, 0.42 * len(tokens)) + 1.0, 0.9 + 0.45 * len(labels)))
    ax = axes[0][0]
    # seaborn writes each cell's value in black or white by the cell's luminance
    sns.heatmap(values, ax=ax, cmap="RdBu_r", vmin=-1.0, vmax=1.0, annot=True, fmt=".2f",
                annot_kws={"fontsize": 5}, xticklabels=tokens,
                yticklabels=[f"{k}\nmax |·| {m:.3g}" for k, m in zip(labels, scales, strict=True)],
                cbar_kws={"fraction": 0.02, "pad": 0.01, "label": "normalised by the row's max |·|"})
    ax.tick_params(axis="x", labelrotation=70, labelsize=7)
    ax.tick_params(axis="y", labelrotation=0, labelsize=8)
    ax.set_title(title, fontsize=9)
    return fig


# ----------------------------------------------------------------------------------------------
# training curves and ablations


def training_curves(curves: list[dict], metric_names: dict[str, str] | None = None,
                    loss: bool = False, floors: dict[str, tuple[str, float]] | None = None) -> Figure:
    """Dev (dashed) and test (solid) selection metric per epoch, one panel per dataset; with ``loss``
    a last panel with the mean train loss per epoch (one run's ``curve.png``).

    Args:
        curves: each ``{"dataset", "label", "epochs": [int], "dev": [float], "test": [float],
            "metric": str}`` (fractions), optionally ``"seed"``, and ``"train_loss": [float]`` for
            ``loss`` (:func:`absa_lib.reports.figure_data.training_curve`). The curves of one label (one
            system, several seeds) share a colour and one legend entry naming the seeds.
        metric_names: the y-axis name of each metric key (default: the tables' titles,
            :data:`METRIC_TITLES`).
        floors: ``{dataset: (name, value in %)}``, the best trivial predictor on the test set
            (:func:`absa_lib.reports.tables.trivial_floor`), drawn as a dotted line in that dataset's panel.
    """
    datasets = list(dict.fromkeys(c["dataset"] for c in curves)) or ["(no runs)"]
    panels = len(datasets) + int(loss)
    n_legend = max((len({c["label"] for c in curves if c["dataset"] == d}) for d in datasets), default=0)
    fig, axes = _new((5.0 * panels, 3.4 + 0.16 * n_legend), 1, panels)   # room for a one-column legend below
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    color_of = {label: colors[k % len(colors)]            # one colour per system, the same in every panel
                for k, label in enumerate(dict.fromkeys(c["label"] for c in curves))}
    last_epoch = max((e for c in curves for e in c["epochs"]), default=1)
    if loss:
        ax = axes[0][-1]
        for c in curves:
            ax.plot(c["epochs"], c["train_loss"], color=color_of[c["label"]], marker="o", ms=3)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
        ax.set_xlim(0.5, last_epoch + 0.5)
        ax.set(xlabel="epoch", ylabel="train loss", title="mean train loss per epoch")
    for ax, dataset in zip(axes[0][:len(datasets)], datasets, strict=True):   # the loss panel aside
        mine = [c for c in curves if c["dataset"] == dataset]
        labels = list(dict.fromkeys(c["label"] for c in mine))
        for label in labels:                      # one legend entry per system, naming its seeds
            runs = sorted((c for c in mine if c["label"] == label), key=lambda c: c.get("seed") or 0)
            seeds = [str(c["seed"]) for c in runs if c.get("seed") is not None]
            legend = f"{label} (seed{'s' if len(seeds) > 1 else ''} {', '.join(seeds)})" if seeds else label
            color = color_of[label]
            for i, c in enumerate(runs):
                ax.plot(c["epochs"], 100 * np.asarray(c["test"]), color=color, marker="o", ms=3,
                        label=legend if i == 0 else None)
                ax.plot(c["epochs"], 100 * np.asarray(c["dev"]), color=color, ls="--", marker="x", ms=3)
        if dataset in (floors or {}):
            name, value = floors[dataset]
            ax.axhline(value, color="0.4", ls=":", lw=1, label=f"{name}, test: {value:.1f}")
        metric = mine[0]["metric"] if mine else ""
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
        ax.set_xlim(0.5, last_epoch + 0.5)
        ax.set(xlabel="epoch", ylabel=f"{(metric_names or METRIC_TITLES).get(metric, metric)} (%)",
               title=f"{DATASET_NAMES.get(dataset, dataset)}: test (solid), dev (dashed)")
        if mine:
            ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1)  # below: never over a point
    return fig


def ablation_bars(df: pd.DataFrame, metric: str, title: str = "", floor: tuple[str, float] | None = None) -> Figure:
    """Horizontal bars (mean ± sd over seeds) of one metric per ablation variant.

    Args:
        df: from :func:`absa_lib.reports.variant_tables.ablation_table` (columns ``variant``, ``selection``,
            ``<metric>``, ``<metric>_sd``, and ``n_seeds`` when known).
        floor: ``(name, value)`` of the best trivial predictor on this metric, drawn as a dashed line.
    """
    budgets = df["budget"].tolist() if "budget" in df else [""] * len(df)
    several = len({b for b in budgets if b}) > 1           # then each bar names its budget
    labels = [f"{v} [{s}]" + (f" ({b})" if several and b else "")
              for v, s, b in zip(df["variant"], df["selection"], budgets, strict=True)]
    means = df[metric].to_numpy(dtype=float)
    sds = np.nan_to_num(df[f"{metric}_sd"].to_numpy(dtype=float))
    seeds = df["n_seeds"].tolist() if "n_seeds" in df else [None] * len(df)
    fig, axes = _new((4.5 + 0.07 * max(map(len, labels), default=0), 0.45 * len(labels) + 1.2))
    ax = axes[0][0]
    y = np.arange(len(labels))[::-1]
    ax.barh(y, np.nan_to_num(means), xerr=sds, color="tab:blue", alpha=0.8, capsize=3)
    if floor is not None:
        ax.axvline(floor[1], color="0.3", linestyle="--", linewidth=1)
        ax.text(floor[1], y[0] + 0.6, f" {floor[0]}: {floor[1]:.1f}", fontsize=7, color="0.3", va="bottom")
    ax.set_yticks(y, labels, fontsize=8)
    ax.set_xlabel(f"{METRIC_TITLES.get(metric, metric)} (%), mean ± sd over seeds")
    ax.set_title(title, fontsize=9)
    finite = list(means[~np.isnan(means)]) + ([floor[1]] if floor is not None else [])
    if finite:
        lo = max(0.0, float(min(finite) - sds.max(initial=0) - 5))
        ax.set_xlim(lo, min(100.0, float(max(finite) + sds.max(initial=0) + 12)))
        ax.set_ylim(-0.7, len(labels) - 0.1 + (0.8 if floor is not None else 0))
    left = ax.get_xlim()[0]
    for yi, m, sd, n in zip(y, means, sds, seeds, strict=True):   # the value after the bar, the seed count
        if math.isnan(m):                                 # no bar: say why, inside the axes
            ax.text(left, yi, "  not run" if n == 0 else "  n/a", va="center", fontsize=7, color="0.3")
        else:
            ax.text(m + sd, yi, f" {m:.1f}" + (f" (n={int(n)})" if n else ""), va="center", fontsize=7)
    return fig


SUMMARY_TITLES = {"aspect_strict_acc": "aspect strict accuracy", "sentiment_acc": "sentiment accuracy",
                  "aspect_f1": "aspect F1", "sentiment_acc_4class": "sentiment accuracy, 4-class"}


def summary_figure(data: pd.DataFrame) -> Figure:
    """Where the companion stands against the paper, one panel per table and metric
    (:func:`absa_lib.reports.figure_data.summary_data`): per model row and budget a bar at the mean
    over seeds with each seed as a dot, the paper's value as a black tick, the best trivial row as a
    dashed line. Rows in the paper's order; budgets in the order found, each its own colour."""
    panels = list(dict.fromkeys(zip(data["dataset"], data["metric"], strict=True)))
    datasets = list(dict.fromkeys(data["dataset"]))
    budgets = [b for b in dict.fromkeys(data["budget"]) if isinstance(b, str)]
    colours = dict(zip(budgets, ("tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown"), strict=False))
    ncols = max(sum(d == ds for d, _ in panels) for ds in datasets)
    models = {ds: [m for m in dict.fromkeys(data.loc[data["dataset"] == ds, "model"]) if isinstance(m, str)]
              for ds in datasets}
    height = sum(0.42 * len(models[ds]) + 1.0 for ds in datasets)
    fig, axes = _new((5.2 * ncols, height), nrows=len(datasets), ncols=ncols,
                     gridspec_kw={"height_ratios": [len(models[ds]) + 1.5 for ds in datasets]})
    step = 0.8 / max(len(budgets), 1)
    for r, ds in enumerate(datasets):
        for c, metric in enumerate(m for d, m in panels if d == ds):
            ax, part = axes[r][c], data[(data["dataset"] == ds) & (data["metric"] == metric)]
            names = models[ds]
            for i, model in enumerate(names):
                y0 = len(names) - 1 - i
                for j, budget in enumerate(budgets):
                    rows = part[(part["model"] == model) & (part["budget"] == budget)]
                    if rows.empty:
                        continue
                    y = y0 + 0.4 - step * (j + 0.5)
                    mean = rows.loc[rows["kind"] == "mean", "value"].iloc[0]
                    ax.barh(y, mean, height=step * 0.9, color=colours[budget], alpha=0.35)
                    seeds = rows.loc[rows["kind"] == "seed", "value"]
                    ax.scatter(seeds, [y] * len(seeds), s=14, color=colours[budget], zorder=3, linewidths=0)
                paper = part.loc[(part["model"] == model) & (part["kind"] == "paper"), "value"]
                if len(paper) and not math.isnan(paper.iloc[0]):
                    ax.vlines(paper.iloc[0], y0 - 0.42, y0 + 0.42, color="black", linewidth=2, zorder=4)
            floor = part[part["kind"] == "floor"]
            values = part["value"].dropna().tolist()
            if len(floor):
                ax.axvline(floor["value"].iloc[0], color="0.3", linestyle="--", linewidth=1)
                ax.text(floor["value"].iloc[0], len(names) - 0.45, f" {floor['label'].iloc[0]}", fontsize=7,
                        color="0.3", va="bottom")
            if values:
                ax.set_xlim(max(0.0, min(values) - 4), min(100.0, max(values) + 4))
            ax.set_ylim(-0.6, len(names) - 0.1)
            ax.set_yticks(range(len(names))[::-1], names, fontsize=8)
            title = SUMMARY_TITLES.get(metric, METRIC_TITLES.get(metric, metric))
            ax.set_xlabel(f"{title} (%), test set, dev-selected epoch", fontsize=8)
            ax.set_title(f"{DATASET_NAMES.get(ds, ds)}: {title}", fontsize=9)
            ax.tick_params(axis="x", labelsize=8)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours[b], alpha=0.35) for b in budgets]
    handles += [plt.Line2D([], [], marker="o", linestyle="", color="0.3", markersize=4),
                plt.Line2D([], [], color="black", linewidth=2), plt.Line2D([], [], color="0.3", linestyle="--")]
    fig.legend(handles, [f"ours: {b} (mean over seeds)" for b in budgets] + ["one seed", "the paper", "trivial floor"],
               loc="outside lower center", ncols=min(len(handles), 3), fontsize=8, frameon=False)
    return fig


VERDICT_COLOURS = {"A better": "tab:green", "B better": "tab:red"}


def claims_figure(table: pd.DataFrame) -> Figure:
    """The paper's claims measured (:func:`absa_lib.reports.claims.claims_table`), one panel per budget
    (the paper's first), each on its own linear axis of A − B in points: per claim and dataset each seed
    a dot, the mean a diamond (filled green or red only where the verdict survives the family's
    correction), its 95% interval over seeds a bar, the paper's gain a black tick, the minimum
    detectable difference written at the right; rows with a training failure named, not drawn."""
    budgets = list(dict.fromkeys(table["budget"]))
    counts = [int(sum(table["budget"] == b)) for b in budgets] or [1]
    fig, axes = _new((10, 0.27 * sum(counts) + 1.1 * len(counts) + 0.9), nrows=len(counts),
                     gridspec_kw={"height_ratios": counts})
    for ax, budget in zip((row[0] for row in axes), budgets, strict=False):
        part = table[table["budget"] == budget].reset_index(drop=True)
        failed = part["verdict"].str.startswith("training failure")
        drawn = part[~failed]
        values = [float(d) for d in " ".join(drawn["differences"]).split()] + [*drawn["seed_low"], *drawn["seed_high"],
                                                                               *drawn["paper_gain"].dropna(), 0.0]
        low, high = min(values), max(values)
        pad = 0.08 * (high - low or 1.0)
        ax.set_xlim(low - pad, high + pad)
        ax.axvline(0, color="0.6", linewidth=0.8)
        y = np.arange(len(part))[::-1]
        for yi, r in zip(y, part.itertuples(), strict=True):
            if r.verdict.startswith("training failure"):
                ax.text(0.5, yi, f"{r.verdict}: not compared", transform=ax.get_yaxis_transform(), ha="center",
                        va="center", fontsize=6.5, color="0.4", style="italic")
                continue
            seeds = [float(d) for d in r.differences.split()]
            ax.hlines(yi, r.seed_low, r.seed_high, color="0.35", linewidth=1.2, zorder=2)
            ax.scatter(seeds, [yi] * len(seeds), s=10, color="0.55", zorder=2, linewidths=0)
            colour = VERDICT_COLOURS.get(r.verdict)
            ax.scatter([r.difference], [yi], marker="D", s=28, zorder=3, edgecolors="0.2", linewidths=0.8,
                       color=colour or "white")
            if not math.isnan(r.paper_gain):
                ax.vlines(r.paper_gain, yi - 0.35, yi + 0.35, color="black", linewidth=1.8, zorder=4)
            ax.text(1.01, yi, f"{r.min_detectable:.1f}", transform=ax.get_yaxis_transform(), va="center", fontsize=6.5)
        ax.text(1.01, len(part) - 0.3, "MDD", transform=ax.get_yaxis_transform(), va="bottom", fontsize=6.5,
                weight="bold")
        ax.set_yticks(y, [f"{r.claim} · {DATASET_NAMES.get(r.dataset, r.dataset)}" for r in part.itertuples()],
                      fontsize=7)
        ax.set_ylim(-0.7, len(part) - 0.3)
        metric = " / ".join(dict.fromkeys(METRIC_TITLES.get(m, m) for m in part["metric"]))
        ax.set_xlabel(f"A − B, points of the selection metric ({metric}; test, dev-selected epoch); linear axis\n"
                      "MDD (right): the true gain the verdict rule would find 80% of the time with these seeds, "
                      "on average over their spread's uncertainty", fontsize=7.5)
        kind = "the paper's budget: its claims" if part["paper_budget"].iloc[0] else "early training, not the paper's claims"
        ax.set_title(f"{budget}: {kind} (Holm over the {int((~failed).sum())} comparisons)", fontsize=9, loc="left")
        ax.tick_params(axis="x", labelsize=7)
    handles = [plt.Line2D([], [], marker="D", linestyle="", color=c, markeredgecolor="0.2", markersize=5)
               for c in VERDICT_COLOURS.values()]
    handles += [plt.Line2D([], [], marker="D", linestyle="", color="white", markeredgecolor="0.2", markersize=5),
                plt.Line2D([], [], marker="o", linestyle="", color="0.55", markersize=3),
                plt.Line2D([], [], color="0.35", linewidth=1.2), plt.Line2D([], [], color="black", linewidth=1.8)]
    fig.legend(handles, ["A better", "B better", "undecided (mean)", "one seed", "95% interval over seeds",
                         "the paper's gain"], loc="outside lower center", ncols=6, fontsize=7, frameon=False)
    return fig


def save_run_curve(run) -> Path:
    """A finished run's ``curve.png``: its selection metric on dev and test, and its train loss, per
    epoch (drawn once; ``absa train``, the grid and the notebooks call this after training)."""
    path = run.folder.curve
    if not path.is_file():
        config = run.config
        curve = figure_data.training_curve(run.metrics, config.dataset, f"{config.model} ({config.aux})", loss=True)
        save_figure(training_curves([curve], loss=True), run.path, "curve", formats=("png",), close=True)
    return path
