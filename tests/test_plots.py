"""Figures: deterministic bytes, histogram bookkeeping, and each figure drawn from plain data."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from conftest import typed_run

from absa_lib.reports import plots
from absa_lib.reports.figure_data import HIST_RANGES, histogram_counts, merge_histograms, training_curve


def _fig():
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([0, 1, 2], [1, 0, 2], label="x")
    ax.set_title("déterministe")
    ax.legend()
    return fig


def test_save_figure_gives_identical_bytes_without_metadata(tmp_path):
    fig = _fig()
    a = plots.save_figure(fig, tmp_path / "a", "fig")
    b = plots.save_figure(fig, tmp_path / "b", "fig")
    plt.close(fig)
    assert [p.name for p in a] == ["fig.png", "fig.pdf"]
    for x, y in zip(a, b, strict=True):
        assert x.read_bytes() == y.read_bytes()
    pdf = a[1].read_bytes()
    assert b"CreationDate" not in pdf and b"Producer" not in pdf and b"matplotlib" not in pdf.lower()
    assert b"Software" not in a[0].read_bytes() and a[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_histogram_counts_and_merge_pool_the_data():
    x = np.array([-1.5, -0.25, 0.0, 0.1, 0.9, 1.0, 2.5])
    h = histogram_counts(x, -1.0, 1.0, bins=4)                 # edges -1, -.5, 0, .5, 1
    assert h["edges"] == [-1.0, -0.5, 0.0, 0.5, 1.0]
    assert h["counts"] == [0, 1, 2, 2]                           # numpy: last bin closed, 1.0 included
    assert (h["below"], h["above"], h["n"], h["negative"]) == (1, 1, 7, 2)
    assert h["min"] == -1.5 and h["max"] == 2.5 and h["sum"] == pytest.approx(x.sum())
    m = merge_histograms(merge_histograms(None, h), histogram_counts(np.array([0.6]), -1, 1, bins=4))
    assert m["counts"] == [0, 1, 2, 3] and m["n"] == 8 and m["max"] == 2.5
    with pytest.raises(ValueError):
        merge_histograms(h, histogram_counts(x, 0, 1, bins=4))


def test_normalise_abs_divides_by_the_largest_magnitude():
    assert plots.normalise_abs([1.0, -4.0, 2.0]).tolist() == [0.25, -1.0, 0.5]
    assert plots.normalise_abs([0.0, 0.0]).tolist() == [0.0, 0.0]


def test_figure4_log_scale_where_the_paper_uses_it():
    rng = np.random.default_rng(0)
    hists = {k: histogram_counts(rng.uniform(lo, hi, 500), lo, hi) for k, (lo, hi) in HIST_RANGES.items()}
    fig = plots.histograms(hists, n_examples=200)
    scales = [ax.get_yscale() for ax in fig.axes]
    assert scales == ["log", "linear", "log", "log"]               # (a), (c), (d) log; (b) λ_A linear
    assert fig.axes[0].get_xlim() == (-1.0, 2.0) and fig.axes[1].get_xlim() == (-1.0, 1.0)
    plt.close(fig)
    fig = plots.histograms({"a_hat": hists["a_hat"]})                    # missing panels say so
    assert "not available" in fig.axes[3].get_title()
    plt.close(fig)


def test_figure3_and_figure5_draw_one_row_per_context():
    tokens = ["[CLS]", "cheap", "rent", "[SEP]"]
    fig = plots.relevance_heatmap([{"title": "LOC1", "tokens": tokens,
                                "rows": {"price": [0.1, 1.0, 0.5, 0.0], "transit-location": [0.2, 0.3, 1.0, 0.1]}},
                               {"title": "general", "tokens": tokens[:3], "rows": {"LOC1": [1, 0, 0], "LOC2": [0, 1, 0]}}])
    images = [ax.images[0] for ax in fig.axes if ax.images]
    assert [im.get_array().shape for im in images] == [(2, 4), (2, 3)]
    plt.close(fig)
    fig = plots.attention_rows(tokens, {"Â": [2.0, 1.0, 0.0, 1.0], "λ_A·A_quasi": [0.5, -1.0, 0.25, 0.0]})
    mesh = fig.axes[0].collections[0]                                # seaborn's heat map: a QuadMesh
    assert np.allclose(mesh.get_array(), [[1.0, 0.5, 0.0, 0.5], [0.5, -1.0, 0.25, 0.0]])
    assert mesh.get_clim() == (-1.0, 1.0)
    cells = ["1.00", "0.50", "0.00", "0.50", "0.50", "-1.00", "0.25", "0.00"]
    assert [t.get_text() for t in fig.axes[0].texts] == cells         # every cell says its value
    assert fig.axes[0].yaxis_inverted()                                # the first row on top
    # each row is normalised alone, so its label says by how much: a tiny row must not pass for a big one
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["Â\nmax |·| 2", "λ_A·A_quasi\nmax |·| 1"]
    plt.close(fig)
    fig = plots.attention_rows(tokens, {"Â": [2.0, 1.0, 0.0, 1.0], "λ_A·A_quasi": [-0.0231, -0.0231, -0.0231, -0.0231]})
    assert np.allclose(fig.axes[0].collections[0].get_array()[1], -1.0)
    assert fig.axes[0].get_yticklabels()[1].get_text() == "λ_A·A_quasi\nmax |·| 0.0231"
    plt.close(fig)


def test_label_distribution_curves_and_ablation_bars():
    counts = pd.DataFrame({"dataset": ["sentihood"] * 4, "split": ["train", "train", "test", "test"],
                           "label": ["None", "Positive", "None", "Positive"], "count": [90, 10, 45, 5]})
    fig = plots.label_distribution(counts)
    heights = sorted(round(p.get_height(), 3) for p in fig.axes[0].patches)
    assert heights == [0.1, 0.1, 0.9, 0.9]
    plt.close(fig)
    curves = [{"dataset": "sentihood", "label": "QACG", "metric": "aspect_strict_acc", "epochs": [1, 2],
               "dev": [0.5, 0.6], "test": [0.4, 0.7]}]
    fig = plots.training_curves(curves)
    assert len(fig.axes[0].lines) == 2 and fig.axes[0].lines[0].get_ydata().tolist() == pytest.approx([40, 70])
    assert fig.axes[0].get_ylabel() == "Strict Acc (%)"              # the tables' name, not the key
    assert fig.axes[0].get_title() == "SentiHood: test (solid), dev (dashed)"
    plt.close(fig)
    fig = plots.training_curves(curves, metric_names={"aspect_strict_acc": "strict accuracy"})
    assert fig.axes[0].get_ylabel() == "strict accuracy (%)"
    plt.close(fig)
    df = pd.DataFrame({"variant": ["a", "b"], "selection": ["dev_best"] * 2, "aspect_strict_acc": [70.0, float("nan")],
                       "aspect_strict_acc_sd": [1.0, float("nan")]})
    fig = plots.ablation_bars(df, "aspect_strict_acc")
    assert [round(p.get_width(), 1) for p in fig.axes[0].patches] == [70.0, 0.0]
    assert fig.axes[0].get_xlabel() == "Strict Acc (%), mean ± sd over seeds"
    plt.close(fig)



def test_ablation_bars_label_past_the_error_bar_with_seeds_and_draw_the_trivial_floor():
    df = pd.DataFrame({"variant": ["a", "b"], "selection": ["dev_best"] * 2, "n_seeds": [3, 1],
                       "aspect_strict_acc": [65.9, 54.2], "aspect_strict_acc_sd": [1.2, float("nan")]})
    fig = plots.ablation_bars(df, "aspect_strict_acc", floor=("All-None (trivial)", 47.9))
    ax = fig.axes[0]
    texts = {t.get_text().strip(): t.get_position()[0] for t in ax.texts}
    assert texts["65.9 (n=3)"] == pytest.approx(65.9 + 1.2)     # after the error bar, not on it
    assert texts["54.2 (n=1)"] == pytest.approx(54.2)
    assert texts["All-None (trivial): 47.9"] == pytest.approx(47.9)
    assert [line.get_xdata()[0] for line in ax.lines if line.get_linestyle() == "--"] == [47.9]
    lo, hi = ax.get_xlim()
    assert lo < 47.9 and hi > 65.9 + 1.2
    plt.close(fig)


def test_an_ablation_not_run_is_said_so_inside_the_axes():
    """A variant with 0 seeds at a budget has no bar: its 'not run' sits at the axis' left edge,
    not at x = 0, which a zoomed axis puts over the row's label."""
    df = pd.DataFrame({"variant": ["a", "b"], "selection": ["dev_best"] * 2, "n_seeds": [3, 0],
                       "aspect_strict_acc": [65.9, float("nan")], "aspect_strict_acc_sd": [1.2, float("nan")]})
    fig = plots.ablation_bars(df, "aspect_strict_acc", floor=("All-None (trivial)", 47.9))
    ax = fig.axes[0]
    texts = {t.get_text().strip(): t.get_position()[0] for t in ax.texts}
    lo, hi = ax.get_xlim()
    assert lo > 0 and texts["not run"] == pytest.approx(lo)
    plt.close(fig)


