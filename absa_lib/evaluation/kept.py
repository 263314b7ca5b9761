"""Per-example predictions kept in a run's record: the evidence an item-level test needs (the paired
bootstrap of :mod:`absa_lib.evaluation.significance`), small enough to commit with the record.

A run keeps the class probabilities of every test example at each epoch a protocol selects
(``dev_best``, ``test_best``: one epoch when they agree) and of every dev example at the dev-selected
epoch, in ``predictions.npz`` beside its metrics record (numpy's compressed archive, no pickled
objects)::

    run_id               the run's id: a copy of another run's file is refused
    dataset, labels      the dataset and its label names, in the columns' order
    keys_<split>         sha256 of the split's example keys (id, [target,] aspect) in the rows' order:
                         two runs' rows are paired only when their keys agree
    gold_<split>         (N,) int8 gold label ids
    p_<split>_<epoch>    (N, C) the probabilities the metrics were computed from, bit for bit (float32
                         as inference gives them)

so every recorded metric recomputes exactly from the kept rows (they are the array the metrics were
computed from), and :meth:`Kept.disagreement` checks it when a comparison reads them (a run whose records and kept rows
disagree is refused). Files written before (``logp_<split>_<epoch>``: float16 logs of the
probabilities, a relative |ln p|·2⁻¹¹ off) still load; where rounding turned near-ties into ties,
the check refuses them. The metrics record names the file with its size and
sha256 and the epochs it keeps per split (``"predictions": {"file", "bytes", "sha256", "epochs": {"dev":
[...], "test": [...]}}``) and :func:`read_kept` checks them.
A record without the entry (a run trained before predictions were kept) loads as before, with none.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from absa_lib.checks import is_int
from absa_lib.data.datasets import LABELS
from absa_lib.errors import AbsaError, one_line
from absa_lib.evaluation.metrics import compute_metrics
from absa_lib.fileio import atomic_write_bytes

SPLITS = ("dev", "test")


def keys_digest(examples) -> str:
    """sha256 of the examples' keys in order: what a kept row is the prediction for."""
    text = "\n".join("\t".join(str(part) for part in e.key) for e in examples)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class Kept:
    """One run's kept predictions: the gold labels and keys of each split, and per (split, epoch) the
    (N, C) rows: the probabilities as computed (float32 or float64), or, in a file written before,
    float16 logs of them."""

    run_id: str
    dataset: str
    gold: dict[str, np.ndarray]                      # split -> (N,) int8
    keys: dict[str, str]                             # split -> keys_digest of its examples
    labels: tuple[str, ...]                          # the columns' labels
    rows: dict[tuple[str, int], np.ndarray] = field(default_factory=dict)   # (split, epoch) -> (N, C)

    @classmethod
    def for_splits(cls, run_id: str, dataset: str, splits: dict[str, list]) -> Kept:
        """An empty record for the examples of each split (``{split: examples}``)."""
        gold = {s: np.array([e.label_id for e in ex], dtype=np.int8) for s, ex in splits.items()}
        return cls(run_id, dataset, gold, {s: keys_digest(ex) for s, ex in splits.items()}, tuple(LABELS[dataset]))

    @property
    def epochs(self) -> dict[str, list[int]]:
        """The epochs kept, per split."""
        return {split: sorted(e for s, e in self.rows if s == split) for split in SPLITS}

    def add(self, epoch: int, probs: dict[str, np.ndarray]) -> None:
        """Keep the epoch's class probabilities (``{split: (N, C)}``)."""
        for split, p in probs.items():
            p = np.asarray(p)
            if p.dtype not in (np.float32, np.float64):
                p = p.astype(np.float64)
            if p.shape != (len(self.gold[split]), len(self.labels)):
                raise AbsaError(f"kept predictions: {split} probabilities of shape {p.shape}, expected "
                                f"({len(self.gold[split])}, {len(self.labels)})")
            self.rows[split, epoch] = p.copy()

    def keep_only(self, epochs: dict[str, set[int]]) -> None:
        """Keep only ``epochs[split]`` of each split (those the protocols select so far)."""
        self.rows = {(s, e): v for (s, e), v in self.rows.items() if e in epochs[s]}

    def probs(self, split: str, epoch: int) -> np.ndarray | None:
        """(N, C) probabilities of ``split`` at ``epoch``, the array the metrics were computed from (from
        a file written before: float64 from its float16 logs); None when that epoch is not kept."""
        rows = self.rows.get((split, epoch))
        if rows is None or rows.dtype != np.float16:
            return rows
        return np.exp(rows.astype(np.float64))

    def disagreement(self, split: str, epoch: int, recorded: dict) -> list[str]:
        """The metrics of ``recorded`` (a record's metrics of ``split`` at ``epoch``) that the kept rows
        do not give back exactly; [] when they agree (or the epoch is not kept)."""
        probs = self.probs(split, epoch)
        if probs is None:
            return []
        with np.errstate(all="ignore"):
            again = compute_metrics(self.dataset, self.gold[split], probs, tuple(recorded))
        return [k for k, v in recorded.items() if not (again.get(k) == v or (_nan(again.get(k)) and _nan(v)))]

    def to_bytes(self) -> bytes:
        arrays = {"run_id": np.array(self.run_id), "dataset": np.array(self.dataset),
                  "labels": np.array(self.labels)}
        for split in self.gold:
            arrays[f"keys_{split}"] = np.array(self.keys[split])
            arrays[f"gold_{split}"] = self.gold[split]
        for (split, epoch), rows in sorted(self.rows.items()):
            arrays[f"{'logp' if rows.dtype == np.float16 else 'p'}_{split}_{epoch}"] = rows
        buffer = io.BytesIO()         # np.savez_compressed's format, without its clock: same rows, same bytes
        with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for name, array in arrays.items():
                info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                with archive.open(info, "w") as member:
                    np.lib.format.write_array(member, np.asarray(array), allow_pickle=False)
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, where: str, run_id: str) -> Kept:
        """Read a kept file's bytes; anything but the format above, or another run's file, is one line."""
        fix = "the file was damaged or edited: restore it, or retrain the run with --force"
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as npz:
                arrays = {name: npz[name] for name in npz.files}
        except (OSError, ValueError, zipfile.BadZipFile, EOFError) as err:
            raise AbsaError(f"{where}: not a kept-predictions archive ({one_line(err)}); {fix}") from None
        text = {k: str(arrays[k]) if k in arrays and arrays[k].dtype.kind == "U" and arrays[k].ndim == 0 else None
                for k in ("run_id", "dataset")}
        if text["run_id"] != run_id:
            raise AbsaError(f"{where}: holds the predictions of run {text['run_id']}, not of run {run_id}; {fix}")
        dataset, labels = text["dataset"], arrays.get("labels")
        if dataset is None or labels is None or labels.dtype.kind != "U" or labels.ndim != 1 or (
                dataset in LABELS and list(labels) != list(LABELS[dataset])):
            raise AbsaError(f"{where}: its dataset ({dataset!r}) and labels are not a dataset's; {fix}")
        kept = cls(run_id, dataset, {}, {}, tuple(str(x) for x in labels))
        n_labels = len(labels)
        for split in SPLITS:
            gold, keys = arrays.get(f"gold_{split}"), arrays.get(f"keys_{split}")
            if (gold is None or keys is None or gold.dtype != np.int8 or gold.ndim != 1 or keys.dtype.kind != "U"
                    or keys.ndim != 0 or (len(gold) and not 0 <= gold.min() <= gold.max() < n_labels)):
                raise AbsaError(f"{where}: no gold_{split} label ids (int8 in 0..{n_labels - 1}) and keys_{split}; {fix}")
            kept.gold[split], kept.keys[split] = gold, str(keys)
        for name, array in arrays.items():
            kind, _, rest = name.partition("_")
            if kind not in ("p", "logp"):
                continue
            split, _, epoch = rest.partition("_")
            values = (array <= 0).all() if kind == "logp" else ((array >= 0) & (array <= 1)).all()
            dtypes = (np.float16,) if kind == "logp" else (np.float32, np.float64)
            if split not in SPLITS or not epoch.isdigit() or array.dtype not in dtypes or array.shape != (
                    len(kept.gold[split]), n_labels) or not np.isfinite(array).all() or not values:
                what = "float16 log probabilities" if kind == "logp" else "float32 probabilities in [0, 1]"
                raise AbsaError(f"{where}: {name} is not a ({len(kept.gold[split]) if split in SPLITS else 'N'}, "
                                f"{n_labels}) array of {what}; {fix}")
            kept.rows[split, int(epoch)] = array
        return kept


