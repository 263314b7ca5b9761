"""A trained run as a Hugging Face model folder that describes itself (``absa export RUN DIR``).

The folder holds the dev-selected checkpoint (``config.json``, ``model.safetensors``), the tokenizer and
a ``README.md`` model card in the hub's format: YAML metadata (library, tags, datasets, language,
licence, a ``model-index`` with the test metrics) and the sections of Mitchell et al.'s model cards:
what the model is (model, preset, backbone and its fingerprint, run id), the data and where its
terms are, the training budget and machine, the test metrics at the dev-selected epoch beside the
test-selected ones (labelled), the paper's and the trivial floor, intended use and limits, and how to
load it. ``from_pretrained`` of the folder works offline, as from the run's checkpoint.

The folder is not a plain transformers model: each sentence is read with an auxiliary sentence and a
context id per (target,) aspect, which ``absa_lib`` builds, and its model classes are ``absa_lib``'s.
So the metadata names ``absa-companion`` as its library, no ``pipeline_tag`` and ``inference: false``
(a transformers library or a text-classification tag would offer the hub's widget, ``pipeline()`` and
snippets that fail), and the card's install words are the ones that work: the package is not on PyPI,
so ``pip install "absa-companion @ git+REPOSITORY"`` once ``absa_lib._version.REPOSITORY`` is known,
else ``pip install`` of a checkout. Its Python blocks are run as written by tests/test_explain.py.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from pathlib import Path

import yaml
from safetensors import SafetensorError

from absa_lib import _version
from absa_lib._version import __version__
from absa_lib.data import datasets as D
from absa_lib.data.inputs import B_VARIANTS
from absa_lib.errors import AbsaError, one_line
from absa_lib.fileio import atomic_write_bytes, new_dir_mode, new_file_mode
from absa_lib.models import load_tokenizer
from absa_lib.paths import ensure_writable
from absa_lib.reports.paper_numbers import DATASET_NAMES, PAPER_TABLES
from absa_lib.reports.tables import budget_text, matches, metric_columns, trivial_baselines_of
from absa_lib.training.config import describe
from absa_lib.training.records import Run, write_export_record

CARD = "README.md"
LIBRARY = "absa-companion"   # the card's library_name: the package that loads the folder
BACKBONE_NOTE = {
    "tiny": "The backbone is the tiny random BERT the tests use: this is a test model, and its numbers mean nothing.",
    "minilm": ("The backbone is all-MiniLM-L6-v2 (6 layers, 22M parameters, trained for sentence embeddings), "
               "not the paper's BERT-base (12 layers, 110M): expect lower scores than the paper's, and compare "
               "it with the paper only through the companion's tables, which state the backbone of every row."),
}


def _paper_row(config: dict):
    dataset = config.dataset
    return next((row for row in PAPER_TABLES.get(dataset, ()) if matches(config, row, dataset)), None)


def card_text(run: Run, data_dir=None) -> str:
    """The model card of ``run`` (Markdown with YAML metadata)."""
    config, dataset, data = run.config, run.config.dataset, D.get(run.config.dataset)
    dev, test = run.selected("dev_best"), run.selected("test_best")
    columns = metric_columns(dataset)
    row = _paper_row(config)
    missing = data.missing_files(data_dir)               # the card needs the raw test file only for its trivial rows
    trivial = trivial_baselines_of(dataset, [run], data_dir) if dataset in PAPER_TABLES and not missing else {}
    name = f"{config.model}-{dataset}"
    subset = config.max_eval_examples
    # not "transformers" (the hub assumes it of a folder with a config.json), no pipeline_tag, no widget:
    # pipeline() and the hub's snippets cannot build the model's inputs (the module docstring)
    meta = {"library_name": LIBRARY, "inference": False, "language": ["en"], "license": "mit",
            "tags": ["absa", "aspect-based-sentiment-analysis", "targeted-sentiment", config.model, "absa_lib"],
            "datasets": [dataset],
            "model-index": [] if subset else [{"name": name, "results": [{
                "task": {"type": "text-classification", "name": "Targeted aspect-based sentiment analysis"},
                "dataset": {"name": DATASET_NAMES.get(dataset, dataset), "type": dataset, "split": "test"},
                "metrics": [{"type": key, "name": f"{title} (dev-selected epoch)", "value": round(100 * dev["test"][key], 2)}
                            for key, title, _ in columns if not math.isnan(dev["test"].get(key, math.nan))]}]}]}
    lines = ["---", yaml.safe_dump(meta, sort_keys=False, allow_unicode=True).rstrip(), "---", "",
             f"# {config.model} on {DATASET_NAMES.get(dataset, dataset)}", "",
             f"A {describe(config)} model trained with `absa_lib` (the absa-companion package), the reproducible "
             "companion of "
             "*Context-Guided BERT for Targeted Aspect-Based Sentiment Analysis* (Wu & Ong, AAAI 2021).", "",
             "## Model", "",
             "| | |", "|---|---|",
             f"| model | `{config.model}` (preset `{config.preset}`, input `{config.aux}`) |",
             f"| backbone | `{config.backbone}`, fingerprint `{config.backbone_fingerprint}` |",
             f"| run | `{run.run_id}` (a hash of the configuration, the data files' checksums and the backbone) |",
             f"| selected epoch | {dev['epoch']} of {config.epochs}, by dev {run.metrics.selection_metric} |", "",
             "## Data", "",
             D.get(dataset).source or (f"your own dataset `{dataset}` (its scheme and files' checksums are in the "
                                       "run's config.json); its terms are yours to state"), "",
             "## Training", "",
             f"{budget_text(config)}; seed {config.seed}. Trained on "
             f"{run.env.device_name or 'an unrecorded machine'}.", "",
             "## Test metrics (%)", "",
             "The dev-selected epoch is the honest number; the test-selected one is what the official code reports "
             "(it selects on the test set) and is shown for comparison only."
             + (f" Scored on the first {int(subset):,} test examples only, not the whole test set (so the metadata "
                "holds no test results)." if subset else ""), "",
             "| | " + " | ".join(title for _, title, _ in columns) + " |",
             "|---|" + "---|" * len(columns)]

    def cells(values: dict, scale: float = 100.0) -> str:
        return " | ".join("–" if math.isnan(v := values.get(k, math.nan)) else f"{scale * v:.{d}f}" for k, _, d in columns)

    lines.append(f"| this model, dev-selected epoch ({dev['epoch']}) | {cells(dev['test'])} |")
    lines.append(f"| this model, test-selected epoch ({test['epoch']}) | {cells(test['test'])} |")
    if row is not None:
        lines.append(f"| the paper: {row.name} (BERT-base) | {cells({k: v[0] for k, v in row.values.items()}, 1.0)} |")
    for trivial_name, values in trivial.items():
        lines.append(f"| {trivial_name} | {cells(values)} |")
    if missing:
        lines += ["", "The trivial predictors' rows are not shown: the benchmark's files were not in the data folder "
                      "when this folder was exported (`absa data download` fetches them; export again for the rows)."]
    lines += ["", "## Intended use and limits", "",
              "Research on targeted aspect-based sentiment analysis of English reviews: the sentiment (or absence) "
              "of each aspect" + (" for each target location" if data.masked_targets else "") + " of a sentence.",
              "It knows only the aspects and labels it was trained on, in the domain of its data "
              f"({data.domain or 'your own data'})" + ("; mask the locations as LOCATION1 / LOCATION2 (`absa predict "
                                                       "--locations`) as its training text was" if data.masked_targets
                                                       else "") + ".",
              "It is not a general sentiment model and was not evaluated for fairness or on other domains.", ""]
    if config.backbone in BACKBONE_NOTE:
        lines += [BACKBONE_NOTE[config.backbone], ""]
    sentence = example_sentence(dataset)
    shown = "p[\"target\"], " if D.targets_of(dataset) != (None,) else ""
    lines += ["## How to use", "",
              "It needs the companion's library, `absa_lib` (the package absa-companion, not on PyPI): the model "
              "reads each sentence with an auxiliary sentence and a context id per "
              + ("(target, aspect)" if shown else "aspect") + ", which `absa_lib` builds, so transformers alone "
              "(its `pipeline()`, `trust_remote_code`, the hub's widget) does not run it. "
              f"Install it (version {__version__} exported this folder):", "", "```bash", install_command(), "```", "",
              "Then this folder is all it needs, offline: the weights, tokenizer and labels are here, and no "
              "backbone is downloaded or installed.", "", "```python",
              "from absa_lib import predict_text", "",
              f"result = predict_text(\"PATH\", \"{sentence}\")   # PATH: this folder",
              "for p in result[\"predictions\"]:",
              f"    print({shown}p[\"aspect\"], p[\"label\"], p[\"probabilities\"])",
              "```", "",
              f"or `absa predict --run PATH \"{sentence}\"` (`--explain` says why, word by word). Each prediction "
              "names its " + ("target, " if shown else "")
              + "aspect, label and the probability of every label; `absa_export.json` holds the run record, the "
              "labels, what each context id stands for and every file's SHA-256, checked before use. From the hub: "
              "`huggingface_hub.snapshot_download(\"REPO\")` gives the folder.", "",
              "The model alone, with transformers' Auto classes, once `import absa_lib.models` has registered "
              "its classes with them:", "", "```python",
              "import absa_lib.models  # registers the model type absa-bert with AutoConfig and AutoModel",
              "from transformers import AutoModel, AutoTokenizer", "",
              "model = AutoModel.from_pretrained(\"PATH\")   # absa_lib's model class, in eval mode",
              "tokenizer = AutoTokenizer.from_pretrained(\"PATH\")",
              "print(type(model).__name__, model.config.id2label)",
              "```", "",
              "Its forward takes `input_ids`, `attention_mask`, `token_type_ids` and `context_ids` (one per input; "
              "`absa_export.json` says what each id stands for) and returns the logits"
              + (f" (with the `{config.aux}` input, one input per candidate label, whose logits say no / yes; "
                 "`predict_text` pools them into one label)" if config.aux in B_VARIANTS else "")
              + "; `predict_text` builds these inputs as the training did.", ""]
    return "\n".join(lines)


def install_command(repository: str | None = None) -> str:
    """The words that install the companion: from its public repository (``absa_lib._version.REPOSITORY``)
    when it is known, else from a checkout; never from PyPI, where the package is not published."""
    repository = _version.REPOSITORY if repository is None else repository
    if repository:
        return f'pip install "absa-companion @ git+{repository}"'
    return "pip install path/to/absa-companion   # a checkout (git clone) of the companion; it is not on PyPI"


def example_sentence(dataset: str) -> str:
    """A sentence the card's example can predict: SentiHood's masks, a SemEval review, or one naming your
    own dataset's first target (predict_text refuses a text that names none)."""
    if D.get(dataset).example:
        return D.get(dataset).example
    target = D.targets_of(dataset)[0]
    return f"The {target} is great" if target else "a review sentence"


