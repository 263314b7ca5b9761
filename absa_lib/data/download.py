"""Fetch and verify the benchmark files: SentiHood (Saeidi et al., 2016) and SemEval-2014 Task 4
restaurants (Pontiki et al., 2014), as shipped by Sun et al. (2019) and Wu & Ong (2021).

Every file is pinned by URL (a commit of a public GitHub repository), size and SHA-256, so a run
can record exactly which bytes it trained on. The five raw files are byte-identical in
HSLCY/ABSA-BERT-pair (primary URL) and frankaging/Quasi-Attention-ABSA (alternative URL). The five
NLI_M files (the published sentence-pair versions) exist only in the latter; they are optional and
only used to check that :mod:`absa_lib.data.datasets` rebuilds the benchmark exactly.

A download goes to a temporary file in the target folder, is checked (size, then SHA-256), and only
then ``os.replace``-d into place, so a partial or corrupted file is never left under its real name.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from absa_lib.errors import AbsaError
from absa_lib.fileio import file_sha256, new_file_mode
from absa_lib.paths import ensure_writable, resolve_data_dir

_H = "https://raw.githubusercontent.com/HSLCY/ABSA-BERT-pair/7d238eb8c772946b9e572373c144b11151e4187f/"
_Q = ("https://raw.githubusercontent.com/frankaging/Quasi-Attention-ABSA/"
      "15979680286643d0a82b704966e5c393669981fa/")
FIX = "run `absa data download` (it fetches every missing or bad file) or set ABSA_DATA_DIR to a folder with the verified files"


@dataclass(frozen=True)
class DataFile:
    """One pinned file: ``path`` is relative to the data folder."""

    path: str
    url: str
    alt_url: str | None
    sha256: str
    size: int
    dataset: str
    optional: bool = False          # the NLI_M files: verified when present, never required


FILES: tuple[DataFile, ...] = (
    DataFile("sentihood/sentihood-train.json", _H + "data/sentihood/sentihood-train.json",
             _Q + "datasets/sentihood/sentihood-train.json",
             "46bb48d007dc35e07e93bd44e007579396336a17ba7d5d2cf1343e4d6a27d376", 1013925, "sentihood"),
    DataFile("sentihood/sentihood-dev.json", _H + "data/sentihood/sentihood-dev.json",
             _Q + "datasets/sentihood/sentihood-dev.json",
             "f0262cbe2ef6db66b0573945c3b9d68c17103331a64e9809604c0dabf2495c97", 252786, "sentihood"),
    DataFile("sentihood/sentihood-test.json", _H + "data/sentihood/sentihood-test.json",
             _Q + "datasets/sentihood/sentihood-test.json",
             "61cc5188e6ab0147214af68554877622f15b6e459f5e187bc6607108674d5cc8", 504388, "sentihood"),
    DataFile("semeval2014/Restaurants_Train.xml", _H + "data/semeval2014/Restaurants_Train.xml",
             _Q + "datasets/semeval2014/Restaurants_Train.xml",
             "5195b73af689345b47dee950bada32f5c5268ba8a61b96e1ab2301040b4207e2", 1236939, "semeval"),
    DataFile("semeval2014/Restaurants_Test_Gold.xml", _H + "data/semeval2014/Restaurants_Test_Gold.xml",
             _Q + "datasets/semeval2014/Restaurants_Test_Gold.xml",
             "f21509cfa37e16534cd5b2da043be487355b64ef48fe8d6aaacaeca6b49cc0fb", 359021, "semeval"),
    DataFile("sentihood/nli_m/train_NLI_M.tsv", _Q + "datasets/sentihood/train_NLI_M.tsv", None,
             "1cf9155907afc5fa7c93cda21e2e5fc56eeeec57c02ec1854ebe3dafba55c8d0", 1916437, "sentihood", True),
    DataFile("sentihood/nli_m/dev_NLI_M.tsv", _Q + "datasets/sentihood/dev_NLI_M.tsv", None,
             "4a1ad9c0f604939b5b6ed28417f3d11cce2dbec23514cfa95fdd1316ebb71d6a", 482719, "sentihood", True),
    DataFile("sentihood/nli_m/test_NLI_M.tsv", _Q + "datasets/sentihood/test_NLI_M.tsv", None,
             "0f5fbd44b93952b30d01d83ccdff1e8064e0cf0cee1bdd7174ef8cf94d9facea", 967027, "sentihood", True),
    DataFile("semeval2014/nli_m/train_NLI_M.csv", _Q + "datasets/semeval2014/train_NLI_M.csv", None,
             "7c1bfb7c3dd9e427a2ce09cd3aed1a0fdc45941907b69fc47f9acf84a1f719aa", 1401534, "semeval", True),
    DataFile("semeval2014/nli_m/test_NLI_M.csv", _Q + "datasets/semeval2014/test_NLI_M.csv", None,
             "83fa739e2e284206b92641e3dd4dbd1b9922eb1cc3d26b422377ce6524405707", 431561, "semeval", True),
)

_VERIFIED: dict[Path, tuple[int, int]] = {}      # path -> (mtime_ns, size) of a file that passed


def _entry(path: str) -> DataFile:
    for f in FILES:
        if f.path == path:
            return f
    raise KeyError(f"{path!r} is not a pinned data file")


def dataset_checksums(dataset: str) -> dict[str, str]:
    """``{relative path: sha256}`` of the required raw files of ``dataset`` (what a run records)."""
    return {f.path: f.sha256 for f in FILES if f.dataset == dataset and not f.optional}


def _problem(path: Path, f: DataFile) -> str | None:
    """None if ``path`` holds exactly the pinned bytes of ``f``, else what is wrong (one phrase)."""
    if not path.is_file():
        what = "a folder, not the file" if path.is_dir() else "not a regular file" if path.exists() else "missing"
        return f"{path} is {what} (expected {f.size:,} bytes, sha256 {f.sha256})"
    size = path.stat().st_size
    if size < f.size:
        return f"{path} is too short (truncated or edited): {size:,} bytes, expected {f.size:,} (sha256 {f.sha256})"
    if size > f.size:
        return f"{path} is too large (edited, or another file): {size:,} bytes, expected {f.size:,} (sha256 {f.sha256})"
    try:
        digest = file_sha256(path)
    except OSError as err:
        return f"{path} cannot be read ({err.strerror}); check its permissions"
    if digest != f.sha256:
        return f"{path} is corrupted or modified: sha256 {digest}, expected {f.sha256} ({f.size:,} bytes)"
    return None


def check_file(path: str | os.PathLike, entry: DataFile) -> Path:
    """Raise :class:`AbsaError` unless ``path`` holds the pinned bytes; cached by (path, mtime, size)."""
    path = Path(path)
    try:
        st = path.stat()
        stamp = (st.st_mtime_ns, st.st_size)
    except OSError:
        stamp = None
    if stamp is not None and _VERIFIED.get(path) == stamp:
        return path
    problem = _problem(path, entry)
    if problem:
        _VERIFIED.pop(path, None)
        raise AbsaError(f"{problem}; {FIX}")
    _VERIFIED[path] = stamp
    return path


def verified_path(relative: str, data_dir: str | os.PathLike | None = None) -> Path:
    """The path of a pinned file under the data folder, after checking its size and SHA-256."""
    return check_file(resolve_data_dir(data_dir) / relative, _entry(relative))


def verify(data_dir: str | os.PathLike | None = None) -> dict[str, str]:
    """Check every pinned file in a folder.

    Returns:
        ``{relative path: "ok" | "absent (optional)"}``.

    Raises:
        AbsaError: one line naming the first bad file (and how many others are bad).
    """
    root = resolve_data_dir(data_dir)
    report, problems = {}, []
    for f in FILES:
        path = root / f.path
        if f.optional and not path.exists():
            report[f.path] = "absent (optional)"
            continue
        try:
            check_file(path, f)
            report[f.path] = "ok"
        except AbsaError as err:
            problems.append((f.path, str(err)))
    if problems:
        others = ", ".join(name for name, _ in problems[1:])
        more = f" [and {len(problems) - 1} more bad file(s): {others}]" if len(problems) > 1 else ""
        raise AbsaError(problems[0][1] + more)
    return report


def _fetch(url: str, f: DataFile, target: Path) -> None:
    """Download ``url`` into ``target`` atomically; raise OSError/ValueError on any failure."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    try:
        os.fchmod(fd, new_file_mode())                  # as open() would, not mkstemp's 0o600
        h, size = hashlib.sha256(), 0
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=60) as resp:
            for block in iter(lambda: resp.read(1 << 16), b""):
                out.write(block)
                h.update(block)
                size += len(block)
                if size > f.size:
                    raise ValueError(f"more than the expected {f.size:,} bytes")
        if size != f.size:
            raise ValueError(f"got {size:,} bytes, expected {f.size:,}")
        if h.hexdigest() != f.sha256:
            raise ValueError(f"sha256 {h.hexdigest()}, expected {f.sha256}")
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def download(data_dir: str | os.PathLike | None = None, force: bool = False,
             nli_m: bool = False) -> dict[str, str]:
    """Fetch the raw files (and, with ``nli_m``, the published NLI_M files) into the data folder.

    Files that already verify are kept unless ``force``. Each file is tried from its primary URL,
    then its alternative; a failed attempt never touches an existing file.

    Returns:
        ``{relative path: "ok" (already there) | "downloaded"}``.

    Raises:
        AbsaError: a file could not be fetched with the pinned size and checksum from any URL.
    """
    root = resolve_data_dir(data_dir)
    report = {}
    for f in FILES:
        if f.optional and not nli_m:
            continue
        target = root / f.path
        if not force and _problem(target, f) is None:
            report[f.path] = "ok"
            continue
        ensure_writable(target.parent, "choose a writable data folder with --data-dir (or ABSA_DATA_DIR)")
        errors = []
        for url in (f.url, f.alt_url):
            if url is None:
                continue
            try:
                _fetch(url, f, target)
                break
            except (OSError, ValueError) as err:
                errors.append(f"{url}: {err}")
        else:
            raise AbsaError(f"could not download {f.path} ({f.size:,} bytes, sha256 {f.sha256}): "
                            + "; ".join(errors) + f"; check the network, or place the file at {target} "
                            "yourself (or set ABSA_DATA_DIR) and run `absa data verify`")
        _VERIFIED.pop(target, None)
        report[f.path] = "downloaded"
    return report
