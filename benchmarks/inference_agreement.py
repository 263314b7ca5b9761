"""What faster inference costs in answers: a trained run's full test set through fp32 (its own numbers)
and through each ``absa predict --inference`` mode, side by side (prints numbers).

Per run and mode: the share of test examples whose predicted label changes against fp32, each metric
of the dataset's table in both and the difference (points), and the throughput of each pass (the
faster of ``--repeats`` interleaved passes over the whole test set, length-sorted batches of
``--batch-size``, as ``absa predict`` batches).

    python benchmarks/inference_agreement.py RUN [RUN ...] [--modes int8 bf16] [--batch-size 24]

With ``--gemm`` it also prints the bound on any int8 path: the fp32 and int8 (``torch._int_mm``) matmuls
of a MiniLM layer's shapes on 600 tokens, and, per run, the share of its fp32 pass that its linear
layers' FLOPs take at that matmul speed; if a share f of the time is matmuls that int8 makes r times
faster, nothing else changing, the pass gets at most 1 / (1 − f + f / r) times faster.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from absa_lib.commands import positive
from absa_lib.data import datasets as D
from absa_lib.data.features import encode_examples
from absa_lib.device import cpu_has_native_bf16
from absa_lib.evaluation.inference import INFERENCE, class_probabilities, for_inference, predict_probs
from absa_lib.evaluation.metrics import compute_metrics
from absa_lib.models import load_tokenizer
from absa_lib.reports.tables import metric_columns
from absa_lib.training.records import load_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="run folders (with their checkpoints)")
    parser.add_argument("--modes", nargs="+", default=["int8", "bf16"], choices=[m for m in INFERENCE if m != "fp32"])
    parser.add_argument("--batch-size", type=positive, default=24)
    parser.add_argument("--repeats", type=positive, default=2)
    parser.add_argument("--gemm", action="store_true", help="also print the matmul bound (above)")
    args = parser.parse_args()
    print(f"CPU threads {torch.get_num_threads()}, native bf16: {cpu_has_native_bf16()}")
    gemm = _gemm_rates() if args.gemm else None
    for path in args.runs:
        run = load_run(path)
        c = run.config
        examples = D.eval_subset(D.load_examples(c["dataset"], "test"), c["dataset"], c.get("max_eval_examples"))
        tokenizer = load_tokenizer(c["backbone"])
        encoded = encode_examples(examples, c["aux"], tokenizer, c["max_length"])
        model = run.load_model().eval()
        runners = {mode: for_inference(model, mode) for mode in ["fp32", *args.modes]}
        probs, speed = {}, dict.fromkeys(runners, 0.0)
        for _ in range(args.repeats):
            for mode, (runner, precision) in runners.items():
                t0 = time.perf_counter()
                out = predict_probs(runner, encoded, args.batch_size, tokenizer.pad_token_id or 0, precision)
                speed[mode] = max(speed[mode], len(encoded) / (time.perf_counter() - t0))
                probs[mode] = class_probabilities(c["dataset"], c["aux"], out)
        gold = np.array([e.label_id for e in examples])
        scores = {mode: compute_metrics(c["dataset"], gold, p) for mode, p in probs.items()}
        print(f"\n{c['dataset']} {c['model']} {c['aux']} seed {c['seed']} (run {run.run_id}, trained on "
              f"{run.env.device_name}): {len(examples)} test examples, batch {args.batch_size}")
        print(f"  {'mode':<5} {'ex/s':>7} {'speed-up':>8} {'labels changed':>15}  " +
              "  ".join(f"{title} (Δ)" for _, title, _ in metric_columns(c["dataset"])))
        for mode in runners:
            changed = int((probs[mode].argmax(1) != probs["fp32"].argmax(1)).sum())
            cells = "  ".join(f"{100 * scores[mode][k]:.{d}f} ({100 * (scores[mode][k] - scores['fp32'][k]):+.{d}f})"
                              for k, _, d in metric_columns(c["dataset"]))
            print(f"  {mode:<5} {speed[mode]:7.1f} {speed[mode] / speed['fp32']:7.2f}x {changed:6d} "
                  f"({100 * changed / len(examples):5.2f}%)  {cells}")
        if gemm:
            hidden, inner = model.config.hidden_size, model.config.intermediate_size
            flops = sum(len(e.input_ids) for e in encoded) * 2 * hidden * (4 * hidden + 2 * inner) * model.config.num_hidden_layers
            share = flops / gemm["fp32"] / (len(encoded) / speed["fp32"])
            ratio = gemm["fp32"] and gemm["int8"] / gemm["fp32"]
            print(f"  linear layers: {flops / 1e9:.0f} GFLOP, {100 * share:.0f}% of the fp32 pass at the matmuls' "
                  f"{gemm['fp32'] / 1e9:.0f} GFLOP/s; int8 matmuls {ratio:.2f}x faster: any int8 path at most "
                  f"{1 / (1 - min(share, 1) + min(share, 1) / ratio):.2f}x")


def _gemm_rates(tokens: int = 600, hidden: int = 384, inner: int = 1536, repeats: int = 30) -> dict[str, float]:
    """FLOP/s of fp32 and int8 matmuls of one MiniLM layer's shapes (QKV, attention output, FFN in and out)."""
    shapes = [(hidden, 3 * hidden), (hidden, hidden), (hidden, inner), (inner, hidden)]
    seconds = {"fp32": 0.0, "int8": 0.0}
    for k, n in shapes:
        a, b = torch.randn(tokens, k), torch.randn(k, n)
        ai, bi = torch.randint(-127, 127, (tokens, k), dtype=torch.int8), torch.randint(-127, 127, (k, n), dtype=torch.int8)
        for mode, f in (("fp32", lambda a=a, b=b: a @ b), ("int8", lambda ai=ai, bi=bi: torch._int_mm(ai, bi))):
            f()
            t0 = time.perf_counter()
            for _ in range(repeats):
                f()
            seconds[mode] += (time.perf_counter() - t0) / repeats
    flops = sum(2 * tokens * k * n for k, n in shapes)
    rates = {mode: flops / s for mode, s in seconds.items()}
    print(f"matmuls of one MiniLM layer on {tokens} tokens: fp32 {rates['fp32'] / 1e9:.0f} GFLOP/s, "
          f"int8 (torch._int_mm) {rates['int8'] / 1e9:.0f} GFLOP/s ({rates['int8'] / rates['fp32']:.2f}x)")
    return rates


if __name__ == "__main__":
    main()
