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
# # 06 · The other attention systems of the source documents, on the same tasks
#
# Besides QACG-BERT, the source documents describe other ways to make a sentence representation
# depend on a target and an aspect. Each one is implemented in `absa_lib.models` behind the same
# interface (sentence, optional auxiliary sentence, context id → C logits) and trained here with
# the same budget, seeds and metrics as the BERT-pair, CG-BERT and QACG-BERT rows (the BERT-size
# systems on the same backbone; the LSTMs on its frozen word embeddings). The tables show how many
# seeds each row has: at 25 epochs the committed reference has fewer of these systems than of the
# BERT rows (see docs/evidence/other_attention_systems.md):
#
# | system | source | module | idea |
# |---|---|---|---|
# | ATAE-LSTM, AE-LSTM, AT-LSTM | Wang et al. 2016 (the family behind the attention-LSTM article) | `absa_lib.models.other.alstm` | an LSTM over frozen word vectors, the aspect in its input and/or its attention |
# | MAN-BERT | Qiang et al. 2020, as used after BERT by the multitask BERT report | `absa_lib.models.other.man` | one attention head per aspect, pushed onto different tokens by an orthogonality regulariser |
# | OA-BERT | Khandelwal & Attar 2021 | `absa_lib.models.other.orthogonal` | attention over the *query* axis for every context word |
# | joint objective, dynamic task weights | the multitask BERT report | `absa_lib.models.joint` | aspect categorization and sentiment as two heads, weighted by their dev losses |
#
# `docs/other_attention.md` records every reading of an ambiguous source as an option with its
# default. The `smoke` profile's numbers mean nothing (tiny random backbone); the tables are
# comparable within a profile only.

# %% [markdown]
# ## Parameters of the comparison grid
#
# Its budget and folders; `run_all.sh PROFILE` sets them from the profile.
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

profile: str = "smoke"                       # params/<profile>.yaml of the comparison runs
backbone: str = "tiny"                       # encoder of the BERT systems; word vectors of the LSTMs
datasets: list[str] = ["sentihood", "semeval"]  # one comparison table per dataset: sentihood, semeval
seeds: list[int] = [42]                      # one run per seed of every system; cells are mean ± sd
epochs: int = 1                              # epochs of every system's run (paper: 25)
batch_size: int = 16                         # training batch of every system (paper: 24)
lr: float = 2e-5                             # peak learning rate of every system (paper: 2e-5)
max_length: int = 48                         # WordPiece tokens per input of every system (official code: 128)
max_train_examples: Optional[int] = 160      # seeded training subset of each system; None: all
max_eval_examples: Optional[int] = 120       # first dev and test examples each system is scored on; None: all
eval_batch_size: int = 64                    # batch size when scoring the systems (part of a run's identity)
train_options: dict = {}                     # other TrainConfig fields shared by the systems
allow_training: bool = True                  # False (render): compare the run records found, never train
force_retrain: bool = False                  # retrain the systems even when finished runs exist
num_threads: int = 1                         # CPU threads torch may use for these systems; 0: its default
data_dir: str = ""                           # benchmarks folder; empty: $ABSA_DATA_DIR or the download folder
runs_dir: str = "executed/smoke/runs"        # run folders of the systems (shared with 02-03)
results_dir: str = "executed/smoke/results"  # other_attention_{dataset}.{csv,md} go here
figures_dir: str = "executed/smoke/figures"  # the attention comparison figure goes here
reference_dir: str = "results/reference"     # committed arrays, drawn when no model is trained

# %%
from absa_lib.harness.session import setup

notebook = setup("06_other_attention", globals())   # the parameters above, folders, threads, data

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

from absa_lib.data.features import encode_batch
from absa_lib.data.inputs import model_sizes
from absa_lib.harness.session import show_source, show_table
from absa_lib.models import build_model, load_tokenizer
from absa_lib.models.other.alstm import ALSTMModel
from absa_lib.reports.figure_data import find_example

SENTENCE = ("745", "LOCATION1")     # Figure 5's sentence: "LOCATION1 is nice, but it's not cheap"
SENTIHOOD = model_sizes("sentihood")          # num_labels 3, num_contexts 8, num_aspects 4

