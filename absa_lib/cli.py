"""The ``absa`` command line: ``absa data|evaluate|info|bench|train|predict ...``.

Each sub-command lives in :mod:`absa_lib.commands` and registers itself with ``add_parser``.
Expected failures (bad files, bad arguments, missing weights) raise :class:`AbsaError` and are
printed as one line, never as a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from absa_lib import __version__, commands
from absa_lib.errors import AbsaError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="absa",
        description="Context-guided BERT (CG-BERT, QACG-BERT) for (targeted) aspect-based sentiment analysis.",
    )
    parser.add_argument("--version", action="version", version=f"absa_lib {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        importlib.import_module(f"{commands.__name__}.{info.name}").add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except AbsaError as err:
        print(f"absa: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("absa: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
