"""benchmarks/per_context_compile.py: both ways of compiling bert-single on mixed batches run the
same model and give the eager loss (traced by dynamo's ``eager`` backend here: seconds, not the
minutes of inductor; the timings are the script's output, not tested)."""

from __future__ import annotations

import argparse
import importlib.util
from functools import partial
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("bench_pcc", ROOT / "benchmarks" / "per_context_compile.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def test_every_way_compiles_its_step_and_matches_eager(monkeypatch):
    monkeypatch.setattr(torch, "compile", partial(torch.compile, backend="eager"))
    args = argparse.Namespace(backbone="tiny", contexts=3, batch_size=4, length=16, mode="default", steps=1)
    for way in bench.WAYS:
        r = bench.measure(way, args, torch.device("cpu"))
        assert r["way"] == way and r["first_steps_s"] > 0 and r["forward_backward_ms"] > 0 and r["update_ms"] > 0
        parts = [r["clip_ms"], r["adamw_ms"], r["zero_grad_ms"]]
        assert min(parts) > 0 and max(parts) <= r["update_ms"] <= sum(parts) + 1e-9   # steps=1: medians are the values
        assert r["loss_vs_eager"] < 1e-6
    torch._dynamo.reset()


def test_bad_arguments_are_one_line_each():
    import subprocess
    import sys

    script = str(ROOT / "benchmarks" / "per_context_compile.py")
    for argv, line in ((["--contexts", "0"], "argument --contexts: expected a whole number of at least 1, got '0'"),
                       (["--backbone", "nosuch"], "per_context_compile: backbone 'nosuch' is neither one of")):
        done = subprocess.run([sys.executable, script, *argv, "--ways", "parts"], capture_output=True, text=True,
                              timeout=300, check=False)
        assert done.returncode != 0
        assert line in done.stderr and "Traceback" not in done.stderr, done.stderr[-2000:]
