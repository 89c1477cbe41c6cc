"""The shared warm start: its identity, `agentrepro warmstart`, and `train --from-warmstart` giving the bytes of
a run that warm-starts itself, with the step-0 outcomes evaluated once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from helpers import run_cli
from trainer_helpers import tiny_config

from agentrepro.planning import StudyPlan

WARM = {"warmstart_target": 1.0, "warmstart_max_steps": 2, "warmstart_eval_every": 1, "steps": 2}


def _manifest(**methods) -> dict:
    return {
        "study": "s",
        "backend": {"name": "builtin"},
        "image": {"none": "builtin on the CPU"},
        "model": {"name": "tiny-gpt2"},
        "env": {"name": "frozenlake", "params": {}},
        "methods": methods,
        "seeds": [0, 1],
        "train": {"steps": 2, "warmstart_target": 0.45},
        "eval": {"tasks": 4, "first_seed": 10001},
    }


def test_methods_share_a_warm_start_unless_they_change_what_it_reads():
    """RL settings (estimator, lr, gamma) and a default spelled out share one identity per seed; a warm-start
    setting, or grad_clip (which the warm start's optimizer step reads), gives another; warmstart off plans none."""
    plan = StudyPlan(
        _manifest(
            grpo={"estimator": "grpo"},
            gigpo={"estimator": "gigpo", "gamma": 0.9, "lr": 0.01},
            spelled={"warmstart_lr": 2.0e-3, "warmstart_batch": 64},
            other_lr={"warmstart_lr": 1.0e-3},
            clip={"grad_clip": 0.5},
            none={"warmstart": False},
        ),
        "manifest",
    ).warmstarts
    for seed in (0, 1):
        assert plan[("grpo", seed)] == plan[("gigpo", seed)] == plan[("spelled", seed)]
        assert len({plan[(m, seed)] for m in ("grpo", "other_lr", "clip")}) == 3
        assert ("none", seed) not in plan
    assert plan[("grpo", 0)] != plan[("grpo", 1)]
    assert StudyPlan({**_manifest(grpo={}), "backend": {"name": "command"}}, "manifest").warmstarts == {}


def test_a_pretrained_model_starts_rl_from_its_own_weights_unless_the_manifest_asks():
    """model.path: no warm start is planned and no deviation recorded; a method stating `warmstart: true` gets its
    warm start, recorded as a deviation naming that method; a model built from a config still warm-starts."""
    pretrained = {**_manifest(grpo={}, asked={"warmstart": True}), "model": {"name": "qwen", "path": "models/qwen"}}
    plan = StudyPlan(pretrained, "manifest")
    assert set(plan.warmstarts) == {("asked", 0), ("asked", 1)}
    assert plan.job("grpo", 0).config["train"]["warmstart"] is False
    (deviation,) = plan.deviations()
    assert deviation.startswith("train.warmstart = true (the reference recipe sets False; ") and deviation.endswith(
        "; asked)"
    ), deviation
    scratch = StudyPlan(_manifest(grpo={}), "manifest")
    assert scratch.job("grpo", 0).config["train"]["warmstart"] is True and scratch.deviations() == []
    assert set(scratch.warmstarts) == {("grpo", 0), ("grpo", 1)}


def test_a_pretrained_models_turns_have_the_reference_recipes_room_unless_the_manifest_says():
    """A chat model gets PRETRAINED_TURN_TOKENS a turn (the trainer's few tokens would cut it off mid-sentence); a
    method or the train block stating max_new_tokens keeps its own; a model built from a config keeps the trainer's."""
    from agentrepro.backends.builtin.backend import PRETRAINED_TURN_TOKENS
    from agentrepro.trainer.config import TrainConfig

    model = {"name": "qwen", "path": "models/qwen"}
    plan = StudyPlan({**_manifest(grpo={}, short={"max_new_tokens": 16}), "model": model}, "manifest")
    assert plan.job("grpo", 0).config["train"]["max_new_tokens"] == PRETRAINED_TURN_TOKENS > TrainConfig.max_new_tokens
    assert plan.job("short", 0).config["train"]["max_new_tokens"] == 16
    stated = _manifest(grpo={})
    stated["train"] = {**stated["train"], "max_new_tokens": 64}
    assert StudyPlan({**stated, "model": model}, "manifest").job("grpo", 1).config["train"]["max_new_tokens"] == 64
    scratch = StudyPlan(_manifest(grpo={}), "manifest").job("grpo", 0).config["train"]
    assert scratch["max_new_tokens"] == TrainConfig.max_new_tokens


def _write(path: Path, config: dict) -> Path:
    path.write_text(yaml.safe_dump(config))
    return path


def _successes_without_labels(path: Path) -> list[dict]:
    return [
        {k: v for k, v in json.loads(line).items() if k not in ("study", "method")}
        for line in path.read_text().splitlines()
    ]


@pytest.fixture(scope="module")
def warm(tmp_path_factory) -> Path:
    """A shared warm start made by `agentrepro warmstart` from the grpo config."""
    tmp = tmp_path_factory.mktemp("shared")
    config = _write(tmp / "grpo.yaml", {**tiny_config(estimator="grpo", **WARM), "method": "grpo"})
    result = run_cli("warmstart", "--config", config, "--out", tmp / "warm", timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return tmp


@pytest.mark.slow
def test_runs_from_the_shared_warm_start_are_those_of_a_run_that_warm_starts_itself(warm, tmp_path):
    """Two methods start from the warm start's step-0 checkpoint byte for byte; grpo's metrics and final weights equal those of
    a grpo run that warm-starts itself; `eval --step 0` of each method gives the warm start's outcomes, relabelled."""
    import torch

    from agentrepro.trainer.loop import train

    runs = {}
    for method, estimator in (("grpo", "grpo"), ("gigpo", "gigpo")):
        config = _write(tmp_path / f"{method}.yaml", {**tiny_config(estimator=estimator, **WARM), "method": method})
        runs[method] = tmp_path / method
        result = run_cli(
            "train", "--config", config, "--out", runs[method], "--from-warmstart", warm / "warm", timeout=300
        )
        assert result.returncode == 0, result.stderr[-2000:]
        result = run_cli("eval", "--run", runs[method], "--step", 0, timeout=300)
        assert result.returncode == 0, result.stderr[-2000:]
    shared = (warm / "warm" / "checkpoints" / "step0.pt").read_bytes()
    assert all((run / "checkpoints" / "step0.pt").read_bytes() == shared for run in runs.values())
    step0 = [_successes_without_labels(run / "eval" / "step0" / "outcomes.jsonl") for run in runs.values()]
    assert step0[0] == step0[1] == _successes_without_labels(warm / "warm" / "eval" / "step0" / "outcomes.jsonl")
    assert [
        json.loads(line)["method"]
        for line in (runs["gigpo"] / "eval" / "step0" / "outcomes.jsonl").read_text().splitlines()
    ] == ["gigpo"] * 4
    alone = train({**tiny_config(estimator="grpo", **WARM), "method": "grpo"}, tmp_path / "alone", resume=False)

    def metrics(run: Path) -> list[dict]:
        return [
            {
                k: v
                for k, v in json.loads(line).items()
                if k not in ("wall_s", "gpu_hours", "cpu_rss_gb", "gpu_peak_mem_gb")
            }
            for line in (run / "metrics.jsonl").read_text().splitlines()
        ]

    assert metrics(runs["grpo"]) == metrics(tmp_path / "alone") and len(metrics(tmp_path / "alone")) == 2
    final = torch.load(runs["grpo"] / "checkpoints" / "step2.pt", weights_only=False)["model"]
    assert all(torch.equal(final[k], v) for k, v in alone.policy.state_dict().items())


@pytest.mark.slow
def test_a_warm_start_of_other_settings_or_a_changed_one_is_refused(warm, tmp_path):
    """A run whose warm-start settings differ from the warm start's, or a warm start edited after its seal: exit 2 naming it."""
    other = _write(
        tmp_path / "other.yaml", {**tiny_config(estimator="grpo", **{**WARM, "warmstart_lr": 1.0e-3}), "method": "grpo"}
    )
    result = run_cli(
        "train", "--config", other, "--out", tmp_path / "other", "--from-warmstart", warm / "warm", timeout=300
    )
    assert (
        result.returncode == 2 and "made with other settings" in result.stderr and str(warm / "warm") in result.stderr
    )
    assert json.loads((tmp_path / "other" / "provenance.json").read_text())["attempts"][-1]["status"] == "failed"
    edited = tmp_path / "edited"
    import shutil

    shutil.copytree(warm / "warm", edited)
    (edited / "warmstart.json").write_text("{}")
    config = _write(tmp_path / "grpo.yaml", {**tiny_config(estimator="grpo", **WARM), "method": "grpo"})
    result = run_cli("train", "--config", config, "--out", tmp_path / "run", "--from-warmstart", edited, timeout=300)
    assert result.returncode == 2 and "changed after it was sealed" in result.stderr
