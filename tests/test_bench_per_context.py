"""``absa bench`` and ``absa info`` on bert-single describe what ``absa train`` trains: the K
per-context classifiers, on the batches its sampler draws, routed as its step routes them. The
benchmark's code is benchmarks/bench.py, outside the package: ``absa bench`` loads it from the
checkout, and without one says so in one line."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from absa_lib.cli import main
from absa_lib.commands import bench as entry
from absa_lib.models import count_parameters, load_tokenizer
from absa_lib.models.bert_single import PerContextModel, step_routing
from absa_lib.models.registry import build_for_training

pytestmark = pytest.mark.usefixtures("real_data_dir")

ROOT = Path(__file__).resolve().parent.parent
bench = entry.load()                                 # benchmarks/bench.py, as `absa bench` loads it


def test_the_benchmark_code_lives_outside_the_package():
    assert entry.script() == ROOT / "benchmarks" / "bench.py" and bench is not None
    assert Path(bench.__file__).resolve() == ROOT / "benchmarks" / "bench.py"
    assert entry.load() is bench                                     # loaded once a process
    assert [p.relative_to(ROOT).as_posix() for p in (ROOT / "absa_lib").rglob("bench*.py")] == \
        ["absa_lib/commands/bench.py"]
    assert len((ROOT / "absa_lib" / "commands" / "bench.py").read_text().splitlines()) < 80     # a thin entry


MISSING = ("absa: error: absa bench runs benchmarks/bench.py, which comes with a checkout of the repository, "
           "not with the installed package: run it from a clone (pip install -e .)\n")


@pytest.mark.parametrize("argv", [["bench", "--model", "qacg-bert", "--steps", "2"], ["bench", "--help"], ["bench"]])
def test_without_the_benchmark_code_absa_bench_says_so_in_one_line(argv, monkeypatch, capsys):
    monkeypatch.setattr(entry, "script", lambda: None)
    monkeypatch.delitem(sys.modules, entry.MODULE)
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == MISSING


def test_installed_without_a_checkout_absa_bench_says_so_and_the_other_commands_stay(tmp_path):
    """As from a wheel: the package alone, no pyproject.toml beside it, no benchmarks/."""
    shutil.copytree(ROOT / "absa_lib", tmp_path / "site" / "absa_lib", ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}

    def absa(*args):
        return subprocess.run([sys.executable, "-m", "absa_lib.cli", *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=120, check=False)

    res = absa("bench", "--model", "qacg-bert")
    assert res.returncode == 2 and res.stdout == "" and res.stderr == MISSING, res.stderr
    listed = absa("--help")
    assert listed.returncode == 0 and "bench" in listed.stdout and "benchmarks/bench.py" in listed.stdout


def _args(**changes) -> argparse.Namespace:
    args = {"model": ["bert-single"], "preset": "paper", "backbone": "tiny", "dataset": "sentihood", "aux": "single",
            "split": "train", "batch_size": 6, "steps": 4, "warmup": 1, "repeats": 1, "max_length": 32, "seed": 0,
            "threads": None, "precision": "fp32", "sampler": "uniform", "group_by_length": False, "compile": "none",
            "no_inference": True, "inference": None, "data_dir": None, "json": True}
    return argparse.Namespace(**{**args, **changes})


def _contexts(args) -> list[set[int]]:
    settings = {"fp32 random": ("fp32", False, "none")}
    data = bench._setting_batches(args, load_tokenizer(args.backbone), settings, torch.device("cpu"))
    warm, timed = data["fp32 random"]
    assert len(warm) == args.warmup and len(timed) == args.steps
    return [set(b["context_ids"].tolist()) for b in warm + timed]


def test_per_context_sampler_gives_each_timed_batch_one_context_as_training_does():
    assert all(len(c) == 1 for c in _contexts(_args(sampler="per-context")))
    assert len(set.union(*_contexts(_args(sampler="per-context", steps=40)))) > 1     # not always the same one
    assert any(len(c) > 1 for c in _contexts(_args()))                                   # mixed by default
    assert all(len(c) == 1 for c in _contexts(_args(sampler="per-context", group_by_length=True)))


def test_bert_single_is_timed_as_the_k_classifiers_training_builds():
    args = _args()
    settings = {"fp32 random": ("fp32", False, "none")}
    data = bench._setting_batches(args, load_tokenizer("tiny"), settings, torch.device("cpu"))
    model, opt, _, _ = bench._warmed_up_models(args, settings, data, torch.device("cpu"))["bert-single"]
    assert isinstance(model, PerContextModel) and len(model.models) == 8          # SentiHood's contexts
    assert sum(p.numel() for g in opt.param_groups for p in g["params"]) == count_parameters(model)
    assert count_parameters(model) == 8 * count_parameters(model.models[0])
    # every classifier with a row in the warm-up batch took an Adam step; the others none
    present = set(data["fp32 random"][0][0]["context_ids"].tolist())
    stepped = {c for c, m in enumerate(model.models) if opt.state.get(next(m.parameters()))}
    assert stepped == present


def test_step_routing_and_build_for_training():
    single = build_for_training("bert-single", backbone="tiny", num_labels=3, num_contexts=5)
    pair = build_for_training("bert-pair", backbone="tiny", num_labels=3, num_contexts=5)
    assert isinstance(single, PerContextModel) and len(single.models) == 5
    assert not isinstance(pair, PerContextModel)
    assert step_routing("bert-single", "per-context") == "sparse"
    assert step_routing("bert-single", "uniform") == "stacked"
    assert step_routing("bert-pair", "uniform") is None


def test_bench_command_reports_the_sampler(capsys):
    assert main(["bench", "--model", "bert-single", "--backbone", "tiny", "--aux", "single", "--steps", "2",
                 "--warmup", "0", "--batch-size", "4", "--max-length", "32", "--json", "--precision", "fp32",
                 "--sampler", "per-context"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["setup"]["sampler"] == "per-context"
    assert [r["model"] for r in report["results"]] == ["bert-single"]
    assert report["results"][0]["train"]["examples_per_s"] > 0 and report["results"][0]["infer"]["examples_per_s"] > 0


def test_info_gives_a_bert_single_run_its_k_classifiers(capsys):
    assert main(["info", "--model", "bert-single", "--backbone", "tiny", "--num-contexts", "5", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["classifiers_per_run"] == 5 and info["parameters_per_run"] == 5 * info["parameters"]
    assert main(["info", "--model", "bert-pair", "--backbone", "tiny", "--json"]) == 0
    assert "parameters_per_run" not in json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("flags, message", [
    (["--model", "bert-single", "--aux", "NLI-M"], "bert-single reads the sentence only"),
    (["--model", "qacg-bert", "--sampler", "per-context"], "sampler='per-context' batches each context apart"),
    (["--model", "bert-pair", "--aux", "single"], "bert-pair needs an auxiliary sentence"),
    (["--model", "bert-pair", "qacg-bert", "--max-length", "2"], "max_length=2 is out of range: expected 10 to"),
])
def test_bench_refuses_what_training_refuses(capsys, flags, message):
    """A setting ``absa train`` refuses would time steps no run takes (they used to be timed)."""
    assert main(["bench", "--backbone", "tiny", "--steps", "1", "--warmup", "0", "--json", *flags]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("absa: error: ") and message in captured.err
