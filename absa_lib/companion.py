"""Notebook-facing helpers: profiles, folders, a grid of runs with caching, deterministic figures.

The notebooks in ``notebooks/`` explain and call; what they need beyond one library call lives here.

* Profiles: ``params/<profile>.yaml`` holds one value per notebook parameter (papermill ``-f``);
  :func:`check_profile` says where a notebook's parameters differ from the profile it names.
* Folders: relative paths are resolved against the repository root (or the working directory when
  the package is installed outside a checkout, e.g. on Colab), so ``--cwd`` does not matter.
* Runs: :func:`run_grid` (from :mod:`absa_lib.grid`, re-exported here) trains every (spec, dataset,
  seed) with :func:`absa_lib.training.train`, which returns a cached run instantly when one with the
  same configuration exists. With ``allow_training=False`` (the ``render`` profile) it only
  collects the run records that exist.
* Figures: :func:`save_figure` writes PNG and PDF without timestamps or software versions, so the
  same numbers give the same bytes.
"""

from __future__ import annotations

import io
import sys
from dataclasses import dataclass
from pathlib import Path

from absa_lib.errors import AbsaError
from absa_lib.grid import (  # noqa: F401  (re-exported for the notebooks)
    RECORD_FILES,
    Spec,
    ablation_specs,
    ablation_variants,
    export_records,
    flatten,
    make_configs,
    other_attention_specs,
    run_grid,
    run_label,
    run_with_checkpoint,
    table_specs,
)
from absa_lib.paths import repo_root
from absa_lib.runs import atomic_write_bytes, atomic_write_json

PROFILES = ("smoke", "cpu", "gpu", "paper", "render")
# Every notebook's parameters cell has exactly these names; every params/<profile>.yaml sets them all.
PARAMETER_NAMES = ("profile", "backbone", "datasets", "seeds", "ablation_seeds", "epochs", "batch_size", "lr",
                   "max_length", "max_train_examples", "max_eval_examples", "eval_batch_size", "train_options",
                   "ablation_dataset",
                   "n_hist_examples", "allow_training", "force_retrain", "num_threads", "data_dir", "runs_dir",
                   "results_dir", "figures_dir", "reference_dir")
TRAIN_FIELDS = ("backbone", "epochs", "batch_size", "lr", "max_length", "max_train_examples", "max_eval_examples",
                "eval_batch_size")


# ----------------------------------------------------------------------------------------------
# profiles and folders


def params_dir() -> Path | None:
    root = repo_root()
    return root / "params" if root is not None and (root / "params").is_dir() else None


def load_profile(name: str) -> dict:
    """The values of ``params/<name>.yaml``."""
    import yaml

    folder = params_dir()
    if folder is None:
        raise AbsaError(f"profile {name!r}: no params/ folder (not running from a checkout); "
                        "set the notebook parameters by hand")
    path = folder / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in folder.glob("*.yaml")))
        raise AbsaError(f"{path}: no such profile; expected one of {known}")
    values = yaml.safe_load(path.read_text()) or {}
    if not isinstance(values, dict):
        raise AbsaError(f"{path}: expected a mapping of parameter names to values")
    return values


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


def train_base(params: dict) -> dict:
    """The TrainConfig fields that come from the notebook parameters (the rest varies per spec/seed):
    the budget parameters, then ``train_options`` (any other field: precision, batching, schedule)."""
    from absa_lib.config import TrainConfig

    options = dict(params.get("train_options") or {})
    grid_fields = {"dataset", "model", "aux", "preset", "sampler", "seed", "model_overrides", *TRAIN_FIELDS}
    unknown = sorted(set(options) - set(TrainConfig.__dataclass_fields__) | set(options) & grid_fields)
    if unknown:
        raise AbsaError(f"train_options: {unknown[0]!r} is not a TrainConfig field set there (the grid sets "
                        "dataset, model, aux, preset, sampler, seed and overrides; budgets have their own parameters)")
    return {**{k: params[k] for k in TRAIN_FIELDS}, **options}


def resolve_dir(path: str | Path, create: bool = True) -> Path:
    """An absolute folder: relative paths are taken from the repository root (else the cwd)."""
    p = Path(path).expanduser()
    if not p.is_absolute():
        p = (repo_root() or Path.cwd()) / p
    if create:
        p.mkdir(parents=True, exist_ok=True)
    return p.resolve()


@dataclass
class Folders:
    runs: Path
    results: Path
    figures: Path
    reference: Path


def folders(runs_dir: str, results_dir: str, figures_dir: str, reference_dir: str = "results/reference") -> Folders:
    """Resolve (and create) the folders a notebook reads and writes."""
    return Folders(resolve_dir(runs_dir), resolve_dir(results_dir), resolve_dir(figures_dir),
                   resolve_dir(reference_dir, create=False))


