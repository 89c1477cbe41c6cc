"""Warm start: demonstrations solve their tasks, train only the demonstrated tokens, stop at the target."""

import pytest
import torch
from trainer_helpers import tiny_policy, tiny_spec_and_codec

from agentrepro.trainer.warmstart import collate, demonstration_rows, warm_start


@pytest.mark.parametrize("mode", ["concat", "non_concat"])
@pytest.mark.parametrize("per_turn", [1, 5])
def test_demonstrations_are_bfs_paths_with_loss_on_actions_only(mode, per_turn):
    """Replayed demonstration turns reach the goal; the loss mask covers exactly the action words and <eos>."""
    spec, tok, codec = tiny_spec_and_codec()
    env = spec.make_env(training=False)
    for seed in (10001, 10002, 10003):
        rows = demonstration_rows(env, seed, codec, mode, per_turn)
        assert env.done and env.player_position() == next(
            (r, c) for r, row in enumerate(env.desc) for c, x in enumerate(row) if x == "G"
        )
        trained = [i for r, m in rows for i, keep in zip(r, m) if keep]
        actions = {tok.convert_tokens_to_ids(a) for a in env.action_names}
        assert set(trained) <= actions | {codec.eos}
        assert trained.count(codec.eos) == (
            len(rows) if mode == "non_concat" else sum(r.count(codec.eos) for r, _ in rows)
        )
        if mode == "concat":
            assert len(rows) == 1
    ids, attn, mask = collate(rows, codec.pad)
    assert ids.shape == attn.shape == mask.shape and float(mask.sum()) == len(trained)


def test_warm_start_stops_at_the_target_and_is_reproducible():
    """Target 0 trains nothing; a real target trains the same steps and weights twice for one seed."""
    spec, tok, codec = tiny_spec_and_codec(warmstart_target=0.0)
    policy = tiny_policy(spec, tok)
    before = {k: v.clone() for k, v in policy.state_dict().items()}
    record = warm_start(policy, spec, codec, torch.device("cpu"))
    assert record["steps"] == 0 and record["reached"]
    assert all(torch.equal(before[k], v) for k, v in policy.state_dict().items())
    spec, tok, codec = tiny_spec_and_codec(warmstart_target=1.0, warmstart_max_steps=3, warmstart_eval_every=3)
    results = []
    for _ in range(2):
        policy = tiny_policy(spec, tok)
        record = warm_start(policy, spec, codec, torch.device("cpu"))
        results.append((record["steps"], policy.state_dict()))
    assert results[0][0] == results[1][0] == 3
    assert all(torch.equal(results[0][1][k], results[1][1][k]) for k in results[0][1])
    assert any(not torch.equal(before[k], results[0][1][k]) for k in before)


def test_warm_start_passes_of_a_token_budget_take_the_step_of_one_pass():
    """With `micro_batch_tokens` the warm start accumulates passes of at most that many padded tokens to the whole
    batch's token mean: the weights after 3 steps match one pass a step (float32 sums in another order), records
    the budget, and differ from the starting weights."""
    weights, records = [], []
    for budget in (0, 40):
        spec, tok, codec = tiny_spec_and_codec(
            warmstart_target=1.0, warmstart_max_steps=3, warmstart_eval_every=3, micro_batch_tokens=budget
        )
        policy = tiny_policy(spec, tok)
        start = {k: v.clone() for k, v in policy.state_dict().items()}
        records.append(warm_start(policy, spec, codec, torch.device("cpu")))
        weights.append(policy.state_dict())
    ids, _, _ = collate(
        [r for s in range(20) for r in demonstration_rows(spec.make_env(training=False), s, codec, "concat", 5)],
        codec.pad,
    )
    assert ids.shape[1] < 40  # a pass then holds at most 40 // width rows: several passes a step
    assert [r["micro_batch_tokens"] for r in records] == [0, 40]
    for key, value in weights[0].items():
        torch.testing.assert_close(weights[1][key], value, rtol=1e-4, atol=1e-5)
    assert any(not torch.equal(start[k], weights[1][k]) for k in start)
