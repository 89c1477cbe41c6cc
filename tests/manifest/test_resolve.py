"""`agentrepro resolve`: the run config of one method x seed, from the lock alone."""

from __future__ import annotations

import json

from helpers import run_cli
from study_kit import load

from agentrepro.fileio import sha256_json


def test_resolve_writes_the_run_config(frozen):
    """The config merges train with the method's overrides, carries the lock hash and the task panel (subprocess)."""
    root, lock = frozen
    out = "runs/demo/gigpo/seed1/config2.yaml"
    result = run_cli("resolve", "manifests/demo.lock.json", "--method", "gigpo", "--seed", "1", "-o", out, cwd=root)
    assert result.returncode == 0, result.stderr
    config = load(root / out)
    on_disk = json.loads((root / "manifests" / "demo.lock.json").read_text())
    assert list(config)[:8] == ["study", "method", "seed", "lock", "backend", "image", "model", "env"]
    assert (config["study"], config["method"], config["seed"]) == ("demo", "gigpo", 1)
    assert config["lock"] == {"path": "manifests/demo.lock.json", "sha256": sha256_json(on_disk)}
    assert config["train"] == {
        "steps": 10,
        "groups": 2,
        "group_size": 4,
        "lr": 1.0e-6,
        "estimator": "gigpo",
        "gamma": 0.95,
    }
    assert config["eval"]["task_panel"] == lock["task_panel"] and config["eval"]["tasks"] == 4
    assert config["data"]["eval"] == {"path": "data/eval.jsonl", "sha256": lock["resolved"]["files"]["data/eval.jsonl"]}
    assert config["model"]["revision"] == lock["manifest"]["model"]["revision"]


def test_resolve_refuses_unknown_method_and_seed(frozen):
    """A method or a seed the lock does not have exits 2, naming the option and listing the valid ones."""
    root, _ = frozen
    bad_method = run_cli(
        "resolve", "manifests/demo.lock.json", "--method", "ppo", "--seed", "0", "-o", "x.yaml", cwd=root
    )
    assert (
        bad_method.returncode == 2 and "--method" in bad_method.stderr and "methods: gigpo, grpo" in bad_method.stderr
    )
    bad_seed = run_cli(
        "resolve", "manifests/demo.lock.json", "--method", "grpo", "--seed", "7", "-o", "x.yaml", cwd=root
    )
    assert bad_seed.returncode == 2 and "--seed" in bad_seed.stderr and "seeds: 0, 1" in bad_seed.stderr
    assert not (root / "x.yaml").exists()


def test_resolve_refuses_a_hand_edited_lock(frozen):
    """A lock whose content no longer matches its self-hash is refused (exit 2)."""
    root, _ = frozen
    path = root / "manifests" / "demo.lock.json"
    lock = json.loads(path.read_text())
    lock["manifest"]["train"]["lr"] = 0.1
    lock["manifest_sha256"] = sha256_json(lock["manifest"])  # a careful editor fixes this hash too
    path.write_text(json.dumps(lock))
    result = run_cli("resolve", str(path), "--method", "grpo", "--seed", "0", "-o", root / "x.yaml")
    assert result.returncode == 2 and "edited" in result.stderr
