"""Profiles: ``params/<name>.yaml`` holds one value per notebook parameter (papermill ``-f``).

Each notebook declares, in its cell tagged ``parameters``, only the parameters it uses; a profile
holds the union, so one file serves every notebook: ``papermill NB out -f params/cpu.yaml`` passes a
notebook the names it does not declare as well (papermill warns of each), and the notebook's
:func:`~absa_lib.harness.session.setup` skips those in one line; ``run_all.sh`` gives each notebook
only its own. The notebooks are the one list of parameter names: :func:`notebook_parameters` reads
them from the paired scripts.

    python -m absa_lib.harness.profiles params/cpu.yaml OUT.yaml [-p NAME VALUE ...]

writes ``params/cpu.yaml``, with the changes applied, to ``OUT.yaml``, which the grid runner and every
notebook then read, so they train the same runs. A name that no notebook declares, or an argument
other than ``-p NAME VALUE``, is an error before anything runs (a typo never passes silently).
Values are read as YAML: ``3``, ``true``, ``[42, 43]``, ``'{"group_by_length": true}'``.
"""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

import yaml

from absa_lib.checks import is_kind
from absa_lib.errors import AbsaError, one_line
from absa_lib.fileio import atomic_write_bytes
from absa_lib.models.backbones import BACKBONES
from absa_lib.paths import from_root, repo_root
from absa_lib.training.config import check_field_values
from absa_lib.training.records.layout import run_folders

PROFILES = ("smoke", "cpu", "gpu", "paper", "render")
PARTS = ("tables", "ablations", "other")    # a profile's grids (absa grid --part): notebooks 02-03, 04, 06
BUSY = ("wait", "skip")  # what absa grid does with a run that another process is training (--busy)


def params_dir() -> Path | None:
    root = repo_root()
    return root / "params" if root is not None and (root / "params").is_dir() else None


PARAMETERS_CELL = '# %% tags=["parameters"]'     # how jupytext writes the cell tagged "parameters"


def _parameters_cell(lines: list[str], script: Path) -> tuple[int, list[ast.stmt]]:
    """In a notebook's jupytext script (``lines``): (index of the line after the parameters cell,
    that cell's statements)."""
    starts = [i for i, line in enumerate(lines) if line.rstrip() == PARAMETERS_CELL]
    if len(starts) != 1:
        raise AbsaError(f"{script}: expected one cell marked {PARAMETERS_CELL!r}, found {len(starts)}")
    end = next((i for i in range(starts[0] + 1, len(lines)) if lines[i].startswith("# %%")), len(lines))
    return end, ast.parse("".join(lines[starts[0]:end])).body


def declared_parameters(lines: list[str], script: Path) -> tuple[int, set[str]]:
    """In a notebook's jupytext script (``lines``): (index of the line after the parameters cell,
    the names that cell assigns)."""
    end, body = _parameters_cell(lines, script)
    return end, _assigned(body)


def _assigned(body: list[ast.stmt]) -> set[str]:
    """The names the statements ``body`` assign."""
    names = set()
    for node in body:
        targets = [node.target] if isinstance(node, ast.AnnAssign) else getattr(node, "targets", [])
        names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def parameters_cell(script: Path) -> list[ast.stmt]:
    """The statements of the parameters cell of a notebook's paired script, parsed once while the
    file is unchanged (the driver asks for each notebook's several times: the names, the types)."""
    stat = script.stat()
    return _parsed_cell(script, stat.st_mtime_ns, stat.st_size)


@functools.cache
def _parsed_cell(script: Path, mtime_ns: int, size: int) -> list[ast.stmt]:
    return _parameters_cell(script.read_text(encoding="utf-8").splitlines(keepends=True), script)[1]


def _scripts() -> list[Path]:
    """The notebooks' paired scripts ``notebooks/NN_*.py`` (none outside a checkout)."""
    root = repo_root()
    return sorted((root / "notebooks").glob("[0-9][0-9]_*.py")) if root is not None else []


