"""benchmarks/update_overhead.py: the update it times is training's (the model's parameter groups,
fused AdamW, the clip), on every classifier's tensors or one's; the timings are its output, not tested."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from absa_lib.models.registry import build_per_context

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("bench_update", ROOT / "benchmarks" / "update_overhead.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
shrunk = bench.shrunk


def test_it_times_every_classifiers_update_then_one_classifiers():
    per_classifier = sum(p.requires_grad for p in build_per_context(
        backbone="tiny", num_labels=3, num_contexts=5).models[0].parameters())
    rows = bench.measure("tiny", "semeval", steps=2)
    assert [(r["classifiers"], r["tensors"], r["with_gradients"]) for r in rows] == [
        (5, 5 * per_classifier, 5 * per_classifier), (5, 5 * per_classifier, per_classifier)]
    assert all(r["groups"] == 2 for r in rows)                  # decay and no decay, as training builds them
    assert all(r["clip_ms"] > 0 and r["adamw_ms"] > 0 and r["reset_ms"] >= 0 for r in rows)


def test_a_timed_call_runs_its_warm_up_and_the_steps():
    calls = []
    assert bench.timed(lambda: calls.append(torch.zeros(1)), steps=3) > 0
    assert len(calls) == 23


def test_the_compiled_update_steps_with_the_schedules_rates(monkeypatch):
    from functools import partial

    monkeypatch.setattr(torch, "compile", partial(torch.compile, backend="eager"))
    made = []                                        # what the benchmark updates, to look at afterwards
    monkeypatch.setattr(bench, "shrunk", lambda *a: made.append(shrunk(*a)) or made[-1])
    r = bench.measure_compiled("tiny", "semeval", steps=2)
    _, params, _, optimizer = made[0]
    assert r["tensors"] == len(params) > 0 and r["compile_s"] > 0 and r["update_ms"] > 0
    # 1 + 1 (compiling) + 20 warm-up + 2 timed updates of every tensor, the last at the schedule's rate
    assert all(int(optimizer.state[p]["step"]) == 1 + 1 + 20 + 2 for p in params)
    factor = 1.0 - 21 / 100                          # the 22nd scheduled update
    assert all(float(g["lr"]) == pytest.approx(g["base_lr"] * factor) for g in optimizer.param_groups)
    torch._dynamo.reset()


def test_bad_arguments_are_one_line_each():
    import subprocess
    import sys

    script = str(ROOT / "benchmarks" / "update_overhead.py")
    for argv, line in ((["--steps", "0"], "argument --steps: expected a whole number of at least 1, got '0'"),
                       (["--threads", "0"], "argument --threads: expected a whole number of at least 1, got '0'"),
                       (["--backbone", "nosuch"], "update_overhead: backbone 'nosuch' is neither one of")):
        done = subprocess.run([sys.executable, script, *argv], capture_output=True, text=True, timeout=300,
                              check=False)
        assert done.returncode != 0 and line in done.stderr and "Traceback" not in done.stderr, done.stderr
