"""docs/contributing.md's "A model", done as it says: a class and its `Model` record in the registry,
added at run time for this file's tests only, trained on the tiny backbone (two seeds), then used by
`predict_text`, exported and read back, summarised and compared (`absa summary`, `absa compare`) with
BERT-pair, and given a row of Table 1 by a paper row that names it. The guide's file counts are the
files these steps touch. Also: no test file keeps its own list of the model names."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from absa_lib.apply import predict_text
from absa_lib.cli import main
from absa_lib.harness.profiles import load_profile
from absa_lib.harness.runner import profile_cells  # imported before the model is registered
from absa_lib.models import registry
from absa_lib.models.absa_model import AbsaModel
from absa_lib.reports import paper_numbers
from absa_lib.reports.compare import compare
from absa_lib.reports.model_card import export_run
from absa_lib.reports.summary import summarize
from absa_lib.reports.tables import build_table, to_markdown
from absa_lib.training.records import find_runs, load_model_folder

ROOT = Path(__file__).resolve().parent.parent
NAME = "pair-copy"
SENTENCE = "LOCATION1 is cheap but far from everything"


class PairCopyModel(AbsaModel):
    """BERT-pair under another name: y = softmax(W tanh(W_p h_[CLS] + b_p)) on the sentence pair."""


@pytest.fixture(scope="module")
def new_model():
    """The guide's steps 1 and 2, at run time: the class above and its record in ``MODELS``."""
    record = registry.Model(PairCopyModel, ("pooling",), reads="pair", context_ids=False, table_row=True,
                            explainable=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(registry.MODELS, NAME, record)
        yield record


@pytest.fixture(scope="module")
def runs_dir(new_model, tiny_systems, tmp_path_factory) -> Path:
    """Two seeds of the new model and of BERT-pair, tiny."""
    return tiny_systems(tmp_path_factory.mktemp("runs"), (NAME, "bert-pair"))


def test_the_guide_says_what_this_file_does():
    guide = (ROOT / "docs" / "contributing.md").read_text()
    section = guide.split("## A model", 1)[1].split("\n## ", 1)[0]
    for needle in ("`AbsaPreTrainedModel`", "`MODELS`", "`table_row`", "paper_numbers.py", "tests/test_model_guide.py",
                   "Files touched: 2"):
        assert needle in section, needle


def test_the_record_alone_makes_it_a_model(new_model):
    assert registry.traits(NAME) is new_model and NAME in registry.names_with(table_row=True)
    model = registry.build_model(NAME, backbone="tiny", num_labels=3, num_contexts=8)
    assert type(model) is PairCopyModel and model.config.absa_model == NAME
    assert main(["info", "--model", NAME, "--backbone", "tiny"]) == 0


def test_it_trains_predicts_and_exports(runs_dir, tmp_path):
    runs = find_runs(runs_dir, model=NAME)
    assert len(runs) == 2 and sorted(r.config.seed for r in runs) == [3, 4]
    assert type(runs[0].load_model("best")) is PairCopyModel             # a saved one loads by its name
    result = predict_text(runs[0], SENTENCE)
    assert len(result["predictions"]) == 4                                  # SentiHood's four aspects
    folder = export_run(runs[0], tmp_path / "exported")
    exported = load_model_folder(folder)
    assert type(exported.load_model()) is PairCopyModel
    again = predict_text(folder, SENTENCE, explain=True)                    # explainable: word relevance
    assert all(len(p["explanation"]["relevance"]) == len(again["words"]) for p in again["predictions"])
    assert [p["label"] for p in again["predictions"]] == [p["label"] for p in result["predictions"]]


def test_summary_and_compare_read_its_runs(runs_dir, capsys):
    text, frame = summarize(runs_dir)
    ours = frame[frame["row"].str.startswith(f"{NAME} NLI-M (paper), tiny")]    # a row of its own, both seeds
    assert len(ours) == 2 and (ours["n_seeds"] == 2).all() and f"| {NAME} NLI-M (paper), tiny" in text
    assert main(["summary", str(runs_dir)]) == 0 and NAME in capsys.readouterr().out
    table = compare(find_runs(runs_dir, model=NAME), find_runs(runs_dir, model="bert-pair"), samples=100)
    assert "aspect_strict_acc" in list(table["metric"]) and (table["n_seeds"] == 2).all()
    assert main(["compare", str(runs_dir), str(runs_dir), "--a-filter", f"model={NAME}", "--b-filter",
                 "model=bert-pair", "--samples", "100"]) == 0
    assert "aspect_strict_acc" in capsys.readouterr().out


def test_a_table_row_is_a_paper_row_that_names_it(runs_dir):
    """``table_row`` alone adds no row (the tables show the paper's rows); a `PaperRow` naming the model does."""
    runs = find_runs(runs_dir)
    assert NAME not in set(build_table("sentihood", runs)["model"])
    row = paper_numbers._row("Pair copy (ours)", "sentihood", {}, NAME, "NLI-M")
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(paper_numbers.PAPER_TABLES, "sentihood", (*paper_numbers.PAPER_TABLES["sentihood"], row))
        df = build_table("sentihood", runs)
        ours = df[(df["model"] == row.name) & (df["source"] == "ours")]
        assert len(ours) == 2 and (ours["n_seeds"] == 2).all()                   # one row per protocol
        assert f"| {row.name} |" in to_markdown(df, "sentihood")
        cells = profile_cells(load_profile("smoke"), ("tables",))          # and a training profile trains it
        assert any(c.config.model == NAME and c.config.dataset == "sentihood" for c in cells)


def test_no_test_file_keeps_a_list_of_the_model_names():
    """A test asks the registry (``MODELS``, ``names_with``, ``traits``) for the models, as the package
    does: no literal tuple, list or set of five or more model names in ``tests/``, which a new model
    would have to join. (A dict keyed by some of them holds what was recorded for those, as
    test_pretrained's ``PINNED_INIT``: nothing a new model must join.)"""
    names, lists = set(registry.MODELS), []
    for path in sorted((ROOT / "tests").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            items = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else ()
            if len({i.value for i in items if isinstance(i, ast.Constant) and i.value in names}) >= 5:
                lists.append(f"{path.name}:{node.lineno}")
    assert lists == []
    assert len(names) >= 5                     # enough names for a list of them to be seen above