def parameter_annotations() -> dict[str, str]:
    """``{parameter name: its annotation}`` (``int``, ``Optional[int]``, ``list``, ...) as the
    notebooks' parameters cells declare it (the first notebook's, when several declare a name)."""
    found: dict[str, str] = {}
    for path in _scripts():
        for node in parameters_cell(path):
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                found.setdefault(node.target.id, ast.unparse(node.annotation))
    return found


_KINDS = {"str": str, "list": list, "dict": dict, "bool": bool, "int": int, "float": (int, float)}


def check_values(params: dict, source: str) -> None:
    """Each value in ``params`` of the type its parameters cell declares (``None`` where it says
    ``Optional``): ``-p seeds 42`` or ``datasets: sentihood`` would otherwise reach the notebooks
    and the grid as an int or a string. Outside a checkout (no notebooks) nothing is known to check."""
    annotations = parameter_annotations()
    for name, value in params.items():
        note = annotations.get(name, "")
        optional = note.startswith("Optional[")
        base = note.removeprefix("Optional[").removesuffix("]") if optional else note
        base, _, item = base.partition("[")                    # list[int]: a list of whole numbers
        kind, item = _KINDS.get(base), item.removesuffix("]")
        if kind is None or (optional and value is None):
            continue
        if not is_kind(value, kind):
            expected = {list: "a list, [a, b] in YAML", dict: "a mapping, {} in YAML"}.get(kind, base)
            raise AbsaError(f"{source}: {name} is {value!r}, expected {expected}"
                            + (" (or null: all)" if optional else ""))
        odd = [v for v in value if not is_kind(v, _KINDS[item])] if kind is list and item in _KINDS else []
        if odd:
            one, many = _NAMES[item]
            raise AbsaError(f"{source}: {name} is {value!r}: {odd[0]!r} is not {one}; expected a list of {many}")


BENCHMARKS = ("sentihood", "semeval")        # absa_lib.data.datasets.DATASETS: what the notebooks' tables are of


def check_ranges(params: dict, source: str) -> None:
    """The values of the right type (:func:`check_values`) in range: each of ``params`` that names a
    TrainConfig field as a TrainConfig checks it (``epochs: 0``), and the notebooks' own parameters
    (``n_hist_examples: 0``, ``num_threads: -1``, ``datasets: [foo]``, ``seeds: []``), so that a profile
    or a ``-p`` change is refused before any notebook runs, not by a cell in the middle of one."""
    check_field_values({k: v for k, v in params.items() if k != "train_options"}, source)
    if isinstance(params.get("train_options"), dict):
        check_field_values(params["train_options"], source if source.startswith("-p ") else f"{source} train_options")

    def refuse(name: str, expected: str) -> None:
        raise AbsaError(f"{source}: {name} is {params[name]!r}, expected {expected}")
    for name in ("runs_dir", "results_dir", "figures_dir", "reference_dir", "data_dir"):
        folder = params.get(name)
        if not isinstance(folder, str):
            continue
        if "\0" in folder:
            refuse(name, "a folder's path (it holds a NUL character)")
        try:
            Path(folder).expanduser()
        except RuntimeError:                        # ~nosuchuser/...: no home folder to expand it to
            refuse(name, "a folder's path; its ~user names no user here (give the path in full)")
    backbone = params.get("backbone")
    if isinstance(backbone, str) and backbone not in BACKBONES and "/" not in backbone and not Path(backbone).is_dir():
        refuse("backbone", f"one of {', '.join(BACKBONES)}, or a model folder's path")
    for name in ("n_hist_examples",):
        if is_kind(params.get(name), int) and params[name] < 1:
            refuse(name, "a whole number of examples, 1 or more")
    if is_kind(params.get("num_threads"), int) and params["num_threads"] < 0:
        refuse("num_threads", "a number of threads, 0 (torch's default) or more")
    for name in ("datasets", "ablation_dataset"):
        given = params.get(name)
        values = given if isinstance(given, list) else [given] if isinstance(given, str) else None
        if values is not None and (not values or any(v not in BENCHMARKS for v in values)):
            refuse(name, f"{'one of' if name == 'ablation_dataset' else 'a non-empty list of'} {' and '.join(BENCHMARKS)}")
    for name in ("seeds", "ablation_seeds"):
        seeds = params.get(name)
        if isinstance(seeds, list) and all(is_kind(v, int) for v in seeds):
            if not seeds:
                refuse(name, "one seed or more, e.g. [42]")
            if any(v < 0 for v in seeds):
                refuse(name, "seeds of 0 or more")
            if len(set(seeds)) < len(seeds):
                refuse(name, "each seed once (a seed twice is one run, counted twice)")


