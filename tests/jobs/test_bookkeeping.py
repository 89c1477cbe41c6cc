"""agentrepro.jobs.bookkeeping: the lock hash verified, output clearing for --no-resume, the training-output check."""

from __future__ import annotations

import json

import pytest

from agentrepro.errors import BadInput, Failure
from agentrepro.fileio import sha256_json
from agentrepro.jobs import bookkeeping


def base_config():
    return {"study": "s", "method": "m", "seed": 0, "backend": {"name": "command"}, "train": {"steps": 2}}


def test_lock_hash_is_verified_when_the_file_is_there(tmp_path):
    """A lock file that does not hash to the config's lock.sha256 is refused; a matching one is marked verified."""
    lock = {"lock_version": 1, "study": "s"}
    (tmp_path / "s.lock.json").write_text(json.dumps(lock))
    config = {**base_config(), "lock": {"path": "s.lock.json", "sha256": sha256_json(lock)}}
    assert bookkeeping.lock_identity(config, tmp_path)["lock_verified"] is True
    config["lock"]["sha256"] = "0" * 64
    with pytest.raises(BadInput, match=r"lock.sha256"):
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
