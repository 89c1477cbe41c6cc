"""GRPO: episode scores with the invalid penalty, and the variable-length counterexample against the reference."""

from __future__ import annotations

import numpy as np
import pytest
from parity_fixtures import load_cases

from agentrepro.algorithms import StepBatch, estimate


def _case(fixtures_dir, name, estimator, norm="std"):
    return next(
        c
        for c in load_cases(fixtures_dir, "edge_cases.jsonl")
        if c["case"] == name and c["params"]["estimator"] == estimator and c["params"]["norm"] == norm
    )


def test_counterexample_rows_equals_reference_and_trajectories_differs(fixtures_dir):
    """`different_lengths_1_vs_3`: rows mode reproduces the reference; trajectories mode gives each trajectory one vote.

    Reference (rows): scores [10, 0, 0, 0], mean 2.5, std 5 → success 1.5, failure −0.5 (the 3-turn
    failure pulls the mean down three times). Trajectories: values [10, 0], mean 5, std 7.07 → ±0.7071,
    so the success is worth exactly what the failure costs, whatever the lengths."""
    case = _case(fixtures_dir, "different_lengths_1_vs_3", "grpo")
    batch = StepBatch.from_rows(case["rows"])
    won = np.array([r["success"] for r in case["rows"]])
    assert sorted(r["episode_reward"] for r in case["rows"]) == [0.0, 0.0, 0.0, 10.0]
    rows = estimate(batch, "grpo", episode_stats="rows").advantage
    trajs = estimate(batch, "grpo", episode_stats="trajectories").advantage
    assert rows == pytest.approx([e["advantage"] for e in case["expected"]], rel=1e-5)
    assert rows[won] == pytest.approx([1.5], rel=1e-5) and rows[~won] == pytest.approx([-0.5] * 3, rel=1e-5)
    assert trajs[won] == pytest.approx([2**-0.5], rel=1e-5) and trajs[~won] == pytest.approx([-(2**-0.5)] * 3, rel=1e-5)
    assert trajs[won].sum() + trajs[~won][0] == pytest.approx(0.0, abs=1e-12)  # symmetric per trajectory
    assert rows[won].sum() + rows[~won][0] > 0.9  # not symmetric: length matters


def test_invalid_penalty_lowers_the_row_score():
    """An invalid row's score is episode_reward − penalty, and only that row's."""
    rows = [
        {
            "group": "g",
            "traj": t,
            "turn": k,
            "state": "s",
            "next_state": "s",
            "reward": 0.0,
            "episode_reward": 0.0,
            "valid": not (t == "a" and k == 1),
            "success": False,
        }
        for t in ("a", "b")
        for k in range(2)
    ]
    res = estimate(StepBatch.from_rows(rows), "grpo", invalid_penalty=0.5, norm="mean")
    assert res.episode_score.tolist() == [0.0, -0.5, 0.0, 0.0]
    assert res.advantage.tolist() == pytest.approx([0.125, -0.375, 0.125, 0.125])


def test_mean_norm_and_weight():
    """`mean` skips the division; episode_weight scales the whole advantage."""
    rows = [
        {
            "group": "g",
            "traj": t,
            "turn": 0,
            "state": "s",
            "next_state": "success" if w else "x",
            "reward": 10.0 * w,
            "episode_reward": 10.0 * w,
            "valid": True,
            "success": bool(w),
        }
        for t, w in (("a", 1), ("b", 0), ("c", 0), ("d", 0))
    ]
    batch = StepBatch.from_rows(rows)
    assert estimate(batch, "grpo", norm="mean").advantage.tolist() == [7.5, -2.5, -2.5, -2.5]
    assert estimate(batch, "grpo", norm="mean", episode_weight=2.0).advantage.tolist() == [15.0, -5.0, -5.0, -5.0]
