"""GiGPO: discounted step returns in turn order, penalty on the row only, and (group, state) step groups."""

from __future__ import annotations

import numpy as np
import pytest
import slow_advantages as slow
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import step_rows

from agentrepro.algorithms import StepBatch, estimate
from agentrepro.algorithms.gigpo import discounted_returns


def _traj(rewards, valid=None, traj="t", group="g", states=None):
    n = len(rewards)
    valid = valid or [True] * n
    states = states or [f"s{k}" for k in range(n + 1)]
    return [
        {
            "group": group,
            "traj": traj,
            "turn": k,
            "state": states[k],
            "next_state": states[k + 1],
            "reward": rewards[k],
            "episode_reward": sum(rewards),
            "valid": valid[k],
            "success": sum(rewards) > 0,
        }
        for k in range(n)
    ]


def test_step_return_discounts_and_penalises_own_row_only():
    """R = [γ²·10, γ·10 − 0.1, 10] for rewards [0, 0, 10] with the middle turn invalid."""
    rows = _traj([0.0, 0.0, 10.0], valid=[True, False, True])
    res = estimate(StepBatch.from_rows(rows), "gigpo", gamma=0.9)
    assert res.step_return.tolist() == pytest.approx([8.1, 9.0 - 0.1, 10.0], rel=1e-12)


def test_returns_follow_turns_not_row_order():
    """Reversed rows give the same per-row returns as forward rows."""
    rows = _traj([1.0, 2.0, 3.0])
    fwd = discounted_returns(StepBatch.from_rows(rows), np.array([1.0, 2.0, 3.0]), 0.5)
    back = discounted_returns(StepBatch.from_rows(rows[::-1]), np.array([3.0, 2.0, 1.0]), 0.5)
    assert fwd.tolist() == [1 + 0.5 * 2 + 0.25 * 3, 2 + 0.5 * 3, 3.0]
    assert back.tolist() == fwd.tolist()[::-1]


@settings(max_examples=60, deadline=None)
@given(rows=step_rows(max_turns=10), gamma=st.floats(0.0, 1.0))
def test_discounted_returns_equal_slow(rows, gamma):
    """The position-vectorised returns equal a per-trajectory backwards loop."""
    batch = StepBatch.from_rows(rows)
    assert np.allclose(
        discounted_returns(batch, batch.reward, gamma), slow.step_returns(rows, gamma), rtol=1e-12, atol=1e-12
    )


def test_step_groups_are_per_group_and_state():
    """The same state name in two groups forms two step groups (no sharing across groups)."""
    rows = (
        _traj([0.0, 10.0], traj="a", group="g1", states=["S", "X", "success"])
        + _traj([0.0, 0.0], traj="b", group="g1", states=["S", "Y", "Z"])
        + _traj([0.0], traj="c", group="g2", states=["S", "Y"])
    )
    res = estimate(StepBatch.from_rows(rows), "gigpo")
    # g1/S has two rows with returns 9.5 and 0 -> ±0.7071; g2/S is a singleton -> 0
    assert res.advantage_step[[0, 2]] == pytest.approx([2**-0.5, -(2**-0.5)], rel=1e-5)
    assert res.advantage_step[4] == 0.0
    assert res.advantage == pytest.approx(res.advantage_episode + res.advantage_step)
    assert res.diagnostics["groups"] == 2 and res.diagnostics["step_group_size_hist"] == {
        "1": 3,
        "2": 1,
    }  # g1/S; g1/X, g1/Y, g2/S


def test_turn_gaps_use_the_sorting_path():
    """Turn indices with gaps (0, 2, 7) discount by order within the trajectory, like contiguous turns."""
    rows = _traj([1.0, 2.0, 3.0]) + _traj([4.0, 0.0], traj="u")
    gapped = [dict(r, turn={0: 0, 1: 2, 2: 7}[r["turn"]]) for r in rows]
    a = discounted_returns(StepBatch.from_rows(rows), np.array([r["reward"] for r in rows]), 0.5)
    b = discounted_returns(StepBatch.from_rows(gapped[::-1]), np.array([r["reward"] for r in gapped[::-1]]), 0.5)
    assert b.tolist() == a.tolist()[::-1]
    assert a.tolist() == [2.75, 3.5, 3.0, 4.0, 0.0]
