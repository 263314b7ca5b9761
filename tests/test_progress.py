"""Training progress: which of a notebook bar, a terminal bar and lines each place gets, the lines
themselves, and no "IProgress not found" warning in a kernel without ipywidgets."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest
import torch

from absa_lib.errors import AbsaError
from absa_lib.harness.run_all import OWN_ENV
from absa_lib.training import progress
from absa_lib.training.progress import EpochProgress, EvalProgress, progress_mode


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class _Kernel:
    """ipykernel's kernel as a cell sees it: the request it is running (``allow_stdin``: a front end's)."""

    def __init__(self, allow_stdin: bool):
        self.allow_stdin = allow_stdin

    def get_parent(self, channel="shell"):
        return {"header": {"msg_type": "execute_request"}, "content": {"code": "", "allow_stdin": self.allow_stdin}}


@pytest.fixture
def place(monkeypatch):
    """Set where the run's output goes: ``place(kernel=..., widgets=..., tty=...)``."""
    monkeypatch.delenv(progress.ENV, raising=False)
    monkeypatch.setattr(progress, "_told", set())

    def set_place(kernel=None, widgets=True, tty=False):
        if kernel is None:
            monkeypatch.delitem(sys.modules, "IPython", raising=False)
        else:
            monkeypatch.setitem(sys.modules, "IPython", SimpleNamespace(get_ipython=lambda: SimpleNamespace(kernel=kernel)))
        monkeypatch.setattr(progress, "_has_ipywidgets", lambda: widgets)
        monkeypatch.setattr(sys, "stderr", _Terminal() if tty else io.StringIO())
        return sys.stderr

    return set_place


def test_a_jupyter_front_end_with_ipywidgets_gets_the_notebook_bar(place):
    place(kernel=_Kernel(allow_stdin=True))
    assert progress_mode() == "notebook"


def test_papermill_and_nbconvert_get_lines_as_their_cells_cannot_ask_for_input(place):
    place(kernel=_Kernel(allow_stdin=False), tty=True)          # nbclient sends allow_stdin false
    assert progress_mode() == "lines"


def test_a_front_end_without_ipywidgets_gets_lines_and_is_told_once_why(place):
    err = place(kernel=_Kernel(allow_stdin=True), widgets=False)
    assert progress_mode() == "lines" and progress_mode() == "lines"
    assert err.getvalue().count("this kernel has no usable ipywidgets (pip install ipywidgets") == 1


def test_a_kernel_without_get_parent_is_asked_what_input_allows(place):
    place(kernel=SimpleNamespace(_allow_stdin=True))          # ipykernel < 6
    assert progress_mode() == "notebook"
    place(kernel=SimpleNamespace())
    assert progress_mode() == "lines"


def test_outside_a_kernel_a_terminal_gets_a_bar_and_anything_else_lines(place, monkeypatch):
    place(tty=True)
    assert progress_mode() == "terminal"
    place(tty=False)                                           # a log file, a pipe, a grid's run
    assert progress_mode() == "lines"
    place(tty=True)
    monkeypatch.setitem(sys.modules, "IPython", SimpleNamespace(get_ipython=lambda: SimpleNamespace()))
    assert progress_mode() == "terminal"                       # a terminal IPython: a shell, no kernel


def test_absa_progress_chooses_and_run_all_chooses_lines(place, monkeypatch):
    place(kernel=_Kernel(allow_stdin=True))
    for mode in progress.MODES:
        monkeypatch.setenv(progress.ENV, mode)
        assert progress_mode() == mode
    monkeypatch.setenv(progress.ENV, "bar")
    with pytest.raises(AbsaError, match=r"ABSA_PROGRESS='bar': expected notebook, terminal, lines"):
        progress_mode()
    place(kernel=_Kernel(allow_stdin=True), widgets=False)
    monkeypatch.setenv(progress.ENV, "notebook")
    with pytest.raises(AbsaError, match="needs ipywidgets"):
        progress_mode()
    assert OWN_ENV[progress.ENV] == "lines"


def _session(total_steps: int = 6, step: int = 0):
    """The loop's session as progress reads it; its evaluation probe: 1,000 inputs at 100 inputs/s."""
    return SimpleNamespace(config=SimpleNamespace(batch_size=4, epochs=2), total_steps=total_steps,
                           books=SimpleNamespace(step=step), estimate_said=False,
                           probe_evaluation=lambda: (1000, 100.0, 64, 0.0))


