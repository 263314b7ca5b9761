"""Host-side cost of one training update (gradient clip, AdamW step, gradient reset) per tensor count.

On a GPU a training step's forward and backward can be one CUDA graph, but its update is Python
walking over every parameter tensor: BERT-single holds K classifiers (105 tensors each on MiniLM,
840 for SentiHood's eight), so that walk may cost more than the arithmetic. This script measures
the walk alone: the model's real parameter list and optimizer groups (``absa_lib.training.optim``, as
training builds them), every tensor shrunk to one element, so the time is the host's, not the
arithmetic's. Two cases: every classifier with gradients (mixed batches: the stacked step) and
one (per-context batches: the other K-1 have none, as Adam skips them).

    python benchmarks/update_overhead.py [--backbone minilm] [--dataset sentihood] [--steps 200]
                                         [--threads 1] [--compiled]
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from absa_lib.commands import positive
from absa_lib.data import datasets as D
from absa_lib.errors import AbsaError
from absa_lib.models.registry import build_per_context
from absa_lib.training.config import TrainConfig
from absa_lib.training.optim import build_optimizer


def timed(fn, steps: int) -> float:
    """Milliseconds per call of ``fn``, after 20 calls of warm-up."""
    for _ in range(20):
        fn()
    t0 = time.perf_counter()
    for _ in range(steps):
        fn()
    return (time.perf_counter() - t0) / steps * 1e3


def shrunk(backbone: str, dataset: str):
    """BERT-single's K classifiers with every tensor shrunk to one element, their trainable tensors,
    training's config for them and its optimizer."""
    model = build_per_context(backbone=backbone, num_labels=3, num_contexts=D.num_contexts(dataset))
    for p in model.parameters():                      # the walk stays, the arithmetic goes
        p.data = torch.zeros(1)
    params = [p for p in model.parameters() if p.requires_grad]
    config = TrainConfig(dataset=dataset, model="bert-single", aux="single", backbone=backbone)
    return model, params, config, build_optimizer(model, config)


def measure(backbone: str, dataset: str, steps: int) -> list[dict]:
    """Per case (every classifier with gradients, then only the first): milliseconds per update of
    the clip, the AdamW step and the gradient reset, on the model's tensors shrunk to one element."""
    model, params, config, optimizer = shrunk(backbone, dataset)
    rows = []
    for with_grads in (params, list(model.models[0].parameters())):
        def give_grads(ps=with_grads):
            for p in ps:
                p.grad = torch.ones(1)

        give_grads()
        optimizer.step()                               # Adam's state, as after the first step
        clip = timed(lambda: torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm), steps)
        adamw = timed(optimizer.step, steps)
        reset = (timed(lambda: (optimizer.zero_grad(set_to_none=True), give_grads()), steps)
                 - timed(give_grads, steps))                  # the reset alone
        optimizer.zero_grad(set_to_none=True)
        rows.append({"classifiers": len(model.models), "tensors": len(params),
                     "with_gradients": len(with_grads),
                     "groups": len(optimizer.param_groups), "fused": optimizer.defaults.get("fused"),
                     "clip_ms": clip, "adamw_ms": adamw, "reset_ms": max(reset, 0.0)})
    return rows


def measure_compiled(backbone: str, dataset: str, steps: int) -> dict:
    """The clip and the AdamW step as one ``torch.compile``d function, every classifier with
    gradients, the learning rates as tensors (set in place each step, as a schedule would, without
    recompiling): seconds to compile, then milliseconds per update."""
    _, params, config, optimizer = shrunk(backbone, dataset)
    for group in optimizer.param_groups:
        group["lr"] = torch.tensor(float(group["lr"]))
    for p in params:
        p.grad = torch.ones(1)
    optimizer.step()

    @torch.compile
    def update() -> None:
        torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm)
        optimizer.step()

    t0 = time.perf_counter()
    update()
    compile_s = time.perf_counter() - t0
    step = iter(range(10**9))

    def scheduled() -> None:
        factor = 1.0 - (next(step) % 100) / 100
        for group in optimizer.param_groups:
            group["lr"].fill_(group["base_lr"] * factor)
        update()

    return {"tensors": len(params), "compile_s": compile_s, "update_ms": timed(scheduled, steps)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backbone", default="minilm")
    parser.add_argument("--dataset", default="sentihood", choices=["sentihood", "semeval"])
    parser.add_argument("--steps", type=positive, default=200)
    parser.add_argument("--threads", type=positive, default=1)
    parser.add_argument("--compiled", action="store_true",
                        help="also time the clip and AdamW compiled as one function (minutes of compiling)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    try:
        rows = measure(args.backbone, args.dataset, args.steps)
    except AbsaError as err:                              # an unknown backbone, say
        sys.exit(f"update_overhead: {err}")
    r = rows[0]
    print(f"bert-single, {args.dataset}, {args.backbone}: {r['classifiers']} classifiers, "
          f"{r['tensors']} tensors, {r['groups']} AdamW groups, fused={r['fused']}; "
          f"{args.threads} thread(s), {args.steps} steps")
    heads = ("clip ms", "AdamW ms", "reset ms", "all ms")
    print(" | ".join([f"{'tensors with gradients':>24}", *(f"{h:>8}" for h in heads)]))
    for r in rows:
        total = r["clip_ms"] + r["adamw_ms"] + r["reset_ms"]
        times = (r["clip_ms"], r["adamw_ms"], r["reset_ms"], total)
        print(" | ".join([f"{r['with_gradients']:>24}", *(f"{t:8.2f}" for t in times)]))
    if args.compiled:
        c = measure_compiled(args.backbone, args.dataset, args.steps)
        print(f"compiled clip + AdamW, {c['tensors']} tensors with gradients: "
              f"{c['update_ms']:.2f} ms per update (compiling: {c['compile_s']:.0f} s)")


if __name__ == "__main__":
    main()
