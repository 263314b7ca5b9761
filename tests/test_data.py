"""absa_lib.data.datasets: examples rebuilt from the raw files equal the published NLI_M files; variants, errors."""

from __future__ import annotations

import csv
import shutil
from collections import Counter
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from tokenizers.normalizers import BertNormalizer
from tokenizers.pre_tokenizers import BertPreTokenizer

from absa_lib.data import datasets as D
from absa_lib.data import inputs as model_inputs
from absa_lib.errors import AbsaError

SEMEVAL_SHORT = ("price", "anecdotes", "food", "ambience", "service")
_NORM = BertNormalizer(lowercase=True)      # = transformers' legacy BasicTokenizer(do_lower_case=True)
_PRE = BertPreTokenizer()


# ----------------------------------------------------------------------------------------------
# helpers


@cache
def _words(text: str) -> tuple[str, ...]:
    """BERT's basic tokenization (uncased): the words BertTokenizerFast hands to WordPiece."""
    return tuple(w for w, _ in _PRE.pre_tokenize_str(_NORM.normalize_str(text)))


def _read_tsv(path: Path, header: bool) -> list[list[str]]:
    """The published NLI_M files: tab-separated, no quoting, no NA parsing."""
    if not path.is_file():
        pytest.skip(f"{path} absent (optional file; `absa data download --with-nli-m`)")
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))
    return rows[1:] if header else rows


def _sentihood_nli_m(data_dir: Path, split: str) -> list[list[str]]:
    return _read_tsv(data_dir / f"sentihood/nli_m/{split}_NLI_M.tsv", header=True)


def _semeval_nli_m(data_dir: Path, split: str) -> list[list[str]]:
    return _read_tsv(data_dir / f"semeval2014/nli_m/{split}_NLI_M.csv", header=False)


def _fixture_copy(tmp_path: Path, fixtures_dir: Path, source: str, relative: str) -> Path:
    """A data folder whose file ``relative`` is the fixture ``source``."""
    target = tmp_path / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(fixtures_dir / source, target)
    return tmp_path


# ----------------------------------------------------------------------------------------------
# small fixture files: construction rules, order, text, variants


def test_sentihood_fixture_rows_order_and_labels(fixtures_dir):
    exs = D.load_examples("sentihood", "train", fixtures_dir / "data", verify=False)
    # targets by substring (the glued LOCATION1/LOCATION2 counts); key target + str(id) + aspect sorts
    # ids as strings: "0" < "10" < "2"; a repeated opinion (id 0 safety) is kept once
    assert [(e.target, e.sentence_id) for e in exs[::4]] == [
        ("LOCATION1", "0"), ("LOCATION1", "10"), ("LOCATION1", "2"), ("LOCATION2", "10"), ("LOCATION2", "2")]
    assert [e.aspect for e in exs[:4]] == list(D.ASPECTS["sentihood"])
    assert [e.label for e in exs] == ["None", "Positive", "Negative", "None",
                                      "Positive", "None", "None", "None",
                                      "None", "None", "None", "None",
                                      "Negative", "None", "None", "None",
                                      "None", "None", "None", "None"]
    assert [e.context_id for e in exs] == [0, 1, 2, 3] * 3 + [4, 5, 6, 7] * 2
    assert exs[12].key == ("10", "LOCATION2", "general") and exs[12].label_id == 2
    assert exs[4].text == "I don't like LOCATION2, LOCATION1 is nice"          # stripped raw text
    assert D.load_examples("sentihood", "test", fixtures_dir / "data", verify=False)[0].label == "None"


def test_semeval_fixture_rows(fixtures_dir):
    train = D.load_examples("semeval", "train", fixtures_dir / "data", verify=False)
    assert [(e.sentence_id, e.aspect, e.label) for e in train] == [
        ("3121", "price", "none"), ("3121", "anecdotes/miscellaneous", "none"), ("3121", "food", "none"),
        ("3121", "ambience", "none"), ("3121", "service", "negative"),
        ("258", "price", "conflict"), ("258", "anecdotes/miscellaneous", "positive"),   # first of two kept
        ("258", "food", "none"), ("258", "ambience", "none"), ("258", "service", "none")]
    assert [e.context_id for e in train] == [0, 1, 2, 3, 4] * 2 and train[0].target is None
    assert train[5].text == 'Great place, "fair" prices.' and train[5].key == ("258", "price")
    # strata of one sentence hold out floor(0.1 + 0.5) = 0 sentences
    assert D.load_examples("semeval", "dev", fixtures_dir / "data", verify=False) == []
    test = D.load_examples("semeval", "test", fixtures_dir / "data", verify=False)
    assert [e.label for e in test] == ["none", "none", "neutral", "positive", "none"]
    assert test[0].sentence_id == "32897564#894393#2" and test[4].label_id == 4