def test_seeds_of_one_system_share_a_colour_and_one_legend_entry():
    def curve(label, seed, test):
        return {"dataset": "sentihood", "label": label, "seed": seed, "metric": "aspect_strict_acc",
                "epochs": [1], "dev": [test], "test": [test]}
    curves = [curve("qacg-bert NLI-M", 44, 0.6), curve("bert-pair NLI-M", 42, 0.7), curve("qacg-bert NLI-M", 42, 0.5)]
    fig = plots.training_curves(curves)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["qacg-bert NLI-M (seeds 42, 44)",
                                                                    "bert-pair NLI-M (seed 42)"]
    solid = [line for line in ax.lines if line.get_linestyle() == "-"]
    assert [line.get_ydata().tolist() for line in solid] == [pytest.approx([50]), pytest.approx([60]), pytest.approx([70])]
    assert solid[0].get_color() == solid[1].get_color() != solid[2].get_color()
    assert ax.get_xlim() == (0.5, 1.5)                  # one epoch: centred, integer tick
    assert [t for t in ax.get_xticks() if 0.5 <= t <= 1.5] == [1]
    plt.close(fig)


def test_the_loss_panel_colours_each_system_as_the_metric_panel_does():
    def curve(label, seed):
        return {"dataset": "sentihood", "label": label, "seed": seed, "metric": "aspect_strict_acc",
                "epochs": [1], "dev": [0.5], "test": [0.5], "train_loss": [0.4]}
    fig = plots.training_curves([curve("a", 42), curve("b", 42), curve("a", 43)], loss=True)
    metric_ax, loss_ax = fig.axes[:2]
    solid = [line.get_color() for line in metric_ax.lines if line.get_linestyle() == "-"]   # a 42, a 43, b 42
    assert [line.get_color() for line in loss_ax.lines] == [solid[0], solid[2], solid[1]]   # a 42, b 42, a 43
    plt.close(fig)