def set_threads(n: int) -> None:
    """Use ``n`` CPU threads in torch (0: keep torch's default). One thread is fastest for tiny
    models and on busy machines, where threads wait on each other."""
    import torch

    if n and n > 0:
        torch.set_num_threads(int(n))


def device_summary() -> str:
    import torch

    if torch.cuda.is_available():
        return f"cuda ({torch.cuda.get_device_name(0)})"
    return f"cpu ({torch.get_num_threads()} threads)"


# ----------------------------------------------------------------------------------------------
# data and files


def ensure_data(data_dir=None) -> None:
    """Check the benchmark files; download them (≈8.6 MB, checksummed) when they are missing."""
    from absa_lib.download import download, verify

    try:
        verify(data_dir)
    except AbsaError as err:
        print(f"[data] {err}: downloading")
        download(data_dir)


def save_figure(fig, figures_dir: str | Path, stem: str, formats: tuple[str, ...] = ("png", "pdf"),
                dpi: int = 150) -> list[Path]:
    """Save ``fig`` as ``<stem>.png`` and ``<stem>.pdf`` with no timestamps or software versions.

    PNG metadata ``{"Software": None}``, PDF ``{"Creator": None, "Producer": None,
    "CreationDate": None}`` (pytest-mpl's recipe): the same figure gives the same bytes.
    """
    meta = {"png": {"Software": None}, "pdf": {"Creator": None, "Producer": None, "CreationDate": None},
            "svg": {"Date": None, "Creator": None}}
    paths = []
    for fmt in formats:
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=dpi, metadata=meta.get(fmt), bbox_inches="tight")
        path = Path(figures_dir) / f"{stem}.{fmt}"
        atomic_write_bytes(path, buf.getvalue())
        paths.append(path)
    return paths


def save_json(obj, path: str | Path) -> Path:
    """Atomic, sorted, indented JSON (analysis arrays as lists)."""
    atomic_write_json(Path(path), obj)
    return Path(path)


def load_json(path: str | Path):
    from absa_lib.runs import read_json

    return read_json(Path(path))


def find_analysis(name: str, *folders_: Path) -> Path | None:
    """The first ``<folder>/analysis/<name>`` that exists (own results first, then the reference)."""
    for folder in folders_:
        path = Path(folder) / "analysis" / name
        if path.is_file():
            return path
    return None


def compute_or_load(name: str, dirs: Folders, compute, can_compute: bool, meta: dict | None = None):
    """Figure data: computed (and saved to ``<results>/analysis/<name>``) when a model is at hand,
    else read from ``<reference>/analysis/<name>`` (the render profile) and copied to results.

    Returns:
        ``(data, path written)``.
    """
    target = dirs.results / "analysis" / name
    if can_compute:
        record = {"meta": meta or {}, "data": compute()}
    else:
        source = find_analysis(name, dirs.reference)
        if source is None:
            raise AbsaError(f"{dirs.reference / 'analysis' / name}: no analysis arrays to render from and no "
                            "trained model; run a training profile (e.g. bash run_all.sh cpu) first")
        record = load_json(source)
        print(f"[analysis] {name}: loaded from {source}")
    save_json(record, target)
    return record["data"], target


def show_table(df, columns: list[str] | None = None):
    """Display a DataFrame in a notebook (plain text elsewhere)."""
    view = df if columns is None else df[columns]
    try:
        from IPython.display import display

        display(view)
    except ImportError:  # pragma: no cover
        print(view.to_string(), file=sys.stdout)


def show_markdown(text: str) -> None:
    """Render Markdown in a notebook (plain text elsewhere)."""
    try:
        from IPython.display import Markdown, display

        display(Markdown(text))
    except ImportError:  # pragma: no cover
        print(text)


def show_source(obj) -> None:
    """Show the source code of a library function or class (the code beside the equation)."""
    import inspect

    show_markdown(f"`{obj.__module__}.{obj.__qualname__}`\n```python\n{inspect.getsource(obj).rstrip()}\n```")


def finish(notebook: str, profile: str, dirs: Folders, outputs: list, runs: list = (), params: dict | None = None) -> None:
    """Record this notebook's outputs in ``<results>/MANIFEST.json`` and list them."""
    from absa_lib import manifest

    path = manifest.record(dirs.results, notebook, profile, outputs, [r.run_id for r in runs], params)
    print(f"[{notebook}] wrote {len(outputs)} files (profile {profile}); manifest: {path}")
    for p in outputs:
        print("   ", p)
