"""Prediction CSVs (format, alignment by key, every rejection) and ``absa evaluate`` end to end."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from absa_lib.cli import main
from absa_lib.data.datasets import ASPECTS, Example, context_id
from absa_lib.errors import AbsaError
from absa_lib.evaluation.predictions import read_predictions, write_predictions

TEXT = "LOCATION1 is lovely but LOCATION2 is dodgy"
SH_LABELS = [("LOCATION1", "Positive", "None", "None", "Negative"),
             ("LOCATION2", "None", "None", "Negative", "None")]
SH_PROBS = [[0.1, 0.7, 0.2], [0.8, 0.1, 0.1], [0.6, 0.1, 0.3], [0.25, 0.25, 0.5],
            [0.9, 0.05, 0.05], [0.5, 0.5, 0.0], [0.1, 0.2, 0.7], [1.0, 0.0, 0.0]]
SE_LABELS = [("1715", "none", "none", "positive", "none", "conflict"),
             ("32897564#894393#2", "none", "none", "none", "neutral", "none")]
SE_PROBS = [[.05, .05, .05, .05, .8], [.1, .1, .1, .1, .6], [.6, .1, .1, .1, .1], [.2] * 5,
            np.array([.1, .2, .3, .4, 0], dtype=np.float32).tolist(),      # float32 values survive
            [0, 0, 0, 0, 1.0], [.3, 0, 0, 0, .7], [.25, .25, 0, 0, .5], [.1, .6, .1, .1, .1],
            [0, 0, 0, 0, 1.0]]


def sentihood_examples() -> list[Example]:
    return [Example("sentihood", "test", "3", TEXT, target, aspect, label,
                    context_id("sentihood", target, aspect))
            for target, *labels in SH_LABELS
            for aspect, label in zip(ASPECTS["sentihood"], labels, strict=True)]


def semeval_examples() -> list[Example]:
    return [Example("semeval", "test", sid, "Good food.", None, aspect, label,
                    context_id("semeval", None, aspect))
            for sid, *labels in SE_LABELS for aspect, label in zip(ASPECTS["semeval"], labels, strict=True)]


CASES = {"sentihood": (sentihood_examples, SH_PROBS), "semeval": (semeval_examples, SE_PROBS)}


@pytest.mark.parametrize("dataset", ["sentihood", "semeval"])
def test_write_matches_the_documented_fixture_byte_for_byte(dataset, fixtures_dir, tmp_path):
    make, probs = CASES[dataset]
    out = tmp_path / "sub" / "p.csv"                                  # parent folders are created
    write_predictions(out, make(), probs)
    assert out.read_bytes() == (fixtures_dir / "predictions" / f"{dataset}_small.csv").read_bytes()
    assert [p.name for p in out.parent.iterdir()] == ["p.csv"]         # no temporary file left behind


@pytest.mark.parametrize("dataset", ["sentihood", "semeval"])
def test_read_fixture_in_any_row_order(dataset, fixtures_dir, tmp_path):
    make, probs = CASES[dataset]
    lines = (fixtures_dir / "predictions" / f"{dataset}_small.csv").read_text().splitlines()
    body = lines[1:]
    random.Random(0).shuffle(body)
    header = lines[0].split(",")                                       # columns in another order too
    order = list(reversed(range(len(header))))
    f = tmp_path / "shuffled.csv"
    f.write_text("\n".join(",".join(row.split(",")[j] for j in order) for row in [lines[0], *body]) + "\n")
    got = read_predictions(f, make())
    assert got.dtype == np.float64 and got.shape == (len(probs), len(probs[0]))
    assert np.array_equal(got, np.array(probs, dtype=np.float64))      # exact, aligned to the examples


def test_round_trip_is_exact(tmp_path):
    probs = np.random.default_rng(0).dirichlet(np.ones(5), size=10)
    write_predictions(tmp_path / "p.csv", semeval_examples(), probs)
    assert np.array_equal(read_predictions(tmp_path / "p.csv", semeval_examples()), probs)


def _write_lines(tmp_path, dataset: str, edit) -> object:
    """The fixture with ``edit(lines)`` applied (lines without newlines, header first)."""
    from pathlib import Path
    src = Path(__file__).parent / "fixtures" / "predictions" / f"{dataset}_small.csv"
    lines = src.read_text().splitlines()
    f = tmp_path / "edited.csv"
    f.write_text("\n".join(edit(lines)) + "\n")
    return f


def _replace(index: int, old: str, new: str):
    """Edit lines[index] (file line index + 1; index 0 is the header)."""
    def edit(lines):
        assert old in lines[index]
        lines[index] = lines[index].replace(old, new)
        return lines
    return edit


@pytest.mark.parametrize("edit, match", [
    (lambda ls: [ls[0].replace("p_negative", "p_neg"), *ls[1:]],
     "missing column.*p_negative.*header id,target"),
    (lambda ls: [ls[0].replace(",target", ""), *ls[1:]], "missing column.*target"),
    (lambda ls: [], "empty file"),
    (lambda ls: ls[:3] + [ls[3] + ",0.1"] + ls[4:], "line 4 has 8 fields, expected 7"),
    (lambda ls: ls + [ls[2]], r"line 10 repeats the key id=3, target=LOCATION1, aspect=price of line 3"),
    (lambda ls: ls[:4] + ls[5:], r"1 of 8 sentihood test examples have no row \(first: id=3, "
                                 r"target=LOCATION1, aspect=transit-location\)"),
    (lambda ls: ls[:1], r"8 of 8 sentihood test examples have no row \(first: id=3, target=LOCATION1, "
                        r"aspect=general\)"),
    (lambda ls: ls + ["4,LOCATION1,general,None,1.0,0.0,0.0"], r"1 row\(s\) match no sentihood test example "
                                                               r"\(first: line 10, id=4"),
    (_replace(8, "transit-location", "transit location"),
     "match no sentihood test example.*transit location"),
    (_replace(1, "0.1,0.7", "0.1,high"), "line 2, column p_positive: 'high' is not a number"),
    (_replace(1, "0.1,0.7", "0.1,"), "line 2, column p_positive: '' is not a number"),
    (_replace(1, "0.1,0.7", "0.1,-0.7"), "line 2, column p_positive: '-0.7' is not a non-negative finite"),
    (_replace(1, "0.1,0.7", "0.1,nan"), "column p_positive: 'nan' is not a non-negative finite"),
    (_replace(1, "0.1,0.7", "0.1,inf"), "column p_positive: 'inf' is not a non-negative finite"),
    (_replace(1, "0.1,0.7,0.2", "1.105,2.014,1.221"),          # exp(logits), not the softmax: the AUCs change
     r"line 2: the probabilities sum to 4\.34; expected softmax probabilities summing to 1 \(within 0\.01\)"),
    (_replace(1, "0.1,0.7,0.2", "0,0,0"), "line 2: the probabilities sum to 0;"),
    (_replace(1, "3,LOCATION1", '"3,LOCATION1'), r"line 2: not valid CSV \(.*\); is a quote left open\?"),
    (_replace(4, "Negative", "Positive"), r"1 row\(s\) have a gold label that disagrees.*line 5.*'Positive', "
                                          r"dataset says 'Negative'\); the file was made from different data"),
    (_replace(2, ",None,", ",none,"), r"1 row\(s\) have a gold label .*line 3.*'none', dataset says 'None'\); gold "
                                     r"labels are spelt as the dataset spells them \(case too\)"),
])
def test_read_rejects_with_one_line(tmp_path, edit, match):
    f = _write_lines(tmp_path, "sentihood", edit)
    with pytest.raises(AbsaError, match=match) as err:
        read_predictions(f, sentihood_examples())
    assert "\n" not in str(err.value) and str(f) in str(err.value)


def test_read_missing_file(tmp_path):
    with pytest.raises(AbsaError, match="nope.csv: prediction file not found"):
        read_predictions(tmp_path / "nope.csv", sentihood_examples())


def test_probabilities_rounded_to_three_decimals_are_accepted(tmp_path):
    f = _write_lines(tmp_path, "sentihood", _replace(1, "0.1,0.7,0.2", "0.333,0.333,0.333"))   # sums to 0.999
    assert read_predictions(f, sentihood_examples())[0].tolist() == [0.333, 0.333, 0.333]


def test_gold_column_is_optional_and_extra_columns_are_ignored(tmp_path):
    def edit(lines):
        rows = [line.split(",") for line in lines]
        return [",".join([*r[:3], *r[4:], "pred" if i == 0 else "x"]) for i, r in enumerate(rows)]
    f = _write_lines(tmp_path, "sentihood", edit)
    assert np.array_equal(read_predictions(f, sentihood_examples()), np.array(SH_PROBS))


def test_an_empty_gold_cell_is_no_gold(tmp_path):
    f = _write_lines(tmp_path, "sentihood", lambda ls: [ls[0], *(",".join(r.split(",")[:3] + [""] + r.split(",")[4:])
                                                                  for r in ls[1:])])
    assert np.array_equal(read_predictions(f, sentihood_examples()), np.array(SH_PROBS))


def test_semeval_file_for_sentihood_examples_is_rejected(fixtures_dir):
    with pytest.raises(AbsaError, match="missing column.*target.*p_none"):
        read_predictions(fixtures_dir / "predictions" / "semeval_small.csv", sentihood_examples())


def test_write_rejects_bad_probabilities(tmp_path):
    with pytest.raises(AbsaError, match=r"shape \(8, 5\), expected \(8, 3\)"):
        write_predictions(tmp_path / "p.csv", sentihood_examples(), np.full((8, 5), .2))
    bad = np.array(SH_PROBS)
    bad[3, 1] = np.nan
    with pytest.raises(AbsaError, match="row 3 are not finite non-negative"):
        write_predictions(tmp_path / "p.csv", sentihood_examples(), bad)
    with pytest.raises(AbsaError, match="one of"):
        write_predictions(tmp_path / "p.csv", sentihood_examples() + semeval_examples(), np.zeros((18, 3)))
    assert not (tmp_path / "p.csv").exists()


# ---------------------------------------------------------------- absa evaluate, real data
def _evaluate(capsys, path, dataset: str, data_dir) -> dict:
    rc = main(["evaluate", "--dataset", dataset, "--split", "test", "--predictions", str(path),
               "--data-dir", str(data_dir)])
    out = capsys.readouterr().out
    assert rc == 0
    return json.loads(out)


def _shuffled_file(tmp_path, examples, probs, name: str):
    path = tmp_path / name
    write_predictions(path, examples, probs)
    header, *rows = path.read_text().splitlines()
    random.Random(1).shuffle(rows)
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def test_evaluate_sentihood_test_end_to_end(tmp_path, capsys, real_data_dir):
    from absa_lib.data.datasets import load_examples
    examples = load_examples("sentihood", "test", real_data_dir)
    gold = np.array([e.label_id for e in examples])
    perfect = _evaluate(capsys, _shuffled_file(tmp_path, examples, np.eye(3)[gold], "gold.csv"),
                        "sentihood", real_data_dir)
    assert perfect == {k: 1.0 for k in perfect} and len(perfect) == 7
    trivial = np.tile([0.8, 0.1, 0.1], (len(examples), 1))             # always None
    m = _evaluate(capsys, _shuffled_file(tmp_path, examples, trivial, "none.csv"), "sentihood", real_data_dir)
    assert m["aspect_strict_acc"] == 900 / 1879                         # 0.47898..., docs/paper_notes.md §5.1: 47.9%
    assert m["aspect_macro_f1"] == 0.0 and m["sentiment_acc"] == 810 / 1216
    assert list(m) == sorted(m)


def test_evaluate_semeval_test_end_to_end(tmp_path, capsys, real_data_dir):
    from absa_lib.data.datasets import load_examples
    examples = load_examples("semeval", "test", real_data_dir)
    gold = np.array([e.label_id for e in examples])
    perfect = _evaluate(capsys, _shuffled_file(tmp_path, examples, np.eye(5)[gold], "gold.csv"),
                        "semeval", real_data_dir)
    assert perfect == {k: 1.0 for k in perfect} and len(perfect) == 6
    gold_file = tmp_path / "gold.csv"                # two raw ids end in a space, which editors strip
    stripped = gold_file.read_text().replace("#4 ,", "#4,").replace("#3 ,", "#3,")
    assert stripped != gold_file.read_text()
    (tmp_path / "stripped.csv").write_text(stripped)
    assert _evaluate(capsys, tmp_path / "stripped.csv", "semeval", real_data_dir) == perfect
    every = np.tile([.35, .1, .2, .05, .3], (len(examples), 1))       # every aspect, positive
    m = _evaluate(capsys, _shuffled_file(tmp_path, examples, every, "pos.csv"), "semeval", real_data_dir)
    assert m["aspect_p"] == 1025 / 4000 and m["aspect_r"] == 1.0
    assert m["sentiment_acc_binary"] == 657 / 879


def test_evaluate_prints_undefined_as_null(monkeypatch, capsys):
    monkeypatch.setattr("absa_lib.evaluation.predictions.evaluate_file", lambda *a: {"b": float("nan"), "a": 0.1 + 0.2})
    assert main(["evaluate", "--dataset", "semeval", "--split", "dev", "--predictions", "x.csv"]) == 0
    assert capsys.readouterr().out == '{\n  "a": 0.30000000000000004,\n  "b": null\n}\n'


def test_evaluate_errors_are_one_line(tmp_path, capsys, real_data_dir):
    from absa_lib.data.datasets import load_examples
    examples = load_examples("sentihood", "dev", real_data_dir)
    path = tmp_path / "p.csv"
    write_predictions(path, examples, np.tile([0.8, 0.1, 0.1], (len(examples), 1)))
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-3]) + "\n")                      # drop 3 rows
    rc = main(["evaluate", "--dataset", "sentihood", "--split", "dev", "--predictions", str(path),
               "--data-dir", str(real_data_dir)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert "3 of 3748 sentihood dev examples have no row" in err
    # The wrong split (SentiHood ids restart at 0 in every split, so many keys coincide): refused.
    write_predictions(path, examples, np.tile([0.8, 0.1, 0.1], (len(examples), 1)))
    rc = main(["evaluate", "--dataset", "sentihood", "--split", "test", "--predictions", str(path),
               "--data-dir", str(real_data_dir)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "sentihood test example" in err


def test_evaluate_help_gives_each_benchmark_header(capsys):
    from absa_lib.cli import main
    from absa_lib.evaluation.predictions import columns

    with pytest.raises(SystemExit):
        main(["evaluate", "--help"])
    text = capsys.readouterr().out
    for dataset in ("sentihood", "semeval"):
        assert ",".join(c for c in columns(dataset) if c != "gold") in text


def test_a_latin1_prediction_file_names_the_line_and_byte(tmp_path):
    f = _write_lines(tmp_path, "sentihood", lambda ls: ls)
    lines = f.read_bytes().split(b"\n")
    lines[3] += b",caf\xe9"                                          # Latin-1 'é' on line 4
    f.write_bytes(b"\n".join(lines))
    with pytest.raises(AbsaError, match=r"edited.csv: line 4: not UTF-8 text \(byte 0xe9\); save the file as UTF-8$"):
        read_predictions(f, sentihood_examples())


def test_a_sentences_file_that_is_not_a_regular_file_or_too_large_is_refused(tmp_path, monkeypatch):
    from absa_lib import apply
    from absa_lib.errors import AbsaError

    with pytest.raises(AbsaError, match=r"^/dev/zero: not a regular file \(a device or pipe\)"):
        apply.read_sentences("/dev/zero")
    with pytest.raises(AbsaError, match=r"not a regular file \(a folder\)"):
        apply.read_sentences(tmp_path)
    big = tmp_path / "big.txt"
    big.write_text("LOCATION1 is nice\n" * 10)
    monkeypatch.setattr(apply, "MAX_INPUT_BYTES", 100)
    with pytest.raises(AbsaError, match=r"big.txt: more than 0.0001 MB; split it"):
        apply.read_sentences(big)
