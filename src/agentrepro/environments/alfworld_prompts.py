"""ALFWorld's response parsing and observation texts as verl-agent @ 20bd331 writes them (environments/alfworld.py plays
the game).

* `parse_action` is verl-agent's projection (`env_package/alfworld/projection.py`): the response is lower-cased; the
  text between the first `<action>` and the first `</action>` after lower-casing, stripped, is the command; without
  both tags the command is the last 30 characters of the lower-cased response. The turn is *valid* when both action
  tags are there, both `<think>` and `</think>` are in the response as written, and it holds no CJK character
  (U+4E00–U+9FFF).
* `ALFWorldPrompts` renders the observations of `AlfWorldEnvironmentManager.build_text_obs` (verl-agent's
  `env_manager.py` and the recipe's `graphgpo_env_manager.py`; templates in `prompts/alfworld.py`): the first shows
  the game's text and its admissible commands; later ones add the task, the step count and the last
  `history_length` observations with the commands sent after them. Admissible commands are listed in the game's
  order without `help`. There is no system prompt: the recipe sends the observation alone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

FORMAT = "think_action"
_CJK = re.compile(r"[\u4e00-\u9fff]")

_FIRST = """
You are an expert agent operating in the ALFRED Embodied Environment.
Your current observation is: {current_observation}
Your admissible actions of the current situation are: [{admissible_actions}].

Now it's your turn to take an action.
You should first reason step-by-step about the current situation. This reasoning process MUST be enclosed within <think> </think> tags.
Once you've finished your reasoning, you should choose an admissible action for current step and present it within <action> </action> tags.
"""

_LATER = """
You are an expert agent operating in the ALFRED Embodied Environment. Your task is to: {task_description}
Prior to this step, you have already taken {step_count} step(s). Below are the most recent {history_length} observations and the corresponding actions you took: {action_history}
You are now at step {current_step} and your current observation is: {current_observation}
Your admissible actions of the current situation are: [{admissible_actions}].

Now it's your turn to take an action.
You should first reason step-by-step about the current situation. This reasoning process MUST be enclosed within <think> </think> tags.
Once you've finished your reasoning, you should choose an admissible action for current step and present it within <action> </action> tags.
"""


def parse_action(response: str) -> dict[str, Any]:
    """verl-agent's ALFWorld projection of one response: {`action`, `valid`, `format_correct`, `think`}."""
    if not isinstance(response, str):
        raise TypeError(f"a response is a string, got {type(response).__name__}")
    lower = response.lower()
    start, end = lower.find("<action>"), lower.find("</action>")
    tagged = start != -1 and end != -1
    action = lower[start + len("<action>") : end].strip() if tagged else lower[-30:]
    think = "<think>" in response and "</think>" in response
    return {
        "action": action,
        "format_correct": tagged and think,
        "think": think,
        "valid": tagged and think and not _CJK.search(response),
        "llm_raw_response": response,
    }


class ALFWorldPrompts:
    """verl-agent's ALFWorld observation texts; no system prompt (the recipe sends the observation alone)."""

    formats = (FORMAT,)

    def system_prompt(self, params: Mapping[str, Any]) -> str:
        return ""

    @staticmethod
    def _commands(info: Mapping[str, Any]) -> str:
        return "\n ".join(f"'{c}'" for c in info["admissible_commands"] if c != "help")

    def initial_observation(self, info: Mapping[str, Any]) -> str:
        return _FIRST.format(current_observation=info["grid"], admissible_actions=self._commands(info))

    def step_observation(self, executed: list[str], info: Mapping[str, Any]) -> str:
        history, length = info["history"], info["history_length"]
        if length <= 0:
            return self.initial_observation(info)
        recent = history[-length:]
        first = len(history) - len(recent) + 1
        lines = "\n".join(
            f"[Observation {first + i}: '{obs}', Action {first + i}: '{act}']" for i, (obs, act) in enumerate(recent)
        )
        return _LATER.format(
            task_description=info["task"],
            step_count=len(history),
            history_length=len(recent),
            action_history=lines,
            current_step=len(history) + 1,
            current_observation=info["grid"],
            admissible_actions=self._commands(info),
        )
