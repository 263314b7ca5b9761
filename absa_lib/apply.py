"""Apply a trained run to new text (``absa predict``): :func:`predict_text` (one sentence) and
:func:`predict_texts` (many, batched; :func:`read_sentences` reads them from a file) give one
prediction per target × aspect (SentiHood; your own data with targets) or per aspect category
(SemEval; yours without targets), with the probabilities of every label; :func:`predictions_csv`
writes them as CSV.

SentiHood models were trained on text whose location names are masked as ``LOCATION1`` /
``LOCATION2``; new text must use the same masks (``locations=["Camden", "Brixton"]`` masks those
names first, numbered per sentence as the dataset does), and the targets are the masks it contains.
"""

from __future__ import annotations

import csv
import io
import os
import re
import sys
from pathlib import Path

import numpy as np

from absa_lib.data import datasets as D
from absa_lib.data.features import encode_examples
from absa_lib.data.inputs import words_of
from absa_lib.errors import AbsaError
from absa_lib.evaluation.explain import (
    attention_words,
    check_explainable,
    explain_rows,
    word_pieces,
)
from absa_lib.evaluation.inference import class_probabilities, for_inference, predict_probs
from absa_lib.evaluation.predictions import label_columns
from absa_lib.fileio import decode_utf8
from absa_lib.models import load_tokenizer
from absa_lib.training.records import ExportedModel, Run, load_model_folder


def _examples(dataset: str, text: str, targets: list[str] | None) -> list[D.Example]:
    """The text as examples of ``dataset``, one per (target,) aspect, after checking it and ``targets``."""
    text = text.strip()
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:           # undecodable command-line bytes arrive as surrogates
        byte = ord(text[err.start]) - 0xDC00
        what = f"byte 0x{byte:02x}" if 0x80 <= byte <= 0xFF else f"character {text[err.start]!r}"
        raise AbsaError(f"the text is not valid UTF-8 ({what} at position {err.start}); give the sentence as "
                        "UTF-8 text") from None
    if not text:
        raise AbsaError("the text is empty; give a review sentence" + (", e.g. \"LOCATION1 is cheap but not safe\""
                                                                      if D.get(dataset).masked_targets else ""))
    none = D.NONE_LABEL[dataset]
    if dataset in D.OWN:
        return [D.Example(dataset, "input", "input", text, t, a, none, D.context_id(dataset, t, a))
                for t in _own_targets(dataset, text, targets) for a in D.ASPECTS[dataset]]
    if not D.get(dataset).targets:
        if targets:
            raise AbsaError("--targets is for SentiHood models; a SemEval model predicts the 5 aspect categories")
        return [D.Example(dataset, "input", "input", text, None, a, none, D.context_id(dataset, None, a))
                for a in D.ASPECTS[dataset]]
    found = _masks_in(text)
    if not found:
        raise AbsaError("a SentiHood model needs the target location masked as LOCATION1 (and LOCATION2, upper "
                        "case) in the text, e.g. \"LOCATION1 is cheap but not safe\"; none was found (or name the "
                        "places with --locations, e.g. --locations Camden Brixton)")
    targets = list(dict.fromkeys(targets or []))         # a target given twice is predicted once
    for t in targets:
        if t not in D.TARGETS:
            raise AbsaError(f"--targets {t!r}: expected LOCATION1 or LOCATION2")
        if t not in text:
            raise AbsaError(f"--targets {t}: {t} does not occur in the text")
    return [D.Example(dataset, "input", "input", text, t, a, none, D.context_id(dataset, t, a))
            for t in (targets or found) for a in D.ASPECTS[dataset]]


def _masks_in(text: str) -> list[str]:
    """The SentiHood masks (LOCATION1, LOCATION2) that ``text`` contains, as the dataset's targets are
    found: by substring (the files glue masks to words)."""
    return [t for t in D.TARGETS if t in text]


def _own_targets(dataset: str, text: str, targets: list[str] | None) -> list[str | None]:
    """Your own data's targets to predict for ``text``: ``targets`` (declared ones, any case), else the
    declared targets the text names (whole words, any case); [None] for a dataset without targets."""
    declared = D.OWN[dataset].scheme.targets
    if not declared:
        if targets:
            raise AbsaError(f"--targets: dataset {dataset!r} declares no targets; its model predicts every "
                            "aspect")
        return [None]
    spelt = {t.casefold(): t for t in declared}       # any case, as the text is searched
    chosen = [t if t in declared else spelt.get(t.casefold()) for t in targets or []]
    for t, name in zip(targets or [], chosen, strict=True):
        if name is None:
            raise AbsaError(f"--targets {t!r}: expected one of {', '.join(declared)} (the dataset's targets)")
    targets = chosen
    found = [t for t in declared if re.search(rf"(?<!\w){re.escape(t)}(?!\w)", text, re.IGNORECASE)]
    if not targets and not found:
        raise AbsaError(f"none of the targets {', '.join(declared)} occurs in the text (whole words, any "
                        "case); name the ones to predict with --targets")
    return list(dict.fromkeys(targets)) if targets else found


