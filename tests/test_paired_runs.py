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


def lines_after(out: str, header: str) -> list[str]:
    """The printed lines from the first ``header`` on (the rest of the header's own line first)."""
    assert header in out, f"not printed: {header!r}"
    return out.split(header, 1)[1].split("\n")


def test_it_pairs_a_run_with_the_one_that_differs_in_the_field_and_scales_by_the_next_seed(capsys):
    # the random-batch check run; its pair (length-grouped, seed 42, a record that predates the field
    # `objective`) and seed 43 of the pair are in the reference's runs
    assert paired_runs.main(["group_by_length", str(REFERENCE / "checks" / "group_by_length"),
                             str(REFERENCE / "runs")]) == 0
    out = capsys.readouterr().out
    assert "sentihood qacg-bert (no aux) (paper) seed 42: group_by_length True -> False; scale: seed 43" in out
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


def test_machine_pairs_a_retrained_record_with_its_committed_twin_and_never_with_itself(capsys):
    # checks/fp32_other_cpu retrains committed cells (same run ids) on another CPU; docs/results.md
    # quotes these differences
    other_cpu = str(REFERENCE / "checks" / "fp32_other_cpu")
    assert paired_runs.main(["machine", other_cpu, str(REFERENCE / "runs")]) == 0
    out = capsys.readouterr().out
    bert_pair = lines_after(out, "semeval bert-pair NLI-M (paper) seed 42: machine ")
    assert bert_pair[0].endswith("; scale: seed 43")
    assert re.fullmatch(r" +P +92\.3 -> +92\.3 +\( \+0\.0\) +seed: +-2\.3", bert_pair[1])
    sentence_only = lines_after(out, "semeval qacg-bert (no aux) (paper) seed 42: machine ")
    assert re.fullmatch(r" +F1 +58\.3 -> +58\.9 +\( \+0\.6\) +seed: +\+7\.4", sentence_only[3])
    # the training losses: every pair differs in the last bits; with the quasi-attention, far more
    assert re.fullmatch(r" +training loss +0\.7372418 -> 0\.7460008 +\(relative 1\.2e-02\)", sentence_only[7])
    quasi_off = lines_after(out, "sentihood qacg-bert NLI-M quasi=False (paper) seed 42: machine ")
    assert re.fullmatch(r" +training loss +0\.3740332 -> 0\.3740332 +\(relative 5\.5e-09\)", quasi_off[6])
    assert paired_runs.main(["machine", other_cpu, other_cpu]) == 0      # a record is not its own twin
    assert "no pair under" in capsys.readouterr().out


def test_the_seed_scale_can_come_from_another_folder_than_the_pairs(capsys):
    # the pair under BASE (this CPU's fp32 retraining), the seed scale from SCALE's seeds 42 and 43
    assert paired_runs.main(["machine", str(REFERENCE / "checks" / "fp32_other_cpu_isa_avx2"),
                             str(REFERENCE / "checks" / "fp32_other_cpu"), str(REFERENCE / "runs")]) == 0
    out = capsys.readouterr().out
    assert re.search(r"F1 +58\.9 -> +56\.1 +\( -2\.8\) +seed: +\+7\.4\n", out)
    assert paired_runs.main(["machine", str(REFERENCE / "checks" / "fp32_other_cpu_isa_avx2"),
                             str(REFERENCE / "checks" / "fp32_other_cpu")]) == 0
    no_scale = f"no scale: {REFERENCE / 'checks' / 'fp32_other_cpu'} holds this configuration with no seed"
    assert no_scale in capsys.readouterr().out


def test_several_fields_pair_runs_that_differ_in_them_together(capsys):
    # the 25-epoch CPU checks of mixed-batch BERT-single (uniform sampler, not compiled) against the
    # per-context GPU row (compiled); docs/results.md quotes these differences
    assert paired_runs.main(["sampler,compile", str(REFERENCE / "checks" / "bert_single_mixed_25ep_cpu"),
                             str(REFERENCE / "runs")]) == 0
    out = capsys.readouterr().out
    seed_43 = lines_after(out, "sentihood bert-single (paper) seed 43: ")
    assert seed_43[0] == "sampler,compile per-context/reduce-overhead -> uniform/none; scale: seed 44"
    assert re.fullmatch(r" +Strict Acc +72\.9 -> +73\.5 +\( \+0\.6\) +seed: +\+0\.2", seed_43[1])
    assert "seed 42: sampler,compile per-context/reduce-overhead -> uniform/none" in out
    seed_44 = lines_after(out, "sentihood bert-single (paper) seed 44: ")   # the highest: no scale
    no_scale = f"no scale: {REFERENCE / 'runs'} holds this configuration with no seed above 44"
    assert seed_44[0].endswith(no_scale)
    assert re.fullmatch(r" +Strict Acc +73\.1 -> +74\.3 +\( \+1\.2\) +seed: +–", seed_44[1])
    assert "median (largest) over 3 pairs (the seed: over the 2 with a scale)" in out
    # one field alone finds no pair: every such record differs in the other too
    assert paired_runs.main(["sampler", str(REFERENCE / "checks" / "bert_single_mixed_25ep_cpu"),
                             str(REFERENCE / "runs")]) == 0
    assert "seed 43: no pair under" in capsys.readouterr().out
    assert paired_runs.main(["sampler,machine", str(REFERENCE / "checks" / "bert_single_mixed_25ep_cpu"),
                             str(REFERENCE / "runs")]) == 2
    assert "field 'machine': expected a training configuration field" in capsys.readouterr().err