@pytest.mark.parametrize("raw, expected", [
    ("LOCATION1 is cheap", "location - 1 is cheap"),
    (" I don't like LOCATION2, LOCATION1 is nice ", "i do n't like location - 2, location - 1 is nice"),
    ("LOCATION1's pubs (LOCATION2) cannot close", "location - 1's pubs (location - 2) can not close"),
    ("Near LOCATION1/LOCATION2 and wLOCATION1dential LOCATION1LOCATION1",
     "near location1/location2 and wlocation1dential location1location1"),
    ("the \"nice\" bit, ''arty'' \"", "the `` nice '' bit, `` arty'' ``"),   # NLTK's quote rules
    ("I'm gonna wanna go", "i'm gon na wan na go"),
])
def test_model_text_follows_nltk_and_the_mask_rewrite(raw, expected):
    assert model_inputs.model_text("sentihood", raw) == expected
    assert model_inputs.model_text("semeval", "Keep Raw TEXT, don't.") == "Keep Raw TEXT, don't."


def test_variants_text_b_and_labels(fixtures_dir):
    exs = D.load_examples("sentihood", "train", fixtures_dir / "data", verify=False)
    labels = D.LABELS["sentihood"]
    expected = {                                                  # Sun et al.'s generate_sentihood_*.py
        "none": [None], "single": [None], "NLI-M": ["location - 2 - transit location"],
        "QA-M": ["what do you think of the transit location of location - 2 ?"],
        "NLI-B": [f"{lab} - location - 2 - transit location" for lab in labels],
        "QA-B": [f"the polarity of the aspect transit location of location - 2 - is {lab} ."
                 for lab in labels],
    }
    for variant in model_inputs.INPUT_VARIANTS:
        inputs = model_inputs.build_inputs(exs, variant)
        n = len(expected[variant])
        assert len(inputs) == n * len(exs)
        assert [i.example_index for i in inputs] == [k for k in range(len(exs)) for _ in range(n)]
        mine = inputs[15 * n: 16 * n]                             # (10, LOCATION2, transit-location): None
        assert [i.text_b for i in mine] == expected[variant]
        assert {i.text_a for i in mine} == {"i do n't like location - 2, location - 1 is nice"}
        assert {i.context_id for i in mine} == {7}
        if variant in model_inputs.B_VARIANTS:
            assert [i.label for i in mine] == [1, 0, 0]                     # gold None is the first candidate
            assert model_inputs.variant_num_labels("sentihood", variant) == 2
        else:
            assert [i.label for i in inputs] == [e.label_id for e in exs]
            assert model_inputs.variant_num_labels("sentihood", variant) == 3
    sem = D.load_examples("semeval", "train", fixtures_dir / "data", verify=False)[6]  # 258 anecdotes +
    got = {v: [i.text_b for i in model_inputs.build_inputs([sem], v)] for v in model_inputs.INPUT_VARIANTS}
    assert got["NLI-M"] == ["anecdotes"] and got["none"] == got["single"] == [None]
    assert got["QA-M"] == ["what do you think of the anecdotes of it ?"]
    assert got["NLI-B"] == [f"{lab} - anecdotes" for lab in D.LABELS["semeval"]]
    assert got["QA-B"][3] == "the polarity of the aspect anecdotes is conflict ."
    assert [i.label for i in model_inputs.build_inputs([sem], "QA-B")] == [1, 0, 0, 0, 0]
    with pytest.raises(AbsaError, match="input variant 'NLI'"):
        model_inputs.build_inputs([sem], "NLI")


def test_pool_binary_scores_normalises_like_sun_et_al():
    yes = np.array([0.2, 0.6, 0.2, 0.1, 0.1, 0.3, 0.0, 0.0, 0.0])
    pooled = model_inputs.pool_binary_scores("sentihood", "NLI-B", yes)
    np.testing.assert_allclose(pooled, [[0.2, 0.6, 0.2], [0.2, 0.2, 0.6], [1 / 3, 1 / 3, 1 / 3]])
    assert pooled.argmax(axis=1).tolist() == [1, 2, 0]
    assert model_inputs.pool_binary_scores("semeval", "QA-B", np.ones(10)).shape == (2, 5)
    with pytest.raises(ValueError):
        model_inputs.pool_binary_scores("semeval", "QA-B", np.ones(7))
    with pytest.raises(ValueError):
        model_inputs.pool_binary_scores("semeval", "NLI-M", np.ones(10))


