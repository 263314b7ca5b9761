"""The speed target of the models issue, measured with ``absa bench`` on real SentiHood batches.

Target (2-core CPU, minilm, batch 24, SentiHood NLI-M): qacg-bert (paper preset) trains at
>= 15 examples/s and at >= 0.8x the throughput of bert-pair measured in the same run.

    python benchmarks/throughput.py [--steps 8] [--repeats 3] [--preset paper]

Prints the bench table, then one line per target with the measured value. On a machine shared
with other jobs the numbers are noisy: bench alternates the models batch by batch and keeps, per
batch, the fastest of the repeats.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from contextlib import redirect_stdout

from absa_lib.cli import main
from absa_lib.commands import non_negative, positive


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=positive, default=8)
    parser.add_argument("--repeats", type=positive, default=3)
    parser.add_argument("--warmup", type=non_negative, default=2)
    parser.add_argument("--preset", default="paper")
    parser.add_argument("--backbone", default="minilm")
    return parser.parse_args()


if __name__ == "__main__":
    args = parse_args()
    argv = ["bench", "--model", "qacg-bert", "bert-pair", "cg-bert", "--preset", args.preset,
            "--backbone", args.backbone, "--batch-size", "24", "--dataset", "sentihood", "--aux", "NLI-M",
            "--steps", str(args.steps), "--warmup", str(args.warmup), "--repeats", str(args.repeats)]
    print("absa " + " ".join(argv))
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = main(argv + ["--json"])
    if rc:
        sys.exit(rc)
    report = json.loads(buf.getvalue())
    print(json.dumps(report["setup"]))
    rows = {r["model"]: r for r in report["results"]}
    for name, row in rows.items():
        train, infer = row["train"], row["infer"]
        print(f"{name:<10} train {train['examples_per_s']:6.1f} ex/s {train['tokens_per_s']:7.0f} tok/s"
              f" ({train['vs_bert-pair']:.2f}x bert-pair) | infer {infer['examples_per_s']:6.1f} ex/s"
              f" ({infer['vs_bert-pair']:.2f}x) | train rounds (s): "
              + ", ".join(f"{s:.1f}" for s in train["round_seconds"]))
    qacg = rows["qacg-bert"]["train"]
    print(f"target qacg-bert >= 15 train ex/s: {qacg['examples_per_s']:.1f}"
          f" -> {'met' if qacg['examples_per_s'] >= 15 else 'NOT met'}")
    print(f"target qacg-bert >= 0.8x bert-pair: {qacg['vs_bert-pair']:.2f}x"
          f" -> {'met' if qacg['vs_bert-pair'] >= 0.8 else 'NOT met'}")
