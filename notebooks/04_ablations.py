# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: tags,-all
#     notebook_metadata_filter: kernelspec
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.7
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 04 · Ablations: what the paper's choices and the official code's choices change
#
# The paper and the official code differ in several places (docs/paper_notes.md §7). Each row below
# changes **one** thing relative to a reference run and is trained with the same budget and
# seeds, on `ablation_dataset` (SentiHood by default):
#
# | question | change | paper / code |
# |---|---|---|
# | paper vs official preset | $Z$ of $d \times d$ split by heads (768×768 on BERT-base), dropout on $C_Q, C_K$, λ biases, init 0.02 (λ weights 0.01) | Eq. 5 prints $Z \in \mathbb{R}^{d_e \times d_h}$ and "σ = e−3"; the HEAD code differs |
# | does the quasi term matter? | $\lambda_A = 0$, so $\hat A = A_{\text{Self-Attn}}$ (model override `quasi=False`) | Eq. 4 |
# | gate activation (CG-BERT) | sigmoid instead of tanh | Eq. 3 says tanh, the code (and Yang et al.) sigmoid |
# | why CG-BERT without auxiliary sentence stalls | sigmoid gate, or init 0.02 of $E_c, W_c, U$, with the context id only | at lr 2e-5 for every layer the paper's tanh gate and 10⁻³ init leave it predicting None for epochs |
# | auxiliary sentence | context id only vs NLI-M pair | the two rows per model of Tables 1–2 |
# | sampler | class-balanced with replacement (`WeightedRandomSampler`) vs uniform | not in the paper; HEAD code default |
# | how BERT-single's K per-context classifiers train | mixed batches (each batch of 24 shared by the K) vs one context per batch | Sun et al. train K separate runs; the tables use one context per batch |
# | selection protocol | epoch chosen on the test set vs on dev | the official code selects on test (docs/paper_notes.md §4.6) |
#
# The selection-protocol rows need no extra training: every run records both its dev-best and
# its test-best epoch.

# %% [markdown]
# ## Parameters of the ablation grid
#
# Its dataset, seeds and budget; papermill sets them from `params/PROFILE.yaml`.
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

profile: str = "smoke"                       # params/<profile>.yaml of the ablation runs
backbone: str = "tiny"                       # encoder of every ablation run (tiny, minilm, ...)
ablation_dataset: str = "sentihood"          # the one dataset the ablations are trained on
ablation_seeds: list[int] = [42]             # seeds of every ablation; cells are mean ± sd over them
epochs: int = 1                              # epochs per ablation run (paper: 25)
batch_size: int = 16                         # training batch of an ablation run (paper: 24)
lr: float = 2e-5                             # peak learning rate of an ablation run (paper: 2e-5)
max_length: int = 48                         # WordPiece tokens per ablation input (official code: 128)
max_train_examples: Optional[int] = 160      # seeded training subset of an ablation run; None: all
max_eval_examples: Optional[int] = 120       # first dev and test examples an ablation is scored on; None: all
eval_batch_size: int = 64                    # batch size when scoring an ablation (part of a run's identity)
train_options: dict = {}                     # other TrainConfig fields shared by all ablations
allow_training: bool = True                  # False (render): tabulate the records found
force_retrain: bool = False                  # retrain the ablations even when finished runs exist
num_threads: int = 1                         # CPU threads torch uses here; 0: its default
data_dir: str = ""                           # the ablations' data; empty: $ABSA_DATA_DIR or download
runs_dir: str = "executed/smoke/runs"        # ablation run folders (the cache 03 shares)
results_dir: str = "executed/smoke/results"  # ablations.{csv,md} and the ablation run records go here
figures_dir: str = "executed/smoke/figures"  # the ablation bar chart goes here
reference_dir: str = "results/reference"     # without the raw files: the counts it keeps (data/benchmarks.json)

# %%
from absa_lib.harness.session import setup

notebook = setup("04_ablations", globals())   # the parameters above, folders, threads, data

# %% [markdown]
# ## 1. The ablations, one change at a time
#
# Each ablation is a `Spec`: a row label, the model, the input variant (`aux`), and the field it
# changes: the `preset`, the `sampler`, or a `model_overrides` entry. The first QACG-BERT spec is
# the reference of the QACG-BERT rows (paper preset, NLI-M auxiliary sentence, uniform sampler);
# the first CG-BERT spec, with the paper's tanh gate, is the reference of the gate row; CG-BERT
# without auxiliary sentence is the reference of the two rows after it (a spec names its reference
# in `reference` when it is not the first of its model); BERT-single with one context per batch
# (the tables' row) is the reference of BERT-single with mixed batches. The list
# lives in `absa_lib/harness/ablations.py`, because the grid runner (`absa grid`, run by `run_all.sh`
# before the notebooks) trains the same runs; here it is, as written:

