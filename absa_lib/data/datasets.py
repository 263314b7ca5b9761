"""SentiHood (TABSA) and SemEval-2014 Task 4 restaurants (ABSA) as examples; the datasets' constants.

Task (Wu & Ong 2021; docs/paper_notes.md §1): for a sentence s, a target t ∈ T and an aspect a ∈ A,
predict the sentiment y ∈ LABELS[dataset] (``None`` / ``none`` when s says nothing about a of t).
SentiHood: T = {LOCATION1, LOCATION2}, |A| = 4, so one sentence gives 4·|T(s)| examples;
SemEval: no target, |A| = 5, 5 examples per sentence. The model also gets the context
c = (t, a) as an id:  context_id = 4·(t − 1) + index(a)  (SentiHood, 8 ids),  index(a)  (SemEval).

Examples are built from the raw files, exactly as Sun et al. (2019) build their published NLI_M
files (same rows, labels and order; ``tests/test_data.py`` checks it row by row), and the text the
model reads follows those files (:mod:`absa_lib.data.inputs`, which also builds the auxiliary sentences).

The constants below (datasets, splits, labels, the none label, aspects, targets, group sizes and
context ids) are the one source every other module reads them from. A user's own dataset
(:mod:`absa_lib.data.own_data`) is registered into them under its name, and into :data:`OWN`.
"""

from __future__ import annotations

import hashlib
import json
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from absa_lib.data.download import FIX as _REFETCH
from absa_lib.data.download import dataset_checksums, verified_path
from absa_lib.errors import AbsaError
from absa_lib.paths import resolve_data_dir

DATASETS = ("sentihood", "semeval")      # the benchmarks, in the paper's order (their records: REGISTRY)
SPLITS = ("train", "dev", "test")
TARGETS = ("LOCATION1", "LOCATION2")
SENTIHOOD_ALL_ASPECTS = ("general", "price", "transit-location", "safety", "live", "nightlife", "shopping",
                         "multicultural", "green-nature", "dining", "quiet", "touristy")


@dataclass(frozen=True)
class Dataset:
    """One dataset, declared once: what every module asks of it by name (:func:`get`). A benchmark's
    record is below (:data:`REGISTRY`); your own data registers one (:mod:`absa_lib.data.own_data`)."""

    name: str                            # its key in run records, profiles and on the command line
    title: str                           # how tables and figures name it
    labels: tuple[str, ...]              # the classes, in the classifier's order
    none_label: str                      # "the sentence says nothing of this aspect (of this target)"
    aspects: tuple[str, ...]
    targets: tuple[str, ...] = ()        # the targets a context names; () for aspects alone
    masked_targets: bool = False         # its targets stand masked in the text (SentiHood's LOCATION1, LOCATION2)
    files: tuple[tuple[str, str], ...] = ()    # (split, raw file under the data folder): a benchmark's
    reader: Callable | None = None       # how one of its raw files becomes examples: reader(path, split)
    paper_table: str = ""                # the paper's table of it
    f1_of_means: bool = False            # the paper reports its aspect F1 from the mean P and R over seeds
    example: str = ""                    # a sentence its models can predict (a model card's example)
    domain: str = ""                     # what its texts are about (a model card's limits)
    source: str = ""                     # where its files come from and whose terms apply

    @property
    def sentiments(self) -> tuple[str, ...]:
        """The labels an annotated opinion can carry: every label but the none label, in label order."""
        return tuple(lab for lab in self.labels if lab != self.none_label)

    def raw_file(self, split: str) -> str:
        return dict(self.files)[split]

    def missing_files(self, data_dir=None) -> list[Path]:
        """Its raw files that are not in the data folder (``data_dir``, else ``$ABSA_DATA_DIR`` or the
        download folder); none for your own data, whose examples were read when it was registered."""
        root = resolve_data_dir(data_dir)
        return [root / f for f in dict.fromkeys(f for _, f in self.files) if not (root / f).is_file()]


