"""A profile with command-line changes: what ``run_all.sh PROFILE -p NAME VALUE ...`` runs with.

    python -m absa_lib.profiles params/cpu.yaml OUT.yaml [-p NAME VALUE ...]

writes ``params/cpu.yaml`` with the changes applied to ``OUT.yaml``, which the grid runner and every
notebook then read, so they train the same runs. A name that is not a notebook parameter, or an
argument other than ``-p NAME VALUE``, is an error before anything runs (a typo never passes
silently). Values are read as YAML: ``3``, ``true``, ``[42, 43]``, ``'{"group_by_length": true}'``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from absa_lib.errors import AbsaError


def with_changes(path: Path, args: list[str]) -> dict:
    """The profile at ``path`` with ``-p NAME VALUE`` changes applied and checked."""
    from absa_lib.companion import PARAMETER_NAMES

    params = yaml.safe_load(Path(path).read_text())
    if not isinstance(params, dict):
        raise AbsaError(f"{path}: expected a mapping of parameter names to values")
    i = 0
    while i < len(args):
        if args[i] not in ("-p", "--parameters"):
            raise AbsaError(f"unexpected argument {args[i]!r}: after the profile, run_all.sh takes only "
                            "`-p NAME VALUE` changes of notebook parameters")
        if i + 2 >= len(args):
            raise AbsaError(f"`{' '.join(args[i:])}` needs a NAME and a VALUE")
        name, raw = args[i + 1], args[i + 2]
        if name not in PARAMETER_NAMES:
            raise AbsaError(f"-p {name}: not a notebook parameter; expected one of {', '.join(PARAMETER_NAMES)}")
        try:
            params[name] = yaml.safe_load(raw)
        except yaml.YAMLError as err:
            raise AbsaError(f"-p {name} {raw!r}: not a value ({err.problem})") from None
        i += 3
    return params


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python -m absa_lib.profiles PROFILE.yaml OUT.yaml [-p NAME VALUE ...]", file=sys.stderr)
        return 2
    try:
        params = with_changes(Path(argv[0]), argv[2:])
    except AbsaError as err:
        print(f"[run_all] error: {err}", file=sys.stderr)
        return 2
    from absa_lib.runs import atomic_write_bytes

    atomic_write_bytes(Path(argv[1]), yaml.safe_dump(params, sort_keys=False).encode())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
