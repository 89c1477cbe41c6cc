"""The environment interface, and the turn logic and task identity every environment shares.

An environment is one class that carries everything about it (docs/extending.md "Add an environment"):
`name`; `parameters` (`params.Param` with the reference's names, defaults, checks and help; a class may
derive values in `resolve_params`); `prompts` (a `prompts.Prompts`: `formats`, `system_prompt(params)`,
`initial_observation(info)` and `step_observation(executed, info)`, e.g. `prompts.GridPrompts`);
`action_names` and `grid_symbols`; the game itself (`_generate`, `_apply`, `_terminal`, `render`,
`player_position`, `solve`); and, where the defaults do not fit, the task hooks `task_description`,
`task_category` and `show_fields`. The registry only maps names to these classes.

`Env.reset(seed) -> (observation, info)`; `Env.step(response) -> (observation, reward, done, info)`;
`Env.reset_task(panel_row)` resets to a frozen panel's task whatever identifies it (a seed, or ALFWorld's game).
`info` always holds `grid` (the text grid as the reference renders it) and `state_key` (canonical state for
GiGPO/GraphGPO grouping: the grid text); after a step also `success`, `valid` (action validity),
`effective` (the player moved), `actions` (the action words executed) and `parsed` (the parser's dict).
With `render_mode: vision` (games that declare it) `info` also holds `image_sha256` (images.pixel_hash of
`render_image()`), and the observation text shows `<image>` where the grid would be, as VAGEN's vision mode.

One turn (VAGEN @ 2936322, both games): parse the response; execute its actions in order, stopping at
the first unknown word (the turn becomes invalid, earlier actions stay executed) or when the episode ends
(later actions are not executed); add `success_reward` on success; add `format_reward` when at least one
action was executed (the parser yields no actions unless the format matched, so this is also
"format correct"). Malformed responses are invalid turns, never exceptions.

A task is one seed of one parameterised environment: `task_id` = f"{name}-{seed}", `task_hash` = SHA-256
of the canonical JSON of `task_description` (env name, full params, seed, initial grid and observation;
with image observations also the initial image's `image_sha256`, so a panel binds to the pixels too).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from agentrepro.environments.images import package_versions, pixel_hash
from agentrepro.environments.params import Param, boolean, integer, nonempty_string, number, one_of, validate
from agentrepro.environments.parsing import parse_response
from agentrepro.environments.prompts import Prompts, wrap_answer
from agentrepro.fileio import sha256_json

MAX_ACTIONS_PER_STEP = 100  # actions one turn executes at most (VAGEN's games use 3 and 5)
MAX_REWARD = 1e6  # |format_reward| and |success_reward|: sums over any episode stay far from overflow


def turn_parameters(
    formats: Sequence[str],
    *,
    prompt_format: str,
    max_actions_per_step: int,
    format_reward: float,
    render_modes: Sequence[str] = ("text",),
) -> tuple[Param, ...]:
    """The parameters of the shared turn logic and prompts, with one game's defaults (the reference's
    names and order; `formats` are the prompt formats the game has prompts for, `render_modes` the
    observation kinds it renders, the first being the default)."""
    return (
        Param("render_mode", render_modes[0], one_of(*render_modes), "observation kind"),
        Param("prompt_format", prompt_format, one_of(*formats), "response format the system prompt asks for"),
        Param(
            "max_actions_per_step",
            max_actions_per_step,
            integer(1, MAX_ACTIONS_PER_STEP),
            "actions executed per turn at most (later ones are dropped)",
        ),
        Param("action_sep", ",", nonempty_string, "separator between actions in the answer"),
        Param(
            "format_reward",
            format_reward,
            number(-MAX_REWARD, MAX_REWARD),
            "reward for a turn that executed at least one action",
        ),
        Param("success_reward", 1.0, number(-MAX_REWARD, MAX_REWARD), "reward added when the episode is solved"),
        Param("use_example_in_sys_prompt", True, boolean, "whether the system prompt shows the format's examples"),
    )


def grid_text(rows: Iterable[Iterable[str]]) -> str:
    """The reference's text grid: each symbol as a three-character cell " s ", rows joined by newlines."""
    return "\n".join("".join(f" {symbol} " for symbol in row) for row in rows)


