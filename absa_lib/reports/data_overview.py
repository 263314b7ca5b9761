"""Notebook 01's tables: the examples, their context ids and input variants, and the data statistics
checked against the paper. Each takes plain data and returns a pandas DataFrame (or Markdown).

Paper facts checked here (§4.1): SentiHood has 5,215 sentences, 3,862 with one target and 1,353 with
two; SemEval-2014 Task 4 restaurants has 3,044 train sentences (our train + dev, since the dev split
is carved from the raw train file) and 800 test sentences. Example counts are those of the published
NLI_M files (docs/paper_notes.md §1.4).
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from absa_lib.data import datasets as D
from absa_lib.data.inputs import INPUT_VARIANTS, auxiliary_sentence, build_inputs

# (dataset, quantity, expected value, where it comes from)
EXPECTED = (
    ("sentihood", "sentences (all splits)", 5215, "paper §4.1"),
    ("sentihood", "sentences with one target", 3862, "paper §4.1"),
    ("sentihood", "sentences with two targets", 1353, "paper §4.1"),
    ("sentihood", "train examples", 15008, "published train_NLI_M.tsv"),
    ("sentihood", "dev examples", 3748, "published dev_NLI_M.tsv"),
    ("sentihood", "test examples", 7516, "published test_NLI_M.tsv"),
    ("semeval", "train + dev sentences", 3044, "paper §4.1 (raw train file)"),
    ("semeval", "test sentences", 800, "SemEval-2014 gold test file"),
    ("semeval", "train + dev examples", 15220, "published train_NLI_M.csv"),
    ("semeval", "test examples", 4000, "published test_NLI_M.csv"),
)


def data_statistics(stats: dict) -> pd.DataFrame:
    """One row per (dataset, split) from :func:`absa_lib.data.datasets.stats`: sentences, (sentence, target)
    groups, two-target sentences (SentiHood) and examples."""
    rows = [{"dataset": ds, "split": split, "sentences": s["sentences"], "groups": s["groups"],
             "two-target sentences": s["groups"] - s["sentences"] if D.get(ds).targets else None,
             "examples": s["examples"]} for ds, splits in stats.items() for split, s in splits.items()]
    df = pd.DataFrame(rows)
    df["two-target sentences"] = df["two-target sentences"].astype("Int64")
    return df


def label_table(stats: dict, dataset: str) -> pd.DataFrame:
    """Rows: splits; columns: labels; cells "count (share %)"."""
    rows = {}
    for split, s in stats[dataset].items():
        n = sum(s["labels"].values())
        rows[split] = {lab: f"{c:,} ({100 * c / n:.1f}%)" for lab, c in s["labels"].items()}
    return pd.DataFrame.from_dict(rows, orient="index")


def label_counts(stats: dict) -> pd.DataFrame:
    """Long format (dataset, split, label, count) for :func:`absa_lib.reports.plots.label_distribution`."""
    return pd.DataFrame([{"dataset": ds, "split": split, "label": lab, "count": n}
                         for ds, splits in stats.items() for split, s in splits.items()
                         for lab, n in s["labels"].items()])


def check_against_paper(stats: dict) -> pd.DataFrame:
    """Our counts beside the paper's (and the published NLI_M files'), with a match column."""
    def total(ds, key, splits):
        return sum(stats[ds][s][key] for s in splits)

    ours = {
        ("sentihood", "sentences (all splits)"): total("sentihood", "sentences", D.SPLITS),
        ("sentihood", "sentences with two targets"): total("sentihood", "groups", D.SPLITS)
        - total("sentihood", "sentences", D.SPLITS),
        ("semeval", "train + dev sentences"): total("semeval", "sentences", ("train", "dev")),
        ("semeval", "test sentences"): stats["semeval"]["test"]["sentences"],
        ("semeval", "train + dev examples"): total("semeval", "examples", ("train", "dev")),
        ("semeval", "test examples"): stats["semeval"]["test"]["examples"],
    }
    ours[("sentihood", "sentences with one target")] = (ours[("sentihood", "sentences (all splits)")]
                                                         - ours[("sentihood", "sentences with two targets")])
    for split in D.SPLITS:
        ours[("sentihood", f"{split} examples")] = stats["sentihood"][split]["examples"]
    rows = [{"dataset": ds, "quantity": q, "expected": v, "ours": ours[(ds, q)], "match": ours[(ds, q)] == v,
             "source": src} for ds, q, v, src in EXPECTED]
    return pd.DataFrame(rows)


def context_table() -> pd.DataFrame:
    """Every context id with its target, aspect and NLI-M auxiliary sentence."""
    rows = []
    for ds in D.DATASETS:
        for target in D.targets_of(ds):
            for aspect in D.ASPECTS[ds]:
                rows.append({"dataset": ds, "context_id": D.context_id(ds, target, aspect), "target": target,
                             "aspect": aspect, "NLI-M auxiliary sentence": auxiliary_sentence(ds, "NLI-M", target, aspect)})
    return pd.DataFrame(rows)


def input_variants(example) -> pd.DataFrame:
    """What the tokenizer sees for one example under every input variant (B variants: one row per
    candidate label, label 1 for the gold one)."""
    rows = []
    for variant in INPUT_VARIANTS:
        for inp in build_inputs([example], variant):
            rows.append({"variant": variant, "text_a": inp.text_a, "text_b": inp.text_b,
                         "context_id": inp.context_id, "label": inp.label})
    return pd.DataFrame(rows)


def examples_frame(examples: list) -> pd.DataFrame:
    """Examples as rows (all fields plus the label id)."""
    return pd.DataFrame([{**dataclasses.asdict(e), "label_id": e.label_id} for e in examples])


def aspect_label_shares(stats: dict, dataset: str, splits: tuple[str, ...] = ("train", "dev", "test")) -> pd.DataFrame:
    """Share (%) of each label per aspect and split: shows whether a split mirrors another."""
    rows = []
    for split in splits:
        for aspect, counts in stats[dataset][split]["labels_by_aspect"].items():
            n = sum(counts.values())
            rows.append({"split": split, "aspect": aspect, **{lab: round(100 * c / n, 1) for lab, c in counts.items()}})
    return pd.DataFrame(rows)


def statistics_markdown(stats: dict) -> str:
    """Everything of notebook 01's statistics as one Markdown document."""
    sizes = data_statistics(stats).astype(object)
    parts = ["# Data statistics", "", "## Sizes", "", sizes.where(sizes.notna(), "–").to_markdown(index=False), "",
             "## Checked against the paper and the published NLI_M files", "",
             check_against_paper(stats).to_markdown(index=False), ""]
    for ds in stats:
        parts += [f"## Labels: {ds}", "", label_table(stats, ds).to_markdown(), ""]
    return "\n".join(parts)
