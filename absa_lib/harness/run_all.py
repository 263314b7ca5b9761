"""``run_all.sh``'s driver: the profile, the data, the grid, and each notebook with its line.

``bash run_all.sh [PROFILE] [-p NAME VALUE ...]`` sets up the interpreter and hands over to::

    python -m absa_lib.harness.run_all [--python PY] [PROFILE] [-p NAME VALUE ...]

which, in order: chooses the profile when none is given (``gpu`` with CUDA, else ``render`` when
``results/reference/`` holds runs, else ``cpu``), writes ``executed/<profile>/params.yaml`` (the
profile with the ``-p`` changes, checked: :mod:`absa_lib.harness.profiles`), checks the benchmark
files (the ``data`` step), trains the profile's grid of runs when it allows training (``absa grid``;
all of it to ``grid.log``, each finished run's "runs done, N left" line on the terminal), then runs
each notebook with papermill, or its paired script (``python -m absa_lib.harness.notebook_script``)
without papermill or with ``ABSA_NOTEBOOKS=scripts``, all of the run's output in
``executed/<profile>/NN_name.log``, one line per notebook on the terminal, and ends with the manifest
(:mod:`absa_lib.harness.manifest`). ``--python``: the interpreter of the steps it starts (default: this
one). Around each notebook:

- its parameters: only those its ``parameters`` cell declares (a profile holds the union; papermill
  warns of every name a notebook does not declare): :func:`write_notebook_params`;
- its line: how long it took, the files it wrote under the profile's results and figures folders, its
  log (:func:`written_files`), and under ``render`` its executed copy normalized into
  ``notebooks/executed/`` (:func:`normalized`);
- its failure: the error that stopped it (papermill's failing cell, or the script's exception) and
  where to look (:func:`failure_lines`).

Two steps can also run alone::

    python -m absa_lib.harness.run_all data [PARAMS.yaml]        # the benchmark files (tests/run.sh)
    python -m absa_lib.harness.run_all params PARAMS.yaml OUT/   # OUT/NN_name.params.yaml per notebook
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import yaml

from absa_lib.data.download import FIX, download, verify
from absa_lib.errors import AbsaError, one_line
from absa_lib.fileio import atomic_write_bytes
from absa_lib.harness import manifest, profiles
from absa_lib.harness.manifest import NAME as MANIFEST
from absa_lib.harness.profiles import PROFILES, check_runs_to_draw, notebook_parameters, read_profile_file
from absa_lib.paths import ensure_writable, repo_root, resolve_data_dir
from absa_lib.reports.dataset_facts import Benchmarks, standing_facts

INJECTED = "injected-parameters"          # papermill's tag (and, in a normalized copy, id) of the cell it adds
# papermill's times (notebook and cell metadata) and the absolute paths it ran between
VOLATILE = ("start_time", "end_time", "duration", "input_path", "output_path")


def _root() -> Path:
    root = repo_root()
    if root is None:
        raise AbsaError("not running from a checkout (no pyproject.toml beside absa_lib/): run_all.sh needs one")
    return root


def notebook_names(root: Path | None = None) -> list[str]:
    """The notebooks ``run_all.sh`` runs, in order: ``notebooks/NN_*.ipynb``, each beside its paired
    script ``NN_*.py`` (one without the other is an error naming it: a notebook would be left out)."""
    folder = (root or _root()) / "notebooks"
    pairs = {ext: {p.stem for p in folder.glob(f"[0-9][0-9]_*.{ext}")} for ext in ("ipynb", "py")}
    for have, lack in (("py", "ipynb"), ("ipynb", "py")):
        alone = sorted(pairs[have] - pairs[lack])
        if alone:
            raise AbsaError(f"notebooks/{alone[0]}.{lack}: missing beside notebooks/{alone[0]}.{have}; restore it "
                            f"(git checkout notebooks/{alone[0]}.{lack}) or pair them (jupytext --sync "
                            f"notebooks/{alone[0]}.{have})")
    return sorted(pairs["ipynb"])


def declared_by(notebook: str, names: dict[str, list[str]] | None = None) -> set[str]:
    """The parameter names ``notebook``'s parameters cell declares (read from its paired script, or
    taken from ``names``, :func:`~absa_lib.harness.profiles.notebook_parameters` read once for all)."""
    return {name for name, notebooks in (names or notebook_parameters()).items() if notebook in notebooks}


def notebook_params(params: dict, notebook: str, names: dict[str, list[str]] | None = None) -> dict:
    """The values of ``params`` for the names ``notebook`` declares, in the profile's order."""
    declared = declared_by(notebook, names)
    if not declared:
        raise AbsaError(f"notebooks/{notebook}.ipynb: no paired script notebooks/{notebook}.py declaring its "
                        "parameters (jupytext --sync notebooks/*.ipynb)")
    return {k: v for k, v in params.items() if k in declared}