def test_constants():
    assert (D.num_contexts("sentihood"), D.num_contexts("semeval")) == (8, 5)
    assert (D.group_size("sentihood"), D.group_size("semeval")) == (4, 5)
    assert D.context_id("sentihood", "LOCATION2", "safety") == 6
    assert D.context_id("semeval", None, "service") == 4
    with pytest.raises(AbsaError, match="dataset 'imdb'"):
        D.load_examples("imdb", "train")
    with pytest.raises(AbsaError, match="split 'valid'"):
        D.load_examples("semeval", "valid")


# ----------------------------------------------------------------------------------------------
# error paths: one line naming file / field / value and the fix


@pytest.mark.parametrize("source, message", [
    ("malformed/bad_json.json", r"sentihood-train\.json: not valid JSON .*absa data download` \(it fetches every missing or bad file\)"),
    ("malformed/unknown_label.json", r"sentence id 7: opinion field 'sentiment' has unknown value 'Neutral'"),
    ("malformed/unknown_aspect.json", r"sentence id 7: opinion field 'aspect' has unknown value 'weather'"),
    ("malformed/absent_target.json", r"'target_entity' has unknown value 'LOCATION2'; expected one of LOCATION1"),
    ("malformed/missing_field.json", r"record 0: missing field 'text'"),
])
def test_malformed_sentihood(tmp_path, fixtures_dir, source, message):
    root = _fixture_copy(tmp_path, fixtures_dir, source, "sentihood/sentihood-train.json")
    with pytest.raises(AbsaError, match=message) as err:
        D.load_examples("sentihood", "train", root, verify=False)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("source, message", [
    ("malformed/unknown_category.xml", r"sentence id 5: aspectCategory category 'drinks' is unknown"),
    ("malformed/broken.xml", r"Restaurants_Train\.xml: not valid XML"),
])
def test_malformed_semeval(tmp_path, fixtures_dir, source, message):
    root = _fixture_copy(tmp_path, fixtures_dir, source, "semeval2014/Restaurants_Train.xml")
    with pytest.raises(AbsaError, match=message):
        D.load_examples("semeval", "dev", root, verify=False)


def test_missing_and_unverified_files(tmp_path, fixtures_dir):
    with pytest.raises(AbsaError, match=r"sentihood-dev\.json is missing .*absa data download"):
        D.load_examples("sentihood", "dev", tmp_path)
    with pytest.raises(AbsaError, match=r"sentihood-dev\.json is missing"):
        D.load_examples("sentihood", "dev", tmp_path, verify=False)
    # a well-formed file that is not the pinned one is refused before it is parsed
    rel = "sentihood/sentihood-dev.json"
    root = _fixture_copy(tmp_path, fixtures_dir, "data/" + rel, rel)
    with pytest.raises(AbsaError, match=r"sentihood-dev\.json is too short \(truncated or edited\): 164 bytes, expected 252,786 "
                                        r"\(sha256 f0262cbe.*\); run `absa data download` \(it fetches every missing or bad file\)"):
        D.load_examples("sentihood", "dev", root)


def test_checksum_is_checked_on_load(tmp_path, real_data_dir):
    target = tmp_path / "semeval2014" / "Restaurants_Test_Gold.xml"
    target.parent.mkdir()
    good = (real_data_dir / "semeval2014" / "Restaurants_Test_Gold.xml").read_bytes()
    target.write_bytes(good.replace(b'polarity="negative"', b'polarity="positive"', 1))   # same size
    with pytest.raises(AbsaError, match=r"corrupted or modified: sha256 [0-9a-f]{64}, expected f21509cf"):
        D.load_examples("semeval", "test", tmp_path)
    target.write_bytes(good)
    assert len(D.load_examples("semeval", "test", tmp_path)) == 4000


# ----------------------------------------------------------------------------------------------
# the real data: counts, labels, order and text equal the published NLI_M files


