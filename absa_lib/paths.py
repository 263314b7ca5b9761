"""Where things live: repository root, data folder, run folder.

Resolution order for the data folder:
explicit argument > ``$ABSA_DATA_DIR`` > the project's own download folder (``<repo>/data``, or
``~/.cache/absa_lib/data`` when the package is installed outside a checkout).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from absa_lib.errors import AbsaError

PACKAGE_DIR = Path(__file__).resolve().parent


def repo_root() -> Path | None:
    """The checkout that contains this package (marker: ``pyproject.toml`` beside ``absa_lib/``)."""
    root = PACKAGE_DIR.parent
    return root if (root / "pyproject.toml").is_file() else None


def from_root(path: str | os.PathLike) -> Path:
    """``path`` made absolute: a relative one is taken from the repository root (else the working folder)."""
    p = Path(path).expanduser()
    return p if p.is_absolute() else (repo_root() or Path.cwd()) / p


def _cache_home() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "absa_lib"


def default_data_dir() -> Path:
    """The project's own download folder for the raw benchmark files."""
    root = repo_root()
    return root / "data" if root is not None else _cache_home() / "data"


def resolve_data_dir(data_dir: str | os.PathLike | None = None) -> Path:
    """Explicit argument > ``$ABSA_DATA_DIR`` > :func:`default_data_dir`."""
    if data_dir:
        return Path(data_dir).expanduser().resolve()
    env = os.environ.get("ABSA_DATA_DIR")
    if env:
        return Path(env).expanduser().resolve()
    return default_data_dir()


def default_runs_dir() -> Path:
    """Where training runs (records and git-ignored checkpoints) go unless ``--out`` says otherwise."""
    env = os.environ.get("ABSA_RUNS_DIR")
    if env:
        return Path(env).expanduser().resolve()
    root = repo_root()
    return root / "runs" if root is not None else _cache_home() / "runs"


def ensure_writable(folder: Path, fix: str) -> Path:
    """Create ``folder`` if needed and check that files can be written in it, so that a read-only
    folder, or a file where the folder should be, fails at once rather than halfway through."""
    try:
        Path(folder).mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError as err:
        for p in (Path(folder), *Path(folder).parents):          # "File exists" names neither what nor where
            if p.is_symlink() and not p.exists():
                raise AbsaError(f"cannot write in {folder}: {p} is a symbolic link to {os.readlink(p)}, which does not "
                                f"exist; create that folder or remove the link; {fix}") from None
            if p.exists() and not p.is_dir():
                raise AbsaError(f"cannot write in {folder}: {p} is a file, not a folder; {fix}") from None
        where = f"{err.filename}: " if err.filename and str(err.filename) != str(folder) else ""
        raise AbsaError(f"cannot write in {folder} ({where}{err.strerror}); {fix}") from None
    return Path(folder)
