"""Evaluation: the paper's metrics, a model's class probabilities, prediction files, and the
analyses behind Figures 3-5.

    metrics      SentiHood's aspect accuracy/F1/AUC and sentiment accuracy/AUC; SemEval's aspect
                 P/R/F1 and 4-, 3- and 2-class sentiment accuracy (the reference evaluation's)
    inference    a model's class probabilities over encoded inputs, batched by length
    predictions  prediction files (one row per sentence x target x aspect) written and scored
    analysis     gradient sensitivity, context signals and attention components (Figures 3-5)
    explain      why a prediction: each word's share of the gradient sensitivity, a head's attention
    kept         the per-example predictions a run keeps (the probabilities its metrics came from)
    trivial      the trivial predictors (all-None, majority polarity), the floor a run must beat
    significance whether a difference is real: the t-test over seeds, Holm, ASO, the bootstrap over
                 test sentences, the verdict rule and its minimum detectable difference
"""
