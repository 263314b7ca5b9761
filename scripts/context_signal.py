"""How strongly the context id steers a freshly initialised CG-BERT / QACG-BERT (no training).

    python scripts/context_signal.py                       # MiniLM, 128 SentiHood training examples, 3 seeds
    python scripts/context_signal.py --backbone bert-base-uncased --examples 64

Without the auxiliary sentence the context id is the model's only clue to the target and aspect.
For each variant, over the seeds of the new layers' initialisation, it prints (mean over seeds)
:func:`absa_lib.evaluation.analysis.context_signal` computed in float64 (at initialisation the effect is far
below float32's resolution):

- the sd of the logits across the context ids for the same sentences, and its ratio to the sd
  across sentences;
- the norm of the gradient that reaches the context embedding table from the training loss;
- for CG-BERT, :func:`absa_lib.evaluation.analysis.attention_entropy`: how flat its attention starts (a gate
  that starts open scales the pretrained attention scores down), beside the uniform attention's.

Numbers, not timings: it reads the data from ``$ABSA_DATA_DIR`` (or ``--data-dir``).
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from absa_lib.commands import positive
from absa_lib.data import datasets as data
from absa_lib.data.features import encode_batch
from absa_lib.errors import AbsaError
from absa_lib.evaluation.analysis import attention_entropy, context_signal
from absa_lib.models import build_model, load_tokenizer

VARIANTS = {  # label: (model, preset, overrides)
    "CG-BERT, paper preset (tanh gate, init 1e-3)": ("cg-bert", "paper", {}),
    "CG-BERT, sigmoid gate": ("cg-bert", "paper", {"gate_activation": "sigmoid"}),
    "CG-BERT, init 0.02": ("cg-bert", "paper", {"init_std": 0.02}),
    "CG-BERT, official preset": ("cg-bert", "official", {}),
    "QACG-BERT, paper preset": ("qacg-bert", "paper", {}),
    "QACG-BERT, official preset": ("qacg-bert", "official", {}),
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backbone", default="minilm")
    p.add_argument("--dataset", default="sentihood", choices=data.DATASETS)
    p.add_argument("--examples", type=positive, default=128, help="training examples (every 3rd from the start)")
    p.add_argument("--seeds", type=int, nargs="+", default=[42, 43, 44])
    p.add_argument("--max-length", type=positive, default=128)
    p.add_argument("--data-dir", default=None)
    args = p.parse_args()

    examples = data.load_examples(args.dataset, "train", args.data_dir)[::3][: args.examples]
    batch, _ = encode_batch(examples, "none", load_tokenizer(args.backbone), args.max_length)
    k = data.num_contexts(args.dataset)
    print(f"{args.backbone}, {args.dataset}, {len(examples)} training examples without auxiliary sentence, "
          f"{k} contexts, seeds {' '.join(map(str, args.seeds))}, float64, eval mode\n")
    print("| variant | logit sd across contexts | ratio to sd across sentences | ‖∂L/∂E_ctx‖ | attention entropy (nats) |")
    print("|---|---|---|---|---|")
    for label, (model_name, preset, overrides) in VARIANTS.items():
        rows = []
        for seed in args.seeds:
            torch.manual_seed(seed)
            model = build_model(model_name, backbone=args.backbone, num_labels=len(data.LABELS[args.dataset]),
                                num_contexts=k, preset=preset, **overrides).double()
            rows.append(context_signal(model, batch, k))
            if model_name == "cg-bert":
                rows[-1].update(attention_entropy(model, batch))
        mean = {key: float(np.mean([r[key] for r in rows])) for key in rows[0]}
        entropy = f"{mean['entropy']:.2f} (uniform {mean['uniform']:.2f})" if "entropy" in mean else "–"
        print(f"| {label} | {mean['logit_sd_contexts']:.1e} | "
              f"{mean['logit_sd_contexts'] / mean['logit_sd_sentences']:.1e} | {mean['grad_context_embedding']:.1e} | "
              f"{entropy} |")


if __name__ == "__main__":
    try:
        main()
    except AbsaError as err:                 # bad data dir, unknown backbone...: one line, no traceback
        raise SystemExit(f"context_signal: {err}") from None