def test_a_folder_paired_with_itself_counts_each_pair_once_from_the_side_with_a_scale(capsys):
    # checks/qacg_precision_25ep_cpu holds bf16 and fp32 of seeds 42 and 43: each pair is found from
    # both sides; seed 42's has a scale on both (seed 43), the first side is used; seed 43's has none
    folder = str(REFERENCE / "checks" / "qacg_precision_25ep_cpu")
    assert paired_runs.main(["precision", folder, folder]) == 0
    out = capsys.readouterr().out
    assert out.count("semeval qacg-bert (no aux) (paper) seed 42: precision") == 1
    assert out.count("semeval qacg-bert (no aux) (paper) seed 43: precision") == 1
    seed_42 = lines_after(out, "semeval qacg-bert (no aux) (paper) seed 42: precision ")
    assert seed_42[0] == "fp32 -> bf16; scale: seed 43"
    assert re.fullmatch(r" +P +90\.5 -> +88\.9 +\( -1\.6\) +seed: +-1\.8", seed_42[1])
    seed_43 = lines_after(out, "semeval qacg-bert (no aux) (paper) seed 43: precision ")
    assert seed_43[0].startswith("bf16 -> fp32; no scale")
    assert re.fullmatch(r" +F1 +85\.7 -> +85\.9 +\( \+0\.3\) +seed: +–", seed_43[3])
    assert re.search(r"semeval: \|difference\| in points, median \(largest\) over 2 pairs "
                     r"\(the seed: over the 1 with a scale\)\n", out)
    pairs = int(re.search(r"over (\d+) pairs", out).group(1))
    assert pairs == out.count(": precision ")         # every pair printed is counted, and only once


def test_base_value_picks_the_side_each_pair_is_shown_from(capsys):
    # the same folder as above: with --base-value bf16 both pairs read bf16 -> fp32, and seed 42's
    # scale is bf16's seed step (fp32's, -1.8 in P, without it)
    folder = str(REFERENCE / "checks" / "qacg_precision_25ep_cpu")
    assert paired_runs.main(["precision", folder, folder, "--base-value", "bf16"]) == 0
    out = capsys.readouterr().out
    seed_42 = lines_after(out, "semeval qacg-bert (no aux) (paper) seed 42: precision ")
    assert seed_42[0] == "bf16 -> fp32; scale: seed 43"
    assert re.fullmatch(r" +P +88\.9 -> +90\.5 +\( \+1\.6\) +seed: +-0\.4", seed_42[1])
    assert lines_after(out, "semeval qacg-bert (no aux) (paper) seed 43: precision ")[0].startswith("bf16 -> fp32;")
    assert out.count(": precision ") == 2
    assert paired_runs.main(["precision", folder, folder, "--base-value", "fp16"]) == 2
    assert "--base-value fp16: no run under" in capsys.readouterr().err


