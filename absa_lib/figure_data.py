"""The analysis arrays behind Figures 3-5, computed from a trained QACG-BERT and saved as JSON.

The notebooks save what these functions return under ``results/analysis/`` so that the
``render`` profile redraws the figures (:mod:`absa_lib.plots`) without a model.

* Figure 3 (:func:`relevance_data`): gradient sensitivity r_t = ‖∂z_c/∂E_t‖² / max_t′ ‖∂z_c/∂E_t′‖²
  (:func:`absa_lib.analysis.gradient_sensitivity`) of the same test sentence under different
  contexts, with c the gold label of each (target, aspect), as the paper's examples (which the
  model classified correctly; we record the prediction beside it).
* Figure 4 (:func:`component_histograms`): histograms of Â, λ_A, A_self, the raw A_quasi (and the
  quasi term λ_A ⊙ A_quasi the official notebook pooled) over every entry of every head and layer of
  n test examples whose gold label is not None (padding excluded).
* Figure 5 (:func:`attention_example`): per head of one layer, the column sums Σ_i M_ij over
  query rows i of Â, A_self and λ_A ⊙ A_quasi, one value per key token j.
"""

from __future__ import annotations

import numpy as np
import torch

from absa_lib import data as D
from absa_lib.analysis import extract_components, gradient_sensitivity
from absa_lib.errors import AbsaError
from absa_lib.features import collate, encode
from absa_lib.plots import FIG4_BINS, FIG4_PANELS, histogram_counts, merge_histograms

# SentiHood test sentences of the paper's figures (found by their words: "rent is cheaper ...
# central London"; "posh and expensive ... cheap"; "nice, but it's not cheap").
FIG3_PANELS = (
    {"title": "LOCATION1: price vs transit-location", "sentence_id": "583",
     "contexts": [("LOCATION1", "price"), ("LOCATION1", "transit-location")]},
    {"title": "price: LOCATION1 vs LOCATION2", "sentence_id": "1474",
     "contexts": [("LOCATION1", "price"), ("LOCATION2", "price")]},
)
FIG5_EXAMPLE = ("745", "LOCATION1", "price")
HIST_KEYS = tuple(k for k, _, _, _ in FIG4_PANELS) + ("quasi_term",)
_RANGES = {**{k: r for k, _, r, _ in FIG4_PANELS}, "quasi_term": (-1.0, 1.0)}


def encode_batch(examples: list, aux: str, tokenizer, max_length: int = 128) -> tuple[dict, list[list[str]]]:
    """Collated model inputs (see :func:`absa_lib.features.collate`) and the WordPiece tokens."""
    if aux in D.B_VARIANTS:
        raise AbsaError(f"aux={aux!r}: the figures need one input per example; use none or an M variant")
    enc = encode(D.build_inputs(examples, aux), tokenizer, max_length)
    batch = collate(enc, tokenizer.pad_token_id or 0)
    return batch, [tokenizer.convert_ids_to_tokens(e.input_ids) for e in enc]


@torch.no_grad()
def _predict(model, batch: dict) -> list[int]:
    model.eval()
    keys = ("input_ids", "attention_mask", "token_type_ids", "context_ids")
    device = next(model.parameters()).device
    return model(**{k: batch[k].to(device) for k in keys}).logits.argmax(-1).tolist()


def find_example(examples: list, key: tuple):
    """The example with ``key`` (SentiHood: (sentence_id, target, aspect))."""
    for ex in examples:
        if ex.key == key:
            return ex
    raise AbsaError(f"no example with key {key} in the {examples[0].dataset if examples else '?'} "
                    f"{examples[0].split if examples else ''} split; check the sentence id")


def relevance_data(model, tokenizer, examples: list, panels=FIG3_PANELS, aux: str = "none",
                   max_length: int = 128) -> list[dict]:
    """Figure 3 panels: relevance of each sentence token under each context (sentence part only).

    Returns:
        Per panel ``{"title", "sentence_id", "text", "tokens", "rows": {label: [r_t]}, "contexts":
        [{"target", "aspect", "gold", "predicted"}]}``; r_t in [0, 1] over ``[CLS] sentence [SEP]``
        (the auxiliary sentence, if any, is dropped after the gradient is taken).
    """
    labels = D.LABELS[examples[0].dataset]
    out = []
    for panel in panels:
        exs = [find_example(examples, (panel["sentence_id"], t, a)) for t, a in panel["contexts"]]
        batch, tokens = encode_batch(exs, aux, tokenizer, max_length)
        rel = gradient_sensitivity(model, batch, torch.tensor([ex.label_id for ex in exs]))   # (B, T)
        pred = _predict(model, batch)
        keep = (batch["token_type_ids"][0] == 0) & (batch["attention_mask"][0] == 1)        # (T,)
        n = int(keep.sum())
        rows, contexts = {}, []
        for i, ex in enumerate(exs):
            r = rel[i, :n].numpy()
            r = r / r.max() if r.max() > 0 else r                  # max 1 within the sentence part
            rows[f"{ex.target} · {ex.aspect} ({ex.label})"] = [round(float(x), 6) for x in r]
            contexts.append({"target": ex.target, "aspect": ex.aspect, "gold": ex.label, "predicted": labels[pred[i]]})
        out.append({"title": panel["title"], "sentence_id": panel["sentence_id"], "text": exs[0].text,
                    "tokens": tokens[0][:n], "rows": rows, "contexts": contexts})
    return out


