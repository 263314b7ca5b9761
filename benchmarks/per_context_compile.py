"""What compiling bert-single's training step costs on mixed batches, two ways (prints numbers).

bert-single keeps K classifiers (8 for SentiHood). On mixed batches every classifier runs on the whole
batch (dense routing, fixed shapes). Compiled as a whole, the step is one graph holding K copies of
the model; compiled by parts (``CompiledParts``, what training does), each classifier is compiled on
its own and all K share one graph. This times, for each way, from a cold compile cache:

- ``first steps``: the steps that compile (one per batch shape: two lengths, as padded batches have),
- ``later step``: the median of the steps after them (the same arithmetic both ways: K models per row),

and checks that both ways give the eager model's loss on the first batch.

    python benchmarks/per_context_compile.py                    # tiny random BERT on this CPU
    ABSA_MINILM_DIR=.carry/minilm python benchmarks/per_context_compile.py --backbone minilm --device cuda

On a CPU it needs a C++ compiler (inductor); ``--threads 1`` gives steadier numbers beside other jobs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time


def _batch(g, size: int, length: int, contexts: int, vocab: int, device):
    import torch

    ids = torch.randint(5, vocab, (size, length), generator=g)
    return {"input_ids": ids.to(device), "attention_mask": torch.ones_like(ids).to(device),
            "token_type_ids": torch.zeros_like(ids).to(device),
            "context_ids": torch.randint(0, contexts, (size,), generator=g).to(device),
            "labels": torch.randint(0, 3, (size,), generator=g).to(device)}


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()


def measure(way: str, args, device) -> dict:
    """Cold compile (fresh dynamo state and inductor cache), then timed steps of forward + backward."""
    import torch

    from absa_lib.device import compiled
    from absa_lib.models.per_context import build_per_context

    torch._dynamo.reset()
    torch.manual_seed(0)
    model = build_per_context(backbone=args.backbone, num_labels=3, num_contexts=args.contexts,
                              num_aspects=args.contexts).to(device).eval()   # eval: no dropout, comparable losses
    step = compiled(model, args.mode) if way == "whole" else compiled(model, args.mode, parts=True, dense=True)
    g = torch.Generator().manual_seed(1)
    shapes = [(args.batch_size, args.length), (args.batch_size, args.length + 16)]
    batches = [_batch(g, size, length, args.contexts, model.config.vocab_size, device) for size, length in shapes]
    with torch.no_grad():
        eager_loss = float(model(**batches[0]).loss)
    first = []
    for i, batch in enumerate(batches * 2):                               # the second length makes them dynamic
        t0 = time.perf_counter()
        loss = step(**batch).loss
        loss.backward()
        model.zero_grad(set_to_none=True)
        _sync(device)
        first.append(time.perf_counter() - t0)
        if i == 0:
            compiled_loss = float(loss.detach())
    later = []
    for i in range(args.steps):
        t0 = time.perf_counter()
        loss = step(**batches[i % 2]).loss
        loss.backward()
        model.zero_grad(set_to_none=True)
        _sync(device)
        later.append(time.perf_counter() - t0)
    return {"way": way, "first_steps_s": sum(first), "later_step_ms": 1000 * statistics.median(later),
            "loss_vs_eager": abs(compiled_loss - eager_loss)}


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number of at least 1")
    return int(text)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backbone", default="tiny")
    p.add_argument("--device", default="cpu")
    p.add_argument("--contexts", type=_positive, default=8, help="classifiers (SentiHood: 8, SemEval: 5)")
    p.add_argument("--batch-size", type=_positive, default=24)
    p.add_argument("--length", type=_positive, default=48, help="the first batch length (the second is 16 more)")
    p.add_argument("--mode", default="default", choices=("default", "reduce-overhead"),
                   help="as absa train --compile (the gpu profile: reduce-overhead)")
    p.add_argument("--steps", type=_positive, default=10, help="timed steps after compiling")
    p.add_argument("--threads", type=_positive, default=None)
    p.add_argument("--ways", nargs="+", default=["parts", "whole"], choices=("parts", "whole"))
    p.add_argument("--one", choices=("parts", "whole"), help=argparse.SUPPRESS)   # a child process's way
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
        print(f"{r['way']:<6} {r['first_steps_s']:>30.1f} {r['later_step_ms']:>15.1f} {r['loss_vs_eager']:>15.2e}")
        return
    print(f"backbone={args.backbone} device={args.device} contexts={args.contexts} batch={args.batch_size} "
          f"lengths={args.length},{args.length + 16} mode={args.mode}")
    print(f"{'way':<6} {'first 4 steps (compiling), s':>30} {'later step, ms':>15} {'|loss - eager|':>15}", flush=True)
    for way in args.ways:                  # each in a fresh process with a cold cache: nothing compiled is shared
        with tempfile.TemporaryDirectory() as cache:
            done = subprocess.run([sys.executable, __file__, *sys.argv[1:], "--one", way],
                                  env={**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}, check=False)
        if done.returncode:                # the child said why in one line
            sys.exit(done.returncode)


if __name__ == "__main__":
    main()
