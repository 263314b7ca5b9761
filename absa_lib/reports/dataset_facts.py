"""What the tables and notebooks read of the benchmarks' raw files, kept so render needs no raw files.

Rendering every table and figure from the committed run records needs little of the raw SentiHood
and SemEval files: each split's counts (the data notebook's statistics and label figure), the
examples per context id, the trivial predictors' metrics on test (every table's floor rows) and
the few sentences the notebooks show. ``absa data facts`` writes these, from the verified raw
files, to ``results/reference/data/benchmarks.json`` (counts, metrics and six sentences, not the
data). Render reads the raw files when they are there and this file when they are not, so a
reader offline rebuilds the same tables and figures, byte for byte.

    bench = Benchmarks.open(data_dir, reference)   # the raw files if present, else the committed facts
    bench.stats()                                  # absa_lib.data.datasets.stats()
    bench.context_counts("semeval", "dev")         # {context id: examples}
    bench.trivial_of("sentihood", runs)            # the trivial rows of a table of ``runs``
    bench.shown("sentihood", "test")               # the examples of the SHOWN sentences

The file says which raw files (their SHA-256) it was written from and holds a hash of its own
content: a file written from other files than the pinned ones, or edited by hand, is refused in one
line, and a test checks that it equals what the raw files give today.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

from absa_lib.data import datasets as D
from absa_lib.data.download import FILES, verify
from absa_lib.errors import AbsaError
from absa_lib.fileio import atomic_write_bytes, read_json
from absa_lib.paths import resolve_data_dir
from absa_lib.reports.tables import shared_eval_subset, trivial_baselines

FACTS_FILE = Path("data") / "benchmarks.json"      # under the reference folder (results/reference/)
FORMAT = 1
REWRITE = "rewrite it from the raw files with `absa data facts`, or restore it from git"
# The sentences the notebooks show (01: the first groups of each test split, and the input of one
# example; 02, 03, 06: a model's components on two examples of one sentence), by split:
# (first groups, sentence ids whose every target is kept)
SHOWN = {("sentihood", "test"): (2, ("583", "1474", "745")),
         ("semeval", "test"): (1, ())}


def pinned_files() -> dict[str, str]:
    """``{relative path: SHA-256}`` of the benchmark files every checkout pins (the facts' source)."""
    return {f.path: f.sha256 for f in FILES if not f.optional}


def _content_hash(benchmarks: dict) -> str:
    return hashlib.sha256(json.dumps(benchmarks, sort_keys=True, allow_nan=True).encode()).hexdigest()


def _context_counts(examples: list, dataset: str) -> list[int]:
    """Examples per context id (0 .. num_contexts - 1)."""
    contexts = [0] * D.num_contexts(dataset)
    for ex in examples:
        contexts[ex.context_id] += 1
    return contexts


def _split_facts(examples: list, dataset: str) -> dict:
    """A split's counts, as :func:`absa_lib.data.datasets.split_stats` (label counts per aspect as lists
    in the dataset's label order), and its examples per context id."""
    stats = D.split_stats_of(examples, dataset)
    labels = D.LABELS[dataset]
    contexts = _context_counts(examples, dataset)
    return {"sentences": stats["sentences"], "groups": stats["groups"], "examples": stats["examples"],
            "labels_by_aspect": {a: [stats["labels_by_aspect"][a][lab] for lab in labels]
                                 for a in D.ASPECTS[dataset]},
            "contexts": contexts}


def _shown_examples(examples: list, dataset: str, split: str) -> list:
    """The examples of the :data:`SHOWN` sentences of a split, in file order."""
    first, ids = SHOWN.get((dataset, split), (0, ()))
    head = examples[: first * D.group_size(dataset)]
    return head + [ex for ex in examples[len(head):] if ex.sentence_id in ids]


def facts_from_raw(data_dir=None, subsets=(None,)) -> dict:
    """The facts of the verified raw files in ``data_dir``; the trivial rows for the test set whole
    (None) and for each ``max_eval_examples`` in ``subsets`` (those the committed runs were scored with)."""
    verify(data_dir)
    benchmarks = {}
    for dataset in D.DATASETS:
        splits = {split: D.load_examples(dataset, split, data_dir) for split in D.SPLITS}
        benchmarks[dataset] = {
            "splits": {split: _split_facts(exs, dataset) for split, exs in splits.items()},
            "trivial": {_subset_key(k): [[name, metrics] for name, metrics in
                                         trivial_baselines(dataset, data_dir, k).items()]
                        for k in sorted(set(subsets) | {None}, key=lambda k: -1 if k is None else k)},
            "shown": {split: [dataclasses.asdict(ex) for ex in _shown_examples(exs, dataset, split)]
                      for split, exs in splits.items() if (dataset, split) in SHOWN},
        }
    return {"format": FORMAT, "written_by": "absa data facts", "files": pinned_files(),
            "content_sha256": _content_hash(benchmarks), "benchmarks": benchmarks}


def write_facts(path: Path, data_dir=None, subsets=(None,)) -> Path:
    """:func:`facts_from_raw` written to ``path`` (atomically; keys in the order the tables read them)."""
    text = json.dumps(facts_from_raw(data_dir, subsets), indent=1, allow_nan=True) + "\n"
    atomic_write_bytes(Path(path), text.encode())
    return Path(path)


def _subset_key(k: int | None) -> str:
    return "all" if k is None else str(int(k))


def read_facts(path: Path) -> dict:
    """The facts in ``path``, checked: written from the pinned raw files, unchanged since (its content
    hash), with every benchmark and split; else one line naming the file and what is wrong."""
    facts = read_json(Path(path), REWRITE)
    if not isinstance(facts, dict) or facts.get("format") != FORMAT or not isinstance(facts.get("benchmarks"), dict):
        raise AbsaError(f"{path}: not a benchmark facts file of format {FORMAT} (as `absa data facts` writes); {REWRITE}")
    if facts.get("files") != pinned_files():
        raise AbsaError(f"{path}: written from other raw files than the pinned ones (SHA-256 in "
                        f"absa_lib/data/download.py): stale; {REWRITE}")
    if facts.get("content_sha256") != _content_hash(facts["benchmarks"]):
        raise AbsaError(f"{path}: its content does not match its content_sha256 (edited since it was written); {REWRITE}")
    missing = [d for d in D.DATASETS if set(facts["benchmarks"].get(d, {}).get("splits", {})) != set(D.SPLITS)]
    if missing:
        raise AbsaError(f"{path}: holds no splits {', '.join(D.SPLITS)} of {missing[0]}; {REWRITE}")
    return facts


def standing_facts(data_dir=None, reference: Path | None = None) -> Path | None:
    """``<reference>/data/benchmarks.json`` when it stands in for the raw files: it is there and none of
    the pinned raw files is in ``data_dir``; else None (the raw files are read, or refused as they are)."""
    path = Path(reference) / FACTS_FILE if reference is not None else None
    root = resolve_data_dir(data_dir)
    if path is None or not path.is_file() or any((root / f).exists() for f in pinned_files()):
        return None
    return path


class Benchmarks:
    """The benchmark facts the tables and notebooks read, from the raw files (``data_dir``) or from
    a facts file (``facts``, :func:`read_facts`); :meth:`open` chooses. ``line``: where they come
    from, in one line (empty for the raw files: the usual case says nothing)."""

    def __init__(self, data_dir=None, facts: dict | None = None, line: str = ""):
        self.data_dir, self.facts, self.line = data_dir, facts, line

    @classmethod
    def open(cls, data_dir=None, reference: Path | None = None) -> Benchmarks:
        """The raw files in ``data_dir`` when they verify; else, when none of them is there and
        ``<reference>/data/benchmarks.json`` is, its facts. Raw files present but wrong (a size or
        hash) are refused as :func:`absa_lib.data.download.verify` says, not passed over."""
        path = standing_facts(data_dir, reference)
        if path is None:
            verify(data_dir)
            return cls(data_dir)
        return cls(None, read_facts(path), f"[data] the raw benchmark files are not in {resolve_data_dir(data_dir)}: "
                                           f"the counts, trivial rows and shown sentences come from {path}, written "
                                           "from the same pinned files")

    @property
    def raw(self) -> bool:
        return self.facts is None

    def _facts(self, dataset: str) -> dict:
        return self.facts["benchmarks"][dataset]

    def stats(self) -> dict:
        """:func:`absa_lib.data.datasets.stats`, the same dict from either source."""
        if self.raw:
            return D.stats(self.data_dir)
        out = {}
        for dataset in D.DATASETS:
            labels = D.LABELS[dataset]
            out[dataset] = {}
            for split in D.SPLITS:
                f = self._facts(dataset)["splits"][split]
                by_aspect = {a: dict(zip(labels, f["labels_by_aspect"][a], strict=True)) for a in D.ASPECTS[dataset]}
                out[dataset][split] = {
                    "sentences": f["sentences"], "groups": f["groups"], "examples": f["examples"],
                    "labels": {lab: sum(counts[lab] for counts in by_aspect.values()) for lab in labels},
                    "labels_by_aspect": by_aspect}
        return out

    def context_counts(self, dataset: str, split: str) -> dict[int, int]:
        """``{context id: examples}`` of a split, for the ids that occur."""
        if self.raw:
            counts = _context_counts(D.load_examples(dataset, split, self.data_dir), dataset)
        else:
            counts = self._facts(dataset)["splits"][split]["contexts"]
        return {c: n for c, n in enumerate(counts) if n}

    def trivial(self, dataset: str, max_eval_examples: int | None = None) -> dict[str, dict]:
        """:func:`absa_lib.reports.tables.trivial_baselines`: the trivial rows on the test examples that
        runs with ``max_eval_examples`` are scored on."""
        if self.raw:
            return trivial_baselines(dataset, self.data_dir, max_eval_examples)
        kept = self._facts(dataset)["trivial"]
        key = _subset_key(max_eval_examples)
        if key not in kept:
            raise AbsaError(f"the benchmark facts hold the trivial rows of {dataset} for max_eval_examples "
                            f"{', '.join(kept)}, not {key}; give the raw files (ABSA_DATA_DIR) to score them")
        return {name: metrics for name, metrics in kept[key]}

    def trivial_of(self, dataset: str, runs: list) -> dict[str, dict]:
        """:meth:`trivial` on the test examples that ``runs`` (of ``dataset``) were scored on: the
        trivial rows of a table of those runs (:func:`~absa_lib.reports.tables.trivial_baselines_of`)."""
        return self.trivial(dataset, shared_eval_subset(dataset, runs))

    def shown(self, dataset: str, split: str) -> list:
        """The examples of the :data:`SHOWN` sentences of a split (its first groups, then the named
        sentences), in file order."""
        if (dataset, split) not in SHOWN:
            raise AbsaError(f"no sentences of {dataset} {split} are kept to show; shown are: "
                            + ", ".join(f"{d} {s}" for d, s in SHOWN))
        if self.raw:
            return _shown_examples(D.load_examples(dataset, split, self.data_dir), dataset, split)
        return [D.Example(**ex) for ex in self._facts(dataset)["shown"][split]]
