"""What the dev-selected epoch gives away against a run's plateau (absa_lib.reports.plateau and
scripts/selection_spread.py), on the committed reference's records (real runs)."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
import statistics
from pathlib import Path
from types import SimpleNamespace

import pytest

from absa_lib.errors import AbsaError
from absa_lib.reports import plateau, tables
from absa_lib.training.records import find_runs

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "results" / "reference" / "runs"
spec = importlib.util.spec_from_file_location("selection_spread", ROOT / "scripts" / "selection_spread.py")
selection_spread = importlib.util.module_from_spec(spec)
spec.loader.exec_module(selection_spread)

BERT_SINGLE = RUNS / "semeval" / "bert-single" / "d271e9d10605"      # 25 epochs, GPU, seed 42
BERT_SINGLE_43 = RUNS / "semeval" / "bert-single" / "30c0ab8b52f0"   # 25 epochs, GPU, seed 43
BERT_SINGLE_44 = RUNS / "semeval" / "bert-single" / "a184376136fb"   # 25 epochs, GPU, seed 44


def four_class_curve(run: Path = BERT_SINGLE) -> tuple[list[float], int]:
    metrics = json.loads((run / "metrics.json").read_text())
    return [100 * e["test"]["sentiment_acc_4class"] for e in metrics["epochs"]], metrics["selection"]["dev_best"]["epoch"]


def test_the_script_shows_each_runs_dev_best_epoch_plateau_and_test_best(capsys):
    four_class, chosen = four_class_curve()
    assert selection_spread.main([str(RUNS), "--dataset", "semeval", "--epochs", "25", "--last", "5"]) == 0
    out = capsys.readouterr().out
    block = out.split("semeval bert-single per-context batches (paper) seed 42: ")[1].split("\n\n")[0]
    assert block.startswith(f"dev-best epoch {chosen} of 25\n")
    plateau_value, best = statistics.mean(four_class[-5:]), max(four_class)
    line = re.search(r"\n +4-class +(\S+) +(\S+) +(\S+) +(\S+) \((\d+)\)", block).groups()
    assert line == (f"{four_class[chosen - 1]:.1f}", f"{plateau_value:.1f}", f"{four_class[chosen - 1] - plateau_value:+.1f}",
                    f"{best:.1f}", str(four_class.index(best) + 1))
    assert line[0] == "76.4"                                # Table 2's BERT-single 4-class cell, dev-best
    assert "| BERT-pair (Sun et al. 2019) | minilm, 25 epochs | 42 43 44 |" in out     # three seeds, one row
    assert "sentihood" not in out.lower().replace("table 1: sentihood", "")
    # the findings' sentence covers the three seeds: their dev-chosen epochs and the mean of their plateaus
    (four_43, chosen_43), (four_44, chosen_44) = four_class_curve(BERT_SINGLE_43), four_class_curve(BERT_SINGLE_44)
    every = statistics.mean([plateau_value, statistics.mean(four_43[-5:]), statistics.mean(four_44[-5:])])
    readme = " ".join((ROOT / "docs" / "findings.md").read_text().split())
    assert (f"picks epoch {chosen}, {chosen_43} or {chosen_44} while polarity still rises; its last five epochs "
            f"average {every:.1f}" in readme)


def test_the_script_refuses_a_folder_without_such_runs(tmp_path, capsys):
    assert selection_spread.main([str(tmp_path), "--dataset", "sentihood"]) == 2
    assert f"{tmp_path}: no finished sentihood run" in capsys.readouterr().err
    assert selection_spread.main([str(RUNS), "--dataset", "semeval", "--epochs", "7"]) == 2
    assert "no finished semeval run of 7 epochs" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        selection_spread.main([str(RUNS), "--last", "0"])
    assert "argument --last: expected a whole number of at least 1, got '0'" in capsys.readouterr().err


def test_cells_are_the_tables_dev_best_cells_beside_the_plateau_of_the_same_seeds():
    runs = find_runs(RUNS, dataset="semeval")
    df = plateau.spread_table(runs, last=5)
    assert set(df["budget"]) == {"minilm, 25 epochs"}        # the 1-epoch runs have no plateau
    pair = df[df["system"] == "BERT-pair (Sun et al. 2019)"].iloc[0]
    assert (pair["n_seeds"], pair["seeds"]) == (3, "42 43 44")
    table = tables.build_table("semeval", runs)
    row = table[(table["model"] == "BERT-pair (Sun et al. 2019)") & (table["selection"] == "dev_best")
                & (table["epochs"] == 25)].iloc[0]
    for metric in ("aspect_f1", "sentiment_acc_4class"):
        assert pair[f"{metric}_dev_best"] == pytest.approx(row[metric])
    last = [e["test"] for r in runs if r.config.model == "bert-pair" and r.config.epochs == 25
            for e in r.metrics.epochs[-5:]]
    assert len(last) == 15
    p, r = (statistics.mean(e[k] for e in last) for k in ("aspect_p", "aspect_r"))
    assert pair["aspect_f1_plateau"] == pytest.approx(100 * 2 * p * r / (p + r))   # F1 of the mean P and R, as Table 2
    assert pair["aspect_f1_gap"] == pytest.approx(pair["aspect_f1_dev_best"] - pair["aspect_f1_plateau"])


def test_no_run_long_enough_is_said_and_a_plateau_of_no_epoch_refused():
    df = plateau.spread_table(find_runs(RUNS, epochs=1))
    assert df.empty and list(df.columns[:4]) == ["dataset", "system", "budget", "n_seeds"]
    assert "_No finished run has more than 5 epochs yet._" in plateau.spread_markdown(df)
    with pytest.raises(AbsaError, match="last=0"):
        plateau.spread_table([], last=0)
    [run] = find_runs(BERT_SINGLE)
    run = dataclasses.replace(run, config=SimpleNamespace(dataset="phones"))   # your own data: no Table 1/2 metrics
    with pytest.raises(AbsaError, match="dataset 'phones' has no table metrics; expected one of sentihood, semeval"):
        plateau.spread_table([run])