@pytest.mark.parametrize("split, n, labels", [
    ("train", 15008, {"None": 12548, "Positive": 1626, "Negative": 834}),
    ("dev", 3748, {"None": 3138, "Positive": 406, "Negative": 204}),
    ("test", 7516, {"None": 6300, "Positive": 810, "Negative": 406}),
])
def test_sentihood_counts(real_data_dir, split, n, labels):
    exs = D.load_examples("sentihood", split, real_data_dir)
    assert len(exs) == n and Counter(e.label for e in exs) == labels
    sentences = {e.sentence_id for e in exs}
    two = {e.sentence_id for e in exs if e.target == "LOCATION2"}
    assert 4 * (len(sentences) + len(two)) == n
    ctx = Counter(e.context_id for e in exs)
    assert [ctx[c] for c in range(8)] == [len(sentences)] * 4 + [len(two)] * 4
    for i in range(0, n, 4):                                   # groups of 4: one (sentence, target)
        group = exs[i:i + 4]
        assert len({(e.sentence_id, e.target) for e in group}) == 1
        assert tuple(e.aspect for e in group) == D.ASPECTS["sentihood"]


def test_sentihood_per_aspect_labels(real_data_dir):
    expected = {"general": ((934, 246), (229, 61), (447, 139)), "price": ((200, 300), (48, 71), (108, 143)),
                "transit-location": ((337, 91), (92, 24), (180, 41)),
                "safety": ((155, 197), (37, 48), (75, 83))}
    for k, split in enumerate(D.SPLITS):
        c = Counter((e.aspect, e.label) for e in D.load_examples("sentihood", split, real_data_dir))
        got = {a: (c[a, "Positive"], c[a, "Negative"]) for a in expected}
        assert got == {a: v[k] for a, v in expected.items()}


def test_semeval_counts_and_dev_split(real_data_dir):
    train, dev, test = (D.load_examples("semeval", s, real_data_dir) for s in D.SPLITS)
    assert len(train) + len(dev) == 15220 and len(test) == 4000
    both = Counter(e.label for e in train + dev)
    assert both == {"none": 11508, "positive": 2176, "negative": 839, "neutral": 501, "conflict": 196}
    assert Counter(e.label for e in test) == {"none": 2975, "positive": 657, "negative": 222, "neutral": 94,
                                              "conflict": 52}
    train_ids, dev_ids = ({e.sentence_id for e in exs} for exs in (train, dev))
    assert len(dev_ids) == 305 and len(train_ids) == 2739 and not train_ids & dev_ids
    assert not {e.text for e in train} & {e.text for e in dev}          # duplicated texts stay on one side
    assert Counter(e.label for e in dev) == {"none": 1154, "positive": 201, "negative": 83, "neutral": 64,
                                             "conflict": 23}
    # stratified: every category set with >= 5 sentences is represented at ~10%
    def strata(exs):
        cats = {}
        for e in exs:
            cats.setdefault(e.sentence_id, set())
            if e.label != "none":
                cats[e.sentence_id].add(e.aspect)
        return Counter(frozenset(v) for v in cats.values())
    s_train, s_dev = strata(train), strata(dev)
    for stratum, n in (s_train + s_dev).items():
        assert s_dev[stratum] == int(0.1 * n + 0.5)
    # deterministic: a fresh parse (cache cleared) gives the same dev sentences, in file order
    D._CACHE.clear()
    assert [e.key for e in D.load_examples("semeval", "dev", real_data_dir)] == [e.key for e in dev]


def test_semeval_category_by_polarity(real_data_dir):
    expected = {"price": ((177, 115, 10, 17), (51, 28, 1, 3)),
                "anecdotes/miscellaneous": ((547 - 2, 199, 357, 30), (127, 41, 51, 15)),   # 2 duplicates
                "food": ((867, 209, 90, 67), (302, 69, 31, 16)),
                "ambience": ((263, 98, 24, 47), (76, 21, 8, 13)),
                "service": ((324, 218, 20, 35), (101, 63, 3, 5))}
    for k, exs in enumerate((D.load_examples("semeval", "train", real_data_dir)
                             + D.load_examples("semeval", "dev", real_data_dir),
                             D.load_examples("semeval", "test", real_data_dir))):
        c = Counter((e.aspect, e.label) for e in exs)
        got = {a: tuple(c[a, p] for p in ("positive", "negative", "neutral", "conflict")) for a in expected}
        assert got == {a: v[k] for a, v in expected.items()}