def test_without_a_terminal_the_epoch_is_shown_in_lines(place):
    err = place(tty=False)
    s = _session()
    bar = EpochProgress(True, s, epoch=1, total=3)
    assert bar.mode == "lines" and bar.bar is None
    for _ in range(3):
        s.books.step += 1
        bar.update(torch.tensor(0.5))
    bar.close()
    lines = err.getvalue().splitlines()
    assert len(lines) == 2, lines                  # the estimate, then the epoch's end (LOG_SECONDS not reached)
    assert "examples/s over the first 3 batches: the run's 3 batches left take about" in lines[0]
    # the estimate counts the run's evaluations too: 2 epochs of 1,000 inputs at 100/s
    assert lines[0].endswith("and its 2 evaluations of 1,000 dev and test inputs about 20 s at 100.0 inputs/s "
                             "(timed on 64 of them): about 20 s in all")
    assert lines[1].startswith("[absa] epoch 1/2 batch 3/3 loss 0.5000, ") and "examples/s, epoch left" in lines[1]
    assert s.estimate_said                          # said once per process: the next epoch does not repeat it


def test_lines_come_at_most_every_log_seconds(place, monkeypatch):
    err = place(tty=False)
    monkeypatch.setattr(EpochProgress, "LOG_SECONDS", 0.0)
    s = _session()
    s.estimate_said = True
    bar = EpochProgress(True, s, epoch=2, total=3, done=1)      # resumed after its first batch
    for _ in range(2):
        bar.update(torch.tensor(0.25))
    assert [ln.split(" loss")[0] for ln in err.getvalue().splitlines()] == ["[absa] epoch 2/2 batch 2/3",
                                                                             "[absa] epoch 2/2 batch 3/3"]


def test_evaluation_is_shown_in_lines_with_its_speed(place, monkeypatch):
    err = place(tty=False)
    shown = EvalProgress(True, "epoch 1/2 dev", 300)
    for _ in range(3):
        shown.update(100)
    shown.close()
    lines = err.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("[absa] epoch 1/2 dev: 300 examples evaluated in ")
    assert lines[0].endswith(" examples/s")
    err.truncate(0), err.seek(0)
    monkeypatch.setattr(EvalProgress, "LOG_SECONDS", 0.0)     # a long split: a line at most every LOG_SECONDS
    shown = EvalProgress(True, "epoch 2/2 test", 300, "inputs")
    for _ in range(3):
        shown.update(100)
    shown.close()
    assert [ln.split(",")[0].split(" evaluated")[0] for ln in err.getvalue().splitlines()] == [
        "[absa] epoch 2/2 test: 100/300 inputs", "[absa] epoch 2/2 test: 200/300 inputs",
        "[absa] epoch 2/2 test: 300 inputs"]
    quiet = EvalProgress(False, "epoch 1/2 dev", 300)
    quiet.update(300)
    quiet.close()
    assert quiet.mode == "off" and len(err.getvalue().splitlines()) == 3


def test_a_run_shows_its_evaluation_and_counts_it_in_its_estimate(place, tiny_config, tmp_path):
    from absa_lib.training.loop import train

    err = place(tty=False)
    run = train(tiny_config(epochs=2), runs_dir=tmp_path)
    lines = err.getvalue().splitlines()
    estimate = next(ln for ln in lines if "batches left take about" in ln)
    assert "and its 2 evaluations of 40 dev and test inputs about" in estimate      # 20 dev + 20 test examples
    for epoch in (1, 2):
        for split in ("dev", "test"):
            assert any(ln.startswith(f"[absa] epoch {epoch}/2 {split}: 20 examples evaluated in ") for ln in lines)
    assert any(ln.startswith("[absa] epoch 1/2 loss ") and "s evaluation; about " in ln for ln in lines)
    assert run.metrics.epochs[0]["eval_seconds"] > 0


def test_quiet_shows_nothing(place):
    err = place(tty=True)
    bar = EpochProgress(False, _session(), epoch=1, total=2)
    bar.update(torch.tensor(1.0))
    bar.close()
    assert bar.mode == "off" and err.getvalue() == ""


