"""How far two sets of CPU kernels part at the first training step, model by model.

    python scripts/kernel_drift.py save default.npz
    ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 \\
        python scripts/kernel_drift.py save avx2.npz
    python scripts/kernel_drift.py compare default.npz avx2.npz
    python scripts/kernel_drift.py weights RUN_A/checkpoints/last RUN_B/checkpoints/last

The committed fp32 records of some models reproduce exactly on another CPU and those of QACG-BERT
do not (docs/evidence/precision_and_devices.md, "fp32 on another CPU"). Is that
because the quasi-attention computes something the kernels round differently, or because every
model starts out a few ulps apart and QACG-BERT's training magnifies it? ``save`` builds each model
of VARIANTS at initialisation (fp32, one thread, eval mode, so no dropout), and stores the logits,
the loss and the gradient of every parameter for one batch of training examples. ``compare`` prints
their relative differences ‖a − b‖ / ‖b‖ between two files: written in two processes with other
kernels (the environment variables above are read when torch starts), or on two machines.
``weights`` compares two trained checkpoints of one configuration (the same ``absa train`` command
run under each set of kernels, into two ``--out`` folders, with ``ABSA_KEEP_LAST=1`` so that a finished
run keeps ``checkpoints/last``; ``checkpoints/best`` works too): how far apart training has carried the
two copies, overall and for the parameters furthest apart.

Numbers, not timings: it reads the data from ``$ABSA_DATA_DIR`` (or ``--data-dir``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

from absa_lib.commands import positive
from absa_lib.data import datasets as data
from absa_lib.data.features import encode_batch
from absa_lib.errors import AbsaError
from absa_lib.evaluation.analysis import batch_inputs
from absa_lib.models import build_model, load_tokenizer
from absa_lib.models.backbones import read_weights

VARIANTS = {  # label: (model, aux, model overrides); paper preset
    "BERT-pair (aux)": ("bert-pair", "NLI-M", {}),
    "CG-BERT (sentence only)": ("cg-bert", "none", {}),
    "QACG-BERT (sentence only)": ("qacg-bert", "none", {}),
    "QACG-BERT (aux)": ("qacg-bert", "NLI-M", {}),
    "QACG-BERT (aux), λ_A = 0": ("qacg-bert", "NLI-M", {"quasi": False}),
}


def first_step(args) -> dict[str, np.ndarray]:
    """Logits (B, C), loss () and the flattened gradient (P,) of each variant, keyed 'label|what'."""
    torch.set_num_threads(1)
    examples = data.load_examples(args.dataset, "train", args.data_dir)[::7][: args.examples]
    tokenizer = load_tokenizer(args.backbone)
    out = {}
    for label, (model_name, aux, overrides) in VARIANTS.items():
        batch, _ = encode_batch(examples, aux, tokenizer, args.max_length)
        torch.manual_seed(args.seed)
        model = build_model(model_name, backbone=args.backbone, num_labels=len(data.LABELS[args.dataset]),
                            num_contexts=data.num_contexts(args.dataset), preset="paper", **overrides).eval()
        logits = model(**batch_inputs(model, batch)).logits                                   # (B, C)
        loss = torch.nn.functional.cross_entropy(logits, batch["labels"])
        loss.backward()
        grad = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])   # (P,)
        out.update({f"{label}|logits": logits.detach().numpy(), f"{label}|loss": loss.detach().numpy(),
                    f"{label}|grad": grad.numpy()})
    return out


def load_saved(path: str) -> dict[str, np.ndarray]:
    """The arrays ``save`` wrote, or one AbsaError naming the file."""
    try:
        loaded = np.load(path)
    except (OSError, ValueError) as err:
        raise AbsaError(f"{path}: cannot be read as saved arrays ({err}); expected a file written by "
                        "kernel_drift.py save") from None
    if not isinstance(loaded, np.lib.npyio.NpzFile):
        raise AbsaError(f"{path}: not an .npz file of arrays; expected a file written by kernel_drift.py save")
    with loaded:
        return dict(loaded)


def relative(x: np.ndarray, y: np.ndarray) -> float:
    """‖x − y‖ / ‖y‖."""
    return float(np.linalg.norm(x - y) / max(np.linalg.norm(y), 1e-300))


def compare(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> list[str]:
    """One line per variant: the relative difference of its logits, loss and gradient."""
    if set(a) != set(b) or any(a[k].shape != b[k].shape for k in a):
        raise AbsaError(f"the two files hold other variants ({sorted(set(a) ^ set(b))[:2]}); "
                        "save both with the same version of this script")
    lines = [f"{'variant':<28} {'logits':>9} {'loss':>9} {'gradient':>9}"]
    for label in dict.fromkeys(k.split("|")[0] for k in a):
        rel = [relative(a[f"{label}|{w}"], b[f"{label}|{w}"]) for w in ("logits", "loss", "grad")]
        lines.append(f"{label:<28} " + " ".join(f"{r:9.1e}" for r in rel))
    return lines


def weights(a: Path, b: Path, top: int) -> list[str]:
    """‖a − b‖ / ‖b‖ over all parameters, the median over tensors, and the ``top`` tensors furthest apart."""
    wa, wb = read_weights(a), read_weights(b)
    if wa.keys() != wb.keys() or any(wa[k].shape != wb[k].shape for k in wa):
        raise AbsaError(f"{a} and {b} hold other parameters; compare two checkpoints of one configuration")
    apart = {k: float((wa[k] - wb[k]).square().sum()) for k in wa}             # ‖a − b‖² per tensor
    size = {k: float(wb[k].square().sum()) for k in wa}                        # ‖b‖² per tensor
    rel = {k: (apart[k] / max(size[k], 1e-300)) ** 0.5 for k in wa}
    total = (sum(apart.values()) / max(sum(size.values()), 1e-300)) ** 0.5
    lines = [f"all {len(wa)} tensors: {total:.1e}; median tensor {float(np.median(list(rel.values()))):.1e}"]
    lines += [f"  {r:.1e}  {k}" for k, r in sorted(rel.items(), key=lambda kv: -kv[1])[:top]]
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    save = sub.add_parser("save", help="compute the first step of every variant and store it")
    save.add_argument("out", help="an .npz file to write")
    save.add_argument("--backbone", default="minilm")
    save.add_argument("--dataset", default="semeval", choices=data.DATASETS)
    save.add_argument("--examples", type=positive, default=24, help="training examples (every 7th from the start)")
    save.add_argument("--seed", type=int, default=42)
    save.add_argument("--max-length", type=positive, default=128)
    save.add_argument("--data-dir", default=None)
    cmp = sub.add_parser("compare", help="relative differences between two saved files")
    cmp.add_argument("a")
    cmp.add_argument("b")
    wts = sub.add_parser("weights", help="how far apart two trained checkpoints of one configuration are")
    wts.add_argument("a", type=Path, help="a checkpoint folder (with model.safetensors)")
    wts.add_argument("b", type=Path)
    wts.add_argument("--top", type=positive, default=5, help="list the N tensors furthest apart")
    args = ap.parse_args(argv)
    try:
        if args.mode == "save":
            np.savez(args.out, **first_step(args))
        elif args.mode == "weights":
            print("\n".join(weights(args.a, args.b, args.top)))
        else:
            print("\n".join(compare(load_saved(args.a), load_saved(args.b))))
    except (AbsaError, OSError, ValueError) as err:     # no data, unreadable file: one line
        print(f"kernel_drift: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