def _name_key(name: str) -> str:
    return " ".join(name.split()).lower()


def mask_locations(text: str, locations: list[str]) -> tuple[str, dict[str, str]]:
    """``text`` with the place names of ``locations`` (whole words, any case) masked as the SentiHood
    files mask them, and which mask stands for which name.

    The names a sentence contains are numbered in the order of ``locations``: LOCATION1, then
    LOCATION2 (SentiHood never has LOCATION2 without LOCATION1), so a sentence naming only the
    second place calls it LOCATION1. Where names overlap the longest wins ("Camden Town" before
    "Camden").

    Returns:
        (masked text, ``{"LOCATION1": name, ...}`` for the names that occur).
    """
    if len(locations) > len(D.TARGETS):
        raise AbsaError(f"--locations: at most {len(D.TARGETS)} names (they become "
                        f"{' and '.join(D.TARGETS)}), got {len(locations)}")
    if any(not _name_key(n) for n in locations):
        raise AbsaError("--locations: an empty name; give place names such as \"Camden Town\"")
    given = {_name_key(n): n.strip() for n in reversed(locations)}           # first spelling of each name
    keys = list(dict.fromkeys(_name_key(n) for n in locations))             # in the order given
    pattern = re.compile(r"(?<!\w)(" + "|".join(re.escape(k).replace(r"\ ", r"\s+")
                                                 for k in sorted(keys, key=len, reverse=True)) + r")(?!\w)",
                         re.IGNORECASE)
    present = {_name_key(m.group(1)) for m in pattern.finditer(text)}
    # name key -> LOCATIONn, in the order given (at most two names, checked above)
    masks = dict(zip([k for k in keys if k in present], D.TARGETS, strict=False))
    masked = pattern.sub(lambda m: masks[_name_key(m.group(1))], text)
    return masked, {mask: given[k] for k, mask in masks.items()}


MAX_INPUT_BYTES = 100 * 10**6          # a file of sentences to predict: read no more than this


def read_sentences(path: str | os.PathLike) -> list[tuple[int, str]]:
    """(line number, sentence) for each non-blank line of a UTF-8 text file, one review sentence per
    line (``-``: standard input). Blank lines are skipped; the line numbers say where each came from."""
    name = "standard input" if str(path) == "-" else str(path)
    if str(path) != "-" and Path(path).exists() and not Path(path).is_file():
        raise AbsaError(f"{name}: not a regular file ({'a folder' if Path(path).is_dir() else 'a device or pipe'}); "
                        "give a text file with one review sentence per line, or - for standard input")
    try:
        if str(path) == "-":
            raw = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
        else:
            with open(path, "rb") as f:
                raw = f.read(MAX_INPUT_BYTES + 1)
    except FileNotFoundError:
        raise AbsaError(f"{name}: file not found; give a text file with one review sentence per "
                        "line") from None
    except OSError as err:
        raise AbsaError(f"{name}: cannot be read ({err.strerror})") from None
    if len(raw) > MAX_INPUT_BYTES:
        raise AbsaError(f"{name}: more than {MAX_INPUT_BYTES / 1e6:g} MB; split it into smaller files of review "
                        "sentences")
    text = decode_utf8(raw, name)
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")   # numbered as editors number them
    sentences = [(i, line.strip()) for i, line in enumerate(lines, 1) if line.strip()]
    if not sentences:
        raise AbsaError(f"{name}: no sentence in the file; expected one review sentence per line")
    return sentences


