"""Per-token targets: each generated token gets exactly its own turn's advantage; PPO targets stay on them."""

import numpy as np
import pytest
import torch
from trainer_helpers import tiny_policy, tiny_spec_and_codec

from agentrepro.algorithms import StepBatch, estimate
from agentrepro.trainer.config import TrainConfig
from agentrepro.trainer.credit import broadcast_turns, ordered_turns, ppo_targets, training_targets, turn_advantages
from agentrepro.trainer.rollout import Sampler, rollout

SEEDS = [10001] * 4 + [10005] * 4


def _rollout(mode):
    spec, tok, codec = tiny_spec_and_codec(mode=mode)
    envs = [spec.make_env(training=True) for _ in SEEDS]
    return rollout(
        tiny_policy(spec, tok),
        envs,
        SEEDS,
        [i // 4 for i in range(8)],
        codec,
        Sampler(1.0, torch.Generator().manual_seed(1)),
        mode=mode,
        max_turns=3,
        max_new_tokens=4,
        device=torch.device("cpu"),
    )


@pytest.mark.parametrize("mode", ["concat", "non_concat"])
@pytest.mark.parametrize("estimator", ["grpo", "gigpo", "graphgpo"])
def test_each_action_token_gets_its_own_turns_advantage(mode, estimator):
    """Token (row, p) carries the advantage of the turn that generated it, and 0 off generated tokens."""
    ro = _rollout(mode)
    cfg = TrainConfig(estimator=estimator, norm="std")
    adv, _result = turn_advantages(ro, cfg)
    turns = ordered_turns(ro)
    tokens = broadcast_turns(ro, turns, adv)
    # slow, obvious version: walk every token and look its turn up
    by_place = {(t.row, t.turn): k for k, t in enumerate(turns)}
    for row in range(ro.input_ids.shape[0]):
        for p in range(ro.input_ids.shape[1]):
            if ro.loss_mask[row, p]:
                k = by_place[(row, int(ro.turn_index[row, p]))]
                assert float(tokens[row, p]) == pytest.approx(float(adv[k]))
            else:
                assert float(tokens[row, p]) == 0.0
    assert len(adv) == len(ro.step_rows()) and np.all(np.isfinite(adv))


def test_graph_only_is_graphgpo_without_the_episode_term():
    """graphgpo with episode_weight 0 gives exactly the registry's graph_only advantages; options come from the config."""
    ro = _rollout("concat")
    cfg = TrainConfig(estimator="graphgpo", episode_weight=0.0, omega=0.5)
    adv, result = turn_advantages(ro, cfg)
    only = estimate(StepBatch.from_rows(ro.step_rows()), "graph_only", omega=0.5, norm=cfg.norm)
    assert adv.tolist() == only.advantage.tolist() and result.advantage_episode is None
    assert TrainConfig(estimator="gigpo", gamma=0.9).estimator_options["gamma"] == 0.9
    assert set(TrainConfig(estimator="grpo").estimator_options) == {
        "norm",
        "invalid_penalty",
        "episode_stats",
        "epsilon",
        "episode_weight",
    }


@pytest.mark.parametrize("estimator", ["grpo", "ppo"])
def test_training_targets_follow_the_critic_capability(estimator):
    """An estimator that needs a critic gets GAE targets with returns; the others turn advantages without returns."""
    ro = _rollout("concat")
    values = torch.zeros(ro.input_ids.shape)
    cfg = TrainConfig(estimator=estimator)
    targets = training_targets(ro, values if cfg.uses_value else None, cfg)
    assert targets.advantages.shape == ro.input_ids.shape
    if estimator == "ppo":
        assert targets.returns is not None and targets.turn_advantages is None and targets.result is None
    else:
        assert targets.returns is None and targets.result.estimator == "grpo"
        assert torch.equal(targets.advantages, broadcast_turns(ro, ordered_turns(ro), targets.turn_advantages))


@pytest.mark.parametrize("mode", ["concat", "non_concat"])
def test_ppo_targets_live_on_generated_tokens_only(mode):
    """GAE advantages are whitened over generated tokens and zero elsewhere; returns = A + V before whitening."""
    ro = _rollout(mode)
    values = torch.randn(ro.input_ids.shape, generator=torch.Generator().manual_seed(0))
    adv, ret = ppo_targets(ro, values, TrainConfig(estimator="ppo", gamma=1.0, lam=1.0), mode)
    mask = ro.loss_mask.bool()
    assert float(adv[~mask].abs().sum()) == 0.0
    assert float(adv[mask].mean()) == pytest.approx(0.0, abs=1e-5)
    if mode == "non_concat":  # one value per turn: all of a turn's tokens share its return
        for t in ro.turns:
            assert len(set(ret[t.row, t.start : t.end].tolist())) == 1
