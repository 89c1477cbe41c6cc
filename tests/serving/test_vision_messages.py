"""Image observations reach the server as VAGEN's served evaluator sends them: text parts + PNG image_url parts."""

from __future__ import annotations

import asyncio
import base64
import io
import json

import numpy as np
import pytest
from helpers import FIXTURES, require_vision
from PIL import Image

from agentrepro.environments import make_env
from agentrepro.serving.chat import Conversation, content_parts
from agentrepro.serving.client import Reply
from agentrepro.serving.engine import play_episode

REFERENCE = FIXTURES / "vision" / "reference"
ROWS = [json.loads(line) for line in (REFERENCE / "observations.jsonl").read_text(encoding="utf-8").splitlines()]
EPISODES = [
    [r for r in ROWS if r["episode"] == e["episode"] and r["seed"] == e["seed"]]
    for e in ROWS
    if e["turn"] == 0 and e["episode"] != "reset"
]


def decode(part: dict) -> np.ndarray:
    assert part["type"] == "image_url" and set(part) == {"type", "image_url"}
    header, payload = part["image_url"]["url"].split(",", 1)
    assert header == "data:image/png;base64"
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(payload))).convert("RGB"))


def reference_pixels(row: dict) -> np.ndarray:
    return np.asarray(Image.open(REFERENCE / row["png"]).convert("RGB"))


def expected_user(row: dict) -> list[dict | str]:
    """The reference observation as VAGEN's OpenAI adapter splits it (text, picture, text), pictures compared separately."""
    before, after = row["obs_str"].split("<image>")
    return [{"type": "text", "text": before}, "IMAGE", {"type": "text", "text": after}]


def shape(content: list[dict]) -> list:
    return ["IMAGE" if p["type"] == "image_url" else p for p in content]


@pytest.mark.parametrize("episode", EPISODES, ids=lambda e: e[0]["episode"])
@pytest.mark.parametrize("mode", ["concat", "non_concat"])
def test_sent_messages_are_the_reference_vision_prompt(episode, mode):
    """Every request of a replayed episode: system text part, user text parts equal to VAGEN's vision obs_str, pictures decoding to the reference pixels."""
    require_vision()
    first = episode[0]
    responses = [r["response"] for r in episode[1:]]
    sent = []

    async def generate(messages, turn):
        sent.append(messages)
        return Reply(text=responses[turn], tokens=1, finish_reason="stop")

    env = make_env(first["env"], first["config"])
    asyncio.run(play_episode(env, first["seed"], mode=mode, max_turns=len(responses), generate=generate))
    assert len(sent) == len(responses)
    for turn, messages in enumerate(sent):
        assert messages[0] == {"role": "system", "content": [{"type": "text", "text": first["system_prompt"]}]}
        users = [m for m in messages if m["role"] == "user"]
        shown = episode[: turn + 1] if mode == "concat" else episode[turn : turn + 1]
        assert len(users) == len(shown)
        for message, row in zip(users, shown):
            assert shape(message["content"]) == expected_user(row)
            assert np.array_equal(decode(message["content"][1]), reference_pixels(row))
        if mode == "concat":
            assistants = [m["content"] for m in messages if m["role"] == "assistant"]
            assert assistants == [[{"type": "text", "text": r["response"]}] for r in episode[1 : turn + 1]]


def test_text_mode_messages_stay_plain_strings():
    """Text observations are still sent as plain string contents (the text fixtures' messages are unchanged)."""
    chat = Conversation("sys", "concat")
    chat.observe("grid")
    assert chat.messages() == [{"role": "system", "content": "sys"}, {"role": "user", "content": "grid"}]


def test_placeholder_and_picture_counts_must_agree():
    """A picture without a placeholder (or the reverse) is refused, and whitespace-only text is dropped as the reference does."""
    pixels = np.zeros((2, 2, 3), dtype=np.uint8)
    with pytest.raises(ValueError, match="placeholder"):
        content_parts("no placeholder", [pixels])
    with pytest.raises(ValueError, match="placeholder"):
        content_parts("<image>", [])
    assert [p["type"] for p in content_parts(" \n<image>\n", [pixels])] == ["image_url"]
    with pytest.raises(ValueError, match="parts=True"):
        Conversation("s", "concat").observe("<image>", [pixels])


class SeeingClient:
    """An oracle that knows the task only from the first picture it is sent (the texts are the same for every task)."""

    def __init__(self, env_name: str, params: dict, panel: list[dict]):
        self.env_name, self.params = env_name, params
        self.pictures = {}
        for task in panel:
            env = make_env(env_name, params)
            env.reset(int(task["seed"]))
            self.pictures[env.render_image().tobytes()] = task

    async def chat(self, messages, *, temperature, top_p, max_tokens, seed):
        first_user = next(m for m in messages if m["role"] == "user")
        task = self.pictures[decode(first_user["content"][1]).tobytes()]
        env = make_env(self.env_name, self.params)
        env.reset(int(task["seed"]))
        step = env.params["max_actions_per_step"]
        turn = sum(m["role"] == "assistant" for m in messages)
        plan = env.solve()[turn * step : (turn + 1) * step]
        return Reply(text=env.format_actions(plan), tokens=1, finish_reason="stop")


@pytest.mark.parametrize("env_name", ["sokoban", "frozenlake"])
def test_a_model_that_sees_only_the_pictures_solves_the_vision_panel(env_name):
    """Through evaluate_panel, an oracle reading only the image parts solves every task; rows carry the vision panel's hashes and pass the outcome checks."""
    require_vision()
    from agentrepro import outcomes
    from agentrepro.environments import task_panel
    from agentrepro.serving.engine import Sampling, evaluate_panel

    params = {"render_mode": "vision", **({"min_solution_steps": [1, 5]} if env_name == "sokoban" else {})}
    panel = task_panel(env_name, params, range(10001, 10005))
    identity = {"study": "s", "method": "m", "seed": 0}
    client = SeeingClient(env_name, params, panel)
    assert len(client.pictures) == len(panel)  # every task's first picture is distinct
    rows = asyncio.run(
        evaluate_panel(
            lambda: make_env(env_name, params),
            panel,
            identity=identity,
            step=0,
            client=client,
            sampling=Sampling(),
            mode="concat",
            max_turns=5,
            episodes=1,
            concurrency=2,
            category=env_name,
        )
    )
    outcomes.check_rows(
        rows, config={**identity, "eval": {"task_panel": panel, "episodes_per_task": 1}}, step=0, source="test"
    )
    assert all(r["success"] for r in rows) and len(rows) == len(panel)
