"""Files written so that a reader never sees half of one, and JSON read with errors that say what to do.

Every file the companion writes (run records, checkpoints' checksums, tables, figures, analysis
arrays, the manifest) goes through :func:`atomic_write_bytes`: written to a temporary name in the
same folder, flushed, then moved into place, so a killed process leaves the old file or the new one.
A folder that one process at a time may write (a run being trained) is held with :func:`exclusive_lock`.
"""

from __future__ import annotations

import csv
import errno
import functools
import hashlib
import io
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from absa_lib.errors import AbsaError, RunBusy

_NO_SPACE = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}      # disk full, quota, file-size limit


def new_file_mode() -> int:
    """The mode ``open()`` gives a new file, 0o666 less the umask: a temporary file from ``mkstemp``
    is 0o600, which would leave every record readable by its owner alone."""
    return 0o666 & ~_umask()


def new_dir_mode() -> int:
    """The mode ``mkdir()`` gives a new folder, 0o777 less the umask (``mkdtemp`` gives 0o700)."""
    return 0o777 & ~_umask()


def _umask() -> int:
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


def output_file(path: str | os.PathLike) -> Path:
    """``path`` as a file to write, refused at once when it names a folder (a command checks its
    output before the work, not after)."""
    path = Path(path)
    if path.is_dir():
        raise AbsaError(f"{path}: is a folder; give the name of a file to write")
    return path


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers never see a partial file."""
    path = output_file(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as err:
        raise AbsaError(f"{path}: cannot write here ({err.strerror}); choose a writable folder") from None
    try:
        os.fchmod(fd, new_file_mode())
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as err:
        Path(tmp).unlink(missing_ok=True)
        advice = ("free some space, then run the same command again" if err.errno in _NO_SPACE
                  else "fix that, then run the same command again")
        raise AbsaError(f"{path}: could not be written ({err.strerror}); the previous version, if any, "
                        f"is intact: {advice}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=2, sort_keys=True, allow_nan=True) + "\n").encode())


def replace_dir(tmp: Path, final: Path) -> None:
    """``tmp`` (complete) in place of ``final``, in two renames: ``final`` -> ``final.old``, ``tmp`` ->
    ``final``. A kill between them leaves no ``final``; the reader finishes the move
    (:func:`~absa_lib.training.checkpoint.recover_checkpoint`)."""
    old = final.with_name(final.name + ".old")
    if final.exists():
        shutil.rmtree(old, ignore_errors=True)
        final.rename(old)
    tmp.rename(final)
    shutil.rmtree(old, ignore_errors=True)


def decode_utf8(raw: bytes, name: str) -> str:
    """A file's bytes as text (UTF-8; a byte-order mark, as Notepad writes it, dropped); else one
    line naming the file, the line and the byte."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw[:err.start].count(b"\n") + 1
        raise AbsaError(f"{name}: line {line}: not UTF-8 text (byte 0x{raw[err.start]:02x}); save the file "
                        "as UTF-8") from None


