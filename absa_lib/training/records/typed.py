"""What each record of a run folder holds, typed: read, checked and upgraded once, when it is loaded.

    RunConfig     config.json    the TrainConfig, its run id (checked to be the hash of the record) and
                                 the rest of its identity; the split sizes
    RunMetrics    metrics.json   a row per epoch, the three selections (checked to be what the epochs
                                 give), the selection metric, the kept predictions' entry, the trivial
                                 floor on the run's test examples
    RunEnv        env.json       the machine and the versions the run trained with
    ExportRecord  absa_export.json   the run record an exported model comes from, its labels and
                                 contexts, the SHA-256 of every file the export wrote

A record of an earlier format is upgraded by :mod:`absa_lib.training.records.upgrade` before it is
typed; ``record`` keeps each as written (what a run id hashes, what an export copies).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from absa_lib.checks import is_kind
from absa_lib.data.own_data import register_scheme, scheme_from_dict
from absa_lib.errors import AbsaError, one_line
from absa_lib.evaluation.kept import check_entry
from absa_lib.training.config import TrainConfig, config_hash
from absa_lib.training.records.layout import EXPORT_RECORD, KEPT_FILE
from absa_lib.training.records.upgrade import (
    RECORD_EXTRAS,
    config_fields,
    config_identity,
    env_fields,
    upgraded_config,
)

CONFIG_FIX = "restore the file, or train the run again with `absa train ... --force`"
METRICS_FIX = "the file was edited or damaged: restore it, or retrain with --force"
EXPORT_FIX = "export the run again (absa export RUN DIR)"
ENV_FIX = "delete it (the next `absa train` of the run writes it again; its finished epochs stay)"


class _NameTaken(Exception):
    """A run record's own-data scheme clashes with another dataset of that name in this process."""


@dataclass(frozen=True)
class RunConfig:
    """A run's config.json: ``train`` (its TrainConfig, in the current format) and ``record`` (as
    written). Its fields read as attributes (``config.seed``, ``config.run_id``, ``config.data_sha256``)
    and, for the functions that take any configuration mapping (:func:`~absa_lib.training.config.describe`),
    as a read-only mapping of the upgraded record."""

    train: TrainConfig
    record: dict
    upgraded: dict = field(init=False, repr=False, compare=False)   # the record in the current format

    def __post_init__(self) -> None:
        object.__setattr__(self, "upgraded", upgraded_config(self.record))

    def __getattr__(self, name: str):
        if name in TrainConfig.__dataclass_fields__:
            return getattr(self.train, name)
        if name in RECORD_EXTRAS:
            return self.record.get(name)
        raise AttributeError(f"a run's config has no field {name!r}")

    def __getitem__(self, name: str):
        return self.upgraded[name]

    def get(self, name: str, default=None):
        return self.upgraded.get(name, default)

    def keys(self):
        return self.upgraded.keys()

    def items(self):
        return self.upgraded.items()

    def __iter__(self):
        return iter(self.upgraded)

    def __len__(self) -> int:
        return len(self.upgraded)

    def __contains__(self, name) -> bool:
        return name in self.upgraded

    @classmethod
    def from_record(cls, record, source: Path) -> RunConfig:
        """The config of a run record, after checking that it is one and that its run_id is the hash
        of what it records (an edited ``dataset``, ``aux`` or ``model`` would otherwise make ``absa
        predict`` answer confidently with the wrong labels). A dataset of your own is registered from
        the scheme the record carries.

        Raises:
            AbsaError: naming ``source``: not a JSON object, a missing or wrong-typed field, or a
                run_id that does not match.
        """
        needed = ("run_id", "dataset", "model", "aux", "backbone")
        if not isinstance(record, dict) or not set(needed) <= set(record):
            if isinstance(record, dict) and "absa_model" in record:     # a checkpoint's config.json
                raise AbsaError(f"{source}: a model's config (a checkpoint, or an exported folder without its "
                                f"{EXPORT_RECORD}, or one still being written), not a run record; give the run folder "
                                "(the one holding checkpoints/) as `absa train` printed it, or a complete `absa "
                                "export` folder")
            got = (type(record).__name__ if not isinstance(record, dict)
                   else f"no {', '.join(k for k in needed if k not in record)}")
            raise AbsaError(f"{source}: expected a run record (a JSON object with run_id, dataset, model, aux, "
                            f"backbone and the other training fields), got {got}; {CONFIG_FIX}")
        try:
            if "dataset_scheme" in record:              # your own data: the run knows its labels and aspects
                scheme = scheme_from_dict(record["dataset_scheme"], "field dataset_scheme")
                if scheme.name != record["dataset"]:
                    raise AbsaError(f"dataset_scheme names {scheme.name!r}, the run's dataset is "
                                    f"{record['dataset']!r}")
                try:
                    register_scheme(scheme)
                except AbsaError as err:                    # the record is fine: another dataset took the name
                    raise _NameTaken(str(err)) from None
            train = TrainConfig(**config_fields(record))
        except AbsaError as err:
            raise AbsaError(f"{source}: {err}; {CONFIG_FIX}") from None
        except _NameTaken as err:
            raise AbsaError(f"{source}: {err}; runs of two datasets of one name cannot be read together: "
                            "summarise or load them apart, or give one dataset another name") from None
        digest = config_hash(config_identity(record))
        if record["run_id"] != digest:
            raise AbsaError(f"{source}: run_id {record['run_id']!r} is not the hash of the recorded configuration "
                            f"({digest}): the file was edited or damaged; {CONFIG_FIX}")
        return cls(train=train, record=record)


