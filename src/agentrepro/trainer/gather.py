"""Rollouts of several data-parallel ranks joined into the one batch a single process would hold (trainer/parallel.py).

Rank r's trajectories follow rank r - 1's (ranks roll out contiguous shares of the groups), so trajectory and
row numbers are offset by the ranks before; each rank's rows are right-padded to the widest rank's (padding:
attention 0, loss mask 0, turn -1), which leaves every attended token, its position and each turn's
[start, end) as they were.
"""

from __future__ import annotations

import dataclasses

import torch

from agentrepro.trainer.rollout import Rollout


def _padded(x: torch.Tensor, width: int, value: int | float) -> torch.Tensor:
    return torch.nn.functional.pad(x, (0, width - x.shape[1]), value=value)


def merge_rollouts(parts: list[Rollout], pad: int) -> Rollout:
    """One Rollout of `parts` in order (see the module docstring)."""
    width = max(p.input_ids.shape[1] for p in parts)
    turns, row_traj, seeds, groups = [], [], [], []
    trajs = rows = 0
    for p in parts:
        turns += [dataclasses.replace(t, traj=t.traj + trajs, row=t.row + rows) for t in p.turns]
        row_traj.append(p.row_traj + trajs)
        seeds += p.seeds
        groups += p.groups
        trajs += p.n_traj
        rows += p.input_ids.shape[0]
    cat = lambda name, value: torch.cat([_padded(getattr(p, name), width, value) for p in parts])  # noqa: E731
    return Rollout(
        cat("input_ids", pad),
        cat("attention_mask", 0),
        cat("loss_mask", 0),
        cat("turn_index", -1),
        torch.cat(row_traj),
        turns,
        seeds,
        groups,
        per_turn_rows=parts[0].per_turn_rows,
    )


def merge_tokens(parts: list[torch.Tensor | None], width: int) -> torch.Tensor | None:
    """Per-token tensors (rows, tokens) of each rank, zero-padded to `width` and stacked; None if they are None."""
    present = [p for p in parts if p is not None]
    if not present:
        return None
    if len(present) != len(parts):
        raise ValueError("per-token tensors from some ranks and None from others")
    return torch.cat([_padded(p, width, 0.0) for p in present])
