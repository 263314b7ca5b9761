"""The data layer: the two benchmarks and your own reviews, read as :class:`Example` rows, and the
model inputs built from them.

    datasets   SentiHood and SemEval-2014 Task 4: labels, aspects, targets, loading and checks
    download   fetching the raw files and checking them against pinned SHA-256 sums
    inputs     the auxiliary sentences (NLI-M, QA-M, NLI-B, QA-B) and context ids: what a model reads
    features   tokenized inputs and their batches
    own_data   a folder of your own reviews registered as a dataset (docs/own_data.md)

``from absa_lib import data`` gives the datasets' names: ``data.load_examples("sentihood", "dev")``.
"""

from absa_lib.data.datasets import (
    ASPECTS,
    DATASETS,
    LABELS,
    NONE_LABEL,
    OWN,
    SENTIMENTS,
    SPLITS,
    TARGETS,
    Example,
    context_id,
    eval_subset,
    group_size,
    known,
    load_examples,
    none_id,
    num_contexts,
    split_stats,
    stats,
    targets_of,
    texts_in_train,
    train_subset,
)

__all__ = ["ASPECTS", "DATASETS", "LABELS", "NONE_LABEL", "OWN", "SENTIMENTS", "SPLITS", "TARGETS", "Example",
           "context_id", "eval_subset", "group_size", "known", "load_examples", "none_id", "num_contexts",
           "split_stats", "stats", "targets_of", "texts_in_train", "train_subset"]
