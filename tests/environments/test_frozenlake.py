"""FrozenLake against the reference fixtures: maps, replays, solver and edge cases."""

from __future__ import annotations

import json

import pytest
from helpers import FIXTURES

from agentrepro.environments import make_env
from agentrepro.environments.frozenlake import generate_random_map, shortest_path


def load(name: str) -> list[dict]:
    """Records of one VAGEN fixture file (one JSON object per line)."""
    with open(FIXTURES / "vagen" / name, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def env_params(record: dict) -> dict:
    """A fixture record's `params` as environment parameters (its `env` label is not one)."""
    return {k: v for k, v in record["params"].items() if k != "env"}


MAPS = load("frozenlake_maps.jsonl")
REPLAYS = load("frozenlake_replays.jsonl")


def test_every_fixture_map_is_reproduced():
    """Every seed's map, grid text, observation and start state equal the reference's, byte for byte."""
    assert len(MAPS) == 142
    for rec in MAPS:
        env = make_env("frozenlake", env_params(rec))
        obs, info = env.reset(rec["seed"])
        assert generate_random_map(4, 0.8, rec["seed"]) == rec["desc"], rec["seed"]
        assert (obs, info["grid"], info["state_index"], info["player_pos"]) == (
            rec["obs_str"],
            rec["grid"],
            rec["state_index"],
            rec["player_pos"],
        ), rec["seed"]
        assert info["state_key"] == rec["grid"]


@pytest.mark.parametrize("rec", REPLAYS, ids=[r["replay_id"] for r in REPLAYS])
def test_every_fixture_replay_is_reproduced(rec):
    """Each turn's observation, reward, done, success, executed actions, validity and parse match."""
    env = make_env("frozenlake", env_params(rec))
    obs, _ = env.reset(rec["seed"])
    assert obs == rec["initial"]["obs_str"]
    cumulative = 0.0
    for turn in rec["turns"]:
        obs, reward, done, info = env.step(turn["response"])
        cumulative += reward
        assert obs == turn["obs_str"] and info["grid"] == turn["grid"]
        assert (reward, done, info["success"]) == (turn["reward"], turn["done"], turn["success"])
        assert info["actions"] == turn["executed_actions"]
        assert (info["valid"], info["effective"]) == (turn["action_is_valid"], turn["action_is_effective"])
        assert info["state_index"] == turn["state_index"]
        assert {k: v for k, v in info["parsed"].items() if k != "llm_raw_response"} == turn["parsed"]
        assert cumulative == pytest.approx(turn["cumulative_reward"])
    assert done == (rec["stopped_because"] == "done")
    assert info["success"] == rec["final_success"]


def test_solve_matches_reference_solutions_and_reaches_goal():
    """solve() gives the reference's shortest solutions, and playing any map's solution wins."""
    for rec in REPLAYS:
        if rec["kind"] == "bfs_solution":
            env = make_env("frozenlake", env_params(rec))
            env.reset(rec["seed"])
            assert env.solve() == rec["action_sequence"]
    for rec in MAPS[:40]:
        env = make_env("frozenlake", {})
        env.reset(rec["seed"])
        plan = env.solve()
        assert plan, rec["seed"]
        done = False
        for i in range(0, len(plan), 5):
            _, reward, done, info = env.step(f"<think>t</think><answer>{','.join(plan[i : i + 5])}</answer>")
        assert done and info["success"] and reward == pytest.approx(1.02)
        assert env.solve() == []


def test_solve_from_midgame_state_is_shortest():
    """solve() plans from the current state, not the start: its length equals BFS distance from there."""
    env = make_env("frozenlake", {"desc": ["SFFF", "FHFH", "FFFH", "HFFG"]})
    env.reset(0)
    assert env.solve() == ["down", "down", "right", "down", "right", "right"]  # moves tried left, down, right, up
    env.step("<think></think><answer>down, down, right, right</answer>")
    assert env.player_position() == (2, 2)
    assert env.solve() == ["down", "right"]


def test_falling_into_a_hole_ends_without_success():
    """A hole ends the episode: done, no success, format reward only, later actions not executed."""
    env = make_env("frozenlake", {"desc": ["SHFG"]})
    env.reset(3)
    _obs, reward, done, info = env.step("<think>x</think><answer>right, right, right</answer>")
    assert (done, info["success"], info["actions"], reward) == (True, False, ["right"], 0.02)
    assert info["grid"] == " _  X  _  G "
    assert shortest_path(["SHFG"], (0, 0), (0, 3)) is None


def test_wm_format_is_accepted_when_configured():
    """With prompt_format=wm the four-tag layout is required: free_think answers become invalid turns."""
    env = make_env("frozenlake", {"prompt_format": "wm", "desc": ["SFG"]})
    env.reset(0)
    _, reward, _, info = env.step("<think>t</think><answer>right</answer>")
    assert (reward, info["valid"], info["actions"]) == (0.0, False, [])
    _, reward, done, info = env.step(
        "<observation>o</observation><think>t</think><answer>right,right</answer><prediction>p</prediction>"
    )
    assert (reward, done, info["success"]) == (1.02, True, True)