def test_epochs_from_compares_the_pair_and_the_seeds_at_the_same_epoch(capsys):
    # docs/results.md's epoch-by-epoch table for the 25-epoch precision check: the same epoch, 10 to 25
    folder = str(REFERENCE / "checks" / "qacg_precision_25ep_cpu")
    assert paired_runs.main(["precision", folder, folder, "--epochs-from", "10"]) == 0
    out = capsys.readouterr().out
    seed_42 = out.split("seed 42: precision fp32 -> bf16")[1].split("seed 43: precision")[0]
    assert "same epoch, 16 epochs from 10: |difference|, median (largest)" in seed_42
    assert re.search(r"\n +test F1 +0\.1 \(0\.4\) +seed: +0\.9 \(2\.5\)\n", seed_42)
    assert re.search(r"\n +dev P +0\.4 \(1\.6\) +seed: +0\.7 \(4\.3\)\n", seed_42)
    seed_43 = out.split("seed 43: precision bf16 -> fp32")[1]     # no seed scale: the pair alone
    assert re.search(r"\n +test R +0\.7 \(2\.7\) +seed: +–\n", seed_43)
    assert paired_runs.main(["precision", folder, folder]) == 0           # without it: the selected epoch only
    assert "same epoch" not in capsys.readouterr().out
    # the same CPU runs against their GPU twins (compiled, H200): the device against a seed, as quoted
    assert paired_runs.main(["compile", folder, str(REFERENCE / "runs"), "--epochs-from", "10"]) == 0
    seed_43 = capsys.readouterr().out.split("seed 43: compile reduce-overhead -> none; scale: seed 44")[1]
    assert re.search(r"\n +test 4-class +1\.2 \(2\.4\) +seed: +2\.6 \(3\.4\)\n", seed_43)


def test_a_run_with_several_pairs_says_which_it_used(capsys):
    # results/reference holds the committed record (runs/) and a second retraining (…_isa_avx2/) of
    # each of fp32_other_cpu's cells: two candidates, the first (sorted path) used and named
    assert paired_runs.main(["machine", str(REFERENCE / "checks" / "fp32_other_cpu"), str(REFERENCE)]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "semeval qacg-bert (no aux) (paper) seed 42: 2 pairs under" in x)
    assert "fp32_other_cpu_isa_avx2" in line and "runs" in line and line.endswith("; using the first")


def test_the_lstm_score_pairs_quoted_in_the_docs(capsys):
    # docs/results.md, "The other attention systems": joint minus the paper's score, seed by seed, on
    # the 25-epoch CPU checks (AT-LSTM on both datasets, ATAE-LSTM on both)
    folder = str(REFERENCE / "checks" / "lstm_25ep_cpu")
    assert paired_runs.main(["model_overrides", folder, folder]) == 0
    out = capsys.readouterr().out
    at_42 = lines_after(out, "semeval at-lstm (no aux) (paper) seed 42: model_overrides ")
    assert at_42[0] == "{'alstm_score': 'joint'} -> {}; scale: seed 43"
    assert re.fullmatch(r" +F1 +83\.4 -> +10\.8 +\(-72\.6\) +seed: +\+0\.1", at_42[3])
    atae_43 = lines_after(out, "semeval atae-lstm (no aux) (paper) seed 43: model_overrides ")
    assert re.fullmatch(r" +P +85\.8 -> +91\.4 +\( \+5\.7\) +seed: +-1\.7", atae_43[1])
    assert re.fullmatch(r" +R +83\.4 -> +81\.2 +\( -2\.2\) +seed: +\+0\.1", atae_43[2])
    for dataset in ("semeval", "sentihood"):
        summary = f"{dataset}: |difference| in points, median (largest) over 6 pairs"
        assert f"{summary} (the seed: over the 4 with a scale)" in out
    sentihood_at = lines_after(out, "sentihood at-lstm (no aux) (paper) seed 43: model_overrides ")
    assert re.fullmatch(r" +Strict Acc +67\.2 -> +47\.9 +\(-19\.3\) +seed: +\+0\.3", sentihood_at[1])


def test_the_joint_objective_pair_quoted_in_the_docs(capsys):
    # docs/results.md, "The other attention systems": QACG-BERT's joint objective against its single
    # head, seed 42, 25 epochs on one CPU; MAN-BERT in the same folder has no single-head twin
    folder = str(REFERENCE / "checks" / "other_bert_25ep_cpu")
    assert paired_runs.main(["objective", folder, str(REFERENCE / "checks" / "qacg_precision_25ep_cpu"),
                             "--epochs-from", "10"]) == 0
    out = capsys.readouterr().out
    assert "semeval man-bert (no aux) (paper) seed 42: no pair under" in out
    joint = lines_after(out, "semeval qacg-bert (no aux) joint (paper) seed 42: objective ")
    assert joint[0] == "single -> joint; scale: seed 43"
    assert re.fullmatch(r" +F1 +87\.0 -> +86\.5 +\( -0\.5\) +seed: +-1\.3", joint[3])
    assert re.fullmatch(r" +4-class +79\.3 -> +80\.7 +\( \+1\.4\) +seed: +-0\.6", joint[6])
    assert re.fullmatch(r" +test 3-class +2\.0 \(2\.5\) +seed: +1\.5 \(2\.6\)", joint[13])
    joint43 = lines_after(out, "semeval qacg-bert (no aux) joint (paper) seed 43: objective ")
    assert joint43[0].startswith("single -> joint; no scale:")        # the single head has no seed 44 here
    assert re.fullmatch(r" +F1 +85\.7 -> +85\.4 +\( -0\.3\) +seed: +–", joint43[3])
    assert re.fullmatch(r" +Binary +88\.5 -> +91\.1 +\( \+2\.6\) +seed: +–", joint43[4])
    assert re.fullmatch(r" +4-class +78\.7 -> +80\.4 +\( \+1\.7\) +seed: +–", joint43[6])
    dwa = lines_after(out, "semeval qacg-bert (no aux) joint-dwa (paper) seed 42: objective ")
    assert dwa[0] == "single -> joint-dwa; scale: seed 43"
    assert re.fullmatch(r" +F1 +87\.0 -> +86\.1 +\( -0\.9\) +seed: +-1\.3", dwa[3])
    assert re.fullmatch(r" +4-class +79\.3 -> +81\.1 +\( \+1\.8\) +seed: +-0\.6", dwa[6])


