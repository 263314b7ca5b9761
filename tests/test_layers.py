"""The package's structure as a contract: layers in order, no circles, a science core that imports
no plotting or notebook runner, each training field and each model name declared once, and the old
flat module paths failing with one line that names the new place."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from absa_lib.commands import train as train_command
from absa_lib.harness import grid
from absa_lib.models import MODELS
from absa_lib.training.config import TrainConfig

ROOT = Path(__file__).resolve().parent.parent


def test_the_import_contracts_of_pyproject_hold():
    """`lint-imports` with pyproject.toml's contracts: the layers in order, the harness and the CLI
    imported by nothing below them, the science core free of matplotlib and papermill, no circles."""
    out = subprocess.run([str(Path(sys.executable).parent / "lint-imports")], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "3 kept, 0 broken" in out.stdout


def test_the_science_core_imports_without_the_harness_plotting_or_papermill():
    code = ("import sys, absa_lib.data, absa_lib.models, absa_lib.evaluation, absa_lib.training\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('matplotlib', 'seaborn', 'papermill') "
            "or m.startswith(('absa_lib.harness', 'absa_lib.reports', 'absa_lib.commands', 'absa_lib.cli'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_no_import_circle_is_hidden_inside_a_function():
    """Imports of absa_lib inside a function body: none in the library below the CLI (the CLI's
    commands import lazily so that `absa --help` stays fast)."""
    lazy = [f"{path.relative_to(ROOT)}:{i}" for path in sorted((ROOT / "absa_lib").rglob("*.py"))
            if "commands" not in path.parts and path.name != "cli.py"
            for i, line in enumerate(path.read_text().splitlines(), 1)
            if line.startswith((" ", "\t")) and line.lstrip().startswith(("from absa_lib", "import absa_lib"))
            and not line.lstrip().startswith("from absa_lib import TrainConfig, train")]   # the face's docstring
    assert lazy == []


def test_every_training_field_is_one_declaration_that_the_cli_and_the_grid_read():
    fields = dataclasses.fields(TrainConfig)
    assert all(f.metadata["help"] and f.metadata["role"] in ("grid", "budget", "option") for f in fields)
    parser = train_command.argparse.ArgumentParser()
    train_command.add_parser(parser.add_subparsers())
    options = {a.dest for a in parser._subparsers._group_actions[0].choices["train"]._actions}
    assert {f.name for f in fields} <= options
    assert set(grid.TRAIN_FIELDS) | set(grid.GRID_FIELDS) | set(TrainConfig.fields_of("option")) == {f.name for f in fields}
    assert grid.TRAIN_FIELDS == ("backbone", "epochs", "batch_size", "lr", "max_length", "eval_batch_size",
                                 "max_train_examples", "max_eval_examples")


def test_the_models_are_listed_once_in_the_registry():
    """No module but the registry holds a list (tuple, list, set or dict literal) of five or more model
    names: the CLI's choices, the config's check and the saved-model lookup all read ``MODELS``."""
    import ast

    names, lists = set(MODELS), []
    for path in sorted((ROOT / "absa_lib").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            items = (node.keys if isinstance(node, ast.Dict)
                     else getattr(node, "elts", None) if isinstance(node, ast.Tuple | ast.List | ast.Set) else None)
            found = {i.value for i in items or () if isinstance(i, ast.Constant) and i.value in names}
            if len(found) >= 5:
                lists.append(str(path.relative_to(ROOT)))
    assert lists == ["absa_lib/models/registry.py"]
    assert len(names) >= 5                     # enough names for a second list of them to be seen above


@pytest.mark.parametrize(("old", "new"), [("config", "absa_lib.training.config"), ("plots", "absa_lib.reports.plots"),
                                          ("models.per_context", "absa_lib.models.bert_single")])
def test_a_module_of_the_flat_layout_names_its_new_place(old, new):
    code = f"import absa_lib.{old}"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 1
    assert f"ModuleNotFoundError: absa_lib.{old} moved to {new}" in out.stderr.splitlines()[-1]
    import absa_lib

    if "." not in old:
        with pytest.raises(AttributeError, match=f"absa_lib.{old} moved to {new}"):
            getattr(absa_lib, old)


def test_the_public_names_are_found_lazily():
    import absa_lib
    from absa_lib.evaluation.predictions import evaluate_file
    from absa_lib.training.loop import train

    assert absa_lib.train is train and absa_lib.evaluate is evaluate_file
    assert set(absa_lib.__all__) <= set(dir(absa_lib))
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        absa_lib.nothing  # noqa: B018


def test_absa_train_reads_a_config_file_and_refuses_flags_beside_it(tmp_path, capsys, tiny_config):
    from absa_lib.cli import main

    config = tiny_config(dataset="semeval", model="bert-pair")
    path = tmp_path / "cell.json"
    path.write_text(json.dumps(config.to_dict()))
    args = train_command.argparse.Namespace(config=path, **{f.name: train_command._cli_default(f)
                                                            for f in dataclasses.fields(TrainConfig)})
    assert train_command.config_from_args(args) == config
    assert main(["train", "--config", str(path), "--seed", "7", "--out", str(tmp_path)]) == 2
    assert "gives every field; drop --seed" in capsys.readouterr().err
    path.write_text(json.dumps({**config.to_dict(), "epoch": 2}))
    assert main(["train", "--config", str(path), "--out", str(tmp_path)]) == 2
    assert "'epoch' is not a TrainConfig field" in capsys.readouterr().err
    assert main(["train", "--model", "bert-pair", "--out", str(tmp_path)]) == 2
    assert "required: --dataset (or --config FILE)" in capsys.readouterr().err


def test_no_branch_on_a_model_name_outside_the_models():
    """What a model can do is a trait of its registry record (``traits(name).per_context``, ``names_with
    (table_row=True)``): no module outside ``absa_lib/models/`` compares a model name (``== "bert-single"``,
    ``in ("cg-bert", "qacg-bert")``), so adding a model means adding its record."""
    assert branches_on(set(MODELS), outside="models") == []


def branches_on(names: set[str], outside: str) -> list[str]:
    """Where a module of absa_lib outside ``absa_lib/<outside>/`` compares a value with one of ``names``."""
    import ast

    branches = []
    for path in sorted((ROOT / "absa_lib").rglob("*.py")):
        if outside in path.relative_to(ROOT / "absa_lib").parts[:1]:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Compare):
                continue
            for side in (node.left, *node.comparators):
                consts = [side] if isinstance(side, ast.Constant) else list(getattr(side, "elts", []))
                if any(isinstance(c, ast.Constant) and c.value in names for c in consts):
                    branches.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return branches


def test_every_module_has_its_row_in_the_tests_readme():
    """tests/README.md maps each package module to the tests that cover it; a new module needs a row."""
    table = (ROOT / "tests" / "README.md").read_text()
    modules = sorted(p.relative_to(ROOT).with_suffix("").as_posix().replace("/", ".").removesuffix(".__init__")
                     for p in (ROOT / "absa_lib").rglob("*.py"))
    missing = [m for m in modules if f"| `{m}` |" not in table]
    listed = [line.split("`")[1] for line in table.splitlines() if line.startswith("| `absa_lib")]
    assert missing == [] and sorted(listed) == modules, (missing, sorted(set(listed) - set(modules)))


def test_no_module_outside_data_branches_on_a_datasets_name():
    """What differs between datasets is a field of their record (absa_lib.data.datasets.Dataset: targets,
    masked targets, the paper's F1 of means, the title, the example), not ``if dataset == "semeval"`` in
    the modules that use it; your own data gets the same behaviour from its record."""
    from absa_lib.data.datasets import REGISTRY

    assert set(REGISTRY) >= {"sentihood", "semeval"} and branches_on(set(REGISTRY), outside="data") == []


def test_your_own_data_is_a_record_not_a_patch_of_the_benchmarks_tables(fixtures_dir):
    from absa_lib.data import datasets as D
    from absa_lib.data.own_data import register_dataset

    before = {k: dict(v) for k, v in (("own", D.OWN), ("registry", D.REGISTRY))}
    try:
        name = register_dataset(fixtures_dir / "own_data" / "phones")
        record = D.get(name)
        assert record.labels == D.LABELS[name] and record.aspects == D.ASPECTS[name] and record.title == name
        assert record.sentiments == D.SENTIMENTS[name] and not record.masked_targets and record.targets
        assert set(D.LABELS) == set(D.REGISTRY)                # one table of records, read by field
    finally:
        for table, saved in ((D.OWN, before["own"]), (D.REGISTRY, before["registry"])):
            table.clear()
            table.update(saved)