@pytest.mark.parametrize("split", D.SPLITS)
def test_sentihood_equals_published_nli_m(real_data_dir, split):
    rows = _sentihood_nli_m(real_data_dir, split)
    exs = D.load_examples("sentihood", split, real_data_dir)
    inputs = model_inputs.build_inputs(exs, "NLI-M")
    aspect_word = {"general": "general", "price": "price", "safety": "safety",
                   "transit location": "transit-location"}
    published = [(r[0], f"LOCATION{r[2][11]}", aspect_word[r[2][15:]], r[3]) for r in rows]
    assert published == [(*e.key, e.label) for e in exs]                 # same rows, labels and order
    assert [r[2] for r in rows] == [i.text_b for i in inputs]             # NLI-M auxiliary sentence, exactly
    # what BERT sees: basic-tokenizer words of text_a equal those of sentence1 (quotes included)
    mismatches = [(r[1], i.text_a) for r, i in zip(rows, inputs, strict=True)
                  if _words(r[1]) != _words(i.text_a)]
    assert len(mismatches) == 0, mismatches[:3]


@pytest.mark.parametrize("split", ("train", "test"))
def test_semeval_equals_published_nli_m(real_data_dir, split):
    rows = _semeval_nli_m(real_data_dir, split)
    if split == "train":    # our train + dev partition the raw train file, each in file order
        train, dev = (D.load_examples("semeval", s, real_data_dir) for s in ("train", "dev"))
        side = {e.sentence_id: "dev" for e in dev}
        for name, part in (("train", train), ("dev", dev)):
            assert [e.sentence_id for e in part] == [r[0] for r in rows if side.get(r[0], "train") == name]
        by_key = {e.key: e for e in train + dev}
        assert len(by_key) == len(rows) == 15220
        exs = [by_key[r[0], D.ASPECTS["semeval"][SEMEVAL_SHORT.index(r[2])]] for r in rows]
    else:
        exs = D.load_examples("semeval", split, real_data_dir)
    inputs = model_inputs.build_inputs(exs, "NLI-M")
    assert [tuple(r[:3]) for r in rows] == [(e.sentence_id, e.label, SEMEVAL_SHORT[e.context_id])
                                            for e in exs]
    assert [r[2] for r in rows] == [i.text_b for i in inputs]
    assert [r[3].strip() for r in rows] == [i.text_a for i in inputs]    # the raw XML text, stripped
    assert sum(_words(r[3]) != _words(i.text_a) for r, i in zip(rows, inputs, strict=True)) == 0


def test_b_variants_on_real_data(real_data_dir):
    exs = D.load_examples("sentihood", "dev", real_data_dir)
    for variant in model_inputs.B_VARIANTS:
        inputs = model_inputs.build_inputs(exs, variant)
        assert len(inputs) == 3 * len(exs)
        labels = np.array([i.label for i in inputs]).reshape(-1, 3)
        assert (labels.sum(axis=1) == 1).all()
        assert labels.argmax(axis=1).tolist() == [e.label_id for e in exs]
    sem = D.load_examples("semeval", "test", real_data_dir)
    labels = np.array([i.label for i in model_inputs.build_inputs(sem, "QA-B")]).reshape(-1, 5)
    assert (labels.sum(axis=1) == 1).all() and labels.argmax(axis=1).tolist() == [e.label_id for e in sem]


def test_stats(real_data_dir):
    s = D.stats(real_data_dir)
    assert s["sentihood"]["test"]["groups"] == 1879 and s["sentihood"]["dev"]["sentences"] == 747
    assert s["sentihood"]["train"]["labels"] == {"None": 12548, "Positive": 1626, "Negative": 834}
    assert s["semeval"]["test"]["labels_by_aspect"]["price"] == {"positive": 51, "neutral": 1, "negative": 28,
                                                                "conflict": 3, "none": 717}
    assert s["semeval"]["train"]["examples"] + s["semeval"]["dev"]["examples"] == 15220


def test_cli_stats(real_data_dir, capsys):
    import argparse
    import json

    from absa_lib.commands import data as cmd

    parser = argparse.ArgumentParser(prog="absa")
    cmd.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["data", "stats", "--json", "--data-dir", str(real_data_dir)])
    assert args.func(args) == 0
    assert json.loads(capsys.readouterr().out) == D.stats(real_data_dir)
    args = parser.parse_args(["data", "stats", "--data-dir", str(real_data_dir)])
    assert args.func(args) == 0
    assert "  test        1491    1879     7516      6300      810      406" in capsys.readouterr().out
