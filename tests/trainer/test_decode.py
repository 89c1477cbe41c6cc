"""The static-KV-cache rollout engine (trainer/decode.py) on the CPU: same tokens, masks and turns as the eager decoder."""

import pytest
import torch
from trainer_helpers import tiny_policy, tiny_spec_and_codec

from agentrepro.errors import BadInput
from agentrepro.trainer.decode import StaticDecoder
from agentrepro.trainer.rollout import Sampler, rollout

SEEDS = [10001, 10001, 10002, 10002, 10003, 10003]


def _both(mode, sampler_of, max_new=5, max_turns=4, n_kv_groups=False):
    spec, tok, codec = tiny_spec_and_codec(mode=mode)
    policy = tiny_policy(spec, tok, seed=3)
    out = []
    for engine in (None, StaticDecoder(policy, torch.device("cpu"), bf16=True)):
        envs = [spec.make_env(training=False) for _ in SEEDS]
        out.append(
            rollout(
                policy,
                envs,
                SEEDS,
                [i // 2 for i in range(len(SEEDS))],
                codec,
                sampler_of(),
                mode=mode,
                max_turns=max_turns,
                max_new_tokens=max_new,
                device=torch.device("cpu"),
                engine=engine,
            )
        )
    return out


def _same(a, b):
    for name in ("input_ids", "attention_mask", "loss_mask", "turn_index", "row_traj"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert [(t.row, t.start, t.end, t.response, t.reward, t.done) for t in a.turns] == [
        (t.row, t.start, t.end, t.response, t.reward, t.done) for t in b.turns
    ]


@pytest.mark.parametrize("mode", ["concat", "non_concat"])
def test_static_engine_plays_the_same_rollout_as_the_eager_decoder(mode):
    """Seeded sampling on the CPU: identical token rows, masks, turn indices and per-turn results in both modes."""
    eager, static = _both(mode, lambda: Sampler(1.0, torch.Generator().manual_seed(7)))
    _same(eager, static)
    assert eager.generated_tokens() > len(SEEDS)  # several turns were played


def test_static_engine_greedy_with_early_stops_and_a_grown_cache():
    """Greedy decoding, more new tokens than the cache was first sized for: the same rows (the cache grows, turns end early)."""
    eager, static = _both("concat", lambda: Sampler(0.0, None), max_new=9, max_turns=6)
    _same(eager, static)


def test_static_engine_logits_match_the_model_forward():
    """The engine's own forward (prefill then one decode step) gives the transformers model's logits."""
    spec, tok, _codec = tiny_spec_and_codec()
    policy = tiny_policy(spec, tok, seed=1)
    engine = StaticDecoder(policy, torch.device("cpu"), bf16=False)
    ids = torch.randint(6, len(tok), (3, 7))
    attn = torch.ones_like(ids)
    attn[1, 2:4] = 0  # padding inside a row
    engine.allocate(3, 16)
    engine.ids[:, :7], engine.attn[:, :7] = ids, attn
    first = engine.prefill(0, 6)
    second = engine.decode(6, ids[:, 6], attn[:, :6].sum(-1))
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        logits, _, _ = policy(ids, attn, pos)
    assert torch.allclose(first, logits[:, 5], atol=1e-5) and torch.allclose(second, logits[:, 6], atol=1e-5)


def test_static_engine_refuses_an_unsupported_model():
    """A GPT-2 policy is refused with one line naming train.rollout_engine."""
    from trainer_helpers import tiny_config

    from agentrepro.trainer.context import RunSpec
    from agentrepro.trainer.policy import build_policy

    config = tiny_config()
    config["model"] = {"name": "tiny-gpt2", "config": {"d_model": 16, "n_layers": 1, "n_heads": 2}}
    spec = RunSpec.from_config(config)
    tok = spec.build_tokenizer()
    with pytest.raises(BadInput, match="rollout_engine"):
        StaticDecoder(build_policy(spec.model, tok, 0), torch.device("cpu"), bf16=False)
