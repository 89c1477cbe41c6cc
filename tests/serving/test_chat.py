"""The messages the engine sends equal the reference agent loop's, for every game and prompt format."""

from __future__ import annotations

import asyncio
import json

import pytest
from helpers import FIXTURES

from agentrepro.environments import make_env
from agentrepro.serving.chat import Conversation
from agentrepro.serving.client import Reply
from agentrepro.serving.engine import play_episode


def load(name: str) -> list[dict]:
    with open(FIXTURES / "vagen" / name, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


SYSTEM = load("system_prompts.jsonl")
CASES = [(r["env"], r["params"]["prompt_format"], r["params"]["use_example_in_sys_prompt"]) for r in SYSTEM]


def reference_replay(env_name: str) -> dict:
    """A solution replay whose first turn executed actions and did not end the episode."""
    return next(
        r
        for r in load(f"{env_name}_replays.jsonl")
        if r["kind"] == "bfs_solution" and r["turns"][0]["executed_actions"] and not r["turns"][0]["done"]
    )


def sent_messages(env_name: str, params: dict, seed: int, responses: list[str], mode: str) -> list[list[dict]]:
    """Every request's messages when the engine plays `responses` on task `seed`."""
    sent = []

    async def generate(messages, turn):
        sent.append(messages)
        return Reply(text=responses[turn], tokens=1, finish_reason="stop")

    asyncio.run(play_episode(make_env(env_name, params), seed, mode=mode, max_turns=len(responses), generate=generate))
    return sent


@pytest.mark.parametrize("env_name,fmt,example", CASES, ids=[f"{e}-{f}-{'ex' if x else 'noex'}" for e, f, x in CASES])
@pytest.mark.parametrize("mode", ["concat", "non_concat"])
def test_messages_equal_the_reference(env_name, fmt, example, mode):
    """System prompt, first user message and a follow-up turn are the reference's, byte for byte, in both modes."""
    reference = next(
        r
        for r in SYSTEM
        if (r["env"], r["params"]["prompt_format"], r["params"]["use_example_in_sys_prompt"])
        == (env_name, fmt, example)
    )
    replay = reference_replay(env_name)
    params = {k: v for k, v in replay["params"].items() if k != "env"}
    params.update(reference["params"])
    env = make_env(env_name, params)
    first = env.format_actions(replay["turns"][0]["executed_actions"])  # a well-formed response in this format
    sent = sent_messages(env_name, params, replay["seed"], [first, first], mode)
    system = {"role": "system", "content": reference["system_prompt"]}
    user1 = {"role": "user", "content": replay["initial"]["obs_str"]}
    user2 = {"role": "user", "content": replay["turns"][0]["obs_str"]}
    assert sent[0] == [system, user1]
    expected = [system, user1, {"role": "assistant", "content": first}, user2] if mode == "concat" else [system, user2]
    assert sent[1] == expected


def test_concat_history_grows_and_non_concat_does_not():
    """Turn k of concat sends 2k messages after the system prompt's; non_concat always sends two."""
    for mode, lengths in (("concat", [2, 4, 6]), ("non_concat", [2, 2, 2])):
        sent = sent_messages("frozenlake", {}, 10001, ["no tags"] * 3, mode)
        assert [len(m) for m in sent] == lengths


def test_conversation_refuses_unknown_mode_and_missing_observation():
    """A mode other than concat/non_concat, or a request without a fresh observation, is an error."""
    with pytest.raises(ValueError, match="concat"):
        Conversation("s", "whole")
    chat = Conversation("s", "concat")
    chat.observe("o")
    chat.respond("r")
    with pytest.raises(RuntimeError):
        chat.messages()
