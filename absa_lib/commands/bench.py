"""``absa bench``: training and inference throughput on real examples, a thin entry to
``benchmarks/bench.py``.

The benchmark code is tooling of the checkout, not of the package: it lives in ``benchmarks/bench.py``
beside the other benchmarks and is loaded from there (its options, its timing, its table). Installed
without a checkout (from a wheel), ``absa bench`` says so in one line and exits with status 2.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from absa_lib.errors import AbsaError
from absa_lib.paths import repo_root

HELP = "time training steps and inference (benchmarks/bench.py, in a checkout)"
MODULE = "absa_benchmarks_bench"            # the name benchmarks/bench.py is loaded under, once a process


def script() -> Path | None:
    """``benchmarks/bench.py`` of the checkout this package is in, or None (no checkout, or no such file)."""
    root = repo_root()
    path = root / "benchmarks" / "bench.py" if root is not None else None
    return path if path is not None and path.is_file() else None


def load() -> ModuleType | None:
    """``benchmarks/bench.py`` as a module (loaded once a process), or None when there is none."""
    if MODULE in sys.modules:
        return sys.modules[MODULE]
    path = script()
    if path is None:
        return None
    spec = importlib.util.spec_from_file_location(MODULE, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[MODULE] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[MODULE]
        raise
    return module


def add_parser(sub: argparse._SubParsersAction) -> None:
    module = load()
    if module is not None:
        module.add_parser(sub)
        return
    # no benchmark code here: whatever follows `absa bench` (--help included) gets the one line below;
    # no argument is read as an option (no argument can start with NUL)
    p = sub.add_parser("bench", help=HELP, add_help=False, prefix_chars="\0")
    p.add_argument("args", nargs=argparse.REMAINDER)
    p.set_defaults(func=missing)


def missing(args: argparse.Namespace) -> int:
    raise AbsaError("absa bench runs benchmarks/bench.py, which comes with a checkout of the repository, not with "
                    "the installed package: run it from a clone (pip install -e .)")
