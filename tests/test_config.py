"""TrainConfig's field declarations are the only list: what tells budgets apart and what a budget's
footnote says are read from them, so a new field needs no other edit."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import typed_run

from absa_lib.errors import AbsaError
from absa_lib.reports import tables as T
from absa_lib.training import config as C
from absa_lib.training.config import TrainConfig, budget_fields, budget_parts


def _extended():
    """TrainConfig with one more field, declared as every field is (nothing else edited)."""
    smoothing = C._field(0.0, "label smoothing (default 0)", check=lambda v: 0 <= v < 1, expected="a fraction",
                         shown=(11, lambda v: None if v == 0 else f"label smoothing {v}"))
    return dataclasses.make_dataclass("Extended", [("label_smoothing", float, smoothing)], bases=(TrainConfig,),
                                      frozen=True)


def test_a_new_field_tells_budgets_apart_and_is_named_in_the_footnote_with_no_other_edit():
    extended = _extended()
    assert "label_smoothing" in budget_fields(extended)
    assert "label_smoothing" not in budget_fields()
    config = extended(dataset="sentihood", model="cg-bert", label_smoothing=0.1)
    assert budget_parts(config, extended)[-1] == "label smoothing 0.1"
    assert budget_parts(dataclasses.replace(config, label_smoothing=0.0), extended) == budget_parts(config)  # left out at 0
    with pytest.raises(AbsaError, match="label_smoothing must be a fraction, got 2"):
        extended(dataset="sentihood", model="cg-bert", label_smoothing=2)


def test_every_field_but_a_grid_rows_tells_budgets_apart():
    grid = set(TrainConfig.fields_of("grid"))
    assert set(T.GROUP_FIELDS) == {f.name for f in dataclasses.fields(TrainConfig)} - grid | {"backbone_fingerprint"}
    base = TrainConfig(dataset="sentihood", model="cg-bert").to_dict()

    def key(**changes):
        return T.budget_key(typed_run({**base, **changes}).config)

    for name, other in [("weight_decay", 0.0), ("adam_eps", 1e-8), ("max_grad_norm", 5.0), ("eval_batch_size", 8)]:
        assert key() != key(**{name: other}), name
    assert key() == key(seed=7, model="qacg-bert")                          # a row's fields


def test_the_footnote_names_the_shown_fields_in_their_rank_and_leaves_defaults_out():
    record = TrainConfig(dataset="sentihood", model="cg-bert", epochs=1, max_train_examples=1234, lr=1e-5,
                         precision="bf16", group_by_length=True, max_eval_examples=500).to_dict()

    def text(record):
        return T.budget_text(typed_run(record).config)

    assert text(record) == ("1 epoch, train examples: 1,234, lr 1e-05, schedule linear, head lr x1.0, "
                                     "max length 128, batch 24, bf16, length-grouped batches, scored on the first "
                                     "500 examples of dev and test")
    assert "compiled (default)" in text({**record, "compile": "default"})
    neutral = {**record, **C.NEUTRAL_DEFAULTS}
    older = {k: v for k, v in neutral.items() if k not in C.NEUTRAL_DEFAULTS}          # recorded before them
    assert text(older) == text(neutral) != text(record)                  # upgraded at load
    ranks = [f.metadata["shown"][0] for f in dataclasses.fields(TrainConfig) if f.metadata["shown"]]
    assert sorted(ranks) == list(range(len(ranks)))                                   # one place each


def test_a_bad_model_override_is_refused_when_the_config_is_made():
    with pytest.raises(AbsaError, match="model override 'quasi' does not apply to cg-bert"):
        TrainConfig(dataset="sentihood", model="cg-bert", model_overrides={"quasi": False})
    with pytest.raises(AbsaError, match=r"joint_tau=1\.5 is invalid; expected 0 < τ < 1"):
        TrainConfig(dataset="sentihood", model="qacg-bert", objective="joint", model_overrides={"joint_tau": 1.5})
    assert TrainConfig(dataset="sentihood", model="qacg-bert", model_overrides={"quasi": False}).model_overrides
