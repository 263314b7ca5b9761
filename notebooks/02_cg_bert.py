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
# # 02 · CG-BERT: context-guided softmax attention
#
# > "Our Context-Guided BERT (CG-BERT) model is based on the context-aware Transformer model
# > proposed by Yang et al. (2019), which we adapted to the (T)ABSA task." (§3.3)
#
# This notebook puts CG-BERT's equations beside the library code that implements them, checks
# them on a small model, then trains (or loads) the CG-BERT runs and shows their rows of Tables 1
# and 2. `03_qacg_bert` writes the full tables.

# %% [markdown]
# ## Parameters of the CG-BERT runs
#
# Their budget and folders; papermill replaces the values with those of `params/PROFILE.yaml`.
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

profile: str = "smoke"                       # params/<profile>.yaml of the CG-BERT runs
backbone: str = "tiny"                       # CG-BERT's encoder: tiny, minilm, bert-base-uncased, ...
datasets: list[str] = ["sentihood", "semeval"]  # CG-BERT rows of Table 1 (sentihood) and Table 2 (semeval)
seeds: list[int] = [42]                      # one CG-BERT run per seed and input; mean ± sd over them
epochs: int = 1                              # epochs of every CG-BERT run (paper: 25)
batch_size: int = 16                         # CG-BERT's training batch (paper: 24)
lr: float = 2e-5                             # CG-BERT's peak learning rate (paper: 2e-5)
max_length: int = 48                         # WordPiece tokens of a CG-BERT input (official code: 128)
max_train_examples: Optional[int] = 160      # seeded subset of CG-BERT's training examples; None: all
max_eval_examples: Optional[int] = 120       # dev/test examples CG-BERT is scored on; None: all
eval_batch_size: int = 64                    # batch size when scoring CG-BERT (part of a run's identity)
train_options: dict = {}                     # other TrainConfig fields of the CG-BERT runs
allow_training: bool = True                  # False (render): use the CG-BERT run records found, never train
force_retrain: bool = False                  # retrain CG-BERT even when a finished run exists
num_threads: int = 1                         # torch's CPU threads for CG-BERT; 0: all cores
data_dir: str = ""                           # SentiHood and SemEval; empty: $ABSA_DATA_DIR or download
runs_dir: str = "executed/smoke/runs"        # CG-BERT run folders: records and checkpoints (git-ignored)
results_dir: str = "executed/smoke/results"  # CG-BERT's run records are copied here
figures_dir: str = "executed/smoke/figures"  # CG-BERT's training curves go here
reference_dir: str = "results/reference"     # without the raw files: the counts it keeps (data/benchmarks.json)

# %%
from absa_lib.harness.session import setup

notebook = setup("02_cg_bert", globals())   # the parameters above, folders, threads, data

# %% [markdown]
# ## 1. The equations and the code
#
# Vanilla self-attention of head $h$ (Eq. 1):
#
# $$A^h_{\text{Self-Attn}} = \operatorname{softmax}\!\left(\frac{Q^h K^{h\top}}{\sqrt{d_h}}\right)$$
#
# CG-BERT moves the query and key toward a context matrix $C^h$ before the dot product (Eq. 2):
#
# $$\begin{bmatrix}\hat Q^h \\ \hat K^h\end{bmatrix}
#   = \left(1 - \begin{bmatrix}\lambda^h_Q \\ \lambda^h_K\end{bmatrix}\right) \odot \begin{bmatrix}Q^h \\ K^h\end{bmatrix}
#   + \begin{bmatrix}\lambda^h_Q \\ \lambda^h_K\end{bmatrix} \odot \left(C^h \begin{bmatrix}U_Q \\ U_K\end{bmatrix}\right)$$
#
# with one gate per token and head from a "zero-symmetric gating unit" (Eq. 3):
#
# $$\begin{bmatrix}\lambda^h_Q \\ \lambda^h_K\end{bmatrix}
#   = \tanh\!\left(\begin{bmatrix}Q^h V^h_Q \\ K^h V^h_K\end{bmatrix}
#   + \begin{bmatrix}C^h U_Q V^C_Q \\ C^h U_K V^C_K\end{bmatrix}\right) \in (-1, 1)^{n \times 1}$$
#
# > "We chose to use tanh as our activation function as this allows the context to contribute to
# > $\hat Q^h, \hat K^h$ both positively and negatively." Footnote: "The original implementation
# > (Yang et al. 2019) used sigmoid."
#
# The official code uses the sigmoid, so $\lambda \in (0, 1)$: the `paper` preset follows Eq. 3's
# tanh, the `official` preset the code (`04_ablations` compares them). Eq. 3 prints one pair of
# vectors $V^h_Q, V^h_K$ (and $V^C_Q, V^C_K$) per head; both presets keep the official code's one
# vector per layer, shared by its heads, and `lambda_per_head=True` gives the per-head ones. Then
# $\hat A^h = \operatorname{softmax}(\hat Q^h \hat K^{h\top} / \sqrt{d_h})$ replaces Eq. 1.
#
# The context matrix (§3.6): "we concatenate the context embedding with the hidden vector for each
# position $E \in \mathbb{R}^{n\times d}$, and pass them into a feed-forward linear layer with a
# residual connection to formulate the context matrix $C^h = [E_c, E]W_c^\top$". The official
# code, which we follow, does this in *every* layer $l$ on that layer's input $X^{(l-1)}$ with the
# raw context embedding as the residual, and $C^h$ is the $h$-th $d_h$-column slice of $C$:
#
# $$C^{(l)} = [E_c; X^{(l-1)}]\, W_c^{(l)\top} + b_c^{(l)} + E_c, \qquad E_c = \mathbf{1}_n e_c^\top .$$

