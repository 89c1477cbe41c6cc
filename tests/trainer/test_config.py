"""TrainConfig: defaults, validation with key paths, and the JSON Schema kept in step with it."""

import dataclasses
import json
import typing
from pathlib import Path

import jsonschema
import pytest

from agentrepro.errors import BadInput
from agentrepro.trainer.config import TrainConfig

SCHEMA = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "train_config.schema.json"


def test_unknown_key_is_rejected_with_its_path():
    """An unknown training key names train.<key> and the file."""
    with pytest.raises(BadInput, match=r"cfg.yaml: train.learning_rate: unknown key"):
        TrainConfig.from_dict({"learning_rate": 1e-3}, path="cfg.yaml")


@pytest.mark.parametrize(
    "key,value,pattern",
    [
        ("steps", "10", "expected int"),
        ("lr", True, "expected float"),
        ("lr", 0, "> 0"),
        ("estimator", "dqn", "one of"),
        ("gamma", 1.5, r"\[0, 1\]"),
        ("groups", 0, r"an integer in \[1, 1,000,000\]"),
        ("steps", 10**7, r"an integer in \[0, 1,000,000\]"),
        ("threads", 10**6, r"\[1, 1,024\]"),
        ("mode", "both", "one of"),
        ("update_precision", "bf16", "one of"),
        ("update_precision", 16, "expected str"),
    ],
)
def test_bad_values_are_rejected(key, value, pattern):
    """Wrong types and out-of-range values raise BadInput naming the key."""
    with pytest.raises(BadInput, match=rf"train.{key}: .*{pattern}"):
        TrainConfig.from_dict({key: value})


def test_ints_are_accepted_for_floats_and_null_for_optional():
    """YAML ints coerce to float fields; format_reward may be null (keep the environment's)."""
    cfg = TrainConfig.from_dict({"lr": 1, "format_reward": None})
    assert cfg.lr == 1.0 and isinstance(cfg.lr, float) and cfg.format_reward is None
    assert cfg.batch_trajectories == 16 * 8


def test_config_is_frozen():
    """The config cannot be changed after construction."""
    with pytest.raises(dataclasses.FrozenInstanceError):
        TrainConfig().lr = 1.0  # type: ignore[misc]


def test_schema_matches_dataclass_fields_and_defaults():
    """workflow/schemas/train_config.schema.json lists exactly the dataclass fields with the same defaults."""
    schema = json.loads(SCHEMA.read_text())
    fields = {f.name: f.default for f in dataclasses.fields(TrainConfig)}
    assert set(schema["properties"]) == set(fields)
    assert schema["additionalProperties"] is False
    for name, default in fields.items():
        assert schema["properties"][name]["default"] == (list(default) if isinstance(default, tuple) else default), name
        assert schema["properties"][name]["description"], name


def test_schema_accepts_defaults_and_rejects_what_the_dataclass_rejects():
    """The schema validates the full default dict and refuses unknown keys and bad enum values."""
    schema = json.loads(SCHEMA.read_text())
    jsonschema.validate(TrainConfig().to_dict(), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"nope": 1}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"mode": "both"}, schema)
    hints = typing.get_type_hints(TrainConfig)
    assert schema["properties"]["steps"]["type"] == "integer" and hints["steps"] is int
