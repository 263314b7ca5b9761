"""The run folder has one owner (absa_lib.training.records): nothing else names its files or reads its
records by key; each record is read, checked and upgraded once, where it is loaded."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from absa_lib.errors import AbsaError
from absa_lib.training import records
from absa_lib.training.records import RunFolder, load_model_folder, load_run
from absa_lib.training.records.upgrade import config_format

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "absa_lib"
OWNER = PACKAGE / "training" / "records"
REFERENCE = ROOT / "results" / "reference" / "runs"
RECORD_NAMES = ("metrics.json", "env.json", "absa_export.json")     # config.json is also a model's file


def _code_strings(tree: ast.AST) -> list[ast.Constant]:
    """The string constants of a module that are not docstrings."""
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [node for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docstrings]


def _outside_owner() -> list[Path]:
    return [p for p in sorted(PACKAGE.rglob("*.py")) if OWNER not in p.parents]


def test_no_module_but_the_owner_names_a_record_file():
    """As a path (``"metrics.json"``, ``f"runs/*/{id}/metrics.json"``); prose for people (a help text, the
    model card) may name a file."""
    named = [f"{p.relative_to(ROOT)}:{node.lineno} {node.value[:40]!r}" for p in _outside_owner()
             for node in _code_strings(ast.parse(p.read_text()))
             if any(n in node.value for n in RECORD_NAMES) and not any(c.isspace() for c in node.value)]
    assert named == []


def test_no_module_but_the_owner_reads_a_run_record_by_key():
    """``run.config["seed"]``, ``run.metrics.get("epochs")``, ``run.env["gpu"]``: a typed attribute instead."""
    reads = []
    for path in _outside_owner():
        for node in ast.walk(ast.parse(path.read_text())):
            target = None
            if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
                target = node.value
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                  and node.args and isinstance(node.args[0], ast.Constant)):
                target = node.func.value
            if isinstance(target, ast.Attribute) and target.attr in ("config", "metrics", "env") \
                    and not (isinstance(target.value, ast.Name) and target.value.id in ("model", "self")):
                reads.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert reads == []


def test_the_written_before_defaults_live_in_the_upgrade_module_only():
    users = [f"{p.relative_to(ROOT)}:{node.lineno}" for p in _outside_owner() if p.name != "config.py"
             for node in ast.walk(ast.parse(p.read_text()))
             if isinstance(node, (ast.Name, ast.alias)) and getattr(node, "id", getattr(node, "name", "")) == "NEUTRAL_DEFAULTS"]
    assert users == []


def test_every_committed_record_loads_in_the_current_format_whatever_format_it_was_written_in():
    runs = records.find_runs(REFERENCE)
    formats = {config_format(r.config.record) for r in runs}
    assert len(runs) >= 164 and formats == {2, 3}                       # records of two formats
    for run in runs:
        assert run.config.compile == "none" or "compile" in run.config.record
        assert run.config.objective == "single" or "objective" in run.config.record
        assert run.config.run_id == run.path.name


def test_a_format_one_record_is_hashed_as_it_was_written(tmp_path):
    """A record from before the backbone fingerprint: its run id hashes every field as recorded, the
    neutral ones included; it loads, and hashed as a current record it would not match."""
    from absa_lib.training.config import config_hash
    from absa_lib.training.records import RunConfig

    run = next(r for r in records.find_runs(REFERENCE) if config_format(r.config.record) == 3)
    record = {k: v for k, v in run.config.record.items() if k != "backbone_fingerprint"}
    record["run_id"] = config_hash({"config": {k: v for k, v in record.items() if k not in records.upgrade.RECORD_EXTRAS},
                                    "data_sha256": record["data_sha256"], "absa_lib_version": record["absa_lib_version"]})
    assert config_format(record) == 1 and record["run_id"] != run.run_id
    assert RunConfig.from_record(record, tmp_path / "config.json").seed == run.config.seed
    with pytest.raises(AbsaError, match="is not the hash of the recorded configuration"):
        RunConfig.from_record({**record, "backbone_fingerprint": run.config.backbone_fingerprint}, tmp_path / "c.json")


def test_a_run_folder_is_read_once_per_load(monkeypatch, tiny_run):
    """load_run reads each record once and checks the run id once; the typed run then answers without
    going back to disk (absa predict validated and hashed the record 2–3 times before)."""
    from absa_lib import fileio
    from absa_lib.training.records import store, typed

    path = tiny_run()
    reads, hashes = [], []
    real_read, real_hash = fileio.read_json, typed.config_hash
    monkeypatch.setattr(store, "read_json", lambda p, *fix: reads.append(Path(p).name) or real_read(p, *fix))
    monkeypatch.setattr(typed, "config_hash", lambda i: hashes.append(1) or real_hash(i))
    run = load_run(path)
    assert sorted(reads) == ["config.json", "env.json", "metrics.json"] and len(hashes) == 1
    run.selected("dev_best"), run.selected("test_best"), run.config.seed, run.env.device_name
    assert len(reads) == 3 and len(hashes) == 1


def test_an_exported_folder_is_verified_once_and_predicts_without_reading_its_record_again(monkeypatch, tmp_path,
                                                                                           tiny_run):
    from absa_lib.apply import predict_text
    from absa_lib.reports.model_card import export_run
    from absa_lib.training.records import store, typed

    folder = export_run(load_run(tiny_run()), tmp_path / "exported")
    hashed, checked = [], []
    real_sha, real_hash = store.file_sha256, typed.config_hash
    monkeypatch.setattr(store, "file_sha256", lambda p: hashed.append(Path(p).name) or real_sha(p))
    monkeypatch.setattr(typed, "config_hash", lambda i: checked.append(1) or real_hash(i))
    exported = load_model_folder(folder)
    predict_text(exported, "LOCATION1 is safe and friendly")
    assert len(checked) == 1 and sorted(hashed) == sorted(set(hashed))       # each file hashed once
    assert set(hashed) == set(json.loads((folder / records.EXPORT_RECORD).read_text())["sha256"])


def test_a_name_of_the_earlier_layout_names_the_new_place():
    from absa_lib.training import runs

    with pytest.raises(AttributeError, match="runs.load_run moved to absa_lib.training.records"):
        runs.load_run  # noqa: B018


def test_a_run_folders_paths_come_from_its_layout(tmp_path):
    folder = RunFolder(tmp_path / "sentihood" / "cg-bert" / "0123456789ab")
    assert folder.metrics.parent == folder.path and folder.checkpoint("best").parent.name == "checkpoints"
    assert not folder.is_run() and not folder.marked_complete()
    folder.path.mkdir(parents=True)
    folder.config.write_text("{}")
    folder.metrics.write_text(json.dumps({"complete": False}))
    assert folder.is_run() and not folder.marked_complete()
    assert records.run_folders(tmp_path) == [(folder.path, False)]
    assert records.unfinished_progress(folder.path) == (0, "?")
    with pytest.raises(AbsaError, match="config.json: expected a run record"):
        load_run(folder.path)


def test_an_exported_folder_reads_only_the_files_its_record_names(tmp_path, tiny_run):
    """A tokenizer file placed beside an export (added_tokens.json) would change what the model reads:
    refused, naming it; a damaged export record gets the export's fix, a damaged env.json its own."""
    from absa_lib.reports.model_card import export_run

    folder = export_run(load_run(tiny_run()), tmp_path / "exported")
    (folder / "added_tokens.json").write_text('{"LOCATION1": 30522}')
    with pytest.raises(AbsaError, match=r"added_tokens.json: not a file the export wrote \(absa_export.json names "
                                        r"each of them\).*remove it, or export the run again"):
        load_model_folder(folder)
    (folder / "added_tokens.json").unlink()
    load_model_folder(folder)
    (folder / records.EXPORT_RECORD).write_text("{")
    with pytest.raises(AbsaError, match=r"absa_export.json: not valid JSON .*; export the run again"):
        load_model_folder(folder)
    copy = tmp_path / "runs" / "sentihood" / "qacg-bert" / load_run(tiny_run()).run_id
    import shutil
    shutil.copytree(tiny_run(), copy, ignore=shutil.ignore_patterns("checkpoints"))
    RunFolder(copy).env.write_text("{")
    with pytest.raises(AbsaError, match=r"env.json: not valid JSON .*; delete it \(the next `absa train` of the "
                                        r"run writes it again; its finished epochs stay\)"):
        load_run(copy)


def test_an_export_needs_the_run_folder_only_and_its_card_says_what_the_missing_data_leaves_out(tmp_path, tiny_run,
                                                                                                 monkeypatch):
    """Without the benchmark's raw files an export is written all the same (issue 87): the card leaves out
    the trivial predictors' rows, which need the test file, and says why; the exported folder predicts."""
    from absa_lib.apply import predict_text
    from absa_lib.reports.model_card import CARD, export_run

    monkeypatch.setenv("ABSA_DATA_DIR", str(tmp_path / "no-data"))
    (tmp_path / "no-data").mkdir()
    folder = export_run(load_run(tiny_run()), tmp_path / "exported")
    card = (folder / CARD).read_text()
    assert "The trivial predictors' rows are not shown: the benchmark's files were not in the data folder" in card
    assert "(trivial)" not in card
    assert predict_text(load_model_folder(folder), "LOCATION1 is safe")["predictions"]
    monkeypatch.undo()                                    # the benchmark's files again
    with_data = export_run(load_run(tiny_run()), tmp_path / "with-data")
    assert "(trivial)" in (with_data / CARD).read_text() and "not shown" not in (with_data / CARD).read_text()
