"""`agentrepro train` as a subprocess, through the real registry, with the command backend and a mini trainer."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml
from helpers import run_cli

from agentrepro.fileio import sha256_json
from agentrepro.seal import verify_outputs


def provenance(run_dir):
    return json.loads((run_dir / "provenance.json").read_text())


def test_train_writes_the_run_contract(tmp_path, make_config, write_config):
    """A successful train writes resolved config (hash in header and provenance), command, metrics, an ok attempt and a valid seal."""
    config = write_config(make_config())
    run_dir = tmp_path / "runs" / "mini-study" / "grpo" / "seed0"
    result = run_cli("train", "--config", config, "--out", run_dir, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    resolved_text = (run_dir / "resolved_config.yaml").read_text()
    resolved = yaml.safe_load(resolved_text)
    prov = provenance(run_dir)
    assert resolved_text.startswith(f"# config_sha256: {sha256_json(resolved)}")
    assert prov["resolved_config_sha256"] == sha256_json(resolved)
    assert (prov["study"], prov["method"], prov["seed"], prov["backend"]) == ("mini-study", "grpo", 0, "command")
    assert prov["packages"]["agentrepro"] is not None
    assert [a["status"] for a in prov["attempts"]] == ["ok"]
    assert (run_dir / "command.txt").read_text().startswith("agentrepro train --config ")
    assert [m["step"] for m in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines())] == [1, 2, 3]
    seal = (run_dir / "OUTPUTS.sha256").read_text()
    assert "metrics.jsonl" in seal and "provenance.json" in seal and "logs/" not in seal
    assert verify_outputs(run_dir / "OUTPUTS.sha256") == []
    assert "mini_trainer.py train" in (run_dir / "logs" / "train.stdout.log").read_text()


def test_failed_trainer_is_a_failed_attempt_and_no_seal(tmp_path, make_config, write_config):
    """A trainer that exits non-zero gives exit 1, a failed attempt with the reason, and no OUTPUTS.sha256."""
    config = write_config(make_config())
    run_dir = tmp_path / "run"
    result = run_cli("train", "--config", config, "--out", run_dir, env={"MINI_FAIL_AT": "2"})
    assert result.returncode == 1
    assert "exit status 3" in result.stderr and "simulated crash" in result.stderr
    attempt = provenance(run_dir)["attempts"][-1]
    assert attempt["status"] == "failed" and "exit status 3" in attempt["reason"]
    assert not (run_dir / "OUTPUTS.sha256").exists()


def test_bad_config_is_exit_2_naming_file_and_key(tmp_path, make_config, write_config):
    """An unknown backend and an unknown placeholder are bad input (exit 2) naming the file and the key, writing nothing."""
    config = make_config()
    config["backend"]["name"] = "nope"
    path = write_config(config)
    result = run_cli("train", "--config", path, "--out", tmp_path / "r1")
    assert result.returncode == 2
    assert f"{path}: backend.name" in result.stderr and "known: " in result.stderr and "command" in result.stderr
    config = make_config()
    config["backend"]["command"] += " --x {train.nonexistent}"
    path = write_config(config, "c2.yaml")
    result = run_cli("train", "--config", path, "--out", tmp_path / "r2")
    assert result.returncode == 2
    assert str(path) in result.stderr and "{train.nonexistent}" in result.stderr
    assert not (tmp_path / "r2").exists()


def test_resume_with_a_different_config_is_refused(tmp_path, make_config, write_config):
    """Resuming checkpoints made from another resolved config is bad input; --no-resume starts again from scratch."""
    run_dir = tmp_path / "run"
    assert run_cli("train", "--config", write_config(make_config()), "--out", run_dir).returncode == 0
    changed = write_config(make_config(lr=0.5), "changed.yaml")
    result = run_cli("train", "--config", changed, "--out", run_dir)
    assert result.returncode == 2 and "--no-resume" in result.stderr
    result = run_cli("train", "--config", changed, "--out", run_dir, "--no-resume")
    assert result.returncode == 0, result.stderr
    metrics = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert metrics[-1]["reward_mean"] == 1.5  # 3 steps of lr 0.5 from zero: the old checkpoints were not resumed
    attempts = provenance(run_dir)["attempts"]
    assert [a["status"] for a in attempts] == ["ok", "ok"]
    assert [a["how_started"] for a in attempts] == [
        "started from scratch",
        "started over (--no-resume: earlier outputs removed)",
    ]


@pytest.mark.slow
def test_killed_attempt_then_retry(tmp_path, make_config, write_config):
    """SIGKILL of the job mid-training leaves no seal and only complete files; the retry resumes and records the first attempt as killed."""
    config = write_config(make_config(steps=12))
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentrepro", "train", "--config", str(config), "--out", str(run_dir)],
        env={**os.environ, "MINI_SLEEP": "0.3"},
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not (run_dir / "checkpoints" / "step2.json").exists():
        assert proc.poll() is None and time.monotonic() < deadline, "trainer did not reach step 2"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # as a scheduler kills a job: the whole process group
    proc.wait()
    assert not (run_dir / "OUTPUTS.sha256").exists()
    assert provenance(run_dir)["attempts"][-1]["status"] == "running"
    for path in run_dir.rglob("*"):  # everything present is complete: parseable, no temporary left as a real name
        if path.suffix == ".jsonl":
            [json.loads(line) for line in path.read_text().splitlines()]
        elif path.suffix == ".json":
            json.loads(path.read_text())
    killed_at = len((run_dir / "metrics.jsonl").read_text().splitlines())
    assert 2 <= killed_at < 12

    result = run_cli("train", "--config", config, "--out", run_dir)
    assert result.returncode == 0, result.stderr
    attempts = provenance(run_dir)["attempts"]
    assert [a["status"] for a in attempts] == ["killed", "ok"]
    assert attempts[0]["end"] is None and "killed" in attempts[0]["reason"]
    assert (
        attempts[1]["how_started"] == "resumed from the checkpoints of an earlier attempt" and attempts[1]["cpu_s"] > 0
    )
    steps = [json.loads(x)["step"] for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(1, 13))
    # resumed, not restarted: the train log shows the second attempt started after the kill, with the same command
    assert (run_dir / "logs" / "train.stdout.log").read_text().count("=== agentrepro") == 2
    assert verify_outputs(run_dir / "OUTPUTS.sha256") == []


def test_backend_exception_is_a_failed_attempt(tmp_path, make_config, write_config, monkeypatch):
    """A Python exception inside a backend becomes Failure (exit 1) and a failed attempt carrying its message."""
    import argparse

    from agentrepro.backends.command.backend import CommandBackend
    from agentrepro.cli import train as cli_train
    from agentrepro.errors import Failure

    class Crashing(CommandBackend):
        def train(self, config, run_dir, *, resume=True):
            raise ZeroDivisionError("loss is 1/0")

    monkeypatch.setattr(cli_train, "get_backend", lambda name: Crashing())
    monkeypatch.setattr(cli_train, "install_sigterm_handler", lambda: None)  # keep pytest's own SIGTERM handling
    args = argparse.Namespace(
        config=write_config(make_config()), out=tmp_path / "run", no_resume=False, from_warmstart=None
    )
    with pytest.raises(Failure, match="ZeroDivisionError: loss is 1/0"):
        cli_train.run(args)
    attempt = provenance(tmp_path / "run")["attempts"][-1]
    assert attempt["status"] == "failed" and attempt["reason"] == "ZeroDivisionError: loss is 1/0"
    assert not (tmp_path / "run" / "OUTPUTS.sha256").exists()
