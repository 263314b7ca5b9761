"""What a person waiting on a training run sees, wherever its output goes.

An epoch's training (:class:`EpochProgress`) and its dev and test evaluation (:class:`EvalProgress`)
are shown one of three ways (:func:`progress_mode` picks it):

- ``notebook``: tqdm's notebook bar (an ipywidgets widget), in a Jupyter kernel that a front end
  (JupyterLab, Notebook, VS Code, Colab) is running, when the kernel has ipywidgets that tqdm can draw
  with (else lines, the reason said once, and no "IProgress not found" warning);
- ``terminal``: tqdm's terminal bar, when stderr is a terminal;
- ``lines``: a line at most every :data:`EpochProgress.LOG_SECONDS` and at the epoch's end, everywhere
  else: papermill and ``jupyter nbconvert --execute``, a log file, a pipe, the grid's runs.

A kernel cannot see its front end. What it can see is whether the cell it is running may ask for
input: a front end sends every cell with ``allow_stdin`` true (``input()`` works there); nbclient,
which papermill and nbconvert execute notebooks with, sends false, as nothing would answer. Such a
kernel prints lines, which the log keeps (a widget would be saved as a view of nothing). A cell run
some other way (a widget's callback, a thread of its own) has no such request and prints lines too.
``ABSA_PROGRESS=notebook|terminal|lines`` chooses instead; ``run_all.sh`` sets ``lines`` for every step.
``tqdm.auto`` is not used: in a kernel without ipywidgets it warns "IProgress not found".
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
import warnings

from absa_lib.errors import AbsaError
from absa_lib.training.runs import duration_text

ENV = "ABSA_PROGRESS"
NO_WIDGETS = ("[absa] progress as lines: this kernel has no usable ipywidgets (pip install ipywidgets, then restart "
              "the kernel, for a bar)")
MODES = ("notebook", "terminal", "lines")
_told: set[str] = set()                # the hints said in this process (once each)


def progress_mode() -> str:
    """How this process shows progress: ``notebook``, ``terminal`` or ``lines`` (module docstring)."""
    forced = os.environ.get(ENV, "").strip()
    if forced:
        if forced not in MODES:
            raise AbsaError(f"{ENV}={forced!r}: expected {', '.join(MODES)} (unset: chosen by where the output goes)")
        if forced == "notebook" and not _has_ipywidgets():
            raise AbsaError(f"{ENV}=notebook: the notebook bar needs ipywidgets (pip install ipywidgets, then "
                            "restart the kernel)")
        return forced
    kernel = _kernel()
    if kernel is not None:
        if not _from_front_end(kernel):
            return "lines"                                  # papermill, nbconvert --execute
        if _has_ipywidgets():
            return "notebook"
        _tell_once("ipywidgets", NO_WIDGETS)
        return "lines"
    return "terminal" if sys.stderr.isatty() else "lines"


def _kernel():
    """The Jupyter kernel this process is (ipykernel's, Colab's), or None: plain Python, terminal IPython."""
    ipython = sys.modules.get("IPython")                    # never imported: not IPython at all
    shell = ipython.get_ipython() if ipython is not None else None
    return getattr(shell, "kernel", None)


def _from_front_end(kernel) -> bool:
    """Whether the request ``kernel`` is running lets it ask for input, as only a front end's does."""
    try:
        parent = kernel.get_parent("shell")                 # ipykernel >= 6
    except (AttributeError, TypeError):
        return bool(getattr(kernel, "_allow_stdin", False))
    return bool(((parent or {}).get("content") or {}).get("allow_stdin", False))


def _has_ipywidgets() -> bool:
    """Whether tqdm's notebook bar can be drawn: ipywidgets installed *and* its progress widget importable
    (``tqdm.notebook.IProgress``). A missing, partial or mismatched install is none, and says nothing
    here: tqdm's own "IProgress not found" would come as a warning or as an error when the bar is made."""
    try:
        if importlib.util.find_spec("ipywidgets") is None:
            return False
    except (ImportError, ValueError):              # a module of that name without a spec
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            from tqdm import notebook
        except Exception:                          # an ipywidgets that fails on import, whatever it raises
            return False
    return getattr(notebook, "IProgress", None) is not None


def _tell_once(key: str, line: str) -> None:
    if key not in _told:
        _told.add(key)
        print(line, file=sys.stderr, flush=True)


