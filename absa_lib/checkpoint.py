"""Checkpoints as safetensors only: model weights (``save_pretrained``) plus, for resuming, the
optimizer moments, the step counter, the RNG state and the metrics so far.

A checkpoint folder is written under a temporary name and renamed into place, so a killed process
leaves the previous checkpoint intact.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from absa_lib.runs import atomic_write_json


def _replace_dir(tmp: Path, final: Path) -> None:
    old = final.with_name(final.name + ".old")
    if final.exists():
        shutil.rmtree(old, ignore_errors=True)
        final.rename(old)
    tmp.rename(final)
    shutil.rmtree(old, ignore_errors=True)


def save_checkpoint(directory: Path, model, optimizer=None, state: dict | None = None) -> None:
    """Save ``model`` (and, when given, the optimizer and trainer ``state``) to ``directory``."""
    directory = Path(directory)
    tmp = directory.with_name(directory.name + ".tmp")
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
    _replace_dir(tmp, directory)


def load_trainer_state(directory: Path, optimizer) -> dict | None:
    """Restore optimizer moments and RNG state from ``directory``; return the saved trainer state."""
    directory = Path(directory)
    meta_path, tensor_path = directory / "trainer_state.json", directory / "trainer_state.safetensors"
    if not (meta_path.is_file() and tensor_path.is_file()):
        return None
    meta = json.loads(meta_path.read_text())
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