_NAMES = {"int": ("a whole number", "whole numbers"), "str": ("a string", "strings"),
          "float": ("a number", "numbers"), "bool": ("true or false", "true or false values")}


def notebook_parameters() -> dict[str, list[str]]:
    """``{parameter name: [notebooks that declare it]}`` over the notebooks' paired scripts
    ``notebooks/NN_*.py`` (a test keeps them in sync with the ``.ipynb`` files)."""
    scripts = _scripts()
    if not scripts:
        raise AbsaError("no notebooks/ folder (not running from a checkout): the parameter names are unknown")
    names: dict[str, list[str]] = {}
    for path in scripts:
        for name in sorted(_assigned(parameters_cell(path))):
            names.setdefault(name, []).append(path.stem)
    return names


def read_profile_file(path: Path) -> dict:
    """The parameter values in a profile YAML file."""
    path = Path(path)
    if path.is_dir():
        raise AbsaError(f"{path}: a folder, not a profile file; give the path of a .yaml profile file "
                        "(e.g. params/smoke.yaml) or a profile's name")
    if not path.is_file():
        raise AbsaError(f"{path}: profile file not found")
    try:
        values = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError) as err:
        raise AbsaError(f"{path}: cannot be read as a YAML profile ({one_line(err)}); give a readable .yaml "
                        "profile file (copy params/smoke.yaml)") from None
    except yaml.YAMLError as err:
        raise AbsaError(f"{path}: not valid YAML ({getattr(err, 'problem', err)})") from None
    except RecursionError:                      # '[' * 5000: no profile nests so deep
        raise AbsaError(f"{path}: YAML nested too deep to be a profile; copy params/smoke.yaml and change it") from None
    if not isinstance(values, dict):
        raise AbsaError(f"{path}: expected a mapping of parameter names to values")
    known = parameter_annotations()                 # empty outside a checkout: nothing to check against
    unknown = sorted(set(values) - set(known)) if known else []
    if unknown:                                     # a misspelt name would be ignored, silently
        raise AbsaError(f"{path}: {', '.join(map(str, unknown))}: no notebook has this parameter; expected names "
                        "as in params/smoke.yaml")
    check_values(values, str(path))
    check_ranges(values, str(path))
    return values


def profile_path(name: str) -> Path:
    """``params/<name>.yaml``, or ``name`` itself when it is a YAML file's path."""
    if Path(name).suffix in (".yaml", ".yml"):
        return Path(name)
    folder = params_dir()
    if folder is None:
        raise AbsaError(f"profile {name!r}: no params/ folder (not running from a checkout); "
                        "set the notebook parameters by hand")
    path = folder / f"{name}.yaml"
    if not path.is_file() and Path(name).exists():     # a path, but not a profile file
        raise AbsaError(f"{name}: {'a folder' if Path(name).is_dir() else 'not a .yaml file'}; give a profile's name "
                        "(smoke, cpu, gpu, paper, render) or the path of a .yaml profile file")
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in folder.glob("*.yaml")))
        raise AbsaError(f"{path}: no such profile; expected one of {known}")
    return path


def load_profile(name: str) -> dict:
    """The values of ``params/<name>.yaml``."""
    return read_profile_file(profile_path(name))


