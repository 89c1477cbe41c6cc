"""The PPO-clip update: token-mean over generated tokens only, clipping as the paper writes it, KL k3."""

import pytest
import torch
from trainer_helpers import tiny_policy, tiny_spec_and_codec

from agentrepro.trainer.config import TrainConfig
from agentrepro.trainer.update import TrainBatch, k3_kl, masked_mean, ppo_clip_loss, update


def test_ppo_clip_loss_matches_a_slow_version():
    """Token-mean PPO-clip equals an element-by-element loop over masked tokens."""
    g = torch.Generator().manual_seed(0)
    logp, old, adv = (
        torch.randn(3, 7, generator=g) * 0.3,
        torch.randn(3, 7, generator=g) * 0.3,
        torch.randn(3, 7, generator=g),
    )
    mask = (torch.rand(3, 7, generator=g) > 0.4).float()
    loss, _ = ppo_clip_loss(logp, old, adv, mask, 0.2)
    terms = []
    for i in range(3):
        for j in range(7):
            if mask[i, j]:
                r = float(torch.exp(logp[i, j] - old[i, j]))
                a = float(adv[i, j])
                terms.append(max(-a * r, -a * min(max(r, 0.8), 1.2)))
    assert float(loss) == pytest.approx(sum(terms) / len(terms), rel=1e-5)


def test_kl_k3_is_zero_at_the_reference_and_positive_elsewhere():
    """k3(p, p) = 0 and k3 > 0 when the policies differ."""
    x = torch.randn(10)
    assert torch.allclose(k3_kl(x, x), torch.zeros(10))
    assert bool((k3_kl(x, x + 0.5) > 0).all())
    assert float(masked_mean(torch.ones(4), torch.zeros(4))) == 0.0


def _batch(tok, codec, adv_off_mask: float):
    ids = torch.tensor(
        [
            [codec.bos, codec.obs, 10, 11, codec.act, 6, 7, codec.eos, codec.pad],
            [codec.bos, codec.obs, 12, 13, codec.act, 8, codec.eos, codec.pad, codec.pad],
        ]
    )
    attn = torch.tensor([[1, 1, 1, 1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1, 1, 0, 0]])
    mask = torch.tensor([[0, 0, 0, 0, 0, 1, 1, 1, 0], [0, 0, 0, 0, 0, 1, 1, 0, 0]], dtype=torch.float32)
    adv = torch.where(mask.bool(), torch.tensor(1.0), torch.tensor(adv_off_mask))
    return TrainBatch(ids, attn, mask, adv, None)


def test_observation_and_padding_tokens_never_reach_the_gradient():
    """Changing advantages on observation/padding tokens changes nothing in the updated weights."""
    spec, tok, codec = tiny_spec_and_codec()
    cfg = TrainConfig(lr=1e-2, grad_clip=100.0, entropy_coef=0.0)
    results = []
    for off in (0.0, 1e3):
        policy = tiny_policy(spec, tok)
        opt = torch.optim.AdamW(policy.parameters(), lr=cfg.lr)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
        stats = update(
            policy, opt, sched, _batch(tok, codec, off), cfg, torch.Generator().manual_seed(0), torch.device("cpu")
        )
        results.append((policy.state_dict(), stats))
    (a, sa), (b, sb) = results
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert sa["loss_policy"] == sb["loss_policy"] and sa["grad_norm"] > 0


def test_positive_advantage_raises_the_taken_tokens_probability():
    """One update with advantage +1 on the generated tokens makes them more likely."""
    from agentrepro.trainer.update import token_stats

    spec, tok, codec = tiny_spec_and_codec()
    policy = tiny_policy(spec, tok)
    batch = _batch(tok, codec, 0.0)
    with torch.no_grad():
        before = token_stats(
            policy,
            batch.input_ids,
            batch.attention_mask,
            with_values=False,
            with_entropy=False,
            device=torch.device("cpu"),
            bf16=False,
        )[0]
    opt = torch.optim.AdamW(policy.parameters(), lr=1e-2)
    update(
        policy,
        opt,
        torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0),
        batch,
        TrainConfig(),
        torch.Generator().manual_seed(0),
        torch.device("cpu"),
    )
    with torch.no_grad():
        after = token_stats(
            policy,
            batch.input_ids,
            batch.attention_mask,
            with_values=False,
            with_entropy=False,
            device=torch.device("cpu"),
            bf16=False,
        )[0]
    m = batch.mask.bool()
    assert float(after[m].sum()) > float(before[m].sum())


