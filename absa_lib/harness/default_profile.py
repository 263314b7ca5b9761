"""The profile ``bash run_all.sh`` runs when none is given, and why: ``gpu`` with CUDA, else ``render``
when ``results/reference/`` holds trained runs (with what they cost and how to retrain them), else
``cpu``.

    python -m absa_lib.harness.default_profile ROOT     # the profile on stdout, the reasons on stderr

The driver (:mod:`absa_lib.harness.run_all`) runs it in a process of its own only when no profile is
named, so that a named profile never waits for torch and the run records to load.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from huggingface_hub import try_to_load_from_cache

from absa_lib.device import cpu_has_native_bf16
from absa_lib.harness.profiles import PROFILES
from absa_lib.harness.run_all import say
from absa_lib.harness.runner import cost_summary
from absa_lib.training.records import run_folders


def _has_cuda() -> bool:
    return torch.cuda.is_available()


def _bert_base_cached() -> bool:
    """Whether the hub's cache holds bert-base-uncased (``paper``'s backbone): a hint, never an error."""
    try:
        return isinstance(try_to_load_from_cache("bert-base-uncased", "config.json"), str)
    except Exception:
        return False


def reference_line(root: Path) -> str:
    """What the committed reference runs cost, and how to train seed 42 here instead."""
    cost = ("1 h 23 min, its 35 runs and the notebooks, on 2 CPU cores with native bf16, as this one has; "
            "docs/evidence/costs_and_speed.md"
            if cpu_has_native_bf16() else "2 h 10 min measured on 2 CPU cores; docs/evidence/costs_and_speed.md")
    return ("[run_all] the reference: " + cost_summary(root / "results" / "reference" / "runs") + ". To retrain seed "
            f"42 here: bash run_all.sh cpu ({cost}), or gpu with CUDA "
            "(10 of its 12 table runs took 14 min on one H100; docs/evidence/costs_and_speed.md)")


def choose_profile(root: Path) -> str:
    """The profile when none is given: ``gpu`` with CUDA, else ``render`` when ``results/reference/``
    holds trained runs, else ``cpu``; says which and why."""
    if _has_cuda():
        profile, why = "gpu", "a CUDA GPU is available"
    elif run_folders(root / "results" / "reference" / "runs"):
        profile, why = "render", "no CUDA GPU was found, and results/reference/ holds trained runs"
        say(reference_line(root))
    else:
        profile, why = "cpu", "no CUDA GPU was found and results/reference/ has no runs"
    say(f"[run_all] no profile given: using '{profile}' ({why}). Others: {' '.join(PROFILES)}")
    if profile == "gpu" and _bert_base_cached():
        say("[run_all] bert-base-uncased is in the local cache: 'bash run_all.sh paper' runs the paper's backbone")
    return profile


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    print(choose_profile(Path(argv[0]) if argv else Path.cwd()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
