"""The builtin trainer on a local chat model: the prompts it trains on are the served evaluation's messages rendered by
the tokenizer's chat template, and only the generated tokens are trained (token invariants of the chat path)."""

import asyncio

import pytest
import torch
from trainer_helpers import chat_spec_and_codec, tiny_policy

from agentrepro.serving.client import Reply
from agentrepro.serving.engine import play_episode
from agentrepro.trainer.decode import StaticDecoder
from agentrepro.trainer.dialogue import prompt_record
from agentrepro.trainer.rollout import Sampler, rollout
from agentrepro.trainer.warmstart import demonstration_rows

SEEDS = [10001, 10001, 10002, 10003]
TURNS, NEW = 3, 6


class ForcedSampler:
    """Ignores the logits: trajectory t, turn k, position p gets table[t][k][p] (ordinary tokens, sometimes <|im_end|>)."""

    def __init__(self, codec, seed=0):
        g = torch.Generator().manual_seed(seed)
        tok = codec.tokenizer
        ordinary = torch.tensor([i for i in range(len(tok)) if i not in set(tok.all_special_ids)])
        self.table = ordinary[torch.randint(len(ordinary), (len(SEEDS), TURNS, NEW), generator=g)]
        stop = torch.rand(self.table.shape, generator=g) < 0.2
        self.table[stop] = codec.eos

    def __call__(self, logits, trajs, turn, position):
        return self.table[trajs, turn, position].to(logits.device)

    def generated(self, traj, turn, eos):
        """What turn `turn` of trajectory `traj` generates: the table's row up to and including the first <eos>."""
        row = self.table[traj, turn].tolist()
        return row[: row.index(eos) + 1] if eos in row else row


def _play(model_dir, mode, sampler=None, engine=False, reuse_history=True):
    spec, tok, codec = chat_spec_and_codec(model_dir, mode=mode)
    policy = tiny_policy(spec, tok)
    envs = [spec.make_env(training=False) for _ in SEEDS]
    sampler = sampler or ForcedSampler(codec)
    ro = rollout(
        policy,
        envs,
        SEEDS,
        [i // 2 for i in range(len(SEEDS))],
        codec,
        sampler,
        mode=mode,
        max_turns=TURNS,
        max_new_tokens=NEW,
        device=torch.device("cpu"),
        engine=StaticDecoder(policy, torch.device("cpu"), False, graphs=False) if engine else None,
        reuse_history=reuse_history,
    )
    return ro, spec, tok, codec


def served_messages(spec, mode, seed, responses):
    """The messages the served evaluation engine sends for task `seed` when the model answers `responses` in turn."""
    sent = []

    async def generate(messages, turn):
        sent.append(messages)
        return Reply(text=responses[turn], tokens=1, finish_reason="stop")

    asyncio.run(
        play_episode(spec.make_env(training=False), seed, mode=mode, max_turns=len(responses), generate=generate)
    )
    return sent


def template_tokens(tok, messages):
    """The chat template's tokenisation of `messages` with the generation prompt (as a chat server renders a request)."""
    return tok(tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False), add_special_tokens=False)[
        "input_ids"
    ]


def prompt_ids(ro, turn):
    """The attended tokens of a turn's row before its generated tokens: what the policy was fed."""
    return ro.input_ids[turn.row, : turn.start][ro.attention_mask[turn.row, : turn.start].bool()].tolist()


@pytest.mark.parametrize("mode", ["concat", "non_concat"])
def test_prompts_at_turns_1_and_2_are_the_template_of_the_served_messages(tiny_chat_model, mode):
    """For given seeds, the tokens fed at turns 0, 1 and 2 equal the chat-template tokens of the messages the served engine
    sends (same system prompt, same user text, same prior turns); concat prompts carry the earlier assistant turns."""
    ro, spec, tok, _codec = _play(tiny_chat_model, mode)
    start = tok.convert_tokens_to_ids("<|im_start|>")
    checked = 0
    for traj, seed in enumerate(SEEDS):
        turns = ro.traj_turns(traj)
        sent = served_messages(spec, mode, seed, [t.response for t in turns])
        assert len(sent) == len(turns) == TURNS  # random answers never finish FrozenLake in 3 turns
        for t, messages in zip(turns, sent):
            assert prompt_ids(ro, t) == template_tokens(tok, messages)
            assert messages[0] == {"role": "system", "content": spec.make_env(training=False).system_prompt()}
            history = 2 * t.turn if mode == "concat" else 0  # earlier (assistant, user) pairs in the prompt
            assert prompt_ids(ro, t).count(start) == 3 + history
            assert sum(m["role"] == "assistant" for m in messages) == history // 2
            checked += t.turn in (1, 2)
    assert checked == 2 * len(SEEDS)


