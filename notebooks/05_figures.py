# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: tags,-all
#     notebook_metadata_filter: kernelspec
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 05 · Figures 3, 4 and 5: what the context does to attention
#
# The paper's analyses use QACG-BERT trained on SentiHood. We use the QACG-BERT run without
# auxiliary sentence (the official analysis notebook also builds its inputs without it, so the
# target and aspect reach the model only through the context id) of the first seed. Each figure's
# data is saved under `results/analysis/` (JSON), so the `render` profile redraws every figure
# without a model; when no checkpoint is at hand the data comes from `results/reference/analysis/`,
# and the line printed names the run it was computed from (its budget and seed may differ from
# this notebook's parameters: the committed arrays are seed 44's, the seed whose checkpoints were on
# the H200 that computed them; a run of this notebook with seed 42's checkpoint replaces
# them in `results/analysis/`, not in the reference).

# %% [markdown]
# ## Parameters: the analysed run and the figures
#
# The configuration of the analysed run (found in the run cache by it) and the
# figures' folders.
# The defaults are the `smoke` profile: *Run All* here finishes in about a minute on a CPU once
# its tiny runs are cached (the first time, a few minutes: it trains them) and
# writes only to the git-ignored `executed/smoke/`. Changing `profile` alone changes no other value
# (set them, or run `bash run_all.sh PROFILE`); `setup` prints every value that differs from the
# profile named, and the manifest lists them.

# %%
# Colab, or any Jupyter kernel without the companion: clone it and install it with its backbone,
# leaving the kernel's own packages as they are (scripts/colab_install.py); nothing happens where
# `import absa_lib` works. On Colab, keep_runs_on_drive = True keeps the runs, tables and figures
# (executed/) on Google Drive, where a new runtime finds them and resumes unfinished runs.
keep_runs_on_drive = False
import importlib.util
import os
import subprocess
import sys

if importlib.util.find_spec("absa_lib") is None:
    _repository = os.environ.get("ABSA_REPOSITORY") or ""   # absa_lib/_version.py
    if not os.path.isdir("absa-companion"):
        if not _repository:
            raise RuntimeError("absa_lib is not installed and the companion's address is not declared: set "
                               "os.environ['ABSA_REPOSITORY'] to its git address, or clone it here as absa-companion/")
        subprocess.run(["git", "clone", "--quiet", "--depth", "1", _repository, "absa-companion"], check=True)
    _done = subprocess.run([sys.executable, "absa-companion/scripts/colab_install.py"], capture_output=True, text=True)
    print(_done.stdout + _done.stderr)                # a kernel does not show a child's output by itself
    if _done.returncode:
        raise RuntimeError("the companion could not be installed: the lines above say why")
    importlib.invalidate_caches()
    os.chdir("absa-companion")          # the parameters' relative folders are the checkout's
if keep_runs_on_drive and not os.path.islink("executed"):
    from google.colab import drive
    drive.mount("/content/drive")
    os.makedirs("/content/drive/MyDrive/absa-companion/executed", exist_ok=True)
    os.symlink("/content/drive/MyDrive/absa-companion/executed", "executed")

# %% tags=["parameters"]
from typing import Optional  # papermill reads Optional[int], not int | None

profile: str = "smoke"                       # params/<profile>.yaml of the analysed run
backbone: str = "tiny"                       # encoder of the analysed QACG-BERT
seeds: list[int] = [42]                      # the first seed's QACG-BERT run is analysed
epochs: int = 1                              # training epochs of the analysed run (paper: 25)
batch_size: int = 16                         # batch the analysed run was trained with (paper: 24)
lr: float = 2e-5                             # learning rate of the analysed run (paper: 2e-5)
max_length: int = 48                         # tokens per input of the analysed run (official: 128)
max_train_examples: Optional[int] = 160      # training subset of the analysed run; None: all
max_eval_examples: Optional[int] = 120       # dev/test examples the analysed run was scored on; None: all
eval_batch_size: int = 64                    # evaluation batch of the analysed run (part of a run's identity)
train_options: dict = {}                     # other TrainConfig fields of the analysed run
n_hist_examples: int = 20                    # Figure 4: test examples with a label (paper: 200)
allow_training: bool = True                  # False (render): redraw from the saved arrays, no model
num_threads: int = 1                         # torch threads for the gradients and attention maps; 0: default
data_dir: str = ""                           # SentiHood files; empty: $ABSA_DATA_DIR or the download folder
runs_dir: str = "executed/smoke/runs"        # where the analysed run (with its checkpoint) lives
results_dir: str = "executed/smoke/results"  # the analysis arrays (results/analysis/*.json) go here
figures_dir: str = "executed/smoke/figures"  # Figures 3, 4 and 5 go here
reference_dir: str = "results/reference"     # committed analysis arrays (render draws them)