def csv_rows(text: str, path: Path) -> Iterator[tuple[int, list[str]]]:
    """The rows of a CSV text, each with the line it starts on. Strict: a quote that is opened and
    not closed where a field ends, or a line break inside a field (most often the same mistake: a
    quote left open swallows the next lines, and their rows, into one field), is one line naming
    the file and line, never rows silently merged."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    start = 1
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as err:
            if "field larger than field limit" in str(err):     # one field over 128 KiB: no quote involved
                raise AbsaError(f"{path}: line {start}: a field longer than {csv.field_size_limit():,} characters; a "
                                "review text is a sentence or a few: split the file's text into rows") from None
            raise AbsaError(f"{path}: line {start}: not valid CSV ({err}); is a quote left open?") from None
        if reader.line_num != start:
            raise AbsaError(f"{path}: line {start}: a field runs on to line {reader.line_num}; is a quote "
                            "left open? Write each row, text included, on one line")
        yield start, row
        start = reader.line_num + 1


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes (hex)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def file_sha256_cached(path: Path) -> str:
    """:func:`file_sha256`, computed once per process for a file of one size and modification time
    (the backbone's weights, hashed for every run's identity)."""
    stat = path.stat()
    return _sha256_cached(str(path.resolve()), stat.st_mtime_ns, stat.st_size)


@functools.cache
def _sha256_cached(path: str, mtime_ns: int, size: int) -> str:
    return file_sha256(Path(path))


def read_json(path: Path, fix: str = "delete the run folder or rerun with --force") -> Any:
    """The JSON in ``path``; a file that is missing, not JSON or unreadable raises one line ending with ``fix``
    (what to do about it: a run record's is the default)."""
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise AbsaError(f"{path}: file not found") from None
    except json.JSONDecodeError as err:
        raise AbsaError(f"{path}: not valid JSON ({err.msg} at line {err.lineno}); {fix}") from None
    except UnicodeDecodeError as err:
        raise AbsaError(f"{path}: not UTF-8 text (byte {err.start}); {fix}") from None
    except RecursionError:          # '[' * 5000: nested deeper than any file written here
        raise AbsaError(f"{path}: JSON nested too deep to be a file written here; {fix}") from None
    except OSError as err:
        raise AbsaError(f"{path}: cannot be read ({err.strerror}); check its permissions") from None


# Windows locks a byte range, and other processes can read no locked byte: lock a byte past the pid.
_WINDOWS_LOCK_BYTE = 4096
# How long exclusive_lock retries before it refuses: far longer than lock_holder holds the lock.
_PATIENCE = 0.25


@contextmanager
def exclusive_lock(path: Path, busy: str) -> Iterator[None]:
    """Hold an exclusive lock on the file ``path`` (created if needed) for the ``with`` block, or raise
    :class:`RunBusy` ``"<path's folder>: <busy> (pid N)"`` when another holder has it (after
    :data:`_PATIENCE` seconds, so that :func:`lock_holder`'s brief look never refuses a holder).

    On POSIX an advisory ``flock``; on Windows, where there is no ``fcntl``, ``msvcrt.locking`` of one
    byte. The operating system drops either when its holder exits, however it exits (``kill -9``
    included), so an interrupted job never leaves a stale lock behind. Both are held per open file,
    so a second holder in the same process is refused too (a notebook cell run twice at once).
    """
    with open(path, "a+") as fh:
        unlock = _try_lock(fh, patience=_PATIENCE)
        if unlock is None:
            fh.seek(0)
            holder = fh.read().strip() or "unknown"
            raise RunBusy(f"{Path(path).parent}: {busy} (pid {holder})")
        try:
            fh.seek(0)
            fh.truncate()
            fh.write(f"{os.getpid()}\n")          # for the message a second process gets
            fh.flush()
            yield
        finally:
            unlock()                            # flock: closing the file would do it too


def lock_holder(path: Path) -> str | None:
    """Who holds the lock of :func:`exclusive_lock` on ``path``: the pid it wrote (``"unknown"`` if
    none), or None when nobody does (or ``path`` does not exist). The lock is taken and dropped at once,
    nothing is written; a holder that starts meanwhile waits :data:`_PATIENCE` for it, not refused."""
    try:
        fh = open(path)
    except OSError:
        return None
    with fh:
        unlock = _try_lock(fh)
        if unlock is not None:
            unlock()
            return None
        fh.seek(0)
        return fh.read().strip() or "unknown"


def _try_lock(fh, patience: float = 0.0) -> Callable[[], None] | None:
    """Lock the open file ``fh``, retrying for ``patience`` seconds: the function that unlocks it, or
    None when another holder has it."""
    deadline = time.monotonic() + patience
    while (unlock := _try_lock_once(fh)) is None and time.monotonic() < deadline:
        time.sleep(0.02)
    return unlock


def _try_lock_once(fh) -> Callable[[], None] | None:
    """Lock the open file ``fh`` without waiting: the function that unlocks it, or None when another
    holder has it."""
    try:
        import fcntl
    except ImportError:                         # Windows
        import msvcrt

        def at_lock_byte(mode: int) -> None:
            fh.seek(_WINDOWS_LOCK_BYTE)         # the range starts at the file position
            msvcrt.locking(fh.fileno(), mode, 1)

        try:
            at_lock_byte(msvcrt.LK_NBLCK)
        except OSError:
            return None
        return lambda: at_lock_byte(msvcrt.LK_UNLCK)
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return None
    return lambda: fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
