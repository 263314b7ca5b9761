"""What ``run_all.sh`` does around each notebook: its parameters, its one line, its error, its readable copy.

``run_all.sh`` runs each notebook with papermill (or its paired script) with all of the run's output in
``executed/<profile>/NN_name.log``, and prints one line per notebook on the terminal::

    python -m absa_lib.harness.run_all params PARAMS.yaml OUT/      # OUT/NN_name.params.yaml per notebook
    python -m absa_lib.harness.run_all done NAME --params PARAMS.yaml --start T --log LOG [--render-to DIR]
    python -m absa_lib.harness.run_all failed NAME --profile P --start T --log LOG [--executed OUT/NN_name.ipynb]

- ``params``: each notebook is handed only the parameters its ``parameters`` cell declares (a profile
  holds the union; papermill warns of every name a notebook does not declare).
- ``done``: the rest of the notebook's line (how long it took, the files it wrote under the profile's
  results and figures folders, its log) and, with ``--render-to``, its executed copy normalized into
  that folder (``notebooks/executed/`` under the ``render`` profile: :func:`normalized`).
- ``failed``: the error that stopped it (papermill's failing cell, or the script's exception) and
  where to look.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

import yaml

from absa_lib.data.download import FIX, download, verify
from absa_lib.errors import AbsaError
from absa_lib.fileio import atomic_write_bytes
from absa_lib.harness.manifest import NAME as MANIFEST
from absa_lib.harness.profiles import notebook_parameters, read_profile_file
from absa_lib.paths import repo_root, resolve_data_dir

INJECTED = "injected-parameters"          # papermill's tag (and, in a normalized copy, id) of the cell it adds
# papermill's times (notebook and cell metadata) and the absolute paths it ran between
VOLATILE = ("start_time", "end_time", "duration", "input_path", "output_path")


def _root() -> Path:
    root = repo_root()
    if root is None:
        raise AbsaError("not running from a checkout (no pyproject.toml beside absa_lib/): run_all.sh needs one")
    return root


def notebook_names(root: Path | None = None) -> list[str]:
    """The notebooks ``run_all.sh`` runs, in order: ``notebooks/NN_*.ipynb``."""
    return sorted(p.stem for p in ((root or _root()) / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def declared_by(notebook: str) -> set[str]:
    """The parameter names ``notebook``'s parameters cell declares (read from its paired script)."""
    return {name for name, notebooks in notebook_parameters().items() if notebook in notebooks}


def notebook_params(params: dict, notebook: str) -> dict:
    """The values of ``params`` for the names ``notebook`` declares, in the profile's order."""
    declared = declared_by(notebook)
    if not declared:
        raise AbsaError(f"notebooks/{notebook}.ipynb: no paired script notebooks/{notebook}.py declaring its "
                        "parameters (jupytext --sync notebooks/*.ipynb)")
    return {k: v for k, v in params.items() if k in declared}


def write_notebook_params(params_file: Path, out_dir: Path) -> dict[str, Path]:
    """``out_dir/NN_name.params.yaml`` for every notebook: the values of ``params_file`` it declares."""
    params = read_profile_file(Path(params_file))
    written = {}
    for notebook in notebook_names():
        path = Path(out_dir) / f"{notebook}.params.yaml"
        atomic_write_bytes(path, yaml.safe_dump(notebook_params(params, notebook), sort_keys=False).encode())
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


def parse_start(text: str) -> float:
    """A start time as bash's ``$EPOCHREALTIME`` gives it (a decimal comma in some locales) or ``date +%s``."""
    try:
        return float(text.replace(",", "."))
    except ValueError:
        raise AbsaError(f"--start {text!r}: expected seconds since the epoch") from None


# ------------------------------------------------------------------------------------------- failures


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[:limit - 1] + "…"


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
                return f"cell {cell.get('execution_count')} raised {ename}" + (f": {_one_line(evalue)}" if evalue else "")
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
    return f"{where} raised {_one_line(last)}" if where else _one_line(last)


def failure_lines(notebook: str, profile: str, start: float, log: Path, executed: Path | None, root: Path,
                  script: bool = False) -> list[str]:
    """What ``run_all.sh`` prints when ``notebook`` failed: the rest of its line, then where to look."""
    error = (cell_error(executed) if executed is not None else None) \
        or log_error(log, f"notebooks/{notebook}.py" if script else None) or "(no error message; see the log)"
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


def data_lines(data_dir: str | None = None) -> tuple[bool, list[str]]:
    """Whether the benchmark files are in place (downloading the missing ones), and the lines that say
    so; on failure the lines name the folder, the first bad file and the two ways to fix it, each short
    enough for a terminal."""
    folder = resolve_data_dir(data_dir)
    try:
        verify(data_dir)
        return True, [f"[data] the benchmark files are in {folder}"]
    except AbsaError as missing:
        lines = [f"[data] not in {folder}: {str(missing).removesuffix('; ' + FIX)}", "[data] downloading them"]
    try:
        download(data_dir)
    except AbsaError as err:
        return False, [*lines, f"[data] FAILED: {err}".split("; check the network")[0],
                       "[data] fix: connect to the network and run again, or set ABSA_DATA_DIR to a folder",
                       "[data]      that holds the files (sentihood/, semeval2014/; README, \"The data\")"]
    return True, [*lines, f"[data] downloaded into {folder}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m absa_lib.harness.run_all", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    data = sub.add_parser("data", help="check the benchmark files, download the missing ones, or say how to fix it")
    data.add_argument("params", nargs="?", default=None, help="a profile's values (its data_dir); none: ABSA_DATA_DIR")
    p = sub.add_parser("params", help="write OUT/NN_name.params.yaml: each notebook's declared parameters")
    p.add_argument("params")
    p.add_argument("out")
    d = sub.add_parser("done", help="the rest of a notebook's line; with --render-to, its normalized copy")
    f = sub.add_parser("failed", help="the error that stopped a notebook, and where to look")
    for s in (d, f):
        s.add_argument("notebook")
        s.add_argument("--start", required=True, help="when it started (seconds since the epoch)")
        s.add_argument("--log", required=True)
        s.add_argument("--executed", default=None, help="papermill's executed copy (none for a script)")
    d.add_argument("--params", required=True, help="the profile's values (where results and figures go)")
    d.add_argument("--render-to", default=None, help="write the executed copy, normalized, into this folder")
    f.add_argument("--profile", required=True)
    args = parser.parse_args(argv)
    try:
        if args.command == "data":
            given = read_profile_file(Path(args.params)).get("data_dir") if args.params else None
            ok, lines = data_lines(given or None)
            print("\n".join(lines), file=sys.stderr)
            return 0 if ok else 1
        root = _root()
        if args.command == "params":
            write_notebook_params(Path(args.params), Path(args.out))
            return 0
        start = parse_start(args.start)
        executed = Path(args.executed) if args.executed else None
        if args.command == "failed":
            print("\n".join(failure_lines(args.notebook, args.profile, start, Path(args.log), executed, root,
                                          script=executed is None)), file=sys.stderr)
            return 0
        end = time.time()
        wrote = describe_written(written_files(read_profile_file(Path(args.params)), start, root), root)
        print(f"{took(start, end):>8}  {wrote}  log: {_short(Path(args.log), root)}", file=sys.stderr)
        if args.render_to:
            if executed is None:
                raise AbsaError("--render-to needs --executed (papermill's executed copy)")
            write_normalized(executed, Path(args.render_to) / f"{args.notebook}.ipynb", root)
    except AbsaError as err:
        ended = "" if args.command == "params" else " (its report failed)\n"   # the notebook's line is open
        print(f"{ended}[run_all] error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
