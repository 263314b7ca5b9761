"""Records written by earlier versions, upgraded in one place: when they are read, never on disk.

Each record's format is told by what it holds (the files carry no number: a committed run's bytes stay
as they were written). Every "written before" rule of the companion is here, with the format it
upgrades from; the readers (:mod:`absa_lib.training.records.typed`) see the current format only.

    record        format  how it is told                      upgraded at load
    config.json   1       no ``backbone_fingerprint``         its run id hashes every field as recorded,
                                                              the neutral ones included (:func:`config_identity`)
                  2       a field of :data:`FIELDS_ADDED`     the field at its neutral value, which is the
                          missing                             behaviour the run had (:func:`config_fields`)
                  3       current
    env.json      1       no ``cpu_model``                    the machine named by its architecture
                                                              (``processor``) only (:func:`env_fields`)
                  2       current
    metrics.json  1       no ``predictions``                  the run kept no per-example predictions
                  2       no ``trivial_floor``                whether the run beat the trivial predictors is
                                                              not known (:meth:`RunMetrics.at_trivial_level`
                                                              None); the tables score them from the data
                  3       current; a metric declared later    ``–`` with :data:`~absa_lib.evaluation.metrics.NOT_RECORDED`
                          is absent from its epochs           in every table (absa_lib.evaluation.metrics)

Two older formats live with their own readers, since only those readers open the files: kept
predictions stored as float16 logs (:mod:`absa_lib.evaluation.kept`) and checkpoints written before
AbsaConfig (:mod:`absa_lib.models.model_config`).
"""

from __future__ import annotations

from absa_lib.training.config import NEUTRAL_DEFAULTS, TrainConfig

FIELDS_ADDED = NEUTRAL_DEFAULTS
"""TrainConfig fields added after the first runs were recorded, at the value that reproduces those
runs (they are left out of the run identity at that value, so earlier runs keep their ids)."""

RECORD_EXTRAS = ("run_id", "data_sha256", "dataset_scheme", "backbone_fingerprint", "absa_lib_version",
                 "vectors_sha256", "n_train_examples", "n_train_inputs", "n_dev_examples", "n_test_examples")
"""What a run's config.json records besides the TrainConfig fields."""


def config_format(record: dict) -> int:
    """The format of a config.json record (the table above)."""
    if "backbone_fingerprint" not in record:
        return 1
    return 2 if any(name not in record for name in FIELDS_ADDED) else 3


def config_fields(record: dict) -> dict:
    """The TrainConfig fields of a config.json record, in the current format: a field added after
    the record was written at the value the run had."""
    fields = {k: v for k, v in record.items() if k in TrainConfig.__dataclass_fields__}
    return {**fields, **{k: v for k, v in FIELDS_ADDED.items() if k not in fields}}


def upgraded_config(record: dict) -> dict:
    """A config.json record in the current format: a field added after it was written at the value the
    run had (the record's own keys first, in its order)."""
    return {**record, **{k: v for k, v in FIELDS_ADDED.items() if k not in record}}


def config_identity(record: dict) -> dict:
    """The run identity (:func:`~absa_lib.training.config.run_identity`) a config.json record
    describes, from what it recorded: nothing is recomputed (neither the data nor the backbone's
    weights are needed), so its hash is the run id the record must carry. A format-1 record is hashed
    as it was then: every field, the neutral ones included, and no backbone fingerprint."""
    fields = {k: v for k, v in record.items() if k not in RECORD_EXTRAS}
    identity = {"config": fields, "data_sha256": record.get("data_sha256")}
    if config_format(record) > 1:
        identity["config"] = {k: v for k, v in fields.items()
                              if not (k in NEUTRAL_DEFAULTS and v == NEUTRAL_DEFAULTS[k])}
        identity["backbone_fingerprint"] = record["backbone_fingerprint"]
    for extra in ("dataset_scheme", "vectors_sha256"):
        if extra in record:
            identity[extra] = record[extra]
    return {**identity, "absa_lib_version": record.get("absa_lib_version")}


def env_fields(record: dict) -> dict:
    """An env.json record in the current format: a format-1 record names no CPU model."""
    return {"cpu_model": None, **record}
