"""What bert-single's compiled training step costs on mixed batches, and where the time goes (prints numbers).

bert-single keeps K classifiers (8 for SentiHood). On mixed batches every classifier runs on the whole
batch (fixed shapes), three ways: ``stacked`` (what training does) runs the K as one batched model,
their parameters stacked and the model vmapped over them; ``parts`` compiles each classifier on its
own (all K share one graph) and calls them one by one; ``whole`` compiles one graph holding K copies
of the model. The fourth way, ``per-context``, is the tables' BERT-single: each batch holds one
context's rows, so a step runs one classifier (sparse routing, by parts). This times, for each way,
from a cold compile cache:

- ``first steps``: the steps that compile (one per batch shape: two lengths, as padded batches have;
  training pads the stacked step's batches to ``max_length``, one length: time it with ``--length 112``),
- ``forward+backward``: the median of the later steps' forward and backward passes,
- ``update``: the median of what training does after them: the global gradient-norm clip, the
  fused AdamW step over the classifiers that have gradients (all K on mixed batches, one per-context)
  and the gradients' reset, each also timed on its own (medians: they need not add up),

and checks that each way gives the eager model's loss on the first batch.

    python benchmarks/per_context_compile.py                    # tiny random BERT on this CPU
    ABSA_MINILM_DIR=.carry/minilm python benchmarks/per_context_compile.py --backbone minilm \
        --device cuda --mode reduce-overhead --ways per-context stacked parts

On a CPU it needs a C++ compiler (inductor); ``--threads 1`` gives steadier numbers beside other jobs.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import time

from absa_lib.commands import positive

# the tables' step; mixed batches stacked (training), densely by parts, and densely as one graph
ROUTING = {"per-context": "sparse", "stacked": "stacked", "parts": "dense", "whole": None}
WAYS = tuple(ROUTING)


def _batch(g, size: int, length: int, contexts: int, vocab: int, device, one_context: bool = False):
    """Random token ids; rows of random contexts (mixed), or all of one random context."""
    import torch

    ids = torch.randint(5, vocab, (size, length), generator=g)
    context = torch.randint(0, contexts, (1,) if one_context else (size,), generator=g).expand(size)
    return {"input_ids": ids.to(device), "attention_mask": torch.ones_like(ids).to(device),
            "token_type_ids": torch.zeros_like(ids).to(device),
            "context_ids": context.contiguous().to(device),
            "labels": torch.randint(0, 3, (size,), generator=g).to(device)}


def _synced(device) -> float:
    """The time once ``device`` has done what was queued on it."""
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter()


def measure(way: str, args, device) -> dict:
    """Cold compile (fresh dynamo state and inductor cache), then timed training steps: forward and
    backward, then the update (clip and AdamW) timed apart."""
    import torch

    from absa_lib.device import compiled
    from absa_lib.models.registry import build_per_context
    from absa_lib.training.optim import adamw

    torch._dynamo.reset()
    torch.manual_seed(0)
    model = build_per_context(backbone=args.backbone, num_labels=3, num_contexts=args.contexts,
                              num_aspects=args.contexts).to(device).eval()   # eval: no dropout, comparable losses
    step = compiled(model, args.mode, ROUTING[way])
    params = list(model.parameters())
    optimizer = adamw(params, lr=1e-5)
    g = torch.Generator().manual_seed(1)
    shapes = [(args.batch_size, args.length), (args.batch_size, args.length + 16)]
    batches = [_batch(g, size, length, args.contexts, model.config.vocab_size, device, way == "per-context")
               for size, length in shapes]
    with torch.no_grad():
        eager_loss = float(model(**batches[0]).loss)

    def train_step(batch) -> tuple[float, float, torch.Tensor]:
        t0 = _synced(device)
        loss = step(**batch).loss
        loss.backward()
        if way != "per-context":                 # as training after dense routing: Adam skips absent contexts
            model.drop_absent_grads(batch["context_ids"])
        t = [t0, _synced(device)]
        torch.nn.utils.clip_grad_norm_(params, 1.0)                    # listed once, as training does
        t.append(_synced(device))
        optimizer.step()
        t.append(_synced(device))
        optimizer.zero_grad(set_to_none=True)
        t.append(_synced(device))
        return [b - a for a, b in itertools.pairwise(t)], loss.detach()         # forward+backward, clip, step, zero_grad

    first = []
    for i, batch in enumerate(batches * 2):                               # the second length makes them dynamic
        parts, loss = train_step(batch)
        first.append(sum(parts))
        if i == 0:
            compiled_loss = float(loss)
    timed = [train_step(batches[i % 2])[0] for i in range(args.steps)]

    def ms(*phases: int) -> float:                                        # median over the timed steps
        return 1000 * statistics.median(sum(t[k] for k in phases) for t in timed)

    return {"way": way, "first_steps_s": sum(first), "forward_backward_ms": ms(0), "update_ms": ms(1, 2, 3),
            "clip_ms": ms(1), "adamw_ms": ms(2), "zero_grad_ms": ms(3),
            "loss_vs_eager": abs(compiled_loss - eager_loss)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backbone", default="tiny")
    p.add_argument("--device", default="cpu")
    p.add_argument("--contexts", type=positive, default=8, help="classifiers (SentiHood: 8, SemEval: 5)")
    p.add_argument("--batch-size", type=positive, default=24)
    p.add_argument("--length", type=positive, default=48, help="the first batch length (the second is 16 more)")
    p.add_argument("--mode", default="default", choices=("default", "reduce-overhead"),
                   help="as absa train --compile (the gpu profile: reduce-overhead)")
    p.add_argument("--steps", type=positive, default=10, help="timed steps after compiling")
    p.add_argument("--threads", type=positive, default=None)
    p.add_argument("--ways", nargs="+", default=list(WAYS), choices=WAYS)
    p.add_argument("--one", choices=WAYS, help=argparse.SUPPRESS)   # a child process's way
    args = p.parse_args()
    import torch

    try:
        device = torch.device(args.device)
    except RuntimeError as err:
        p.error(f"--device {args.device}: {err}")
    if device.type == "cuda" and not torch.cuda.is_available():
        p.error(f"--device {args.device}: this torch sees no CUDA device")
    if args.one:

        if args.threads:
            torch.set_num_threads(args.threads)
        from absa_lib.errors import AbsaError

        try:
            r = measure(args.one, args, device)
        except AbsaError as err:                          # an unknown backbone, say
            sys.exit(f"per_context_compile: {err}")
        print(f"{r['way']:<12} {r['first_steps_s']:>30.1f} {r['forward_backward_ms']:>20.1f} {r['update_ms']:>10.1f} "
              f"{r['clip_ms']:>8.1f} {r['adamw_ms']:>8.1f} {r['zero_grad_ms']:>10.2f} {r['loss_vs_eager']:>15.2e}",
              flush=True)
        return
    print(f"backbone={args.backbone} device={args.device} contexts={args.contexts} batch={args.batch_size} "
          f"lengths={args.length},{args.length + 16} mode={args.mode}")
    print(f"{'way':<12} {'first 4 steps (compiling), s':>30} {'forward+backward, ms':>20} {'update, ms':>10} "
          f"{'= clip':>8} {'+ AdamW':>8} {'+ zero_grad':>10} {'|loss - eager|':>15}", flush=True)
    for way in args.ways:                  # each in a fresh process with a cold cache: nothing compiled is shared
        with tempfile.TemporaryDirectory() as cache:
            done = subprocess.run([sys.executable, __file__, *sys.argv[1:], "--one", way],
                                  env={**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}, check=False)
        if done.returncode:                # the child said why in one line
            sys.exit(done.returncode)


if __name__ == "__main__":
    main()