@dataclass(frozen=True)
class RunMetrics:
    """A run's metrics.json: a row per finished epoch (``epoch``, ``train_loss``, ``seconds``,
    ``eval_seconds``, ``dev`` and ``test`` metrics, ...), the epoch each protocol selects, and how the
    run names its kept predictions (None: it kept none, format 1), and the best trivial predictor on
    the run's test examples (``{"predictor", "test"}``, its selection metric as a fraction; None:
    written before runs recorded it, format 2; :meth:`at_trivial_level`)."""

    epochs: list[dict]
    selection: dict                          # {protocol: {"epoch", "dev", "test"}}: dev_best, test_best, last
    selection_metric: str
    complete: bool
    predictions: dict | None = None
    process_seconds: float | None = None     # the whole process, when a grid launched it
    trivial_floor: dict | None = None        # {"predictor", "test"}: the best trivial predictor on test

    @classmethod
    def of(cls, epochs: list[dict], selection_metric: str, complete: bool, predictions: dict | None = None,
           process_seconds: float | None = None, trivial_floor: dict | None = None) -> RunMetrics:
        """The record of ``epochs`` so far, with the epochs its protocols select."""
        return cls(epochs=epochs, selection=select_epochs(epochs, selection_metric), selection_metric=selection_metric,
                   complete=complete, predictions=predictions, process_seconds=process_seconds,
                   trivial_floor=trivial_floor)

    def selected(self, protocol: str, where: Path) -> dict:
        """``{"epoch", "dev", "test"}`` at the epoch ``protocol`` chooses."""
        try:
            return self.selection[protocol]
        except KeyError:
            raise AbsaError(f"{where}: no '{protocol}' selection recorded; expected one of "
                            f"{sorted(self.selection)}") from None

    def at_trivial_level(self, protocol: str = "dev_best") -> str | None:
        """Why the epoch ``protocol`` selects is no better than the best trivial predictor on the run's
        test examples (its test selection metric at most the floor's), as one line; None when it is
        better, or when the record has no floor (written before runs recorded one)."""
        floor = self.trivial_floor
        if floor is None:
            return None
        picked, metric = self.selection[protocol], self.selection_metric
        value = picked["test"][metric]
        if value > floor["test"]:                   # NaN is no better
            return None
        return (f"test {metric} {100 * value:.1f} at the {protocol.replace('_', '-')} epoch {picked['epoch']} is no "
                f"better than the trivial {floor['predictor']}'s {100 * floor['test']:.1f} "
                f"({100 * (value - floor['test']):+.1f} points)")

    @property
    def train_seconds(self) -> float:
        """Training seconds over the epochs (evaluation not counted)."""
        return sum(e["seconds"] for e in self.epochs)

    @property
    def seconds(self) -> float:
        """Training and evaluation seconds over the epochs (:func:`epoch_seconds`)."""
        return epoch_seconds(self.epochs)

    def to_record(self) -> dict:
        """The metrics.json training writes."""
        record = {"epochs": self.epochs, "selection": self.selection, "selection_metric": self.selection_metric,
                  "complete": self.complete}
        if self.predictions is not None:
            record["predictions"] = self.predictions
        if self.process_seconds is not None:
            record["process_seconds"] = self.process_seconds
        if self.trivial_floor is not None:
            record["trivial_floor"] = self.trivial_floor
        return record

    @classmethod
    def from_record(cls, metrics, where: Path, n_epochs: int) -> RunMetrics:
        """A finished run's metrics.json as training writes it, since every table reads it: ``complete``
        true, the epochs 1 to ``n_epochs`` (the run's config) in order, every dev and test metric of
        every epoch a fraction in [0, 1] (NaN: undefined, e.g. an AUC without both classes), and the
        recorded selections those epochs give."""
        if not isinstance(metrics, dict):
            raise AbsaError(f"{where}: expected a JSON object, got {type(metrics).__name__}; delete "
                            "the run folder or rerun with --force")
        if metrics.get("complete") is not True:
            raise AbsaError(f"{where}: complete is {metrics.get('complete')!r}, expected true; {METRICS_FIX}")
        epochs, sel_metric = metrics.get("epochs"), metrics.get("selection_metric")
        if not isinstance(epochs, list) or not epochs:
            raise AbsaError(f"{where}: no epochs recorded (epochs is {epochs!r}); {METRICS_FIX}")
        numbers = [e.get("epoch") if isinstance(e, dict) else None for e in epochs]
        if numbers != list(range(1, n_epochs + 1)):
            raise AbsaError(f"{where}: epochs {numbers[:30]} recorded, expected 1 to {n_epochs} (the run's config.json "
                            f"trains {n_epochs}); {METRICS_FIX}")
        if not isinstance(sel_metric, str):
            raise AbsaError(f"{where}: selection_metric is {sel_metric!r}, expected the name of a metric; {METRICS_FIX}")
        for i, epoch in enumerate(epochs, 1):
            for split in ("dev", "test"):
                values = epoch.get(split)
                if not isinstance(values, dict) or sel_metric not in values:
                    raise AbsaError(f"{where}: epoch {i} has no {split} {sel_metric!r} (the selection metric); "
                                    f"{METRICS_FIX}")
                for key, v in values.items():
                    if not is_kind(v, (int, float)) or not (math.isnan(v) or 0 <= v <= 1):
                        raise AbsaError(f"{where}: epoch {i}, {split} {key} is {v!r}, expected a fraction in [0, 1] "
                                        f"(or NaN: undefined); {METRICS_FIX}")
        if "predictions" in metrics:
            check_entry(metrics["predictions"], where, n_epochs, KEPT_FILE)
        if "trivial_floor" in metrics:
            check_floor(metrics["trivial_floor"], where)
        try:
            again, recorded = select_epochs(epochs, sel_metric), dict(metrics["selection"])
        except (KeyError, TypeError, ValueError) as err:
            raise AbsaError(f"{where}: its epochs cannot be read ({one_line(err)}); delete the run "
                            "folder or rerun with --force") from None
        for protocol, picked in again.items():       # compared as JSON text, where NaN equals NaN
            if json.dumps(recorded.get(protocol), sort_keys=True) != json.dumps(picked, sort_keys=True):
                raise AbsaError(f"{where}: the recorded {protocol} selection is not what its epochs give (epoch "
                                f"{picked['epoch']}); {METRICS_FIX}")
        if "predictions" in metrics:                 # training keeps the epochs the protocols select, no others
            dev_best, test_best = again["dev_best"]["epoch"], again["test_best"]["epoch"]
            expected = {"dev": [dev_best], "test": sorted({dev_best, test_best})}
            if {k: sorted(v) for k, v in metrics["predictions"]["epochs"].items()} != expected:
                raise AbsaError(f"{where}: its kept predictions are of epochs {metrics['predictions']['epochs']}, "
                                f"but its selections are dev epoch {dev_best}, test epochs {expected['test']}; "
                                f"{METRICS_FIX}")
        return cls(epochs=epochs, selection=again, selection_metric=sel_metric, complete=True,
                   predictions=metrics.get("predictions"), process_seconds=metrics.get("process_seconds"),
                   trivial_floor=metrics.get("trivial_floor"))