class _Shown:
    """A bar in ``notebook`` or ``terminal`` mode (``bar``), else None; ``say`` writes a line under it."""

    def __init__(self, enabled: bool, total: int, initial: int, desc: str, unit: str):
        self.enabled = enabled
        self.mode = progress_mode() if enabled else "off"
        self.bar = None
        if self.mode in ("notebook", "terminal"):
            if self.mode == "notebook":
                from tqdm.notebook import tqdm
            else:
                from tqdm.std import tqdm
            try:
                self.bar = tqdm(total=total, initial=initial, desc=desc, unit=unit, leave=False, file=sys.stderr)
            except ImportError:                    # the notebook bar's widget failed after all: lines, told once
                _tell_once("ipywidgets", NO_WIDGETS)
                self.mode = "lines"

    def _say(self, line: str) -> None:
        if self.bar is not None:
            self.bar.write(line, file=sys.stderr)
        else:
            print(line, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class EpochProgress(_Shown):
    """One epoch's progress, shown as :func:`progress_mode` says: a bar (examples, examples/s, time left
    in the epoch, the loss) or a line at most every :data:`LOG_SECONDS` and at the epoch's end. Both say,
    once the first :data:`SPEED_BATCHES` batches have run, how long the whole run will take: its batches
    left at that speed, and its evaluations left at the inference speed ``s.probe_evaluation()`` times
    on a sample of the dev and test inputs then.

    ``s`` is the training loop's session: its ``config`` (``batch_size``, ``epochs``), ``total_steps``,
    ``books.step`` and ``estimate_said`` (the estimate is said once per process) are read, and its
    ``probe_evaluation()`` called: ``(inputs one evaluation reads, inputs/s, inputs timed, seconds it took)``.
    """

    LOG_SECONDS = 60.0
    SPEED_BATCHES = 20

    def __init__(self, enabled: bool, s, epoch: int, total: int, done: int = 0):
        batch = s.config.batch_size
        super().__init__(enabled, total * batch, done * batch, f"epoch {epoch}/{s.config.epochs}", "ex")
        self.s, self.epoch, self.total, self.n, self.first = s, epoch, total, done, done
        self.desc = f"epoch {epoch}/{s.config.epochs}"
        self.t0 = self.logged = time.time()
        self.estimated = s.estimate_said

    def _estimate(self, per_batch: float) -> str:
        """The run's time left: its batches at ``per_batch`` seconds each, its evaluations (this epoch's
        on) at the speed the session's probe measures now."""
        batches_left = self.s.total_steps - self.s.books.step
        train = batches_left * per_batch
        inputs, speed, probed, took = self.s.probe_evaluation()
        self.t0 += took                            # the probe is not the epoch's training
        evaluations = self.s.config.epochs - self.epoch + 1
        evaluation = evaluations * inputs / speed
        return (f"{self.s.config.batch_size / per_batch:.1f} examples/s over the first {self.n - self.first} "
                f"batches: the run's {batches_left:,} batches left take about {duration_text(train)} at this "
                f"speed, and its {evaluations} evaluation{'s' if evaluations > 1 else ''} of {inputs:,} dev and "
                f"test inputs about {duration_text(evaluation)} at {speed:.1f} inputs/s (timed on {probed:,} of "
                f"them): about {duration_text(train + evaluation)} in all")

    def update(self, loss) -> None:
        """One step done; ``loss`` (a tensor) is read (a host sync) only when it is shown."""
        self.n += 1
        if not self.enabled:
            return
        now, batch = time.time(), self.s.config.batch_size
        per_batch = (now - self.t0) / (self.n - self.first)
        if not self.estimated and self.n - self.first >= min(self.SPEED_BATCHES, self.total - self.first):
            self.estimated = self.s.estimate_said = True
            self._say(f"[absa] {self._estimate(per_batch)}")
        if self.bar is not None:
            self.bar.update(batch)
            self.bar.set_postfix(loss=f"{loss.item():.4f}")
        elif now - self.logged >= self.LOG_SECONDS or self.n == self.total:
            self.logged = now
            self._say(f"[absa] {self.desc} batch {self.n}/{self.total} loss {loss.item():.4f}, "
                      f"{batch / per_batch:.1f} examples/s, epoch left {duration_text((self.total - self.n) * per_batch)}")


class EvalProgress(_Shown):
    """One split's evaluation after an epoch (inference over its inputs), shown as :func:`progress_mode`
    says: a bar (inputs, inputs/s, time left) or a line at most every :data:`LOG_SECONDS` and at its end,
    with its speed. ``unit``: ``examples``, or ``inputs`` where a model reads several per example."""

    LOG_SECONDS = EpochProgress.LOG_SECONDS

    def __init__(self, enabled: bool, desc: str, total: int, unit: str = "examples"):
        super().__init__(enabled, total, 0, desc, "ex" if unit == "examples" else "in")
        self.desc, self.total, self.unit, self.n = desc, total, unit, 0
        self.t0 = self.logged = time.time()

    def update(self, n: int) -> None:
        """``n`` more inputs evaluated."""
        self.n += n
        if self.bar is not None:
            self.bar.update(n)
            return
        now = time.time()
        if self.enabled and self.n < self.total and now - self.logged >= self.LOG_SECONDS:
            self.logged = now
            speed = self.n / max(now - self.t0, 1e-9)
            self._say(f"[absa] {self.desc}: {self.n:,}/{self.total:,} {self.unit}, {speed:.1f} {self.unit}/s, "
                      f"left {duration_text((self.total - self.n) / speed)}")

    def close(self) -> None:
        """The split's last line: how many inputs, in how long, how fast."""
        super().close()
        if self.enabled:
            took = time.time() - self.t0
            self._say(f"[absa] {self.desc}: {self.total:,} {self.unit} evaluated in {duration_text(took)}, "
                      f"{self.total / max(took, 1e-9):.1f} {self.unit}/s")
