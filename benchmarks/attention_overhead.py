"""Cost of the context layers alone: forward + backward of each model on one fixed synthetic batch.

Real-data throughput (``absa bench``) mixes model cost with the padding of random batches; this
script holds the batch fixed (B x T tokens, the given number of padded positions) and alternates
the models, keeping each model's fastest of ``--repeats`` runs, so the ratio to bert-pair shows
what CG / QACG add. No optimizer step.

    python benchmarks/attention_overhead.py [--backbone minilm] [--batch 24] [--length 64] [--threads 1]
"""

from __future__ import annotations

import argparse
import time

import torch

from absa_lib.commands import positive
from absa_lib.models import build_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backbone", default="minilm")
    parser.add_argument("--batch", type=positive, default=24)
    parser.add_argument("--length", type=positive, default=64)
    parser.add_argument("--real", type=positive, default=40, help="real tokens per row (the rest is padding)")
    parser.add_argument("--repeats", type=positive, default=5)
    parser.add_argument("--threads", type=positive, default=1)
    args = parser.parse_args()
    if args.real > args.length:
        parser.error(f"--real {args.real}: expected at most --length ({args.length}) real tokens per row")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    B, T = args.batch, args.length
    mask = torch.zeros(B, T, dtype=torch.long)
    mask[:, :args.real] = 1
    mask[0] = 1                                            # the longest row sets T
    batch = {"input_ids": torch.randint(1000, 5000, (B, T)) * mask, "attention_mask": mask,
             "token_type_ids": torch.zeros(B, T, dtype=torch.long), "context_ids": torch.randint(0, 8, (B,)),
             "labels": torch.randint(0, 3, (B,))}
    specs = [("bert-pair", "paper"), ("cg-bert", "paper"), ("cg-bert", "official"),
             ("qacg-bert", "paper"), ("qacg-bert", "official")]
    models = {s: build_model(s[0], backbone=args.backbone, num_labels=3, num_contexts=8, preset=s[1]).train()
              for s in specs}
    best = {s: float("inf") for s in specs}
    for _ in range(args.repeats):
        for spec, model in models.items():
            t0 = time.perf_counter()
            model(**batch).loss.backward()
            best[spec] = min(best[spec], time.perf_counter() - t0)
            model.zero_grad(set_to_none=True)
    base = best[("bert-pair", "paper")]
    print(f"backbone={args.backbone} B={B} T={T} real={args.real} threads={args.threads} "
          f"repeats={args.repeats}")
    for (name, preset), sec in best.items():
        label = name if name == "bert-pair" else f"{name} ({preset})"
        print(f"{label:<22} fwd+bwd {sec * 1000:7.0f} ms  {B / sec:6.1f} ex/s  {base / sec:.2f}x bert-pair")


if __name__ == "__main__":
    main()
