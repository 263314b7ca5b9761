"""scripts/paired_runs.py: one field's effect on the test metrics beside a change of seed's, on the
committed reference's records (real runs)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "results" / "reference"
spec = importlib.util.spec_from_file_location("paired_runs", ROOT / "scripts" / "paired_runs.py")
paired_runs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(paired_runs)


def test_it_pairs_a_run_with_the_one_that_differs_in_the_field_and_scales_by_the_next_seed(capsys):
    # the random-batch check run; its pair (length-grouped, seed 42, a record that predates the field
    # `objective`) and seed 43 of the pair are in the reference's runs
    assert paired_runs.main(["group_by_length", str(REFERENCE / "checks" / "group_by_length"),
                             str(REFERENCE / "runs")]) == 0
    out = capsys.readouterr().out
    assert "sentihood qacg-bert (paper) seed 42: group_by_length True -> False; scale: seed 43" in out
    assert re.search(r"Strict Acc +60\.0 -> +57\.7 +\( -2\.3\) +seed: +-7\.5\n", out)      # docs/results.md's table
    assert re.search(r"Sentiment AUC +1\.8 \(1\.8\) +22\.7 \(22\.7\)\n", out)


def test_a_run_without_a_pair_is_listed_and_an_empty_folder_refused(tmp_path, capsys):
    assert paired_runs.main(["group_by_length", str(REFERENCE / "checks" / "group_by_length"),
                             str(REFERENCE / "checks" / "bf16_vs_fp32")]) == 0
    assert "seed 42: no pair under" in capsys.readouterr().out
    assert paired_runs.main(["precision", str(tmp_path), str(REFERENCE / "runs")]) == 2
    assert "no finished runs" in capsys.readouterr().err
    assert paired_runs.main(["precision", str(REFERENCE / "runs"), str(tmp_path / "absent")]) == 2
    assert "absent: no finished runs" in capsys.readouterr().err
    assert paired_runs.main(["precison", str(REFERENCE / "checks" / "group_by_length"), str(REFERENCE / "runs")]) == 2
    assert "field 'precison': expected a training configuration field" in capsys.readouterr().err
