"""GiGPO (verl-agent gigpo/core_gigpo.py): episode term + step term over (group, exact anchor state).

Step return R_t = Σ_k γ^(k−t)·r_k over the rest of the trajectory (turn order), then the row's own
invalid-action penalty is subtracted (it never reaches earlier turns). Step groups are the rows that
share (group, state); a step group of one row gets 0. A = episode_weight·A_episode + step_weight·A_step.
"""

from __future__ import annotations

import numpy as np

from agentrepro.algorithms.batch import StepBatch
from agentrepro.algorithms.diagnostics import step_diagnostics
from agentrepro.algorithms.grpo import episode_scores, episode_term
from agentrepro.algorithms.normalize import normalize
from agentrepro.algorithms.result import AdvantageResult
from agentrepro.algorithms.timing import Timings


def trajectory_order(batch: StepBatch) -> tuple[np.ndarray, np.ndarray]:
    """(order (n,), pos (n,)): row indices sorted by trajectory then turn, and each sorted row's position in
    its trajectory. O(n) by scattering to offset[traj] + turn when every trajectory's turns are 0..k−1
    (the usual case); otherwise a sort."""
    n = len(batch)
    t = batch.traj_codes
    counts = np.bincount(t, minlength=batch.n_trajs)
    max_turn = np.full(batch.n_trajs, -1)
    np.maximum.at(max_turn, t, batch.turn)
    offset = np.cumsum(counts) - counts
    if np.array_equal(max_turn, counts - 1):  # turns unique per trajectory (checked on input), so 0..k−1
        order = np.empty(n, dtype=np.int64)
        order[offset[t] + batch.turn] = np.arange(n)
    else:
        order = np.argsort(t * (int(batch.turn.max()) + 1) + batch.turn, kind="stable")
    pos = np.arange(n) - np.repeat(offset, counts)
    return order, pos


def discounted_returns(batch: StepBatch, rewards: np.ndarray, gamma: float) -> np.ndarray:
    """float64 (n,): Σ_k γ^(k−t)·rewards_k from each row to the end of its trajectory, in turn order.

    Vectorised over trajectories: one pass per turn position, from the last position backwards.
    """
    n = len(batch)
    out = np.zeros(n)
    if n == 0:
        return out
    order, pos = trajectory_order(batch)
    t_sorted = batch.traj_codes[order]
    last = np.r_[t_sorted[1:] != t_sorted[:-1], True]
    r = np.asarray(rewards, dtype=np.float64)[order]
    ret = np.zeros(n)
    small = pos.astype(np.int16) if pos.max() < np.iinfo(np.int16).max else pos
    by_pos = np.argsort(small, kind="stable")  # radix sort for 16-bit keys: O(n)
    bounds = np.searchsorted(pos[by_pos], np.arange(int(pos.max()) + 2))
    for p in range(int(pos.max()), -1, -1):
        idx = by_pos[bounds[p] : bounds[p + 1]]
        follow = np.where(last[idx], 0.0, ret[np.minimum(idx + 1, n - 1)])
        ret[idx] = r[idx] + gamma * follow
    out[order] = ret
    return out


def gigpo(
    batch: StepBatch,
    *,
    norm: str = "std",
    gamma: float = 0.95,
    step_weight: float = 1.0,
    episode_weight: float = 1.0,
    invalid_penalty: float = 0.1,
    episode_stats: str = "rows",
    epsilon: float = 1e-6,
) -> AdvantageResult:
    """GiGPO advantages (n,) with the episode and step terms, step returns and step-group diagnostics."""
    timings = Timings()
    with timings.time("step_returns"):
        step_return = discounted_returns(batch, batch.reward, gamma) - invalid_penalty * (~batch.valid)
    with timings.time("advantage"):
        score = episode_scores(batch, invalid_penalty)
        a_ep = episode_term(batch, score, norm=norm, epsilon=epsilon, episode_stats=episode_stats)
        codes, n_steps = batch.step_groups
        a_step = normalize(step_return, codes, n_steps, norm=norm, epsilon=epsilon, singleton="zero")
        advantage = episode_weight * a_ep + step_weight * a_step
    diagnostics = step_diagnostics(batch, a_step)
    return AdvantageResult(
        "gigpo",
        {},
        advantage=advantage,
        episode_score=score,
        advantage_episode=a_ep,
        advantage_step=a_step,
        step_return=step_return,
        diagnostics=diagnostics,
        timings=dict(timings),
    )
