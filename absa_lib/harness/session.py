"""A notebook's session: its parameters, folders, threads and data, and the record of what it wrote.

Every notebook opens with its parameters cell and one call::

    session = setup("04_ablations", globals())

:func:`setup` takes the parameters the notebook declares (the names annotated in its parameters
cell, with the values papermill injected), says where they differ from the profile they name
(:func:`absa_lib.harness.profiles.check_profile`), resolves the folders (relative paths are taken from
the repository root, or the working directory when the package is installed outside a checkout,
e.g. on Colab, so ``--cwd`` does not matter), sets torch's threads and prints where things go.
:meth:`Session.finish` records the files the notebook wrote in ``<results>/MANIFEST.json``.
Figure and table data go through :func:`compute_or_load` (computed with a model, else read from
the reference) and the ``show_*`` helpers.
"""

from __future__ import annotations

import difflib
import sys
from dataclasses import dataclass, field
from pathlib import Path

from absa_lib.data.download import download, verify
from absa_lib.errors import AbsaError
from absa_lib.fileio import atomic_write_json, read_json
from absa_lib.harness import manifest
from absa_lib.harness.colab import INSTALL_CELL_NAMES
from absa_lib.harness.grid import train_base
from absa_lib.harness.profiles import (
    check_profile,
    check_ranges,
    check_runs_to_draw,
    check_values,
    notebook_parameters,
)
from absa_lib.paths import ensure_writable, from_root
from absa_lib.reports.dataset_facts import Benchmarks, standing_facts
from absa_lib.training.config import epochs_text
from absa_lib.training.records import RunFolder


@dataclass
class Folders:
    results: Path
    figures: Path
    runs: Path | None = None          # run folders (notebooks that train or read runs)
    reference: Path | None = None     # committed run records and analysis arrays (render reads them)


@dataclass
class Session:
    """What a notebook works with: ``params`` (its declared parameters), ``dirs``, ``data_dir`` (None:
    ``$ABSA_DATA_DIR``, then the download folder), ``benchmarks`` (what the tables read of the raw files,
    :class:`~absa_lib.reports.dataset_facts.Benchmarks`), ``outputs``, the files it wrote, and ``changed``,
    the parameters whose values differ from the profile that ``params["profile"]`` names."""

    notebook: str
    params: dict
    dirs: Folders
    data_dir: str | None
    benchmarks: Benchmarks
    outputs: list = field(default_factory=list)
    changed: list = field(default_factory=list)

    @property
    def train_base(self) -> dict:
        """The TrainConfig fields shared by every run of this notebook (:func:`absa_lib.harness.grid.train_base`)."""
        return train_base(self.params)

    def finish(self, runs: list = ()) -> None:
        """Record this notebook's outputs (and the runs they come from) in ``<results>/MANIFEST.json``."""
        profile = self.params["profile"]
        path = manifest.record(self.dirs.results, self.notebook, profile, self.outputs, [r.run_id for r in runs],
                               self.params, self.changed)
        changed = f", changed: {', '.join(self.changed)}" if self.changed else ""
        print(f"[{self.notebook}] wrote {len(self.outputs)} files (profile {profile}{changed}); manifest: {path}")
        for p in self.outputs:
            print("   ", p)


