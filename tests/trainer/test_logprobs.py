"""The chunked, generated-tokens-only log-probs and entropies equal the full-vocabulary computation: values,
gradients, and a whole update (loss, statistics, weights)."""

import pytest
import torch
import torch.nn.functional as F
from trainer_helpers import tiny_policy, tiny_spec_and_codec, tiny_train_batch

import agentrepro.trainer.logprobs as logprobs
import agentrepro.trainer.update as update_mod
from agentrepro.errors import BadInput
from agentrepro.trainer.config import TrainConfig
from agentrepro.trainer.policy import autocast, positions


def full_vocab_stats(hidden, weight, targets):
    """The straightforward reference: float32 log-softmax over the whole vocabulary, gather, entropy sum."""
    logp_all = torch.log_softmax(F.linear(hidden, weight).float(), dim=-1)
    return logp_all.gather(-1, targets[:, None]).squeeze(-1), -(logp_all.exp() * logp_all).sum(-1)


def _grads(fn, hidden, weight, targets, coef):
    h, w = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
    lp, ent = fn(h, w, targets)
    ((coef[0] * lp).sum() + (coef[1] * ent).sum()).backward()
    return lp.detach(), ent.detach(), h.grad, w.grad


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_chunked_head_logprobs_equal_the_full_vocabulary_values_and_gradients(monkeypatch, dtype):
    """Log-probs, entropies and their gradients (hidden states, head weight) over chunks of 3 tokens equal the
    full-vocabulary ones, in float32 and under bf16 autocast."""
    g = torch.Generator().manual_seed(0)
    n, d, vocab = 11, 8, 37
    hidden, weight = torch.randn(n, d, generator=g), torch.randn(vocab, d, generator=g)
    targets = torch.randint(0, vocab, (n,), generator=g)
    coef = torch.randn(2, n, generator=g)
    monkeypatch.setattr(logprobs, "CHUNK_ELEMENTS", 3 * vocab)
    chunked = lambda h, w, t: logprobs.head_logprobs(h, w, t, with_entropy=True)  # noqa: E731
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
        ref = _grads(full_vocab_stats, hidden, weight, targets, coef)
        new = _grads(chunked, hidden, weight, targets, coef)
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 2e-2, "atol": 2e-2}
    for a, b in zip(ref, new):
        assert a.shape == b.shape and torch.allclose(a.float(), b.float(), **tol), (a - b).abs().max()
    assert float(new[3].abs().sum()) > 0


def reference_token_stats(policy, input_ids, attention_mask, *, with_values, with_entropy, device, bf16, where=None):
    """The obvious log-prob path: full logits, float32 log-softmax over every column."""
    ids, attn = input_ids.to(device), attention_mask.to(device)
    with autocast(device, bf16):
        logits, values, _ = policy(ids, attn, positions(attn), with_values=with_values)
    logp_all = torch.log_softmax(logits[:, :-1].float(), dim=-1)
    logp = torch.zeros(ids.shape, device=device)
    logp[:, 1:] = logp_all.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    entropy = torch.zeros(ids.shape, device=device)
    entropy[:, 1:] = -(logp_all.exp() * logp_all).sum(-1)
    vals = None
    if with_values:
        vals = torch.zeros(ids.shape, device=device)
        vals[:, 1:] = values[:, :-1]
    return logp, entropy if with_entropy else None, vals


