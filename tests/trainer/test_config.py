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
        TrainConfig().lr = 1.0


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


@pytest.mark.parametrize(
    ("device", "model", "expected"),
    [
        ("cpu", {"name": "tiny-qwen2"}, ("fp32", "eager")),
        ("cuda", {"name": "tiny-qwen2"}, ("bf16-master", "compiled")),
        ("cuda:1", {"name": "tiny-gpt2"}, ("bf16-master", "eager")),
        ("cuda", {"name": "qwen", "path": "no/such/directory"}, ("bf16-master", "eager")),
        ("cuda", "qwen2 directory", ("bf16-master", "compiled")),
        ("cuda", "llama directory", ("bf16-master", "eager")),
        ("cpu", "qwen2 directory", ("fp32", "eager")),
    ],
)
def test_auto_update_precision_and_kernels_are_resolved_and_recorded(tmp_path, device, model, expected):
    """The builtin backend's resolved config holds what `auto` means for the device and the model: the fast path
    on CUDA (compiled kernels only for a Qwen2 model with silu, read from a local model's config.json), fp32 eager
    on the CPU; the trainer's RunSpec reads the same from a config that still says auto."""
    import json

    from agentrepro.backends import get_backend

    if isinstance(model, str):
        (tmp_path / "config.json").write_text(
            json.dumps(
                {"model_type": model.split()[0], "hidden_act": "silu", "hidden_size": 8, "num_hidden_layers": 1}
                | {"num_attention_heads": 2, "vocab_size": 16}
            )
        )
        model = {"name": "local", "path": str(tmp_path)}
    config = {"study": "s", "method": "m", "seed": 0, "backend": {"name": "builtin"}, "model": model}
    config |= {"env": {"name": "frozenlake"}, "train": {"device": device}}
    resolved = get_backend("builtin").resolve(config)
    assert (resolved["train"]["update_precision"], resolved["train"]["update_kernels"]) == expected
    assert get_backend("builtin").resolve(resolved) == resolved
    stated = get_backend("builtin").resolve({**config, "train": {"device": device, "update_precision": "fp32"}})
    assert stated["train"]["update_precision"] == "fp32"
    if "path" not in model:
        from agentrepro.trainer.context import RunSpec

        spec = RunSpec.from_config({**config, "eval": {}})
        assert (spec.train.update_precision, spec.train.update_kernels) == expected


def test_estimator_option_fields_are_declared_for_the_type_checker():
    """TrainConfig's fields for the estimator options are added at import; the TYPE_CHECKING block that shows them
    to mypy must name the same fields with the same types and defaults."""
    import ast
    import inspect

    from agentrepro.trainer import config

    tree = ast.parse(inspect.getsource(config.TrainConfig))
    block = next(
        node for node in ast.walk(tree) if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    )
    declared = {
        stmt.target.id: (ast.unparse(stmt.annotation), eval(ast.unparse(stmt.value), {"spec": config.spec}))
        for stmt in block.body
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None
    }
    assert declared == {o.name: (o.type.__name__, o.default) for o in config.ESTIMATOR_OPTIONS}
