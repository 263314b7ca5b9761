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
# # 01 · Data: SentiHood and SemEval-2014 as (target, aspect) examples
#
# Companion to Wu & Ong, *Context-Guided BERT for Targeted Aspect-Based Sentiment Analysis*
# (AAAI-21). This notebook shows how the two benchmarks become classification examples, how a
# *context id* encodes the target and aspect, the auxiliary sentences of Sun et al. (2019), the
# label distributions, and the SemEval dev split we add. Notebooks run in order (`01` → `06`) with
# `bash run_all.sh PROFILE`; results pass between them as files.

# %% [markdown]
# ## Parameters: the tokenizer and the folders
#
# Only what this notebook reads; `bash run_all.sh PROFILE` (papermill) sets them from
# `params/PROFILE.yaml`.
# The defaults are the `smoke` profile: *Run All* here finishes in about a minute on a CPU and
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
profile: str = "smoke"                       # params/<profile>.yaml these follow (smoke ... render)
backbone: str = "tiny"                       # its tokenizer shows the model's input (tiny, minilm, ...)
max_length: int = 48                         # tokens the input is cut to in the tokenizer example
num_threads: int = 1                         # CPU threads for torch; 0: torch's default
data_dir: str = ""                           # benchmark files; empty: $ABSA_DATA_DIR or download folder
results_dir: str = "executed/smoke/results"  # data_statistics.{csv,md} go here
figures_dir: str = "executed/smoke/figures"  # the label distribution figure goes here
reference_dir: str = "results/reference"     # without the raw files: the counts it keeps (data/benchmarks.json)

# %%
from absa_lib.harness.session import setup

notebook = setup("01_data", globals())   # the parameters above, folders, threads, data

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
# `absa_lib.data.datasets.load_examples` builds them from the raw files, in the order of Sun et al.'s
# published NLI_M files: groups of 4 consecutive examples (one SentiHood sentence and target,
# aspects general, price, safety, transit-location) or 5 (one SemEval sentence). The metrics rely
# on this grouping (strict accuracy needs all 4 aspects of a group right).

# %%
import pandas as pd

from absa_lib import data
from absa_lib.harness.session import show_table
from absa_lib.reports import data_overview, plots, tables

bench = notebook.benchmarks        # the raw files' counts and a few sentences (kept for render without them)
shown = {ds: bench.shown(ds, "test") for ds in data.DATASETS}
show_table(data_overview.examples_frame(shown["sentihood"][:8]))
show_table(data_overview.examples_frame(shown["semeval"][:5]))

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
show_table(data_overview.context_table())
# every LOCATION1 id occurs once per sentence, every LOCATION2 id once per sentence that names LOCATION2
show_table(pd.DataFrame({f"{ds} {split}": pd.Series(bench.context_counts(ds, split))
                        for ds in data.DATASETS for split in data.SPLITS}).fillna(0).astype(int))

# %% [markdown]
# ## 3. Statistics, checked against the paper
#
# > "[SentiHood] consists of 5,215 sentences, with 3,862 sentences containing a single target and
# > 1,353 sentences containing multiple targets. [...] the dataset from SemEval 2014, Task 4
# > [...] contains 3,044 sentences from restaurant reviews." (§4.1)
#
# The example counts must equal the rows of the published NLI_M files that the official code reads.

# %%
stats = bench.stats()
statistics = data_overview.data_statistics(stats)
show_table(statistics)
check = data_overview.check_against_paper(stats)
show_table(check)
assert check["match"].all(), "data counts differ from the paper / NLI_M files: see the table above"
for ds in data.DATASETS:
    show_table(data_overview.label_table(stats, ds))
markdown = data_overview.statistics_markdown(stats)
notebook.outputs += tables.write_table(statistics, markdown, notebook.dirs.results, "data_statistics")

# %% [markdown]
# Most examples say nothing about their aspect: `None` is about 84% of SentiHood and `none` 74–76%
# of SemEval, in every split (the tables above). That is why the tables report *strict accuracy*
# (all aspects of a sentence and target right) and aspect P/R/F1 rather than plain accuracy, and
# why the official code's class-balanced sampler (tested in `04_ablations`) changes results.

# %%
fig = plots.label_distribution(data_overview.label_counts(stats))
notebook.outputs += plots.save_figure(fig, notebook.dirs.figures, "data_label_distribution")

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
from absa_lib.data.features import encode_examples
from absa_lib.models import load_tokenizer

example = next(e for e in shown["sentihood"] if e.key == ("583", "LOCATION1", "price"))
print(example.text, "|", example.target, example.aspect, "->", example.label)
show_table(data_overview.input_variants(example))
tokenizer = load_tokenizer(backbone)
encoded = encode_examples([example], "NLI-M", tokenizer, max_length)[0]
show_table(pd.DataFrame({"token": tokenizer.convert_ids_to_tokens(encoded.input_ids),
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
show_table(data_overview.aspect_label_shares(stats, "semeval").set_index(["aspect", "split"]).sort_index())

# %%
notebook.finish([])
