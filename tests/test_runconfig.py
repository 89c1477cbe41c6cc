"""agentrepro.runconfig: run-config checks, resolution over backend defaults, the evaluated steps, the config hash."""

from __future__ import annotations

import pytest
import yaml

from agentrepro import runconfig, schema
from agentrepro.errors import BadInput
from agentrepro.fileio import sha256_json
from agentrepro.runconfig import EvalConfig, write_resolved_config


def base_config():
    return {"study": "s", "method": "m", "seed": 0, "backend": {"name": "command"}, "train": {"steps": 2}}


@pytest.mark.parametrize(
    "mutate, where",
    [
        (lambda c: c.update(extra=1), "extra"),
        (lambda c: c.update(seed=True), "seed"),
        (lambda c: c.update(study="a b"), "study"),
        (lambda c: c["backend"].pop("name"), "backend.name"),
        (lambda c: c.update(train=[1]), "train"),
        (lambda c: c.update(lock={"path": "x", "sha256": "short"}), "lock.sha256"),
        (lambda c: c["train"].update(steps=-1), "train.steps"),
    ],
)
def test_bad_run_config_names_the_key(tmp_path, mutate, where):
    """Each malformed part of a run config is BadInput naming the file and the key path."""
    config = base_config()
    mutate(config)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(BadInput) as info:
        runconfig.load_run_config(path)
    assert str(info.value).startswith(f"{path}: {where}: ")


def test_resolution_merges_defaults_under_the_config():
    """Config values win over backend defaults, nested mappings merge, the inputs are not modified."""
    defaults = {"train": {"steps": 9, "lr": 0.1}, "eval": {"every": 5}}
    config = base_config()
    resolved = runconfig.resolve_config(config, defaults)
    assert resolved["train"] == {"steps": 2, "lr": 0.1} and resolved["eval"] == {"every": 5}
    assert defaults["train"]["steps"] == 9 and "lr" not in config["train"]


def test_resolved_config_hash_is_recomputable(tmp_path):
    """The header hash equals sha256 of the canonical JSON of the YAML document as read back."""
    digest = runconfig.write_resolved_config(tmp_path, {"b": 1.5, "a": [1, {"x": "y"}]})
    text = (tmp_path / "resolved_config.yaml").read_text()
    assert text.splitlines()[0] == f"# config_sha256: {digest}"
    assert sha256_json(yaml.safe_load(text)) == digest


def test_evaluated_steps_every_and_last():
    """0 is always evaluated, then every `every` steps, then the last step even off the grid."""
    assert runconfig.evaluated_steps(150, {"every": 50, "checkpoint": "last"}) == [0, 50, 100, 150]
    assert runconfig.evaluated_steps(200, {"every": 25}) == [0, 25, 50, 75, 100, 125, 150, 175, 200]
    assert runconfig.evaluated_steps(7, {"every": 3}) == [0, 3, 6, 7]
    assert runconfig.evaluated_steps(5, {}) == [0, 5]


def test_evaluated_steps_fixed_checkpoint_and_all():
    """An integer or list adds those steps only; `all` adds every checkpoint_every-th step (else every step) and the last."""
    assert runconfig.evaluated_steps(10, {"checkpoint": 4}) == [0, 4]
    assert runconfig.evaluated_steps(10, {"checkpoint": [3, 9]}) == [0, 3, 9]
    assert runconfig.evaluated_steps(10, {"checkpoint": "all"}, checkpoint_every=4) == [0, 4, 8, 10]
    assert runconfig.evaluated_steps(3, {"checkpoint": "all"}) == [0, 1, 2, 3]
    assert runconfig.evaluated_steps(0, {"every": 5}) == [0]


@pytest.mark.parametrize(
    "block, where",
    [
        ({"checkpoint": 11}, "eval.checkpoint"),
        ({"checkpoint": "best"}, "eval.checkpoint"),
        ({"every": 0}, "eval.every"),
        ({"every": True}, "eval.every"),
    ],
)
def test_evaluated_steps_rejects_bad_values(block, where):
    """A checkpoint beyond training, an unknown name or a non-positive period is an error naming the key."""
    with pytest.raises(BadInput, match=rf"m\.yaml: {where}"):
        runconfig.evaluated_steps(10, block, path="m.yaml")


def test_checkpoint_steps_of_a_run_config():
    """A run config's train.steps, train.checkpoint_every and eval block give its checkpoint steps."""
    config = {"train": {"steps": 6, "checkpoint_every": 2}, "eval": {"checkpoint": "all"}}
    assert runconfig.checkpoint_steps(config) == [0, 2, 4, 6]
    with pytest.raises(BadInput, match=r"train.steps"):
        runconfig.checkpoint_steps({"train": {"steps": -1}})


def test_config_hash_of_a_document_and_of_its_file(tmp_path):
    """resolved_config.yaml's header hash, config_sha256 of the document and config_file_sha256 of the file agree."""
    config = {"study": "s", "train": {"lr": 1e-6, "steps": 3}, "eval": {"task_panel": [{"task_id": "t-1"}]}}
    digest = write_resolved_config(tmp_path, config)
    assert digest == runconfig.config_sha256(config) == sha256_json(config)
    assert runconfig.config_file_sha256(tmp_path / runconfig.RESOLVED) == digest


def test_the_eval_block_is_typed_once():
    """EvalConfig and the manifest schema's eval block name the same keys (task_panel is added by resolve, not
    written by a person), and where the schema states a default it is EvalConfig's."""
    block = schema.load("manifest.schema.json")["$defs"]["eval"]["properties"]
    assert set(EvalConfig.keys()) - {"task_panel"} == set(block)
    defaults = EvalConfig()
    assert {k: p["default"] for k, p in block.items() if "default" in p} == {
        k: getattr(defaults, k) for k, p in block.items() if "default" in p
    }


def test_the_eval_block_reads_its_defaults_and_refuses_an_unknown_key():
    ev = EvalConfig.of({"eval": {"tasks": 8, "temperature": 0.7}})
    assert (ev.tasks, ev.temperature, ev.episodes_per_task, ev.top_p, ev.checkpoint) == (8, 0.7, 1, 1.0, "last")
    assert not ev.served and EvalConfig.of({}).served is False and EvalConfig.of({"eval": {"engine": "served"}}).served
    # a null is the config's own value, refused by whoever reads it, never silently the default
    with pytest.raises(BadInput, match=r"eval\.checkpoint"):
        runconfig.evaluated_steps(4, EvalConfig.of({"eval": {"checkpoint": None}}))
    with pytest.raises(BadInput, match=r"r\.yaml: eval\.episodes: unknown key"):
        EvalConfig.of({"eval": {"episodes": 2}}, path="r.yaml")