def write_notebook_params(params: dict, out_dir: Path) -> dict[str, Path]:
    """``out_dir/NN_name.params.yaml`` for every notebook: the values of ``params`` (a profile's,
    read and checked) it declares."""
    names = notebook_parameters()
    written = {}
    for notebook in notebook_names():
        path = Path(out_dir) / f"{notebook}.params.yaml"
        atomic_write_bytes(path, yaml.safe_dump(notebook_params(params, notebook, names), sort_keys=False).encode())
        written[notebook] = path
    return written


# ------------------------------------------------------------------------------------------- the line


def _resolve(path: str, root: Path) -> Path:
    p = Path(path).expanduser()
    return (p if p.is_absolute() else root / p).resolve()


def written_files(params: dict, since: float, root: Path) -> list[Path]:
    """Files under the profile's results and figures folders modified at or after ``since`` (seconds
    since the epoch), leaving out the manifest and the run records (``runs_dir``, ``reference_dir``):
    the results folder's first, each folder's files before its subfolders'."""
    skip = [_resolve(params[k], root) for k in ("runs_dir", "reference_dir") if params.get(k)]
    folders = list(dict.fromkeys(_resolve(params[k], root) for k in ("results_dir", "figures_dir") if params.get(k)))
    since_ns = int(since * 1e9)
    found: dict[Path, int] = {}             # file: its folder's place (results, then figures)
    for place, folder in enumerate(folders):
        for dirpath, dirnames, filenames in os.walk(folder):
            here = Path(dirpath)
            dirnames[:] = sorted(d for d in dirnames if here / d not in skip and not d.startswith("."))
            for name in filenames:
                p = here / name
                if name == MANIFEST or name.startswith("."):
                    continue
                try:
                    if p.stat().st_mtime_ns >= since_ns:
                        found.setdefault(p, place)
                except OSError:                 # gone since the folder was listed
                    continue
    return sorted(found, key=lambda p: (found[p], str(p.parent), p.name))


def _short(path: Path, root: Path) -> str:
    """``path`` relative to the checkout when it lies inside, else as it is."""
    try:
        return Path(path).resolve().relative_to(root).as_posix()
    except ValueError:
        return str(path)


def describe_written(paths: list[Path], root: Path) -> str:
    """``4 files (results/ 2, figures/ 2)``: how many files, per folder (relative to the checkout);
    run records count under their ``runs/`` folder (``results/runs/ 24``), not one folder each."""
    if not paths:
        return "no files written"
    per: dict[str, int] = {}
    for p in paths:
        folder = _short(p.parent, root) + "/"
        if "/runs/" in "/" + folder:
            folder = folder[:("/" + folder).index("/runs/") + len("runs/")]
        per[folder] = per.get(folder, 0) + 1
    return f"{len(paths)} file{'s' if len(paths) != 1 else ''} ({', '.join(f'{k} {n}' for k, n in per.items())})"


def took(start: float, now: float | None = None) -> str:
    seconds = (time.time() if now is None else now) - start
    return f"{seconds:.1f}s" if seconds < 90 else f"{seconds:.0f}s ({seconds / 60:.1f} min)"


# ------------------------------------------------------------------------------------------- failures


