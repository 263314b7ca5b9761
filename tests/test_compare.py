"""Is a difference real: the verdict rule on scores whose answer is known, its error rates and its
minimum detectable difference by simulation, and `absa compare` and the claims table on the committed
runs (paired by seed, refused when the two sides are not scored alike)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import typed_run

from absa_lib.cli import main
from absa_lib.errors import AbsaError
from absa_lib.evaluation import significance as S
from absa_lib.evaluation.significance import TAU, Verdict, eps_min, paired_differences
from absa_lib.reports.compare import compare
from absa_lib.training.records import find_runs

RUNS = Path(__file__).resolve().parent.parent / "results" / "reference" / "runs"


@pytest.mark.parametrize(("shift", "expected"), [(3.0, "A better"), (0.0, "undecided at 5 seeds"),
                                                 (-3.0, "B better")])
def test_the_rule_on_scores_whose_answer_is_known(shift, expected):
    rng = np.random.default_rng(0)
    b = 75 + rng.normal(0, 0.5, size=5)
    a = b + shift + rng.normal(0, 0.5, size=5)       # a clear gain, none, a clear loss, over five seeds
    verdict = Verdict.of(a, b)
    assert verdict.verdict == expected
    assert (verdict.eps_a_over_b < TAU) == (expected == "A better")
    assert (verdict.eps_b_over_a < TAU) == (expected == "B better")
    assert verdict.seeds.low < verdict.seeds.mean < verdict.seeds.high
    assert (verdict.seeds.low > 0 or verdict.seeds.high < 0) == (expected != "undecided at 5 seeds")


def test_three_seeds_each_above_the_other_side_are_not_enough_alone():
    """ASO's ε_min is 0 whenever every score of A is above every score of B, whatever the gap; the t-test
    decides. The committed SemEval QACG-BERT (auxiliary sentences) and BERT-pair seeds at 25 epochs."""
    a, b = [88.00, 88.46, 88.27], [87.62, 87.28, 87.90]
    verdict = Verdict.of(a, b)
    assert verdict.eps_a_over_b == 0 and verdict.seeds.p > 0.05 and verdict.verdict == "undecided at 3 seeds"


@pytest.mark.parametrize("n", [3, 5])
def test_with_no_true_difference_the_rule_names_a_winner_in_at_most_5_percent(n):
    rates = S.simulate(n, 0.0, draws=4000, seed=11)
    assert sum(rates.values()) <= 0.05, rates


def test_the_old_rule_aso_alone_would_fail_that_test():
    """The same draws judged by ε_min < 0.2 alone: about one row in six names a winner (the test above
    can fail)."""
    rng = np.random.default_rng(11)
    a, b = rng.normal(0, 1, (2000, 3)), rng.normal(0, 1, (2000, 3))
    rate = np.mean((S.eps_min_rows(a, b) < TAU) | (S.eps_min_rows(b, a) < TAU))
    assert 0.12 < rate < 0.22


def test_a_gain_of_three_seed_sd_at_five_seeds_is_found():
    rates = S.simulate(5, 3.0, draws=2000, seed=12)
    assert rates["A better"] >= 0.8 and rates["B better"] == 0


@pytest.mark.parametrize(("n", "m"), [(3, 1), (5, 1), (3, 15)])
def test_the_known_spread_mdd_is_what_a_brute_force_simulation_finds(n, m):
    """The MDD for a known spread (the t-test's power, ASO and the bootstrap only veto) against the whole
    rule simulated at that spread: found less than 80% of the time at 0.9 MDD, more at 1.1 MDD."""
    mdd = S.min_detectable_known(np.sqrt(2), n, S.ALPHA / m)      # two sides of sd 1: differences of sd √2
    below = S.simulate(n, 0.9 * mdd, draws=3000, seed=13, m=m)["A better"]
    above = S.simulate(n, 1.1 * mdd, draws=3000, seed=13, m=m)["A better"]
    assert below < S.POWER < above, (mdd, below, above)


@pytest.mark.parametrize(("n", "m"), [(3, 15), (3, 1)])
def test_the_printed_mdd_holds_its_power_when_the_spread_is_estimated_from_the_seeds(n, m):
    """The MDD printed beside a row comes from that row's estimated spread. Simulated as the tables use
    it (each draw estimates the spread from n seeds, sets the true gain to the MDD it gives, and runs
    the whole rule on n fresh seeds): the printed MDD is found 80% of the time within simulation
    error (3,000 draws: se 0.7 points); the MDD that takes the spread as known, about 62% (issue 86's
    audit), so the test can fail."""
    new = S.simulate_printed_mdd(n, m, draws=3000, seed=21)
    old = S.simulate_printed_mdd(n, m, draws=3000, seed=21, mdd=S.min_detectable_known)
    assert new >= S.POWER - 0.02, new
    assert new <= S.POWER + 0.03, new                 # expected power 80%, not a much larger MDD than needed
    assert 0.57 < old < 0.67, old
    assert S.expected_power(S.min_detectable(1.0, n, S.ALPHA / m), 1.0, n, S.ALPHA / m) == pytest.approx(S.POWER)
    assert S.min_detectable(2.0, n, S.ALPHA / m) == pytest.approx(2 * S.min_detectable(1.0, n, S.ALPHA / m))


def test_seeds_needed_is_the_first_number_of_seeds_whose_expected_power_reaches_80_percent():
    for gain, sd in ((1.0, 1.0), (0.5, 0.3), (2.6, 1.6)):
        brute = next((n for n in range(2, 101) if S.expected_power(gain, sd, n, S.ALPHA / 15, 2) >= S.POWER), None)
        assert S.seeds_needed(gain, sd, S.ALPHA / 15, spread_df=2) == brute
    assert S.seeds_needed(0.05, 0.63, S.ALPHA / 15, spread_df=2) is None          # over 100
    assert S.seeds_needed(1.0, 1.0) == next(n for n in range(2, 101) if S.min_detectable_known(1.0, n) <= 1.0)


def test_holm_and_the_family():
    assert S.holm([0.01, 0.04, 0.03, 0.5]) == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert S.holm([0.3, 0.001]) == pytest.approx([0.3, 0.002])
    rng = np.random.default_rng(0)
    b = 75 + rng.normal(0, 0.5, size=5)
    alone = Verdict.of(b + 0.6 + rng.normal(0, 0.2, 5), b)
    assert alone.verdict == "A better" and 0.001 < alone.seeds.p < 0.05
    others = [Verdict.of(b + rng.normal(0, 0.5, 5), b) for _ in range(30)]
    crowd = S.family([alone, *others])
    assert crowd[0].p_adjusted == pytest.approx(S.holm([v.seeds.p for v in [alone, *others]])[0])
    assert crowd[0].p_adjusted > 0.05
    assert crowd[0].verdict == "undecided at 5 seeds" and crowd[0].min_detectable > alone.min_detectable
    assert S.seeds_needed(float("nan"), 1.0) is None
    # no spread (identical differences): the rule tests nothing, so no gain is detectable and no n suffices
    assert math.isnan(S.min_detectable(0.0, 3)) and math.isnan(S.min_detectable_known(0.0, 3))
    assert S.seeds_needed(1.0, 0.0) is None


def test_eps_min_is_seeded_and_refuses_what_it_cannot_test():
    a, b = [80.1, 79.5, 80.4], [75.2, 75.0, 75.9]
    assert eps_min(a, b) == eps_min(a, b) < TAU < eps_min(b, a)
    with pytest.raises(AbsaError, match="at least two scores a side"):
        eps_min([80.0], b)
    with pytest.raises(AbsaError, match="finite scores"):
        eps_min([80.0, float("nan")], b)
    with pytest.raises(AbsaError, match="seeds 44 are on one side only"):
        paired_differences({42: 1.0, 43: 2.0, 44: 3.0}, {42: 1.0, 43: 1.0})


@pytest.fixture(scope="module")
def semeval():
    runs = find_runs(RUNS, dataset="semeval", epochs=25)
    return {"qacg": [r for r in runs if r.config.model == "qacg-bert" and r.config.aux == "none"
                     and not r.config.model_overrides and r.config.objective == "single"
                     and r.config.preset == "paper"],
            "pair": [r for r in runs if r.config.model == "bert-pair" and r.config.sampler == "uniform"]}


def test_qacg_without_aux_against_bert_pair_on_semeval_at_25_epochs(semeval):
    """QACG-BERT without auxiliary sentence, the paper's best SemEval row, is the weakest there, aspect F1
    86.43 against 87.61 (each seed below each BERT-pair seed): B better in a family of two metrics, though
    undecided among the claims table's fifteen."""
    table = compare(semeval["qacg"], semeval["pair"], metrics=("aspect_f1", "sentiment_acc_4class")).set_index("metric")
    f1 = table.loc["aspect_f1"]
    assert f1["n_seeds"] == 3 and len(f1["differences"].split()) == 3
    assert all(float(d) < 0 for d in f1["differences"].split())
    assert f1["verdict"] == "B better" and f1["eps_b_over_a"] < TAU
    assert f1["p_adjusted"] == pytest.approx(min(1, 2 * f1["p"]))      # Holm over the two metrics, the smaller p
    assert f1["p"] < f1["p_adjusted"] < 0.05
    assert f1["seed_low"] < f1["mean_difference"] < f1["seed_high"] < 0 and f1["min_detectable"] > 0
    assert set(table["verdict"]) <= {"A better", "B better", "undecided at 3 seeds"}
    with pytest.raises(AbsaError, match="metric 'aspect_strict_acc' is not one of semeval's"):
        compare(semeval["qacg"], semeval["pair"], metrics=("aspect_strict_acc",))


def test_sides_not_scored_alike_are_refused(semeval):
    one_epoch = find_runs(RUNS, dataset="semeval", model="bert-pair", epochs=1)
    with pytest.raises(AbsaError, match="differ in their budget"):
        compare(semeval["qacg"], one_epoch)
    with pytest.raises(AbsaError, match="runs of 2 configurations"):
        compare(semeval["qacg"] + semeval["pair"], semeval["pair"])
    with pytest.raises(AbsaError, match="seeds 44 are on one side only"):
        compare([r for r in semeval["qacg"] if r.config.seed != 44], semeval["pair"])
    with pytest.raises(AbsaError, match="A: no finished run"):
        compare([], semeval["pair"])


def test_the_cli_filters_each_side_and_prints_the_rule(capsys):
    argv = ["compare", str(RUNS / "semeval"), str(RUNS / "semeval"), "--a-filter", "model=qacg-bert",
            "--a-filter", "aux=none", "--a-filter", "epochs=25", "--a-filter", "preset=paper",
            "--a-filter", "model_overrides={}", "--a-filter", "objective=single",
            "--b-filter", "model=bert-pair", "--b-filter", "epochs=25", "--metric", "aspect_f1"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "aspect_f1" in out and "B better" in out and out.rstrip().splitlines()[-1].startswith("rule: A better when")
    assert "p (Holm) and MDD: the family is the 1 metric compared here" in out and "results/claims.md's family" in out
    assert main([*argv, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["metric"] for r in rows] == ["aspect_f1"] and rows[0]["verdict"] == "B better"
    assert main(["compare", str(RUNS / "semeval"), str(RUNS / "semeval")]) == 2
    err = capsys.readouterr().err
    n = int(err.split("runs of ")[1].split()[0])              # every configuration named, not the first 4 (issue 87)
    configurations = err.split(" configurations (")[1].rsplit("); give one configuration", 1)[0].split("; ")
    assert n > 4 and len(configurations) == n and len(err.splitlines()) == 1
    assert main([*argv, "--samples", "10000000000000"]) == 2             # 72.8 TiB of draws: refused at once
    assert capsys.readouterr().err.startswith("absa: error: --samples 10000000000000: expected 100 to 100,000")


def test_eps_min_is_deepsigs_aso_to_the_last_bit():
    deepsig = pytest.importorskip("deepsig")
    rng = np.random.default_rng(1)
    for n, m, shift in ((3, 3, 0.0), (3, 3, 0.5), (5, 4, 2.0), (10, 10, 0.3)):
        a, b = rng.normal(0, 1, n) + shift, rng.normal(0, 1, m)
        assert eps_min(a, b, seed=7) == pytest.approx(float(deepsig.aso(a, b, seed=7, show_progress=False)), abs=1e-12)


@pytest.fixture(scope="module")
def claimed(real_data_dir):
    from absa_lib.reports.claims import claims_table
    from absa_lib.reports.tables import trivial_baselines_of, trivial_floor

    runs = find_runs(RUNS)
    floors = {ds: trivial_floor(ds, trivial_baselines_of(ds, runs))[1] for ds in ("sentihood", "semeval")}
    assert floors == pytest.approx({"sentihood": 47.9, "semeval": 40.8}, abs=0.05)   # All-None; every aspect present
    return claims_table(runs, floors)


def _row(table, claim: str, dataset: str, budget: str):
    rows = table[(table["claim"] == claim) & (table["dataset"] == dataset) & (table["budget"] == budget)]
    assert len(rows) == 1
    return rows.iloc[0]


def test_the_claims_table_gives_each_claim_its_difference_and_verdict(claimed):
    from absa_lib.reports.claims import CLAIMS, claims_markdown

    row = _row(claimed, "QACG-BERT (no auxiliary sentence) over BERT-pair", "semeval", "minilm, 25 epochs")
    assert round(row["paper_gain"], 2) == 0.97                       # 92.64 - 91.67, Sun et al.'s NLI-M BERT-pair
    assert round(row["difference"], 2) == -1.17 and row["verdict"] == "undecided at 3 seeds"
    assert row["seed_high"] < 0 and row["p"] < 0.05 < row["p_adjusted"]      # alone it would decide; among 15, not
    assert row["seeds"] == "42 43 44" and len(row["runs_a"].split()) == len(row["runs_b"].split()) == 3
    assert round(_row(claimed, "QACG-BERT over BERT-pair (auxiliary sentences)", "sentihood",
                      "minilm, 25 epochs")["paper_gain"], 2) == 2.60    # 80.9 - 78.3, not Table 1's best-of-four 79.8
    assert set(claimed["claim"]) <= {c.text for c in CLAIMS}
    text = claims_markdown(claimed)
    assert ("| QACG-BERT (no auxiliary sentence) over BERT-pair | semeval | 42 43 44 | +0.97 | -1.17 | -1.5 -0.9 -1.1 | "
            "[-1.92, -0.41] | outside | 0.261 |") in text
    assert text.index("## minilm, 25 epochs: the paper's budget") < text.index("## minilm, 1 epoch: early training")
    assert text.rstrip().splitlines()[-1].startswith("Verdict rule: A better when")


def test_training_failures_are_named_and_left_out_of_the_family(claimed):
    """A side any of whose seeds stays within 10 points of the trivial floor did not train: no verdict,
    no test. CG-BERT without the auxiliary sentence at 25 epochs (two SentiHood seeds at All-None's
    47.9; every SemEval seed below 20 aspect F1)."""
    for dataset in ("sentihood", "semeval"):
        row = _row(claimed, "QACG-BERT over CG-BERT (no auxiliary sentence)", dataset, "minilm, 25 epochs")
        assert row["verdict"] == "training failure (B)" and np.isnan(row["p_adjusted"]) and np.isnan(row["min_detectable"])
    joint = _row(claimed, "joint aspect and sentiment heads over one head (QACG-BERT, no aux)", "sentihood",
                 "minilm, 1 epoch")
    assert joint["verdict"] == "training failure (A and B)"
    for _, part in claimed.groupby("budget"):                        # each budget one family: Holm over its tests
        tested = part[~part["verdict"].str.startswith("training failure")]
        assert list(tested["p_adjusted"]) == pytest.approx(S.holm(list(tested["p"])))
        for r in tested.itertuples():
            assert r.min_detectable == pytest.approx(S.min_detectable(r.seed_sd, 3, S.ALPHA / len(tested)))
            assert r.min_detectable > 1.5 * S.min_detectable_known(r.seed_sd, 3, S.ALPHA / len(tested))
            decided = r.p_adjusted < S.ALPHA and (r.eps_a_over_b if r.difference > 0 else r.eps_b_over_a) < TAU
            assert (r.verdict != "undecided at 3 seeds") == decided
    assert list(dict.fromkeys(claimed["budget"])) == ["minilm, 25 epochs", "minilm, 1 epoch"]   # the paper's first


def test_each_paper_gain_is_marked_inside_or_outside_our_interval(claimed):
    """"inside" exactly where the paper's gain lies in our 95% interval over seeds; none where the paper
    gives no gain or the row is a training failure; at 25 epochs 7 of the 12 paper gains lie outside."""
    for r in claimed.itertuples():
        if np.isnan(r.paper_gain) or r.verdict.startswith("training failure"):
            assert not isinstance(r.paper_in_ci, str)
        else:
            assert r.paper_in_ci == ("inside" if r.seed_low <= r.paper_gain <= r.seed_high else "outside")
    paper = claimed[(claimed["budget"] == "minilm, 25 epochs") & claimed["paper_in_ci"].notna()]
    assert (len(paper), int((paper["paper_in_ci"] == "outside").sum())) == (12, 7)
    assert _row(claimed, "BERT-pair over BERT-single", "sentihood", "minilm, 25 epochs")["paper_in_ci"] == "outside"


def test_seeds_needed_in_the_claims_table_averages_over_the_rows_own_spread(claimed):
    tested = claimed[(claimed["budget"] == "minilm, 25 epochs") & ~claimed["verdict"].str.startswith("training failure")]
    for r in tested.itertuples():
        expected = S.seeds_needed(r.paper_gain, r.seed_sd, S.ALPHA / len(tested), spread_df=2)
        assert (None if pd.isna(r.seeds_needed) else int(r.seeds_needed)) == expected


class _Run:
    """What the outcomes table reads of a run: its config, id and the dev-selected epoch's test scores."""

    def __init__(self, run_id, seed, strict, **fields):
        from absa_lib.reports.claims import _MAIN, PAPER_EPOCHS
        self.run_id = run_id
        self.config = typed_run({"dataset": "sentihood", "model": "cg-bert", "aux": "none", "epochs": PAPER_EPOCHS,
                                 "backbone": "minilm", "seed": seed, **_MAIN, **fields}).config
        self._strict = strict

    def selected(self, protocol):
        return {"test": {"aspect_strict_acc": self._strict / 100}}


def _fisher_greater(left_a, n_a, left_b, n_b):
    """The one-sided Fisher exact p from the hypergeometric tail, written out (A leaves at least this often)."""
    from math import comb
    total, left = n_a + n_b, left_a + left_b
    return sum(comb(n_a, k) * comb(n_b, left - k) for k in range(left_a, min(n_a, left) + 1)) / comb(total, left)


def test_run_outcomes_are_decided_by_fishers_exact_test_with_their_own_family():
    """The stall as it is in the committed runs (paper settings 1 of 4 left the trivial level; the sigmoid
    gate 5 of 5; init 0.02 4 of 4): pooled, decided (p 0.014, Holm 0.042); each alone, undecided."""
    from absa_lib.reports.claims import outcomes_markdown, outcomes_table
    sigmoid, init = {"model_overrides": {"gate_activation": "sigmoid"}}, {"model_overrides": {"init_std": 0.02}}
    runs = ([_Run(f"p{i}", 42 + i % 3, s) for i, s in enumerate((65.9, 47.9, 47.9, 47.9))]
            + [_Run(f"s{i}", 42 + i % 3, 70.0, **sigmoid) for i in range(5)]
            + [_Run(f"i{i}", 42 + i % 3, 70.0, **init) for i in range(4)]
            + [_Run("i0", 42, 70.0, **init)]                     # the same run folder found twice counts once
            + [_Run("x", 42, 47.9, **sigmoid, epochs=1)])        # another budget: not counted
    table = outcomes_table(runs, {"sentihood": 47.9}, ("sentihood",))
    assert [(r.left_a, r.n_a, r.left_b, r.n_b) for r in table.itertuples()] == [(5, 5, 1, 4), (4, 4, 1, 4), (9, 9, 1, 4)]
    for r in table.itertuples():
        assert r.p == pytest.approx(_fisher_greater(r.left_a, r.n_a, r.left_b, r.n_b))
    assert list(table["p_adjusted"]) == pytest.approx(S.holm(list(table["p"])))
    assert list(table["verdict"]) == ["undecided at 5 and 4 runs", "undecided at 4 and 4 runs", "A leaves more often"]
    assert round(table["p"].iloc[2], 3) == 0.014 and round(table["p_adjusted"].iloc[2], 3) == 0.042
    assert "| 9 / 9 | 1 / 4 | 0.014 | 0.042 | A leaves more often |" in outcomes_markdown(table)
    runs[0]._strict = 47.9                                        # the counts follow the runs
    assert outcomes_table(runs, {"sentihood": 47.9}, ("sentihood",))["left_b"].tolist() == [0, 0, 0]


def test_the_committed_outcomes_are_the_runs_counts():
    """results/claims_outcomes.csv, as render wrote it: its p-values are the exact test's on its counts."""
    table = pd.read_csv(Path(__file__).resolve().parent.parent / "results" / "claims_outcomes.csv")
    assert len(table) == 3
    for r in table.itertuples():
        assert r.p == pytest.approx(_fisher_greater(r.left_a, r.n_a, r.left_b, r.n_b), abs=1e-4)
        assert len(r.runs_a.split()) == r.n_a and len(r.runs_b.split()) == r.n_b
    assert list(table["p_adjusted"]) == pytest.approx(S.holm(list(table["p"])), abs=1e-4)
