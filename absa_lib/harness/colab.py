"""Colab: the notebooks' install cell and their "Open in Colab" links, all written from the one
declared repository address, :data:`absa_lib._version.REPOSITORY`.

A notebook opened on Colab from the repository's page runs in a kernel that has torch, transformers
and Jupyter but not this package. Each notebook's first code cell (:func:`install_cell`) then clones
the repository, runs ``scripts/colab_install.py`` from the clone (the package, not editable, and the
offline backbone, leaving every package Colab installed at its version) and works from the clone,
so the relative folders of the parameters cell are the checkout's. Where ``import absa_lib`` works
(a checkout's environment, ``run_all.sh``, papermill) the cell does nothing. A runtime's disk goes
with the runtime: ``keep_runs_on_drive = True`` puts the checkout's ``executed/`` (the runs, tables
and figures of every training profile) on Google Drive, where a new runtime finds and resumes them.

While the address is not declared (empty), no link is written and the cell, outside a checkout,
asks for ``$ABSA_REPOSITORY`` or a clone. After declaring it::

    python -m absa_lib.harness.colab --write     # the README's links, each notebook's link and cell
    python -m absa_lib.harness.colab --check     # what --write would change (tests/test_colab.py)
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from pathlib import Path

from absa_lib._version import REPOSITORY

BRANCH = "main"
COLAB = "https://colab.research.google.com/github/{path}/blob/{branch}/notebooks/{notebook}"
BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
README_BLOCK = re.compile(r"<!-- colab -->\n.*?<!-- /colab -->\n", re.S)
INSTALL_CELL_NAMES = ("keep_runs_on_drive",)    # the install cell's globals (its others start with _)
_GITHUB = re.compile(r"^(?:https://github\.com/|git@github\.com:)([\w.-]+/[\w.-]+?)(?:\.git)?/?$")

INSTALL_CELL = '''
# Colab, or any Jupyter kernel without the companion: clone it and install it with its backbone,
# leaving the kernel's own packages as they are (scripts/colab_install.py); nothing happens where
# `import absa_lib` works. On Colab, keep_runs_on_drive = True keeps the runs, tables and figures
# (executed/) on Google Drive, where a new runtime finds them and resumes unfinished runs.
keep_runs_on_drive = False
import importlib.util
import os
import subprocess
import sys

if importlib.util.find_spec("absa_lib") is None:
    _repository = os.environ.get("ABSA_REPOSITORY") or "{repository}"   # absa_lib/_version.py
    if not os.path.isdir("absa-companion"):
        if not _repository:
            raise RuntimeError("absa_lib is not installed and the companion's address is not declared: set "
                               "os.environ['ABSA_REPOSITORY'] to its git address, or clone it here as absa-companion/")
        subprocess.run(["git", "clone", "--quiet", "--depth", "1", _repository, "absa-companion"], check=True)
    _done = subprocess.run([sys.executable, "absa-companion/scripts/colab_install.py"], capture_output=True, text=True)
    print(_done.stdout + _done.stderr)                # a kernel does not show a child's output by itself
    if _done.returncode:
        raise RuntimeError("the companion could not be installed: the lines above say why")
    importlib.invalidate_caches()
    os.chdir("absa-companion")          # the parameters' relative folders are the checkout's
if keep_runs_on_drive and not os.path.islink("executed"):
    from google.colab import drive
    drive.mount("/content/drive")
    os.makedirs("/content/drive/MyDrive/absa-companion/executed", exist_ok=True)
    os.symlink("/content/drive/MyDrive/absa-companion/executed", "executed")'''


def github_path(repository: str = REPOSITORY) -> str | None:
    """``OWNER/NAME`` of a GitHub address (the only kind Colab opens notebooks from), else None."""
    match = _GITHUB.match(repository.strip())
    return match.group(1) if match else None


def colab_link(notebook: str, repository: str = REPOSITORY) -> str | None:
    """The address that opens ``notebook`` (``01_data.ipynb``) on Colab, or None without a GitHub address."""
    path = github_path(repository)
    return COLAB.format(path=path, branch=BRANCH, notebook=notebook) if path else None


def badge(notebook: str, repository: str = REPOSITORY) -> str:
    """The markdown "Open in Colab" badge of ``notebook`` ("" without a GitHub address)."""
    link = colab_link(notebook, repository)
    return f"[![Open In Colab]({BADGE})]({link})" if link else ""


def install_cell(repository: str = REPOSITORY) -> str:
    """The source of every notebook's first code cell."""
    return INSTALL_CELL[1:].replace("{repository}", repository)     # from its second line


