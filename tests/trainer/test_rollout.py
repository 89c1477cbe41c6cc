"""Token-level invariants of multi-turn rollouts, in both modes."""

import pytest
import torch
from trainer_helpers import tiny_policy, tiny_spec_and_codec

from agentrepro.trainer.credit import token_rewards
from agentrepro.trainer.rollout import Sampler, rollout

SEEDS = [10001, 10001, 10002, 10002, 10003, 10003, 10004, 10004]


class ForcedSampler:
    """Ignores the logits: trajectory t, turn k, position p gets table[t][k][p] (action words or <eos>)."""

    def __init__(self, codec, n_traj, max_turns, max_new, seed=0):
        g = torch.Generator().manual_seed(seed)
        tok = codec.tokenizer
        choices = torch.tensor(
            [tok.convert_tokens_to_ids(a) for a in ("up", "down", "left", "right")] + [codec.eos] * 2
        )
        self.table = choices[torch.randint(len(choices), (n_traj, max_turns, max_new), generator=g)]

    def __call__(self, logits, trajs, turn, position):
        return self.table[trajs, turn, position].to(logits.device)


def _play(mode, sampler=None, max_new=4):
    spec, tok, codec = tiny_spec_and_codec(mode=mode)
    policy = tiny_policy(spec, tok)
    envs = [spec.make_env(training=False) for _ in SEEDS]
    sampler = sampler or Sampler(1.0, torch.Generator().manual_seed(0))
    ro = rollout(
        policy,
        envs,
        SEEDS,
        [i // 2 for i in range(len(SEEDS))],
        codec,
        sampler,
        mode=mode,
        max_turns=4,
        max_new_tokens=max_new,
        device=torch.device("cpu"),
    )
    return ro, codec


@pytest.mark.parametrize("mode", ["concat", "non_concat"])
def test_loss_mask_is_exactly_the_generated_tokens(mode):
    """loss_mask = 1 exactly on each turn's generated tokens: never on <bos>, observation, markers or padding."""
    _spec, _, codec = tiny_spec_and_codec()
    ro, codec = _play(mode, ForcedSampler(codec, len(SEEDS), 4, 4, seed=1))
    expected = torch.zeros_like(ro.loss_mask)
    for t in ro.turns:
        expected[t.row, t.start : t.end] = 1
    assert torch.equal(ro.loss_mask, expected)
    assert not bool((ro.loss_mask.bool() & ~ro.attention_mask.bool()).any())  # padding never trained
    observation_ids = {codec.obs, codec.act, codec.bos, codec.pad}
    generated = ro.input_ids[ro.loss_mask.bool()].tolist()
    assert not observation_ids & set(generated)
    assert ro.generated_tokens() == sum(t.end - t.start for t in ro.turns)


@pytest.mark.parametrize("mode", ["concat", "non_concat"])
def test_every_turn_is_generated_right_after_its_observation(mode):
    """With free sampling too: each turn's tokens follow its `<act>` marker and are all attended and trained."""
    ro, codec = _play(mode)
    for t in ro.turns:
        assert int(ro.input_ids[t.row, t.start - 1]) == codec.act
        assert int(ro.attention_mask[t.row, t.start : t.end].sum()) == t.end - t.start
        assert int(ro.loss_mask[t.row, : t.start].sum()) == sum(
            u.end - u.start for u in ro.turns if u.row == t.row and u.turn < t.turn
        )


@pytest.mark.parametrize("mode", ["concat", "non_concat"])
def test_each_turn_ends_on_its_tokens_and_reward_lands_on_the_last_generated_token(mode):
    """Turn token ranges hold only that turn's index; the reward sits on the last generated token of each turn,
    and a concat row ends on a generated token (the episode never ends on an appended observation)."""
    ro, _codec = _play(mode, max_new=6)
    rewards = token_rewards(ro)
    for t in ro.turns:
        assert set(ro.turn_index[t.row, t.start : t.end].tolist()) == {t.turn}
        assert float(rewards[t.row, t.end - 1]) == pytest.approx(t.reward)
        assert float(rewards[t.row, t.start : t.end - 1].abs().sum()) == 0.0
    assert float(rewards[~ro.loss_mask.bool()].abs().sum()) == 0.0
    if mode == "concat":
        for row in range(ro.input_ids.shape[0]):
            last_attended = int(torch.nonzero(ro.attention_mask[row]).max())
            assert ro.loss_mask[row, last_attended] == 1


def test_concat_and_non_concat_agree_on_the_same_actions():
    """Same seeds and the same sampled action tokens: identical per-turn actions, rewards, states and ends."""
    _spec, _, codec = tiny_spec_and_codec()
    forced = ForcedSampler(codec, len(SEEDS), 4, 4, seed=3)
    a, _ = _play("concat", forced)
    b, _ = _play("non_concat", forced)
    key = lambda t: (t.traj, t.turn, t.actions, t.reward, t.state, t.next_state, t.valid, t.done, t.success, t.response)  # noqa: E731
    assert [key(t) for t in sorted(a.turns, key=lambda t: (t.traj, t.turn))] == [
        key(t) for t in sorted(b.turns, key=lambda t: (t.traj, t.turn))
    ]
    assert a.step_rows() == b.step_rows()
    assert len(a.turns) > len(SEEDS)  # multi-turn episodes were exercised
    # non-concat: one row per turn; concat: one row per trajectory
    assert b.input_ids.shape[0] == len(b.turns) and a.input_ids.shape[0] == len(SEEDS)


def test_same_generator_seed_same_rollout():
    """A rollout is a function of the generator seed."""
    a, _ = _play("concat", Sampler(1.0, torch.Generator().manual_seed(5)))
    b, _ = _play("concat", Sampler(1.0, torch.Generator().manual_seed(5)))
    c, _ = _play("concat", Sampler(1.0, torch.Generator().manual_seed(6)))
    assert torch.equal(a.input_ids, b.input_ids) and a.step_rows() == b.step_rows()
    assert not torch.equal(a.input_ids, c.input_ids) or a.step_rows() != c.step_rows()


def test_top_p_keeps_only_the_nucleus():
    """top_p sampling never draws a token outside the smallest set reaching top_p."""
    logits = torch.log(torch.tensor([[0.6, 0.3, 0.05, 0.05]])).repeat(200, 1)
    s = Sampler(1.0, torch.Generator().manual_seed(0), top_p=0.8)
    drawn = set(s(logits, list(range(200)), 0, 0).tolist())
    assert drawn == {0, 1}


@pytest.mark.parametrize("mode", ["concat", "non_concat"])
def test_kv_cache_decoding_matches_recomputing_the_prefix(mode):
    """The cached rollout and the slow one that recomputes every prefix give the same tokens and turns."""
    spec, tok, codec = tiny_spec_and_codec(mode=mode)
    policy = tiny_policy(spec, tok)
    out = []
    for cache in (True, False):
        envs = [spec.make_env(training=False) for _ in SEEDS]
        out.append(
            rollout(
                policy,
                envs,
                SEEDS,
                [i // 2 for i in range(len(SEEDS))],
                codec,
                Sampler(1.0, torch.Generator().manual_seed(2)),
                mode=mode,
                max_turns=3,
                max_new_tokens=4,
                device=torch.device("cpu"),
                kv_cache=cache,
            )
        )
    assert torch.equal(out[0].input_ids, out[1].input_ids)
    assert out[0].step_rows() == out[1].step_rows()