@pytest.mark.parametrize("mode", ["concat", "non_concat"])
def test_only_the_generated_tokens_are_trained(tiny_chat_model, mode):
    """loss_mask is 1 exactly on each turn's generated tokens, which are exactly what was sampled; the template's tokens
    (system, user, earlier assistant turns, generation prompt) and padding are never trained."""
    _spec, tok, codec = chat_spec_and_codec(tiny_chat_model, mode=mode)
    forced = ForcedSampler(codec, seed=1)
    ro, *_ = _play(tiny_chat_model, mode, forced)
    assert ro.per_turn_rows and ro.input_ids.shape[0] == len(ro.turns)
    expected = torch.zeros_like(ro.loss_mask)
    for t in ro.turns:
        expected[t.row, t.start : t.end] = 1
        generated = forced.generated(t.traj, t.turn, codec.eos)
        assert ro.input_ids[t.row, t.start : t.end].tolist() == generated
        body = generated[:-1] if generated[-1] == codec.eos else generated
        assert t.response == tok.decode(body, skip_special_tokens=True)
    assert torch.equal(ro.loss_mask, expected)
    assert not bool((ro.loss_mask.bool() & ~ro.attention_mask.bool()).any())
    assert any(codec.eos in forced.generated(t.traj, t.turn, codec.eos) for t in ro.turns)  # <|im_end|> ends some turns


def test_static_engine_plays_the_same_chat_rollout(tiny_chat_model):
    """The static-KV-cache engine and the eager rows give the same chat rollout (tokens, masks, turns) when sampling."""
    a, *_ = _play(tiny_chat_model, "concat", Sampler(1.0, torch.Generator().manual_seed(4)))
    b, *_ = _play(tiny_chat_model, "concat", Sampler(1.0, torch.Generator().manual_seed(4)), engine=True)
    assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.loss_mask, b.loss_mask)
    assert a.step_rows() == b.step_rows()


def _turn_rows(ro):
    """Per (traj, turn): the attended ids of its row, the trained ones among them, and the generated span's ids."""
    out = {}
    for t in ro.turns:
        keep = ro.attention_mask[t.row].bool()
        out[t.traj, t.turn] = (
            ro.input_ids[t.row][keep].tolist(),
            ro.loss_mask[t.row][keep].tolist(),
            ro.input_ids[t.row, t.start : t.end].tolist(),
            t.response,
        )
    return out


@pytest.mark.parametrize("engine", [False, True])
def test_concat_history_kept_in_the_row_gives_the_rollout_of_fresh_prompts(tiny_chat_model, engine):
    """A concat chat trajectory that keeps its row across turns (appending what each prompt adds, or starting the rows
    afresh where an earlier answer re-tokenizes differently) trains on the same rows, samples the same tokens, and ends in the same
    turns as prefilling every prompt afresh; both ways of extending the row occur."""
    sampler = lambda: Sampler(1.0, torch.Generator().manual_seed(7))  # noqa: E731
    kept, *_ = _play(tiny_chat_model, "concat", sampler(), engine=engine)
    fresh, *_ = _play(tiny_chat_model, "concat", sampler(), engine=engine, reuse_history=False)
    assert _turn_rows(kept) == _turn_rows(fresh)
    assert kept.step_rows() == fresh.step_rows()
    assert kept.per_turn_rows and len(kept.turns) == kept.input_ids.shape[0] == len(SEEDS) * TURNS
    history = kept.extra["history"]
    assert history["extended"] + history["rerendered"] == len(SEEDS) * (TURNS - 1)
    forced, *_ = _play(tiny_chat_model, "concat", ForcedSampler(_play(tiny_chat_model, "concat")[3]), engine=engine)
    assert forced.extra["history"]["rerendered"] > 0  # random tokens that re-tokenize otherwise: the rows restart
    assert 0 < forced.extra["history"]["restarts"] <= forced.extra["history"]["rerendered"]
    assert history["extended"] > 0 or forced.extra["history"]["extended"] > 0