def setup(notebook: str, namespace: dict) -> Session:
    """The session of ``notebook``, from the parameters annotated in ``namespace`` (its ``globals()``),
    with the benchmark files checked (downloaded when missing), so a notebook also runs on its own.

    A profile file holds every notebook's parameters, so ``papermill NB out -f params/cpu.yaml`` also
    gives a notebook those it does not declare: they are skipped (left unused), in one line naming
    them. Any other name given to the notebook (papermill's ``-p seed 7`` for ``seeds``,
    which papermill only warns about) is refused, naming the declared ones; in Jupyter every
    :class:`~absa_lib.errors.AbsaError` from here on shows as its one line, not a traceback."""
    one_line_errors()
    params = {name: namespace[name] for name in namespace.get("__annotations__", {})}
    if "profile" not in params:
        raise AbsaError(f"{notebook}: its parameters cell declares no `profile: str = ...`")
    unknown = sorted(name for name, value in namespace.items()
                     if name not in params and not name.startswith("_") and name not in _SHELL_NAMES
                     and isinstance(value, (str, int, float, bool, list, dict, type(None))))
    known = _profile_keys() if unknown else set()
    others = [name for name in unknown if name in known]             # other notebooks' parameters: unused
    if others:
        print(f"[profile] not parameters of {notebook}, skipped (a profile holds every notebook's): "
              + ", ".join(others))
        unknown = [name for name in unknown if name not in known]
    if unknown:
        close = difflib.get_close_matches(unknown[0], params, n=1)
        raise AbsaError(f"{notebook}: no parameter {unknown[0]!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
                        + f"; its parameters: {', '.join(params)}")
    try:
        check_values(params, f"{notebook}: parameter")
    except AbsaError as err:                        # papermill -p seeds '[7]' passes the text '[7]'
        raise AbsaError(f"{err} (papermill's -p passes text: give lists and mappings as YAML with -y, "
                        "e.g. -y '{seeds: [7]}')") from None
    check_ranges(params, f"{notebook}: parameter")       # epochs -1, n_hist_examples 0: here, not in a later cell
    changed = check_profile(params["profile"], params)
    set_threads(params.get("num_threads", 0))

    def folder(name: str, create: bool = True) -> Path | None:
        return resolve_dir(params[name], create) if name in params else None

    draws_only = params.get("allow_training") is False     # render: every table from the records there
    if draws_only and "runs_dir" in params:
        check_runs_to_draw(params["runs_dir"], params["profile"])
    dirs = Folders(folder("results_dir"), folder("figures_dir"), folder("runs_dir", create=not draws_only),
                   folder("reference_dir", create=False))
    print(f"device: {device_summary()}")
    print("\n".join(f"{name}: {path}" for name, path in vars(dirs).items() if path is not None))
    data_dir = params.get("data_dir") or None
    trains = params.get("allow_training", False)        # 01_data never trains
    benchmarks = open_benchmarks(data_dir, None if trains else dirs.reference)
    if benchmarks.line:
        print(benchmarks.line)
    if params.get("allow_training") is False and dirs.runs is not None:
        print(f"nothing is trained here (profile {params['profile']}): every table and figure is drawn from the "
              f"run records in {dirs.runs}, with the seeds and budget each row states; the training parameters above "
              "(seeds, epochs, ...) are those a training profile would use")
    return Session(notebook, params, dirs, data_dir, benchmarks, changed=changed)


# what IPython puts in a notebook's globals, and the install cell's switch (absa_lib.harness.colab)
_SHELL_NAMES = {"In", "Out", "exit", "quit", "get_ipython", "open", *INSTALL_CELL_NAMES}


def _profile_keys() -> set[str]:
    """The parameter names of all the notebooks, which a profile file holds (none outside a checkout)."""
    try:
        return set(notebook_parameters())
    except AbsaError:
        return set()


def one_line_errors() -> None:
    """In IPython (Jupyter, papermill): show an :class:`AbsaError` as its one line (``AbsaError: ...``),
    which is what it was written to be, instead of the traceback above it. Elsewhere nothing changes."""
    try:
        shell = get_ipython()  # type: ignore[name-defined]  # noqa: F821 (defined only inside IPython)
    except NameError:
        return
    shell.set_custom_exc((AbsaError,), lambda shell, etype, value, tb, tb_offset=None:
                         shell.showtraceback((etype, value, tb), exception_only=True))


def resolve_dir(path: str | Path, create: bool = True) -> Path:
    """An absolute folder: relative paths are taken from the repository root (else the cwd)."""
    p = from_root(path)
    if create:                                     # a file in the way is named, with the fix (not "File exists")
        ensure_writable(p, "give the parameter a folder you can write to")
    return p.resolve()


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


def ensure_data(data_dir=None) -> None:
    """Check the benchmark files; download them (≈8.6 MB, checksummed) when they are missing."""

    try:
        verify(data_dir)
    except AbsaError as err:
        print(f"[data] {err}: downloading")
        download(data_dir)


def open_benchmarks(data_dir=None, reference: Path | None = None) -> Benchmarks:
    """The benchmark facts a notebook reads: the raw files (downloaded when missing); for a notebook
    that only draws (``reference``: its committed records), the reference's facts file when the raw
    files are absent, so render runs offline (:meth:`Benchmarks.open`)."""
    if standing_facts(data_dir, reference) is not None:
        return Benchmarks.open(data_dir, reference)       # a stale or edited facts file: refused, not passed over
    ensure_data(data_dir)
    return Benchmarks(data_dir)


def save_json(obj, path: str | Path) -> Path:
    """Atomic, sorted, indented JSON (analysis arrays as lists)."""
    atomic_write_json(Path(path), obj)
    return Path(path)


