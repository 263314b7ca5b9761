"""absa_lib: a reproducible companion to Wu & Ong (AAAI-21), "Context-Guided BERT for Targeted
Aspect-Based Sentiment Analysis" (CG-BERT and QACG-BERT).

The public API::

    from absa_lib import TrainConfig, train, load_run, predict_text, evaluate, build_model, load_examples
    run = train(TrainConfig(dataset="sentihood", model="qacg-bert", backbone="minilm", epochs=3))
    run.selected("dev_best")["test"]                       # test metrics at the dev-best epoch
    predict_text(run, "LOCATION1 is lovely but pricey")    # label + probabilities per target × aspect
    evaluate("sentihood", "test", "my_predictions.csv")    # the paper's metrics of a prediction file
    name = register_dataset("my_reviews/")                 # your own data (docs/own_data.md)
    train(TrainConfig(dataset=name, model="qacg-bert", epochs=3))

(The modules behind them: :mod:`absa_lib.training`, :mod:`absa_lib.config`, :mod:`absa_lib.runs`,
:mod:`absa_lib.apply`, :mod:`absa_lib.predictions`, :mod:`absa_lib.own_data`.)
"""

__version__ = "0.1.0"

from absa_lib.apply import predict_text  # noqa: E402
from absa_lib.config import TrainConfig  # noqa: E402
from absa_lib.data import load_examples  # noqa: E402
from absa_lib.errors import AbsaError  # noqa: E402
from absa_lib.inputs import build_inputs  # noqa: E402
from absa_lib.metrics import compute_metrics  # noqa: E402
from absa_lib.models import build_model, load_tokenizer  # noqa: E402
from absa_lib.own_data import register_dataset  # noqa: E402
from absa_lib.predictions import evaluate_file as evaluate  # noqa: E402
from absa_lib.runs import Run, find_runs, load_run  # noqa: E402
from absa_lib.training import train  # noqa: E402

__all__ = ["AbsaError", "TrainConfig", "Run", "__version__", "build_inputs", "build_model", "compute_metrics",
           "evaluate", "find_runs", "load_examples", "load_run", "load_tokenizer", "predict_text",
           "register_dataset", "train"]
