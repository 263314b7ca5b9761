"""Shared fixtures. No test touches the network: the hub is forced offline here."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
# A relative path (ABSA_DATA_DIR=../shared/data) means "from where pytest was started"; the notebook
# tests run their kernels in notebooks/, so it is made absolute here, once.
for _var in ("ABSA_DATA_DIR", "ABSA_RUNS_DIR", "ABSA_MINILM_DIR"):
    if os.environ.get(_var):
        os.environ[_var] = os.path.abspath(os.path.expanduser(os.environ[_var]))

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

# The tests run tiny models, for which thread start-up costs more than it saves on 2 cores.
torch.set_num_threads(1)

FIXTURES = Path(__file__).parent / "fixtures"


SKIP_DATA = "ABSA_SKIP_DATA_TESTS"
SKIP_REASON = f"{SKIP_DATA}=1: the benchmark files are not here"


@pytest.fixture(scope="session")
def real_data_dir() -> Path:
    """The real benchmark files (``ABSA_DATA_DIR``, e.g. ``../shared/data``, or the download folder).

    Missing files fail the test, naming the folder and the fixes: only ``ABSA_SKIP_DATA_TESTS=1``
    turns the tests that need them into skips, which the summary counts (never in CI), so that a wrong
    path never turns them into silent skips.
    """
    from absa_lib.paths import resolve_data_dir

    path = resolve_data_dir()
    if not (path / "sentihood" / "sentihood-train.json").is_file():
        if os.environ.get(SKIP_DATA) == "1" and not os.environ.get("CI"):
            pytest.skip(SKIP_REASON)
        pytest.fail(f"the benchmark files are not in {path}; run `absa data download`, or set ABSA_DATA_DIR to "
                    f"a folder that holds them, or skip the tests that need them with {SKIP_DATA}=1")
    return path


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The last word on skipped data tests: how many, and why."""
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if SKIP_REASON in str(r.longrepr)]
    if skipped:
        terminalreporter.write_line(f"{len(skipped)} tests skipped because {SKIP_REASON} (they read SentiHood and "
                                    "SemEval); unset it and run `absa data download` to run them", yellow=True)


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    """A 'pretrained' tiny BERT folder, as save_pretrained writes it, plus its vocab."""
    import shutil

    from transformers import BertModel

    from absa_lib.models.backbones import TINY_VOCAB, backbone_config

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("tiny_bert")
    BertModel(backbone_config("tiny")).save_pretrained(path)
    shutil.copy(TINY_VOCAB, path / "vocab.txt")
    return path


@pytest.fixture
def other_trainer():
    """``hold(lock_path)``: another trainer holds the run lock ``lock_path`` (in a thread; the lock is
    per open file, so this process's own grid or notebook sees it as another holder) until the returned
    event is set, which the test does, or at its end."""
    import threading

    from absa_lib.fileio import exclusive_lock

    held = []

    def hold(lock_path: Path) -> threading.Event:
        taken, release = threading.Event(), threading.Event()

        def trainer():
            with exclusive_lock(lock_path, "busy"):
                taken.set()
                release.wait(120)

        thread = threading.Thread(target=trainer)
        thread.start()
        held.append((thread, release))
        assert taken.wait(60), f"{lock_path}: the other trainer never took the lock"
        return release

    yield hold
    for thread, release in held:
        release.set()
        thread.join()
