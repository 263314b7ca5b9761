"""Training: what determines a run, the loop that trains it, and the records it leaves.

    config      :class:`TrainConfig` (every field declared once), the run identity and its hash
    loop        :func:`train`: open or resume -> epochs -> evaluate -> record -> finish
    recorder    the epoch's bookkeeping: what the run folder holds after each epoch (the selection,
                the kept predictions, the resume state), and the resume itself
    runs        run folders: the records, the identity check, the cache lookup, locks, environment;
                exported model folders
    splits      a run's tokenized splits and each epoch's batches (seeded per epoch)
    optim       AdamW with the paper's schedule
    checkpoint  safetensors checkpoints with checksums, and the resume state
"""

import importlib

_API = {"TrainConfig": "config", "train": "loop", "Run": "runs", "find_runs": "runs", "load_run": "runs"}
__all__ = ["Run", "TrainConfig", "find_runs", "load_run", "train"]


def __getattr__(name: str):
    """The names above, imported when first asked for: ``absa_lib.training.config`` alone needs no torch."""
    if name not in _API:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_API[name]}"), name)
    globals()[name] = value
    return value
