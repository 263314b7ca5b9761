"""One module per ``absa`` sub-command; each defines ``add_parser(subparsers)``.

The CLI discovers the modules in this package, so adding a command is adding a file. The argparse
types below are shared by the commands, the benchmarks and the scripts.
"""
import argparse


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


positive = whole_number(1)         # sizes, counts of steps, threads, workers
non_negative = whole_number(0)     # warm-up steps

# where the folders are when an option is not given (absa_lib.paths resolves them)
DATA_DIR_HELP = ("the data folder (default: $ABSA_DATA_DIR, else data/ in the checkout, or "
                 "~/.cache/absa_lib/data when the package is installed outside one)")
RUNS_DIR_HELP = ("the runs folder (default: $ABSA_RUNS_DIR, else runs/ in the checkout, or "
                 "~/.cache/absa_lib/runs when the package is installed outside one)")