def check_floor(floor, where: Path) -> None:
    """A metrics record's ``trivial_floor``: ``{"predictor": name, "test": a fraction in [0, 1]}``."""
    value = floor.get("test") if isinstance(floor, dict) else None
    if (not isinstance(floor, dict) or set(floor) != {"predictor", "test"} or not isinstance(floor["predictor"], str)
            or not is_kind(value, (int, float)) or not 0 <= value <= 1):
        raise AbsaError(f"{where}: trivial_floor is {floor!r}, expected {{\"predictor\": name, \"test\": a fraction "
                        f"in [0, 1]}}; {METRICS_FIX}")


def epoch_seconds(epochs: list[dict]) -> float:
    """Training and evaluation seconds over epoch rows (``seconds`` + ``eval_seconds``). Not counted:
    the start-up before the first epoch and the checkpoints written after each; a run that a grid
    launched records them too (``startup_seconds`` in its first epoch, ``process_seconds``)."""
    return sum(e.get("seconds", 0) + e.get("eval_seconds", 0) for e in epochs)


def select_epochs(epochs: list[dict], sel_metric: str) -> dict:
    """The epoch each protocol picks, with its dev and test metrics: ``dev_best`` and ``test_best``
    by ``sel_metric`` (ties go to the earlier epoch), and ``last``."""
    def pick(best: dict) -> dict:
        return {"epoch": best["epoch"], "dev": best["dev"], "test": best["test"]}

    return {f"{split}_best": pick(max(epochs, key=lambda r: (r[split][sel_metric], -r["epoch"])))
            for split in ("dev", "test")} | {"last": pick(epochs[-1])}


