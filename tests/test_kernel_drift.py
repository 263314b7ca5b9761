"""scripts/kernel_drift.py: the first training step of each model, saved, and two saves compared."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("kernel_drift", ROOT / "scripts" / "kernel_drift.py")
kernel_drift = importlib.util.module_from_spec(spec)
spec.loader.exec_module(kernel_drift)


def test_the_same_kernels_give_the_same_step_and_a_perturbation_shows_in_its_variant_only(
        tiny_dir, real_data_dir, tmp_path, capsys):
    save = ["save", "--backbone", str(tiny_dir), "--data-dir", str(real_data_dir), "--examples", "6"]
    assert kernel_drift.main([*save, str(tmp_path / "a.npz")]) == 0
    assert kernel_drift.main([*save, str(tmp_path / "b.npz")]) == 0
    with np.load(tmp_path / "a.npz") as a:
        saved = dict(a)
    assert len(saved) == 3 * len(kernel_drift.VARIANTS)
    assert saved["QACG-BERT (aux)|logits"].shape == (6, 5)            # SemEval: 6 examples, 4 polarities + none
    assert kernel_drift.main(["compare", str(tmp_path / "a.npz"), str(tmp_path / "b.npz")]) == 0
    rows = capsys.readouterr().out.splitlines()[1:]
    assert len(rows) == len(kernel_drift.VARIANTS)
    assert all(re.fullmatch(r".+( +0\.0e\+00){3}", row) for row in rows), rows   # bit for bit

    grad = saved["CG-BERT (sentence only)|grad"]
    saved["CG-BERT (sentence only)|grad"] = grad + 1e-3 * np.linalg.norm(grad) / np.sqrt(grad.size)
    np.savez(tmp_path / "c.npz", **saved)
    assert kernel_drift.main(["compare", str(tmp_path / "c.npz"), str(tmp_path / "b.npz")]) == 0
    rows = {row[:28].strip(): row.split()[-1] for row in capsys.readouterr().out.splitlines()[1:]}
    assert rows.pop("CG-BERT (sentence only)") == "1.0e-03"
    assert set(rows.values()) == {"0.0e+00"}

    del saved["QACG-BERT (aux)|loss"]
    np.savez(tmp_path / "d.npz", **saved)
    assert kernel_drift.main(["compare", str(tmp_path / "d.npz"), str(tmp_path / "b.npz")]) == 2
    assert "hold other variants" in capsys.readouterr().err
    assert kernel_drift.main(["compare", str(tmp_path / "absent.npz"), str(tmp_path / "b.npz")]) == 2
    assert "absent.npz: cannot be read" in capsys.readouterr().err
    np.save(tmp_path / "e.npy", grad)                               # one array, not a save
    assert kernel_drift.main(["compare", str(tmp_path / "e.npy"), str(tmp_path / "b.npz")]) == 2
    assert "e.npy: not an .npz file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        kernel_drift.main([*save, "--examples", "0", str(tmp_path / "f.npz")])
    assert "argument --examples: expected a whole number of at least 1, got '0'" in capsys.readouterr().err


def test_weights_says_how_far_apart_two_checkpoints_are_overall_and_which_tensors_most(tmp_path, capsys):
    import torch
    from safetensors.torch import save_file

    for name, y in (("a", [3.0, 4.0]), ("b", [3.0, 4.5])):
        (tmp_path / name).mkdir()
        save_file({"x": torch.ones(4), "y": torch.tensor(y)}, tmp_path / name / "model.safetensors")
    assert kernel_drift.main(["weights", str(tmp_path / "a"), str(tmp_path / "b"), "--top", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    # ‖Δ‖ = 0.5 over ‖b‖ = √(4 + 9 + 20.25); per tensor y: 0.5/√29.25, x: 0; median of the two
    assert lines[0] == f"all 2 tensors: {0.5 / 33.25 ** 0.5:.1e}; median tensor {0.25 / 29.25 ** 0.5:.1e}"
    assert lines[1:] == [f"  {0.5 / 29.25 ** 0.5:.1e}  y", "  0.0e+00  x"]

    save_file({"x": torch.ones(4)}, tmp_path / "a" / "model.safetensors")
    assert kernel_drift.main(["weights", str(tmp_path / "a"), str(tmp_path / "b")]) == 2
    assert "hold other parameters" in capsys.readouterr().err
    assert kernel_drift.main(["weights", str(tmp_path / "a"), str(tmp_path)]) == 2
    assert "no model.safetensors" in capsys.readouterr().err
