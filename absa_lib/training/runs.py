"""Launching runs: how a process trains them (:class:`Launch`), the lock that keeps one process per
run, and the machine a run records (:func:`collect_env`). What a run folder holds, and reading and
writing it, is :mod:`absa_lib.training.records`'s.
"""

from __future__ import annotations

import math
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from absa_lib._version import __version__
from absa_lib.device import cpu_has_native_bf16
from absa_lib.errors import AbsaError
from absa_lib.fileio import exclusive_lock, lock_holder
from absa_lib.paths import ensure_writable
from absa_lib.training.records.layout import LOCK


def _git(*args: str) -> str | None:
    root = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def cpu_model() -> str | None:
    """The CPU's model name ("AMD EPYC 9R14 96-Core Processor"), from /proc/cpuinfo on Linux; None
    where that file is absent or names none. ``platform.processor()`` says only "x86_64"."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and value.strip():
                    return value.strip()
    except OSError:
        return None
    return None


def collect_env() -> dict:
    """Versions and hardware next to every result (docs/paper_notes.md §4.3: runs are not bit-reproducible
    across devices, so the device is part of the record)."""
    import numpy
    import torch
    import transformers


    cuda = torch.cuda.is_available()
    commit = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_model": cpu_model(),
        "cpu_native_bf16": cpu_has_native_bf16(),   # what precision "auto" resolves to on this CPU
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "numpy": numpy.__version__,
        "absa_lib": __version__,
        "device": "cuda" if cuda else "cpu",
        "cuda": torch.version.cuda if cuda else None,
        "gpu": torch.cuda.get_device_name(0) if cuda else None,
        "gpu_count": torch.cuda.device_count() if cuda else 0,
        "git_commit": commit,
        "git_dirty": (status != "") if status is not None else None,
    }


def folder_megabytes(path: Path) -> float:
    """The size of the files under ``path``, in MB (10⁶ bytes)."""
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file() and not p.is_symlink()) / 1e6


def duration_text(seconds: float) -> str:
    """A wait as a person reads it: ``3 h 05 min``, ``12 min``, ``40 s``."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes = round(seconds / 60)
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"


@dataclass(frozen=True)
class Launch:
    """How this process trains its runs; none of it changes a result. The callers (``absa train``,
    the grid, a notebook's session) read it from the environment with :meth:`from_environ`; the
    training loop reads no environment variable.

    - ``cache_only`` (``$ABSA_CACHE_ONLY=1``): a run that is not finished is an error instead of being
      trained (a notebook that must only read the runs a grid trained, e.g. on a node with a time limit).
    - ``keep_resume_state`` (``$ABSA_RESUME_STATE``, default 1): every epoch saves the resume state
      (``checkpoints/last``: the weights, Adam's moments and the RNG state; 283 MB for a MiniLM
      CG/QACG-BERT, about 2.2 GB for a SentiHood BERT-single's eight classifiers, written and hashed
      after every epoch). 0 where nothing could resume from it (a machine that is gone when the job
      ends): a run interrupted there starts again from epoch 1. Results are the same either way.
    - ``keep_last`` (``$ABSA_KEEP_LAST=1``): keep the resume state after the run has finished. By
      default it is deleted once the run is marked complete (nothing resumes a finished run), and a
      finished run keeps its records, kept predictions and the dev-selected checkpoint only.
    - ``checkpoint_seconds`` (``$ABSA_CHECKPOINT_SECONDS``, default 300): with the resume state kept,
      it is also saved inside an epoch at most this often, so that an interrupted hour-long epoch
      resumes where it was (the batches done, their losses and the RNG state) and ends with the record
      an uninterrupted run writes.
    - ``spawned_at`` (``$ABSA_SPAWNED_AT``, set by the grid runner): when the grid launched this
      process, so that the run records its start-up (the interpreter, imports, tokenizing, building the
      model, a resumed checkpoint) and its whole wall time. None when no grid launched it.
    - ``stop`` (set by ``absa train`` on SIGTERM, not from the environment): the loop saves the resume
      state at the end of the batch it is in and raises :class:`~absa_lib.errors.RunStopped`, so a run
      stopped by a grid or a scheduler resumes at that batch instead of at its last timed save.
    """

    cache_only: bool = False
    keep_resume_state: bool = True
    spawned_at: float | None = None
    checkpoint_seconds: float = 300.0
    keep_last: bool = False
    stop: threading.Event = field(default_factory=threading.Event, compare=False, repr=False)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] = os.environ) -> Launch:
        """The options ``environ`` sets; a bad ``ABSA_RESUME_STATE`` is refused before any work."""
        resume = environ.get("ABSA_RESUME_STATE", "1")
        if resume not in ("0", "1"):
            raise AbsaError(f"ABSA_RESUME_STATE={resume!r}: expected 1 (save the resume state after every "
                            "epoch, the default) or 0 (do not)")
        try:
            spawned_at = float(environ["ABSA_SPAWNED_AT"])
        except (KeyError, ValueError):               # not launched by a grid (or a value no grid writes)
            spawned_at = None
        if spawned_at is not None and not math.isfinite(spawned_at):
            spawned_at = None
        keep_last = environ.get("ABSA_KEEP_LAST", "0")
        if keep_last not in ("0", "1"):
            raise AbsaError(f"ABSA_KEEP_LAST={keep_last!r}: expected 1 (keep a finished run's resume state) or 0 (delete "
                            "it, the default)")
        every = environ.get("ABSA_CHECKPOINT_SECONDS", "300")
        try:
            checkpoint_seconds = float(every)
        except ValueError:
            checkpoint_seconds = math.nan
        if not (math.isfinite(checkpoint_seconds) and checkpoint_seconds >= 0):
            raise AbsaError(f"ABSA_CHECKPOINT_SECONDS={every!r}: expected the seconds between saves of the resume "
                            "state inside an epoch, a number of 0 or more (default 300)")
        return cls(cache_only=environ.get("ABSA_CACHE_ONLY", "") not in ("", "0"),
                   keep_resume_state=resume == "1", spawned_at=spawned_at, checkpoint_seconds=checkpoint_seconds,
                   keep_last=keep_last == "1")

    def seconds_since_spawned(self) -> float | None:
        """Seconds since the grid launched this process; None when no grid launched it."""
        return None if self.spawned_at is None else round(time.time() - self.spawned_at, 1)


