"""One module per ``absa`` sub-command; each defines ``add_parser(subparsers)``.

The CLI discovers the modules in this package, so adding a command is adding a file (``bench`` is a
thin entry: its code is ``benchmarks/bench.py``, outside the package). The argparse types below are
shared by the commands, the benchmarks and the scripts.
"""
import argparse
import json
import math


def whole_number(minimum: int):
    """An argparse ``type``: a whole number of at least ``minimum``; anything else is argparse's
    one-line error, e.g. ``argument --threads: expected a whole number of at least 1, got '0'``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected a whole number of at least {minimum}, got {text!r}")
        return value
    return parse


def parse_overrides(items: list[str], option: str) -> dict:
    """Model overrides from ``FIELD=VALUE`` items (``absa train --override``, ``absa info --set``):
    the value as JSON (``false``, ``0.02``, ``4``, ``"gelu"``), else ``true``/``false`` in any case,
    else the text itself; the model's config checks the value."""
    from absa_lib.errors import AbsaError

    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise AbsaError(f"{option} {item!r}: expected FIELD=VALUE, e.g. quasi=false")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = {"true": True, "false": False}.get(value.lower(), value)
    return out


positive = whole_number(1)         # sizes, counts of steps, threads, workers
non_negative = whole_number(0)     # warm-up steps

# where the folders are when an option is not given (absa_lib.paths resolves them)
DATA_DIR_HELP = ("the data folder (default: $ABSA_DATA_DIR, else data/ in the checkout, or "
                 "~/.cache/absa_lib/data when the package is installed outside one)")
RUNS_DIR_HELP = ("the runs folder (default: $ABSA_RUNS_DIR, else runs/ in the checkout, or "
                 "~/.cache/absa_lib/runs when the package is installed outside one)")


def print_json(obj, sort_keys: bool = False) -> None:
    """Print ``obj`` as indented, valid JSON: an undefined metric (a NaN float, at any depth) is
    ``null``, since a bare ``NaN`` is not JSON and strict readers (``jq``) refuse the whole output."""
    def clean(x):
        if isinstance(x, float) and not math.isfinite(x):
            return None
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        return [clean(v) for v in x] if isinstance(x, list | tuple) else x
    print(json.dumps(clean(obj), indent=2, sort_keys=sort_keys, allow_nan=False))
