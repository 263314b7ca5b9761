"""Tables 1 and 2: paper numbers as published, our mean ± sd from synthetic run records."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from conftest import typed_run, with_record

from absa_lib.evaluation.metrics import METRIC_KEYS
from absa_lib.harness import grid
from absa_lib.reports import paper_numbers, variant_tables
from absa_lib.reports import tables as T

ROWS_T1 = ["LR (Saeidi et al. 2016)", "LSTM-Final (Saeidi et al. 2016)", "LSTM-Loc (Saeidi et al. 2016)",
           "SenticLSTM (Ma et al. 2018)", "Dmu-Entnet (Liu et al. 2018)", "BERT-single (Sun et al. 2019)",
           "BERT-pair (Sun et al. 2019)", "CG-BERT", "CG-BERT (auxiliary sentences)", "QACG-BERT",
           "QACG-BERT (auxiliary sentences)"]
ROWS_T2 = ["XRCE (Brun et al. 2014)", "NRC-Canada (Kiritchenko et al. 2014)", "BERT-single (Sun et al. 2019)",
           "BERT-pair (Sun et al. 2019)", "CG-BERT", "CG-BERT (auxiliary sentences)", "QACG-BERT",
           "QACG-BERT (auxiliary sentences)"]
SPEC = {"BERT-single (Sun et al. 2019)": ("bert-single", "single"), "BERT-pair (Sun et al. 2019)": ("bert-pair", "NLI-M"),
        "CG-BERT": ("cg-bert", "none"), "CG-BERT (auxiliary sentences)": ("cg-bert", "NLI-M"),
        "QACG-BERT": ("qacg-bert", "none"), "QACG-BERT (auxiliary sentences)": ("qacg-bert", "NLI-M")}


def fake_run(dataset, model, aux, seed, dev_value, test_value, preset="paper", sampler=None,
             overrides=None, backbone="minilm", env=None, **budget):
    """A finished run whose every test metric is ``test_value`` at dev_best and 0.9 at test_best
    (sampler: the tables' own, per-context for bert-single, unless given; ``env``: its env.json)."""
    sampler = sampler or ("per-context" if model == "bert-single" else "uniform")
    def metrics(v):
        return {k: v for k in METRIC_KEYS[dataset]}
    cfg = {"dataset": dataset, "model": model, "aux": aux, "seed": seed, "preset": preset, "sampler": sampler,
           "model_overrides": overrides or {}, "backbone": backbone, "epochs": 3, "batch_size": 24, "precision": "fp32",
           "lr": 2e-5, "max_length": 128, "max_train_examples": None, "max_eval_examples": None,
           "run_id": f"{model}-{aux}-{seed}-{preset}-{sampler}-{backbone}"}
    cfg.update(budget)
    cfg["run_id"] += "".join(f"-{k}{v}" for k, v in budget.items())
    sel = {"dev_best": {"epoch": 2, "dev": metrics(dev_value), "test": metrics(test_value)},
           "test_best": {"epoch": 3, "dev": metrics(dev_value), "test": metrics(0.9)},
           "last": {"epoch": 3, "dev": metrics(dev_value), "test": metrics(0.9)}}
    return typed_run(cfg, {"selection": sel}, env, Path("runs") / dataset / model / cfg["run_id"])


def test_paper_numbers_are_exactly_the_published_ones():
    t1 = {r.name: r for r in paper_numbers.PAPER_TABLES["sentihood"]}
    t2 = {r.name: r for r in paper_numbers.PAPER_TABLES["semeval"]}
    assert list(t1) == ROWS_T1 and list(t2) == ROWS_T2
    assert t1["QACG-BERT (auxiliary sentences)"].values["aspect_strict_acc"] == (80.9, 0.3)
    assert t1["LR (Saeidi et al. 2016)"].values == {"aspect_macro_f1": (39.3, None), "aspect_auc": (92.4, None),
                                                    "sentiment_acc": (87.5, None), "sentiment_auc": (90.5, None)}
    assert "aspect_auc" not in t1["SenticLSTM (Ma et al. 2018)"].values
    assert t1["BERT-single (Sun et al. 2019)"].values["sentiment_auc"] == (84.2, None)
    assert t2["XRCE (Brun et al. 2014)"].values == {"aspect_p": (83.23, None), "aspect_r": (81.37, None),
                                                     "aspect_f1": (82.29, None), "sentiment_acc_4class": (78.1, None)}
    assert t2["QACG-BERT"].values["aspect_p"] == (94.38, 0.31) and t2["QACG-BERT"].values["aspect_f1"] == (92.64, None)
    assert t2["CG-BERT (auxiliary sentences)"].values["sentiment_acc_4class"] == (85.7, 0.5)
    # the paper's F1 of our rows is the harmonic mean of its mean P and mean R (docs/paper_notes.md §5.2)
    for name in ("CG-BERT", "CG-BERT (auxiliary sentences)", "QACG-BERT", "QACG-BERT (auxiliary sentences)"):
        v = t2[name].values
        p, r = v["aspect_p"][0], v["aspect_r"][0]
        assert round(2 * p * r / (p + r), 2) == pytest.approx(v["aspect_f1"][0], abs=0.011)
    # every row has one value per column at most, and only the known columns
    for dataset in ("sentihood", "semeval"):
        keys = {k for k, _, _ in paper_numbers.METRICS[dataset]}
        for row in paper_numbers.PAPER_TABLES[dataset]:
            assert set(row.values) <= keys


def test_sentihood_table_has_every_row_and_the_right_mean_and_sd():
    runs = []
    for model, aux in SPEC.values():
        for seed, v in zip((1, 2, 3), (0.70, 0.74, 0.81), strict=True):
            runs.append(fake_run("sentihood", model, aux, seed, 0.5, v))
    # runs outside the main grid must not leak into the table
    runs.append(fake_run("sentihood", "qacg-bert", "NLI-M", 1, 0.5, 0.1, preset="official"))
    runs.append(fake_run("sentihood", "qacg-bert", "NLI-M", 1, 0.5, 0.1, overrides={"quasi": False}))
    runs.append(fake_run("sentihood", "qacg-bert", "NLI-M", 1, 0.5, 0.1, sampler="balanced"))
    runs.append(fake_run("semeval", "qacg-bert", "NLI-M", 1, 0.5, 0.1))
    df = T.build_table("sentihood", runs)
    reported = df[df.source == "reported"]
    assert list(reported.model) == ROWS_T1[:5]
    for protocol in ("dev_best", "test_best"):
        ours = df[(df.source == "ours") & (df.selection == protocol)]
        assert list(ours.model) == ROWS_T1[5:]
        assert set(ours.n_seeds) == {3}
    ours = df[(df.source == "ours") & (df.selection == "dev_best")]
    # hand-computed: mean(70, 74, 81) = 75, sample sd = sqrt((25 + 1 + 36) / 2) = sqrt(31)
    for key, _, _ in paper_numbers.METRICS["sentihood"]:
        assert ours[key].tolist() == pytest.approx([75.0] * 6)
        assert ours[f"{key}_sd"].tolist() == pytest.approx([math.sqrt(31)] * 6)
    test_best = df[(df.source == "ours") & (df.selection == "test_best")]
    assert test_best["aspect_strict_acc"].tolist() == pytest.approx([90.0] * 6)
    assert test_best["aspect_strict_acc_sd"].tolist() == pytest.approx([0.0] * 6)
    row = df[(df.model == "QACG-BERT (auxiliary sentences)") & (df.selection == "dev_best")].iloc[0]
    assert (row.aspect_strict_acc_paper, row.aspect_strict_acc_paper_sd) == (80.9, 0.3)
    assert row.backbone == "minilm" and row.seeds == "1 2 3"
    lr = reported[reported.model == "LR (Saeidi et al. 2016)"].iloc[0]
    assert math.isnan(lr.aspect_strict_acc_paper) and lr.aspect_macro_f1_paper == 39.3
    assert math.isnan(lr.aspect_macro_f1)       # we never fill a reported row with our numbers


def test_semeval_f1_is_from_mean_p_and_mean_r():
    def run(seed, p, r):
        rec = fake_run("semeval", "qacg-bert", "none", seed, 0.5, 0.8)
        rec.metrics.selection["dev_best"]["test"].update(aspect_p=p, aspect_r=r, aspect_f1=2 * p * r / (p + r))
        return rec
    df = T.build_table("semeval", [run(1, 0.9, 0.5), run(2, 0.7, 0.9)], protocols=("dev_best",))
    row = df[(df.model == "QACG-BERT") & (df.source == "ours")].iloc[0]
    assert row.aspect_p == pytest.approx(80.0) and row.aspect_r == pytest.approx(70.0)
    assert row.aspect_f1 == pytest.approx(2 * 80 * 70 / 150)        # 74.67, not the mean of per-run F1s
    assert math.isnan(row.aspect_f1_sd)
    assert row.aspect_p_sd == pytest.approx(100 * math.sqrt(0.02))
    assert list(df.model) == ROWS_T2
    assert set(df[df.model.isin(ROWS_T2[2:]) & (df.model != "QACG-BERT")].source) == {"not run"}


def test_groups_differing_in_backbone_are_separate_rows_and_single_seed_has_no_sd():
    runs = [fake_run("sentihood", "cg-bert", "none", 1, 0.5, 0.6, backbone="minilm"),
            fake_run("sentihood", "cg-bert", "none", 1, 0.5, 0.7, backbone="bert-base-uncased")]
    df = T.build_table("sentihood", runs, protocols=("dev_best",), models=("cg-bert",))
    assert list(df.model) == ["CG-BERT", "CG-BERT", "CG-BERT (auxiliary sentences)"]
    assert sorted(df.backbone.iloc[:2]) == ["bert-base-uncased", "minilm"]
    assert df.source.tolist() == ["ours", "ours", "not run"]
    assert df.n_seeds.iloc[:2].tolist() == [1, 1] and df.aspect_auc_sd.iloc[:2].isna().all()


def test_markdown_and_files(tmp_path):
    runs = [fake_run("semeval", "cg-bert", "NLI-M", s, 0.5, 0.9 + s / 100, env={"gpu": gpu})
            for s, gpu in ((1, "NVIDIA H200"), (2, "NVIDIA H100"))]
    df = T.build_table("semeval", runs)
    md = T.to_markdown(df, "semeval")
    for name in ROWS_T2:
        assert md.count(f"| {name} |") == 2            # one line per protocol block
    for _, title, _ in paper_numbers.METRICS["semeval"]:
        assert f" {title} |" in md
    assert "dev-best" in md and "test-best" in md and "optimistic" in md
    test_block = md[md.index("## Selection: test-best"):]          # names the metric that picks the epoch
    assert test_block.count("Each run's epoch is the one with the best test F1: that column is optimistic") == 1
    assert md.count("best test") == 1 and "(paper's value in brackets, from BERT-base)" in md
    assert "| CG-BERT (auxiliary sentences) | ours | minilm, 3 epochs | 2 | 91.50 ± 0.71 [93.12 ± 0.37]" in md
    footnote = ("\n_minilm, 3 epochs: 3 epochs, train examples: all, lr 2e-05, schedule linear, head lr x1.0, "
                "max length 128, batch 24, fp32, random batches; trained on NVIDIA H100, NVIDIA H200._")
    assert md.count(footnote) == 2                      # a footnote a block, naming the machines
    assert "| XRCE (Brun et al. 2014) | reported | – | – | – [83.23] |" in md
    paths = T.write_table(df, md, tmp_path, "table2_semeval")
    assert [p.name for p in paths] == ["table2_semeval.csv", "table2_semeval.md"]
    back = pd.read_csv(paths[0])
    assert len(back) == len(df) and back.aspect_p_paper.iloc[0] == 83.23
    assert set(back[back.source == "ours"].device) == {"NVIDIA H100; NVIDIA H200"}


def test_ablation_table_means():
    base = [fake_run("sentihood", "qacg-bert", "NLI-M", s, 0.5, v) for s, v in ((1, 0.6), (2, 0.8))]
    off = [fake_run("sentihood", "qacg-bert", "NLI-M", 1, 0.5, 0.5, overrides={"quasi": False})]
    Variant = variant_tables.Variant
    df = variant_tables.ablation_table("sentihood", [Variant("QACG-BERT", "none", base),
                                                     Variant("λ_A = 0", "quasi off", off),
                                                     Variant("QACG-BERT", "none", base, protocol="test_best"),
                                                     Variant("empty", "nothing", [])])
    assert df.aspect_strict_acc.tolist()[:3] == pytest.approx([70.0, 50.0, 90.0])
    assert df.n_seeds.tolist() == [2, 1, 2, 0]
    assert math.isnan(df.aspect_strict_acc.iloc[3])
    md = variant_tables.ablation_markdown(df, "sentihood", "Ablations")
    assert "| λ_A = 0 | quasi off | dev_best | minilm, 3 epochs | 1 | 50.0 |" in md
    assert "_minilm, 3 epochs: 3 epochs, train examples: all, lr 2e-05" in md
    assert "trained on" not in md                       # these records name no machine


def test_two_copies_of_one_seed_are_refused_not_averaged_as_two_seeds(tmp_path):
    """A finished run copied into a subfolder of the runs folder (a backup, a second import) is found
    twice by `render`'s search; a row once counted it as two seeds, with a shrunken sd."""
    import shutil

    from absa_lib.errors import AbsaError
    from absa_lib.training.records import find_runs

    reference = Path(__file__).resolve().parent.parent / "results" / "reference" / "runs"
    record = find_runs(reference, dataset="sentihood", model="qacg-bert", aux="NLI-M", preset="paper",
                       model_overrides={}, objective="single", sampler="uniform")[0].path        # a table cell
    shutil.copytree(record, tmp_path / "runs" / "sentihood" / "qacg-bert" / record.name)
    found = find_runs(tmp_path / "runs")
    table = T.build_table("sentihood", found, protocols=("dev_best",))
    assert table.loc[table.source == "ours", "n_seeds"].tolist() == [1]             # one copy: one seed
    shutil.copytree(record, tmp_path / "runs" / "backup" / "sentihood" / "qacg-bert" / record.name)
    found = find_runs(tmp_path / "runs", dataset="sentihood")
    assert len(found) == 2
    seed = found[0].config["seed"]
    with pytest.raises(AbsaError, match=rf"runs/backup/sentihood/qacg-bert/{record.name} and \S+/runs/sentihood/"
                       rf"qacg-bert/{record.name} are both seed {seed} of sentihood qacg-bert NLI-M \(paper\) "
                       r"at one budget: a row averages distinct seeds"):
        T.build_table("sentihood", found)
    same_seed = [fake_run("sentihood", "qacg-bert", "NLI-M", 1, 0.5, v) for v in (0.6, 0.7)]
    same_seed[1] = with_record(same_seed[1], backbone_fingerprint="587e9ebe000b7363")       # the same seed, other weights:
    rows = variant_tables.ablation_table("sentihood", [variant_tables.Variant("QACG-BERT", "none", same_seed)])
    assert len(rows) == 2 and list(rows["n_seeds"]) == [1, 1]              # two budgets, never one row of two
    assert any("backbone_fingerprint=587e9ebe000b7363" in b for b in rows["budget"])


def test_runs_of_different_budgets_are_never_averaged_together():
    """A variant (or system) trained at two budgets gets one row per budget, most seeds first; a
    record without the newer ``compile`` field is the same budget as one that says ``none``."""
    short = [fake_run("sentihood", "qacg-bert", "NLI-M", s, 0.5, v) for s, v in ((1, 0.6), (2, 0.7))]
    short[1] = with_record(short[1], compile="none")
    long = [fake_run("sentihood", "qacg-bert", "NLI-M", 1, 0.5, 0.9, epochs=25, compile="reduce-overhead",
                     env={"gpu": "NVIDIA H100"})]
    short[0] = typed_run(short[0].config.record, {"selection": short[0].metrics.selection},
                         {"device": "cpu", "processor": "x86_64", "cpu_count": 2, "torch_threads": 1}, short[0].path)
    Variant = variant_tables.Variant
    df = variant_tables.ablation_table("sentihood", [Variant("QACG-BERT", "none", short + long)])
    assert df.n_seeds.tolist() == [2, 1]
    assert df.aspect_strict_acc.tolist() == pytest.approx([65.0, 90.0])
    assert df.budget.tolist() == ["minilm, 3 epochs", "minilm, 25 epochs"]
    md = variant_tables.ablation_markdown(df, "sentihood", "Ablations")
    assert "_minilm, 3 epochs: 3 epochs, " in md
    assert "random batches; trained on x86_64 (2 cores, 1 thread)._" in md
    assert "25 epochs, " in md and "compiled (reduce-overhead); trained on NVIDIA H100._" in md
    spec = grid.Spec("QACG-BERT", "qacg-bert", "NLI-M")
    cmp = variant_tables.comparison_table("sentihood", {("sentihood", "QACG-BERT"): short + long}, [spec])
    assert cmp.n_seeds.tolist() == [2, 1] and cmp.aspect_strict_acc.tolist() == pytest.approx([65.0, 90.0])
    assert "| minilm, 25 epochs | 1 |" in variant_tables.comparison_markdown(cmp, "sentihood", "Other")
    # a variant not run at a budget another has: its row names the budget but no machine
    cg = grid.Spec("CG-BERT", "cg-bert", "NLI-M")
    two = variant_tables.comparison_table(
        "sentihood", {("sentihood", "QACG-BERT"): short + long, ("sentihood", "CG-BERT"): long}, [spec, cg])
    assert two[["budget", "device"]].values.tolist() == [["minilm, 3 epochs", "x86_64 (2 cores, 1 thread)"],
                                                         ["minilm, 25 epochs", "NVIDIA H100"],
                                                         ["minilm, 25 epochs", "NVIDIA H100"],
                                                         ["minilm, 3 epochs", ""]]
    t1 = T.build_table("sentihood", short + long, protocols=("dev_best",), models=("qacg-bert",))
    assert sorted(t1[t1.source == "ours"].n_seeds.tolist()) == [1, 2]



def test_two_budgets_of_one_short_name_are_named_apart_in_every_table():
    """Two 3-epoch budgets that differ in the learning rate and in the test examples scored were two
    rows named "minilm, 3 epochs" each, with two footnotes of that name: which row had which budget
    could not be told. Each name now adds what tells them apart; a budget alone keeps its short name."""
    a = [fake_run("sentihood", "qacg-bert", "NLI-M", s, 0.5, 0.6) for s in (1, 2)]
    b = [fake_run("sentihood", "qacg-bert", "NLI-M", 1, 0.5, 0.7, lr=5e-5, max_eval_examples=200)]
    names = ["minilm, 3 epochs [lr=2e-05 max_eval_examples=None]",
             "minilm, 3 epochs [lr=5e-05 max_eval_examples=200]"]
    t1 = T.build_table("sentihood", a + b, protocols=("dev_best",), models=("qacg-bert",))
    assert t1[t1.source == "ours"].budget.tolist() == names
    md = T.to_markdown(t1, "sentihood", ("dev_best",))
    assert f"| {names[1]} | 1 |" in md
    assert f"\n_{names[1]}: 3 epochs, " in md and "scored on the first 200 examples of dev and test._" in md
    Variant = variant_tables.Variant
    assert variant_tables.ablation_table("sentihood", [Variant("Q", "-", a + b)]).budget.tolist() == names
    alone = T.build_table("sentihood", a, protocols=("dev_best",), models=("qacg-bert",))
    assert alone[alone.source == "ours"].budget.tolist() == ["minilm, 3 epochs"]
    assert "first" not in T.budget_text(a[0].config)               # the whole test set is not mentioned


def test_a_budget_a_variant_was_not_run_at_is_a_row_of_0_seeds_not_left_out():
    """The ablations and notebook 06's tables: when some variants have 25-epoch runs, the others
    show that budget too, with 0 seeds and '–' cells (it was silently absent before)."""
    short = [fake_run("sentihood", "qacg-bert", "NLI-M", s, 0.5, 0.6) for s in (1, 2)]
    long = [fake_run("sentihood", "qacg-bert", "NLI-M", 1, 0.5, 0.9, epochs=25)]
    off = [fake_run("sentihood", "qacg-bert", "NLI-M", 1, 0.5, 0.5, overrides={"quasi": False})]
    Variant = variant_tables.Variant
    df = variant_tables.ablation_table("sentihood", [Variant("QACG-BERT", "none", short + long),
                                                     Variant("λ_A = 0", "quasi off", off), Variant("empty", "-", [])])
    assert list(zip(df.variant, df.budget, df.n_seeds, strict=True)) == [
        ("QACG-BERT", "minilm, 3 epochs", 2), ("QACG-BERT", "minilm, 25 epochs", 1),
        ("λ_A = 0", "minilm, 3 epochs", 1), ("λ_A = 0", "minilm, 25 epochs", 0),
        ("empty", "minilm, 3 epochs", 0), ("empty", "minilm, 25 epochs", 0)]
    assert df.aspect_strict_acc.isna().tolist() == [False, False, False, True, True, True]
    md = variant_tables.ablation_markdown(df, "sentihood", "Ablations")
    assert "| λ_A = 0 | quasi off | dev_best | minilm, 25 epochs | 0 | – | – | – | – | – |" in md
    specs = [grid.Spec("QACG-BERT", "qacg-bert", "NLI-M"), grid.Spec("CG-BERT", "cg-bert", "none")]
    cmp = variant_tables.comparison_table("sentihood", {("sentihood", "QACG-BERT"): short + long,
                                                        ("sentihood", "CG-BERT"): off}, specs)
    assert list(zip(cmp.label, cmp.budget, cmp.n_seeds, strict=True)) == [
        ("QACG-BERT", "minilm, 3 epochs", 2), ("QACG-BERT", "minilm, 25 epochs", 1),
        ("CG-BERT", "minilm, 3 epochs", 1), ("CG-BERT", "minilm, 25 epochs", 0)]
    assert "| CG-BERT | sentence + context id | single | minilm, 25 epochs | 0 | – |" in \
        variant_tables.comparison_markdown(cmp, "sentihood", "Other")
    alone = variant_tables.ablation_table("sentihood", [Variant("empty", "-", [])])
    assert alone.n_seeds.tolist() == [0] and alone.budget.tolist() == [""]          # no run anywhere: one row


def test_variant_tables_end_with_the_trivial_rows():
    base = [fake_run("sentihood", "qacg-bert", "NLI-M", 1, 0.5, 0.6)]
    trivial = {"All-None (trivial)": {k: 0.25 for k in METRIC_KEYS["sentihood"]},
               "Majority polarity: Positive (trivial)": {k: 0.5 for k in METRIC_KEYS["sentihood"]}}
    df = variant_tables.ablation_table("sentihood", [variant_tables.Variant("QACG-BERT", "none", base)], trivial)
    assert df.variant.tolist() == ["QACG-BERT", *trivial] and df.source.tolist() == ["ours", "trivial", "trivial"]
    assert df.aspect_strict_acc.tolist() == pytest.approx([60.0, 25.0, 50.0])
    assert df.aspect_strict_acc_sd.iloc[1:].isna().all() and (df.n_seeds.iloc[1:] == 0).all()
    md = variant_tables.ablation_markdown(df, "sentihood", "Ablations")
    assert "| All-None (trivial) |" in md and "| 25.0 | 25.0 |" in md and "| 50.0 | 50.0 |" in md
    specs = [grid.Spec("QACG-BERT", "qacg-bert", "NLI-M")]
    cmp = variant_tables.comparison_table("sentihood", {("sentihood", "QACG-BERT"): base}, specs, trivial)
    assert cmp.label.tolist() == ["QACG-BERT", *trivial] and cmp.source.tolist() == ["ours", "trivial", "trivial"]
    assert cmp.aspect_auc.tolist() == pytest.approx([60.0, 25.0, 50.0])
    assert cmp.aspect_auc_test_best.tolist() == pytest.approx([90.0, 25.0, 50.0])   # no selection for constants
    md = variant_tables.comparison_markdown(cmp, "sentihood", "Other attention")
    assert "| All-None (trivial) | – | – | – | – | 25.0 | 25.0 |" in md and "60.0 [90.0]" in md


def test_trivial_rows_score_the_test_examples_the_runs_are_scored_on(real_data_dir):
    # max_eval_examples: the first whole groups of the test split, as training scores the runs
    from absa_lib.data import datasets as data

    gold = [e.label for e in data.load_examples("sentihood", "test", real_data_dir)]
    first = [gold[i:i + 4] for i in range(0, 40, 4)]                           # 42 -> 10 whole groups
    part = T.trivial_baselines("sentihood", real_data_dir, max_eval_examples=42)["All-None (trivial)"]
    assert part["aspect_strict_acc"] == pytest.approx(sum(g == ["None"] * 4 for g in first) / 10)
    whole = T.trivial_baselines("sentihood", real_data_dir)["All-None (trivial)"]
    assert part["aspect_strict_acc"] != pytest.approx(whole["aspect_strict_acc"])
    runs = [typed_run({"dataset": "sentihood", "model": "cg-bert", "max_eval_examples": 42})] * 2
    assert T.trivial_baselines_of("sentihood", runs, real_data_dir)["All-None (trivial)"] == part


def test_the_trivial_rows_take_the_subset_every_run_shares_else_the_whole_test_set():
    def run(dataset, k):
        return typed_run({"dataset": dataset, "model": "cg-bert", "max_eval_examples": k})

    assert T.shared_eval_subset("sentihood", [run("sentihood", 120), run("semeval", None)]) == 120
    assert T.shared_eval_subset("sentihood", [run("sentihood", 120), run("sentihood", None)]) is None
    assert T.shared_eval_subset("semeval", [run("sentihood", 120)]) is None


def test_seeds_that_find_no_aspect_are_named_under_their_row():
    # a mean over stalled and learning seeds reads as a weaker model unless the table says so
    runs = [typed_run({"dataset": "semeval", "model": "cg-bert", "seed": s}) for s in (42, 43, 44)]
    chosen = [{"aspect_r": 0.5}, {"aspect_r": 0.0}, {"aspect_r": 0.0}]
    assert T.no_aspect_seeds("semeval", runs, chosen) == "43 44"
    chosen = [{"aspect_macro_r": 0.0}, {"aspect_macro_r": 1e-9}, {"aspect_macro_r": 0.2}]
    assert T.no_aspect_seeds("sentihood", runs, chosen) == "42"
    df = pd.DataFrame([{"model": "CG-BERT", "budget": "minilm, 25 epochs", "n_seeds": 3, "no_aspect_seeds": "43 44"},
                       {"model": "QACG-BERT", "budget": "", "n_seeds": 1, "no_aspect_seeds": "42"},
                       {"model": "BERT-pair", "budget": "", "n_seeds": 3, "no_aspect_seeds": ""}])
    lines = [line.strip() for line in T.no_aspect_footnotes(df, "model")]
    assert lines == [
        "_CG-BERT (minilm, 25 epochs): seeds 43 and 44 of 3 find no aspect in the test set at the selected "
        "epoch (aspect recall 0, the All-None answer); the row's mean averages them in with the seeds that "
        "learned._",
        "_QACG-BERT: seed 42 of 1 finds no aspect in the test set at the selected epoch (aspect recall 0, the "
        "All-None answer)._"]


def test_the_committed_table_1_names_cg_berts_stalled_seeds():
    # 25 epochs, dev-selected: seeds 43 and 44 of CG-BERT without auxiliary sentence stay at All-None
    text = (Path(__file__).resolve().parent.parent / "results" / "table1_sentihood.md").read_text()
    dev = text.split("## Selection: ")[1]
    assert "_CG-BERT (minilm, 25 epochs): seeds 43 and 44 of 3 find no aspect" in dev


def test_trivial_rows_of_the_variant_tables_are_the_constant_predictors(real_data_dir):
    """All-None and majority-polarity rows, checked against values computed here from the labels."""
    from absa_lib.data import datasets as data

    gold = [e.label for e in data.load_examples("sentihood", "test", real_data_dir)]
    groups = [gold[i:i + 4] for i in range(0, len(gold), 4)]
    train = Counter(e.label for e in data.load_examples("sentihood", "train", real_data_dir) if e.label != "None")
    majority = train.most_common(1)[0][0]
    present = [g for g in gold if g != "None"]
    trivial = T.trivial_baselines("sentihood", real_data_dir)
    specs = [grid.Spec("QACG-BERT", "qacg-bert", "NLI-M")]
    for df, name_col in ((variant_tables.ablation_table("sentihood", [], trivial), "variant"),
                         (variant_tables.comparison_table("sentihood", {}, specs, trivial), "label")):
        rows = df[df.source == "trivial"].set_index(name_col)
        none, major = rows.loc["All-None (trivial)"], rows.loc[f"Majority polarity: {majority} (trivial)"]
        assert none.aspect_strict_acc == pytest.approx(100 * sum(g == ["None"] * 4 for g in groups) / len(groups))
        assert major.aspect_strict_acc == pytest.approx(100 * sum(g == [majority] * 4 for g in groups) / len(groups))
        assert none.aspect_macro_f1 == 0.0 and none.aspect_auc == pytest.approx(50.0)
        # with P(Positive) = P(Negative) = 0 the sentiment rule says Positive (docs: p_neg = 0.5)
        assert none.sentiment_acc == pytest.approx(100 * present.count("Positive") / len(present))
    # the floor a figure draws: the better trivial row on the selection metric (strict accuracy)
    assert T.trivial_floor("sentihood", trivial) == (
        "All-None (trivial)", pytest.approx(100 * sum(g == ["None"] * 4 for g in groups) / len(groups)))
    semeval = T.trivial_baselines("semeval", real_data_dir)
    name, f1 = T.trivial_floor("semeval", semeval)                    # all-none finds no aspect: F1 0
    assert name.startswith("Majority polarity: ") and f1 == pytest.approx(100 * semeval[name]["aspect_f1"]) and f1 > 0

def test_unknown_protocol_is_a_clear_error():
    from absa_lib.errors import AbsaError

    with pytest.raises(AbsaError, match="protocol='best'"):
        T.build_table("sentihood", [], protocols=("best",))


def test_data_counts_match_the_paper(real_data_dir):
    from absa_lib.data import datasets as data
    from absa_lib.reports import data_overview

    stats = data.stats(real_data_dir)
    check = data_overview.check_against_paper(stats)
    assert check["match"].all() and len(check) == 10
    sizes = data_overview.data_statistics(stats).set_index(["dataset", "split"])
    assert sizes.loc[("sentihood", "test"), "two-target sentences"] == 388
    assert pd.isna(sizes.loc[("semeval", "dev"), "two-target sentences"])
    assert data_overview.label_table(stats, "sentihood").loc["test", "None"] == "6,300 (83.8%)"
    md = data_overview.statistics_markdown(stats)
    assert "| semeval   | dev     |         305 |" in md and "<NA>" not in md


def test_histogram_summary_in_numbers():
    from absa_lib.reports.figure_data import histogram_counts, histogram_summary

    h = histogram_counts(pd.Series([-0.5, 0.3, 0.3, 0.49, 0.9]).to_numpy(), -1.0, 1.0, bins=8)  # bins of 0.25
    row = histogram_summary({"a_hat": h, "missing": None}).iloc[0]
    assert (row["component"], row["entries"]) == ("a_hat", 5)
    assert row["share negative"] == pytest.approx(0.2) and row["share in [0.25, 0.5)"] == pytest.approx(0.6)
    assert row["mean"] == pytest.approx(1.49 / 5) and (row["min"], row["max"]) == (-0.5, 0.9)


def test_a_one_epoch_joint_dwa_row_says_it_is_the_joint_row_again():
    specs = [grid.Spec("QACG-BERT, joint", "qacg-bert", "none", objective="joint"),
             grid.Spec("QACG-BERT, joint + dynamic weights", "qacg-bert", "none", objective="joint-dwa")]
    def runs(objective, epochs):
        return [fake_run("sentihood", "qacg-bert", "none", s, 0.5, 0.6, objective=objective, epochs=epochs)
                for s in (1, 2)]
    table = {("sentihood", spec.label): runs(spec.objective, 1) + runs(spec.objective, 25) for spec in specs}
    md = variant_tables.comparison_markdown(variant_tables.comparison_table("sentihood", table, specs), "sentihood", "O")
    assert md.count("the dynamic weights first change after epoch 1") == 1
    assert ("\n_QACG-BERT, joint + dynamic weights (minilm, 1 epoch): the dynamic weights first change after "
            "epoch 1, so a one-epoch run trains as the joint objective's does") in md
