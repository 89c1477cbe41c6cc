"""Group normalisation: reference semantics, exact zeros for equal groups, and agreement with a slow version."""

from __future__ import annotations

import numpy as np
import pytest
import slow_advantages as slow
from hypothesis import given, settings
from hypothesis import strategies as st

from agentrepro.algorithms.normalize import episode_advantage, normalize


def test_singletons_follow_reference():
    """Episode singletons pass through divided by 1 + ε (10 → 9.99999); step singletons give exactly 0."""
    x, codes = np.array([10.0, -0.1]), np.array([0, 1])
    assert normalize(x, codes, 2, norm="std", singleton="passthrough").tolist() == [10 / (1 + 1e-6), -0.1 / (1 + 1e-6)]
    assert normalize(x, codes, 2, norm="mean", singleton="passthrough").tolist() == [10.0, -0.1]
    assert normalize(x, codes, 2, norm="std", singleton="zero").tolist() == [0.0, 0.0]


def test_equal_values_give_exact_zero():
    """Six copies of 9.9 (not representable) normalise to exactly 0, not to a rounding artefact."""
    x = np.full(6, 10.0 - 0.1)
    assert normalize(x, np.zeros(6, dtype=np.int64), 1, norm="std").tolist() == [0.0] * 6


def test_sample_std_and_epsilon():
    """Std mode uses the sample std (N − 1) plus ε: [10, 0, 0, 0] → 1.5, −0.5."""
    out = normalize(np.array([10.0, 0, 0, 0]), np.zeros(4, dtype=np.int64), 1, norm="std")
    assert out == pytest.approx([7.5 / (5 + 1e-6), -2.5 / (5 + 1e-6), -2.5 / (5 + 1e-6), -2.5 / (5 + 1e-6)], rel=1e-12)


@settings(max_examples=100, deadline=None)
@given(
    values=st.lists(
        st.tuples(st.integers(0, 4), st.sampled_from([0.0, 1.0, 9.9, 10.0, -0.1, 0.9, 3.3])), min_size=1, max_size=40
    ),
    norm=st.sampled_from(["std", "mean"]),
    singleton=st.sampled_from(["passthrough", "zero"]),
)
def test_normalize_equals_slow(values, norm, singleton):
    """Vectorised group normalisation equals the per-group loop, including singleton and equal-valued groups."""
    codes = np.array([c for c, _ in values])
    uniq, codes = np.unique(codes, return_inverse=True)
    x = [v for _, v in values]
    ours = normalize(np.array(x), codes, uniq.size, norm=norm, singleton=singleton)
    ref = [0.0] * len(x)
    for g in range(uniq.size):
        for i, v in slow.norm_group(x, [i for i in range(len(x)) if codes[i] == g], norm, 1e-6, singleton).items():
            ref[i] = v
    assert np.allclose(ours, ref, rtol=1e-9, atol=1e-9)


def test_episode_stats_counterexample_numbers():
    """Success in 1 turn vs failure in 3 (scores [10, 0, 0, 0]): rows → 1.5/−0.5, trajectories → ±0.7071.

    With `rows` the longer failure weighs three times (mean 2.5, std 5); with `trajectories` each
    trajectory counts once (mean 5, std 7.071), so the failure's length does not change the advantage."""
    score = np.array([10.0, 0.0, 0.0, 0.0])
    group, traj = np.zeros(4, dtype=np.int64), np.array([0, 1, 1, 1])
    rows = episode_advantage(score, group, 1, traj, 2, norm="std", epsilon=1e-6, episode_stats="rows")
    trajs = episode_advantage(score, group, 1, traj, 2, norm="std", epsilon=1e-6, episode_stats="trajectories")
    assert rows == pytest.approx([1.5, -0.5, -0.5, -0.5], rel=1e-6)
    assert trajs == pytest.approx([2**-0.5, -(2**-0.5), -(2**-0.5), -(2**-0.5)], rel=1e-6)
    # and a 10-turn failure changes `rows` but not `trajectories`
    score10, traj10 = np.r_[10.0, np.zeros(10)], np.r_[0, np.ones(10, dtype=np.int64)]
    g10 = np.zeros(11, dtype=np.int64)
    assert episode_advantage(score10, g10, 1, traj10, 2, norm="std", epsilon=1e-6, episode_stats="trajectories")[
        :2
    ] == pytest.approx(trajs[:2])
    assert episode_advantage(score10, g10, 1, traj10, 2, norm="std", epsilon=1e-6, episode_stats="rows")[
        0
    ] != pytest.approx(rows[0])


def test_unknown_modes_are_errors():
    """Unknown norm, singleton and episode_stats values raise ValueError naming the choices."""
    x, c = np.ones(2), np.zeros(2, dtype=np.int64)
    with pytest.raises(ValueError, match="norm"):
        normalize(x, c, 1, norm="max")
    with pytest.raises(ValueError, match="episode_stats"):
        episode_advantage(x, c, 1, c, 1, norm="std", epsilon=1e-6, episode_stats="turns")
