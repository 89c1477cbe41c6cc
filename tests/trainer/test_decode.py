"""The static-KV-cache rollout engine (trainer/decode.py) on the CPU: same tokens, masks and turns as the eager decoder."""

import pytest
import torch
from trainer_helpers import tiny_policy, tiny_spec_and_codec

from agentrepro.errors import BadInput
from agentrepro.trainer.decode import StaticDecoder, StaticRows, engine_for
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


@pytest.mark.parametrize("fused", [False, True])
def test_static_engine_logits_match_the_model_forward(fused):
    """The engine's own forward (prefill then one decode step) gives the transformers model's logits; also with its
    decode step through the compiled layer halves (`fused`, torch.compile's CPU kernels here)."""
    spec, tok, _codec = tiny_spec_and_codec()
    policy = tiny_policy(spec, tok, seed=1)
    engine = StaticDecoder(policy, torch.device("cpu"), bf16=False, fused=fused)
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


def test_only_a_trainings_engine_on_cuda_compiles_its_decode_step():
    """The compile (seconds at a job's first rollout) is for a training on CUDA, never the CPU or an evaluation."""
    spec, tok, _codec = tiny_spec_and_codec()
    policy = tiny_policy(spec, tok, seed=1)
    for training in (True, False):
        engine = engine_for("static", policy, torch.device("cpu"), False, training=training)
        assert engine is not None and engine.fused is False


class _Spans(StaticDecoder):
    """A StaticDecoder that records each prefill's (start, end, rows)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.spans: list[tuple[int, int, slice | None]] = []

    def prefill(self, start, end, rows=None):
        self.spans.append((start, end, rows))
        return super().prefill(start, end, rows)


def _first_turn(policy, codec, chunks, share: bool):
    """One greedy turn on StaticRows after `chunks`, sharing the common first tokens or not: (the prefills' spans,
    the generated ids, the attended columns' keys and values)."""
    engine = _Spans(policy, torch.device("cpu"), bf16=False)
    rows = StaticRows(engine, len(chunks), codec.bos, reserve=4)
    rows.append_chunks(chunks, codec.pad, 0)
    rows.shared = rows.shared if share else None
    out = rows.generate([bool(c) for c in chunks], list(range(len(chunks))), codec, Sampler(0.0, None), 4, 0)
    attended = engine.attn.bool()
    return engine.spans, out, *(cache.permute(1, 3, 0, 2, 4)[attended] for cache in (engine.k, engine.v))


def test_the_first_prompts_common_tokens_are_prefilled_once_and_every_row_reads_the_same():
    """First prompts that begin with the same 9 tokens (one of them nothing else, one row without a prompt): those
    tokens are prefilled on one row and copied, the rest prefilled for all rows, and the turn generates the same tokens
    from the same keys and values as prefilling every row whole."""
    spec, tok, codec = tiny_spec_and_codec()
    policy = tiny_policy(spec, tok, seed=2)
    common = torch.randint(6, len(tok), (9,), generator=torch.Generator().manual_seed(0)).tolist()
    chunks = [[*common, 6, 7, 8], common, [], [*common, 9, 10, 11, 12, 13], [5, *common]]
    # the fifth row's prompt does not begin with the others': nothing is shared
    assert _first_turn(policy, codec, chunks, share=True)[0] == [(0, 1 + 14, None)]
    chunks[4] = [*common, 5]
    spans, out, k, v = _first_turn(policy, codec, chunks, share=True)
    whole_spans, whole_out, whole_k, whole_v = _first_turn(policy, codec, chunks, share=False)
    # the first token and the 9 common ones on the widest row (the fourth), then columns 10 to 14 for every row
    assert spans == [(0, 10, slice(3, 4)), (10, 15, None)] and whole_spans == [(0, 15, None)]
    assert out == whole_out and sum(len(gen) for _, gen in out) > 4
    assert torch.allclose(k, whole_k, atol=1e-5) and torch.allclose(v, whole_v, atol=1e-5)


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