class Env(ABC):
    """An environment with the VAGEN-Lite turn semantics; a subclass declares its parameters and prompts
    and provides the game itself."""

    #: the registry's key, also the task ids' prefix and the tasks' default category
    name: ClassVar[str]
    #: every parameter, in the reference's names and order (defaults enter every task hash)
    parameters: ClassVar[tuple[Param, ...]]
    #: the game's prompts (system prompt and observation texts per prompt format)
    prompts: ClassVar[Prompts]
    #: valid action words (lower case, as the parser produces them)
    action_names: ClassVar[tuple[str, ...]] = ("up", "down", "left", "right")
    #: every symbol the text grid can contain (each cell renders as " <symbol> ")
    grid_symbols: ClassVar[tuple[str, ...]]
    #: the command-line option naming a task: `--seed` (generated from a seed) or `--task` (a game file)
    task_option: ClassVar[str] = "--seed"
    #: the PyPI packages whose files `render_image` draws with (versions recorded in a vision panel's lock)
    image_packages: ClassVar[tuple[str, ...]] = ()
    #: what `agentrepro env play` asks the player to type
    play_hint: ClassVar[str] = "actions like 'up, left'"

    @classmethod
    def validate_params(cls, params: dict[str, Any] | None, *, path: object = None) -> dict[str, Any]:
        """Full parameters (defaults filled in, derived values resolved); BadInput names `env.params.<key>`."""
        return cls.resolve_params(validate(cls.name, cls.parameters, params, path=path))

    @classmethod
    def resolve_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        """Values derived from others after validation (e.g. a size from a given map); none by default."""
        return params

    def __init__(self, params: dict[str, Any]):
        """`params` as returned by `validate_params` (the registry's `make` validates them)."""
        self.params = dict(params)
        self.seed: int | None = None
        self.done = False
        self.total_reward = 0.0

    # -- game, provided by subclasses -------------------------------------------------------------
    @abstractmethod
    def _generate(self, seed: int) -> None:
        """Build the initial state for `seed`."""

    @abstractmethod
    def _apply(self, action: str) -> None:
        """Execute one known action word."""

    @abstractmethod
    def _terminal(self) -> tuple[bool, bool]:
        """(episode over, success) in the current state."""

    @abstractmethod
    def render(self) -> str:
        """The text grid: rows of three-character cells joined by newlines, no trailing newline."""

    def render_image(self):
        """The RGB picture of the current state (H×W×3 uint8 numpy array), for `render_mode: vision`."""
        raise ValueError(f"{self.name} has no image observations")

    @classmethod
    def panel_packages(cls, params: Mapping[str, Any]) -> dict[str, str]:
        """Package versions a frozen panel of these (validated) parameters depends on: the sprites' packages
        with image observations, else none (ALFWorld's `frozen_panel` reports its own)."""
        return package_versions(cls.image_packages) if params.get("render_mode") == "vision" else {}

    def image_observations(self) -> bool:
        """Whether observations are pictures (`render_mode: vision`) rather than text grids."""
        return self.params.get("render_mode") == "vision"

    @abstractmethod
    def player_position(self) -> tuple[int, int]:
        """(row, col) of the player; a step is `effective` when it changes (a game without a player returns
        any value that changes exactly when an action takes effect)."""

    @abstractmethod
    def solve(self) -> list[str]:
        """A shortest action sequence from the current state to success ([] if none or already solved)."""

    # -- shared turn logic ------------------------------------------------------------------------
    def system_prompt(self) -> str:
        return self.prompts.system_prompt(self.params)

    def format_actions(self, actions: list[str]) -> str:
        """A well-formed response of this environment's prompt format that plays `actions` (joined by
        `action_sep` + space); e.g. for warm-start demonstrations or a tiny policy's action words."""
        sep = self.params["action_sep"]
        return wrap_answer(f"{sep} ".join(actions), self.params["prompt_format"])

    def valid_actions(self) -> Sequence[str]:
        """The action words the current state accepts (a text game would return its admissible commands)."""
        return self.action_names

    def state_key(self) -> str:
        return self.render()

    def _info(self) -> dict[str, Any]:
        grid = self.render()
        info = {"grid": grid, "state_key": grid, "player_pos": list(self.player_position())}
        if self.image_observations():
            info["image_sha256"] = pixel_hash(self.render_image())
        return info

    def reset(self, seed: int) -> tuple[str, dict[str, Any]]:
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"seed must be an int, got {seed!r}")
        self._generate(seed)
        self.seed = seed
        self.done = False
        self.total_reward = 0.0
        info = self._info()
        return self.prompts.initial_observation(info), info

    def reset_task(self, entry: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        """Reset to the task of a panel row (`task_entry`'s dict): its `seed` here; a game-file environment
        (ALFWorld) resets to its `task_id`. One call for every environment, for evaluators of a frozen panel."""
        return self.reset(int(entry["seed"]))

    def parse(self, response: str) -> dict[str, Any]:
        p = self.params
        return parse_response(
            response,
            prompt_format=p["prompt_format"],
            action_sep=p["action_sep"],
            max_actions=p["max_actions_per_step"],
        )

    def step(self, response: str) -> tuple[str, float, bool, dict[str, Any]]:
        if self.seed is None:
            raise RuntimeError("step() before reset()")
        parsed = self.parse(response)
        start = self.player_position()
        executed: list[str] = []
        valid = bool(parsed["actions"]) and parsed["format_correct"]
        reward, done, success = 0.0, False, False
        known = self.valid_actions()
        for action in parsed["actions"]:
            if action not in known:
                valid = False
                break
            self._apply(action)
            executed.append(action)
            done, success = self._terminal()
            if done:
                if success:
                    reward += self.params["success_reward"]
                break
        if executed and parsed["format_correct"]:
            reward += self.params["format_reward"]
        self.done = done
        self.total_reward += reward
        info = self._info()
        info.update(
            success=success, valid=valid, effective=self.player_position() != start, actions=executed, parsed=parsed
        )
        return self.prompts.step_observation(executed, info), reward, done, info

    # -- task identity (docs/design.md §3.4) ------------------------------------------------------
    def task_description(self, observation: str, info: dict[str, Any]) -> dict[str, Any]:
        """The canonical description of the task just reset: what its hash covers."""
        description = {
            "env": self.name,
            "params": self.params,
            "seed": self.seed,
            "grid": info["grid"],
            "observation": observation,
        }
        if "image_sha256" in info:
            description["image_sha256"] = info["image_sha256"]
        return description

    def task_category(self, info: dict[str, Any]) -> str:
        """The task's family for per-category statistics (the environment name unless a game has types)."""
        return self.name

    def task_entry(self, observation: str, info: dict[str, Any]) -> dict[str, Any]:
        """The task panel's row for the task just reset: `task_id`, `task_hash`, `seed`, `category`."""
        return {
            "task_id": f"{self.name}-{self.seed}",
            "task_hash": sha256_json(self.task_description(observation, info)),
            "seed": self.seed,
            "category": self.task_category(info),
        }

    def show_fields(self) -> dict[str, Any]:
        """Extra fields `env show` prints for the task just reset (e.g. how a map was generated)."""
        return {}

    def turn_fields(self, info: dict[str, Any]) -> dict[str, Any]:
        """Extra fields `env replay` prints for each turn (e.g. a game's category and `won`)."""
        return {}