@pytest.mark.parametrize("mode", ["concat", "non_concat"])
def test_warm_start_demonstrations_use_the_chat_prompts(tiny_chat_model, mode):
    """A chat warm-start row per turn: the template's tokens of the served messages (untrained), then the demonstrated
    answer and <|im_end|> (trained)."""
    spec, tok, codec = chat_spec_and_codec(tiny_chat_model, mode=mode)
    env = spec.make_env(training=False)
    rows = demonstration_rows(env, 10002, codec, mode, 1)
    path = spec.make_env(training=False)
    path.reset(10002)
    solution = path.solve()
    responses = [env.format_actions([a]) for a in solution]
    sent = served_messages(spec, mode, 10002, responses)
    assert len(rows) == len(solution) == len(sent) > 1
    for (ids, mask), messages, response in zip(rows, sent, responses):
        prompt = template_tokens(tok, messages)
        target = tok(response, add_special_tokens=False)["input_ids"] + [codec.eos]
        assert ids == prompt + target
        assert mask == [0] * len(prompt) + [1] * len(target)


def test_prompt_record_names_the_chat_template(tiny_chat_model):
    """The provenance record of a chat model names its template's sha256; the tiny policy's says word level."""
    import hashlib

    from trainer_helpers import tiny_spec_and_codec

    _spec, tok, codec = chat_spec_and_codec(tiny_chat_model)
    record = prompt_record(codec, "concat")
    assert record == {
        "kind": "chat_template",
        "mode": "concat",
        "rows": "one per turn",
        "chat_template_sha256": hashlib.sha256(tok.chat_template.encode()).hexdigest(),
    }
    _, _, words = tiny_spec_and_codec()
    assert prompt_record(words, "concat") == {
        "kind": "word_level",
        "mode": "concat",
        "rows": "one per trajectory",
        "chat_template_sha256": None,
    }


def test_ppo_on_a_concat_chat_rollout_uses_turn_level_gae(tiny_chat_model):
    """A concat chat rollout has one row per turn, so PPO's targets are the turn-level GAE of its rows, not token GAE."""
    from agentrepro.trainer.credit import ppo_targets, training_targets

    ro, _spec, *_ = _play(tiny_chat_model, "concat")
    cfg = chat_spec_and_codec(tiny_chat_model, mode="concat", estimator="ppo")[0].train
    for t in ro.turns:
        t.reward = float(t.turn == 2 and t.traj % 2 == 0)  # a reward at the end of some trajectories
    values = torch.rand(ro.input_ids.shape, generator=torch.Generator().manual_seed(0))
    targets = training_targets(ro, values, cfg)
    turn_level, token_level = ppo_targets(ro, values, cfg, "non_concat"), ppo_targets(ro, values, cfg, "concat")
    assert torch.equal(targets.advantages, turn_level[0]) and torch.equal(targets.returns, turn_level[1])
    assert not torch.equal(turn_level[0], token_level[0])


def test_a_template_that_refuses_a_system_message_is_one_clear_line(tiny_chat_model):
    """A chat template that cannot render the served messages (no system role) is refused naming model.path."""
    from agentrepro.errors import BadInput

    spec, tok, _ = chat_spec_and_codec(tiny_chat_model)
    tok.chat_template = "{% if messages[0]['role'] == 'system' %}{{ raise_exception('no system role') }}{% endif %}x"
    with pytest.raises(BadInput, match=r"model.path") as caught:
        spec.make_codec(tok)
    assert "no system role" in str(caught.value)