def output_names(config: dict) -> list[str]:
    """The names of the model's outputs: the dataset's labels, or no / yes for a B input (NLI-B, QA-B),
    which reads one input per candidate label (:func:`~absa_lib.data.inputs.pool_binary_scores`)."""
    return ["no", "yes"] if config.aux in B_VARIANTS else list(D.LABELS[config.dataset])


def context_map(dataset: str) -> dict[str, list]:
    """What each context id of ``dataset`` stands for: ``{"0": [target or None, aspect], ...}``."""
    return {str(D.context_id(dataset, t, a)): [t, a] for t in D.targets_of(dataset) for a in D.ASPECTS[dataset]}


def export_run(run: Run, folder: str | Path, data_dir=None) -> Path:
    """Write the dev-selected model of ``run`` (its labels named), its tokenizer, :func:`card_text` and
    :data:`~absa_lib.training.records.EXPORT_RECORD` (the run record, labels, contexts, every file's
    SHA-256) to ``folder``, a new or empty folder; return the folder. Written beside it under a
    temporary name and renamed into place, so a killed export leaves no folder that looks complete."""
    folder = Path(folder).absolute()
    if folder.is_symlink():
        raise AbsaError(f"{folder}: a symbolic link (to {os.readlink(folder)}), not a folder; give a new folder to "
                        "export to")
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise AbsaError(f"{folder}: exists and is not an empty folder; give a new folder to export to")
    model = run.load_model("best")                       # verified: this run's, at its dev-selected epoch
    card = card_text(run, data_dir)
    dataset, labels = run.config.dataset, list(D.LABELS[run.config.dataset])
    outputs = output_names(run.config)                   # what the classifier's outputs mean (sets num_labels)
    model.config.id2label, model.config.label2id = dict(enumerate(outputs)), {lab: i for i, lab in enumerate(outputs)}
    ensure_writable(folder.parent, "give a folder you can write to")
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".partial", dir=folder.parent))
    try:
        model.save_pretrained(staging)
        load_tokenizer(run.config.backbone).save_pretrained(staging)
        atomic_write_bytes(staging / CARD, card.encode("utf-8"))
        for p in staging.iterdir():                      # safetensors writes 0o600; the rest are the umask's
            p.chmod(new_file_mode())
        write_export_record(staging, run, labels, context_map(dataset))
        staging.chmod(new_dir_mode())
        if folder.is_dir():
            folder.rmdir()                               # empty (checked above); another export's files: refused
        staging.rename(folder)
    except (OSError, SafetensorError) as err:          # safetensors' write error (a full disk) is its own type
        shutil.rmtree(staging, ignore_errors=True)
        raise AbsaError(f"{folder}: the export could not be written ({one_line(err)}); nothing was left there. "
                        "Free some space, or give another new folder") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return folder