def test_token_stats_on_the_loss_mask_equal_the_full_vocabulary_ones(monkeypatch):
    """token_stats with `where` gives the full-vocabulary log-probs and entropies on the masked tokens, 0 elsewhere."""
    monkeypatch.setattr(logprobs, "CHUNK_ELEMENTS", 1)  # one token a chunk
    spec, tok, codec = tiny_spec_and_codec()
    policy, batch, cpu = tiny_policy(spec, tok), tiny_train_batch(codec), torch.device("cpu")
    kw = {"with_values": True, "with_entropy": True, "device": cpu, "bf16": False}
    with torch.no_grad():
        ref = reference_token_stats(policy, batch.input_ids, batch.attention_mask, **kw)
        new = update_mod.token_stats(policy, batch.input_ids, batch.attention_mask, where=batch.mask, **kw)
        every = update_mod.token_stats(policy, batch.input_ids, batch.attention_mask, **kw)
    m = batch.mask.bool()
    for a, b, c in zip(ref, new, every):
        assert torch.allclose(a[m], b[m], atol=1e-6) and torch.allclose(a[:, 1:], c[:, 1:], atol=1e-6)
    assert torch.equal(new[0][~m], torch.zeros(int((~m).sum())))
    assert torch.allclose(ref[2], new[2])  # values at every column


@pytest.mark.parametrize("estimator, budget", [("grpo", 0), ("ppo", 8)])
def test_update_equals_the_full_vocabulary_update(monkeypatch, estimator, budget):
    """A PPO-clip update with entropy bonus, KL and (PPO) value loss moves every weight as the full-vocabulary
    path does, and reports the same loss statistics."""
    monkeypatch.setattr(logprobs, "CHUNK_ELEMENTS", 2 * 17)
    spec, tok, codec = tiny_spec_and_codec()
    batch = tiny_train_batch(codec)
    cfg = TrainConfig(
        estimator=estimator, lr=1e-2, grad_clip=100.0, entropy_coef=0.05, kl_coef=0.1, micro_batch_tokens=budget
    )
    out = []
    for stats_fn in (reference_token_stats, update_mod.token_stats):
        monkeypatch.setattr(update_mod, "token_stats", stats_fn)
        policy = tiny_policy(spec, tok)
        opt = torch.optim.SGD(policy.parameters(), lr=1.0)  # the weights move by the gradient itself
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
        before = {k: v.clone() for k, v in policy.state_dict().items()}
        stats = update_mod.update(policy, opt, sched, batch, cfg, torch.Generator().manual_seed(0), torch.device("cpu"))
        out.append((stats, {k: v - before[k] for k, v in policy.state_dict().items()}))
    (ref_stats, ref_step), (new_stats, new_step) = out
    assert all(torch.allclose(ref_step[k], new_step[k], rtol=1e-4, atol=1e-6) for k in ref_step)
    assert float(ref_step["lm.model.embed_tokens.weight"].abs().sum()) > 0
    assert ref_stats.keys() == new_stats.keys() and {"kl", "entropy"} <= ref_stats.keys()
    assert all(new_stats[k] == pytest.approx(ref_stats[k], rel=1e-5, abs=1e-7) for k in ref_stats)


def test_a_model_with_soft_capped_logits_is_refused():
    """A model whose logits are not head(last hidden state) (Gemma 2's soft-capping) is refused, naming the field."""
    from transformers import Gemma2Config, Gemma2ForCausalLM

    from agentrepro.trainer.policy import Policy, check_plain_head

    cfg = Gemma2Config(
        vocab_size=32,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=8,
        final_logit_softcapping=0.5,
    )
    torch.manual_seed(0)
    with pytest.raises(BadInput, match=r"model.path: .*soft-capping"):
        check_plain_head(Policy(Gemma2ForCausalLM(cfg), 16), path="/models/g", where="model.path")
    spec, tok, _ = tiny_spec_and_codec()
    check_plain_head(tiny_policy(spec, tok), path=None, where="model.name")  # the tiny Qwen2 passes


def test_no_selected_tokens_gives_empty_log_probs_and_a_zero_gradient():
    """A pass without generated tokens (an observation-only micro-batch) yields no log-probs and a zero head gradient."""
    h, w = torch.randn(0, 4, requires_grad=True), torch.randn(9, 4, requires_grad=True)
    lp, ent = logprobs.head_logprobs(h, w, torch.zeros(0, dtype=torch.long), with_entropy=True)
    (lp.sum() + ent.sum()).backward()
    assert lp.shape == (0,) and h.grad.shape == (0, 4) and torch.equal(w.grad, torch.zeros(9, 4))