def predict_texts(run: Run | ExportedModel | str | os.PathLike, texts: list[str], targets: list[str] | None = None,
                  truncate: bool = False, model=None, tokenizer=None,
                  names: list[str] | None = None, locations: list[str] | None = None,
                  explain: bool = False, inference: str = "fp32",
                  explain_head: tuple[int, int] | None = None) -> list[dict]:
    """Predict every (target,) aspect of each text with the dev-best model of ``run``: one model load
    and one pass in length-sorted batches for all of them.

    Args:
        run: a :class:`Run` or its folder, or a folder ``absa export`` wrote (it needs nothing else).
        texts: review sentences.
        targets: restrict to these targets: SentiHood's masks, or your own data's declared targets
            (default: every one each text names).
        truncate: cut text longer than the model's limit instead of refusing it (the output says so).
        model, tokenizer: pass them to reuse a loaded model across calls.
        names: how an error names each text (default ``text 1``, ``text 2``, ...; ``""``: no name).
        locations: SentiHood only: place names to mask as LOCATION1, LOCATION2 first
            (:func:`mask_locations`); the results' ``text`` is the masked text, and each prediction
            names its ``location``.
        explain: also say why (:mod:`absa_lib.evaluation.explain`): the text's ``words`` (split at
            white space) and, per prediction, each word's share of the gradient sensitivity of the
            predicted label's logit (``explanation: {"relevance": [...], "outside": share on the
            auxiliary sentence and special tokens}``).
        explain_head: with ``explain``, QACG-BERT only: ``(layer, head)`` whose attention each
            explanation also shows as Figure 5 does (``explanation["attention"]``: per word, the column
            sums of Â, A_self and λ_A ⊙ A_quasi; :func:`~absa_lib.evaluation.explain.attention_words`).
        inference: ``fp32`` (default: the run's own numbers), ``bf16`` or ``int8``
            (:func:`~absa_lib.evaluation.inference.for_inference`: faster, some answers change).

    Returns:
        one ``{"text", "truncated", ["words",] "predictions": [{"target"?, "location"?, "aspect", "label",
        "probabilities", ["explanation"]}]}`` per text, in order.
    """

    prefix = _error_prefixes(texts, targets, locations, names)
    run = run if isinstance(run, (Run, ExportedModel)) else load_model_folder(run)
    config = run.config                     # checked once, when the folder was loaded
    if explain_head is not None and not explain:
        raise AbsaError("explain_head shows an explanation's attention: pass explain=True too (--explain)")
    if explain:
        check_explainable(config.model)
    texts, examples, owner, named = _texts_as_examples(config.dataset, texts, targets, locations, prefix)
    tokenizer = tokenizer or load_tokenizer(str(run.path) if isinstance(run, ExportedModel) else config.backbone)
    encoded = encode_examples(examples, config.aux, tokenizer, config.max_length)
    truncated = [False] * len(texts)
    per_example = len(encoded) // len(examples)        # 1, or one input per candidate label (B variants)
    for j, e in enumerate(encoded):
        truncated[owner[j // per_example]] |= e.truncated
    if any(truncated) and not truncate:
        raise AbsaError(f"{prefix[truncated.index(True)]}the text is longer than the model's limit of "
                        f"{config.max_length} tokens (with the auxiliary sentence); shorten it or pass "
                        "--truncate")
    model = model or run.load_model("best")
    runner, precision = for_inference(model, inference)
    probs = class_probabilities(config.dataset, config.aux,            # (N examples, C labels)
                                predict_probs(runner, encoded, pad_id=tokenizer.pad_token_id or 0, precision=precision))
    if not np.isfinite(probs).all():       # damaged weights (NaN/inf): never labels and null probabilities
        raise AbsaError(f"{run.path}: the model gives non-finite probabilities (NaN or inf): its weights are "
                        "damaged; retrain with `absa train ... --force`")
    labels = D.LABELS[config.dataset]
    out = [{"text": text.strip(), "truncated": cut, "predictions": []}
           for text, cut in zip(texts, truncated, strict=True)]
    if explain:
        for result in out:
            result["words"] = words_of(result["text"])
        per_text = [word_pieces(config.dataset, r["words"], tokenizer) for r in out]     # tokenized once a text
        pieces, pad = [per_text[i] for i in owner], tokenizer.pad_token_id or 0
        why = explain_rows(model, config.dataset, config.aux, encoded, probs.argmax(axis=1).tolist(), pieces, pad)
        if explain_head is not None:
            for row, seen in zip(why, attention_words(model, config.aux, encoded, pieces, *explain_head, pad),
                                 strict=True):
                row["attention"] = seen
    for j, (ex, i, p) in enumerate(zip(examples, owner, probs, strict=True)):
        row = {"target": ex.target} if ex.target else {}
        if named[i]:
            row["location"] = named[i][ex.target]
        row.update(aspect=ex.aspect, label=labels[int(p.argmax())],
                   probabilities={lab: float(v) for lab, v in zip(labels, p, strict=True)})
        if explain:
            row["explanation"] = why[j]
        out[i]["predictions"].append(row)
    return out


def _error_prefixes(texts: list[str], targets, locations, names: list[str] | None) -> list[str]:
    """Check :func:`predict_texts`' arguments; how an error names each text (``"text 2: "``)."""
    if isinstance(texts, str):
        raise AbsaError("texts must be a list of sentences, got one string; for one sentence use "
                        "predict_text")
    if not texts:
        raise AbsaError("no text given; give at least one review sentence")
    odd = [t for t in texts if not isinstance(t, str)]
    if odd:
        raise AbsaError(f"each text must be a string (a review sentence), got {type(odd[0]).__name__} "
                        f"{odd[0]!r:.60}")
    for name, value in (("targets", targets), ("locations", locations)):
        if isinstance(value, str):                      # would be read letter by letter
            raise AbsaError(f"{name} must be a list of names, got one string {value!r}; give [{value!r}]")
    names = names or [f"text {i}" for i in range(1, len(texts) + 1)]
    if len(names) != len(texts):
        raise AbsaError(f"names has {len(names)} entries for {len(texts)} texts; give one name per text")
    return [f"{n}: " if n else "" for n in names]


def _texts_as_examples(dataset: str, texts: list[str], targets, locations, prefix: list[str]):
    """The examples to predict: ``(texts, examples, owner, named)``, with ``texts`` masked when
    ``locations`` are given, ``owner[j]`` the text example j comes from, and ``named[i]`` text i's
    LOCATIONn -> the place name it masks."""
    examples, owner = [], []
    named = [{}] * len(texts)
    if locations:
        if not D.get(dataset).masked_targets:
            raise AbsaError("--locations is for SentiHood models, whose targets are masked locations")
        if targets:
            raise AbsaError("--targets picks masks, which --locations numbers per sentence; give one of them")
        for i, text in enumerate(texts):           # two places would share a mask, or one have none
            masks = _masks_in(text)
            if masks:
                raise AbsaError(f"{prefix[i]}the text already contains {masks[0]}; with --locations give "
                                "the place names unmasked, or leave --locations out")
        texts, named = map(list, zip(*(mask_locations(t, locations) for t in texts), strict=True))
    for i, text in enumerate(texts):
        if locations and not named[i]:
            raise AbsaError(f"{prefix[i]}none of the locations {', '.join(map(repr, locations))} occurs "
                            "in the text (whole words, any case)")
        try:
            found = _examples(dataset, text, targets)
        except AbsaError as err:
            raise AbsaError(f"{prefix[i]}{err}") from None
        examples += found
        owner += [i] * len(found)
    return texts, examples, owner, named


def predict_text(run: Run | ExportedModel | str | os.PathLike, text: str, targets: list[str] | None = None,
                 truncate: bool = False, model=None, tokenizer=None,
                 locations: list[str] | None = None, explain: bool = False, inference: str = "fp32",
                 explain_head: tuple[int, int] | None = None) -> dict:
    """Predict every (target,) aspect of one ``text`` (see :func:`predict_texts`).

    Returns:
        ``{"run", "dataset", "text", "truncated", ["words",] "predictions": [{"target"?, "location"?, "aspect",
        "label", "probabilities", ["explanation"]}]}`` (``text``: as the model read it, after ``locations``
        masking; ``words`` and ``explanation`` with ``explain``).
    """
    run = run if isinstance(run, (Run, ExportedModel)) else load_model_folder(run)
    (result,) = predict_texts(run, [text], targets, truncate, model, tokenizer, names=[""],
                              locations=locations, explain=explain, inference=inference, explain_head=explain_head)
    return {"run": str(run.path), "dataset": run.config.dataset, "text": result["text"],
            "truncated": result["truncated"], **({"words": result["words"]} if explain else {}),
            "predictions": result["predictions"]}


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")    # a spreadsheet runs a cell starting so as a formula


def spreadsheet_safe(text: str) -> str:
    """``text`` for a CSV cell a spreadsheet will not execute: a cell starting with ``=``, ``+``,
    ``-``, ``@``, a tab or a carriage return gets a leading ``'`` (OWASP's CSV-injection advice), so
    ``=HYPERLINK(...)`` in a review stays text."""
    return "'" + text if text.startswith(FORMULA_START) else text


def predictions_csv(dataset: str, results: list[dict], lines: list[int]) -> str:
    """:func:`predict_texts`' results as CSV: one row per text × (target ×) aspect, columns
    ``line,[target,][location,]aspect,label,p_<label>...,truncated,text`` (``line``: where the text
    came from; ``location``: the place name a target masks, with ``locations``). Text cells that a
    spreadsheet would run as a formula start with ``'`` (:func:`spreadsheet_safe`)."""
    labels = D.LABELS[dataset]
    keys = [k for k in ("target", "location") if any(k in row for r in results for row in r["predictions"])]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["line", *keys, "aspect", "label", *label_columns(dataset), "truncated", "text"])
    for line, result in zip(lines, results, strict=True):
        for row in result["predictions"]:
            writer.writerow([line, *(spreadsheet_safe(str(row[k])) for k in keys), row["aspect"], row["label"],
                             *(repr(row["probabilities"][lab]) for lab in labels), int(result["truncated"]),
                             spreadsheet_safe(result["text"])])
    return buf.getvalue()