# %%
from absa_lib.harness.session import setup

notebook = setup("05_figures", globals())   # the parameters above, folders, threads, data

# %%
from absa_lib import data
from absa_lib.harness import grid
from absa_lib.harness.session import compute_or_load, show_table
from absa_lib.reports import figure_data, plots

spec = grid.Spec("QACG-BERT", "qacg-bert", "none")
grid_runs = grid.run_grid([spec], ["sentihood"], seeds[:1], notebook.train_base, notebook.dirs.runs,
                          allow_training, False, notebook.data_dir)
run = grid.run_with_checkpoint(grid_runs[("sentihood", spec.label)]) if allow_training else None
if allow_training and run is None:      # say so: the figures below then come from the reference
    found = [str(r.path) for r in grid_runs[("sentihood", spec.label)]] or "no runs (seeds is empty)"
    print("[05] no QACG-BERT run with a checkpoint:", found, "-> Figures 3-5 are drawn from the reference")
model = tokenizer = test = None
META = {}
if run is not None:
    from absa_lib.models import load_tokenizer

    model, tokenizer = run.load_model("best").eval(), load_tokenizer(run.config["backbone"])
    test = data.load_examples("sentihood", "test", notebook.data_dir)
    META = {"run_id": run.run_id, "backbone": run.config["backbone"], "preset": run.config["preset"],
            "aux": run.config["aux"], "seed": run.config["seed"], "epochs": run.config["epochs"],
            "max_length": run.config["max_length"]}
    print("analysing run", run.path)
AUX, MAXLEN = META.get("aux", "none"), META.get("max_length", max_length)   # as the model was trained

# %% [markdown]
# ## Figure 3: gradient sensitivity under different contexts
#
# > "To visualization importance of input tokens, we conduct gradient sensitivity analysis [...]
# > words like rent and cheaper are most relevant to the price aspect while words like live,
# > location, central are more relevant to the transit-location aspect. [...] For LOC1, the model
# > correctly identifies costs [...] and posh. By contrast, the model identifies cheap when given
# > LOC2 as context" (§4.5)
#
# Relevance of token $t$ for class $c$ (the gold label of that target and aspect), with $z$ the
# logits and $E$ the output of the embedding block, normalised within the sentence:
#
# $$r_t = \frac{\lVert \partial z_c / \partial E_t \rVert_2^2}{\max_{t'} \lVert \partial z_c / \partial E_{t'} \rVert_2^2}$$
#
# The paper's first example is a SentiHood test sentence found by its words: "rent is cheaper
# [...] central London" (583). Its second cannot be found: no sentence has all the words the text
# names ("costs", "poshest", "cheap"). The only test sentence with "posh" and "cheap" is 1474
# ("up-market, posh and expensive; [...] cheap and shabby"), labelled as the text says (price:
# LOCATION1 negative, LOCATION2 positive), so it stands in; train sentence 2668 has "costs",
# "poshest" and "cheapest", but it is not a test sentence and its LOCATION2 price label is
# negative. The caption names the *general* aspect for this panel, the text *price*; we follow the
# text. Top: one target, two aspects (sentence 583). Bottom: one aspect, two targets (sentence
# 1474). Row labels give the gold label; the JSON also records the model's prediction.

# %%
FIGURE3_PANELS = [
    {"title": "LOCATION1: price vs transit-location", "sentence_id": "583",
     "contexts": [("LOCATION1", "price"), ("LOCATION1", "transit-location")]},
    {"title": "price: LOCATION1 vs LOCATION2", "sentence_id": "1474",
     "contexts": [("LOCATION1", "price"), ("LOCATION2", "price")]},
]

# %%
fig3, path = compute_or_load("fig3_relevance.json", notebook.dirs, lambda: figure_data.relevance_data(
    model, tokenizer, test, FIGURE3_PANELS, aux=AUX, max_length=MAXLEN), model is not None, META)
notebook.outputs.append(path)
for panel in fig3:
    print(panel["title"], [(c["target"], c["aspect"], "gold", c["gold"], "predicted", c["predicted"])
                           for c in panel["contexts"]])
notebook.outputs += plots.save_figure(plots.relevance_heatmap(fig3), notebook.dirs.figures, "fig3_relevance")