# %%
import pandas as pd

from absa_lib.harness import ablations
from absa_lib.harness.session import show_definition, show_markdown, show_table

show_definition(ablations, "ABLATIONS")

# %% [markdown]
# Every ablation differs from its reference in exactly one run-defining field, so each row
# answers one question; the check below fails if a spec is edited to change two things at once.

# %%
changes = []
for spec in ablations.ABLATIONS:
    reference = ablations.reference_of(spec)
    changed = ablations.changed_fields(spec, reference)
    assert len(changed) == (0 if spec is reference else 1), f"{spec.label}: changes {changed} at once"
    changes.append({"ablation": spec.label, "reference": reference.label,
                    "field": ", ".join(changed) or "–", "what changes": spec.change})
show_table(pd.DataFrame(changes))

# %% [markdown]
# Training them (or fetching them from the run cache) on `ablation_dataset`, one run per seed:

# %%
from absa_lib.harness import grid

grid_runs = grid.run_grid(ablations.ABLATIONS, [ablation_dataset], ablation_seeds, notebook.train_base,
                          notebook.dirs.runs, allow_training, force_retrain, notebook.data_dir)

# %% [markdown]
# ## 2. One tidy table and a plot
#
# Test-set metrics (%), mean ± sd over `ablation_seeds`, at the dev-best epoch unless the
# selection column says `test_best`. Differences smaller than the seed-to-seed sd are not
# evidence of an effect; the `smoke` profile's numbers mean nothing (tiny random model). The last
# rows are the trivial predictors of Tables 1–2 (all-None, majority polarity), the floor of each
# metric on the same test set; the plot shows the variants, with the best trivial predictor on its
# metric as a dashed line.

# %%
from absa_lib.evaluation.metrics import SELECTION_METRIC
from absa_lib.reports import plots, tables, variant_tables
from absa_lib.reports.paper_numbers import DATASET_NAMES

variants = variant_tables.ablation_variants(grid_runs, ablation_dataset, ablations.ABLATIONS)
# the floor, as in Tables 1-2, on the test examples the runs were scored on
trivial = notebook.benchmarks.trivial_of(ablation_dataset, grid.flatten(grid_runs))
df = variant_tables.ablation_table(ablation_dataset, variants, trivial)
name = DATASET_NAMES[ablation_dataset]
md = variant_tables.ablation_markdown(df, ablation_dataset, f"Ablations on {name} (test set, %)")
notebook.outputs += tables.write_table(df, md, notebook.dirs.results, "ablations")
show_markdown(md)

# %%
metric = SELECTION_METRIC[ablation_dataset]
floor = tables.trivial_floor(ablation_dataset, trivial)    # the best trivial row on the metric
fig = plots.ablation_bars(df[df["source"] != tables.TRIVIAL], metric, f"Ablations on {name}, test set",
                          floor=floor)
notebook.outputs += plots.save_figure(fig, notebook.dirs.figures, "ablations")

# %% [markdown]
# ## 3. CG-BERT without auxiliary sentence, epoch by epoch
#
# Without the auxiliary sentence the context id is CG-BERT's only clue to the target and aspect,
# and it reaches the model only through the context embedding and the gate (Eq. 2–3). With the
# paper's tanh gate (starting at 0) and new layers initialised at σ = 10⁻³, that signal starts
# tiny, and at lr 2e-5 for every layer the model can sit on the all-None predictor's level for
# many epochs. The two variants give the context a stronger start: the official code's sigmoid
# gate, or its init 0.02. Their curves show when each run leaves that level (the dotted line: the
# best trivial predictor on the test set, as in the bar chart).

# %%
from absa_lib.reports import figure_data

stall = [spec for spec in ablations.ABLATIONS if spec.reference == "CG-BERT (no aux)"]
pairs = [(spec.label, run) for spec in stall for run in grid_runs.get((ablation_dataset, spec.label), [])]
curves = figure_data.curves_from_runs([run for _, run in pairs], labels=[label for label, _ in pairs])
fig = plots.training_curves(curves, floors={ablation_dataset: floor})
notebook.outputs += plots.save_figure(fig, notebook.dirs.figures, "curves_cg_no_aux")

# %%
runs = grid.flatten(grid_runs)
if allow_training:
    notebook.outputs += grid.export_records(runs, notebook.dirs.results, replace=True)   # this profile's output

# %%
notebook.finish(runs)