@dataclass(frozen=True)
class RunEnv:
    """A run's env.json (empty for a run without one): the machine and the versions it trained with."""

    record: dict

    @classmethod
    def from_record(cls, record, where: Path) -> RunEnv:
        if not isinstance(record, dict):
            raise AbsaError(f"{where}: expected a JSON object, got {type(record).__name__}; {ENV_FIX}")
        return cls(env_fields(record) if record else {})

    @property
    def gpu(self) -> str | None:
        return self.record.get("gpu")

    @property
    def device(self) -> str | None:
        """``cuda`` or ``cpu``."""
        return self.record.get("device")

    @property
    def cpu_model(self) -> str | None:
        return self.record.get("cpu_model")

    @property
    def device_name(self) -> str:
        """The machine the run trained on: the GPU's name, else the CPU's (format-1 records name only
        its architecture, e.g. ``x86_64``) with its cores and the threads the run used; "" for a run
        without a record."""
        env = self.record
        if not env:
            return ""
        if env.get("gpu"):
            return env["gpu"]
        cpu = env.get("cpu_model") or env.get("processor") or "CPU"
        threads = env.get("torch_threads")
        return f"{cpu} ({env.get('cpu_count')} cores, {threads} thread{'' if threads == 1 else 's'})"


@dataclass(frozen=True)
class ExportRecord:
    """An exported folder's absa_export.json: the run's config, its labels and contexts, and the
    SHA-256 of every file the export wrote (the only files an exported model reads)."""

    config: RunConfig
    sha256: dict[str, str]
    record: dict

    @classmethod
    def from_record(cls, record, where: Path) -> ExportRecord:
        if (not isinstance(record, dict) or not isinstance(record.get("run"), dict)
                or not isinstance(record.get("sha256"), dict)):
            raise AbsaError(f"{where}: expected the export's record (run, labels, contexts, sha256); {EXPORT_FIX}")
        strange = [n for n in record["sha256"] if n in ("", ".", "..") or "/" in n or "\\" in n or n.startswith(".")]
        if strange:                                # a name outside the folder (/dev/zero) would be read and hashed
            raise AbsaError(f"{where}: {strange[0]!r} is not a file of this folder; the record was edited "
                            f"or damaged; {EXPORT_FIX}")
        return cls(config=RunConfig.from_record(record["run"], where), sha256=record["sha256"], record=record)
