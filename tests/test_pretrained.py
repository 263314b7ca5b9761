"""The models are transformers PreTrainedModels: save_pretrained / from_pretrained / AutoModel round
trips for every model, checkpoints written before that still load, and initialisation is unchanged."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoConfig, AutoModel

from absa_lib.errors import AbsaError
from absa_lib.models import MODELS, AbsaConfig, AbsaModel, PerContextModel, build_model
from absa_lib.models.registry import build_per_context


def _build(name: str, objective: str = "single"):
    torch.manual_seed(0)
    if name == "bert-single":
        return build_per_context(backbone="tiny", num_labels=3, num_contexts=8, num_aspects=4)
    return build_model(name, backbone="tiny", num_labels=3, num_contexts=8, num_aspects=4, objective=objective)


def _batch():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 100, (4, 9), generator=g)
    mask = torch.ones(4, 9, dtype=torch.long)
    mask[0, 6:] = 0
    types = torch.zeros_like(ids)
    types[:, 5:] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types, "context_ids": torch.tensor([0, 3, 5, 7])}


@pytest.mark.parametrize("name", MODELS)
def test_every_model_round_trips_through_save_pretrained_and_auto_model(name, tmp_path):
    model = _build(name, "single" if name == "bert-single" else "joint").eval()
    with torch.no_grad():
        expected = model(**_batch()).logits
    model.save_pretrained(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "model.safetensors"]
    assert isinstance(AutoConfig.from_pretrained(tmp_path), AbsaConfig)
    for loaded in (AbsaModel.from_pretrained(tmp_path), AutoModel.from_pretrained(tmp_path)):
        assert type(loaded) is type(model) and not loaded.training
        assert loaded.config.absa_model == name
        with torch.no_grad():
            assert torch.equal(loaded(**_batch()).logits, expected)     # bit for bit


def test_bert_single_saves_its_classifier_count_in_the_config(tmp_path):
    _build("bert-single").save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["per_context_models"] == 8
    model = AbsaModel.from_pretrained(tmp_path)
    assert isinstance(model, PerContextModel) and len(model.models) == 8
    assert not hasattr(model.models[0].config, "per_context_models")     # each classifier is one model


def _as_old_checkpoint(folder, *, per_context: int | None = None) -> None:
    """Rewrite a saved model as the package wrote it before AbsaConfig: model_type bert, a marker file."""
    config = json.loads((folder / "config.json").read_text())
    config.pop("architectures", None)
    config["model_type"] = "bert"
    if per_context:
        del config["per_context_models"]
        (folder / "per_context.json").write_text(json.dumps({"num_models": per_context}))
    (folder / "config.json").write_text(json.dumps(config))


@pytest.mark.parametrize("name", ["qacg-bert", "bert-single", "man-bert"])
def test_checkpoints_written_before_pretrained_models_still_load(name, tmp_path):
    model = _build(name).eval()
    model.save_pretrained(tmp_path)
    _as_old_checkpoint(tmp_path, per_context=8 if name == "bert-single" else None)
    loaded = AbsaModel.from_pretrained(tmp_path)
    assert type(loaded) is type(model)
    with torch.no_grad():
        assert torch.equal(loaded(**_batch()).logits, model(**_batch()).logits)


def test_a_missing_weight_is_an_error_not_a_random_layer(tmp_path):
    from safetensors.torch import save_file

    _build("qacg-bert").save_pretrained(tmp_path)
    state = load_file(tmp_path / "model.safetensors")
    del state["classifier.weight"]
    save_file(state, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(AbsaError, match="keys missing from the weights: classifier.weight"):
        AbsaModel.from_pretrained(tmp_path)


def test_an_unknown_hub_id_is_one_error(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(AbsaError, match="no-such-user/no-such-model: neither a local model folder nor"):
        AbsaModel.from_pretrained("no-such-user/no-such-model")


# sum of |w| over every float tensor of the model built with seed 0 on the tiny backbone, and the next
# draw of the generator after building it: recorded with the code that trained the committed reference
PINNED_INIT = {"qacg-bert": (925.5967199426979, 0.06428337097167969), "man-bert": (1111.7794210437253, 0.5592542290687561),
               "atae-lstm": (5951.7099739698215, 0.49873435497283936), "oa-bert": (2398.164193717458, 0.5100941061973572),
               "bert-single": (7386.982914118367, 0.1710834503173828)}


@pytest.mark.parametrize("name", sorted(PINNED_INIT))
def test_initialisation_is_unchanged(name):
    """A run's results are cached under its configuration, so the random draws of initialisation must
    not change: transformers' own initialisation (post_init) draws nothing here."""
    model = _build(name)
    total = sum(float(v.double().abs().sum()) for v in model.state_dict().values() if v.is_floating_point())
    assert (total, float(torch.rand(1))) == pytest.approx(PINNED_INIT[name], rel=1e-9)


def test_saving_and_loading_print_nothing(tmp_path, capsys, monkeypatch):
    """No transformers progress bars or load reports in training logs and CLI output. Its load
    reports are log records whose handler holds the stderr of import time, which capsys does not
    see: they are recorded from transformers' logger instead."""
    import logging

    from transformers.utils import logging as hf_logging

    records = []
    recorder = logging.Handler(logging.INFO)
    recorder.emit = records.append
    hf_logging.get_logger().addHandler(recorder)            # the "transformers" logger: every module's
    monkeypatch.delenv("HF_HUB_DISABLE_PROGRESS_BARS", raising=False)
    try:
        hf_logging.get_logger("transformers.utils.loading_report").warning("probe")   # it does record
        assert [r.getMessage() for r in records] == ["probe"]
        records.clear()
        capsys.readouterr()                                  # wherever the probe was printed
        _build("qacg-bert").save_pretrained(tmp_path)
        AbsaModel.from_pretrained(tmp_path)
    finally:
        hf_logging.get_logger().removeHandler(recorder)
    out, err = capsys.readouterr()
    assert out == "" and err == "" and [r.getMessage() for r in records if r.levelno >= logging.WARNING] == []


def test_auto_model_from_config_points_to_build_model():
    config = _build("qacg-bert").config
    with pytest.raises(AbsaError, match="qacg-bert: build a new model with absa_lib.models.build_model"):
        AutoModel.from_config(config)