show_source(ALSTMModel.forward)
torch.manual_seed(0)
tokenizer = load_tokenizer(backbone)
test = notebook.benchmarks.shown("sentihood", "test")      # the few sentences shown (kept for render)
pair = [find_example(test, (*SENTENCE, aspect)) for aspect in ("price", "safety")]
batch, _ = encode_batch(pair, "none", tokenizer, max_length)
inputs = {k: v for k, v in batch.items() if k != "labels"}
for score in ("paper", "joint"):
    at = build_model("at-lstm", backbone=backbone, **SENTIHOOD, alstm_score=score).eval()
    with torch.no_grad():                                   # weights of a trained model's scale (a stand-in)
        for p in at.parameters():
            p.normal_(std=0.3)
    out = at(**inputs)
    alpha = out.attentions["token_weights"]
    shown = [f"{d:.2e}" if d >= 1e-5 else "below 1e-5 (float32 rounding)"      # the rounding differs per CPU
             for d in ((alpha[0] - alpha[1]).abs().max(), (out.logits[0] - out.logits[1]).abs().max())]
    print(f"AT-LSTM, score {score!r}: price vs safety, max |Δα| {shown[0]}, max |Δlogit| {shown[1]}")

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
from absa_lib.evaluation.analysis import extract_attention
from absa_lib.models.other.man import man_attention

