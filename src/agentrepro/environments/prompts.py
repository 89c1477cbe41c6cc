"""Prompt formats, format instructions and observation templates shared by the VAGEN-Lite grid games.

Each game declares its own texts (guide, examples, the objects its world-model rules name) as a
`GridPrompts` in its class; this module composes them. The texts follow VAGEN's
`vagen/envs/{sokoban,frozenlake}/utils/prompt.py`. The observation templates are
checked byte for byte against the fixtures (`obs_str`), and so are the system prompts of every game,
prompt format and example setting (`system_prompts.jsonl`, written by the reference's own prompt functions).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from agentrepro.environments.images import IMAGE_PLACEHOLDER

_WM_RULES = """Rules for <observation> and <prediction>:
- You must strictly describe the relative position of the `{goal}` and any visible `{other}` objects **relative to the player**.
- For each object, you MUST include:
  - exactly ONE vertical relationship: `above`, `below`, or `same row`
  - exactly ONE horizontal relationship: `left`, `right`, or `same column`
- Use ONLY the terms: `above`, `below`, `same row`, `left`, `right`, `same column`.
- Always use the phrasing pattern:
  "X is <vertical> and <horizontal> of the player".
- Do NOT use the word `same` alone.
- Do not include any extra information.

Rules for <answer>:
- Output 1 to {n} action(s).
- Valid actions are: Up, Down, Left, Right.
- Separate multiple actions with `{sep}`."""

_LAYOUT = {
    "free_think": "You should first give your reasoning, and then your answer.\nYour response should be in the format of:\n<think>...</think><answer>...</answer>",
    "wm": "Your response must be in the format of:\n<observation>...</observation><think>...</think><answer>...</answer><prediction>...</prediction>.\n\n",
    "free_wm": (
        "Your response must be in the format of:\n<observation>...</observation> your reasoning <answer>...</answer> "
        "your reasoning <prediction>...</prediction>.\n\nYou may include free-form reasoning text between the tags.\n\n"
    ),
}


class Prompts(Protocol):
    """What an environment's `prompts` provides (GridPrompts for the grid games; a text game writes its own)."""

    @property
    def formats(self) -> tuple[str, ...]:
        """The prompt formats it has prompts for (the only values `prompt_format` accepts)."""

    def system_prompt(self, params: Mapping[str, Any]) -> str: ...

    def initial_observation(self, info: Mapping[str, Any]) -> str: ...

    def step_observation(self, executed: list[str], info: Mapping[str, Any]) -> str: ...


@dataclass(frozen=True)
class GridPrompts:
    """The prompts of one VAGEN-Lite grid game, declared by its class (`Env.prompts`).

    `guide` is the game's quick guide (the start of the system prompt); `examples` maps each prompt format
    the game supports to its example block (its keys, in order, are the formats `prompt_format` accepts);
    `wm_goal`/`wm_other` are the objects the world-model rules name; `wm_rules_end` is appended after those
    rules (the reference's Sokoban block ends with a newline, FrozenLake's does not).
    """

    guide: str
    examples: Mapping[str, str]
    wm_goal: str
    wm_other: str
    wm_rules_end: str = ""

    def __post_init__(self) -> None:
        unknown = sorted(set(self.examples) - set(_LAYOUT))
        if not self.examples or unknown:
            raise ValueError(
                f"examples must be given for one or more of {', '.join(_LAYOUT)}; got {sorted(self.examples)}"
            )

    @property
    def formats(self) -> tuple[str, ...]:
        return tuple(self.examples)

    def format_prompt(self, prompt_format: str, max_actions: int, action_sep: str, add_example: bool = True) -> str:
        """The format instructions in `prompt_format` (one of `formats`)."""
        if prompt_format not in self.examples:
            raise ValueError(f"no prompt for format {prompt_format!r}; this game has {', '.join(self.formats)}")
        text = (
            f"You can take up to {max_actions} action(s) at a time, separated by {action_sep}.\n"
            + _LAYOUT[prompt_format]
        )
        if prompt_format in ("wm", "free_wm"):
            text += _WM_RULES.format(goal=self.wm_goal, other=self.wm_other, n=max_actions, sep=action_sep)
            text += self.wm_rules_end
        if add_example:
            text += "\n" + self.examples[prompt_format]
        return text

    def system_prompt(self, params: Mapping[str, Any]) -> str:
        """The guide + "\\n" + the format prompt of `params` (VAGEN's `get_system_prompt`)."""
        return (
            self.guide
            + "\n"
            + self.format_prompt(
                params["prompt_format"],
                params["max_actions_per_step"],
                params["action_sep"],
                params.get("use_example_in_sys_prompt", True),
            )
        )

    def initial_observation(self, info: Mapping[str, Any]) -> str:
        return initial_observation(board(info))

    def step_observation(self, executed: list[str], info: Mapping[str, Any]) -> str:
        return step_observation(executed, board(info))


def board(info: Mapping[str, Any]) -> str:
    """What an observation shows of the board: the text grid, or `<image>` when the observation is a picture
    (`info` has `image_sha256`), as VAGEN's vision mode writes its placeholder in place of the grid."""
    return IMAGE_PLACEHOLDER if "image_sha256" in info else info["grid"]


def initial_observation(grid: str) -> str:
    """Observation returned by `reset` (checked against the fixtures' `obs_str`)."""
    return f"[Initial Observation]:\n{grid}\nDecide your next action(s).\n"


def step_observation(executed: list[str], grid: str) -> str:
    """Observation returned by `step`; `executed` is rendered as Python's list repr, e.g. ['up', 'left']."""
    return (
        f"After your answer, the extracted valid action is {executed!r}.\n"
        f"After that, the observation is:\n{grid}\nDecide your next action(s).\n"
    )


def wrap_answer(answer: str, prompt_format: str) -> str:
    """A well-formed response in `prompt_format` whose answer is `answer` (other sections left empty)."""
    if prompt_format == "free_think":
        return f"<think></think><answer>{answer}</answer>"
    if prompt_format == "wm":
        return f"<observation></observation><think></think><answer>{answer}</answer><prediction></prediction>"
    if prompt_format == "free_wm":
        return f"<observation></observation><answer>{answer}</answer><prediction></prediction>"
    raise ValueError(f"unknown prompt_format {prompt_format!r}")
