"""Prompts: observation templates (fixture-checked elsewhere) and system prompt composition."""

from __future__ import annotations

import pytest

from agentrepro.environments import make_env
from agentrepro.environments.prompts import initial_observation, step_observation


def test_observation_templates():
    """Observations wrap the grid exactly as the reference (list repr of executed actions, trailing newline)."""
    assert initial_observation("G") == "[Initial Observation]:\nG\nDecide your next action(s).\n"
    assert step_observation(["up", "left"], "G") == (
        "After your answer, the extracted valid action is ['up', 'left'].\n"
        "After that, the observation is:\nG\nDecide your next action(s).\n"
    )


@pytest.mark.parametrize(
    "name,fmt,layout",
    [
        (
            "sokoban",
            "wm",
            "<observation>...</observation><think>...</think><answer>...</answer><prediction>...</prediction>.",
        ),
        ("sokoban", "free_wm", "<observation>...</observation> your reasoning <answer>...</answer>"),
        ("sokoban", "free_think", "<think>...</think><answer>...</answer>"),
        ("frozenlake", "free_think", "<think>...</think><answer>...</answer>"),
        ("frozenlake", "wm", "relative position of the `goal` and any visible `hole`"),
    ],
)
def test_system_prompt_names_format_and_limit(name, fmt, layout):
    """The system prompt holds the game guide, the format layout and the configured action limit/separator."""
    env = make_env(name, {"prompt_format": fmt, "max_actions_per_step": 4})
    text = env.system_prompt()
    assert text.startswith(f"You are a {'Sokoban' if name == 'sokoban' else 'FrozenLake'} solver.")
    assert layout in text and "You can take up to 4 action(s) at a time, separated by ,." in text
    no_examples = make_env(name, {"prompt_format": fmt, "use_example_in_sys_prompt": False}).system_prompt()
    assert "Example 1:" in text and "Example 1:" not in no_examples
