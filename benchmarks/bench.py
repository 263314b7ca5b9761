"""``absa bench``: training and inference throughput on real examples (the code of the command;
``absa_lib/commands/bench.py`` loads this file from the checkout, and so does ``python benchmarks/bench.py``).

    absa bench --model qacg-bert bert-pair --preset paper --backbone minilm --batch-size 24 \\
        --dataset sentihood --aux NLI-M --steps 20 --repeats 3

A training step is forward + cross-entropy + backward + AdamW step (the fused kernel where
available) on the model ``absa train`` trains: for ``bert-single`` the K per-context classifiers,
routed as in training (gradient clipping and the learning-rate schedule are left out: a few
percent of a step); inference is a forward pass under ``torch.inference_mode``. Batches are
drawn at random (seeded) from the split (``--sampler per-context``: each from one context, as
bert-single's table runs train; by default mixed, as its ablation row), encoded with
``absa_lib.data.features.encode_examples`` and padded to the longest sequence in the batch (dynamic
padding, as in training); every model sees the same batches. Two settings are timed side by side
on the same examples: the baseline (fp32, random batches, eager) and the one asked for (``--precision``, ``--group-by-length``, ``--compile``; a
compiled setting pads its batches as compiled training does, and its first batches of each shape
pay for compilation, so give it ``--repeats 2`` or more; inference stays eager, as evaluation in
training does). With several models and ``--repeats`` > 1, the models take turns batch by batch, and for
each batch the fastest of the repeats counts (other processes on a shared machine only ever add
time; the JSON also has each round's total and their median). ``--threads 1`` gives steadier numbers when other jobs share the CPU.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from absa_lib.commands import DATA_DIR_HELP, non_negative, positive, print_json
from absa_lib.commands.bench import HELP


def add_parser(sub: argparse._SubParsersAction) -> None:
    from absa_lib.data.datasets import DATASETS
    from absa_lib.data.inputs import INPUT_VARIANTS
    from absa_lib.models import MODELS, PRESETS

    p = sub.add_parser("bench", help=HELP,
                       description=__doc__.split("\n\n")[1],
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", nargs="+", required=True, choices=MODELS,
                   help="one or more models (they see the same batches)")
    p.add_argument("--preset", default="paper", choices=PRESETS)
    p.add_argument("--backbone", default="minilm")
    p.add_argument("--dataset", default="sentihood", choices=DATASETS)
    p.add_argument("--aux", default="NLI-M", choices=INPUT_VARIANTS, help="input variant (default NLI-M)")
    p.add_argument("--split", default="train")
    p.add_argument("--batch-size", type=positive, default=24)
    p.add_argument("--steps", type=positive, default=10, help="timed batches per round")
    p.add_argument("--warmup", type=non_negative, default=2, help="untimed batches before the first round")
    p.add_argument("--repeats", type=positive, default=1, help="rounds; per batch the fastest counts")
    p.add_argument("--max-length", type=positive, default=128)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=positive, default=None,
                   help="torch CPU threads (default: torch's choice; 1 is steadier on a busy machine)")
    p.add_argument("--precision", default="auto", choices=("auto", "fp32", "bf16"),
                   help="the fast setting's precision (default auto: bf16 where native, else fp32)")
    p.add_argument("--sampler", default="uniform", choices=("uniform", "per-context"),
                   help="batches of random inputs (default), or each of one context's (as absa train "
                   "--sampler per-context, bert-single's table runs)")
    p.add_argument("--group-by-length", action="store_true",
                   help="the fast setting batches inputs of similar length (as absa train --group-by-length)")
    p.add_argument("--compile", default="none", choices=("none", "default", "reduce-overhead"),
                   help="the fast setting's training step through torch.compile (as absa train --compile)")
    p.add_argument("--no-inference", action="store_true", help="time training only")
    p.add_argument("--inference", choices=("bf16", "int8"), default=None,
                   help="time inference only: fp32 on random and on length-sorted batches (absa predict's way) "
                        "beside this mode on the same length-sorted batches (absa predict --inference)")
    p.add_argument("--data-dir", default=None, help=DATA_DIR_HELP)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def _batches(args, tokenizer, encoded: list, group_by_length: bool, pad_multiple: int = 1) -> list[dict]:
    """The same seeded inputs of the split (``encoded``: all of them), in random batches or in
    batches of similar length (as training); with ``--sampler per-context``, the first of the
    batches that training's per-context sampler draws from the whole split."""
    import torch

    from absa_lib.data.features import batches, length_grouped, per_context, sequential

    n_batches = args.warmup + args.steps
    n = n_batches * args.batch_size
    g = torch.Generator().manual_seed(args.seed)
    order = torch.randperm(len(encoded), generator=g).tolist()
    if args.sampler == "per-context":
        lengths = [len(e.input_ids) for e in encoded] if group_by_length else None
        index = per_context(order, [e.context_id for e in encoded], args.batch_size, g, lengths)
        chosen, index = encoded, (index * (n_batches // len(index) + 1))[:n_batches]
    else:
        chosen = [encoded[i] for i in (order * (n // len(order) + 1))[:n]]
        index = (length_grouped(list(range(n)), [len(e.input_ids) for e in chosen], args.batch_size, g)
                 if group_by_length else sequential(list(range(n)), args.batch_size))
    return [b for _, b in batches(chosen, index, tokenizer.pad_token_id or 0, pad_multiple)]


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()


def _train_step(model, optimizer, batch, device, precision, step_model=None) -> tuple[float, float]:
    """One timed training step, (wall, CPU) seconds; ``step_model``: the compiled forward (default ``model``)."""
    from absa_lib.device import autocast

    model.train()
    _sync(device)
    t0, c0 = time.perf_counter(), time.process_time()
    with autocast(device, precision):
        loss = (model if step_model is None else step_model)(**batch).loss
    loss.backward()
    model.after_backward(step_model, batch.get("context_ids"))        # as in training
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    _sync(device)
    return time.perf_counter() - t0, time.process_time() - c0


def _infer(model, batch, device, precision) -> tuple[float, float]:
    """One timed forward pass without gradients, (wall, CPU) seconds."""
    import torch

    from absa_lib.device import autocast

    model.eval()
    _sync(device)
    t0, c0 = time.perf_counter(), time.process_time()
    with torch.inference_mode(), autocast(device, precision):
        model(**{k: v for k, v in batch.items() if k != "labels"})
    _sync(device)
    return time.perf_counter() - t0, time.process_time() - c0


def _summarise(reps: list[list[tuple[float, float]]], n_ex: int, n_tok: int) -> dict:
    """reps[repeat][batch] = (wall, cpu) seconds -> throughput from the fastest repeat of each batch."""
    fastest = [min(per_batch) for per_batch in zip(*reps, strict=True)]
    sec, cpu = sum(f[0] for f in fastest), sum(f[1] for f in fastest)
    rounds = [sum(wall for wall, _ in rep) for rep in reps]
    return {"examples_per_s": n_ex / sec, "tokens_per_s": n_tok / sec, "seconds": sec, "cpu_seconds": cpu,
            "round_seconds": rounds, "median_round_seconds": statistics.median(rounds)}


def run(args: argparse.Namespace) -> int:
    import torch

    from absa_lib.device import resolve_precision
    from absa_lib.models import load_tokenizer, traits

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    tokenizer = load_tokenizer(args.backbone)
    args.model = list(dict.fromkeys(args.model))            # each model once
    _check_as_training(args, tokenizer)
    # two settings side by side: the baseline (fp32, random batches, eager) and the one asked for
    fast = (resolve_precision(args.precision, device), args.group_by_length, args.compile)
    settings = {"fp32 random": ("fp32", False, "none")}
    if args.inference:                               # inference only: fp32 sorted beside the mode, sorted
        settings.update({"fp32 grouped": ("fp32", True, "none"), f"{args.inference} grouped": (args.inference, True, "none")})
    else:
        label = f"{fast[0]} {'grouped' if fast[1] else 'random'}" + ("" if fast[2] == "none" else f" {fast[2]}")
        settings.setdefault(label, fast)
    data = _setting_batches(args, tokenizer, settings, device)
    models = _warmed_up_models(args, settings, data, device)
    phases = ("infer",) if args.inference else ("train",) if args.no_inference else ("train", "infer")
    times = _timed_rounds(args, models, settings, data, phases, device)
    timed = data["fp32 random"][1]
    n_ex = sum(len(b["labels"]) for b in timed)
    n_tok = sum(int(b["attention_mask"].sum()) for b in timed)
    ref = next((m for m in models if traits(m).reads == "pair"), args.model[0])   # BERT-pair: no context guidance
    rows = _result_rows(args, times, phases, ref, n_ex, n_tok)
    cpu = f"cpu ({torch.get_num_threads()} threads)"
    setup = {"device": torch.cuda.get_device_name() if device.type == "cuda" else cpu,
             "backbone": args.backbone, "dataset": args.dataset, "aux": args.aux,
             "batch_size": args.batch_size, "sampler": args.sampler, "timed_batches": args.steps,
             "examples": n_ex, "real_tokens": n_tok,
             "padded_tokens": {label: sum(b["attention_mask"].numel() for b in data[label][1]) for label in settings},
             "repeats": args.repeats, "compile": args.compile, "cpu_native_bf16": device.type == "cpu" and resolve_precision("auto", device) == "bf16"}
    if args.json:
        print_json({"setup": setup, "results": rows})
    else:
        _print_table(setup, rows, phases, ref)
    return 0


def _train_config(args, name: str):
    """The :class:`TrainConfig` of ``absa train`` with these settings for model ``name`` (checked as
    training checks it: model and input variant, sampler)."""
    from absa_lib.training.config import TrainConfig

    return TrainConfig(dataset=args.dataset, model=name, preset=args.preset, aux=args.aux, backbone=args.backbone,
                       batch_size=args.batch_size, max_length=args.max_length, sampler=args.sampler,
                       precision=args.precision, compile=args.compile, group_by_length=args.group_by_length)


def _check_as_training(args, tokenizer) -> None:
    """Each model's settings as ``absa train`` checks them (model and input variant, sampler,
    ``--max-length``): a setting training refuses would time steps no run takes."""
    from absa_lib.training.config import check_max_length

    for name in args.model:
        check_max_length(_train_config(args, name), tokenizer)


def _setting_batches(args, tokenizer, settings: dict, device) -> dict[str, tuple[list, list]]:
    """Per setting: (warm-up batches, timed batches) on ``device``, from one encoding of the split."""
    from absa_lib.data import datasets as D
    from absa_lib.data.features import encode_examples
    from absa_lib.device import pad_multiple
    from absa_lib.evaluation.inference import to_device
    from absa_lib.models.bert_single import step_routing

    examples = D.load_examples(args.dataset, args.split, data_dir=args.data_dir)
    encoded = encode_examples(examples, args.aux, tokenizer, args.max_length)
    stacked = any(step_routing(name, args.sampler) == "stacked" for name in args.model)   # as training pads it
    data = {}
    for label, (_, grouped, mode) in settings.items():
        pad = pad_multiple(mode, "stacked" if stacked else None, args.max_length)
        batches = [to_device(b, device) for b in _batches(args, tokenizer, encoded, grouped, pad)]
        data[label] = batches[:args.warmup], batches[args.warmup:]
    return data


def _warmed_up_models(args, settings: dict, data: dict, device) -> dict[str, tuple]:
    """Each model with its optimizer and its step per setting (compiled where asked), after the
    untimed warm-up batches of every setting."""
    from absa_lib.data.inputs import model_sizes
    from absa_lib.device import compiled
    from absa_lib.evaluation.inference import for_inference
    from absa_lib.models.registry import build_for_training
    from absa_lib.training.optim import build_optimizer

    models = {}
    for name in args.model:
        model = build_for_training(name, backbone=args.backbone, preset=args.preset,
                                   **model_sizes(args.dataset, args.aux)).to(device)
        opt = build_optimizer(model, _train_config(args, name))          # training's parameter groups
        routing = model.step_routing(args.sampler)
        steps = {label: compiled(model, mode, routing) for label, (_, _, mode) in settings.items()}
        runners = {label: for_inference(model, precision) for label, (precision, _, _) in settings.items()}
        for label, (precision, _, _) in settings.items():
            for batch in data[label][0]:
                if not args.inference:
                    _train_step(model, opt, batch, device, precision, steps[label])
                _infer(runners[label][0], batch, device, runners[label][1])
        models[name] = (model, opt, steps, runners)
    return models


def _timed_rounds(args, models: dict, settings: dict, data: dict, phases: tuple[str, ...], device) -> dict:
    """times[(name, setting)][phase][repeat][batch]: models and settings take turns batch by batch, so
    load from other processes hits them alike; per batch the fastest repeat counts (noise only adds)."""
    keys = [(name, label) for label in settings for name in models]
    times = {key: {ph: [[] for _ in range(args.repeats)] for ph in phases} for key in keys}
    for r in range(args.repeats):
        for b in range(args.steps):
            for name, label in keys:
                (model, opt, steps, runners), precision, batch = models[name], settings[label][0], data[label][1][b]
                if "train" in phases:
                    times[(name, label)]["train"][r].append(_train_step(model, opt, batch, device, precision,
                                                                        steps[label]))
                if "infer" in phases:
                    runner, run_precision = runners[label]
                    times[(name, label)]["infer"][r].append(_infer(runner, batch, device, run_precision))
    return times


def _result_rows(args, times: dict, phases: tuple[str, ...], ref: str, n_ex: int, n_tok: int) -> list[dict]:
    """One row per (model, setting): throughput per phase, and its ratio to ``ref`` and to fp32 random."""
    from absa_lib.models import traits

    rows = {key: {"model": key[0], "setting": key[1],
                  "preset": args.preset if traits(key[0]).presets else None,
                  **{ph: _summarise(reps, n_ex, n_tok) for ph, reps in t.items()}} for key, t in times.items()}
    for (name, label), row in rows.items():
        for ph in phases:
            speed = row[ph]["examples_per_s"]
            row[ph]["vs_" + ref] = speed / rows[(ref, label)][ph]["examples_per_s"]
            row[ph]["vs_fp32_random"] = speed / rows[(name, "fp32 random")][ph]["examples_per_s"]
            if (name, "fp32 grouped") in rows:               # --inference: the fp32 way absa predict batches
                row[ph]["vs_fp32_grouped"] = speed / rows[(name, "fp32 grouped")][ph]["examples_per_s"]
    return list(rows.values())


def _print_table(setup: dict, rows: list[dict], phases: tuple[str, ...], ref: str) -> None:
    print(", ".join(f"{k}={v}" for k, v in setup.items()))
    head = f"{'model':<12} {'preset':<8} {'setting':<28}"
    for ph in phases:
        head += f" {ph + ' ex/s':>11} {ph + ' tok/s':>12} {'vs ' + ref:>13} {'vs fp32 rnd':>11}"
        head += f" {'vs fp32 grp':>11}" if "vs_fp32_grouped" in rows[0][ph] else ""
    print(head)
    for row in rows:
        line = f"{row['model']:<12} {row['preset'] or '-':<8} {row['setting']:<28}"
        for ph in phases:
            r = row[ph]
            line += (f" {r['examples_per_s']:>11.1f} {r['tokens_per_s']:>12.0f} {r['vs_' + ref]:>12.2f}x"
                     f" {r['vs_fp32_random']:>10.2f}x")
            line += f" {r['vs_fp32_grouped']:>10.2f}x" if "vs_fp32_grouped" in r else ""
        print(line)


if __name__ == "__main__":                 # python benchmarks/bench.py ARGS: as absa bench ARGS
    from absa_lib.cli import main

    sys.exit(main(["bench", *sys.argv[1:]]))