def component_histograms(model, tokenizer, examples: list, n: int = 200, seed: int = 0, aux: str = "none",
                         max_length: int = 128, batch_size: int = 16) -> dict:
    """Figure 4: pooled histograms of the QACG components over ``n`` non-None test examples.

    Examples are drawn uniformly without replacement (``seed``) from those whose gold label is not
    None. Every entry of every head and layer counts, except padded rows/columns.

    Returns:
        ``{"n_examples", "seed", "keys": [example keys], "layers", "heads", "histograms": {key:
        histogram_counts dict}}`` for keys ``a_hat``, ``lambda_a``, ``a_self``, ``a_quasi``,
        ``quasi_term``.
    """
    none = D.NONE_LABEL[examples[0].dataset]
    pool = [ex for ex in examples if ex.label != none]
    rng = np.random.default_rng(seed)
    chosen = [pool[i] for i in sorted(rng.choice(len(pool), size=min(n, len(pool)), replace=False))]
    hists: dict = {k: None for k in HIST_KEYS}
    layers = heads = 0
    for start in range(0, len(chosen), batch_size):
        batch, _ = encode_batch(chosen[start:start + batch_size], aux, tokenizer, max_length)
        comps = extract_components(model, batch)
        if "a_quasi" not in comps[0]:
            raise AbsaError("Figure 4 needs a qacg-bert model with the quasi term on (quasi=True)")
        valid = batch["attention_mask"].bool()                                  # (B, T)
        pair = valid[:, None, :, None] & valid[:, None, None, :]                # (B, 1, T, T)
        row = valid[:, None, :, None]                                           # (B, 1, T, 1)
        layers, heads = len(comps), comps[0]["a_hat"].shape[1]
        for layer in comps:
            values = {k: layer[k].float().cpu() for k in ("a_hat", "lambda_a", "a_self", "a_quasi")}
            values["quasi_term"] = values["lambda_a"] * values["a_quasi"]
            for key in HIST_KEYS:
                v = values[key]
                m = (row if key == "lambda_a" else pair).expand_as(v)
                lo, hi = _RANGES[key]
                hists[key] = merge_histograms(hists[key], histogram_counts(v[m].numpy(), lo, hi, FIG4_BINS))
    return {"n_examples": len(chosen), "seed": seed, "aux": aux, "layers": layers, "heads": heads,
            "keys": [list(ex.key) for ex in chosen], "histograms": hists}


def attention_example(model, tokenizer, example, aux: str = "none", max_length: int = 128, layer: int = 0) -> dict:
    """Figure 5: column sums over query rows of Â, A_self and λ_A ⊙ A_quasi, for every head of ``layer``.

    Returns:
        ``{"sentence_id", "target", "aspect", "gold", "predicted", "text", "layer", "tokens",
        "a_hat", "a_self", "quasi_term": [H][T], "head": h}`` where ``h`` is the head whose quasi
        term has the most negative column sum (the paper shows "one of the heads"; we say which
        and keep all of them).
    """
    batch, tokens = encode_batch([example], aux, tokenizer, max_length)
    comps = extract_components(model, batch)
    if not 0 <= layer < len(comps) or "a_quasi" not in comps[layer]:
        raise AbsaError(f"layer {layer}: need a qacg-bert layer with the quasi term (model has {len(comps)} layers)")
    c = {k: v[0].float().cpu() for k, v in comps[layer].items()}               # (H, T, T) / (H, T, 1)
    sums = {"a_hat": c["a_hat"].sum(-2), "a_self": c["a_self"].sum(-2),
            "quasi_term": (c["lambda_a"] * c["a_quasi"]).sum(-2)}               # (H, T) each
    head = int(sums["quasi_term"].min(dim=-1).values.argmin())
    labels = D.LABELS[example.dataset]
    return {"sentence_id": example.sentence_id, "target": example.target, "aspect": example.aspect,
            "gold": example.label, "predicted": labels[_predict(model, batch)[0]], "text": example.text,
            "layer": layer, "tokens": tokens[0], "head": head,
            **{k: [[round(float(x), 6) for x in h] for h in v] for k, v in sums.items()}}


def figure5_rows(data: dict, head: int | None = None) -> dict:
    """The three rows of Figure 5 for one head (default: the one recorded in ``data``)."""
    h = data["head"] if head is None else head
    return {r"$\hat{A}$": data["a_hat"][h], r"$A_{\mathrm{self}}$": data["a_self"][h],
            r"$\lambda_A \odot A_{\mathrm{quasi}}$": data["quasi_term"][h]}
