"""Turn semantics shared by both games: malformed responses are invalid turns with the reference's rewards."""

from __future__ import annotations

import pytest

from agentrepro.environments import make_env

FL_OK = "<think>t</think><answer>{}</answer>"
SK_OK = "<observation>o</observation><think>t</think><answer>{}</answer><prediction>p</prediction>"


def fresh(name):
    """Sokoban seed 0 (player below the box) or a fixed FrozenLake map with room to move."""
    if name == "sokoban":
        env = make_env("sokoban", {"min_solution_steps": [1, 5]})
        env.reset(0)
        return env, SK_OK
    env = make_env("frozenlake", {"desc": ["FFFF", "FSFF", "FFFF", "FFFG"]})
    env.reset(0)
    return env, FL_OK


MALFORMED = {
    "missing_tags": lambda ok: "Up, Left",
    "empty": lambda ok: "",
    "empty_answer": lambda ok: ok.format(""),
    "unknown_first": lambda ok: ok.format("Jump, Up"),
    "non_ascii_word": lambda ok: ok.format("上, ↑"),
    "non_ascii_lookalike": lambda ok: ok.format("Uр"),  # Cyrillic 'р'
    "semicolon": lambda ok: ok.format("Up; Left"),
    "unclosed": lambda ok: ok.format("Up").replace("</answer>", ""),
    "very_long_garbage": lambda ok: "<think>" + "x" * 200_000,
    "uppercase_tags": lambda ok: ok.format("Up").upper(),
    "control_chars": lambda ok: "\x00\x1b[2J" + ok.format("\x00"),
}


@pytest.mark.parametrize("name", ["sokoban", "frozenlake"])
@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_malformed_responses_are_invalid_turns(name, kind):
    """Each malformed response: no exception, reward 0, invalid, nothing executed, state unchanged."""
    env, ok = fresh(name)
    before = env.render()
    obs, reward, done, info = env.step(MALFORMED[kind](ok))
    assert (reward, done, info["valid"], info["actions"], info["success"], info["effective"]) == (
        0.0,
        False,
        False,
        [],
        False,
        False,
    )
    assert info["grid"] == before and "extracted valid action is []" in obs


@pytest.mark.parametrize("name,expected_reward", [("sokoban", 0.1), ("frozenlake", 0.02)])
def test_unknown_word_after_valid_ones_keeps_earlier_actions(name, expected_reward):
    """'Up, Jump, Down': Up is executed and earns the format reward; the turn is invalid; Down never runs."""
    env, ok = fresh(name)
    _, reward, _, info = env.step(ok.format("Up, Jump, Down"))
    assert info["actions"] == ["up"] and info["valid"] is False and reward == expected_reward


@pytest.mark.parametrize("name,limit", [("sokoban", 3), ("frozenlake", 5)])
def test_too_many_actions_are_truncated_not_invalid(name, limit):
    """More than max_actions_per_step actions: the first `limit` run, the turn stays valid."""
    env, ok = fresh(name)
    _, _, _, info = env.step(ok.format(", ".join(["left", "right"] * 5)))
    assert len(info["actions"]) == limit and info["valid"] is True
    assert info["parsed"]["action_content"] == ",".join((["left", "right"] * 5)[:limit])


def test_step_before_reset_is_an_error():
    """Calling step() on an environment that was never reset is a programming error (RuntimeError)."""
    with pytest.raises(RuntimeError):
        make_env("frozenlake", {}).step("<think></think><answer>up</answer>")


@pytest.mark.parametrize("name", ["sokoban", "frozenlake"])
def test_vocabulary_covers_everything_rendered(name):
    """action_names and grid_symbols cover every word a parser accepts and every symbol of 40 rendered maps."""
    env = make_env(name, {})
    assert set(env.action_names) == {"up", "down", "left", "right"}
    symbols = set()
    for seed in range(40):
        _, info = env.reset(seed)
        symbols |= {
            cell.strip() for row in info["grid"].split("\n") for cell in (row[i : i + 3] for i in range(0, len(row), 3))
        }
    assert symbols <= set(env.grid_symbols) and len(symbols) >= 4


def test_reset_rejects_non_integer_seed():
    """A seed must be an int (bools and strings are refused rather than coerced)."""
    env = make_env("frozenlake", {})
    for bad in (True, "3", 1.0):
        with pytest.raises(TypeError):
            env.reset(bad)


@pytest.mark.parametrize(
    "name,fmt",
    [
        ("sokoban", "wm"),
        ("sokoban", "free_wm"),
        ("sokoban", "free_think"),
        ("frozenlake", "free_think"),
        ("frozenlake", "wm"),
    ],
)
def test_format_actions_is_well_formed_in_every_format(name, fmt):
    """format_actions(solve()) is parsed as exactly those actions in the configured format, and wins."""
    env = make_env(
        name,
        {
            "prompt_format": fmt,
            "max_actions_per_step": 20,
            **({"min_solution_steps": [1, 5]} if name == "sokoban" else {}),
        },
    )
    env.reset(3)
    plan = env.solve()
    assert env.parse(env.format_actions(plan))["actions"] == plan
    _, _, done, info = env.step(env.format_actions(plan))
    assert done and info["success"] and info["valid"]