def runs_training_beside(path: Path) -> int:
    """How many runs of the runs folder that holds ``path`` (``<runs_dir>/<dataset>/<model>/<id>``)
    are being trained now, the one at ``path`` included: the run locks that some process holds.
    Recorded after every epoch (``runs_training``), because runs sharing a device change its speed."""
    others = (lock for lock in path.parents[2].glob(f"*/*/*/{LOCK}") if lock.parent != path)
    return 1 + sum(lock_holder(lock) is not None for lock in others)


@contextmanager
def claimed_run_folder(path: Path, force: bool) -> Iterator[None]:
    """Create the run folder, check that files can be written in it, and hold it for the ``with``
    block: a second process (another grid, a notebook) training the same run is refused with one line
    instead of interleaving its epochs with this one's. With ``force`` the folder is emptied first
    (all but the lock). A folder this call made is removed again when the block fails before writing
    anything into it (missing or edited data, say): no folder holding only the lock stays behind."""

    fix = "choose a writable folder with --out (or $ABSA_RUNS_DIR)"
    new = not path.exists()
    ensure_writable(path, fix)
    try:
        with exclusive_lock(path / LOCK, "another process is training this run; wait for it to finish "
                                             "or stop it, then run the same command again"):
            if force:
                try:
                    for child in [c for c in path.iterdir() if c.name != LOCK]:
                        shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
                except OSError as err:
                    raise AbsaError(f"--force cannot delete {err.filename} ({err.strerror}); {fix}") from None
            yield
    except BaseException:
        if new and path.is_dir() and {c.name for c in path.iterdir()} <= {LOCK}:
            shutil.rmtree(path, ignore_errors=True)     # refused before anything of the run was written
        raise


BUSY_POLL = 5.0         # seconds between two looks at the lock of a run that another process trains

_MOVED = {name: "absa_lib.training.records" for name in (
    "Run", "ExportedModel", "load_run", "find_runs", "load_model_folder", "run_folders", "select_epochs",
    "EXPORT_RECORD", "RECORD_FILES", "KEPT_RECORD_FILES")}


def __getattr__(name: str):
    if name in _MOVED:      # an import of the earlier layout: one line naming the new place
        raise AttributeError(f"absa_lib.training.runs.{name} moved to {_MOVED[name]} (the run folder's owner); "
                             "import it from there, or from absa_lib")
    raise AttributeError(f"module 'absa_lib.training.runs' has no attribute {name!r}")
