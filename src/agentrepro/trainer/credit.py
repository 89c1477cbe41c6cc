"""From a rollout to per-token training targets, for any estimator of agentrepro.algorithms.spec.

* `training_targets`: the one entry point; an estimator that needs a critic gets `ppo_targets` (token GAE
  over the value head's predictions), every other one `turn_advantages` broadcast to its tokens.
* `turn_advantages`: the step rows of the rollout (docs/design.md §3.5) through `agentrepro.algorithms.estimate`
  with the configured estimator and its options; one advantage per agent turn, in step-row order.
* `broadcast_turns`: (rows, tokens) tensor holding each turn's value on exactly that turn's generated
  tokens, 0 elsewhere (observations, padding, <bos>).
* `token_rewards`: each turn's reward on the last generated token of the turn.
* `ppo_targets`: masked GAE over the tokens of a concat row (verl), or turn-level GAE over the turn rows of
  a trajectory laid out one row per turn (non-concat, or any chat-model rollout: `Rollout.per_turn_rows`;
  VAGEN-Lite `no_concat_gae`) broadcast to the turn's tokens; advantages whitened over generated tokens,
  as verl does per batch.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from agentrepro.algorithms import AdvantageResult, StepBatch, estimate, masked_gae, masked_whiten, turn_gae
from agentrepro.trainer.config import TrainConfig
from agentrepro.trainer.rollout import Rollout

TIMED = ("graph_build", "shortest_paths", "step_returns", "advantage")
"""Components of a step-row estimator's timings that the trainer logs."""


class Targets(NamedTuple):
    """Per-token training targets of one rollout."""

    advantages: torch.Tensor  # (rows, tokens) float32, 0 off generated tokens
    returns: torch.Tensor | None  # (rows, tokens) float32 value targets; None without a critic
    turn_advantages: np.ndarray | None  # (n_turns,) float64 in step-row order; None for token-level estimators
    result: AdvantageResult | None  # the step-row estimator's result (timings, diagnostics); None with a critic


def training_targets(rollout: Rollout, values: torch.Tensor | None, cfg: TrainConfig) -> Targets:
    """Targets of the configured estimator; `values` (rows, tokens) are the value head's, when it needs a critic."""
    if cfg.estimator_spec.needs_critic:
        if values is None:
            raise ValueError(f"{cfg.estimator} needs the value head's token values")
        return Targets(
            *ppo_targets(rollout, values, cfg, "non_concat" if rollout.per_turn_rows else "concat"), None, None
        )
    turn_adv, result = turn_advantages(rollout, cfg)
    return Targets(broadcast_turns(rollout, ordered_turns(rollout), turn_adv), None, turn_adv, result)


def ordered_turns(rollout: Rollout):
    """Turns in step-row order ((traj, turn)), the order of `Rollout.step_rows()`."""
    return sorted(rollout.turns, key=lambda t: (t.traj, t.turn))


def turn_advantages(rollout: Rollout, cfg: TrainConfig):
    """(advantages (n_turns,) float64 in step-row order, AdvantageResult)."""
    result = estimate(StepBatch.from_rows(rollout.step_rows()), cfg.estimator, **cfg.estimator_options)
    return np.asarray(result.advantage, dtype=np.float64), result


def broadcast_turns(rollout: Rollout, turns, values) -> torch.Tensor:
    """(rows, tokens) float32: values[k] on the generated tokens of turns[k], 0 elsewhere."""
    out = torch.zeros(rollout.input_ids.shape, dtype=torch.float32)
    for turn, value in zip(turns, values):
        out[turn.row, turn.start : turn.end] = float(value)
    return out


def token_rewards(rollout: Rollout) -> torch.Tensor:
    """(rows, tokens) float32: each turn's reward on its last generated token."""
    out = torch.zeros(rollout.input_ids.shape, dtype=torch.float32)
    for turn in rollout.turns:
        out[turn.row, turn.end - 1] += turn.reward
    return out


def ppo_targets(
    rollout: Rollout, values: torch.Tensor, cfg: TrainConfig, mode: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """(advantages, returns), each (rows, tokens) float32, from token values (rows, tokens) aligned with ids."""
    mask = rollout.loss_mask.float()
    if mode == "concat":
        adv, ret = masked_gae(token_rewards(rollout).double(), values.double(), mask.double(), cfg.gamma, cfg.lam)
        adv, ret = adv.float() * mask, ret.float() * mask
    else:
        turns = ordered_turns(rollout)
        turn_values = [float(values[t.row, t.start]) for t in turns]  # v_k: value where turn k starts generating
        adv_k, ret_k = np.zeros(len(turns)), np.zeros(len(turns))
        by_traj: dict[int, list[int]] = {}
        for k, t in enumerate(turns):
            by_traj.setdefault(t.traj, []).append(k)
        for ks in by_traj.values():
            a, r = turn_gae(
                np.array([turns[k].reward for k in ks]), np.array([turn_values[k] for k in ks]), cfg.gamma, cfg.lam
            )
            adv_k[ks], ret_k[ks] = a, r
        adv, ret = broadcast_turns(rollout, turns, adv_k), broadcast_turns(rollout, turns, ret_k)
    if mask.sum() >= 2:
        adv = masked_whiten(adv, mask) * mask
    return adv, ret
