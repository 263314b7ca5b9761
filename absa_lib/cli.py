"""The ``absa`` command line: ``absa data|evaluate|info|bench|train|predict ...``.

Each sub-command lives in :mod:`absa_lib.commands` and registers itself with ``add_parser``.
Expected failures (bad files, bad arguments, missing weights) raise :class:`AbsaError` and are
printed as one line, never as a traceback; a file error that escapes those checks (``OSError``,
invalid JSON, an unreadable safetensors file) is also printed as one line naming the file.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import pkgutil
import sys

from absa_lib import __version__, commands
from absa_lib.errors import AbsaError, one_line


def build_parser(command: str | None = "*") -> argparse.ArgumentParser:
    """The ``absa`` parser with every sub-command's options (``command="*"``), or only ``command``'s,
    the others by name and one-line help: their options would import torch and transformers, seconds
    that ``absa --help``, ``absa --version`` and another command need not wait for."""
    parser = argparse.ArgumentParser(
        prog="absa",
        description="Context-guided BERT (CG-BERT, QACG-BERT) for (targeted) aspect-based sentiment analysis.",
    )
    parser.add_argument("--version", action="version", version=f"absa_lib {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        if command in ("*", info.name):
            module.add_parser(sub)
        else:
            sub.add_parser(info.name, help=module.HELP)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(next((a for a in argv if not a.startswith("-")), None)).parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except AbsaError as err:
        print(f"absa: error: {err}", file=sys.stderr)
        return getattr(err, "exit_code", 2)
    except KeyboardInterrupt:
        print("absa: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:            # the reader left (`absa grid --list | head`): stop quietly, as Unix tools do
        with contextlib.suppress(OSError, ValueError):                     # no second error at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except (OSError, json.JSONDecodeError) as err:                    # the safety net: each should be
        print(f"absa: error: {_describe(err)}", file=sys.stderr)        # caught where it happens
        return 2
    except Exception as err:
        if type(err).__name__ != "SafetensorError":                     # safetensors, not imported for --help
            raise
        print(f"absa: error: {_describe(err)}", file=sys.stderr)
        return 2


def _describe(err: Exception) -> str:
    """One line for a file error that escaped the checks: the file, what went wrong, what to try."""
    if isinstance(err, OSError):
        name = f"{err.filename}: " if err.filename else ""
        return f"{name}{err.strerror or one_line(err)}; check that the file exists and is readable and writable"
    if isinstance(err, json.JSONDecodeError):
        return f"a JSON file is not valid ({err.msg} at line {err.lineno}); delete or restore it, or rerun with --force"
    return f"a safetensors file cannot be read ({one_line(err)}); the checkpoint or backbone is damaged"


if __name__ == "__main__":
    sys.exit(main())