# %%
from absa_lib.harness.session import show_source, show_table
from absa_lib.models import CGBertSelfAttention

show_source(CGBertSelfAttention.context_matrix)   # C = [E_c; X] W_cᵀ + b_c + E_c
show_source(CGBertSelfAttention.forward)          # Eq. 2, Eq. 3, then softmax(Q̂ K̂ᵀ / √d_h)

# %% [markdown]
# The two presets, field by field (every field can also be overridden on its own, which is how
# the ablations are built); an empty cell is the model's own default (`absa_lib.models.FIELDS`):

# %%
import pandas as pd

from absa_lib.models import FIELDS  # field: (paper, official, allowed values)

show_table(pd.DataFrame([{"field": name, "paper": paper, "official": official}
                         for name, (paper, official, _) in FIELDS.items()]).fillna("model default"))

# %% [markdown]
# **Check on a real sentence.** One sentence under two contexts (LOCATION1 price and transit),
# through a CG-BERT on the notebook's backbone (its pretrained weights; the `smoke` default, `tiny`,
# is random; the new layers are freshly initialised with $\sigma = 10^{-3}$, so the tanh gates start
# near 0 and the model starts as the backbone, as §3.7 intends). The gates lie in $(-1, 1)$ and
# every attention row sums to 1.

# %%
import torch

from absa_lib.data.features import encode_batch
from absa_lib.data.inputs import model_sizes
from absa_lib.evaluation.analysis import extract_components
from absa_lib.models import build_model, load_tokenizer, parameter_breakdown
from absa_lib.reports import figure_data
from absa_lib.reports.figure_data import find_example

torch.manual_seed(0)
test = notebook.benchmarks.shown("sentihood", "test")      # the few sentences shown (kept for render)
pair = [find_example(test, ("583", "LOCATION1", aspect)) for aspect in ("price", "transit-location")]
tokenizer = load_tokenizer(backbone)
batch, tokens = encode_batch(pair, "none", tokenizer, max_length)
SENTIHOOD = model_sizes("sentihood")          # num_labels 3, num_contexts 8, num_aspects 4
cg = build_model("cg-bert", backbone=backbone, **SENTIHOOD, preset="paper").eval()
components = extract_components(cg, batch)
show_table(figure_data.component_table(components))
gates = torch.cat([layer["lambda_q"].flatten() for layer in components])
rows = torch.stack([layer["attention"].sum(-1) for layer in components])
assert gates.abs().max() < 1 and torch.allclose(rows, torch.ones_like(rows), atol=1e-5)
print("context ids:", batch["context_ids"].tolist(), "| parameters:", parameter_breakdown(cg))

# %% [markdown]
# ## 2. Training (or loading) the CG-BERT runs
#
# > "We trained for 25 epochs with a dropout probability of 0.1. The initial learning rate is
# > 2e−5 for all layers, with a batch size of 24. We used the pretrained weights from the uncased
# > BERT-base model." (§4.2)
#
# The profile sets the backbone and budget (`paper`: this, with bf16 autocast on a GPU as
# `precision=auto` chooses; `gpu`: the same on MiniLM; `cpu`: MiniLM, the full data, a short
# budget; `smoke`: subsets). Both CG-BERT rows are trained: without auxiliary sentence (context id
# only) and with it. A run with the same configuration is loaded from `runs_dir` instead of
# retrained (`force_retrain` to override); the `render` profile only reads run records.
# After every epoch the run is evaluated on dev and test; the tables report the **dev-best**
# epoch by default and the **test-best** epoch (the official code's protocol) beside it.

# %%
from absa_lib.harness import grid
from absa_lib.harness.session import show_markdown
from absa_lib.reports import plots, tables

grid_runs = {}
for ds in datasets:                     # the CG-BERT rows of the dataset's table
    grid_runs |= grid.run_grid(grid.table_specs(ds, ("cg-bert",)), [ds], seeds, notebook.train_base,
                               notebook.dirs.runs, allow_training, force_retrain, notebook.data_dir)
runs = grid.flatten(grid_runs)

# %% [markdown]
# ## 3. CG-BERT's rows of Tables 1 and 2
#
# Cells are ours (mean ± sd over seeds, %) with the paper's value in brackets. With a small
# backbone or budget the numbers are expected to be lower than the paper's; the comparison that
# matters is between rows trained the same way, and each against the trivial rows of `03_qacg_bert`
# (the curves below draw the best of them). Seeds that find no aspect at their selected epoch (the
# All-None answer) are named under the table: a mean over such seeds and others says "some seeds
# stalled", not "a weaker model" (`04_ablations` §3 looks at why).

# %%
for ds in datasets:
    show_markdown(tables.to_markdown(tables.build_table(ds, runs, models=("cg-bert",)), ds))

# %%
# the trivial rows, on the test examples the runs were scored on
trivial = {ds: notebook.benchmarks.trivial_of(ds, runs) for ds in datasets}
floors = {ds: tables.trivial_floor(ds, trivial[ds]) for ds in datasets}   # dotted: the best trivial row
fig = plots.training_curves(figure_data.curves_from_runs(runs), floors=floors)
notebook.outputs += plots.save_figure(fig, notebook.dirs.figures, "curves_cg_bert")
if allow_training:                      # render reads the committed records; nothing to copy
    notebook.outputs += grid.export_records(runs, notebook.dirs.results, replace=True)   # this profile's output

# %%
notebook.finish(runs)
