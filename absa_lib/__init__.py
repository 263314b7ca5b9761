"""absa_lib: a reproducible companion to Wu & Ong (AAAI-21), "Context-Guided BERT for Targeted
Aspect-Based Sentiment Analysis" (CG-BERT and QACG-BERT).

The public API is re-exported here as the modules land (datasets, metrics, models, training).
"""

__version__ = "0.1.0"

from absa_lib.errors import AbsaError  # noqa: E402

__all__ = ["AbsaError", "__version__"]
