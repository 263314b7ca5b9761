"""The committed reference (`results/reference/`) is what `bash run_all.sh render` shows and what the
run cache starts from. A change to how a run's identity is computed would orphan it silently: render
would still show the old records, while `absa grid` retrains every cell. These tests catch that, and
tampered or half-written records, before they land."""

from __future__ import annotations

from pathlib import Path

import pytest

from absa_lib.harness.profiles import load_profile
from absa_lib.harness.runner import profile_cells
from absa_lib.training.config import run_path
from absa_lib.training.records import load_run

REFERENCE = Path(__file__).resolve().parent.parent / "results" / "reference"
CPU_SEEDS = [42, 43, 44]            # the seeds the README reports for every row of the cpu profile
RECORDS = sorted(p.parent for p in REFERENCE.rglob("config.json"))     # runs/ and checks/


def test_the_reference_is_not_empty():
    assert len(RECORDS) >= 97


def test_the_docs_count_of_the_reference_runs_and_their_hours_is_the_records():
    """docs/results.md's "In all" sentence, from the records (it fell behind by 15 runs once)."""
    from absa_lib.harness.runner import recorded_cost

    cost = recorded_cost(REFERENCE / "runs")
    gpu = {name: d for name, d in cost["devices"].items() if name.startswith("NVIDIA")}
    cpu = [d for name, d in cost["devices"].items() if name not in gpu]
    h100, h200 = gpu["NVIDIA H100 80GB HBM3"], gpu["NVIDIA H200"]
    docs = " ".join((REFERENCE.parent.parent / "docs" / "results.md").read_text().split())
    assert (f"holds {cost['runs']} runs: the `cpu` profile's {sum(d['runs'] for d in cpu)} "
            f"({sum(d['hours'] for d in cpu):.1f} hours of single-core training and evaluation) and the `gpu` "
            f"profile's {h100['runs'] + h200['runs']} ({h100['hours']:.1f} hours of H100 time for {h100['runs']} runs "
            f"and {h200['hours']:.1f} hours of H200 time for {h200['runs']}," in docs)


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}/{p.name}")
def test_every_record_is_complete_and_its_config_hashes_to_its_run_id(path):
    run = load_run(path)              # raises on a config whose hash is not its folder name, or unfinished
    assert run.run_id == path.name
    assert run.metrics.epochs and {"dev", "test"} <= set(run.metrics.epochs[-1])
    assert set(run.env.record) >= {"torch", "transformers", "device", "git_commit"}


def test_the_cpu_profile_finds_every_cell_of_its_three_seeds_in_the_reference():
    """As a CPU without native bf16 computes the cells (precision 'auto' = fp32 there), where those
    records were trained. On a CPU with it, or a CUDA machine, 'auto' is bf16: other cells, other ids
    (the test after this one), so the machine running the tests must not decide what is checked."""
    params = load_profile("cpu")
    assert params["train_options"]["precision"] == "auto"
    params.update(seeds=CPU_SEEDS, ablation_seeds=CPU_SEEDS)
    params["train_options"] = {**params["train_options"], "precision": "fp32"}
    cells = profile_cells(params)
    paths = [run_path(c.config, REFERENCE / "runs") for c in cells]
    missing = [f"{c.part} {c.config.dataset} {c.label} seed {c.config.seed} ({path.name})"
               for c, path in zip(cells, paths, strict=True) if not (path / "metrics.json").is_file()]
    assert not missing, f"{len(missing)} of {len(cells)} cells lack a record: {missing[:3]}"


def test_the_bf16_check_holds_seed_42_of_every_cell_of_the_cpu_profile_as_a_native_bf16_cpu_computes_it():
    """`checks/cpu_profile_bf16/` is the cpu profile trained on a CPU with native bf16 ('auto' = bf16):
    each record must be one of the profile's seed-42 cells with precision bf16, and no cell missing,
    so that docs/results.md's bf16-against-fp32 comparison covers the whole profile."""
    params = load_profile("cpu")
    params.update(seeds=[42], ablation_seeds=[42])
    params["train_options"] = {**params["train_options"], "precision": "bf16"}
    expected = {run_path(c.config, REFERENCE).name: f"{c.part} {c.config.dataset} {c.label}"
                for c in profile_cells(params)}
    held = {p.name for p in (REFERENCE / "checks" / "cpu_profile_bf16").iterdir() if p.is_dir()}
    assert len(expected) == 35
    assert held - set(expected) == set(), "records that are no bf16 seed-42 cell of the cpu profile"
    assert not set(expected) - held, [expected[i] for i in sorted(set(expected) - held)][:3]


def test_every_gpu_record_is_a_cell_of_the_gpu_profile_as_a_cuda_node_computes_it(monkeypatch):
    """The 25-epoch runs were trained on CUDA, where precision 'auto' is bf16, on the carried float16
    backbone copy. A code change that alters their identities would make the next GPU session train
    them again under new ids (and `absa remote start` copy them in for nothing): caught here."""
    import absa_lib.training.config as C
    from absa_lib.training.records import find_runs

    gpu = [r for r in find_runs(REFERENCE / "runs") if r.env.device == "cuda"]
    assert len(gpu) >= 24
    fingerprints = {r.config.backbone_fingerprint for r in gpu}
    assert len(fingerprints) == 1
    monkeypatch.setattr(C, "backbone_fingerprint", lambda backbone: next(iter(fingerprints)))
    params = load_profile("gpu")
    params["train_options"] = {**params["train_options"], "precision": "bf16"}
    ids = {run_path(c.config, REFERENCE / "runs").name for c in profile_cells(params)}
    strays = [f"{r.config.dataset} {r.config.model} seed {r.config.seed} ({r.run_id})" for r in gpu
              if r.run_id not in ids]
    assert not strays, f"{len(strays)} GPU records are no cell of the gpu profile: {strays[:3]}"


