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


# ---------------------------------------------------------------------------------------------- the tiny run
# The suite's one tiny training configuration: the tiny backbone, a few dozen real SentiHood examples, one
# epoch. A test file that needs other numbers passes them as changes, tiny_config(seed=7, epochs=2); none
# copies it, and no test file imports another (tests/test_repo_hygiene.py checks it).
TINY_RUN = dict(dataset="sentihood", model="qacg-bert", preset="paper", aux="NLI-M", backbone="tiny", seed=3, epochs=1,
                batch_size=16, max_length=48, max_train_examples=32, max_eval_examples=20, eval_batch_size=32)
# The same run as `absa train` flags (preset and aux left to their defaults, which TINY_RUN names).
TINY_ARGV = (*(arg for name, value in TINY_RUN.items() if name not in ("preset", "aux")
               for arg in (f"--{name.replace('_', '-')}", str(value))), "--quiet")


@pytest.fixture(scope="session")
def tiny_config():
    """``tiny_config(**changes)``: the tiny run's TrainConfig, with ``changes`` (any TrainConfig field)."""
    from absa_lib.training.config import TrainConfig

    def make(**changes) -> TrainConfig:
        return TrainConfig(**{**TINY_RUN, **changes})

    return make


@pytest.fixture(scope="session")
def tiny_argv() -> tuple[str, ...]:
    """The tiny run as `absa train` arguments (``tiny_config()``; ``--quiet``), to which a test adds ``--out``."""
    return TINY_ARGV


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory, tiny_config):
    """``tiny_run(**changes)``: the folder of a finished run of ``tiny_config(**changes)``, trained once a
    session, each in a runs folder of its own (``<runs>/<dataset>/<model>/<run id>``), with its resume
    state kept (ABSA_KEEP_LAST=1), as a run killed after its last epoch leaves it. Tests copy it, never
    change it."""
    from absa_lib.training.loop import train
    from absa_lib.training.runs import Launch

    done: dict[str, Path] = {}

    def run(**changes) -> Path:
        key = repr(sorted(changes.items()))
        if key not in done:
            done[key] = train(tiny_config(**changes), runs_dir=tmp_path_factory.mktemp("runs"), progress=False,
                              launch=Launch(keep_last=True)).path
        return done[key]

    return run


@pytest.fixture(scope="session")
def tiny_systems(tiny_config):
    """``tiny_systems(runs_dir, models)``: the tiny run of each of ``models`` for seeds 3 and 4, trained
    into ``runs_dir`` (two systems of two seeds each: enough for ``absa summary`` and ``absa compare``)."""
    from absa_lib.training.loop import train

    def train_all(runs_dir: Path, models: tuple[str, ...]) -> Path:
        for model in models:
            for seed in (3, 4):
                train(tiny_config(model=model, seed=seed), runs_dir=runs_dir, progress=False)
        return runs_dir

    return train_all


@pytest.fixture(scope="session")
def review() -> str:
    """A SentiHood-style review naming both targets, for `absa predict`."""
    return "LOCATION1 is cheap but LOCATION2 is not safe"


@pytest.fixture
def refused(capsys):
    """``refused(argv, *needles)``: run the CLI; assert exit code 2, exactly one line on stderr (returned),
    holding each needle, no traceback, nothing on stdout."""
    from absa_lib.cli import main

    def check(argv: list[str], *needles: str) -> str:
        rc = main(argv)
        out, err = capsys.readouterr()
        lines = err.strip().splitlines()
        assert rc == 2, (rc, out, err)
        assert len(lines) == 1 and lines[0].startswith("absa: error: "), err
        assert "Traceback" not in err and out == ""
        for needle in needles:
            assert needle in lines[0], (needle, lines[0])
        return lines[0]

    return check


@pytest.fixture(scope="session")
def edit_json():
    """``edit_json(path, change)``: rewrite a JSON file as ``change(record)`` (or as ``change``, a value)."""
    import json

    def edit(path: Path, change) -> None:
        record = json.loads(path.read_text())
        path.write_text(json.dumps(change(record) if callable(change) else change))

    return edit


@pytest.fixture(scope="session")
def rewrite_checksums():
    """``rewrite_checksums(folder)``: what a swapped-in checkpoint of another run looks like, consistent
    with its own checksums."""
    from absa_lib.fileio import atomic_write_json, file_sha256
    from absa_lib.training.checkpoint import CHECKSUMS

    def rewrite(ckpt: Path) -> None:
        sums = {p.name: file_sha256(p) for p in sorted(ckpt.iterdir()) if p.is_file() and p.name != CHECKSUMS}
        atomic_write_json(ckpt / CHECKSUMS, sums)

    return rewrite


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


def typed_run(record: dict, metrics: dict | None = None, env: dict | None = None, path: Path | None = None):
    """A :class:`~absa_lib.training.records.Run` built in memory from records as ``load_run`` types
    them (a record of an earlier format upgraded), without the checks of a loaded folder (no files,
    no run-id hash): for the tests of what reads runs. ``metrics``: ``selection`` and/or ``epochs``."""
    from absa_lib.training.config import TrainConfig
    from absa_lib.training.records import Run, RunConfig, RunEnv, RunMetrics
    from absa_lib.training.records.upgrade import config_fields, env_fields

    metrics = metrics or {}
    epochs, metric = metrics.get("epochs", []), metrics.get("selection_metric", "aspect_strict_acc")
    typed = RunMetrics(epochs=epochs, selection=metrics.get("selection", {}),
                       selection_metric=metric, complete=True, predictions=metrics.get("predictions"),
                       process_seconds=metrics.get("process_seconds"))
    config = RunConfig(train=TrainConfig(**config_fields(record)), record=record)
    return Run(path=path or Path("runs") / record["dataset"] / record["model"] / str(record.get("run_id")),
               config=config, metrics=typed, env=RunEnv(env_fields(env) if env else {}))


def with_record(run, **fields):
    """``run`` with its config record changed in ``fields`` (typed again; the rest of the run as it is)."""
    import dataclasses

    from absa_lib.training.config import TrainConfig
    from absa_lib.training.records import RunConfig
    from absa_lib.training.records.upgrade import config_fields

    record = {**run.config.record, **fields}
    return dataclasses.replace(run, config=RunConfig(train=TrainConfig(**config_fields(record)), record=record))