def test_each_bar_is_tqdm_s_own_for_its_place(place, monkeypatch):
    from tqdm.notebook import tqdm as notebook_tqdm
    from tqdm.std import tqdm as terminal_tqdm

    err = place(tty=True)
    bar = EpochProgress(True, _session(), epoch=1, total=2)
    assert type(bar.bar) is terminal_tqdm
    bar.update(torch.tensor(1.0))
    bar.close()
    assert "epoch 1/2" in err.getvalue()
    monkeypatch.setattr(progress, "progress_mode", lambda: "notebook")
    bar = EpochProgress(True, _session(), epoch=1, total=2)
    assert isinstance(bar.bar, notebook_tqdm)
    bar.close()


# a kernel without ipywidgets, as tqdm.auto recognizes one (ipykernel's shell class loaded)
_KERNEL_WITHOUT_IPYWIDGETS = """
import sys, types, warnings
sys.modules["ipywidgets"] = None
sys.modules["ipykernel.zmqshell"] = types.ModuleType("ipykernel.zmqshell")
import IPython
class ZMQInteractiveShell: ...
IPython.get_ipython = lambda: ZMQInteractiveShell()
{first}
with warnings.catch_warnings(record=True) as caught:
    import tqdm.auto                     # as transformers and huggingface_hub import it
print(sum("IProgress not found" in str(w.message) for w in caught))
"""


# ipywidgets installed but unusable (a partial install, a version tqdm cannot draw with): found, not importable
_BROKEN_IPYWIDGETS = """
import importlib.machinery, sys, types, warnings
broken = types.ModuleType("ipywidgets")
broken.__spec__ = importlib.machinery.ModuleSpec("ipywidgets", None)
sys.modules["ipywidgets"] = broken                       # `from ipywidgets import FloatProgress` fails
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    from absa_lib.training import progress
    print(progress._has_ipywidgets(), len(caught))
"""


def test_an_unusable_ipywidgets_counts_as_none_and_warns_nothing():
    """Found by importlib but without the widget tqdm draws with: lines, not tqdm's IProgress warning or
    error (issue 87)."""
    done = subprocess.run([sys.executable, "-c", _BROKEN_IPYWIDGETS], capture_output=True, text=True, check=True,
                          timeout=120)
    assert done.stdout.split() == ["False", "0"], done.stdout + done.stderr


def test_a_notebook_bar_that_cannot_be_made_falls_back_to_lines(place, monkeypatch):
    import tqdm.notebook

    def no_widget(*args, **kwargs):
        raise ImportError("IProgress not found. Please update jupyter and ipywidgets.")

    err = place(kernel=_Kernel(allow_stdin=True))
    monkeypatch.setattr(tqdm.notebook, "tqdm", no_widget)
    bars = [EpochProgress(True, _session(), epoch=1, total=2) for _ in range(2)]
    assert [b.mode for b in bars] == ["lines", "lines"] and all(b.bar is None for b in bars)
    bars[0].update(torch.tensor(1.0))
    bars[0].update(torch.tensor(1.0))
    assert err.getvalue().count("no usable ipywidgets") == 1 and "epoch 1/2 batch 2/2" in err.getvalue()


@pytest.mark.parametrize("first, warned", [("import absa_lib", "0"), ("", "1")], ids=["absa_lib first", "without"])
def test_no_iprogress_warning_in_a_kernel_without_ipywidgets(first, warned):
    code = textwrap.dedent(_KERNEL_WITHOUT_IPYWIDGETS).format(first=first)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert done.stdout.strip() == warned, done.stderr


@pytest.mark.slow
def test_a_real_kernel_tells_a_front_end_s_cell_from_papermill_s():
    """In ipykernel itself: a cell sent as a front end sends it (allow_stdin) gets the notebook bar, one
    sent as nbclient (papermill, nbconvert) sends it gets lines."""
    jupyter_client = pytest.importorskip("jupyter_client")
    code = "from absa_lib.training.progress import progress_mode; print('mode', progress_mode())"
    env = {k: v for k, v in os.environ.items() if k != progress.ENV}
    km, kc = jupyter_client.manager.start_new_kernel(kernel_name="python3", env=env)
    try:
        seen = {}
        for allow in (True, False):
            out = []
            kc.execute_interactive(code, allow_stdin=allow, timeout=120,
                                   output_hook=lambda msg, out=out: out.append(msg["content"].get("text", "")))
            seen[allow] = "".join(out).strip()
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    assert seen == {True: "mode notebook", False: "mode lines"}
