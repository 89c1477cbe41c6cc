"""The engine: bounded episodes in flight, a seed per request, rows that pass the outcome checks and the panel."""

from __future__ import annotations

import asyncio

import pytest

from agentrepro import outcomes
from agentrepro.environments import make_env, task_panel
from agentrepro.serving.client import Reply, ServerError
from agentrepro.serving.engine import Sampling, evaluate_panel

IDENTITY = {"study": "s", "method": "m", "seed": 3}


class SolvingClient:
    """Answers every request with the shortest solution of the state in the last observation (an oracle), tracking load."""

    def __init__(self, env_name: str, fail_after: int | None = None):
        self.env_name = env_name
        self.fail_after = fail_after
        self.requests: list[dict] = []
        self.in_flight = self.most = 0

    async def chat(self, messages, *, temperature, top_p, max_tokens, seed):
        self.requests.append(
            {"messages": messages, "temperature": temperature, "top_p": top_p, "max_tokens": max_tokens, "seed": seed}
        )
        if self.fail_after is not None and len(self.requests) > self.fail_after:
            raise ServerError("http://x/v1/chat/completions: the server process has exited")
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        await asyncio.sleep(0.001)
        self.in_flight -= 1
        env = make_env(self.env_name)
        seed_line = messages[-1]["content"]
        task = next(t for t in self.panel if env.reset(int(t["seed"]))[0] == seed_line)
        env.reset(int(task["seed"]))
        return Reply(
            text=env.format_actions(env.solve()[: env.params["max_actions_per_step"]]), tokens=5, finish_reason="stop"
        )


def play(env_name, client, *, concurrency=3, episodes=2, seeds=range(10001, 10007), mode="non_concat"):
    panel = task_panel(env_name, {}, seeds)
    client.panel = panel
    rows = asyncio.run(
        evaluate_panel(
            lambda: make_env(env_name),
            panel,
            identity=IDENTITY,
            step=4,
            client=client,
            sampling=Sampling(temperature=0.5, top_p=0.9, max_tokens=40, sample_seed=1),
            mode=mode,
            max_turns=1,
            episodes=episodes,
            concurrency=concurrency,
            category=env_name,
        )
    )
    return rows, panel


@pytest.mark.parametrize("env_name", ["frozenlake", "sokoban"])
def test_rows_pass_the_outcome_checks_and_the_panel(env_name):
    """Every (episode, task) gets one row, in order, accepted by outcomes.check_rows against the frozen panel."""
    client = SolvingClient(env_name)
    rows, panel = play(env_name, client, seeds=[10001, 10002, 10003] if env_name == "sokoban" else range(10001, 10007))
    config = {**IDENTITY, "eval": {"task_panel": panel, "episodes_per_task": 2}}
    outcomes.check_rows(rows, config=config, step=4, source="test")
    assert [(r["episode"], r["task_id"]) for r in rows] == [(e, t["task_id"]) for e in range(2) for t in panel]
    assert all(r["tokens"] == 5 * r["turns"] for r in rows)


def test_concurrency_is_bounded_and_used():
    """At most `concurrency` episodes are in flight, and more than one is when allowed."""
    client = SolvingClient("frozenlake")
    play("frozenlake", client, concurrency=3)
    assert client.most == 3
    client = SolvingClient("frozenlake")
    play("frozenlake", client, concurrency=1)
    assert client.most == 1


def test_every_request_has_sampling_parameters_and_a_distinct_reproducible_seed():
    """Each request carries the sampling settings and its own seed; the same evaluation sends the same seeds."""
    first, second = SolvingClient("frozenlake"), SolvingClient("frozenlake")
    play("frozenlake", first, concurrency=1)
    play("frozenlake", second, concurrency=4)
    assert all((r["temperature"], r["top_p"], r["max_tokens"]) == (0.5, 0.9, 40) for r in first.requests)
    seeds = [r["seed"] for r in first.requests]
    assert len(set(seeds)) == len(seeds) and all(0 <= s < 2**31 for s in seeds)
    assert sorted(seeds) == sorted(r["seed"] for r in second.requests)
    assert Sampling(sample_seed=1).seed(3, 4, 0, 0, 0) != Sampling(sample_seed=2).seed(3, 4, 0, 0, 0)


def test_server_failure_ends_the_evaluation():
    """A ServerError in one episode ends the whole evaluation with that record (no partial rows)."""
    with pytest.raises(ServerError, match="exited"):
        play("frozenlake", SolvingClient("frozenlake", fail_after=4))


def test_oracle_episodes_succeed():
    """With correct answers the episodes succeed: success, reward and turns come from the environment."""
    rows, _ = play("frozenlake", SolvingClient("frozenlake"), episodes=1)
    solved = [r for r in rows if r["success"]]
    assert solved and all(r["reward"] > 1.0 and r["turns"] == 1 for r in solved)
