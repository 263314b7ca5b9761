"""``absa info --model NAME --preset P --backbone B``: parameter count, per-component breakdown and the
resolved model fields (what ``build_model`` would build, without loading weights). For bert-single,
which ``absa train`` trains as one classifier per context, also the count of a whole run."""

from __future__ import annotations

import argparse

from absa_lib.commands import parse_overrides, print_json, whole_number

HELP = "parameter count and configuration of a model"


def add_parser(sub: argparse._SubParsersAction) -> None:
    from absa_lib.data import datasets as D
    from absa_lib.models import BACKBONES, MODELS, PRESETS

    p = sub.add_parser("info", help=HELP,
                       description="Count the parameters of a model (built on PyTorch's meta device: no "
                       "weights are loaded or allocated) and show its preset fields.")
    p.add_argument("--model", required=True, choices=MODELS)
    p.add_argument("--preset", default="paper", choices=PRESETS)
    p.add_argument("--backbone", default="bert-base-random",
                   help=f"one of {', '.join(BACKBONES)} or a local model directory "
                   "(default: bert-base-random)")
    p.add_argument("--num-labels", type=whole_number(1), default=len(D.LABELS["sentihood"]),
                   help="classifier outputs ({})".format(", ".join(f"{len(D.LABELS[d])} {d}" for d in D.DATASETS)))
    p.add_argument("--num-contexts", type=whole_number(1), default=D.num_contexts("sentihood"),
                   help="context ids ({})".format(", ".join(f"{D.num_contexts(d)} {d}" for d in D.DATASETS)))
    p.add_argument("--num-aspects", type=whole_number(1), default=None,
                   help="aspects per target (man-bert has one head each; default: that of the dataset with "
                   "this many contexts, else the number of contexts)")
    p.add_argument("--set", nargs="*", default=[], metavar="FIELD=VALUE",
                   help="override model fields, e.g. quasi=false quasi_proj=per_head init_std=0.02")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


ARCHITECTURE = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")


def _aspects_per_target(num_contexts: int) -> int:
    """The aspects per target of the dataset with ``num_contexts`` context ids (SentiHood 8 -> 4);
    ``num_contexts`` itself for any other number (one target)."""
    from absa_lib.data import datasets as D

    return next((D.group_size(d) for d in D.DATASETS if D.num_contexts(d) == num_contexts), num_contexts)


def run(args: argparse.Namespace) -> int:
    import torch

    from absa_lib.models.absa_model import count_parameters, parameter_breakdown
    from absa_lib.models.registry import model_class, model_config, reads, traits

    aspects = args.num_aspects or _aspects_per_target(args.num_contexts)
    config = model_config(args.model, backbone=args.backbone, num_labels=args.num_labels,
                          num_contexts=args.num_contexts, preset=args.preset, num_aspects=aspects,
                          **parse_overrides(args.set, "--set"))
    with torch.device("meta"):
        model = model_class(args.model)(config)
    uses_context = model.uses_context or traits(args.model).context_ids
    info = {"model": args.model, "preset": args.preset if model.uses_context else None, "backbone": args.backbone,
            "num_labels": args.num_labels, "num_contexts": args.num_contexts if uses_context else None,
            "parameters": count_parameters(model), "breakdown": parameter_breakdown(model),
            "fields": {k: getattr(config, k) for k in reads(args.model)},
            "architecture": {k: getattr(config, k) for k in ARCHITECTURE}}
    if traits(args.model).per_context:       # absa train trains one classifier per context (Sun et al.)
        info["classifiers_per_run"] = args.num_contexts
        info["parameters_per_run"] = args.num_contexts * info["parameters"]
    if args.json:
        print_json(info)
        return 0
    preset = f" ({args.preset} preset)" if model.uses_context else ""
    print(f"{args.model}{preset} on {args.backbone}: {info['parameters']:,} parameters")
    if "classifiers_per_run" in info:
        print(f"  one classifier per context: a run trains {info['classifiers_per_run']} of them, "
              f"{info['parameters_per_run']:,} parameters (--num-contexts)")
    for name, n in info["breakdown"].items():
        print(f"  {name:<26} {n:>13,}")
    print("  architecture: " + ", ".join(f"{k}={v}" for k, v in info["architecture"].items()))
    if info["fields"]:
        print("  fields: " + ", ".join(f"{k}={v}" for k, v in info["fields"].items()))
    return 0
