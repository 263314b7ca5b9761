"""What the model reads: the sentence as the published NLI_M files write it, and the auxiliary
sentences of Sun et al. (2019) for each input variant (docs/paper_notes.md §1.3).

Input variants (``--aux``): ``none`` and ``single`` give the sentence alone (the context reaches
CG/QACG-BERT only through its id; BERT-single reads one classifier per context); the M variants
(NLI-M, QA-M) give one sentence pair per example with the C-way label; the B variants (NLI-B, QA-B)
give one pair per (example, candidate label) with a yes/no label, and :func:`pool_binary_scores`
turns their yes-scores back into one class distribution per example.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from absa_lib.data.datasets import LABELS, Example, group_size, num_contexts
from absa_lib.errors import AbsaError

# Sun et al. run nltk.word_tokenize, lower-case, and turn the whole tokens location1/location2 into
# "location - 1"/"location - 2". BERT splits punctuation itself, so only what changes its words is
# reproduced here (no nltk data needed): clitic splits ("don't" -> "do n't", "cannot" -> "can not"),
# the mask rewrite where NLTK would see a whole token (not inside "location1/location2"), and the
# quote conversion (opening " or '' -> ``, closing " -> '').
_CLITICS = re.compile(r"\B(?=n't\b)|\b(?:can(?=not\b)|gon(?=na\b)|wan(?=na\b)|got(?=ta\b)|"
                      r"gim(?=me\b)|lem(?=me\b))")
_MASK = re.compile(r"""(?<![^\s(\[{<",;:@#$%&])location([12])(?=$|[\s,;:()\[\]{}<>"!?@#$%&'])""")
_OPEN_QUOTE = re.compile(r"""^"|(?<=[\s(\[{<])(?:"|'')""")


@lru_cache(maxsize=1 << 16)
def words_of(text: str) -> list[str]:
    """The words of ``text`` as BERT's basic tokenizer separates them: at spaces, tabs, line breaks and
    Unicode space separators (Zs), after dropping control and format characters. ``str.split()`` differs:
    it splits at U+001C-U+001F and U+0085, which the tokenizer deletes, and at U+2028/U+2029, which it
    keeps inside a word. :func:`model_text` and the explanations (a share per word) both use it, so an
    explanation's words are the model's. (The benchmark files hold none of these characters.)"""
    kept = []
    for ch in text:
        if ch in " \t\n\r" or unicodedata.category(ch) == "Zs":
            kept.append(" ")
        elif ch not in ("\x00", "\ufffd") and not unicodedata.category(ch).startswith("C"):
            kept.append(ch)
    return [w for w in "".join(kept).split(" ") if w]


def model_text(dataset: str, text: str) -> str:
    """The sentence as the model reads it (the NLI_M ``sentence1``, up to punctuation spacing)."""
    if dataset != "sentihood":
        return text                                       # SemEval's raw XML text as published; yours
    s = " ".join(words_of(text)).lower()                   # the tokenizer's words first (a control character
    s = _CLITICS.sub(lambda m: m.group(0) + " ", s)        # glued to a mask is gone); do n't, can not, gon na
    s = _MASK.sub(lambda m: "location - " + m.group(1), s)
    s = _OPEN_QUOTE.sub(" `` ", s).replace('"', " '' ")
    return " ".join(words_of(s))


INPUT_VARIANTS = ("none", "NLI-M", "QA-M", "NLI-B", "QA-B", "single")
SENTENCE_ONLY = ("none", "single")          # no auxiliary sentence
B_VARIANTS = ("NLI-B", "QA-B")              # one yes/no input per candidate label


@dataclass(frozen=True)
class TextInput:
    """What the tokenizer sees for one (example, [candidate label]) pair."""

    text_a: str
    text_b: str | None
    context_id: int
    label: int
    example_index: int


def auxiliary_sentence(dataset: str, variant: str, target: str | None, aspect: str,
                       label: str | None = None) -> str | None:
    """Sun et al.'s (2019) auxiliary sentence (``generate/generate_*_{NLI_M,QA_M,NLI_B_QA_B}.py``);
    for your own data the same sentences with your target and aspect names as written.

    ``label`` is the candidate label of a B variant (``None - location - 1 - price``).
    """
    if variant in SENTENCE_ONLY:
        return None
    if dataset not in ("sentihood", "semeval"):          # your own data (absa_lib.data.own_data)
        of, pair = target or "it", f"{target} - {aspect}" if target else aspect
        return {"NLI-M": pair, "QA-M": f"what do you think of the {aspect} of {of} ?",
                "NLI-B": f"{label} - {pair}",
                "QA-B": f"the polarity of the aspect {aspect} of {of} is {label} ."}[variant]
    if dataset == "semeval":
        a = aspect.split("/")[0]                          # anecdotes/miscellaneous -> anecdotes
        return {"NLI-M": a, "QA-M": f"what do you think of the {a} of it ?", "NLI-B": f"{label} - {a}",
                "QA-B": f"the polarity of the aspect {a} is {label} ."}[variant]
    a, loc = aspect.replace("-", " "), f"location - {target[-1]}"
    return {"NLI-M": f"{loc} - {a}", "QA-M": f"what do you think of the {a} of {loc} ?",
            "NLI-B": f"{label} - {loc} - {a}",
            "QA-B": f"the polarity of the aspect {a} of {loc} - is {label} ."}[variant]


def build_inputs(examples: list[Example], variant: str) -> list[TextInput]:
    """Sentence(-pair) inputs for the model.

    Args:
        examples: from :func:`load_examples` (one dataset).
        variant: one of ``INPUT_VARIANTS``. "none"/"single": the sentence alone (text_b None);
            M variants: one pair per example, label = class id; B variants: one pair per
            (example, candidate label) in ``LABELS`` order, label 1 for the gold one, else 0.

    Returns:
        N inputs, or N·|LABELS| for B variants, in example order.
    """
    if variant not in INPUT_VARIANTS:
        raise AbsaError(f"input variant {variant!r}: expected one of {', '.join(INPUT_VARIANTS)}")
    out = []
    for i, ex in enumerate(examples):
        a, ds = model_text(ex.dataset, ex.text), ex.dataset
        if variant in B_VARIANTS:
            out += [TextInput(a, auxiliary_sentence(ds, variant, ex.target, ex.aspect, lab), ex.context_id,
                              int(lab == ex.label), i) for lab in LABELS[ds]]
        else:
            out.append(TextInput(a, auxiliary_sentence(ds, variant, ex.target, ex.aspect), ex.context_id,
                                 ex.label_id, i))
    return out


def variant_num_labels(dataset: str, variant: str) -> int:
    """2 (no / yes) for the B variants, else the number of classes."""
    return 2 if variant in B_VARIANTS else len(LABELS[dataset])


def model_sizes(dataset: str, variant: str = "none") -> dict[str, int]:
    """The sizes :func:`absa_lib.models.build_model` takes for ``dataset`` read through input
    ``variant``: ``num_labels`` (:func:`variant_num_labels`), ``num_contexts`` and ``num_aspects``."""
    return {"num_labels": variant_num_labels(dataset, variant), "num_contexts": num_contexts(dataset),
            "num_aspects": group_size(dataset)}


def pool_binary_scores(dataset: str, variant: str, yes_scores: np.ndarray) -> np.ndarray:
    """Class scores from B-variant yes-probabilities, as in Sun et al.'s ``evaluation.py``.

    Each example's C yes-scores are divided by their sum (an all-zero row becomes uniform); the
    predicted class is the argmax (ties to the lower index).

    Args:
        yes_scores: (N·C,) P(yes) in :func:`build_inputs` order.

    Returns:
        (N, C) scores that sum to 1 per row.
    """
    if variant not in B_VARIANTS:
        raise ValueError(f"pool_binary_scores is for {B_VARIANTS}, not {variant!r}")
    c = len(LABELS[dataset])
    s = np.asarray(yes_scores, dtype=np.float64)
    if s.ndim != 1 or s.size % c:
        raise ValueError(f"yes_scores must be a flat array of N·{c} scores, got shape {s.shape}")
    s = s.reshape(-1, c)                                                  # (N, C)
    total = s.sum(axis=1, keepdims=True)                                  # (N, 1)
    return np.where(total > 0, s / np.where(total > 0, total, 1), 1.0 / c)