# %% [markdown]
# ## Figure 4: histograms of $\hat A$, $\lambda_A$, $A_{\text{Self-Attn}}$ and $A_{\text{Quasi-Attn}}$
#
# > "Histogram of QACG-BERT weights on n = 200 randomly selected examples from SentiHood test set
# > where true label is either negative or positive. For the matrices, each value in the matrix
# > is a data point in the histogram. We note that the vertical axes of (a), (c) and (d) are in
# > log-scale." (Fig. 4 caption)
#
# Every entry of every head of every layer counts (padding excluded). Panel (d) is the raw
# $A_{\text{Quasi-Attn}} = \sigma(\cdot)$, which the official code does not return (its notebook
# pooled $\lambda_A A_{\text{Quasi-Attn}}$; we keep that too, as `quasi_term`). The paper reads:
# $\lambda_A$ "acts as a bidirectional control gate, with slightly more negative values"; the
# mass of $A_{\text{Quasi-Attn}}$ is "between .25 and .50"; the weights of $\hat A$ "are mainly
# positive, but some of the weights take on negative values". The first table checks these in
# numbers. The second, per layer, gives the mean of $A_{\text{Quasi-Attn}}$, its spread across the
# key tokens of a query row (0 when the quasi-attention does not depend on the key: Figure 5 then
# shows a flat row) and the mean $|\lambda_A|$.

# %%
fig4, path = compute_or_load("fig4_histograms.json", notebook.dirs, lambda: figure_data.component_histograms(
    model, tokenizer, test, n=n_hist_examples, seed=0, aux=AUX, max_length=MAXLEN), model is not None, META)
notebook.outputs.append(path)
show_table(figure_data.histogram_summary(fig4["histograms"]))
if fig4["histograms"].get("a_quasi"):      # the README quotes this line of the 25-epoch run
    print(f"A_quasi within 0.02 of ½ (in [0.48, 0.52), near σ(0)): "
          f"{figure_data.share_near(fig4['histograms']['a_quasi']):.0%} of its {fig4['histograms']['a_quasi']['n']:,} entries")
per_layer = figure_data.per_layer_summary(fig4)    # does A_quasi depend on the key token, layer by layer?
if per_layer is None:
    print("The per-layer table is computed with a trained model; the committed arrays of Figure 4 "
          "(results/reference/analysis/fig4_histograms.json) hold the histograms only, so it shows when this "
          "notebook runs under a training profile (e.g. bash run_all.sh gpu).")
else:
    show_table(per_layer)
fig = plots.histograms(fig4["histograms"], fig4["n_examples"])
notebook.outputs += plots.save_figure(fig, notebook.dirs.figures, "fig4_histograms")

# %% [markdown]
# ## Figure 5: $\hat A$, $A_{\text{Self-Attn}}$ and $\lambda_A A_{\text{Quasi-Attn}}$ for one head of the first layer
#
# > "we visualize the weights of $A^h_{\text{Self-Attn}}$ and the product
# > $\lambda^h_A A^h_{\text{Quasi-Attn}}$ extracted from one of the heads in the first
# > self-attention layer [...] nice is a positive word for aspects like general. However, with
# > respect to price, nice actually suggests a higher cost and thus is more negative." (§4.6)
#
# Test sentence 745, "LOCATION1 is nice, but it's not cheap", context (LOCATION1, price). Each row
# is the column sum over query tokens (one value per key token), divided by its largest absolute
# value, which is printed under the row's name: compare the rows' sizes there, not their colours.
# The paper shows "one of the heads"; we show the head whose quasi term has the most
# negative column sum, and the JSON keeps all heads.

# %%
FIGURE5_EXAMPLE = ("745", "LOCATION1", "price")    # (sentence id, target, aspect) in the SentiHood test split

fig5, path = compute_or_load("fig5_attention.json", notebook.dirs, lambda: figure_data.attention_example(
    model, tokenizer, figure_data.find_example(test, FIGURE5_EXAMPLE), aux=AUX, max_length=MAXLEN, layer=0),
    model is not None, META)
notebook.outputs.append(path)
print(f"gold {fig5['gold']}, predicted {fig5['predicted']}; layer {fig5['layer']}, head {fig5['head']}")
title = f"layer {fig5['layer']} (0 is the first), head {fig5['head']}: {fig5['target']} · {fig5['aspect']}"
fig = plots.attention_rows(fig5["tokens"], figure_data.figure5_rows(fig5), title)
notebook.outputs += plots.save_figure(fig, notebook.dirs.figures, "fig5_attention")

# %%
notebook.finish([run] if run is not None else [])
