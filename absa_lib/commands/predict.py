"""``absa predict --run DIR "text"``: labels and probabilities for each target × aspect, as JSON;
``absa predict --run DIR --file reviews.txt [--out predictions.csv]``: one sentence per line, as CSV;
``--explain`` (JSON; with ``--file`` one object per line) and ``--explain-png FILE``: why, word by word."""

from __future__ import annotations

import argparse
import sys

from absa_lib.commands import print_json

HELP = "apply a trained run to review sentences"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("predict", help=HELP,
                       description="Predict the sentiment of every (target ×) aspect of a sentence (JSON), "
                       "or of every line of a file (CSV), with the dev-best model of a run. SentiHood text "
                       "must mask locations as LOCATION1/LOCATION2 (or name them with --locations).")
    p.add_argument("--run", required=True, help="a run folder printed by `absa train`, or a folder `absa export` wrote")
    p.add_argument("text", nargs="*", metavar="TEXT",     # several: refused in run() with a hint, not argparse's
                   help="one review sentence, quoted (several: one per line of a file, with --file)")
    p.add_argument("--file", metavar="PATH",
                   help="a UTF-8 text file, one review sentence per line ('-': standard input); blank "
                        "lines are skipped; writes CSV rows "
                        "line,[target,][location,]aspect,label,p_<label>...,truncated,text")
    p.add_argument("--out", metavar="CSV",
                   help="with --file: write the CSV here (atomically), not to standard output")
    p.add_argument("--targets", nargs="+", default=None, metavar="TARGET",
                   help="the targets to predict: SentiHood's LOCATION1/LOCATION2 masks, or your own data's "
                        "declared targets (default: every one the text names)")
    p.add_argument("--locations", nargs="+", default=None, metavar="NAME",
                   help="SentiHood only: place names to mask, numbered per sentence in the order given "
                        "(LOCATION1, LOCATION2), whole words, any case, before predicting")
    p.add_argument("--truncate", action="store_true", help="cut over-long text instead of refusing it")
    p.add_argument("--inference", default="fp32", choices=("fp32", "bf16", "int8"),
                   help="fp32 (default: the run's own numbers); bf16 (where the CPU or GPU has it natively) or int8 "
                        "linear layers (a CPU): faster, and some labels change; the measured price is in "
                        "docs/evidence/costs_and_speed.md")
    p.add_argument("--explain", action="store_true",
                   help="say why: each word's share of the gradient sensitivity of the predicted label (Figure 3's "
                        "relevance, summed over a word's WordPiece tokens); prints JSON, with --file too")
    p.add_argument("--explain-png", metavar="PNG", help="one sentence: draw the explanation (one row per aspect, "
                   "as Figure 3's panels) to this file; implies --explain")
    p.add_argument("--explain-head", nargs=2, type=int, metavar=("LAYER", "HEAD"), default=None,
                   help="QACG-BERT: also give, per word, the attention it receives in this layer and head (0-based) "
                        "as Figure 5 does: Â, A_self and the quasi term; with --explain-png also drawn to PNG's "
                        "name + _attention")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from absa_lib.apply import predict_text, predict_texts, predictions_csv, read_sentences
    from absa_lib.errors import AbsaError
    from absa_lib.fileio import atomic_write_bytes, output_file
    from absa_lib.training.records import load_model_folder

    texts = [args.text] if isinstance(args.text, str) else list(args.text or ())
    if len(texts) > 1:
        raise AbsaError(f"absa predict takes one sentence, quoted, as its argument, got {len(texts)} "
                        f"({', '.join(repr(t) for t in texts[:3])}{', ...' if len(texts) > 3 else ''}); for several, "
                        "write one per line to a file and give --file PATH")
    args.text = texts[0] if texts else None
    if (args.text is None) == (args.file is None):
        several = [f for f, v in (("--locations", args.locations), ("--targets", args.targets)) if v]
        hint = (f"; {' and '.join(several)} {'take' if len(several) > 1 else 'takes'} several values, so give "
                "the sentence before them"
                if args.text is None and several else "")
        raise AbsaError("give either a sentence or --file PATH (one sentence per line), not both or neither"
                        + hint)
    explain = args.explain or args.explain_png is not None or args.explain_head is not None
    head = tuple(args.explain_head) if args.explain_head else None
    if args.explain_png is not None and not args.explain_png.lower().endswith((".png", ".pdf", ".svg")):
        raise AbsaError(f"--explain-png {args.explain_png}: expected a .png (or .pdf, .svg) file name")
    if args.explain_png is not None and args.file is not None:
        raise AbsaError("--explain-png draws one sentence; give the sentence, or --explain with --file for JSON")
    if args.file is None:
        if args.out:
            raise AbsaError("--out is for --file; a single sentence's prediction is printed as JSON")
        png = output_file(args.explain_png) if args.explain_png else None
        result = predict_text(args.run, args.text, targets=args.targets, truncate=args.truncate,
                              locations=args.locations, explain=explain, inference=args.inference, explain_head=head)
        if png is not None:
            from absa_lib.data.datasets import NONE_LABEL
            from absa_lib.reports.plots import explanation_attention_figure, explanation_figure, save_figure

            fmt = (png.suffix.lstrip(".") or "png",)
            save_figure(explanation_figure(result), png.parent, png.stem, formats=fmt, close=True)
            print(f"[absa] explanation -> {args.explain_png}", file=sys.stderr)
            if head is not None:
                figure = explanation_attention_figure(result, NONE_LABEL.get(result["dataset"]))
                save_figure(figure, png.parent, png.stem + "_attention", formats=fmt, close=True)
                print(f"[absa] attention -> {png.with_name(png.stem + '_attention' + png.suffix)}", file=sys.stderr)
        print_json(result)
        return 0
    out = output_file(args.out) if args.out else None
    sentences = read_sentences(args.file)
    source = "standard input" if args.file == "-" else args.file
    trained = load_model_folder(args.run)
    results = predict_texts(trained, [text for _, text in sentences], targets=args.targets,
                            truncate=args.truncate, locations=args.locations,
                            names=[f"{source}: line {line}" for line, _ in sentences], explain=explain,
                            inference=args.inference, explain_head=head)
    if explain:                                        # lists per word: JSON, one object per line of the file
        import json

        table = "".join(json.dumps({"line": line, **r}, ensure_ascii=False) + "\n"
                        for (line, _), r in zip(sentences, results, strict=True))
    else:
        table = predictions_csv(trained.config.dataset, results, [line for line, _ in sentences])
    if out:
        atomic_write_bytes(out, table.encode("utf-8"))
        n = sum(len(r["predictions"]) for r in results)
        print(f"[absa] {len(sentences)} sentences, {n} predictions -> {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(table)
    return 0
