"""Group normalisation as the reference does it (docs/design.md §4), vectorised with `np.bincount`.

For a group of n > 1 values: (x − mean) / (std + ε) with the sample std (N − 1), or x − mean in `mean`
mode. Singleton groups follow the reference: an *episode* group of one passes its score through with
mean 0 and std 1 (`singleton="passthrough"`); a *step* group of one gets exactly 0 (`singleton="zero"`).

Exactness: statistics are taken over x − x_first (the group's first value), so a group of equal values
gives deviations of exactly 0 and therefore advantages of exactly 0 — unlike float32 `torch.mean`, which
can land one ulp away and turn ε-sized stds into large spurious advantages (the fixtures' fp32_artifact rows).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from agentrepro.algorithms.batch import first_index

NORMS = ("std", "mean")


@dataclass(frozen=True)
class GroupStats:
    """Per-group statistics, every array of shape (n_groups,).

    shift: the group's first value; mean_dev: mean of (x − shift); std: sample std (0 for n ≤ 1);
    count: number of values.
    """

    shift: np.ndarray
    mean_dev: np.ndarray
    std: np.ndarray
    count: np.ndarray


def group_stats(x: np.ndarray, codes: np.ndarray, n_groups: int) -> GroupStats:
    """Mean and sample std of float64 `x` (n,) within groups `codes` (n,) in [0, n_groups)."""
    x = np.asarray(x, dtype=np.float64)
    count = np.bincount(codes, minlength=n_groups).astype(np.float64)
    shift = np.zeros(n_groups)
    present = count > 0
    shift[present] = x[first_index(codes, n_groups)[present]] if codes.size else 0.0
    d = x - shift[codes]
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_dev = np.where(present, np.bincount(codes, weights=d, minlength=n_groups) / count, 0.0)
        dev = d - mean_dev[codes]
        ss = np.bincount(codes, weights=dev * dev, minlength=n_groups)
        std = np.where(count > 1, np.sqrt(ss / np.maximum(count - 1, 1)), 0.0)
    return GroupStats(shift=shift, mean_dev=mean_dev, std=std, count=count)


def apply_stats(
    x: np.ndarray, codes: np.ndarray, stats: GroupStats, *, norm: str, epsilon: float, singleton: str
) -> np.ndarray:
    """Normalise `x` (n,) with the statistics of its group; groups with count ≤ 1 per `singleton`."""
    if norm not in NORMS:
        raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")
    x = np.asarray(x, dtype=np.float64)
    dev = (x - stats.shift[codes]) - stats.mean_dev[codes]
    if norm == "std":  # a zero-variance group has dev == 0: with epsilon 0 it is 0, not 0/0
        scale = stats.std[codes] + epsilon
        out = np.divide(dev, scale, out=np.zeros_like(dev), where=scale != 0)
    else:
        out = dev
    single = stats.count[codes] <= 1
    if single.any():
        if singleton == "passthrough":  # mean 0, std 1
            out[single] = x[single] / (1.0 + epsilon) if norm == "std" else x[single]
        elif singleton == "zero":
            out[single] = 0.0
        else:
            raise ValueError(f"singleton must be 'passthrough' or 'zero', got {singleton!r}")
    return out


def normalize(
    x: np.ndarray,
    codes: np.ndarray,
    n_groups: int,
    *,
    norm: str = "std",
    epsilon: float = 1e-6,
    singleton: str = "passthrough",
) -> np.ndarray:
    """Normalise float64 `x` (n,) within groups `codes` (n,); returns float64 (n,)."""
    return apply_stats(x, codes, group_stats(x, codes, n_groups), norm=norm, epsilon=epsilon, singleton=singleton)


def episode_advantage(
    score: np.ndarray,
    group: np.ndarray,
    n_groups: int,
    traj: np.ndarray,
    n_trajs: int,
    *,
    norm: str,
    epsilon: float,
    episode_stats: str,
) -> np.ndarray:
    """Episode term (n,) from per-row scores (n,).

    episode_stats="rows": mean/std over every step row of the group (the reference; a 3-turn trajectory
    counts three times). "trajectories": each trajectory counts once with the mean of its row scores
    (its episode score when no turn was penalised); every row is then normalised with those group
    statistics, so a row still carries its own invalid-action penalty. A group of one trajectory then
    passes through (mean 0, std 1), as a one-row group does in "rows" mode.
    """
    if episode_stats == "rows":
        return normalize(score, group, n_groups, norm=norm, epsilon=epsilon, singleton="passthrough")
    if episode_stats != "trajectories":
        raise ValueError(f"episode_stats must be 'rows' or 'trajectories', got {episode_stats!r}")
    # mean of each trajectory's row scores, shifted by its first row so that equal scores stay exact
    first = score[first_index(traj, n_trajs)]
    per_traj = first + np.bincount(traj, weights=score - first[traj], minlength=n_trajs) / np.bincount(
        traj, minlength=n_trajs
    )
    traj_group = np.empty(n_trajs, dtype=np.int64)
    traj_group[traj] = group
    stats = group_stats(per_traj, traj_group, n_groups)
    return apply_stats(score, group, stats, norm=norm, epsilon=epsilon, singleton="passthrough")