def test_one_runs_curve_has_the_metric_and_the_train_loss_per_epoch():
    metrics = {"selection_metric": "aspect_f1",
               "epochs": [{"epoch": e, "train_loss": loss, "dev": {"aspect_f1": dev}, "test": {"aspect_f1": test}}
                          for e, loss, dev, test in ((1, 0.9, 0.5, 0.4), (2, 0.6, 0.6, 0.7))]}
    metrics = typed_run({"dataset": "semeval", "model": "qacg-bert"}, metrics).metrics
    curve = training_curve(metrics, "semeval", "qacg-bert (NLI-M)", loss=True)
    assert curve["epochs"] == [1, 2] and curve["dev"] == [0.5, 0.6] and curve["train_loss"] == [0.9, 0.6]
    assert "train_loss" not in training_curve(metrics, "semeval", "x")
    fig = plots.training_curves([curve], loss=True)
    metric_ax, loss_ax = fig.axes[:2]
    assert [line.get_ydata().tolist() for line in metric_ax.lines] == [pytest.approx([40, 70]), pytest.approx([50, 60])]
    assert loss_ax.lines[0].get_ydata().tolist() == [0.9, 0.6]
    plt.close(fig)
    fig = plots.training_curves([curve], floors={"semeval": ("All-None", 47.9), "sentihood": ("x", 1.0)})
    line = fig.axes[0].lines[-1]
    assert line.get_linestyle() == ":" and list(line.get_ydata()) == [47.9, 47.9]
    assert line.get_label() == "All-None, test: 47.9"
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()][-1] == "All-None, test: 47.9"
    assert len(fig.axes[0].lines) == 3                                  # no panel, no line: sentihood's floor unused
    plt.close(fig)


