"""Your own data (absa_lib.data.own_data): the folder format, its checks, training, the run record and
prediction, on the tiny backbone and the hand-written phone reviews in tests/fixtures/own_data."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from absa_lib.apply import predict_text, predict_texts
from absa_lib.cli import main
from absa_lib.data import datasets as D
from absa_lib.data import inputs, own_data
from absa_lib.errors import AbsaError
from absa_lib.evaluation import metrics
from absa_lib.evaluation.predictions import read_predictions
from absa_lib.training import config as run_config
from absa_lib.training import loop as training
from absa_lib.training.records import find_runs, load_run


@pytest.fixture(autouse=True)
def clean_registry():
    """Each test starts with no dataset of its own registered, and leaves none behind."""
    tables = (D.OWN, D.REGISTRY)                      # your own data: a record in each
    saved = [dict(t) for t in tables]
    D.OWN.clear()
    yield
    for table, before in zip(tables, saved, strict=True):
        table.clear()
        table.update(before)


@pytest.fixture
def phones(fixtures_dir, tmp_path):
    """A writable copy of the phone-review dataset (targets phone and case)."""
    return shutil.copytree(fixtures_dir / "own_data" / "phones", tmp_path / "phones")


def without_targets(folder):
    """The same dataset as aspect-category sentiment: no targets, no target column."""
    scheme = json.loads((folder / "dataset.json").read_text())
    del scheme["targets"]
    (folder / "dataset.json").write_text(json.dumps(scheme))
    for split in D.SPLITS:
        path = folder / f"{split}.csv"
        rows = [line.split(",") for line in path.read_text().splitlines()]
        kept = []
        for line in path.read_text().splitlines():
            head, _, rest = line.rpartition(",")           # sentiment
            head, _, aspect = head.rpartition(",")
            head, _, _target = head.rpartition(",")
            kept.append(f"{head},{aspect},{rest}")
        assert len(kept) == len(rows)
        path.write_text("\n".join(kept) + "\n")
    return folder


def small(name, **kw) -> run_config.TrainConfig:
    base = {"dataset": name, "model": "qacg-bert", "backbone": "tiny", "seed": 3, "epochs": 1,
            "batch_size": 8, "max_length": 48, "eval_batch_size": 16}
    return run_config.TrainConfig(**{**base, **kw})


def test_a_folder_becomes_examples_in_groups_of_every_aspect(phones):
    name = own_data.register_dataset(phones)
    assert name == "phones" and D.known(name)
    assert D.LABELS[name] == ("none", "positive", "negative") and D.num_contexts(name) == 6
    train = D.load_examples(name, "train")
    assert len(train) == 13 * 3 and D.group_size(name) == 3
    # t3 names the case (price: positive) and the phone (no opinion): two groups, case after phone
    t3 = [(e.target, e.aspect, e.label, e.context_id) for e in train if e.sentence_id == "t3"]
    assert t3 == [("phone", "battery", "none", 0), ("phone", "screen", "none", 1),
                  ("phone", "price", "none", 2), ("case", "battery", "none", 3),
                  ("case", "screen", "none", 4), ("case", "price", "positive", 5)]
    t2 = {e.aspect: e.label for e in train if e.sentence_id == "t2"}
    assert t2 == {"battery": "negative", "screen": "positive", "price": "none"}
    assert train[0].text == "The phone lasts two days on one charge."
    assert train[0].key == ("t1", "phone", "battery")
    assert len(D.load_examples(name, "test")) == 5 * 3


def test_the_auxiliary_sentences_use_your_names(phones):
    name = own_data.register_dataset(phones)
    aux = {v: inputs.auxiliary_sentence(name, v, "case", "price", "negative") for v in inputs.INPUT_VARIANTS}
    assert aux == {"none": None, "single": None, "NLI-M": "case - price",
                   "QA-M": "what do you think of the price of case ?", "NLI-B": "negative - case - price",
                   "QA-B": "the polarity of the aspect price of case is negative ."}
    assert inputs.model_text(name, "The Case is GREAT") == "The Case is GREAT"


@pytest.mark.parametrize("scheme, message", [
    ([1], "expected a JSON object"),
    ({"name": "Phones!", "aspects": ["a"], "sentiments": ["p"]}, "field 'name' is 'Phones!'"),
    ({"name": "sentihood", "aspects": ["a"], "sentiments": ["p"]}, "is a benchmark's"),
    ({"name": "x", "aspects": [], "sentiments": ["p"]}, "field 'aspects' is []"),
    ({"name": "x", "aspects": ["a", "a"], "sentiments": ["p"]}, "names 'a' twice"),
    ({"name": "x", "aspects": ["a"], "sentiments": ["Good", "good"]}, "names 'Good' twice (ignoring case)"),
    ({"name": "x", "aspects": ["a"], "sentiments": ["p", "None"]}, "must not contain 'none'"),
    ({"name": "x", "aspects": [" a"], "sentiments": ["p"]}, "without surrounding spaces"),
    ({"name": "x", "aspects": ["a"], "sentiments": ["p"], "labels": []}, "unknown field 'labels'"),
])
def test_a_bad_dataset_json_is_one_line_naming_the_field(phones, scheme, message):
    (phones / "dataset.json").write_text(json.dumps(scheme))
    with pytest.raises(AbsaError, match="dataset.json") as err:
        own_data.register_dataset(phones)
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("row, message", [
    ("t1,The phone lasts two days on one charge.,phone,battery,great", "sentiment 'great' is not declared"),
    ("t1,The phone lasts two days on one charge.,phone,camera,positive", "aspect 'camera' is not declared"),
    ("t1,The phone lasts two days on one charge.,charger,battery,positive",
     "target 'charger' is not declared"),
    ("t1,The phone lasts two days on one charge.,,battery,positive", "empty target"),
    ("t1,Another text.,phone,price,positive", "id t1 has another text than on line 2"),
    ("t1,The phone lasts two days on one charge.,phone,battery,negative", "but line 2 says 'positive'"),
    ("t1,The phone lasts two days on one charge.,phone,battery,", "aspect without sentiment"),
    (",The phone.,phone,,", "empty id"),
    ("t1,x,phone", "has 3 fields, expected 5"),
    # a quote left open swallowed the next row into this one's text, whose label was then lost
    ('t9,"The case is cheap,case,price,positive\nt10,A "sturdy" case,case,price,positive',
     "not valid CSV (',' expected after '\"'); is a quote left open?"),
    ('t9,"The case is cheap,case,price,positive', "not valid CSV (unexpected end of data)"),
    ('t9,"The case\nis cheap",case,price,positive', "a field runs on to line 19; is a quote left open?"),
])
def test_a_bad_row_is_one_line_naming_the_file_and_line(phones, row, message):
    path = phones / "train.csv"
    path.write_text(path.read_text() + row + "\n")
    with pytest.raises(AbsaError) as err:
        own_data.register_dataset(phones)
    text = str(err.value)
    assert text.startswith(f"{path}: line 18") and message in text and "\n" not in text


def test_a_file_not_in_utf8_is_named_with_its_line(phones):
    path = phones / "train.csv"
    path.write_bytes(path.read_bytes() + "t9,Caf\u00e9 case,case,price,positive\n".encode("latin-1"))
    with pytest.raises(AbsaError, match=r"train.csv: line 18: not UTF-8 text \(byte 0xe9\); save the file as UTF-8$"):
        own_data.register_dataset(phones)


def test_check_counts_dev_and_test_sentences_that_train_has_verbatim(phones, capsys):
    # a sentence in train and test flatters the test score; the benchmarks have a few, so it is a count
    assert main(["data", "check", str(phones), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["texts_in_train"] == {"dev": 0, "test": 0}
    train = (phones / "train.csv").read_text().splitlines()
    (phones / "test.csv").write_text((phones / "test.csv").read_text() + train[1] + "\n" + train[1] + "\n")
    assert main(["data", "check", str(phones)]) == 0
    assert "sentences whose text train has too (seen in training; they flatter the scores): dev 0, test 1" \
        in capsys.readouterr().out


def test_files_saved_with_a_byte_order_mark_are_read(phones):
    for name in ("dataset.json", "train.csv"):            # Notepad's UTF-8; dataset.json was refused
        path = phones / name
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert own_data.register_dataset(phones) == "phones"
    assert len(D.load_examples("phones", "train")) > 0


def test_missing_files_and_wrong_columns_are_refused(phones):
    (phones / "dev.csv").write_text("id,text,aspect,sentiment\nd1,x,battery,positive\n")
    with pytest.raises(AbsaError, match=r"dev.csv: header id,text,aspect,sentiment \(missing: target\); expected "
                                        r"the columns id,text,target,aspect,sentiment, in any order, and no others"):
        own_data.register_dataset(phones)
    for header, fault in (("id,text,target,aspect,sentiment,note", "not expected: note"),   # named now
                          ("id,text,text,target,aspect,sentiment", "repeated: text"),
                          ("id,text,target,aspects,sentiment", "missing: aspect; not expected: aspects")):
        (phones / "dev.csv").write_text(header + "\n")
        with pytest.raises(AbsaError, match=rf"dev.csv: header {header} \({fault}\); expected the columns"):
            own_data.register_dataset(phones)
    (phones / "dev.csv").unlink()
    with pytest.raises(AbsaError, match=r"dev.csv: missing"):
        own_data.register_dataset(phones)
    with pytest.raises(AbsaError, match="no such folder"):
        own_data.register_dataset(phones / "nowhere")
    with pytest.raises(AbsaError, match=r"train.csv: a file, not a folder; give the folder holding dataset.json"):
        own_data.register_dataset(phones / "train.csv")
    (phones / "dataset.json").unlink()
    with pytest.raises(AbsaError, match=r"dataset.json: missing"):
        own_data.register_dataset(phones)


def test_one_name_one_scheme_per_process(phones, tmp_path):
    own_data.register_dataset(phones)
    other = shutil.copytree(phones, tmp_path / "other")
    scheme = json.loads((other / "dataset.json").read_text())
    scheme["aspects"].append("camera")
    (other / "dataset.json").write_text(json.dumps(scheme))
    with pytest.raises(AbsaError, match="'phones' is already registered with another scheme"):
        own_data.register_dataset(other)


@pytest.fixture
def trained(phones, tmp_path):
    name = own_data.register_dataset(phones)
    return training.train(small(name, epochs=2), runs_dir=tmp_path / "runs", progress=False)


def test_training_records_the_scheme_and_the_files(trained, phones):
    cfg = trained.config
    assert trained.path.parts[-3:-1] == ("phones", "qacg-bert")
    assert cfg["dataset_scheme"] == {"name": "phones", "aspects": ["battery", "screen", "price"],
                                     "sentiments": ["positive", "negative"], "targets": ["phone", "case"]}
    assert set(cfg["data_sha256"]) == {"dataset.json", "train.csv", "dev.csv", "test.csv"}
    assert cfg["n_train_examples"] == 39 and cfg["n_dev_examples"] == 12 and cfg["n_test_examples"] == 15
    assert trained.metrics.selection_metric == "aspect_strict_acc"
    assert set(trained.selected()["test"]) == set(metrics.OWN_METRIC_KEYS)
    probs = read_predictions(trained.path / "predictions_test.csv", D.load_examples("phones", "test"))
    gold = [e.label_id for e in D.load_examples("phones", "test")]
    recomputed = metrics.compute_metrics("phones", gold, probs)
    assert recomputed == pytest.approx(trained.selected()["test"], nan_ok=True)
    header = (trained.path / "predictions_test.csv").read_text().splitlines()[0]
    assert header == "id,target,aspect,gold,p_none,p_positive,p_negative"


def test_edited_data_is_a_new_run_and_never_read_stale(trained, phones):
    path = phones / "train.csv"
    path.write_text(path.read_text() + "t11,The case is ugly.,case,,\n")
    with pytest.raises(AbsaError, match="train.csv changed after dataset 'phones' was registered"):
        D.load_examples("phones", "train")
    with pytest.raises(AbsaError, match="train.csv changed after dataset 'phones' was registered"):
        training.train(small("phones", epochs=2), runs_dir=trained.path.parents[2], progress=False)
    # (it used to return the run trained on the old file from the cache, as `cached`)
    own_data.register_dataset(phones)
    assert run_config.run_path(small("phones", epochs=2), trained.path.parents[2]) != trained.path
    again = training.train(small("phones", epochs=2), runs_dir=trained.path.parents[2], progress=False)
    assert not again.cached and again.config["n_train_examples"] == 42


def test_a_run_predicts_without_its_data_folder(trained, phones):
    shutil.rmtree(phones)
    D.OWN.clear()                           # a new process: only the run record knows the scheme
    run = load_run(trained.path)
    out = predict_text(run, "The case is cheap but the phone screen cracked.")
    assert [(p["target"], p["aspect"]) for p in out["predictions"]] == [
        (t, a) for t in ("phone", "case") for a in ("battery", "screen", "price")]
    assert all(set(p["probabilities"]) == {"none", "positive", "negative"} for p in out["predictions"])
    chosen = predict_text(run, "It is cheap.", targets=["case"])["predictions"]
    assert [p["target"] for p in chosen] == ["case"] * 3
    spelt = predict_text(run, "It is cheap.", targets=["Case", "CASE"])["predictions"]   # any case, as in text
    assert [p["target"] for p in spelt] == ["case"] * 3
    assert [p["probabilities"] for p in spelt] == [p["probabilities"] for p in chosen]
    with pytest.raises(AbsaError, match="none of the targets phone, case occurs in the text"):
        predict_text(run, "The battery is great.")
    with pytest.raises(AbsaError, match=r"--targets 'LOCATION1': expected one of phone, case"):
        predict_text(run, "The phone is great.", targets=["LOCATION1"])
    with pytest.raises(AbsaError, match="known from a run record only; register its folder to train"):
        training.train(small("phones"), runs_dir=trained.path.parents[2], progress=False)


def test_a_b_variant_run_predicts_many_texts(phones, tmp_path):
    """NLI-B reads one input per candidate label; predict_texts maps them back to their texts."""
    name = own_data.register_dataset(phones)
    run = training.train(small(name, model="bert-pair", aux="NLI-B"), runs_dir=tmp_path / "runs",
                         progress=False)
    out = predict_texts(run, ["The phone is great.", "The case and the phone are cheap."])
    assert [len(r["predictions"]) for r in out] == [3, 6] and not any(r["truncated"] for r in out)
    for r in out:
        for p in r["predictions"]:
            assert sum(p["probabilities"].values()) == pytest.approx(1.0)
    assert out[0]["predictions"] == predict_text(run, "The phone is great.")["predictions"]


def test_runs_of_your_own_data_do_not_disturb_collecting_the_benchmarks(trained):
    D.OWN.clear()
    own_data.register_scheme(own_data.Scheme("phones", ("camera",), ("good", "bad")))   # another "phones"
    runs_dir = trained.path.parents[2]
    assert find_runs(runs_dir, dataset="sentihood") == []
    with pytest.raises(AbsaError, match="'phones' is already registered with another scheme") as err:
        find_runs(runs_dir, dataset="phones")
    # the record is fine: the advice is to read the two datasets apart, not to restore or retrain it
    assert "cannot be read together: summarise or load them apart" in str(err.value)
    assert "restore the file" not in str(err.value)


def test_an_edited_scheme_in_the_record_is_refused(trained):
    record = json.loads((trained.path / "config.json").read_text())
    record["dataset_scheme"]["sentiments"] = ["negative", "positive"]          # would swap the labels
    (trained.path / "config.json").write_text(json.dumps(record))
    D.OWN.clear()
    with pytest.raises(AbsaError, match="is not the hash of the recorded configuration"):
        load_run(trained.path)


def test_the_cli_checks_trains_and_predicts_a_folder_without_targets(phones, tmp_path, capsys):
    folder = without_targets(phones)
    assert main(["data", "check", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "phones:" in out and "train" in out and " 30 " in out          # 10 sentences × 3 aspects
    # the floor on test (4 sentences, 12 examples, 3 of them positive and 1 negative): all-none gets
    # the 1 of 4 sentences without an opinion right, and "positive" for 3 of the 4 sentiments
    assert "All-none: aspect_strict_acc 25.0, aspect_macro_p 0.0" in out and "sentiment_acc 75.0" in out
    runs_dir = tmp_path / "runs"
    args = ["train", "--dataset", str(folder), "--model", "cg-bert", "--backbone", "tiny", "--epochs", "1",
            "--max-length", "48", "--out", str(runs_dir), "--quiet"]
    assert main(args) == 0
    run = json.loads(capsys.readouterr().out)["run"]
    header = (tmp_path / "runs" / "phones" / "cg-bert").glob("*/predictions_dev.csv")
    assert next(header).read_text().splitlines()[0] == "id,aspect,gold,p_none,p_positive,p_negative"
    (tmp_path / "reviews.txt").write_text("The screen is dim.\n\nGreat price.\n")
    assert main(["predict", "--run", run, "--file", str(tmp_path / "reviews.txt")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "line,aspect,label,p_none,p_positive,p_negative,truncated,text"
    assert [row.split(",")[:2] for row in lines[1:]] == [[n, a] for n in ("1", "3")
                                                         for a in ("battery", "screen", "price")]
    assert main(["predict", "--run", run, "The screen is dim.", "--targets", "phone"]) == 2
    assert "declares no targets" in capsys.readouterr().err
    assert main(["predict", "--run", run, " "]) == 2            # not SentiHood's example
    assert capsys.readouterr().err.strip() == "absa: error: the text is empty; give a review sentence"
    assert main(["evaluate", "--dataset", str(folder), "--split", "dev", "--predictions",
                 f"{run}/predictions_dev.csv"]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert set(scores) == set(metrics.OWN_METRIC_KEYS)
    # the API takes the folder too (its error suggested one, then refused it)
    from absa_lib import evaluate
    D.OWN.clear()
    assert evaluate(str(folder), "dev", f"{run}/predictions_dev.csv") == pytest.approx(scores, nan_ok=True)


def test_own_metrics_by_hand():
    own_data.register_scheme(own_data.Scheme("toy", ("a", "b"), ("pos", "neg", "neu")))
    # labels: none=0, pos=1, neg=2, neu=3; two groups of two aspects
    gold = np.array([1, 0, 2, 3])
    probs = np.array([[.1, .6, .2, .1],      # pos: right
                      [.7, .1, .1, .1],      # none: right
                      [.5, .1, .3, .1],      # predicted none; among sentiments neg: right
                      [.1, .5, .1, .3]])     # pos, gold neu: wrong
    m = metrics.own_metrics("toy", gold, probs)
    assert m["aspect_strict_acc"] == 0.5                          # group 1 right, group 2 not
    assert m["aspect_macro_p"] == pytest.approx((1 + 1) / 2)
    assert m["aspect_macro_r"] == pytest.approx((1 + .5) / 2)
    assert m["sentiment_acc"] == pytest.approx(2 / 3)
    # F1 pos: tp 1, pred 2, gold 1 -> 2/3; neg: 1, 1, 1 -> 1; neu: 0, 0, 1 -> 0
    assert m["sentiment_macro_f1"] == pytest.approx((2 / 3 + 1 + 0) / 3)
    assert np.isnan(m["aspect_auc"])                              # aspect a: never none, so no AUC


def test_own_metrics_agree_with_sentihood_on_its_scheme():
    """On SentiHood's labels (none, Positive, Negative) and 4 aspects, the shared metrics are SentiHood's."""
    own_data.register_scheme(own_data.Scheme("sh-like", D.ASPECTS["sentihood"], ("Positive", "Negative")))
    rng = np.random.default_rng(0)
    gold, probs = rng.integers(0, 3, 400), rng.dirichlet(np.ones(3), 400)
    ours, theirs = metrics.own_metrics("sh-like", gold, probs), metrics.sentihood_metrics(gold, probs)
    for key in ("aspect_strict_acc", "aspect_macro_p", "aspect_macro_r", "aspect_macro_f1", "aspect_auc",
                "sentiment_acc"):
        assert ours[key] == theirs[key], key


def test_export_never_overwrites_a_folder_that_holds_anything_unless_forced(phones, real_data_dir, capsys):
    before = {p.name: p.read_bytes() for p in phones.iterdir()}
    assert main(["data", "export", "semeval", str(phones), "--data-dir", str(real_data_dir)]) == 2
    assert "phones: not empty (it holds dataset.json, dev.csv, test.csv, ...); give a new folder, or --force" \
        in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in phones.iterdir()} == before          # the user's data, untouched
    assert main(["data", "export", "semeval", str(phones / "train.csv"), "--data-dir", str(real_data_dir)]) == 2
    assert "train.csv: a file, not a folder" in capsys.readouterr().err
    assert main(["data", "export", "semeval", str(phones), "--data-dir", str(real_data_dir), "--force"]) == 0
    assert own_data.register_dataset(phones) == "semeval-own"


@pytest.mark.parametrize("dataset", D.DATASETS)
def test_a_benchmark_exported_in_this_format_reads_back_as_its_examples(dataset, real_data_dir, tmp_path):
    assert main(["data", "export", dataset, str(tmp_path / dataset), "--data-dir", str(real_data_dir)]) == 0
    name = own_data.register_dataset(tmp_path / dataset)
    assert name == f"{dataset}-own" and D.num_contexts(name) == D.num_contexts(dataset)
    none = D.NONE_LABEL[dataset]
    for split in D.SPLITS:
        ours = D.load_examples(name, split)
        theirs = D.load_examples(dataset, split, real_data_dir)
        ours_rows = [(e.sentence_id, e.text, e.target or "", e.aspect, e.label, e.context_id) for e in ours]
        theirs_rows = [(e.sentence_id.strip(), e.text, e.target or "", e.aspect,
                        "none" if e.label == none else e.label, e.context_id) for e in theirs]
        assert sorted(ours_rows) == sorted(theirs_rows), split
        if dataset == "semeval":        # also in order (SentiHood lists every LOCATION1 group first)
            assert ours_rows == theirs_rows, split


def test_a_summary_of_your_runs_shows_your_metrics_and_your_trivial_rows(trained, phones):
    from absa_lib.reports.summary import summarize

    text, frame = summarize(trained.path.parents[2], ("dev_best",))
    assert "| Run | Seeds | Epochs chosen | Strict Acc | Macro-P | Macro-R | Macro-F1 | Aspect AUC | Sentiment " \
           "Acc | Sentiment Macro-F1 |" in text
    ours = frame[frame["source"] == "ours"].iloc[0]
    assert ours["seeds"] == "3" and ours["epochs_chosen"] == str(trained.selected()["epoch"])
    assert ours["aspect_strict_acc"] == pytest.approx(100 * trained.selected()["test"]["aspect_strict_acc"])
    assert list(frame.loc[frame["source"] == "trivial", "row"]) == ["All-none (trivial)",
                                                                    "Majority polarity: positive (trivial)"]
    D.OWN.clear()                           # a new process: only the run records know the dataset
    text, frame = summarize(trained.path.parents[2], ("dev_best",))
    assert "trivial" not in set(frame["source"]) and "give its folder (`absa summary --data FOLDER`)" in text
    text, frame = summarize(trained.path.parents[2], ("dev_best",), own_folders=(phones,))
    assert list(frame["source"]) == ["ours", "trivial", "trivial"]
    edited = shutil.copytree(phones, phones.parent / "phones_v2")          # the same name, another test set
    (edited / "test.csv").write_text((edited / "test.csv").read_text().replace("negative", "positive"))
    D.OWN.clear()                           # trivial rows of other data used to be shown beside the runs
    text, frame = summarize(trained.path.parents[2], ("dev_best",), own_folders=(edited,))
    assert list(frame["source"]) == ["ours"]
    assert f"were trained on other files than those in {edited}; give the folder they were trained on" in text
    with pytest.raises(AbsaError, match=f"^--data {phones.resolve()} and {edited} both hold dataset 'phones'; "
                       "give one folder per dataset name"):      # the last one named hid the first
        summarize(trained.path.parents[2], ("dev_best",), own_folders=(phones, edited))
    assert summarize(trained.path.parents[2], ("dev_best",), own_folders=(phones, phones))[1].shape[0] == 3
