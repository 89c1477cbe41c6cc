"""GRPO: one episode score per row, normalised within its rollout group (docs/design.md §4)."""

from __future__ import annotations

import numpy as np

from agentrepro.algorithms.batch import StepBatch
from agentrepro.algorithms.normalize import episode_advantage
from agentrepro.algorithms.result import AdvantageResult
from agentrepro.algorithms.timing import Timings


def episode_scores(batch: StepBatch, invalid_penalty: float) -> np.ndarray:
    """float64 (n,): episode_reward − penalty·(not valid), the row's summed token-level score."""
    return batch.episode_reward - invalid_penalty * (~batch.valid)


def episode_term(batch: StepBatch, score: np.ndarray, *, norm: str, epsilon: float, episode_stats: str) -> np.ndarray:
    """The normalised episode advantage (n,) of every row."""
    return episode_advantage(
        score,
        batch.group_codes,
        batch.n_groups,
        batch.traj_codes,
        batch.n_trajs,
        norm=norm,
        epsilon=epsilon,
        episode_stats=episode_stats,
    )


def grpo(
    batch: StepBatch,
    *,
    norm: str = "std",
    invalid_penalty: float = 0.1,
    episode_stats: str = "rows",
    epsilon: float = 1e-6,
    episode_weight: float = 1.0,
) -> AdvantageResult:
    """GRPO advantage (n,) = episode_weight · normalise_group(episode_reward − penalty·invalid)."""
    timings = Timings()
    with timings.time("advantage"):
        score = episode_scores(batch, invalid_penalty)
        adv = episode_term(batch, score, norm=norm, epsilon=epsilon, episode_stats=episode_stats)
        advantage = adv if episode_weight == 1.0 else episode_weight * adv
    return AdvantageResult("grpo", {}, advantage=advantage, episode_score=score, timings=dict(timings))