# docs/results.md ("Does fp32 reproduce the committed records on another CPU?"): the runs it calls
# reproduced there, with the largest difference it reports, as a fraction (the docs round to points:
# 0.014 points is at most 1.5e-4)
REPRODUCED_ON_ANOTHER_CPU = {"128f2a2d229a": 0, "525bd406a339": 0, "5d8cc4286c33": 0, "7c4637705942": 0,
                             "5addca208daa": 1e-15, "e7935f30577f": 1e-15, "bcd3881ca346": 0, "ea630712aade": 0,
                             "429b27a77bf9": 1.5e-5, "4c42ac4813c7": 1.5e-4, "0adb02edfefb": 5e-7,
                             # notebook 06: OA-BERT, ATAE-LSTM, AE-LSTM on both datasets, AT-LSTM
                             "0f533700a849": 0, "8c64b9039b22": 0, "46bd9d3d588d": 0, "e08b21da51fc": 0,
                             "c7dcdaa649d0": 0, "c33b5aa1211e": 0, "f7301d4f368e": 0, "682eb43551e3": 0,
                             "663b5ac583a3": 0, "3e069ffb7e0b": 4e-5}


def numbers(metrics: dict, prefix: str = "") -> dict[str, float]:
    """Every number of a nested metrics dict, keyed by its path."""
    out = {}
    for k, v in metrics.items():
        if isinstance(v, dict):
            out.update(numbers(v, f"{prefix}{k}."))
        elif isinstance(v, (int, float)):
            out[prefix + k] = v
    return out


@pytest.mark.parametrize("check", ["fp32_other_cpu", "fp32_other_cpu_isa_avx2"])
def test_the_other_cpu_checks_retrain_committed_fp32_cells(check):
    """`checks/fp32_other_cpu*/` retrain committed fp32 records on a CPU of another generation: each
    must be the same configuration as a record under runs/ (same run id, so nothing but the machine
    differs), and the runs docs/results.md calls reproduced must equal their records in every dev and
    test metric of every epoch, to within the difference it reports."""
    for path in sorted(p for p in (REFERENCE / "checks" / check).iterdir() if p.is_dir()):
        run = load_run(path)
        twin = load_run(REFERENCE / "runs" / run.config.dataset / run.config.model / run.run_id)
        assert {k: run.config.get(k) for k in twin.config.record} == twin.config.record   # newer records add neutral fields
        assert run.config.precision == "fp32" and run.env.record["torch_threads"] == 1
        if check == "fp32_other_cpu" and run.run_id in REPRODUCED_ON_ANOTHER_CPU:
            assert len(run.metrics.epochs) == len(twin.metrics.epochs)
            for ours, theirs in zip(run.metrics.epochs, twin.metrics.epochs, strict=True):
                a, b = numbers({"dev": ours["dev"], "test": ours["test"]}), numbers({"dev": theirs["dev"], "test": theirs["test"]})
                assert a.keys() == b.keys()
                worst = max(abs(a[k] - b[k]) for k in a)
                assert worst <= REPRODUCED_ON_ANOTHER_CPU[run.run_id], (run.run_id, worst)


def test_the_other_cpu_check_holds_every_cell_of_seed_42():
    """The docs compare each cell's fp32 run on the AVX512 CPU (tables, ablations, notebook 06) with
    its record and with its bf16 twin: all 35 must be there, and the 21 they call reproduced."""
    params = load_profile("cpu")
    params.update(seeds=[42], ablation_seeds=[42])
    params["train_options"] = {**params["train_options"], "precision": "fp32"}
    expected = {run_path(c.config, REFERENCE).name for c in profile_cells(params)}
    held = {p.name for p in (REFERENCE / "checks" / "fp32_other_cpu").iterdir() if p.is_dir()}
    assert len(expected) == 35 and held == expected
    assert len(REPRODUCED_ON_ANOTHER_CPU) == 21
    assert set(REPRODUCED_ON_ANOTHER_CPU) <= held


def test_the_committed_manifest_is_current():
    """``results/MANIFEST.json`` as ``bash run_all.sh render`` leaves it: every record under
    ``results/reference/`` listed (records added without a render once left it two behind), and
    the checksum of every committed table and figure its file's."""
    import json

    from absa_lib.harness.manifest import sha256

    root = REFERENCE.parent.parent
    manifest = json.loads((root / "results" / "MANIFEST.json").read_text())
    on_disk = sorted(p.relative_to(root).as_posix() for p in REFERENCE.rglob("*")
                     if p.is_file() and not p.name.startswith("."))
    assert manifest["reference"] == on_disk
    stale = [f for f, entry in manifest["files"].items() if sha256(root / f) != entry["sha256"]]
    assert stale == []
