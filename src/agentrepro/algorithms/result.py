"""`AdvantageResult`: what every estimator returns (docs/internals.md "Algorithms")."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# Per-row output arrays, in the order the CLI writes them; None where the estimator does not define one.
ROW_FIELDS = (
    "advantage",
    "advantage_episode",
    "advantage_step",
    "episode_score",
    "step_return",
    "graph_reward",
    "distance",
)


@dataclass
class AdvantageResult:
    """Per-row float64 arrays of shape (n,), in the batch's row order.

    advantage: the scalar broadcast over the row's response tokens. advantage_episode / advantage_step:
    the two terms before weighting. episode_score: episode_reward − penalty·invalid. step_return (GiGPO):
    discounted return after the penalty. graph_reward, distance (GraphGPO): 10·ω^d − penalty·invalid and
    d(next_state). diagnostics: docs/design.md §3.3 graph diagnostics (None for GRPO); group_diagnostics (GraphGPO):
    the same counts per rollout group. timings: seconds per
    component (`graph_build`, `shortest_paths`, `step_returns`, `advantage`; absent when not run).
    """

    estimator: str
    options: dict
    advantage: np.ndarray
    episode_score: np.ndarray | None = None
    advantage_episode: np.ndarray | None = None
    advantage_step: np.ndarray | None = None
    step_return: np.ndarray | None = None
    graph_reward: np.ndarray | None = None
    distance: np.ndarray | None = None
    diagnostics: dict | None = None
    group_diagnostics: list | None = None
    timings: dict = field(default_factory=dict)

    def row_fields(self) -> dict[str, np.ndarray]:
        """The defined per-row arrays by name (ROW_FIELDS order)."""
        return {k: getattr(self, k) for k in ROW_FIELDS if getattr(self, k) is not None}

    def rows(self) -> list[dict]:
        """One dict of Python floats per row with the defined fields."""
        fields = self.row_fields()
        cols = {k: v.tolist() for k, v in fields.items()}
        return [dict(zip(cols, vals)) for vals in zip(*cols.values())]
