"""Many episodes in flight against one chat server; outcome rows exactly as the builtin evaluator writes them.

`play_episode` is one episode of the reference's agent loop (serving/chat.py): reset, then per turn send
the messages, step the environment with the response (parsed by the environment's own parser), stop when
the episode is done, succeeded, or reached `max_turns`. `evaluate_panel` plays every task of the panel
`episodes` times with at most `concurrency` episodes in flight (asyncio; the server does the batching)
and returns rows built by `backends.outcomes.row`, the builtin evaluator's row builder, with the task
hashes of the frozen panel, checked (`outcomes.frozen_panel`) before anything is played.

The environment interface is the harness's generic one (`make_env() -> Env` with `reset`, `step`,
`system_prompt`, and `image_observations`/`render_image` for pictures, sent as image parts: chat.py);
nothing here knows a game.

Seeds: every request carries a seed derived from (`sample_seed`, run seed, step, episode, task index, turn)
through numpy's SeedSequence, so a server that honours per-request seeds (SGLang with
`--enable-deterministic-inference`) samples the same responses again. `transformers serve` sets one
global torch generator from the seed when it reads a request: with several requests in flight another
request can reseed it before this one samples, so its sampled outcomes are reproducible only with
`concurrency` 1 (greedy decoding, temperature 0, is reproducible at any concurrency). `deterministic`
in the provenance (`servers.determinism`) records which case a run was.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from agentrepro import outcomes
from agentrepro.environments.base import Env
from agentrepro.serving.chat import Conversation
from agentrepro.serving.client import ChatClient, Reply

Generate = Callable[[list[dict[str, Any]], int], Awaitable[Reply]]


@dataclass(frozen=True)
class Sampling:
    """What every request sends: temperature (0 = greedy), top_p, max_tokens per turn, and the seed base."""

    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 256
    sample_seed: int = 0

    def seed(self, run_seed: int, step: int, episode: int, task: int, turn: int) -> int:
        """The request seed of one turn (31 bits: every server accepts it)."""
        state = np.random.SeedSequence([self.sample_seed, run_seed, step, episode, task, turn]).generate_state(1)[0]
        return int(state) & 0x7FFFFFFF


@dataclass(frozen=True)
class Episode:
    success: bool
    reward: float
    turns: int
    tokens: int


async def play_episode(env: Env, seed: int, *, mode: str, max_turns: int, generate: Generate) -> Episode:
    """One episode of task `seed`; `generate(messages, turn)` returns the model's reply for turn `turn`."""
    observation, _ = env.reset(seed)
    vision = env.image_observations()
    chat = Conversation.opening(env.system_prompt(), mode, observation, [env.render_image()] if vision else ())
    success, reward, tokens, turns = False, 0.0, 0, 0
    while turns < max_turns:
        reply = await generate(chat.messages(), turns)
        chat.respond(reply.text)
        observation, turn_reward, done, info = env.step(reply.text)
        turns += 1
        reward += turn_reward
        tokens += reply.tokens
        success = success or bool(info.get("success"))
        if done or success:
            break
        chat.observe(observation, [env.render_image()] if vision else ())
    return Episode(success=success, reward=reward, turns=turns, tokens=tokens)


async def evaluate_panel(
    make_env: Callable[[], Env],
    panel: list[dict[str, Any]],
    *,
    identity: dict[str, Any],
    step: int,
    client: ChatClient,
    sampling: Sampling,
    mode: str,
    max_turns: int,
    episodes: int = 1,
    concurrency: int = 8,
    category: str,
    positions: list[int] | None = None,
) -> list[dict[str, Any]]:
    """Outcome rows of every (episode, task) of `panel`, or of its `positions` only, in (episode, panel) order; a
    task's requests are seeded by its position in the panel, so a part of the panel plays as it does in the whole."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    gate = asyncio.Semaphore(concurrency)
    played = range(len(panel)) if positions is None else positions
    jobs = [(episode, index, panel[index]) for episode in range(episodes) for index in played]

    async def one(episode: int, index: int, task: dict[str, Any]) -> dict[str, Any]:
        async def generate(messages: list[dict[str, str]], turn: int) -> Reply:
            return await client.chat(
                messages,
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                max_tokens=sampling.max_tokens,
                seed=sampling.seed(identity["seed"], step, episode, index, turn),
            )

        async with gate:
            result = await play_episode(
                make_env(), int(task["seed"]), mode=mode, max_turns=max_turns, generate=generate
            )
        return outcomes.row(
            identity,
            step,
            task,
            episode=episode,
            success=result.success,
            reward=result.reward,
            turns=result.turns,
            tokens=result.tokens,
            category=category,
        )

    tasks = [asyncio.ensure_future(one(*job)) for job in jobs]
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        for t in tasks:
            t.cancel()
