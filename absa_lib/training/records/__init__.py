"""The run folder's owner: every file of a run folder and of an exported folder, read and written here.

A run lives in ``<runs_dir>/<dataset>/<model>/<run_id>/``::

    config.json            the TrainConfig, run_id, data checksums, backbone fingerprint, library
                           version; load_run checks that the run_id is the hash of the rest
    metrics.json           per epoch: train loss, time, dev and test metrics; the selections
                           (dev_best = default protocol, test_best = the official code's, last);
                           the best trivial predictor on the run's test examples (trivial_floor);
                           "complete": true only once training has finished
    env.json               Python, torch, transformers, device (GPU name; CPU model and whether it has
                           native bf16), OS, git commit and dirty flag, the first epoch this process
                           trained (from_epoch); after a resume, the earlier processes' under earlier
    predictions_{dev,test}.csv   the dev-best model's probabilities (absa_lib.evaluation.predictions format)
    predictions.npz        the dev and test probabilities of the dev-best and test-best epochs, compact,
                           named with its sha256 in metrics.json (absa_lib.evaluation.kept); kept with
                           the record (runs trained before it existed have none)
    curve.png              the training curve, drawn by the callers (absa_lib.reports.plots.save_run_curve)
    checkpoints/{best,last}/     safetensors weights (+ trainer state in last/) and checksums.json,
                                 verified before use; not for git

    layout    the names of those files (:class:`RunFolder`), and of an exported folder's record
    upgrade   records of earlier formats, upgraded at load in one place
    typed     RunConfig, RunMetrics, RunEnv, ExportRecord: each record read, checked and typed once
    store     Run and ExportedModel; load_run, find_runs, load_model_folder; the writers

Every file is written atomically (:mod:`absa_lib.fileio`), so a killed process leaves either the old
file or the new one, and ``complete`` is written last.
"""

from absa_lib.lazy import lazy_names

_API = {  # name: the module of this package that defines it, imported when first asked for (the run_all
    # driver reads the layout alone, without torch)
    **dict.fromkeys(("EXPORT_RECORD", "KEPT_FILE", "KEPT_RECORD_FILES", "RECORD_FILES", "RunFolder", "headless_folders",
                     "run_folders"),
                    "layout"),
    **dict.fromkeys(("ExportRecord", "RunConfig", "RunEnv", "RunMetrics", "epoch_seconds", "select_epochs"), "typed"),
    **dict.fromkeys(("ExportedModel", "Run", "find_runs", "load_model_folder", "load_run", "recorded_cost",
                     "unfinished_progress", "write_config", "write_env", "write_export_record", "write_metrics"), "store"),
}
__all__ = sorted(_API)


__getattr__ = lazy_names(__name__, _API)   # the names above, imported when first asked for
