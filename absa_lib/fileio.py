"""Files written so that a reader never sees half of one, and JSON read with errors that say what to do.

Every file the companion writes (run records, checkpoints' checksums, tables, figures, analysis
arrays, the manifest) goes through :func:`atomic_write_bytes`: written to a temporary name in the
same folder, flushed, then moved into place, so a killed process leaves the old file or the new one.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from absa_lib.errors import AbsaError


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers never see a partial file."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as err:
        raise AbsaError(f"{path}: cannot write here ({err.strerror}); choose a writable folder") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as err:                       # disk full, quota, file-size limit
        Path(tmp).unlink(missing_ok=True)
        raise AbsaError(f"{path}: could not be written ({err.strerror}); the previous version, if any, "
                        "is intact: free some space, then run the same command again") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=2, sort_keys=True, allow_nan=True) + "\n").encode())


def read_json(path: Path) -> Any:
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise AbsaError(f"{path}: file not found") from None
    except json.JSONDecodeError as err:
        raise AbsaError(f"{path}: not valid JSON ({err.msg} at line {err.lineno}); delete the run "
                        "folder or rerun with --force") from None
    except UnicodeDecodeError as err:
        raise AbsaError(f"{path}: not UTF-8 text (byte {err.start}); delete the run folder or rerun "
                        "with --force") from None
    except OSError as err:
        raise AbsaError(f"{path}: cannot be read ({err.strerror}); check its permissions") from None
