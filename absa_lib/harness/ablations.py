"""The ablations of notebook 04, as data: QACG-BERT with the auxiliary sentence (paper preset) and one
change at a time, plus CG-BERT's gate activation and, without the auxiliary sentence, CG-BERT's gate
and initialisation, and how BERT-single's per-context classifiers are batched. Each spec differs from
its reference (the spec it names in ``reference``, else the first spec of its model) in exactly one
field; notebook 04 shows this list and checks that.

The grid runner (:mod:`absa_lib.harness.runner`) trains the same list, so the notebook finds its runs in
the run cache.
"""

from __future__ import annotations

from absa_lib.errors import AbsaError
from absa_lib.harness.grid import Spec

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
    # Without the auxiliary sentence the context id is CG-BERT's only clue to the target and aspect; at the
    # gpu budget (lr 2e-5 for every layer) the paper's tanh gate with 1e-3 init stalls there for epochs.
    Spec("CG-BERT (no aux)", "cg-bert", "none", reference="CG-BERT (no aux)",
         change="reference of the next two rows: context id only, paper's tanh gate, init 1e-3"),
    Spec("CG-BERT (no aux), sigmoid gate", "cg-bert", "none", model_overrides={"gate_activation": "sigmoid"},
         reference="CG-BERT (no aux)", change="official code's sigmoid gate (starts at 0.5, not 0)"),
    Spec("CG-BERT (no aux), init 0.02", "cg-bert", "none", model_overrides={"init_std": 0.02},
         reference="CG-BERT (no aux)", change="official code's init of E_c, W_c, U (0.02, not 1e-3; gates stay at 1e-3)"),
    # The baseline's K per-context classifiers: trained as K separate runs (the tables' row) or on shared batches.
    Spec("BERT-single", "bert-single", "single", sampler="per-context",
         change="reference of the next row: each batch from one context, as Sun et al.'s K separate runs"),
    Spec("BERT-single, mixed batches", "bert-single", "single",
         change="the K classifiers share each batch of 24: about 24/K rows each, many more steps"),
]


def reference_of(spec: Spec, specs: list[Spec] = ABLATIONS) -> Spec:
    """The reference of ``spec``: the spec labelled ``spec.reference``, else the first of its model."""
    if spec.reference:
        found = [s for s in specs if s.label == spec.reference]
        if not found:
            raise AbsaError(f"ablation {spec.label!r}: its reference {spec.reference!r} is not a spec label; "
                            f"expected one of: {', '.join(s.label for s in specs)}")
        return found[0]
    return next(s for s in specs if s.model == spec.model)


def changed_fields(spec: Spec, reference: Spec) -> list[str]:
    """The run-defining fields in which ``spec`` differs from ``reference``."""
    return [k for k, v in spec.filters().items() if reference.filters()[k] != v]