def test_curves_from_runs_label_by_system_or_by_the_given_row_and_name_budgets_only_when_they_differ():
    from conftest import typed_run, with_record

    from absa_lib.reports.figure_data import curves_from_runs

    metrics = {"selection_metric": "aspect_strict_acc",
               "epochs": [{"epoch": 1, "train_loss": 0.5, "dev": {"aspect_strict_acc": 0.4},
                           "test": {"aspect_strict_acc": 0.5}}]}

    def run(seed, epochs=25):
        return typed_run({"dataset": "sentihood", "model": "cg-bert", "aux": "none", "seed": seed, "backbone": "minilm",
                          "epochs": epochs}, metrics)

    same = [run(42), run(43)]
    assert [c["label"] for c in curves_from_runs(same)] == ["cg-bert none", "cg-bert none"]
    assert [c["label"] for c in curves_from_runs(same, labels=["a", "b"])] == ["a", "b"]
    assert [c["seed"] for c in curves_from_runs(same)] == [42, 43]
    mixed = curves_from_runs([run(42), run(42, epochs=1)], labels=["a", "a"])
    assert [c["label"] for c in mixed] == ["a (minilm, 25 epochs)", "a (minilm, 1 epoch)"]
    faster = with_record(run(42), lr=5e-5)                  # one short name, two budgets: named apart
    assert [c["label"] for c in curves_from_runs([run(42), faster], labels=["a", "a"])] == [
        "a (minilm, 25 epochs [lr=2e-05])", "a (minilm, 25 epochs [lr=5e-05])"]
    with pytest.raises(ValueError, match="1 labels for 2 runs"):
        curves_from_runs(same, labels=["a"])


def test_figure_data_does_not_import_matplotlib():
    import subprocess
    import sys

    code = "import sys, absa_lib.reports.figure_data; sys.exit('matplotlib' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False, timeout=120).returncode == 0


@pytest.mark.usefixtures("real_data_dir")
def test_the_summary_figure_shows_each_seed_the_table_cell_the_paper_and_the_floor():
    """figures/summary.png's numbers from the committed SemEval runs: per row and budget, every seed's
    dev-selected test score, the mean the table prints (F1 of the mean P and R), the paper's value,
    and the best trivial row."""
    from pathlib import Path

    from absa_lib.reports import figure_data, tables
    from absa_lib.training.records import find_runs

    root = Path(__file__).resolve().parent.parent
    runs = find_runs(root / "results" / "reference" / "runs", dataset="semeval")
    trivial = tables.trivial_baselines_of("semeval", runs)
    data = figure_data.summary_data("semeval", runs, trivial)
    table = tables.build_table("semeval", runs, protocols=("dev_best",), trivial=trivial)
    row = table[(table["source"] == "ours") & (table["model"] == "QACG-BERT")
                & (table["budget"] == "minilm, 25 epochs")].iloc[0]
    mine = data[(data["model"] == "QACG-BERT") & (data["budget"] == "minilm, 25 epochs")
                & (data["metric"] == "aspect_f1")]
    assert mine.loc[mine["kind"] == "mean", "value"].item() == row["aspect_f1"]      # 86.43 in the table
    assert mine.loc[mine["kind"] == "paper", "value"].item() == 92.64
    seeds = mine[mine["kind"] == "seed"]
    assert sorted(seeds["seed"]) == [42, 43, 44]
    by_seed = {r.config.seed: 100 * r.selected("dev_best")["test"]["aspect_f1"]
               for r in runs if r.run_id in row["run_ids"].split()}
    assert dict(zip(seeds["seed"], seeds["value"], strict=True)) == by_seed
    floor = data[(data["kind"] == "floor") & (data["metric"] == "aspect_f1")]
    assert floor["label"].item() == "Majority polarity: positive" and round(floor["value"].item(), 2) == 40.80
    fig = plots.summary_figure(data)
    assert [ax.get_title() for ax in fig.axes] == ["SemEval-2014: aspect F1", "SemEval-2014: sentiment accuracy, 4-class"]
    plt.close(fig)