def cell_error(executed: Path) -> str | None:
    """``cell 4 raised ValueError: ...``: the error papermill stopped at in the executed copy (as
    papermill finds it: the first error output other than ``sys.exit(0)``), or None."""
    try:
        nb = json.loads(Path(executed).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                ename, evalue = out.get("ename", "Error"), out.get("evalue", "")
                if ename == "SystemExit" and evalue in ("", "0"):
                    continue
                return f"cell {cell.get('execution_count')} raised {ename}" + (f": {one_line(evalue)}" if evalue else "")
        if cell.get("metadata", {}).get("papermill", {}).get("exception") is True:
            return f"cell {cell.get('execution_count')} did not finish (no error output; see the log)"
    return None


def log_error(log: Path, script: str | None = None) -> str | None:
    """The last line of ``log`` that is not indented (a traceback's exception line), with the line of
    ``script`` (a notebook's paired script) the traceback last passed through, or None."""
    try:
        lines = Path(log).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    last = next((ln.strip() for ln in reversed(lines) if ln.strip() and not ln[:1].isspace()), None)
    if last is None:
        return None
    where = None
    if script:
        pattern = re.compile(r'File "([^"]+)", line (\d+)')
        for ln in lines:
            m = pattern.search(ln)
            if m and Path(m.group(1)).name == Path(script).name:
                where = f"{script} line {m.group(2)}"
    return f"{where} raised {one_line(last)}" if where else one_line(last)


def failure_lines(notebook: str, profile: str, start: float, log: Path, executed: Path | None, root: Path,
                  script: bool = False) -> list[str]:
    """What ``run_all.sh`` prints when ``notebook`` failed: the rest of its line, then where to look."""
    error = ((cell_error(executed) if executed is not None else None)
             or log_error(log, f"notebooks/{notebook}.py" if script else None) or "(no error message; see the log)")
    lines = [f"FAILED after {took(start)}: {error}",
             f"[run_all]   notebook:      notebooks/{notebook}.{'py' if script else 'ipynb'} (profile {profile})",
             f"[run_all]   log:           {log}"]
    if executed is not None and Path(executed).is_file():
        lines.append(f"[run_all]   executed copy: {executed} (with the error)")
    return lines


# ------------------------------------------------------------------------------------------- readable copies


# the file IPython names a cell's code after, in warnings and tracebacks: /tmp/ipykernel_<pid>/<hash>.py
KERNEL_CELL = re.compile(r"(?:[^\s\"'(]*/)?ipykernel_\d+/\d+\.py")


def _replace_paths(value, root_pattern: re.Pattern):
    """``value`` (a string or a list of strings, as notebook JSON holds text) with the checkout's
    absolute path taken out (``/home/me/absa/results`` -> ``results``, the bare checkout -> ``.``)
    and a cell's file, which names the kernel's process, as ``<cell>``."""
    def fix(text: str) -> str:
        return KERNEL_CELL.sub("<cell>", root_pattern.sub(lambda m: "" if m.group(1) else ".", text))
    if isinstance(value, list):
        return [fix(v) if isinstance(v, str) else v for v in value]
    return fix(value) if isinstance(value, str) else value


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


# A library's warning about the environment, raised from inside site-packages (tqdm's "IProgress not
# found" in a kernel without ipywidgets), with the source line Python prints under it: it names the
# environment's path and says nothing about the notebook.
ENVIRONMENT_WARNING = re.compile(r"^[^\n]*site-packages/[^\n]*:\d+: \w*Warning: [^\n]*\n(?:  [^\n]*\n)?", re.M)


def merged_streams(outputs: list[dict]) -> list[dict]:
    """``outputs`` with each run of consecutive stream outputs merged into one ``stderr`` output
    followed by one ``stdout`` output: the kernel sends a cell's printing in pieces as its flush timer
    fires, so how the text is cut (and how stdout and stderr interleave between two displays) varies
    from run to run; the text does not. Warnings of the environment (:data:`ENVIRONMENT_WARNING`) are
    dropped."""
    merged: list[dict] = []
    run: dict[str, str] = {}

    def close() -> None:
        for name in ("stderr", "stdout"):
            if run.get(name):
                merged.append({"name": name, "output_type": "stream", "text": run[name].splitlines(keepends=True)})
        run.clear()

    for out in outputs:
        if out.get("output_type") == "stream" and out.get("name") in ("stdout", "stderr"):
            text = _text(out.get("text", ""))
            if out["name"] == "stderr":
                text = ENVIRONMENT_WARNING.sub("", text)
            run[out["name"]] = run.get(out["name"], "") + text
        else:
            close()
            merged.append(out)
    close()
    return merged


def normalized(nb: dict, root: Path) -> dict:
    """An executed notebook (papermill's JSON) without what changes from run to run or machine to
    machine: papermill's start and end times and durations (notebook and cells) and its input and
    output paths, the kernel's execution timestamps, the random id of the injected-parameters cell
    (``injected-parameters`` instead), the checkout's absolute path in the outputs (relative paths
    instead), the kernel's process id in the file name of a cell (``<cell>``), and the pieces a cell's
    printing arrived in (joined: :func:`merged_streams`). Everything else stays: sources, outputs,
    figures, execution counts, parameters."""
    nb = json.loads(json.dumps(nb))
    for key in VOLATILE:
        nb.get("metadata", {}).get("papermill", {}).pop(key, None)
    root_pattern = re.compile(re.escape(str(root)) + r"(?:(/)|(?![\w.-]))")
    for cell in nb.get("cells", []):
        meta = cell.setdefault("metadata", {})
        meta.pop("execution", None)
        for key in VOLATILE:
            meta.get("papermill", {}).pop(key, None)
        if INJECTED in meta.get("tags", []):
            cell["id"] = INJECTED
        if "outputs" in cell:
            cell["outputs"] = merged_streams(cell["outputs"])
        for out in cell.get("outputs", []):
            if "text" in out:
                out["text"] = _replace_paths(out["text"], root_pattern)
            for mime, value in out.get("data", {}).items():
                if mime.startswith("text/"):
                    out["data"][mime] = _replace_paths(value, root_pattern)
            if "traceback" in out:
                out["traceback"] = _replace_paths(out["traceback"], root_pattern)
    return nb


def notebook_bytes(nb: dict) -> bytes:
    """A notebook's JSON as nbformat writes it (keys sorted, one-space indent, UTF-8), ending in a newline."""
    return (json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def write_normalized(executed: Path, dest: Path, root: Path) -> bool:
    """Write the normalized copy of ``executed`` to ``dest``; False when ``dest`` held those bytes already."""
    data = notebook_bytes(normalized(json.loads(Path(executed).read_text(encoding="utf-8")), root))
    if Path(dest).is_file() and Path(dest).read_bytes() == data:
        return False
    atomic_write_bytes(Path(dest), data)
    return True


# ------------------------------------------------------------------------------------------- command line


def data_lines(data_dir: str | None = None, reference: Path | None = None) -> tuple[bool, list[str]]:
    """Whether the benchmark files are in place (downloading the missing ones), and the lines that say
    so; on failure the lines name the folder, the first bad file and the two ways to fix it, each short
    enough for a terminal. ``reference``: a profile that only draws, from these committed records;
    without the raw files it reads the facts committed beside them and downloads nothing
    (:meth:`absa_lib.reports.dataset_facts.Benchmarks.open`)."""
    folder = resolve_data_dir(data_dir)
    try:
        verify(data_dir)
        return True, [f"[data] the benchmark files are in {folder}"]
    except AbsaError as missing:
        if standing_facts(data_dir, reference) is not None:
            try:
                return True, [Benchmarks.open(data_dir, reference).line]
            except AbsaError as err:         # the facts file there, but stale or edited: said, not passed over
                return False, [f"[data] not in {folder}, and {err}"]
        lines = [f"[data] not in {folder}: {str(missing).removesuffix('; ' + FIX)}", "[data] downloading them"]
    try:
        download(data_dir)
    except AbsaError as err:
        return False, [*lines, f"[data] FAILED: {err}".split("; check the network")[0],
                       "[data] fix: connect to the network and run again, or set ABSA_DATA_DIR to a folder",
                       "[data]      that holds the files (sentihood/, semeval2014/; README, \"The data\")"]
    return True, [*lines, f"[data] downloaded into {folder}"]


# ------------------------------------------------------------------------------------------- the driver

# what every step the driver starts shares: the seeds of hashing, cuBLAS's deterministic workspace, no
# tokenizer threads, training progress as lines (its output goes to a log; absa_lib.training.progress);
# and, under every profile but paper (whose backbone may come from the hub), no hub
OWN_ENV = {"CUBLAS_WORKSPACE_CONFIG": ":4096:8", "PYTHONHASHSEED": "0", "TOKENIZERS_PARALLELISM": "false",
           "ABSA_PROGRESS": "lines"}
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
NOTEBOOK_MODES = ("papermill", "scripts")                  # how the notebooks run (ABSA_NOTEBOOKS)
GRID_PROGRESS = re.compile(r"runs done, [0-9]+ left")      # the grid's line per finished run
GRID_SUMMARY = re.compile(r"^\[grid\] [0-9]* runs:")       # its last word: runs trained, skipped, failed


def say(text: str, end: str = "\n") -> None:
    """A line (or, with ``end=""``, the start of one) on the terminal: stderr, at once."""
    print(text, end=end, file=sys.stderr, flush=True)


def _clock() -> str:
    return time.strftime("%H:%M:%S")


def unknown_profile(name: str) -> str:
    return f"unknown profile '{name}'; expected one of: {' '.join(PROFILES)} (params/<profile>.yaml)"


def _shown_root(root: Path) -> Path:
    """The checkout as the command line named it: ``$PWD`` when it is ``root`` (run_all.sh changes
    into the checkout first; a link in its path stays in the paths printed and handed on), else ``root``."""
    pwd = os.environ.get("PWD", "")
    try:
        return Path(pwd) if os.path.isabs(pwd) and Path(pwd).resolve() == root else root
    except OSError:
        return root


def _wait(proc: subprocess.Popen) -> int:
    """``proc``'s exit status; on Ctrl-C (which reaches it too) it is waited for all the same, then
    the interrupt goes on."""
    interrupted = False
    while True:
        try:
            code = proc.wait()
            break
        except KeyboardInterrupt:
            interrupted = True
    if interrupted:
        raise KeyboardInterrupt
    return code


def notebook_mode() -> str:
    """``papermill``, or ``scripts`` (the paired scripts) without it: ``$ABSA_NOTEBOOKS`` when set."""
    mode = os.environ.get("ABSA_NOTEBOOKS") or ("papermill" if importlib.util.find_spec("papermill") else "scripts")
    if mode not in NOTEBOOK_MODES:
        raise AbsaError(f"ABSA_NOTEBOOKS={mode!r}: expected {' or '.join(NOTEBOOK_MODES)} (unset: papermill when "
                        "it is installed)")
    return mode


def choose_profile(python: str, root: Path) -> str:
    """The profile when none is given (:mod:`absa_lib.harness.default_profile`, which says which and
    why): in a process of its own, as only then are torch and the run records read."""
    done = subprocess.run([python, "-m", "absa_lib.harness.default_profile", str(root)], stdout=subprocess.PIPE,
                          text=True, check=False)
    if done.returncode != 0 or done.stdout.strip() not in PROFILES:
        raise AbsaError(f"the default profile could not be chosen (exit {done.returncode}); name one: "
                        f"bash run_all.sh {{{'|'.join(PROFILES)}}}")
    return done.stdout.strip()


def train_grid(python: str, profile: str, params_file: Path, out: Path, top: Path) -> bool:
    """``absa grid`` on the profile: all it prints into ``out/grid.log``, each finished run's line (runs
    done, left, the pace) on the terminal; at the end its summary, or why it failed."""
    log = out / "grid.log"
    say(f"[run_all] {_clock()} training the grid of '{profile}' (follow it: tail -f {log.relative_to(top)})")
    with open(log, "wb") as sink:
        proc = subprocess.Popen([python, "-m", "absa_lib.cli", "grid", "--profile", str(params_file)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        interrupted = False
        while True:                    # to its end, even after Ctrl-C: the grid's last lines go to the log
            try:
                for line in proc.stdout:
                    sink.write(line)
                    sink.flush()
                    text = line.decode("utf-8", errors="replace").rstrip("\n")
                    if GRID_PROGRESS.search(text):
                        say(re.sub(r"^\[grid\]", "[run_all]   grid", text))
                break
            except KeyboardInterrupt:
                interrupted = True
        code = _wait(proc)
    if interrupted:
        raise KeyboardInterrupt
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    summary = next((ln for ln in reversed(lines) if GRID_SUMMARY.match(ln)), "")
    if code != 0:
        say(f"[run_all] FAILED: the grid of runs (profile {profile}): {summary or (lines[-1] if lines else '')}")
        say(f"[run_all]   see {log} and the run logs it names")
        return False
    say(f"[run_all] {_clock()} " + re.sub(r"; summary: .*", "", summary))
    return True


def without_force_retrain(params: dict, out: Path) -> dict:
    """Under ``force_retrain`` the grid has just retrained every run once; the notebooks collect them
    (forced again, each would retrain its runs one at a time, and the runs notebooks share twice):
    the profile's values ``params`` with ``force_retrain: false``, also written to
    ``out/params_notebooks.yaml``; ``params`` as they are when not forced."""
    if not params.get("force_retrain"):
        return params
    params = {**params, "force_retrain": False}
    atomic_write_bytes(out / "params_notebooks.yaml", yaml.safe_dump(params, sort_keys=False).encode())
    say("[run_all] force_retrain: the grid retrained every run; the notebooks collect them")
    return params


def notebook_command(python: str, mode: str, top: Path, out: Path, notebook: str) -> list[str]:
    """The command that runs ``notebook`` with its parameters: papermill, or its paired script."""
    if mode == "scripts":
        return [python, "-m", "absa_lib.harness.notebook_script", str(top / "notebooks" / f"{notebook}.py"),
                str(out / f"{notebook}.params.yaml")]
    return [python, "-m", "papermill", str(top / "notebooks" / f"{notebook}.ipynb"), str(out / f"{notebook}.ipynb"),
            "-k", "python3", "--cwd", str(top / "notebooks"), "-f", str(out / f"{notebook}.params.yaml"),
            "--log-output", "--no-progress-bar", "--start-timeout", "120"]


def notebook_env(mode: str) -> dict[str, str]:
    """The environment of a notebook's process: the driver's, but under papermill without
    ``MPLBACKEND``, which the kernel would take over IPython's inline backend (``MPLBACKEND=Agg``, as the
    tests set it, leaves every figure out of the executed notebooks); the kernel then sets the inline one.
    The paired scripts keep it (they draw to files, ``Agg`` when unset)."""
    env = dict(os.environ)
    if mode == "papermill":
        env.pop("MPLBACKEND", None)
    return env


def run_notebook(notebook: str, command: list[str], *, profile: str, params: dict, out: Path, root: Path,
                 executed: Path | None, render_to: Path | None) -> bool:
    """Run one notebook, all its output into ``out/NN_name.log``, and print its line: how long it
    took, what it wrote, its log; or its error and where to look. With ``render_to``, its executed
    copy normalized into that folder."""
    say(f"[run_all] {_clock()} {notebook:<19}", end="")          # the line's end comes when it has run
    log = out / f"{notebook}.log"
    for stale in (out / f"{notebook}.ipynb", out / f"{notebook}.log.err"):   # never an old run's copy in a
        stale.unlink(missing_ok=True)                                         # failure's message
    start = time.time()
    with open(log, "wb") as sink:
        code = _wait(subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT,
                                      env=notebook_env("scripts" if executed is None else "papermill")))
    if code != 0:
        try:
            say("\n".join(failure_lines(notebook, profile, start, log, executed, root, script=executed is None)))
        except Exception:
            say(f" FAILED; see {log}")
        return False
    end = time.time()
    try:
        wrote = describe_written(written_files(params, start, root), root)
        say(f"{took(start, end):>8}  {wrote}  log: {_short(log, root)}")
        if render_to is not None and executed is not None:
            write_normalized(executed, render_to / f"{notebook}.ipynb", root)
    except AbsaError as err:
        say(f" (its report failed)\n[run_all] error: {err}")
        return False
    return True


def run(argv: list[str], python: str) -> int:
    """``run_all.sh [PROFILE] [-p NAME VALUE ...]``, all of it; the exit status (1: a step failed, 2: a
    wrong profile or parameter)."""
    profile = argv.pop(0) if argv and not argv[0].startswith("-") else None
    if profile is not None and profile not in PROFILES:
        say(f"[run_all] error: {unknown_profile(profile)}")
        return 2
    root = _root()
    top = _shown_root(root)                       # root as run_all.sh named it: the paths printed and handed on
    os.chdir(top)                                 # relative paths in the profile (results/, figures/) lead here
    mode = notebook_mode()
    notebook_names(root)                          # a notebook without its paired script: refused before any work
    if profile is None:
        profile = choose_profile(python, root)
    out = top / "executed" / profile              # absolute: papermill opens --stdout-file after --cwd
    out.mkdir(parents=True, exist_ok=True)
    # the profile with the command line's `-p NAME VALUE` changes (names and values checked before
    # anything runs, here once: the files written from them below are not read back)
    params_file = out / "params.yaml"
    try:
        params = profiles.write_with_changes(top / "params" / f"{profile}.yaml", params_file, argv)
    except AbsaError as err:
        say(f"[run_all] error: {err}")
        return 2
    os.environ.update(OWN_ENV)
    if profile != "paper":
        os.environ.update(OFFLINE_ENV)
    missing = [k for k in ("results_dir", "figures_dir") if k not in params]
    if missing:
        raise AbsaError(f"params/{profile}.yaml: sets no {', '.join(missing)} (where the notebooks write)")
    results, figures = params["results_dir"], params["figures_dir"]
    for name in ("results_dir", "figures_dir"):   # a file in the way: refused now, not in a notebook's setup cell
        try:
            ensure_writable(_resolve(params[name], top), f"give {name} a folder you can write to (-p {name} FOLDER)")
        except AbsaError as err:
            say(f"[run_all] error: {name}: {err}")
            return 2
    started = int(time.time())
    # the benchmark files first (checked; downloaded when missing; else how to point at a copy): every
    # notebook and every cell of a grid reads them
    draws_only = not params.get("allow_training") and params.get("reference_dir")
    draws_from = _resolve(params["reference_dir"], top) if draws_only else None
    ok, lines = data_lines(params.get("data_dir") or None, draws_from)
    say("\n".join(lines))
    if not ok:
        return 1
    if not params.get("allow_training") and notebook_parameters().get("runs_dir"):   # it draws from records only:
        try:                                                                           # none there, refused now
            if "runs_dir" not in params:
                raise AbsaError(f"profile {profile} trains nothing (allow_training: false) and names no runs_dir to draw "
                                "its tables from; add runs_dir (e.g. results/reference/runs) to it")
            check_runs_to_draw(params["runs_dir"], profile)
        except AbsaError as err:
            say(f"[run_all] error: {err}")
            return 2
    notebook_values = params
    if params.get("allow_training"):
        if not train_grid(python, profile, params_file, out, top):
            return 1
        notebook_values = without_force_retrain(params, out)
    # each notebook gets the values of the names its parameters cell declares, no others
    try:
        write_notebook_params(notebook_values, out)
    except AbsaError as err:
        say(f"[run_all] error: {err}")
        return 2
    # render, as the profile file says (no -p changes), through papermill: the executed notebooks,
    # normalized (no times, no absolute paths), into notebooks/executed/ (the same bytes run after run)
    render_to = top / "notebooks" / "executed" if profile == "render" and mode == "papermill" and not argv else None
    for notebook in notebook_names(root):
        executed = None if mode == "scripts" else out / f"{notebook}.ipynb"
        if not run_notebook(notebook, notebook_command(python, mode, top, out, notebook), profile=profile,
                            params=params, out=out, root=root, executed=executed, render_to=render_to):
            return 1
    code = manifest.main(["--profile", profile, "--results-dir", str(results), "--figures-dir", str(figures)])
    sys.stdout.flush()
    if code != 0:
        return code
    say(f"[run_all] all notebooks ran under '{profile}' in {int(time.time()) - started}s")
    say(f"[run_all]   tables:    {results}/table1_sentihood.{{csv,md}} {results}/table2_semeval.{{csv,md}} "
        f"{results}/ablations.{{csv,md}}")
    say(f"[run_all]   figures:   {figures}/")
    say(f"[run_all]   manifest:  {results}/MANIFEST.json")
    say(f"[run_all]   notebooks: {out}/")
    if render_to is not None:
        say(f"[run_all]   readable:  {render_to}/ (normalized copies, committed)")
    return 0


def step(argv: list[str]) -> int:
    """``data`` or ``params``: one step alone."""
    parser = argparse.ArgumentParser(prog="python -m absa_lib.harness.run_all", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    data = sub.add_parser("data", help="check the benchmark files, download the missing ones, or say how to fix it")
    data.add_argument("params", nargs="?", default=None, help="a profile's values (its data_dir); none: ABSA_DATA_DIR")
    p = sub.add_parser("params", help="write OUT/NN_name.params.yaml: each notebook's declared parameters")
    p.add_argument("params")
    p.add_argument("out")
    args = parser.parse_args(argv)
    try:
        if args.command == "data":
            given = read_profile_file(Path(args.params)).get("data_dir") if args.params else None
            ok, lines = data_lines(given or None)
            print("\n".join(lines), file=sys.stderr)
            return 0 if ok else 1
        _root()
        write_notebook_params(read_profile_file(Path(args.params)), Path(args.out))
    except AbsaError as err:
        print(f"[run_all] error: {err}", file=sys.stderr)
        return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["data"], ["params"]):
        return step(argv)
    python = sys.executable
    if argv[:1] == ["--python"]:
        if len(argv) < 2:
            say("[run_all] error: --python needs an interpreter")
            return 2
        python, argv = argv[1], argv[2:]
    try:
        return run(argv, python)
    except AbsaError as err:
        say(f"[run_all] error: {err}")
        return 2
    except KeyboardInterrupt:                     # each step was waited for: nothing is left running
        return 130


if __name__ == "__main__":
    sys.exit(main())
