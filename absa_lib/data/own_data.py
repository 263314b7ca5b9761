"""Your own reviews as a dataset: a folder that :func:`register_dataset` reads, checks and registers
beside SentiHood and SemEval, so that ``absa train --dataset FOLDER`` trains on it and ``absa
predict`` applies the run to new text (the folder's format: docs/own_data.md).

    my_reviews/
      dataset.json    {"name": "phones", "aspects": ["battery", "screen", "price"],
                       "sentiments": ["positive", "negative"], "targets": ["phone", "case"]}
      train.csv       id,text,[target,]aspect,sentiment   (one row per opinion)
      dev.csv         the same columns; used to select the epoch
      test.csv        the same columns; reported beside dev

The task is the paper's, with your aspects and sentiments: for a sentence, each declared target it
is about and each aspect, predict a sentiment or ``none`` (the sentence says nothing about it). A
sentence with no opinion is one row with ``aspect`` and ``sentiment`` empty (and its target, if
targets are declared). ``targets`` is optional: without it the task is aspect-category sentiment as
on SemEval; with it, the context is (target, aspect), as on SentiHood, and a sentence is asked about
the targets its rows name. Examples come in groups of one (sentence, target) with every aspect in
the declared order, which is what the metrics (:func:`absa_lib.evaluation.metrics.own_metrics`) read.

A run records the scheme (name, aspects, sentiments, targets) and the four files' SHA-256, so an
edited file is a new run, never a stale cached one, and a run folder can be applied to new text
without the data folder (:func:`register_scheme` re-registers the scheme from the record).
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from absa_lib.data import datasets as D
from absa_lib.errors import AbsaError, one_line
from absa_lib.fileio import atomic_write_bytes, csv_rows, decode_utf8, file_sha256

SCHEME_FILE = "dataset.json"
SPLIT_FILES = {split: f"{split}.csv" for split in D.SPLITS}
NONE_LABEL = "none"
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")


@dataclass(frozen=True)
class Scheme:
    """What a dataset's examples can be: its name, aspects, sentiments and (optional) targets."""

    name: str
    aspects: tuple[str, ...]
    sentiments: tuple[str, ...]
    targets: tuple[str, ...] = ()

    @property
    def labels(self) -> tuple[str, ...]:
        """The class labels: ``none`` first, then the sentiments in the declared order."""
        return (NONE_LABEL, *self.sentiments)

    def to_dict(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


def scheme_from_dict(obj, source: str) -> Scheme:
    """A checked :class:`Scheme` from ``dataset.json``'s object (or a run record's copy of it)."""
    fix = 'e.g. {"name": "phones", "aspects": ["battery", "screen"], "sentiments": ["positive", "negative"]}'
    if not isinstance(obj, dict):
        raise AbsaError(f"{source}: expected a JSON object with name, aspects, sentiments and optional "
                        f"targets, got {type(obj).__name__}; {fix}")
    unknown = sorted(set(obj) - {"name", "aspects", "sentiments", "targets"})
    if unknown:
        raise AbsaError(f"{source}: unknown field {unknown[0]!r}; expected name, aspects, sentiments and "
                        "optional targets")
    name = obj.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise AbsaError(f"{source}: field 'name' is {name!r}; expected lower-case letters, digits, '-' or "
                        "'_' (it names the runs' folder)")
    if name in D.DATASETS:
        raise AbsaError(f"{source}: name {name!r} is a benchmark's; give your dataset another name")
    lists = {}
    for key, least in (("aspects", 1), ("sentiments", 1), ("targets", 0)):
        values = obj.get(key, [])
        if (not isinstance(values, list) or len(values) < least
                or not all(isinstance(v, str) and v.strip() == v and v and v.isprintable() for v in values)):
            raise AbsaError(f"{source}: field {key!r} is {values!r}; expected a list of "
                            f"{'at least one ' if least else ''}non-empty names without surrounding spaces or "
                            "line breaks")
        folded = [v.lower() for v in values]           # sentiments become p_<name> columns
        if len(set(folded)) != len(folded):
            twice = next(v for v in values if folded.count(v.lower()) > 1)
            raise AbsaError(f"{source}: field {key!r} names {twice!r} twice (ignoring case)")
        lists[key] = tuple(values)
    if NONE_LABEL in (s.lower() for s in lists["sentiments"]):
        raise AbsaError(f"{source}: field 'sentiments' must not contain {NONE_LABEL!r}: it is the label of "
                        "an aspect the sentence says nothing about, added for you")
    return Scheme(name, lists["aspects"], lists["sentiments"], lists["targets"])


@dataclass(frozen=True)
class OwnDataset:
    """A registered dataset: its scheme, and its folder with the files' SHA-256 and examples as read
    when it was registered (``folder`` is None when the scheme came from a run record: such a dataset
    can predict, not train)."""

    scheme: Scheme
    folder: Path | None = None
    sha256: tuple[tuple[str, str], ...] = ()
    split_examples: dict = field(default_factory=dict, compare=False)     # split -> list[Example]

    def checksums(self) -> dict[str, str]:
        return dict(self.sha256)

    def check_files(self, splits=tuple(SPLIT_FILES)) -> None:
        """Refuse a split file that changed since the folder was registered (its examples, and the
        checksums in the runs' identity, would describe other data)."""
        name = self.scheme.name
        if self.folder is None:
            raise AbsaError(f"dataset {name!r} was registered from a run record, which has no data; register "
                            "its folder first (absa_lib.data.own_data.register_dataset(folder))")
        for split in splits:
            path = self.folder / SPLIT_FILES[split]
            digest = file_sha256(path) if path.is_file() else None
            if digest != self.checksums()[SPLIT_FILES[split]]:
                raise AbsaError(f"{path} changed after dataset {name!r} was registered from {self.folder}; "
                                "register the folder again (a new run is then trained for the new data)")

    def examples(self, split: str) -> list[D.Example]:
        """The split's examples as registered, after checking that the file is still the one read."""
        self.check_files((split,))
        return list(self.split_examples[split])


def register_scheme(scheme: Scheme, dataset: OwnDataset | None = None) -> None:
    """Make ``scheme.name`` a dataset every module knows: its record (labels, none label, aspects and
    targets) goes into :data:`absa_lib.data.datasets.REGISTRY`. A name already registered with another scheme is refused
    (one name, one meaning per process); registering a folder replaces the folder of the same scheme."""
    name = scheme.name
    known = D.OWN.get(name)
    if known is not None and known.scheme != scheme:
        raise AbsaError(f"dataset name {name!r} is already registered with another scheme "
                        f"({json.dumps(known.scheme.to_dict())}); give this dataset another name")
    if known is not None and dataset is None:
        return                                          # a run record of a dataset already known
    D.OWN[name] = dataset or OwnDataset(scheme)
    D.REGISTRY[name] = D.Dataset(name, title=name, labels=scheme.labels, none_label=NONE_LABEL, aspects=scheme.aspects,
                                 targets=scheme.targets)


def register_dataset(folder) -> str:
    """Read and check ``folder`` (``dataset.json`` and the three split files; every row is checked now,
    not halfway through training), register it, and return the dataset's name for :class:`TrainConfig`."""
    try:
        folder = Path(folder).expanduser().resolve()
    except (RuntimeError, OSError) as err:           # a symlink loop
        raise AbsaError(f"{folder}: cannot be followed to a folder ({one_line(err)}); give the dataset folder itself") from None
    if not folder.is_dir():
        raise AbsaError(f"{folder}: {'a file, not a folder' if folder.exists() else 'no such folder'}; give "
                        f"the folder holding {SCHEME_FILE}, {', '.join(SPLIT_FILES.values())} (see docs/own_data.md)")
    scheme_path = folder / SCHEME_FILE
    try:
        obj = json.loads(scheme_path.read_text(encoding="utf-8-sig"))     # a BOM, as Notepad writes, is fine
    except FileNotFoundError:
        raise AbsaError(f"{scheme_path}: missing; a dataset folder declares its name, aspects and sentiments "
                        "there (see docs/own_data.md)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise AbsaError(f"{scheme_path}: not a readable JSON file ({one_line(err)})") from None
    except RecursionError:
        raise AbsaError(f"{scheme_path}: JSON nested too deep to be a dataset declaration (see docs/own_data.md)") from None
    scheme = scheme_from_dict(obj, str(scheme_path))
    register_scheme(scheme)                              # its context ids; a clash of names is refused here
    sha, examples = {SCHEME_FILE: file_sha256(scheme_path)}, {}
    for split, file in SPLIT_FILES.items():
        path = folder / file
        if not path.is_file():
            what = "a folder, not a CSV file" if path.is_dir() else "not a regular file" if path.exists() else "missing"
            raise AbsaError(f"{path}: {what}; a dataset folder holds the CSV files {', '.join(SPLIT_FILES.values())} "
                            "(dev selects the epoch, test is reported beside it)")
        sha[file] = file_sha256(path)
        examples[split] = read_split(path, scheme, split)        # every row checked now
    register_scheme(scheme, OwnDataset(scheme, folder, tuple(sorted(sha.items())), examples))
    return scheme.name


def export_benchmark(dataset: str, folder, data_dir=None, force: bool = False) -> Path:
    """Write a benchmark's train/dev/test examples in this format (SemEval's dev split as ours), as a
    worked example of the format and a check of the path: the folder's examples are the benchmark's.
    The name is ``<dataset>-own``; SentiHood declares its masks LOCATION1 and LOCATION2 as targets.
    A folder that holds anything is refused unless ``force`` (it may be someone's own dataset);
    ``dataset.json`` is written last, so an interrupted export is no dataset at all."""

    if dataset not in D.DATASETS:
        raise AbsaError(f"dataset {dataset!r}: expected one of {', '.join(D.DATASETS)}")
    targets = D.targets_of(dataset) if dataset == "sentihood" else ()
    scheme = Scheme(f"{dataset}-own", D.ASPECTS[dataset], D.SENTIMENTS[dataset], targets)
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise AbsaError(f"{folder}: a file, not a folder; give a new folder to write the dataset into")
    held = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    if held and not force:
        raise AbsaError(f"{folder}: not empty (it holds {', '.join(held[:3])}{', ...' if len(held) > 3 else ''}); "
                        "give a new folder, or --force to overwrite its dataset.json and CSV files")
    for split, file in SPLIT_FILES.items():
        groups: dict[str, dict] = {}                     # sentence id -> target -> opinions
        texts: dict[str, str] = {}
        for e in D.load_examples(dataset, split, data_dir):
            texts[e.sentence_id] = e.text
            opinions = groups.setdefault(e.sentence_id, {}).setdefault(e.target, [])
            if e.label != D.NONE_LABEL[dataset]:
                opinions.append((e.aspect, e.label))
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(["id", "text", *(["target"] if targets else []), "aspect", "sentiment"])
        for sid, by_target in groups.items():
            for target in sorted(by_target, key=D.targets_of(dataset).index):
                cells = [sid.strip(), texts[sid], *([target] if targets else [])]
                writer.writerows([cells + list(op) for op in by_target[target]] or [cells + ["", ""]])
        atomic_write_bytes(folder / file, buf.getvalue().encode("utf-8"))
    atomic_write_bytes(folder / SCHEME_FILE, (json.dumps(scheme.to_dict()) + "\n").encode())
    return folder


def dataset_name(value: str, data_dir=None) -> str:
    """What ``--dataset`` names: a benchmark as given, or a folder of your own data, registered (its
    name comes from its dataset.json). A bare word that is not a folder is left for the config to refuse."""
    if value in D.DATASETS or not (Path(value).expanduser().is_dir() or "/" in value):
        return value
    if data_dir:
        raise AbsaError(f"--data-dir is the benchmarks' folder; your dataset's files are read from "
                        f"--dataset {value}")
    return register_dataset(value)


def read_split(path: Path, scheme: Scheme, split: str) -> list[D.Example]:
    """The examples of one CSV file: for each sentence (in file order), each of its targets (declared
    order; without targets one group) and each aspect (declared order), its sentiment or ``none``."""
    try:
        text = decode_utf8(path.read_bytes(), str(path))
    except OSError as err:
        raise AbsaError(f"{path}: cannot be read ({err.strerror})") from None
    rows = csv_rows(text, path)
    header = [h.strip() for h in next(rows, (1, []))[1]]
    expected = ["id", "text", *(["target"] if scheme.targets else []), "aspect", "sentiment"]
    if sorted(header) != sorted(expected):
        faults = {"missing": [c for c in expected if c not in header],
                  "not expected": list(dict.fromkeys(h for h in header if h not in expected)),
                  "repeated": list(dict.fromkeys(h for h in header if h in expected and header.count(h) > 1))}
        what = "; ".join(f"{fault}: {','.join(names)}" for fault, names in faults.items() if names)
        raise AbsaError(f"{path}: header {','.join(header) or '(empty file)'} ({what}); expected the columns "
                        f"{','.join(expected)}, in any order, and no others" + ("" if scheme.targets else
                                                   " (a target column needs 'targets' in dataset.json)"))
    col = {name: header.index(name) for name in expected}
    texts: dict[str, tuple[str, int]] = {}              # id -> (text, first line)
    targets: dict[str, set] = {}
    gold: dict[tuple, tuple[str, int]] = {}              # (id, target, aspect) -> (sentiment, line)
    for line, row in rows:
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise AbsaError(f"{path}: line {line} has {len(row)} fields, expected {len(header)} "
                            f"({','.join(header)})")
        sid, sentence, aspect, sentiment = (row[col[c]].strip() for c in ("id", "text", "aspect",
                                                                           "sentiment"))
        target = row[col["target"]].strip() if scheme.targets else None
        where = f"{path}: line {line}"
        if not sid or not sentence:
            raise AbsaError(f"{where}: empty {'id' if not sid else 'text'}; every row names its sentence's "
                            "id and text")
        first = texts.setdefault(sid, (sentence, line))
        if first[0] != sentence:
            raise AbsaError(f"{where}: id {sid} has another text than on line {first[1]}; one id, one "
                            "sentence")
        for name, value, allowed in (("target", target, scheme.targets), ("aspect", aspect, scheme.aspects),
                                     ("sentiment", sentiment, scheme.sentiments)):
            if value is not None and value != "" and value not in allowed:
                raise AbsaError(f"{where}: {name} {value!r} is not declared in {SCHEME_FILE}; expected one "
                                f"of {', '.join(allowed)}")
        if scheme.targets and not target:
            raise AbsaError(f"{where}: empty target; with targets declared every row names one")
        if bool(aspect) != bool(sentiment):
            raise AbsaError(f"{where}: {'aspect' if aspect else 'sentiment'} without "
                            f"{'sentiment' if aspect else 'aspect'}; give both, or neither for a sentence "
                            "with no opinion")
        targets.setdefault(sid, set()).add(target)
        if aspect:
            seen = gold.setdefault((sid, target, aspect), (sentiment, line))
            if seen[0] != sentiment:
                raise AbsaError(f"{where}: {sentiment!r} for {aspect}{f' of {target}' if target else ''}, "
                                f"but line {seen[1]} says {seen[0]!r}; one sentiment per aspect")
    if not texts:
        raise AbsaError(f"{path}: no rows; expected one row per opinion (see docs/own_data.md)")
    order = scheme.targets or (None,)
    return [D.Example(scheme.name, split, sid, sentence, t, a,
                      gold.get((sid, t, a), (NONE_LABEL,))[0], D.context_id(scheme.name, t, a))
            for sid, (sentence, _) in texts.items()
            for t in order if t in targets[sid] for a in scheme.aspects]