def _nan(value) -> bool:
    return isinstance(value, float) and value != value


def write_kept(path: Path, kept: Kept) -> dict:
    """Write ``kept`` to ``path`` (a run's ``predictions.npz``) atomically; return the entry the metrics
    record names it by."""
    data = kept.to_bytes()
    atomic_write_bytes(Path(path), data)
    return {"file": Path(path).name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(), "epochs": kept.epochs}


def check_entry(entry, where: Path, n_epochs: int, name: str) -> None:
    """The ``predictions`` entry of a metrics record as training writes it (its file is read later)."""
    fix = "the file was edited or damaged: restore it, or retrain with --force"
    epochs = entry.get("epochs") if isinstance(entry, dict) else None
    ok = (isinstance(entry, dict) and entry.get("file") == name and is_int(entry.get("bytes"))
          and isinstance(entry.get("sha256"), str) and len(entry["sha256"]) == 64
          and isinstance(epochs, dict) and set(epochs) == set(SPLITS)
          and all(isinstance(v, list) and all(is_int(e) and 1 <= e <= n_epochs for e in v) for v in epochs.values()))
    if not ok:
        raise AbsaError(f"{where}: predictions is {str(entry)[:160]}, expected {{file: {name}, bytes, sha256, "
                        f"epochs: {{dev: [...], test: [...]}} (epochs 1..{n_epochs})}}; {fix}")