REGISTRY: dict[str, Dataset] = {}
"""Every dataset this process knows, by name: the benchmarks (declared at the end of this module) and
your own, registered."""


class _Column(Mapping):
    """One field of every registered dataset, read by name: ``LABELS["semeval"]`` is ``get("semeval").labels``."""

    def __init__(self, field: str) -> None:
        self.field = field

    def __getitem__(self, name: str):
        if name not in REGISTRY:
            raise KeyError(name)
        return getattr(REGISTRY[name], self.field)

    def __iter__(self):
        return iter(REGISTRY)

    def __len__(self) -> int:
        return len(REGISTRY)


LABELS, NONE_LABEL, SENTIMENTS = _Column("labels"), _Column("none_label"), _Column("sentiments")
ASPECTS, TITLES = _Column("aspects"), _Column("title")

# SemEval has no dev split. Ours: within each stratum (the sentence's set of annotated categories),
# order the train sentences by sha256(f"{SEED}:{text}") (ties: id) and hold out the first
# floor(FRACTION·n + 0.5). Hashing the text keeps duplicated texts together and the split
# independent of Python/numpy versions. 305 of 3,044 sentences; used only for model selection.
SEMEVAL_DEV_SEED = 42
SEMEVAL_DEV_FRACTION = 0.1

# Your own datasets by name (absa_lib.data.own_data.OwnDataset: scheme, folder, checksums), registered
# by absa_lib.data.own_data.register_dataset / register_scheme.
OWN: dict = {}


def known(dataset: str) -> bool:
    """A benchmark, or a dataset registered in this process."""
    return dataset in DATASETS or dataset in OWN


def _check(dataset: str, split: str | None = None) -> None:
    if not known(dataset):
        raise AbsaError(f"dataset {dataset!r}: expected one of {', '.join(DATASETS)}, or a folder of your "
                        "own data (see docs/own_data.md)")
    if split is not None and split not in SPLITS:
        raise AbsaError(f"split {split!r}: expected one of {', '.join(SPLITS)}")


def group_size(dataset: str) -> int:
    """Consecutive examples that belong to one (sentence, target), one per aspect: 4 or 5."""
    _check(dataset)
    return len(ASPECTS[dataset])


def data_checksums(dataset: str) -> dict[str, str]:
    """The pinned checksums of a benchmark's files, or those of your own dataset's folder."""
    if dataset not in OWN:
        return dataset_checksums(dataset)
    if OWN[dataset].folder is None:
        raise AbsaError(f"dataset {dataset!r} is known from a run record only; register its folder to train "
                        "(absa train --dataset FOLDER, or absa_lib.data.own_data.register_dataset(FOLDER))")
    OWN[dataset].check_files()          # the run cache is keyed on these: never on stale ones
    return OWN[dataset].checksums()


def train_subset(examples: list, k: int | None) -> list:
    """The training examples a run with ``max_train_examples = k`` trains on: a seeded draw of ``k``
    (seed 0, the same for every run seed), in the file's order; all when ``k`` is None or too large."""
    if k is None or k >= len(examples):
        return examples
    # torch here only: the data layer loads without it (absa data, run_all's data step)
    import torch

    order = torch.randperm(len(examples), generator=torch.Generator().manual_seed(0)).tolist()
    return [examples[i] for i in sorted(order[:k])]


