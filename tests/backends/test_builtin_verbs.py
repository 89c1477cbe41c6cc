"""`agentrepro train` and `eval` with the builtin backend (the real registry, a 2-step run on the CPU)."""

from __future__ import annotations

import json

import pytest
import yaml
from helpers import run_cli

from agentrepro.seal import verify_outputs


@pytest.mark.slow
def test_builtin_two_steps_train_and_eval(tmp_path):
    """A 2-step builtin run writes metrics for steps 1-2, a sealed run dir with resolved defaults, and eval rows for the panel."""
    from agentrepro.environments import task_panel

    panel = task_panel("frozenlake", {}, range(10001, 10005))
    config = {
        "study": "tiny",
        "method": "grpo",
        "seed": 0,
        "backend": {"name": "builtin"},
        "env": {"name": "frozenlake", "params": {}},
        "train": {
            "estimator": "grpo",
            "steps": 2,
            "groups": 2,
            "group_size": 2,
            "warmstart": False,
            "checkpoint_every": 1,
            "progress": False,
            "max_turns": 2,
        },
        "eval": {"episodes_per_task": 1, "temperature": 0, "every": 1, "task_panel": panel},
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    run_dir = tmp_path / "run"
    result = run_cli("train", "--config", path, "--out", run_dir, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    steps = [json.loads(x)["step"] for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2]
    resolved = yaml.safe_load((run_dir / "resolved_config.yaml").read_text())
    assert "lr" in resolved["train"] and "model" in resolved  # backend defaults resolved into the file
    assert verify_outputs(run_dir / "OUTPUTS.sha256") == []
    result = run_cli("eval", "--run", run_dir, "--step", 2, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    rows = [json.loads(x) for x in (run_dir / "eval" / "step2" / "outcomes.jsonl").read_text().splitlines()]
    assert [(r["task_id"], r["task_hash"]) for r in rows] == [(t["task_id"], t["task_hash"]) for t in panel]
    assert verify_outputs(run_dir / "eval" / "step2" / "OUTPUTS.sha256") == []


def test_replay_refuses_what_it_would_not_reproduce(tmp_path):
    """`audit --re-eval` replays a builtin checkpoint with the backend's own evaluation: never part of a sampled
    panel, never a checkpoint that is not there."""
    from agentrepro.backends import get_backend
    from agentrepro.errors import BadInput

    backend = get_backend("builtin")
    config = {"backend": {"name": "builtin"}, "train": {}, "eval": {"temperature": 0}}
    with pytest.raises(BadInput, match=r"only on the whole panel"):
        backend.replay({**config, "eval": {"temperature": 0.7}}, tmp_path, 2, [0, 3])
    with pytest.raises(BadInput, match=r"step2.pt is not here"):
        backend.replay(config, tmp_path, 2)
