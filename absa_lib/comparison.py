"""Notebook 06: the other attention systems beside BERT-pair, CG-BERT and QACG-BERT.

* :func:`comparison_table`: one row per grid spec, the test metrics of the paper's table (%) as
  mean ± sd over seeds at the dev-best epoch, with the test-best epoch (the official code's
  selection on the test set, optimistic) beside each.
* :func:`attention_comparison`: where each trained model puts its attention on one sentence and
  context (:func:`absa_lib.analysis.token_attention`), saved as JSON and drawn with
  :func:`absa_lib.plots.attention_rows`.
"""

from __future__ import annotations

import pandas as pd

from absa_lib.tables import METRICS, _fmt, _run_id, aggregate_metrics

COMPARED = ("MAN-BERT", "OA-BERT", "ATAE-LSTM", "QACG-BERT")     # the figure's rows (mode S runs)


def comparison_table(dataset: str, grid: dict, specs: list) -> pd.DataFrame:
    """Tidy table: ``label``, ``model``, ``aux``, ``objective``, ``change``, ``n_seeds``, ``backbone``,
    ``run_ids`` and per metric ``<m>``, ``<m>_sd`` (dev-best) and ``<m>_test_best``, ``<m>_test_best_sd``."""
    records = []
    for spec in specs:
        runs = grid.get((dataset, spec.label), [])
        rec = {"label": spec.label, "model": spec.model, "aux": spec.aux, "objective": spec.objective,
               "change": spec.change, "n_seeds": len(runs),
               "backbone": " ".join(sorted({str(r.config.get("backbone")) for r in runs})),
               "run_ids": " ".join(_run_id(r) for r in runs)}
        for protocol, suffix in (("dev_best", ""), ("test_best", "_test_best")):
            agg = aggregate_metrics(dataset, [r.selected(protocol)["test"] for r in runs])
            for key, (mean, sd) in agg.items():
                rec[key + suffix], rec[f"{key}{suffix}_sd"] = mean, sd
        records.append(rec)
    return pd.DataFrame.from_records(records)


def comparison_markdown(df: pd.DataFrame, dataset: str, title: str) -> str:
    """Cells ``dev-best mean ± sd [test-best mean ± sd]`` in % ('–': no run)."""
    metrics = METRICS[dataset]
    header = ["Model", "Input", "Objective", "Seeds"] + [t for _, t, _ in metrics]
    lines = [f"# {title}", "",
             "Test set, %: mean ± sd over seeds at the **dev-best** epoch, and in brackets at the "
             "test-best epoch (the official code's selection on the test set, optimistic).", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for rec in df.to_dict("records"):
        cells = [rec["label"], "sentence + auxiliary" if rec["aux"] != "none" else "sentence + context id",
                 rec["objective"], str(rec["n_seeds"])]
        for key, _, dec in metrics:
            if not rec["n_seeds"]:
                cells.append("–")
                continue
            dev = _fmt(rec[key], rec[f"{key}_sd"], dec)
            cells.append(f"{dev} [{_fmt(rec[f'{key}_test_best'], rec[f'{key}_test_best_sd'], dec)}]")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def attention_comparison(models: dict, tokenizer, example, max_length: int = 128) -> dict:
    """Per-token attention of each model on one example (sentence alone, context id).

    Args:
        models: ``{label: trained model}``, all reading the sentence alone (``aux=none``) with the
            same tokenizer, so their tokens line up.
        example: an :class:`absa_lib.data.Example`.

    Returns:
        ``{"sentence_id", "target", "aspect", "gold", "text", "tokens", "rows": {label: [T]},
        "predicted": {label: label name}}``.
    """
    import torch

    from absa_lib import data as D
    from absa_lib.analysis import token_attention
    from absa_lib.figure_data import encode_batch

    batch, tokens = encode_batch([example], "none", tokenizer, max_length)
    rows, predicted = {}, {}
    for label, model in models.items():
        rows[label] = [round(float(x), 6) for x in token_attention(model, batch)[0]]
        with torch.no_grad():
            logits = model(**{k: v for k, v in batch.items() if k != "labels"}).logits
        predicted[label] = D.LABELS[example.dataset][int(logits.argmax(-1)[0])]
    return {"sentence_id": example.sentence_id, "target": example.target, "aspect": example.aspect,
            "gold": example.label, "text": example.text, "tokens": tokens[0], "rows": rows, "predicted": predicted}