def test_micro_batches_respect_the_token_budget_and_cover_every_row_once():
    """Rows sorted by length are packed into passes of at most `budget` padded tokens (a longer row alone), each row once."""
    from agentrepro.trainer.update import micro_batches

    lengths = [9, 3, 7, 2, 9, 5]
    attn = torch.zeros(6, 10, dtype=torch.long)
    for r, n in enumerate(lengths):
        attn[r, :n] = 1
    attn[3, 4] = 1  # a row whose attention has a gap: its length is one past its last attended column (5)
    idx = torch.tensor([5, 4, 3, 2, 1, 0])
    passes = micro_batches(attn, idx, 16)
    assert sorted(int(r) for rows, _ in passes for r in rows) == list(range(6))
    for rows, width in passes:
        assert width == max(int(torch.nonzero(attn[r]).max()) + 1 for r in rows.tolist())
        assert len(rows) * width <= 16 or len(rows) == 1
    assert micro_batches(attn, idx, 0) == [(idx, 10)]


@pytest.mark.parametrize("estimator", ["grpo", "ppo"])
def test_micro_batched_update_matches_the_whole_minibatch(estimator):
    """Gradient accumulation over token-budgeted passes gives the one-pass update (weights and statistics)."""
    spec, tok, codec = tiny_spec_and_codec()
    batch = _batch(tok, codec, 0.0)
    batch.advantages = batch.advantages * torch.tensor([[1.0], [-0.5]])
    batch.returns = torch.randn(2, 9, generator=torch.Generator().manual_seed(1))
    out = []
    for budget in (0, 8):
        cfg = TrainConfig(estimator=estimator, lr=1e-2, grad_clip=100.0, entropy_coef=0.01, micro_batch_tokens=budget)
        policy = tiny_policy(spec, tok)
        opt = torch.optim.SGD(policy.parameters(), lr=1.0)  # the weights move by the gradient itself
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
        out.append(
            (
                update(policy, opt, sched, batch, cfg, torch.Generator().manual_seed(0), torch.device("cpu")),
                policy.state_dict(),
            )
        )
    (whole, a), (parts, b) = out
    assert all(torch.allclose(a[k], b[k], atol=1e-5) for k in a)
    assert (estimator == "ppo") == bool(a["value_head.weight"].abs().sum() > 0)  # the value loss reached the head
    assert whole.keys() == parts.keys() and all(whole[k] == pytest.approx(parts[k], rel=1e-5, abs=1e-7) for k in whole)


def test_ppo_on_policy_needs_only_the_values_pass():
    """One epoch of one minibatch: the pre-update pass gives PPO's values without running the LM head, and the update
    with no old log-probs (its own, detached) moves the weights as with the pass's log-probs."""
    from agentrepro.trainer.update import batched_token_stats

    spec, tok, codec = tiny_spec_and_codec()
    batch = _batch(tok, codec, 0.0)
    batch.returns = torch.randn(2, 9, generator=torch.Generator().manual_seed(1))

    def policy_with_values():  # the value head starts at zero; a random one shows its values were computed
        policy = tiny_policy(spec, tok)
        torch.nn.init.normal_(policy.value_head.weight, generator=torch.Generator().manual_seed(2))
        return policy

    policy = policy_with_values()
    kw = {"with_values": True, "device": torch.device("cpu"), "bf16": False, "where": batch.mask}
    old, values = batched_token_stats(policy, batch.input_ids, batch.attention_mask, 8, **kw)
    none, values_only = batched_token_stats(policy, batch.input_ids, batch.attention_mask, 8, with_logprobs=False, **kw)
    assert none is None and values is not None and values_only is not None
    assert torch.equal(values, values_only) and values[:, 1:].abs().sum() > 0
    cfg = TrainConfig(estimator="ppo", lr=1e-2, grad_clip=100.0, entropy_coef=0.01)
    weights = []
    for old_logp in (old, None):
        policy = policy_with_values()
        opt = torch.optim.SGD(policy.parameters(), lr=1.0)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
        b = TrainBatch(
            batch.input_ids, batch.attention_mask, batch.mask, batch.advantages, old_logp, None, batch.returns
        )
        update(policy, opt, sched, b, cfg, torch.Generator().manual_seed(0), torch.device("cpu"))
        weights.append(policy.state_dict())
    moved = policy_with_values().state_dict()
    assert any(not torch.allclose(weights[0][k], moved[k]) for k in moved)
    assert all(torch.allclose(weights[0][k], weights[1][k], atol=1e-6) for k in moved)