def test_the_dynamic_weights_pair_quoted_in_the_docs(capsys):
    # docs/results.md: joint-dwa against joint, both in the same folder, seed 42; the joint
    # objective's seed 43 there is the pair's scale, and joint seed 43 has no joint-dwa twin
    folder = str(REFERENCE / "checks" / "other_bert_25ep_cpu")
    assert paired_runs.main(["objective", folder, folder, "--epochs-from", "10", "--base-value", "joint"]) == 0
    out = capsys.readouterr().out
    assert "semeval qacg-bert (no aux) joint (paper) seed 43: no pair under" in out
    dwa = lines_after(out, "semeval qacg-bert (no aux) joint-dwa (paper) seed 42: objective ")
    assert dwa[0] == "joint -> joint-dwa; scale: seed 43"
    assert re.fullmatch(r" +F1 +86\.5 -> +86\.1 +\( -0\.4\) +seed: +-1\.1", dwa[3])
    assert re.fullmatch(r" +Binary +91\.5 -> +91\.8 +\( \+0\.3\) +seed: +-0\.3", dwa[4])
    assert re.fullmatch(r" +3-class +84\.8 -> +84\.9 +\( \+0\.1\) +seed: +-0\.7", dwa[5])
    assert re.fullmatch(r" +4-class +80\.7 -> +81\.1 +\( \+0\.4\) +seed: +-0\.3", dwa[6])
    assert re.fullmatch(r" +test F1 +0\.6 \(10\.2\) +seed: +1\.0 \(5\.4\)", dwa[11])
    assert re.fullmatch(r" +test 3-class +0\.1 \(0\.7\) +seed: +0\.8 \(1\.6\)", dwa[13])


def test_the_dynamic_weights_second_seed_quoted_in_the_docs(capsys):
    # docs/results.md: joint-dwa seed 43 (its own folder, the float16 backbone copy) against joint
    # seed 43 and against the single head's seed 43; neither base holds a seed 44, so no scale
    def pairs_with(base: str) -> list[str]:
        assert paired_runs.main(["objective", str(REFERENCE / "checks" / "joint_dwa_43_cpu"),
                                 str(REFERENCE / "checks" / base), "--epochs-from", "10"]) == 0
        return lines_after(capsys.readouterr().out, "semeval qacg-bert (no aux) joint-dwa (paper) seed 43: objective ")

    dwa = pairs_with("other_bert_25ep_cpu")
    assert dwa[0].startswith("joint -> joint-dwa; no scale:")
    assert re.fullmatch(r" +F1 +85\.4 -> +84\.8 +\( -0\.5\) +seed: +–", dwa[3])
    assert re.fullmatch(r" +Binary +91\.1 -> +92\.0 +\( \+0\.9\) +seed: +–", dwa[4])
    assert re.fullmatch(r" +3-class +84\.1 -> +86\.5 +\( \+2\.5\) +seed: +–", dwa[5])
    assert re.fullmatch(r" +4-class +80\.4 -> +82\.7 +\( \+2\.3\) +seed: +–", dwa[6])
    single = pairs_with("qacg_precision_25ep_cpu")
    assert single[0].startswith("single -> joint-dwa; no scale:")
    assert re.fullmatch(r" +F1 +85\.7 -> +84\.8 +\( -0\.8\) +seed: +–", single[3])
    assert re.fullmatch(r" +4-class +78\.7 -> +82\.7 +\( \+4\.0\) +seed: +–", single[6])