def load_json(path: str | Path):
    return read_json(Path(path))


def find_analysis(name: str, folder: Path) -> Path | None:
    """``<folder>/analysis/<name>`` (in the reference: arrays render can draw), if it exists."""
    path = Path(folder) / "analysis" / name
    return path if path.is_file() else None


def compute_or_load(name: str, dirs: Folders, compute, can_compute: bool, meta: dict | None = None):
    """Figure data: computed (and saved to ``<results>/analysis/<name>``) when a model is at hand,
    else read from ``<reference>/analysis/<name>`` (the render profile) and copied to results.
    ``meta`` names the run(s) the arrays come from (see :func:`check_sources`).

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
        check_sources(record, source, dirs.reference)
        print(f"[analysis] {name}: loaded from {source}, computed from {sources_text(record['meta'])}")
    save_json(record, target)
    return record["data"], target


def sources_text(meta: dict) -> str:
    """The run(s) an analysis file's ``meta`` names, in words: ``run bc949283ced2 (minilm, 25 epochs,
    seed 44)``, or ``runs <label> <run id>, ...`` for several."""
    if "run_id" in meta:
        about = [meta.get("backbone"), epochs_text(meta["epochs"]) if "epochs" in meta else None,
                 f"seed {meta['seed']}" if "seed" in meta else None]
        about = ", ".join(str(a) for a in about if a is not None)
        return f"run {meta['run_id']}" + (f" ({about})" if about else "")
    if not meta:
        return "no named run"
    return "runs " + ", ".join(f"{label} {run_id}" for label, run_id in meta.items())


def source_runs(record, source: Path) -> list[str]:
    """The run ids an analysis file names in its ``meta`` (``{"run_id": ...}`` for one run, ``{label:
    run_id}`` for several), after checking that ``record`` is ``{data, meta}`` as compute_or_load
    writes it (``source`` names the file in the error)."""
    if not isinstance(record, dict) or "data" not in record or not isinstance(record.get("meta"), dict):
        raise AbsaError(f"{source}: expected a JSON object with 'data' and a 'meta' object, as compute_or_load "
                        "writes it; restore the file from git or recompute it with a training profile")
    meta = record["meta"]
    return [meta["run_id"]] if "run_id" in meta else [v for v in meta.values() if isinstance(v, str)]


def check_sources(record, source: Path, reference: Path) -> None:
    """Arrays read from the reference must come from runs the reference still holds (:func:`source_runs`).
    Arrays whose run was retrained under another identity or removed are stale; rendering them would
    pair a figure with a model the tables no longer report."""
    for run_id in source_runs(record, source):
        if not any(RunFolder(f).marked_complete() for f in Path(reference).glob(f"runs/*/*/{run_id}")):
            raise AbsaError(f"{source}: computed from run {run_id}, which {Path(reference) / 'runs'} does not hold "
                            "(complete); the arrays are stale: recompute them with a training profile "
                            "(e.g. bash run_all.sh cpu) or restore that run's records")


def show_table(df, columns: list[str] | None = None):
    """Display a DataFrame in a notebook (plain text elsewhere)."""
    view = df if columns is None else df[columns]
    try:
        from IPython.display import display

        display(view)
    except ImportError:  # pragma: no cover
        print(view.to_string(), file=sys.stdout)


def show_markdown(text: str) -> None:
    """Render Markdown in a notebook; elsewhere (the paired script, ``absa_lib.harness.notebook_script``)
    print the text, where IPython's ``display`` would print ``<IPython.core.display.Markdown object>``."""
    try:
        from IPython import get_ipython
        from IPython.display import Markdown, display
    except ImportError:  # pragma: no cover
        print(text)
        return
    if get_ipython() is None:
        print(text)
    else:
        display(Markdown(text))


def show_source(obj) -> None:
    """Show the source code of a library function or class (the code beside the equation)."""
    import inspect

    show_markdown(f"`{obj.__module__}.{obj.__qualname__}`\n```python\n{inspect.getsource(obj).rstrip()}\n```")


def show_definition(module, name: str) -> None:
    """Show the statement of ``module`` that defines ``name`` (e.g. a list of specs), as written."""
    import ast
    import inspect

    source = inspect.getsource(module)
    for node in ast.parse(source).body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            show_markdown(f"`{module.__name__}.{name}`\n```python\n{ast.get_source_segment(source, node)}\n```")
            return
    raise AbsaError(f"{module.__name__} does not define {name}")