def read_kept(path: Path, entry: dict, run_id: str, record: Path) -> Kept:
    """The kept predictions of the run in ``folder``, checked against ``entry`` (the ``predictions``
    of its metrics record, the file ``record``): the size, the sha256, the run id and the epochs it names."""
    path = Path(path)
    fix = "restore it (it travels with the run's record), or retrain with --force"
    if not path.is_file() or path.is_symlink():
        raise AbsaError(f"{path}: missing, but {record} says the run kept its predictions here; {fix}")
    data = path.read_bytes()
    if len(data) != entry["bytes"] or hashlib.sha256(data).hexdigest() != entry["sha256"]:
        raise AbsaError(f"{path}: its bytes are not those {record.name} names ({len(data)} bytes, sha256 "
                        f"{hashlib.sha256(data).hexdigest()[:12]}…, expected {entry['bytes']}, "
                        f"{entry['sha256'][:12]}…): edited or from another run; {fix}")
    kept = Kept.from_bytes(data, str(path), run_id)
    if kept.epochs != {split: sorted(entry["epochs"][split]) for split in SPLITS}:
        raise AbsaError(f"{path}: keeps epochs {kept.epochs}, {record.name} names {entry['epochs']}; {fix}")
    return kept


def resumed(path: Path, run_id: str, upto: int, fresh: Kept) -> Kept:
    """On a resume after epoch ``upto``: the kept predictions of epochs up to ``upto`` of the file the
    interrupted process wrote (if it is this run's, for the same examples), else ``fresh`` (the epochs
    selected before the interruption then keep none; later ones do)."""
    path = Path(path)
    try:
        old = Kept.from_bytes(path.read_bytes(), str(path), run_id)
    except (OSError, AbsaError):
        return fresh
    if old.keys != fresh.keys or old.dataset != fresh.dataset:
        return fresh
    fresh.rows = {k: v for k, v in old.rows.items() if k[1] <= upto}
    return fresh
