"""scripts/selection_spread.py: what the dev-selected epoch gives away against a run's plateau, on the
committed reference's records (real runs)."""

from __future__ import annotations

import importlib.util
import json
import re
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "results" / "reference" / "runs"
spec = importlib.util.spec_from_file_location("selection_spread", ROOT / "scripts" / "selection_spread.py")
selection_spread = importlib.util.module_from_spec(spec)
spec.loader.exec_module(selection_spread)

BERT_SINGLE = RUNS / "semeval" / "bert-single" / "d271e9d10605"      # 25 epochs, GPU, seed 42


def test_the_dev_best_epoch_plateau_and_test_best_come_from_the_runs_own_epochs(capsys):
    metrics = json.loads((BERT_SINGLE / "metrics.json").read_text())
    four_class = [100 * e["test"]["sentiment_acc_4class"] for e in metrics["epochs"]]
    chosen = metrics["selection"]["dev_best"]["epoch"]
    assert selection_spread.main([str(RUNS), "--dataset", "semeval", "--epochs", "25", "--last", "5"]) == 0
    out = capsys.readouterr().out
    block = out.split("semeval bert-single per-context batches (paper) seed 42: ")[1].split("\n\n")[0]
    assert block.startswith(f"dev-best epoch {chosen} of 25\n")
    plateau, best = statistics.mean(four_class[-5:]), max(four_class)
    line = re.search(r"\n +4-class +(\S+) +(\S+) +(\S+) +(\S+) \((\d+)\)", block).groups()
    assert line == (f"{four_class[chosen - 1]:.1f}", f"{plateau:.1f}", f"{four_class[chosen - 1] - plateau:+.1f}",
                    f"{best:.1f}", str(four_class.index(best) + 1))
    assert line[0] == "76.4"                                # Table 2's BERT-single 4-class cell, dev-best
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert f"picks epoch {chosen} while polarity still rises; its last five epochs average {plateau:.1f}" in readme
    summary = out.split("mean over seeds (n)\n")[1]
    assert re.search(r"semeval bert-pair NLI-M \(paper\) \(3\) ", summary)     # three seeds, one row
    assert "seed 42" not in summary and "sentihood" not in out


def test_no_run_of_that_budget_is_an_error_naming_the_folder(tmp_path, capsys):
    assert selection_spread.main([str(tmp_path), "--dataset", "sentihood"]) == 2
    assert f"{tmp_path}: no finished sentihood run" in capsys.readouterr().err
    assert selection_spread.main([str(RUNS), "--dataset", "semeval", "--epochs", "7"]) == 2
    assert "no finished semeval run of 7 epochs" in capsys.readouterr().err
