"""Evaluation: outcome rows of docs/design.md §3.4 on the frozen panel, seeded, and refusing a drifted panel."""

import pytest
from trainer_helpers import tiny_config

from agentrepro.environments import task_panel
from agentrepro.errors import Failure
from agentrepro.trainer.evaluate import evaluate_run
from agentrepro.trainer.loop import train


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    run = tmp_path_factory.mktemp("eval") / "run"
    config = tiny_config(steps=1)
    train(config, run, resume=False)
    return config, run


def test_rows_follow_the_outcome_contract_and_step_zero_exists(trained):
    """One row per task and episode with every §3.4 field; step 0 (after the warm start) can be evaluated."""
    config, run = trained
    config = {**config, "eval": {**config["eval"], "episodes_per_task": 2}}
    rows = evaluate_run(config, run, 0)
    assert len(rows) == 4 * 2
    fields = [
        "study",
        "method",
        "seed",
        "step",
        "task_id",
        "task_hash",
        "category",
        "episode",
        "success",
        "reward",
        "turns",
        "tokens",
    ]
    assert all(list(r)[: len(fields)] == fields for r in rows)
    panel = task_panel("frozenlake", {}, range(10001, 10005))
    assert [r["task_hash"] for r in rows if r["episode"] == 0] == [t["task_hash"] for t in panel]
    assert all(r["success"] in (0, 1) and 1 <= r["turns"] <= 5 and r["tokens"] >= r["turns"] for r in rows)


def test_greedy_and_seeded_sampling_are_reproducible(trained):
    """Greedy evaluation repeats exactly; sampled evaluation repeats for the same sample seed."""
    config, run = trained
    assert evaluate_run(config, run, 1) == evaluate_run(config, run, 1)
    sampled = {**config, "eval": {**config["eval"], "temperature": 1.0, "tasks": 16}}
    assert evaluate_run(sampled, run, 1) == evaluate_run(sampled, run, 1)


def test_a_panel_whose_hash_no_longer_matches_is_refused(trained):
    """A frozen panel row whose task_hash differs from the environment's description is a Failure."""
    config, run = trained
    panel = task_panel("frozenlake", {}, range(10001, 10005))
    panel[2] = {**panel[2], "task_hash": "0" * 64}
    with pytest.raises(Failure, match=r"task_panel\[2\]"):
        evaluate_run({**config, "eval": {**config["eval"], "task_panel": panel}}, run, 0)