def eval_subset(examples: list, dataset: str, k: int | None) -> list:
    """The dev or test examples a run with ``max_eval_examples = k`` is scored on: the first ``k``
    rounded down to whole groups (at least one; the metrics need whole groups); all when ``k`` is None."""
    if k is None:
        return examples
    g = group_size(dataset)
    return examples[: max(1, k // g) * g]


def get(dataset: str) -> Dataset:
    """The record of ``dataset``: a benchmark, or one registered in this process."""
    _check(dataset)
    return REGISTRY[dataset]


def targets_of(dataset: str) -> tuple:
    """The targets a context can name: LOCATION1, LOCATION2 (SentiHood), (None,) (SemEval), or your own."""
    return get(dataset).targets or (None,)


def num_contexts(dataset: str) -> int:
    """Number of context ids: 8 (SentiHood: 2 targets × 4 aspects), 5 (SemEval), or your own data's
    targets × aspects (aspects alone without targets)."""
    return group_size(dataset) * len(targets_of(dataset))


def none_id(dataset: str) -> int:
    """The label id of "the sentence says nothing about this aspect": 0 (SentiHood) or 4 (SemEval)."""
    _check(dataset)
    return LABELS[dataset].index(NONE_LABEL[dataset])


def context_id(dataset: str, target: str | None, aspect: str) -> int:
    """|A|·index(target) + index(aspect): 4·(t − 1) + index(aspect) for SentiHood, index(aspect) for
    SemEval (no target)."""
    return len(ASPECTS[dataset]) * targets_of(dataset).index(target) + ASPECTS[dataset].index(aspect)


@dataclass(frozen=True)
class Example:
    """One (sentence, target, aspect) with its gold label."""

    dataset: str
    split: str
    sentence_id: str
    text: str
    target: str | None
    aspect: str
    label: str
    context_id: int

    @property
    def label_id(self) -> int:
        return LABELS[self.dataset].index(self.label)

    @property
    def key(self) -> tuple:
        """(sentence id, target, aspect), or (sentence id, aspect) for a dataset without targets."""
        if self.target is not None:
            return (self.sentence_id, self.target, self.aspect)
        return (self.sentence_id, self.aspect)


# ----------------------------------------------------------------------------------------------
# raw files -> examples


def _field(record: dict, name: str, where: str):
    if not isinstance(record, dict) or name not in record:
        raise AbsaError(f"{where}: missing field {name!r}; expected the SentiHood record format "
                        "{id, text, opinions: [{target_entity, aspect, sentiment}]}")
    return record[name]


def _sentihood(path: Path, split: str) -> list[Example]:
    """docs/paper_notes.md §1.1: targets by substring, 4 aspects, None when no opinion, NLI_M order."""
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise AbsaError(f"{path}: not valid JSON ({err}); {_REFETCH}") from None
    except OSError as err:
        raise AbsaError(f"{path} cannot be read ({err.strerror}); check its permissions") from None
    if not isinstance(records, list):
        raise AbsaError(f"{path}: expected a JSON list of sentences, got {type(records).__name__}; "
                        + _REFETCH)
    rows = []
    for i, rec in enumerate(records):
        where = f"{path} record {i}"
        sid, text = str(_field(rec, "id", where)), _field(rec, "text", where)
        where = f"{path} sentence id {sid}"
        if not isinstance(text, str) or TARGETS[0] not in text:
            raise AbsaError(f"{where}: field 'text' must contain LOCATION1, got {text!r}")
        targets = [t for t in TARGETS if t in text]
        gold = {}
        opinions = _field(rec, "opinions", where)
        if not isinstance(opinions, list):
            raise AbsaError(f"{where}: field 'opinions' must be a list, got {opinions!r}; " + _REFETCH)
        for op in opinions:
            t, a, s = (_field(op, k, where) for k in ("target_entity", "aspect", "sentiment"))
            for name, value, allowed in (("target_entity", t, targets),   # a mask that occurs in the text
                                         ("aspect", a, SENTIHOOD_ALL_ASPECTS),
                                         ("sentiment", s, SENTIMENTS["sentihood"])):
                if value not in allowed:
                    raise AbsaError(f"{where}: opinion field {name!r} has unknown value {value!r}; "
                                    f"expected one of {', '.join(allowed)}")
            gold.setdefault((t, a), s)                   # a repeated opinion keeps the first
        for t in targets:
            for a in ASPECTS["sentihood"]:
                label = gold.get((t, a), NONE_LABEL["sentihood"])
                rows.append((t + sid + a.split("-")[0],
                             Example("sentihood", split, sid, text.strip(), t, a, label,
                                     context_id("sentihood", t, a))))
    rows.sort(key=lambda r: r[0])                        # Sun et al.'s key: target + str(id) + aspect word
    return [ex for _, ex in rows]


def _semeval_sentences(path: Path) -> list[tuple[str, str, dict[str, str]]]:
    """(id, text, {category: polarity}) per sentence, in file order; a repeated category keeps the first."""
    try:
        root = ET.fromstring(path.read_bytes())
    except ET.ParseError as err:
        raise AbsaError(f"{path}: not valid XML ({err}); {_REFETCH}") from None
    except OSError as err:
        raise AbsaError(f"{path} cannot be read ({err.strerror}); check its permissions") from None
    out = []
    for sent in root.iter("sentence"):
        sid, text = sent.get("id"), sent.findtext("text")
        if sid is None or text is None:
            raise AbsaError(f"{path}: a <sentence> lacks its id attribute or <text> (id={sid!r}); {_REFETCH}")
        gold = {}
        for ac in sent.iter("aspectCategory"):
            cat, pol = ac.get("category"), ac.get("polarity")
            for name, value, allowed in (("category", cat, ASPECTS["semeval"]),
                                         ("polarity", pol, SENTIMENTS["semeval"])):
                if value not in allowed:
                    raise AbsaError(f"{path} sentence id {sid}: aspectCategory {name} {value!r} is unknown; "
                                    f"expected one of {', '.join(allowed)}")
            gold.setdefault(cat, pol)
        out.append((sid, text.strip(), gold))
    if not out:
        raise AbsaError(f"{path}: no <sentence> elements; {_REFETCH}")
    return out


def semeval_dev_ids(sentences: list[tuple[str, str, dict[str, str]]]) -> set[str]:
    """Ids of the held-out SemEval dev sentences (see SEMEVAL_DEV_SEED above)."""
    strata = defaultdict(list)
    for sid, text, gold in sentences:
        digest = hashlib.sha256(f"{SEMEVAL_DEV_SEED}:{text}".encode()).hexdigest()
        strata[tuple(sorted(gold))].append((digest, sid))
    dev = set()
    for members in strata.values():
        members.sort()
        dev.update(sid for _, sid in members[: int(SEMEVAL_DEV_FRACTION * len(members) + 0.5)])
    return dev


def _semeval(path: Path, split: str) -> list[Example]:
    sentences = _semeval_sentences(path)
    if split != "test":
        dev = semeval_dev_ids(sentences)
        sentences = [s for s in sentences if (s[0] in dev) == (split == "dev")]
    return [Example("semeval", split, sid, text, None, a, gold.get(a, NONE_LABEL["semeval"]), context_id("semeval", None, a))
            for sid, text, gold in sentences for a in ASPECTS["semeval"]]


_CACHE: dict[tuple, list[Example]] = {}


def load_examples(dataset: str, split: str, data_dir=None, verify: bool = True) -> list[Example]:
    """The examples of a split, in the canonical (published NLI_M) order.

    Consecutive groups of :func:`group_size` examples share a (sentence, target), aspects in
    ``ASPECTS`` order; SentiHood lists all LOCATION1 groups, then all LOCATION2 groups.

    Args:
        dataset: "sentihood", "semeval", or a registered own dataset (its folder is read, not data_dir).
        split: "train", "dev" or "test" (SemEval dev is held out of the raw train file).
        data_dir: the data folder (default: ``$ABSA_DATA_DIR`` or the download folder).
        verify: check the raw file's size and SHA-256 first (False only for small test fixtures).

    Returns:
        A new list of :class:`Example` (parsed once per process and file state).
    """
    _check(dataset, split)
    if dataset in OWN:
        return OWN[dataset].examples(split)          # its folder, checked against what was registered
    record = get(dataset)
    relative = record.raw_file(split)
    path = verified_path(relative, data_dir) if verify else resolve_data_dir(data_dir) / relative
    try:
        st = path.stat()
    except OSError:
        raise AbsaError(f"{path} is missing; {_REFETCH}") from None
    key = (dataset, split, path, st.st_mtime_ns, st.st_size)
    if key not in _CACHE:
        _CACHE[key] = record.reader(path, split)
    return list(_CACHE[key])


def split_stats(dataset: str, split: str, data_dir=None) -> dict:
    """A split's sentences, (sentence, target) groups, examples, and label counts overall and per
    aspect (in ``LABELS`` order)."""
    return split_stats_of(load_examples(dataset, split, data_dir), dataset)


def split_stats_of(exs: list, dataset: str) -> dict:
    """:func:`split_stats` of the examples ``exs`` of ``dataset``."""
    per_aspect = defaultdict(Counter)
    for ex in exs:
        per_aspect[ex.aspect][ex.label] += 1
    labels = Counter(ex.label for ex in exs)
    return {
        "sentences": len({ex.sentence_id for ex in exs}),
        "groups": len(exs) // group_size(dataset),
        "examples": len(exs),
        "labels": {lab: labels[lab] for lab in LABELS[dataset]},
        "labels_by_aspect": {a: {lab: per_aspect[a][lab] for lab in LABELS[dataset]}
                             for a in ASPECTS[dataset]},
    }


def texts_in_train(dataset: str, data_dir=None) -> dict[str, int]:
    """For dev and test, how many of their sentences have a text (verbatim) that train has too: a
    model has seen them, and they flatter its scores. ``absa data check`` reports it for your own
    data; the benchmarks have a few (short, generic sentences), so it is a count, not an error."""
    seen = {ex.text for ex in load_examples(dataset, "train", data_dir)}
    return {split: len({ex.sentence_id for ex in load_examples(dataset, split, data_dir) if ex.text in seen})
            for split in ("dev", "test")}


def stats(data_dir=None) -> dict:
    """:func:`split_stats` of every benchmark and split."""
    return {dataset: {split: split_stats(dataset, split, data_dir) for split in SPLITS}
            for dataset in DATASETS}


REGISTRY.update({d.name: d for d in (
    Dataset("sentihood", "SentiHood", labels=("None", "Positive", "Negative"), none_label="None",
            aspects=("general", "price", "safety", "transit-location"), targets=TARGETS, masked_targets=True,
            files=tuple((s, f"sentihood/sentihood-{s}.json") for s in SPLITS), reader=_sentihood,
            paper_table="Table 1: SentiHood (TABSA), test set", example="LOCATION1 is lovely but pricey",
            domain="London neighbourhoods, from Yahoo! Answers",
            source="SentiHood (Saeidi et al. 2016), as distributed by Sun et al. (2019), "
                   "https://github.com/HSLCY/ABSA-BERT-pair; no licence is given for the data: the original "
                   "dataset's terms apply"),
    Dataset("semeval", "SemEval-2014", labels=("positive", "neutral", "negative", "conflict", "none"),
            none_label="none", aspects=("price", "anecdotes/miscellaneous", "food", "ambience", "service"),
            files=(("train", "semeval2014/Restaurants_Train.xml"), ("dev", "semeval2014/Restaurants_Train.xml"),
                   ("test", "semeval2014/Restaurants_Test_Gold.xml")), reader=_semeval,
            paper_table="Table 2: SemEval-2014 Task 4 (ABSA), test set", f1_of_means=True,
            example="The pasta was great but the waiter was rude", domain="restaurant reviews",
            source="SemEval-2014 Task 4, restaurants (Pontiki et al. 2014), as distributed by Sun et al. (2019), "
                   "https://github.com/HSLCY/ABSA-BERT-pair; the terms are those of the META-SHARE distribution"),
)})
