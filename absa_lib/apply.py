"""Apply a trained run to new text (``absa predict``): :func:`predict_text` gives one prediction per
target × aspect (SentiHood) or per aspect category (SemEval), with the probabilities of every label.

SentiHood models were trained on text whose location names are masked as ``LOCATION1`` /
``LOCATION2``; new text must use the same masks, and the targets are the masks it contains.
"""

from __future__ import annotations

import os

from absa_lib import data as D
from absa_lib.errors import AbsaError
from absa_lib.features import encode_examples
from absa_lib.inference import class_probabilities, predict_probs
from absa_lib.runs import Run, load_run


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
        raise AbsaError("the text is empty; give a review sentence, e.g. \"LOCATION1 is cheap but not safe\"")
    none = D.NONE_LABEL[dataset]
    if dataset == "semeval":
        if targets:
            raise AbsaError("--targets is for SentiHood models; a SemEval model predicts the 5 aspect categories")
        return [D.Example(dataset, "input", "input", text, None, a, none, D.context_id(dataset, None, a))
                for a in D.ASPECTS[dataset]]
    found = [t for t in D.TARGETS if t in text]
    if not found:
        raise AbsaError("a SentiHood model needs the target location masked as LOCATION1 (and LOCATION2) in the "
                        "text, e.g. \"LOCATION1 is cheap but not safe\"; none was found")
    targets = list(dict.fromkeys(targets or []))         # a target given twice is predicted once
    for t in targets:
        if t not in D.TARGETS:
            raise AbsaError(f"--targets {t!r}: expected LOCATION1 or LOCATION2")
        if t not in text:
            raise AbsaError(f"--targets {t}: {t} does not occur in the text")
    return [D.Example(dataset, "input", "input", text, t, a, none, D.context_id(dataset, t, a))
            for t in (targets or found) for a in D.ASPECTS[dataset]]


def predict_text(run: Run | str | os.PathLike, text: str, targets: list[str] | None = None,
            truncate: bool = False, model=None, tokenizer=None) -> dict:
    """Predict every (target,) aspect of ``text`` with the dev-best model of ``run``.

    Args:
        run: a :class:`Run` or its folder.
        text: one review sentence.
        targets: SentiHood only: restrict to these masks (default: every mask in the text).
        truncate: cut text longer than the model's limit instead of refusing it (the output says so).
        model, tokenizer: pass them to reuse a loaded model across calls.

    Returns:
        ``{"run", "truncated", "predictions": [{"target"?, "aspect", "label", "probabilities"}]}``.
    """
    from absa_lib.config import config_from_record
    from absa_lib.models import load_tokenizer

    run = run if isinstance(run, Run) else load_run(run)
    config = config_from_record(run.config, run.path / "config.json")
    examples = _examples(config.dataset, text, targets)
    tokenizer = tokenizer or load_tokenizer(config.backbone)
    encoded = encode_examples(examples, config.aux, tokenizer, config.max_length)
    truncated = any(e.truncated for e in encoded)
    if truncated and not truncate:
        raise AbsaError(f"the text is longer than the model's limit of {config.max_length} tokens "
                        "(with the auxiliary sentence); shorten it or pass --truncate")
    model = model or run.load_model("best")
    probs = class_probabilities(config.dataset, config.aux,
                                predict_probs(model, encoded, pad_id=tokenizer.pad_token_id or 0))
    labels = D.LABELS[config.dataset]
    out = []
    for ex, p in zip(examples, probs):
        row = {"target": ex.target} if ex.target else {}
        row.update(aspect=ex.aspect, label=labels[int(p.argmax())],
                   probabilities={lab: float(v) for lab, v in zip(labels, p)})
        out.append(row)
    return {"run": str(run.path), "dataset": config.dataset, "truncated": truncated, "predictions": out}