def readme_block(notebooks: list[str], repository: str = REPOSITORY) -> str:
    """The README's Colab paragraph: a link per notebook, or, without the address, the one place that says so."""
    if github_path(repository):
        links = " · ".join(f"[{Path(nb).stem}]({colab_link(nb, repository)})" for nb in notebooks)
        body = (f"[![Open In Colab]({BADGE})]({colab_link(notebooks[0], repository)}) **On Colab**, one click, "
                f"then *Run all*: {links}.")
    else:
        body = ("**On Colab**: the repository's public address is not declared yet (`REPOSITORY` in "
                "`absa_lib/_version.py`), so there are no \"Open in Colab\" links; "
                "`python -m absa_lib.harness.colab --write` adds them once it is.")
    body += (" Each notebook's first cell installs the companion, its backbone and data on the runtime without "
             "touching Colab's own packages; GPU runtimes train in fp16 on a T4, bf16 from the A100 on "
             "([`docs/running.md`](docs/running.md#colab)).")
    wrapped = textwrap.fill(body, width=100, break_long_words=False, break_on_hyphens=False)
    return f"<!-- colab -->\n{wrapped}\n<!-- /colab -->\n"


def _py_cells(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, header)`` of each cell of a percent-format notebook script (after its YAML header)."""
    starts = [m.start() for m in re.finditer(r"^# %%.*$", text, re.M)]
    return [(s, e, text[s:text.index("\n", s)]) for s, e in zip(starts, [*starts[1:], len(text)], strict=True)]


def rewritten_script(text: str, notebook: str, repository: str = REPOSITORY) -> str:
    """A percent-format notebook script with its Colab badge cell and install cell as declared."""
    cells = _py_cells(text)
    head = text[:cells[0][0]]
    cells = [c for c in cells if not (c[2] == "# %% [markdown]" and "colab-badge" in text[c[0]:c[1]])]
    body = [text[s:e] for s, e, _ in cells]
    code = next(i for i, (_, _, h) in enumerate(cells) if not h.startswith("# %% [markdown]"))
    if "find_spec(\"absa_lib\")" in body[code]:
        body[code] = "# %%\n" + install_cell(repository) + "\n\n"
    else:                                          # no install cell yet: one before the first code cell
        body.insert(code, "# %%\n" + install_cell(repository) + "\n\n")
    link = badge(notebook, repository)
    return head + (f"# %% [markdown]\n# {link}\n\n" if link else "") + "".join(body)


def _paired_notebook(script: Path) -> Path:
    """Write ``script``'s notebook as ``jupytext --sync`` then ``nbstripout`` would (jupytext.toml); its path."""
    import jupytext
    from nbstripout import strip_output

    notebook = strip_output(jupytext.read(script), keep_output=False, keep_count=False, keep_id=False)
    pair = script.with_suffix(".ipynb")
    pair.write_text(jupytext.writes(notebook, fmt="ipynb") + "\n")
    return pair


def write(root: Path, repository: str = REPOSITORY) -> list[Path]:
    """Write the links and install cells of ``root``'s notebooks and README; the files changed."""
    changed = []
    scripts = sorted((root / "notebooks").glob("[0-9][0-9]_*.py"))
    for script in scripts:
        text = script.read_text()
        new = rewritten_script(text, script.with_suffix(".ipynb").name, repository)
        if new != text:
            script.write_text(new)
            changed += [script, _paired_notebook(script)]
    readme = root / "README.md"
    text = readme.read_text()
    new = README_BLOCK.sub(lambda _: readme_block([s.with_suffix(".ipynb").name for s in scripts], repository), text)
    if new != text:
        readme.write_text(new)
        changed.append(readme)
    return changed


def check(root: Path, repository: str = REPOSITORY) -> list[str]:
    """What :func:`write` would change in ``root`` (empty: the links and cells are as declared)."""
    problems = []
    for script in sorted((root / "notebooks").glob("[0-9][0-9]_*.py")):
        if rewritten_script(script.read_text(), script.with_suffix(".ipynb").name, repository) != script.read_text():
            problems.append(f"{script.relative_to(root)}: its Colab link or install cell is not the declared one")
    readme = (root / "README.md").read_text()
    blocks = README_BLOCK.findall(readme)
    names = [s.with_suffix(".ipynb").name for s in sorted((root / "notebooks").glob("[0-9][0-9]_*.py"))]
    if blocks != [readme_block(names, repository)]:
        problems.append("README.md: its <!-- colab --> paragraph is not the declared one")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m absa_lib.harness.colab", description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="write the links and install cells")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[2], help="the checkout")
    args = parser.parse_args(argv)
    if args.write:
        for path in write(args.root):
            print(f"wrote {path}")
        return 0
    problems = check(args.root)
    print("\n".join(problems) or "the Colab links and install cells are as declared")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
