"""Checkpoints as safetensors only: model weights (``save_pretrained``) plus, for resuming, the
optimizer moments, the step counter, the RNG state and the metrics so far.

A checkpoint folder is written under a temporary name and renamed into place, so a killed process
leaves the previous checkpoint intact. ``checkpoint.json`` names the run and the epoch it holds; its
last file, ``checksums.json``, holds the SHA-256 of every other file. :func:`verify_checkpoint`
checks both before a checkpoint is used, so flipped or truncated bytes, another run's checkpoint
copied in, ``last`` copied over ``best`` or a link to another folder are errors rather than different
predictions. A checkpoint written before checkpoints named their run is refused.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from absa_lib.errors import AbsaError, one_line
from absa_lib.fileio import atomic_write_json, file_sha256, new_file_mode, read_json, replace_dir

CHECKSUMS = "checksums.json"
IDENTITY = "checkpoint.json"        # {"run_id", "epoch"}: the run and the epoch this checkpoint holds


def recover_checkpoint(directory: Path) -> None:
    """Finish a save a kill cut between its two renames (:func:`~absa_lib.fileio.replace_dir`): ``directory`` missing, the
    new checkpoint complete under ``.tmp`` (its checksums are written last) or the previous one under
    ``.old``. Without this, a resume would not see the state and would start again from epoch 1."""
    directory = Path(directory)
    if directory.exists() or directory.is_symlink():
        return
    tmp, old = directory.with_name(directory.name + ".tmp"), directory.with_name(directory.name + ".old")
    for candidate in (tmp, old):
        if (candidate / CHECKSUMS).is_file():
            candidate.rename(directory)
            print(f"[absa] {directory}: finished a save that was interrupted ({candidate.name} moved into place)",
                  file=sys.stderr)
            return


def save_checkpoint(directory: Path, model, run_id: str, epoch: int, optimizer=None, state: dict | None = None) -> None:
    """Save ``model`` after ``epoch`` of run ``run_id`` (and, when given, the optimizer and trainer
    ``state``) to ``directory``."""
    directory = Path(directory)
    tmp = directory.with_name(directory.name + ".tmp")
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        model.save_pretrained(tmp)
        if optimizer is not None:
            tensors, meta = {}, {"param_groups": optimizer.state_dict()["param_groups"]}
            for idx, slots in optimizer.state_dict()["state"].items():
                for name, value in slots.items():
                    tensors[f"state.{idx}.{name}"] = torch.as_tensor(value).detach().cpu().contiguous()
            tensors["rng.torch"] = torch.get_rng_state()
            if torch.cuda.is_available():
                tensors["rng.cuda"] = torch.cuda.get_rng_state()
            save_file(tensors, tmp / "trainer_state.safetensors")
            atomic_write_json(tmp / "trainer_state.json", {**meta, **(state or {})})
        atomic_write_json(tmp / IDENTITY, {"run_id": run_id, "epoch": epoch})
        for p in tmp.iterdir():                # safetensors writes 0o600; the records are the umask's
            p.chmod(new_file_mode())
        atomic_write_json(tmp / CHECKSUMS, {p.name: file_sha256(p) for p in sorted(tmp.iterdir()) if p.is_file()})
        replace_dir(tmp, directory)
    except (OSError, SafetensorError, AbsaError) as err:      # disk full, quota, permissions
        shutil.rmtree(tmp, ignore_errors=True)
        raise AbsaError(f"could not write the checkpoint {directory} ({one_line(err)}); free some space or "
                        "choose another --out, then run the same command again (it resumes from the last "
                        "complete epoch)") from None


def verify_checkpoint(directory: Path, run_id: str, epoch: int | None, fix: str) -> int:
    """Check that ``directory`` is a checkpoint of run ``run_id`` after ``epoch`` (None: any epoch)
    whose files are the bytes it was written with; return the epoch it holds.

    Raises:
        AbsaError: a link instead of a folder or a file, a file named in ``checksums.json`` that is
            not one of the folder's own, a listed file missing or changed, an unlisted file, or a
            checkpoint of another run or epoch; the message names the file and ends with ``fix``.
    """
    directory = Path(directory)
    if directory.is_symlink():
        raise AbsaError(f"{directory}: a link to {directory.resolve()}, not this run's checkpoint folder; {fix}")
    if not (directory / CHECKSUMS).is_file():
        raise AbsaError(f"{directory}: no {CHECKSUMS} (every checkpoint records one; it was deleted, or the "
                        f"checkpoint was written before checkpoints recorded them); {fix}")
    recorded = read_json(directory / CHECKSUMS)
    if not isinstance(recorded, dict) or not all(isinstance(v, str) for v in recorded.values()):
        raise AbsaError(f"{directory / CHECKSUMS}: expected {{file name: sha256}}; {fix}")
    for name in recorded:
        if name in ("", ".", "..") or "/" in name or "\\" in name or name.startswith(".") or name == CHECKSUMS:
            raise AbsaError(f"{directory / CHECKSUMS}: {name!r} is not a file of this folder; the list was "
                            f"edited or damaged; {fix}")
        if (directory / name).is_symlink():
            raise AbsaError(f"{directory / name}: a link, not a file written with this checkpoint; {fix}")
    unlisted = sorted(p.name for p in directory.iterdir() if p.name != CHECKSUMS and p.name not in recorded
                      and not p.name.startswith("."))
    if unlisted:                # a file left out of the list would be read unchecked
        raise AbsaError(f"{directory / CHECKSUMS}: does not list {', '.join(unlisted)}, which every checkpoint "
                        f"written here records; the list was edited or damaged; {fix}")
    if IDENTITY not in recorded:
        raise AbsaError(f"{directory}: no {IDENTITY} naming its run and epoch (written before checkpoints named them, or "
                        f"damaged); {fix}")
    for name, digest in sorted(recorded.items()):
        path = directory / name
        try:
            actual = file_sha256(path)
        except OSError as err:
            raise AbsaError(f"{path}: cannot be read ({err.strerror}); {fix}") from None
        if actual != digest:
            raise AbsaError(f"{path}: sha256 {actual[:16]}... differs from the {digest[:16]}... recorded when "
                            f"it was written (the file is corrupt); {fix}")
    identity = read_json(directory / IDENTITY)
    held = (identity.get("run_id"), identity.get("epoch")) if isinstance(identity, dict) else (None, None)
    if held[0] != run_id or (epoch is not None and held[1] != epoch):
        want = f"run {run_id}" + (f" after epoch {epoch}" if epoch is not None else "")
        raise AbsaError(f"{directory}: holds run {held[0]} after epoch {held[1]}, expected {want} (copied from "
                        f"another run or another checkpoint); {fix}")
    return held[1]


def load_trainer_state(directory: Path, optimizer) -> dict | None:
    """Restore optimizer moments and RNG state from ``directory``; return the saved trainer state."""
    directory = Path(directory)
    meta_path, tensor_path = directory / "trainer_state.json", directory / "trainer_state.safetensors"
    if not (meta_path.is_file() and tensor_path.is_file()):
        return None
    meta = read_json(meta_path)
    if not isinstance(meta, dict) or not {"param_groups", "epoch", "step", "epochs", "best"} <= set(meta):
        raise ValueError(f"{meta_path} is not a trainer state (param_groups, epoch, step, epochs, best)")
    tensors = load_file(tensor_path)
    state: dict[int, dict] = {}
    for key, value in tensors.items():
        if key.startswith("state."):
            _, idx, name = key.split(".", 2)
            state.setdefault(int(idx), {})[name] = value
    optimizer.load_state_dict({"state": state, "param_groups": meta.pop("param_groups")})
    torch.set_rng_state(tensors["rng.torch"])
    if "rng.cuda" in tensors and torch.cuda.is_available():
        torch.cuda.set_rng_state(tensors["rng.cuda"])
    return meta


def restore_checkpoint(directory: Path, model, optimizer, run_id: str, fix: str) -> dict | None:
    """Load the model and optimizer state of the resume state ``directory`` (verified to be run
    ``run_id``'s); its trainer state, or None when there is none. Errors end with ``fix``."""
    directory = Path(directory)
    if not directory.exists() and not directory.is_symlink():
        return None
    epoch = verify_checkpoint(directory, run_id, None, fix)     # this run's, not a copy of another's
    try:
        state = load_trainer_state(directory, optimizer)
        if state is not None:
            model.load_checked(load_file(directory / "model.safetensors"), str(directory / "model.safetensors"))
    except (OSError, SafetensorError, ValueError, KeyError, TypeError, RuntimeError) as err:
        raise AbsaError(f"{directory}: cannot resume ({one_line(err)}); {fix}") from None
    if state is None or state["epoch"] != epoch:
        raise AbsaError(f"{directory}: its trainer state is not the one of epoch {epoch} it names; {fix}")
    return state
