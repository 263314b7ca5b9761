"""``results/MANIFEST.json``: which file came from which notebook, with which runs and profile.

Each notebook's last cell calls :func:`record` with the files it wrote; ``run_all.sh`` then calls
``python -m absa_lib.harness.manifest --profile P`` (:func:`finalize`), which checks that every recorded
file exists, refreshes the checksums and lists files under ``results/`` and ``figures/`` that no
notebook claims. Paths are relative to the folder that holds ``results/`` (the repository root).
No timestamps: the same outputs give the same manifest.

Layout::

    {"profile": "cpu",
     "notebooks": {"03_qacg_bert": {"profile": ..., "parameters": {...}, "outputs": [...], "run_ids": [...]}},
     "files": {"results/table1_sentihood.csv": {"notebook": "03_qacg_bert", "sha256": ..., "bytes": ...}},
     "reference": [...files under results/reference/...], "unattributed": [...]}
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

from absa_lib.errors import AbsaError
from absa_lib.fileio import atomic_write_json

NAME = "MANIFEST.json"


def _base(results_dir: Path) -> Path:
    return Path(results_dir).resolve().parent


def _rel(path: Path, base: Path) -> str:
    return Path(os.path.relpath(Path(path).resolve(), base)).as_posix()


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def load(results_dir: str | Path) -> dict:
    path = Path(results_dir) / NAME
    if not path.is_file():
        return {"profile": None, "notebooks": {}, "files": {}, "reference": [], "unattributed": []}
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise AbsaError(f"{path}: not valid JSON ({err.msg}); delete it and rerun the notebooks") from None


def record(results_dir: str | Path, notebook: str, profile: str, outputs: list, run_ids: list | tuple = (),
           parameters: dict | None = None, changed: list | tuple = ()) -> Path:
    """Add (or replace) ``notebook``'s entry: its outputs with checksums, its runs and parameters.

    Args:
        results_dir: the folder that holds ``MANIFEST.json``.
        notebook: e.g. ``"03_qacg_bert"``.
        profile: the profile the notebook ran under.
        outputs: paths of the files it wrote (absolute or relative to the cwd).
        run_ids: ids of the runs its results come from.
        parameters: its parameter values (JSON-serialisable).
        changed: names of parameters whose values differ from ``profile``'s file; recorded as
            ``changed_parameters`` when there are any, so a profile's name never vouches for values
            it does not hold.

    Returns:
        The manifest's path.
    """
    results_dir = Path(results_dir)
    base = _base(results_dir)
    manifest = load(results_dir)
    manifest["profile"] = profile
    files = {}
    for p in outputs:
        p = Path(p)
        if not p.is_file():
            raise AbsaError(f"{p}: recorded as an output of {notebook} but it does not exist")
        files[_rel(p, base)] = {"notebook": notebook, "sha256": sha256(p), "bytes": p.stat().st_size}
    # a notebook's new entry replaces its old one (files it no longer writes drop out)
    manifest["files"] = {k: v for k, v in manifest.get("files", {}).items() if v.get("notebook") != notebook}
    manifest["files"].update(files)
    manifest["files"] = dict(sorted(manifest["files"].items()))
    manifest.setdefault("notebooks", {})[notebook] = {
        "profile": profile, "outputs": sorted(files), "run_ids": sorted(set(map(str, run_ids))),
        "parameters": json.loads(json.dumps(parameters or {}, default=str)),
        **({"changed_parameters": sorted(changed)} if changed else {})}
    manifest["notebooks"] = dict(sorted(manifest["notebooks"].items()))
    path = results_dir / NAME
    atomic_write_json(path, manifest)
    return path


def finalize(results_dir: str | Path, figures_dir: str | Path, profile: str | None = None) -> dict:
    """Refresh checksums, list reference and unclaimed files; raise if a recorded file is missing."""
    results_dir, figures_dir = Path(results_dir), Path(figures_dir)
    base = _base(results_dir)
    manifest = load(results_dir)
    if profile is not None:
        manifest["profile"] = profile
    missing = [f for f in manifest.get("files", {}) if not (base / f).is_file()]
    if missing:
        raise AbsaError(f"{results_dir / NAME}: recorded files are missing: {', '.join(missing)}; "
                        "rerun the notebooks that wrote them")
    for f, entry in manifest.get("files", {}).items():
        entry["sha256"], entry["bytes"] = sha256(base / f), (base / f).stat().st_size
    reference = results_dir / "reference"
    on_disk = sorted({_rel(p, base) for d in (results_dir, figures_dir) if d.is_dir()
                      for p in d.rglob("*") if p.is_file() and not p.name.startswith(".")})
    ref = [f for f in on_disk if reference.is_dir() and (base / f).resolve().is_relative_to(reference.resolve())]
    own = {_rel(results_dir / NAME, base), *(_rel(d / "README.md", base) for d in (results_dir, figures_dir))}  # docs
    manifest["reference"] = ref
    manifest["unattributed"] = [f for f in on_disk if f not in manifest.get("files", {}) and f not in ref
                                and f not in own and "/runs/" not in f"/{f}"]
    atomic_write_json(results_dir / NAME, manifest)
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m absa_lib.harness.manifest", description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default=None)
    parser.add_argument("--results-dir", default="results")
    parser.add_argument("--figures-dir", default="figures")
    args = parser.parse_args(argv)
    try:
        m = finalize(args.results_dir, args.figures_dir, args.profile)
    except AbsaError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"[manifest] {Path(args.results_dir) / NAME}: {len(m['files'])} files from "
          f"{len(m['notebooks'])} notebooks (profile {m['profile']})"
          + (f"; not claimed by any notebook: {', '.join(m['unattributed'])}" if m["unattributed"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
