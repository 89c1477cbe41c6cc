"""Run-config checks, resolution over backend defaults, lock verification, output clearing."""

from __future__ import annotations

import json

import pytest
import yaml

from agentrepro import runconfig
from agentrepro.errors import BadInput, Failure
from agentrepro.fileio import sha256_json
from agentrepro.jobs import bookkeeping


def base_config():
    return {"study": "s", "method": "m", "seed": 0, "backend": {"name": "command"}, "train": {"steps": 2}}


@pytest.mark.parametrize("mutate, where", [
    (lambda c: c.update(extra=1), "extra"),
    (lambda c: c.update(seed=True), "seed"),
    (lambda c: c.update(study="a b"), "study"),
    (lambda c: c["backend"].pop("name"), "backend.name"),
    (lambda c: c.update(train=[1]), "train"),
    (lambda c: c.update(lock={"path": "x", "sha256": "short"}), "lock.sha256"),
    (lambda c: c["train"].update(steps=-1), "train.steps"),
])
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


def test_lock_hash_is_verified_when_the_file_is_there(tmp_path):
    """A lock file that does not hash to the config's lock.sha256 is refused; a matching one is marked verified."""
    lock = {"lock_version": 1, "study": "s"}
    (tmp_path / "s.lock.json").write_text(json.dumps(lock))
    config = {**base_config(), "lock": {"path": "s.lock.json", "sha256": sha256_json(lock)}}
    assert bookkeeping.lock_identity(config, tmp_path)["lock_verified"] is True
    config["lock"]["sha256"] = "0" * 64
    with pytest.raises(BadInput, match="lock.sha256"):
        bookkeeping.lock_identity(config, tmp_path)
    config["lock"]["path"] = "elsewhere.json"
    assert bookkeeping.lock_identity(config, tmp_path)["lock_verified"] is False


def test_clear_outputs_keeps_provenance_logs_and_inputs(tmp_path):
    """--no-resume removes the contract's outputs only: provenance, logs, config.yaml and foreign files stay."""
    for name in ("metrics.jsonl", "provenance.json", "config.yaml", "notes.md", "OUTPUTS.sha256"):
        (tmp_path / name).write_text("x")
    for d in ("checkpoints", "eval/step0", "logs"):
        (tmp_path / d).mkdir(parents=True)
        (tmp_path / d / "f").write_text("x")
    removed = bookkeeping.clear_outputs(tmp_path)
    assert sorted(removed) == ["OUTPUTS.sha256", "checkpoints", "eval", "metrics.jsonl"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml", "logs", "notes.md", "provenance.json"]


def test_training_outputs_check(tmp_path):
    """Missing metrics, a non-increasing step and a run that stopped early are failures."""
    resolved = {"train": {"steps": 2}}
    with pytest.raises(Failure, match="without writing metrics"):
        bookkeeping.check_training_outputs(tmp_path, resolved)
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\n{"step": 1}\n')
    with pytest.raises(Failure, match="line 2: step 1 does not follow"):
        bookkeeping.check_training_outputs(tmp_path, resolved)
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\n')
    with pytest.raises(Failure, match="ended at step 1"):
        bookkeeping.check_training_outputs(tmp_path, resolved)
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\n{"step": 2}\n')
    bookkeeping.check_training_outputs(tmp_path, resolved)