show_source(man_attention)
for ortho in ("eq9", "code_literal"):
    man = build_model("man-bert", backbone=backbone, **SENTIHOOD,
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
# OA-C and OA-CA (`oa_variant="c"`, `"ca"`) replace the product by a convolution: each query word
# makes $f$ filters of width $\kappa$, $F_j = \mathrm{reshape}(Q_j W_F)$, and
# $E_{ij} = \mathrm{flat}(\mathrm{conv}_\sigma((C W_c)_i;\, F_j, \beta_j))$ (`pair_features`).
#
# Two OA blocks (OA → self-attention → feed-forward) on $H$, a residual $R = \mathrm{Dropout}(Y) + H$,
# and the readout at [CLS].

# %%
from absa_lib.models.other.orthogonal import OrthogonalAttention

show_source(OrthogonalAttention.forward)
show_source(OrthogonalAttention.pair_features)
oa = build_model("oa-bert", backbone=backbone, **SENTIHOOD).eval()
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

show_source(joint.decode)
show_source(joint.updated_weights)

# %% [markdown]
# ## 5. Training (or loading) the grid, and one table per dataset
#
# The BERT-pair, CG-BERT and QACG-BERT runs are those of notebooks 02–03 (fetched from the run
# cache). Cells: test metrics (%), mean ± sd over `seeds` at the dev-best epoch, and in brackets
# at the test-best epoch. The last rows are the trivial predictors of Tables 1–2 (all-None,
# majority polarity), the floor of each metric on the same test set.

# %%
import pandas as pd

from absa_lib.harness import grid
from absa_lib.harness.session import show_markdown
from absa_lib.reports import paper_numbers, tables, variant_tables

grids, runs = {}, []
for ds in datasets:
    specs = grid.other_attention_specs(ds)
    grids[ds] = grid.run_grid(specs, [ds], seeds, notebook.train_base, notebook.dirs.runs, allow_training,
                              force_retrain, notebook.data_dir)
    trivial = notebook.benchmarks.trivial_of(ds, grid.flatten(grids[ds]))
    df = variant_tables.comparison_table(ds, grids[ds], specs, trivial)
    md = variant_tables.comparison_markdown(df, ds, f"{paper_numbers.TITLES[ds]}: other attention systems")
    notebook.outputs += tables.write_table(df, md, notebook.dirs.results, f"other_attention_{ds}")
    show_markdown(md)
    runs += grid.flatten(grids[ds])

# %% [markdown]
# Task weights of the `joint-dwa` runs, per epoch (the weights used during that epoch and the dev
# losses that updated them):

# %%
rows = [{"dataset": r.config["dataset"], "seed": r.config["seed"], "epoch": e["epoch"],
         **{f"w_{k}": v for k, v in e.get("task_weights", {}).items()},
         **{f"dev_L_{k}": v for k, v in e.get("dev_task_losses", {}).items()}}
        for r in runs if r.config.get("objective") == "joint-dwa" for e in r.metrics.epochs]
show_table(pd.DataFrame(rows))

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
from absa_lib.harness.session import compute_or_load, find_analysis
from absa_lib.reports import figure_data, plots

COMPARED = ("MAN-BERT", "OA-BERT", "ATAE-LSTM", "QACG-BERT")     # rows: runs that read the sentence alone
fig_specs = [s for s in grid.other_attention_specs("sentihood") if s.label in COMPARED]
fig_grid = grid.run_grid(fig_specs, ["sentihood"], seeds[:1], notebook.train_base, notebook.dirs.runs,
                         allow_training, False, notebook.data_dir)
chosen = {s.label: grid.run_with_checkpoint(fig_grid[("sentihood", s.label)]) for s in fig_specs}
ready = allow_training and all(r is not None for r in chosen.values())
META = {label: r.run_id for label, r in chosen.items() if r is not None} if ready else {}
if ready or find_analysis("other_attention.json", notebook.dirs.reference):
    def compare():
        models = {label: r.load_model("best").eval() for label, r in chosen.items()}
        trained = next(iter(chosen.values())).config          # the runs share backbone and max length
        tokenizer = load_tokenizer(trained["backbone"])
        example = find_example(test, (*SENTENCE, "price"))
        return figure_data.attention_comparison(models, tokenizer, example, max_length=trained["max_length"])

    looks, path = compute_or_load("other_attention.json", notebook.dirs, compare, ready, META)
    notebook.outputs.append(path)
    print(f"gold {looks['gold']}; predicted", looks["predicted"])
    title = f"{looks['target']} · {looks['aspect']}: attention per token (normalised by max |·|)"
    fig = plots.attention_rows(looks["tokens"], looks["rows"], title)
    notebook.outputs += plots.save_figure(fig, notebook.dirs.figures, "other_attention_maps")
else:   # render, before any run of these systems has been trained: say so instead of drawing nothing
    missing = notebook.dirs.reference / "analysis" / "other_attention.json"
    print(f"[06] no figure: {missing} does not exist yet and there is no trained model to compute it; "
          "train the systems first: absa grid --profile cpu --part other")
if allow_training:
    notebook.outputs += grid.export_records(runs, notebook.dirs.results, replace=True)   # this profile's output

# %% [markdown]
# ## 7. The paper's claims, measured
#
# Every comparison the paper makes between two rows (its Tables 1-2 orderings, the ablations of
# `04_ablations`, the joint objective above), on each table's selection metric: the paper's gain
# (against BERT-pair, Sun et al.'s NLI-M variant, like ours), ours seed by seed with its 95% interval
# over seeds, and one verdict by one rule (`absa_lib.evaluation.significance`; `absa compare` gives the
# same for any two sets of runs): the paired t-test over the seeds both rows share decides, Holm's
# correction over each budget's comparisons, ASO and the test-sentence interval can veto. Beside each,
# the gain the rule would find 80% of the time (MDD) and whether the paper's gain lies inside our interval
# (ours is MiniLM: "outside" is no verdict on the paper). A side whose seeds stay near the trivial floor is a
# training failure, not a comparison; the one-epoch rows are early training, apart from the paper's
# claims at 25 epochs. Whether a configuration's runs leave the trivial level at all (the stall of
# CG-BERT without the auxiliary sentence) is a rate over runs, decided apart by Fisher's exact test.

# %%
from pathlib import Path

from absa_lib.reports import claims
from absa_lib.training.records import find_runs

every_run = find_runs(notebook.dirs.runs)            # the runs of 02-06, and any other of this runs folder
floors = {ds: tables.trivial_floor(ds, notebook.benchmarks.trivial_of(ds, every_run))[1] for ds in datasets}
claimed = claims.claims_table(every_run, floors, tuple(datasets))
# the run outcomes (the stall) count every run of a configuration: reading the reference, its checks' CPU runs too
checks = notebook.dirs.reference / "checks" if notebook.dirs.reference else None
in_reference = checks is not None and Path(notebook.dirs.runs).resolve().is_relative_to(Path(notebook.dirs.reference).resolve())
outcome_runs = every_run + (find_runs(checks) if in_reference and checks.is_dir() else [])
outcomes = claims.outcomes_table(outcome_runs, floors, tuple(datasets))
notebook.outputs += tables.write_table(claimed, claims.claims_markdown(claimed, outcomes), notebook.dirs.results, "claims")
notebook.outputs += tables.write_table(outcomes, claims.outcomes_markdown(outcomes), notebook.dirs.results,
                                       "claims_outcomes")
notebook.outputs += plots.save_figure(plots.claims_figure(claimed), notebook.dirs.figures, "claims")
show_markdown(claims.claims_markdown(claimed, outcomes))
compared = {i for ids in [*claimed["runs_a"], *claimed["runs_b"], *outcomes["runs_a"], *outcomes["runs_b"]]
            for i in ids.split()}

# %%
notebook.finish(grid.flatten({"06": runs, "claims": list({r.run_id: r for r in outcome_runs if r.run_id in compared}.values())}))
