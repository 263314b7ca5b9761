"""Metrics of Tables 1 and 2 on hand-computed cases (docs/paper_notes.md §5); the arithmetic is in comments.

SentiHood ids: None=0 (N), Positive=1 (P), Negative=2 (Ng); rows in groups of 4 aspect positions
(general, price, safety, transit). SemEval ids: pos=0, neu=1, neg=2, conf=3, none=4; groups of 5
(price, anecdotes, food, ambience, service). AUC by hand = P(score_pos > score_neg) + ½ P(tie)
over all (positive, negative) pairs.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from absa_lib.errors import AbsaError
from absa_lib.evaluation.metrics import (
    METRIC_KEYS,
    SELECTION_METRIC,
    aggregate_seeds,
    compute_metrics,
    semeval_metrics,
    sentihood_metrics,
)

N, P, NG = 0, 1, 2
POS, NEU, NEG, CONF, NONE = 0, 1, 2, 3, 4
EXACT = dict(abs=1e-12)

# ---------------------------------------------------------------- SentiHood: 3 groups, Latin square
# Each aspect position has one None, one Positive, one Negative gold label across the 3 groups.
SH_GOLD = [N, P, NG, P,      # g1
           P, NG, N, NG,     # g2
           NG, N, P, N]      # g3
SH_PROBS = [  # [P(None), P(Pos), P(Neg)]                       argmax   p_neg = Neg/(Pos+Neg)
    [0.5, 0.3, 0.2],     # g1 general  gold N                  N
    [0.2, 0.5, 0.3],     # g1 price    gold P                  P        .3/.8  = .375  -> P  right
    [0.1, 0.3, 0.6],     # g1 safety   gold Ng                 Ng       .6/.9  = .667  -> Ng right
    [0.35, 0.45, 0.2],   # g1 transit  gold P                  P        .2/.65 = .308  -> P  right
    [0.6, 0.2, 0.2],     # g2 general  gold P                  N        .2/.4  = .5 (not > .5) -> P right
    [0.7, 0.1, 0.2],     # g2 price    gold Ng  None highest   N        .2/.3  = .667  -> Ng right
    [0.6, 0.2, 0.2],     # g2 safety   gold N                  N
    [0.9, 0.06, 0.04],   # g2 transit  gold Ng                 N        .04/.1 = .4    -> P  wrong
    [0.1, 0.45, 0.45],   # g3 general  gold Ng  tie P/Ng -> P  P        x/(2x) = .5    -> P  wrong
    [0.7, 0.15, 0.15],   # g3 price    gold N                  N
    [0.5, 0.25, 0.25],   # g3 safety   gold P                  N        .5             -> P  right
    [0.8, 0.1, 0.1],     # g3 transit  gold N                  N
]


def test_sentihood_latin_square_by_hand():
    m = sentihood_metrics(np.array(SH_GOLD), np.array(SH_PROBS))
    # Predictions: g1 [N,P,Ng,P] = gold; g2 [N,N,N,N] != [P,Ng,N,Ng]; g3 [P,N,N,N] != [Ng,N,P,N].
    assert m["aspect_strict_acc"] == 1 / 3
    # Macro P/R (aspect sets, polarity ignored). g1: pred {1,2,3}, gold {1,2,3} -> P=1, R=1.
    # g2: pred {} gold {0,1,3}: empty intersection -> P=R=0 (still counted).
    # g3: pred {0} (P, gold Ng: polarity ignored), gold {0,2} -> P=1/1, R=1/2.
    # Ma-P = (1+0+1)/3 = 2/3, Ma-R = (1+0+1/2)/3 = 1/2, F1 = 2(2/3)(1/2)/(2/3+1/2) = (2/3)/(7/6) = 4/7.
    assert m["aspect_macro_p"] == pytest.approx(2 / 3, **EXACT)
    assert m["aspect_macro_r"] == pytest.approx(1 / 2, **EXACT)
    assert m["aspect_macro_f1"] == pytest.approx(4 / 7, **EXACT)
    # Aspect AUC, y = [gold is None], score P(None), per position over g1, g2, g3:
    # general: None .5 vs non-None .6 (lose), .1 (win)  -> 1/2
    # price:   None .7 vs .2 (win), .7 (tie)            -> (1 + 1/2)/2 = 3/4
    # safety:  None .6 vs .1 (win), .5 (win)            -> 1
    # transit: None .8 vs .35 (win), .9 (lose)          -> 1/2
    # mean = (1/2 + 3/4 + 1 + 1/2)/4 = 11/16
    assert m["aspect_auc"] == pytest.approx(11 / 16, **EXACT)
    # Sentiment accuracy on the 8 gold non-None rows: right g1 price, g1 safety, g1 transit,
    # g2 general (tie .5 -> Positive), g2 price (renormalised), g3 safety; wrong g2 transit, g3 general.
    assert m["sentiment_acc"] == 6 / 8
    # Sentiment AUC, y = [gold Negative], score p_neg, one Pos and one Neg per position:
    # general: Neg .5 (g3) vs Pos .5 (g2) tie -> 1/2;  price: Neg .667 vs Pos .375 -> 1
    # safety: Neg .667 vs Pos .5 -> 1;                 transit: Neg .4 vs Pos .308 -> 1
    # mean = 3.5/4 = 7/8
    assert m["sentiment_auc"] == pytest.approx(7 / 8, **EXACT)
    assert all(type(v) is float for v in m.values())
    assert tuple(m) == METRIC_KEYS["sentihood"]


def test_sentihood_macro_f1_skips_all_none_gold_groups():
    gold = [P, N, N, NG,     # A: gold {0,3}
            N, N, N, N,      # B: all-None gold -> skipped by macro P/R, counted by strict acc
            P, P, N, N,      # C: gold {0,1}
            N, NG, N, N,     # D: gold {1}
            N, N, N, N]      # E: all-None gold, predicted all None
    pred = [P, N, N, NG,     # A: exact -> strict; pred {0,3}: P=1, R=1
            P, N, NG, P,     # B: 3 false positives, never penalised by macro-F1
            NG, N, NG, NG,   # C: pred {0,2,3}, inter {0}: P=1/3, R=1/2
            N, N, N, N,      # D: empty prediction set: P=R=0
            N, N, N, N]      # E: exact -> strict
    m = sentihood_metrics(np.array(gold), np.eye(3)[pred])
    assert m["aspect_strict_acc"] == 2 / 5                           # A and E
    # Over A, C, D: Ma-P = (1 + 1/3 + 0)/3 = 4/9, Ma-R = (1 + 1/2 + 0)/3 = 1/2,
    # F1 = 2(4/9)(1/2)/(4/9 + 1/2) = (4/9)/(17/18) = 8/17.
    assert m["aspect_macro_p"] == pytest.approx(4 / 9, **EXACT)
    assert m["aspect_macro_r"] == pytest.approx(1 / 2, **EXACT)
    assert m["aspect_macro_f1"] == pytest.approx(8 / 17, **EXACT)


def test_sentihood_no_aspect_predicted_gives_zero_f1_not_an_error():
    gold = np.array([P, N, N, N, N, NG, N, N])
    m = sentihood_metrics(gold, np.tile([0.9, 0.05, 0.05], (8, 1)))   # always None
    assert m["aspect_macro_p"] == 0.0 and m["aspect_macro_r"] == 0.0
    assert m["aspect_macro_f1"] == 0.0                                  # the official 0/0 guard
    assert m["aspect_strict_acc"] == 0.0


def test_sentihood_undefined_values_are_nan():
    # One group only: each aspect position has a single example -> every AUC is undefined.
    gold = np.array([P, N, N, N])
    m = sentihood_metrics(gold, np.array([[0.2, 0.5, 0.3]] + [[0.8, 0.1, 0.1]] * 3))
    assert math.isnan(m["aspect_auc"]) and math.isnan(m["sentiment_auc"])
    assert m["aspect_strict_acc"] == 1.0 and m["sentiment_acc"] == 1.0    # .3/.8 -> Positive
    # All-None gold: macro P/R/F1 and sentiment accuracy have no group / example to average over.
    m = sentihood_metrics(np.zeros(8, dtype=int), np.tile([0.9, 0.05, 0.05], (8, 1)))
    assert all(math.isnan(m[k]) for k in ("aspect_macro_p", "aspect_macro_r", "aspect_macro_f1",
                                          "sentiment_acc", "sentiment_auc", "aspect_auc"))
    assert m["aspect_strict_acc"] == 1.0


def test_sentihood_one_aspect_without_both_classes_makes_macro_auc_nan():
    # Two groups: general/price/safety each have one None and one non-None, transit is None twice.
    gold = np.array([N, P, N, N,
                     NG, N, P, N])
    probs = np.array([[0.9, .05, .05], [.1, .6, .3], [.8, .1, .1], [.9, .05, .05],
                      [.2, .3, .5], [.7, .2, .1], [.3, .6, .1], [.9, .05, .05]])
    m = sentihood_metrics(gold, probs)
    assert math.isnan(m["aspect_auc"])          # transit position has only the None class


def test_sentihood_zero_pos_and_neg_probability_counts_as_positive():
    # P(Pos)+P(Neg) = 0 (g1, all rows [1, 0, 0]): p_neg := 0.5 -> Positive, as nan > 0.5 is False in
    # the reference's numpy path, and a score of 0.5 for the AUC.
    gold = np.array([P, P, NG, P,
                     NG, NG, P, NG])
    probs = np.array([[1.0, 0.0, 0.0]] * 4 +
                     [[.2, .1, .7],       # p_neg .7/.8 = .875 -> Ng right
                      [.2, .3, .5],       # .5/.8 = .625 -> Ng right
                      [.2, .7, .1],       # .1/.8 = .125 -> P right
                      [.1, .6, .3]])      # .3/.9 = .333 -> P wrong
    m = sentihood_metrics(gold, probs)
    assert m["sentiment_acc"] == 6 / 8      # g1: 3 Positive right, the Negative wrong; g2: 3 of 4
    # general: Ng .875 vs P .5 -> 1; price: Ng .625 vs P .5 -> 1; safety: Ng .5 vs P .125 -> 1;
    # transit: Ng .333 vs P .5 -> 0.  mean = 3/4
    assert m["sentiment_auc"] == 0.75


# ---------------------------------------------------------------- SemEval: 4 sentences
SE_GOLD = [NONE, POS, NONE, NONE, NEG,     # s1  G = {anecdotes, service}
           NEU, NONE, CONF, NONE, NONE,    # s2  G = {price, food}
           NONE, NONE, POS, NEG, NONE,     # s3  G = {food, ambience}
           NONE, NONE, NONE, NONE, NONE]   # s4  no gold aspect: skipped by P/R/F
SE_PROBS = [  # [pos, neu, neg, conf, none]      argmax
    [.1, .1, .1, .1, .6],       # s1 price    none
    [.2, .4, .3, .0, .1],       # s1 anecd.   neu   gold pos: 4c, 3c neu wrong; 2c neu->.2<.3 neg wrong
    [.5, .1, .1, .1, .2],       # s1 food     pos   (false positive aspect)
    [.1, .1, .1, .1, .6],       # s1 ambience none
    [.1, .05, .3, .05, .5],     # s1 service  none  gold neg: 4c->neg right; 3c->neg right; 2c .1<.3 neg right
    [.1, .15, .1, .2, .45],     # s2 price    none  gold neu: 4c->conf wrong; 3c->neu right (no conf)
    [.1, .5, .1, .1, .2],       # s2 anecd.   neu   (false positive)
    [.1, .1, .1, .5, .2],       # s2 food     conf  gold conf: 4c right; not in 3c / 2c
    [.4, .1, .1, .1, .3],       # s2 ambience pos   (false positive)
    [.1, .1, .4, .1, .3],       # s2 service  neg   (false positive)
    [.1, .1, .1, .1, .6],       # s3 price    none
    [.1, .1, .1, .1, .6],       # s3 anecd.   none
    [.3, .1, .3, .35, .05],     # s3 food     conf  gold pos: 4c wrong; 3c tie -> pos right; 2c .3>=.3 right
    [.1, .1, .6, .1, .1],       # s3 ambience neg   gold neg: right everywhere
    [.1, .1, .1, .1, .6],       # s3 service  none
    [.5, .1, .1, .1, .2],       # s4 price    pos   (would add to Σ|S| if s4 were not skipped)
    [.1, .1, .1, .1, .6], [.1, .1, .1, .1, .6], [.1, .1, .1, .1, .6], [.1, .1, .1, .1, .6],
]


def test_semeval_by_hand():
    m = semeval_metrics(np.array(SE_GOLD), np.array(SE_PROBS))
    # S: s1 {anecd, food}, s2 {anecd, food, ambience, service}, s3 {food, ambience}: Σ|S| = 2+4+2 = 8
    # G: 2+2+2 = 6; S∩G: s1 {anecd}, s2 {food}, s3 {food, ambience}: 1+1+2 = 4   (s4 skipped)
    # P = 4/8, R = 4/6, F = 2(1/2)(2/3)/(1/2+2/3) = (2/3)/(7/6) = 4/7
    assert m["aspect_p"] == 0.5
    assert m["aspect_r"] == pytest.approx(2 / 3, **EXACT)
    assert m["aspect_f1"] == pytest.approx(4 / 7, **EXACT)
    # 4-class over 6 gold != none: right s1 service, s2 food, s3 ambience -> 3/6
    assert m["sentiment_acc_4class"] == 3 / 6
    # 3-class over 5 gold in {pos,neu,neg}: right s1 service, s2 price, s3 food, s3 ambience -> 4/5
    assert m["sentiment_acc_3class"] == 4 / 5
    # binary over 4 gold in {pos,neg}: right s1 service, s3 food (tie -> pos), s3 ambience -> 3/4
    assert m["sentiment_acc_binary"] == 3 / 4
    assert tuple(m) == METRIC_KEYS["semeval"] and all(type(v) is float for v in m.values())


def test_semeval_no_aspect_predicted_uses_the_official_guards():
    gold = np.array([POS, NONE, NEU, NONE, NEG])
    m = semeval_metrics(gold, np.tile([.3, .1, .2, .05, .35], (5, 1)))   # always none
    assert (m["aspect_p"], m["aspect_r"], m["aspect_f1"]) == (0.0, 0.0, 0.0)
    # none -> argmax over the 4 / 3 classes = pos; binary: P(pos) .3 >= P(neg) .2 -> pos
    assert m["sentiment_acc_4class"] == 1 / 3 and m["sentiment_acc_3class"] == 1 / 3
    assert m["sentiment_acc_binary"] == 1 / 2


def test_semeval_accuracy_without_eligible_examples_is_nan():
    gold = np.array([CONF, NONE, NEU, NONE, NONE])          # no pos/neg gold -> binary undefined
    m = semeval_metrics(gold, np.tile([.3, .1, .2, .05, .35], (5, 1)))
    assert math.isnan(m["sentiment_acc_binary"])
    assert m["sentiment_acc_4class"] == 0.0 and m["sentiment_acc_3class"] == 0.0


def test_argmax_ties_go_to_the_lower_index():
    # pos = none = .4: prediction pos (index 0), so the aspect counts as predicted.
    m = semeval_metrics(np.array([POS, NONE, NONE, NONE, NONE]),
                        np.array([[.4, .1, .05, .05, .4]] + [[0, 0, 0, 0, 1.0]] * 4))
    assert (m["aspect_p"], m["aspect_r"], m["sentiment_acc_4class"]) == (1.0, 1.0, 1.0)


def test_compute_metrics_dispatch_and_selection_metric():
    assert compute_metrics("sentihood", SH_GOLD, SH_PROBS) == sentihood_metrics(SH_GOLD, SH_PROBS)
    assert compute_metrics("semeval", SE_GOLD, SE_PROBS) == semeval_metrics(SE_GOLD, SE_PROBS)
    assert SELECTION_METRIC == {"sentihood": "aspect_strict_acc", "semeval": "aspect_f1"}
    for dataset, key in SELECTION_METRIC.items():
        assert key in METRIC_KEYS[dataset]


@pytest.mark.parametrize("gold, probs, match", [
    (np.zeros(6, int), np.full((6, 3), 1 / 3), "multiple of the group size 4"),
    (np.zeros(4, int), np.full((4, 5), .2), "4 columns|5 columns|expected 3"),
    (np.zeros(4, int), np.array([[np.nan, .5, .5]] + [[1, 0, 0]] * 3), "not finite"),
    (np.zeros(4, int), np.array([[-1, 1, 1]] + [[1, 0, 0]] * 3), "negative"),
    (np.array([0, 0, 3, 0]), np.full((4, 3), 1 / 3), "0..2"),
    (np.array([0, 0.5, 0, 0]), np.full((4, 3), 1 / 3), "integer"),
    (np.zeros(4, int), np.full((3, 3), 1 / 3), r"\(4,\) and \(3, 3\)"),
])
def test_sentihood_rejects_bad_inputs(gold, probs, match):
    with pytest.raises(AbsaError, match=match):
        sentihood_metrics(gold, probs)


def test_unknown_dataset():
    with pytest.raises(AbsaError, match="unknown dataset 'sentiment'"):
        compute_metrics("sentiment", [0] * 4, np.eye(3)[[0] * 4])


# ---------------------------------------------------------------- aggregation over seeds
def test_aggregate_seeds_semeval_f1_of_means():
    runs = [{"aspect_p": .90, "aspect_r": .88, "aspect_f1": .1, "sentiment_acc_binary": .95,
             "sentiment_acc_3class": .90, "sentiment_acc_4class": .86, "extra": 1.0},
            {"aspect_p": .94, "aspect_r": .92, "aspect_f1": .2, "sentiment_acc_binary": .97,
             "sentiment_acc_3class": .90, "sentiment_acc_4class": .84, "extra": 2.0}]
    agg = aggregate_seeds(runs, "semeval")
    assert agg["n"] == 2 and "extra" not in agg["mean"]
    assert agg["mean"]["aspect_p"] == pytest.approx(.92, **EXACT)
    assert agg["sd"]["aspect_p"] == pytest.approx(.04 / math.sqrt(2), **EXACT)   # |a-b|/√2 for 2 runs
    assert agg["sd"]["sentiment_acc_3class"] == pytest.approx(0.0, **EXACT)
    assert agg["mean"]["aspect_f1"] == pytest.approx(.15, **EXACT)              # plain mean of F1s
    # F1 of means = 2(.92)(.90)/(.92+.90) = 1.656/1.82
    assert agg["mean"]["aspect_f1_of_means"] == pytest.approx(1.656 / 1.82, **EXACT)
    assert math.isnan(agg["sd"]["aspect_f1_of_means"])


def test_aggregate_seeds_reproduces_the_paper_identity():
    # Table 2, CG-BERT: P 93.02, R 90.00 -> F1 91.49 = 2·93.02·90.00/(93.02+90.00).
    runs = [{k: 0.5 for k in METRIC_KEYS["semeval"]} | {"aspect_p": p, "aspect_r": r}
            for p, r in [(.9282, .8980), (.9322, .9020)]]
    agg = aggregate_seeds(runs, "semeval")
    assert round(100 * agg["mean"]["aspect_f1_of_means"], 2) == 91.49


def test_aggregate_seeds_single_run_and_errors():
    one = sentihood_metrics(SH_GOLD, SH_PROBS)
    agg = aggregate_seeds([one], "sentihood")
    assert agg["mean"] == one and all(math.isnan(v) for v in agg["sd"].values())
    assert "aspect_f1_of_means" not in agg["mean"]
    older = aggregate_seeds([one, {k: v for k, v in one.items() if k != "aspect_auc"}], "sentihood")
    assert math.isnan(older["mean"]["aspect_auc"]) and older["not_recorded"] == {"aspect_auc": [1]}   # a run from
    assert older["mean"]["aspect_strict_acc"] == one["aspect_strict_acc"]          # before the metric: nan, named
    with pytest.raises(AbsaError, match="no runs"):
        aggregate_seeds([], "semeval")


# ---------------------------------------------------------------- cross-checks on the real test sets
def _gold(dataset: str, split: str, data_dir) -> np.ndarray:
    from absa_lib.data.datasets import load_examples
    return np.array([e.label_id for e in load_examples(dataset, split, data_dir)])


def test_real_sentihood_test_trivial_and_perfect(real_data_dir):
    gold = _gold("sentihood", "test", real_data_dir)
    assert len(gold) == 7516
    m = sentihood_metrics(gold, np.eye(3)[gold])
    assert all(v == 1.0 for v in m.values())
    # Always None with P(Pos) = P(Neg): 900 of the 1,879 groups are all-None gold (docs/paper_notes.md §5.1: 47.9%);
    # no aspect is ever predicted -> macro P = R = F1 = 0 over the 979 other groups; constant
    # scores -> AUC 1/2; p_neg = .5 -> Positive: 810 of the 1,216 gold sentiments (data README).
    m = sentihood_metrics(gold, np.tile([.8, .1, .1], (len(gold), 1)))
    assert m["aspect_strict_acc"] == 900 / 1879
    assert round(100 * m["aspect_strict_acc"], 1) == 47.9
    assert (m["aspect_macro_p"], m["aspect_macro_r"], m["aspect_macro_f1"]) == (0.0, 0.0, 0.0)
    assert m["aspect_auc"] == 0.5 and m["sentiment_auc"] == 0.5
    assert m["sentiment_acc"] == 810 / 1216


def test_real_semeval_test_trivial_and_perfect(real_data_dir):
    gold = _gold("semeval", "test", real_data_dir)
    assert len(gold) == 4000
    assert all(v == 1.0 for v in semeval_metrics(gold, np.eye(5)[gold]).values())
    # Always none, with pos the best sentiment class: every accuracy becomes "always positive":
    # 657 positive of 1,025 non-none, of 973 pos/neu/neg, of 879 pos/neg (data README counts).
    m = semeval_metrics(gold, np.tile([.3, .1, .2, .05, .35], (len(gold), 1)))
    assert (m["aspect_p"], m["aspect_r"], m["aspect_f1"]) == (0.0, 0.0, 0.0)
    assert m["sentiment_acc_4class"] == 657 / 1025
    assert m["sentiment_acc_3class"] == 657 / 973
    assert m["sentiment_acc_binary"] == 657 / 879
    # Predict every aspect (argmax pos): R = 1, P = 1025 gold aspects / 4000 predicted.
    m = semeval_metrics(gold, np.tile([.35, .1, .2, .05, .3], (len(gold), 1)))
    assert m["aspect_r"] == 1.0 and m["aspect_p"] == 1025 / 4000