def check_profile(profile: str, params: dict, verbose: bool = True) -> list[str]:
    """Names of parameters whose value differs from ``params/<profile>.yaml`` (and say so)."""
    try:
        expected = load_profile(profile)
    except AbsaError as err:
        if verbose:
            print(f"[profile] {err}")
        return []
    differ = sorted(k for k, v in expected.items() if k in params and params[k] != v)
    if verbose:
        if differ:
            print(f"[profile] '{profile}' with changed parameters: "
                  + ", ".join(f"{k}={params[k]!r} (profile: {expected[k]!r})" for k in differ))
        else:
            print(f"[profile] '{profile}': parameters as in params/{profile}.yaml")
    return differ


GRID_KEYS = ("datasets", "seeds", "ablation_dataset", "ablation_seeds", "runs_dir")   # what a grid reads


def check_grid_keys(params: dict, path: Path) -> None:
    """A profile a grid trains from must set the keys it reads (a hand-written one may not)."""
    missing = [k for k in GRID_KEYS if k not in params]
    if missing:
        raise AbsaError(f"{path}: sets no {', '.join(missing)}, which the grid needs; a profile gives every "
                        "notebook parameter a value (copy params/smoke.yaml and change it)")


def with_changes(path: Path, args: list[str]) -> dict:
    """The profile at ``path`` with ``-p NAME VALUE`` changes applied and checked."""
    params = read_profile_file(path)
    known = None
    i = 0
    while i < len(args):
        if args[i] not in ("-p", "--parameters"):
            raise AbsaError(f"unexpected argument {args[i]!r}: after the profile, run_all.sh takes only "
                            "`-p NAME VALUE` changes of notebook parameters")
        if i + 2 >= len(args):
            raise AbsaError(f"`{' '.join(args[i:])}` needs a NAME and a VALUE")
        name, raw = args[i + 1], args[i + 2]
        known = known or notebook_parameters()
        if name not in known:
            raise AbsaError(f"-p {name}: no notebook has this parameter; expected one of {', '.join(known)}")
        try:
            params[name] = yaml.safe_load(raw)
        except yaml.YAMLError as err:
            raise AbsaError(f"-p {name} {raw!r}: not a value ({err.problem})") from None
        except RecursionError:
            raise AbsaError(f"-p {name}: a value nested too deep to be a parameter") from None
        check_values({name: params[name]}, f"-p {name} {raw}")
        check_ranges({name: params[name]}, f"-p {name} {raw}")
        i += 3
    return params


def write_with_changes(path: Path, out: Path, args: list[str]) -> dict:
    """:func:`with_changes`, written to ``out`` (what the grid and the notebooks then read), and returned."""
    params = with_changes(Path(path), args)
    atomic_write_bytes(Path(out), yaml.safe_dump(params, sort_keys=False).encode())
    return params


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python -m absa_lib.harness.profiles PROFILE.yaml OUT.yaml [-p NAME VALUE ...]", file=sys.stderr)
        return 2
    try:
        write_with_changes(Path(argv[0]), Path(argv[1]), argv[2:])
    except AbsaError as err:
        print(f"[run_all] error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


def check_runs_to_draw(runs_dir: str | Path, profile: str) -> None:
    """A profile that trains nothing (``allow_training: false``, e.g. render) draws every table and figure
    from the finished runs in ``runs_dir``: with none there (an empty folder, a typo, the notebooks'
    own default), it would write empty tables over the committed ones. Refused in one line, and the
    folder is not created."""
    runs = from_root(runs_dir).resolve()
    if not runs.is_dir():
        why = "no such folder"
    elif not any(complete for _, complete in run_folders(runs)):
        why = "no finished run records in it"
    else:
        return
    raise AbsaError(f"runs_dir {runs}: {why}; profile {profile} trains nothing (allow_training: false), so its "
                    "tables and figures would be empty and would replace the committed ones. Give runs_dir the "
                    "folder of the records (results/reference/runs), or run a profile that trains")
