"""absa_lib: a reproducible companion to Wu & Ong (AAAI-21), "Context-Guided BERT for Targeted
Aspect-Based Sentiment Analysis" (CG-BERT and QACG-BERT).

The public API::

    from absa_lib import TrainConfig, train, load_run, predict_text, evaluate, build_model, load_examples
    run = train(TrainConfig(dataset="sentihood", model="qacg-bert", backbone="minilm", epochs=3))
    run.selected("dev_best")["test"]                       # test metrics at the dev-best epoch
    predict_text(run, "LOCATION1 is lovely but pricey")    # label + probabilities per target × aspect
    predict_text(run, "LOCATION1 is lovely", explain=True)  # + each word's share of the gradient (Figure 3)
    compare(find_runs("runs", model="qacg-bert"), find_runs("runs", model="bert-pair"))   # seed by seed, a verdict
    export_run(run, "my-model/")                           # a Hugging Face folder with a model card
    evaluate("sentihood", "test", "my_predictions.csv")    # the paper's metrics of a prediction file
    name = register_dataset("my_reviews/")                 # your own data (docs/own_data.md)
    train(TrainConfig(dataset=name, model="qacg-bert", epochs=3))

The package in layers, each importing only those below it (``pyproject.toml``'s import contract):
``data`` -> ``models`` -> ``evaluation`` -> ``training`` -> ``apply`` -> ``reports`` -> ``harness``
-> ``cli``. The names above are looked up when first used, so ``import absa_lib.data`` loads the data
layer alone.
"""

from __future__ import annotations

import importlib
import importlib.abc
import sys
import warnings

from absa_lib._version import __version__

# transformers imports tqdm.auto, which in a Jupyter kernel without ipywidgets warns "IProgress not found"
# (its download bars then print as text). This package's own progress never uses tqdm.auto and says once
# when a bar needs ipywidgets (absa_lib.training.progress), so the warning is filtered here, before any
# module that imports transformers loads.
warnings.filterwarnings("ignore", message="IProgress not found")

_API = {  # name: the module that defines it
    "AbsaError": "absa_lib.errors", "TrainConfig": "absa_lib.training.config", "Run": "absa_lib.training.records",
    "train": "absa_lib.training.loop", "find_runs": "absa_lib.training.records", "load_run": "absa_lib.training.records",
    "load_examples": "absa_lib.data.datasets", "build_inputs": "absa_lib.data.inputs",
    "register_dataset": "absa_lib.data.own_data", "build_model": "absa_lib.models.registry",
    "load_tokenizer": "absa_lib.models.backbones", "compute_metrics": "absa_lib.evaluation.metrics",
    "evaluate": "absa_lib.evaluation.predictions", "predict_text": "absa_lib.apply",
    "predict_texts": "absa_lib.apply", "compare": "absa_lib.reports.compare", "export_run": "absa_lib.reports.model_card",
}
_RENAMED = {"evaluate": "evaluate_file"}
__all__ = ["__version__", *sorted(_API)]

# Modules of the earlier flat layout (absa_lib.config, absa_lib.training as a module, ...): where
# each went, so that an old import fails with one line naming the new place.
MOVED = {
    "config": "absa_lib.training.config", "runs": "absa_lib.training.runs", "optim": "absa_lib.training.optim",
    "checkpoint": "absa_lib.training.checkpoint", "download": "absa_lib.data.download",
    "inputs": "absa_lib.data.inputs", "features": "absa_lib.data.features", "own_data": "absa_lib.data.own_data",
    "metrics": "absa_lib.evaluation.metrics", "inference": "absa_lib.evaluation.inference",
    "predictions": "absa_lib.evaluation.predictions", "analysis": "absa_lib.evaluation.analysis",
    "paper_numbers": "absa_lib.reports.paper_numbers", "tables": "absa_lib.reports.tables",
    "variant_tables": "absa_lib.reports.variant_tables", "summary": "absa_lib.reports.summary",
    "plateau": "absa_lib.reports.plateau", "figure_data": "absa_lib.reports.figure_data",
    "plots": "absa_lib.reports.plots", "data_overview": "absa_lib.reports.data_overview",
    "grid": "absa_lib.harness.grid", "ablations": "absa_lib.harness.ablations",
    "session": "absa_lib.harness.session", "runner": "absa_lib.harness.runner",
    "profiles": "absa_lib.harness.profiles", "notebook_script": "absa_lib.harness.notebook_script",
    "manifest": "absa_lib.harness.manifest", "models.per_context": "absa_lib.models.bert_single",
    "models.alstm": "absa_lib.models.other.alstm", "models.man": "absa_lib.models.other.man",
    "models.orthogonal": "absa_lib.models.other.orthogonal", "models.encoders": "absa_lib.models.other.encoders",
    "remote": "scripts/remote.py (python scripts/remote.py --help)",
}


def _moved_message(old: str) -> str:
    return (f"absa_lib.{old} moved to {MOVED[old]} when the package was layered (it is now in layers: "
            "data, models, evaluation, training, reports, harness); import it from there")


def __getattr__(name: str):
    if name in _API:
        value = getattr(importlib.import_module(_API[name]), _RENAMED.get(name, name))
        globals()[name] = value
        return value
    if name in MOVED:
        raise AttributeError(_moved_message(name))
    raise AttributeError(f"module 'absa_lib' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})


class _MovedFinder(importlib.abc.MetaPathFinder):
    """``import absa_lib.config`` (a module of the old layout) -> ModuleNotFoundError naming the new place."""

    def find_spec(self, fullname, path=None, target=None):
        old = fullname.removeprefix("absa_lib.")
        if fullname.startswith("absa_lib.") and old in MOVED:
            raise ModuleNotFoundError(_moved_message(old), name=fullname)
        return None


if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
    sys.meta_path.append(_MovedFinder())
