"""Run a notebook without Jupyter: its jupytext script (``notebooks/NN_*.py``) with a profile's values.

Each notebook is paired with a percent-format script, which is plain Python (markdown cells are
comments). This does for the script what papermill does for the notebook: it puts the profile's
values for the names the cell tagged ``parameters`` declares right after that cell, then runs the
whole script in a fresh namespace, from ``notebooks/``. Use it where Jupyter and papermill are not
installed (a cluster node, a container, a bare GPU machine)::

    python -m absa_lib.harness.notebook_script notebooks/05_figures.py executed/gpu/params.yaml

``ABSA_PYTHON=python3 bash run_all.sh PROFILE`` runs a whole profile this way where papermill is
missing. Figures are written to files as in the notebooks (the ``Agg`` backend); what a notebook
would display is printed.
"""

from __future__ import annotations

import ast
import os
import sys
from pathlib import Path

from absa_lib.errors import AbsaError
from absa_lib.harness.profiles import declared_parameters, read_profile_file


def with_parameters(script: Path, values: dict) -> str:
    """The script's source with ``name = value`` statements for its declared parameters after the
    parameters cell, on the line of the next cell's marker, so that no line changes its number
    (values that are not plain YAML data are an error)."""
    try:
        lines = Path(script).read_text(encoding="utf-8").splitlines(keepends=True)
    except (OSError, UnicodeDecodeError) as err:
        raise AbsaError(f"{script}: cannot be read ({getattr(err, 'strerror', None) or err}); expected a "
                        "notebook's paired script, notebooks/NN_name.py") from None
    end, declared = declared_parameters(lines, script)
    injected = []
    for name in sorted(declared & set(values)):
        value = values[name]
        try:
            plain = ast.literal_eval(repr(value)) == value
        except (ValueError, SyntaxError):
            plain = False
        if not plain:
            raise AbsaError(f"parameter {name}={value!r} is not plain data (numbers, strings, lists, mappings)")
        injected.append(f"{name} = {value!r}")
    if not injected:
        return "".join(lines)
    # on the line of the next cell's marker (a comment), so that every line of the script keeps its
    # number in a traceback (run_all.sh names the line a failing script stopped at)
    if end < len(lines):
        marker = lines[end]
    else:                                      # the parameters cell ends the script
        marker = "# injected parameters\n"
        lines = lines[:-1] + [lines[-1].rstrip("\n") + "\n"] if lines else lines
    return "".join(lines[:end] + ["; ".join(injected) + "  " + marker] + lines[end + 1:])


def run_script(script: str | Path, params_file: str | Path) -> None:
    """Run ``script`` with the values of ``params_file`` (a profile YAML), from the script's folder."""
    script = Path(script).resolve()
    source = with_parameters(script, read_profile_file(Path(params_file)))
    os.environ.setdefault("MPLBACKEND", "Agg")
    cwd = Path.cwd()
    os.chdir(script.parent)                        # as papermill --cwd notebooks/
    try:
        exec(compile(source, str(script), "exec"), {"__name__": "__main__", "__file__": str(script)})  # noqa: S102
    finally:
        os.chdir(cwd)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m absa_lib.harness.notebook_script notebooks/NN_name.py PARAMS.yaml", file=sys.stderr)
        return 2
    try:
        run_script(argv[0], argv[1])
    except AbsaError as err:
        print(f"[notebook_script] error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
