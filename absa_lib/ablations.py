"""The ablations of notebook 04, as data: QACG-BERT with the auxiliary sentence (paper preset) and one
change at a time, plus CG-BERT's gate activation. Each spec differs from its reference (the first
spec of its model) in exactly one field; notebook 04 shows this list and checks that.

The grid runner (:mod:`absa_lib.runner`) trains the same list, so the notebook finds its runs in
the run cache.
"""

from __future__ import annotations

from absa_lib.grid import Spec

ABLATIONS = [
    Spec("QACG-BERT (aux)", "qacg-bert", "NLI-M",
         change="reference: paper preset, NLI-M auxiliary sentence, uniform sampler"),
    Spec("QACG-BERT (aux), official preset", "qacg-bert", "NLI-M", preset="official",
         change="official code's settings: per-head Z, dropout on C_Q/C_K, λ biases, init 0.02"),
    Spec("QACG-BERT (aux), λ_A = 0", "qacg-bert", "NLI-M", model_overrides={"quasi": False},
         change="quasi term off: Â = A_self (model override quasi=False)"),
    Spec("QACG-BERT (no aux)", "qacg-bert", "none", change="no auxiliary sentence (context id only)"),
    Spec("QACG-BERT (aux), balanced sampler", "qacg-bert", "NLI-M", sampler="balanced",
         change="class-balanced sampling with replacement (official WeightedRandomSampler)"),
    Spec("CG-BERT (aux), tanh gate", "cg-bert", "NLI-M", change="CG reference: paper's tanh gate (Eq. 3)"),
    Spec("CG-BERT (aux), sigmoid gate", "cg-bert", "NLI-M", model_overrides={"gate_activation": "sigmoid"},
         change="official code's sigmoid gate"),
]


def reference_of(spec: Spec, specs: list[Spec] = ABLATIONS) -> Spec:
    """The reference of ``spec``: the first spec of the same model."""
    return next(s for s in specs if s.model == spec.model)


def changed_fields(spec: Spec, reference: Spec) -> list[str]:
    """The run-defining fields in which ``spec`` differs from ``reference``."""
    return [k for k, v in spec.filters().items() if reference.filters()[k] != v]
