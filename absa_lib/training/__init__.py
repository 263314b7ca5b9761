"""Training: what determines a run, the loop that trains it, and the records it leaves.

    config      :class:`TrainConfig` (every field declared once), the run identity and its hash
    loop        :func:`train`: open or resume -> epochs -> evaluate -> record -> finish
    recorder    the epoch's bookkeeping: what the run folder holds after each epoch (the selection,
                the kept predictions, the resume state), and the resume itself
    records     the run folder's owner: every record of a run folder and of an exported folder, typed,
                checked and upgraded once at load; the cache lookup (find_runs)
    runs        launching runs: how a process trains them, the lock of a run, the machine it records
    splits      a run's tokenized splits and each epoch's batches (seeded per epoch)
    optim       AdamW with the paper's schedule
    checkpoint  safetensors checkpoints with checksums, and the resume state
"""

from absa_lib.lazy import lazy_names

_API = {"TrainConfig": "config", "train": "loop", "Run": "records", "find_runs": "records", "load_run": "records"}
__all__ = ["Run", "TrainConfig", "find_runs", "load_run", "train"]


__getattr__ = lazy_names(__name__, _API)   # the names above, imported when first asked for
