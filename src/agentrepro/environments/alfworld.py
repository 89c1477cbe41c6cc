"""ALFWorld (text, TextWorld engine) as verl-agent @ 20bd331 plays it for the GraphGPO recipe.

A task is one game of an ALFWorld data directory (alfworld_data.py): `reset(task_id)` loads the game
`<data_dir>/<task_id>/game.tw-pddl` through TextWorld with ALFWorld's own wrappers (`AlfredDemangler`
without shuffling, as for evaluation, and `AlfredInfos`), requesting `won`, `admissible_commands` and the
game file, as `AlfredTWEnv.init_env` does. `step(response)` plays one turn:

* the action: verl-agent's projection of the response (alfworld_prompts.parse_action). The command is sent to the
  game either way (an unknown one gets TextWorld's "Nothing happens."); validity only feeds the trainer's
  invalid-action penalty (`train.invalid_penalty`).
* reward `success_reward` (10.0) on the turn the game is won (`10.0 * won`, GraphGPO `alfworld_envs.py`);
  the episode ends when won or after `max_turns` turns (`env.max_steps` = 50).
* the observation: verl-agent's texts (alfworld_prompts.ALFWorldPrompts) with `history_length` (2). With `observation: graphgpo` (the default, the recipe's manager) the
  game's text is followed by the recipe's notes (alfworld_tracking.py: location, what is held, moved objects),
  and the grouping anchor (`state_key`) is that text plus the sorted admissible commands; with
  `observation: verl-agent` (verl-agent's own ALFWorld manager) the game's text is shown alone and is the anchor.

`info` adds `won`, `admissible_commands`, `feedback` (the game's text), `grid` (the text the observation
shows), `state_key` and `category`. A task's hash covers the hashes of its two files and the
parameters other than `data_dir` (where the data lives is not what the task is).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, ClassVar

from agentrepro.environments.alfworld_data import Game, data_dir_or_env, eligible_games, read_game, split_dir
from agentrepro.environments.alfworld_prompts import FORMAT, ALFWorldPrompts, parse_action
from agentrepro.environments.alfworld_tracking import Notes
from agentrepro.environments.base import MAX_REWARD, Env
from agentrepro.environments.params import Param, integer, number, one_of
from agentrepro.errors import BadInput
from agentrepro.fileio import sha256_json
from agentrepro.reading import load_json

NOTHING = "Nothing happens."
MAX_TURNS = 1_000  # max_turns and history_length (verl-agent: 50 and 2)


def _optional_path(v: Any) -> str | None:
    if v is not None and (not isinstance(v, str) or not v):
        raise ValueError("null (use $ALFWORLD_DATA) or a directory path")
    return v


def textworld_env(game_file: Path):
    """A TextWorld environment for one ALFWorld game, wrapped and with the infos AlfredTWEnv requests."""
    try:
        import textworld  # optional: the alfworld extra
        from alfworld.agents.environment.alfred_tw_env import (  # optional: the alfworld extra
            AlfredDemangler,
            AlfredInfos,
        )
    except ImportError as exc:
        raise BadInput(
            f"the alfworld package is not installed ({exc}): pip install '.[alfworld]'", where="package"
        ) from None
    infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
    return textworld.start(str(game_file), request_infos=infos, wrappers=[AlfredDemangler(shuffle=False), AlfredInfos])


class ALFWorld(Env):
    """One ALFWorld game per task; `reset(task_id)` with the game's directory relative to `data_dir`."""

    name = "alfworld"
    task_option = "--task"
    play_hint = "a command such as 'go to fridge 1'"
    action_names = ()
    grid_symbols = ()
    prompts = ALFWorldPrompts()
    parameters = (
        Param(
            "data_dir",
            None,
            _optional_path,
            "ALFWorld data directory (null: $ALFWORLD_DATA); not part of a task's hash",
        ),
        Param(
            "max_turns", 50, integer(1, MAX_TURNS), "turns before the episode ends unsolved (verl-agent env.max_steps)"
        ),
        Param(
            "history_length",
            2,
            integer(0, MAX_TURNS),
            "earlier observations and actions shown (verl-agent env.history_length)",
        ),
        Param(
            "success_reward", 10.0, number(-MAX_REWARD, MAX_REWARD), "reward on the turn the game is won (10.0 * won)"
        ),
        Param("prompt_format", FORMAT, one_of(FORMAT), "response format: <think>...</think> then <action>...</action>"),
        Param(
            "observation",
            "graphgpo",
            one_of("graphgpo", "verl-agent"),
            "graphgpo: the game's text with the GraphGPO recipe's notes; verl-agent: the game's text alone",
        ),
    )

    def __init__(self, params: dict[str, Any]):
        super().__init__(params)
        self.game: Game | None = None
        self._tw: Any = None  # textworld's environment (the alfworld extra)

    @property
    def loaded(self) -> Game:
        """The game `reset` loaded; an error before the first reset."""
        if self.game is None:
            raise RuntimeError("ALFWorld used before reset()")
        return self.game

    # -- episode ---------------------------------------------------------------------------------
    # a task is a game directory where Env.reset takes a seed (task_panel passes either)
    def reset(self, task: str) -> tuple[str, dict[str, Any]]:  # type: ignore[override]
        """Load game `task` (its directory relative to the data directory) and start it."""
        data_dir = data_dir_or_env(self.params["data_dir"], where="env.params.data_dir")
        game = read_game(data_dir, task)
        if self._tw is not None:
            self._tw.close()
        self._tw = textworld_env(game.game_file)
        state = self._tw.reset()
        self.game, self.seed, self.done, self.total_reward = game, None, False, 0.0
        self.turns, self.effective = 0, 0
        self.history: list[tuple[str, str]] = []  # (observation, action) of each earlier turn
        self.plan: list[str] = []
        self.feedback, self.won = state["feedback"], bool(state["won"])
        self.admissible = list(state["admissible_commands"])
        self.notes = Notes()
        marker = "Your task is to: "
        if marker not in self.feedback:
            raise BadInput(f"the game's first text has no {marker.strip()!r}", path=game.game_file, where="grammar")
        self.task = self.feedback[self.feedback.find(marker) + len(marker) :].strip()
        info = self._info()
        return self.prompts.initial_observation(info), info

    def reset_task(self, entry: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        return self.reset(entry["task_id"])

    def parse(self, response: str) -> dict[str, Any]:
        return parse_action(response)

    def format_actions(self, actions: list[str]) -> str:
        """A valid response playing the one command `actions[0]` (a turn sends exactly one command)."""
        if len(actions) != 1:
            raise ValueError(f"an ALFWorld turn sends one command, got {len(actions)}")
        return f"<think></think><action>{actions[0]}</action>"

    def step(self, response: str) -> tuple[str, float, bool, dict[str, Any]]:
        if self.game is None:
            raise RuntimeError("step() before reset()")
        if self.done:
            raise RuntimeError("step() after the episode ended")
        parsed = self.parse(response)
        before = self.observed()
        self._apply(parsed["action"])
        self.history.append((before, parsed["action"]))
        self.turns += 1
        self.done = self.won or self.turns >= self.params["max_turns"]
        self.notes.follow(parsed["action"], self.feedback, self.done)
        reward = self.params["success_reward"] if self.won else 0.0
        self.total_reward += reward
        info = self._info()
        info.update(
            success=self.won,
            valid=parsed["valid"],
            effective=self.feedback != NOTHING,
            actions=[parsed["action"]],
            parsed=parsed,
            admissible=parsed["action"] in self.admissible_before,
        )
        return self.prompts.step_observation(info["actions"], info), reward, self.done, info

    # -- Env's game hooks ------------------------------------------------------------------------
    def _generate(self, seed: int) -> None:
        raise TypeError("an ALFWorld task is a game directory, not a seed: call reset(task_id)")

    def _apply(self, action: str) -> None:
        self.admissible_before = self.admissible
        state, _score, _done = self._tw.step(action)
        self.feedback, self.won = state["feedback"], bool(state["won"])
        self.admissible = list(state["admissible_commands"])
        self.effective += self.feedback != NOTHING
        self.plan.append(action)

    def _terminal(self) -> tuple[bool, bool]:
        return self.done, self.won

    def render(self) -> str:
        return self.observed()

    def observed(self) -> str:
        """The game's text as the observation shows it (with the recipe's notes under `observation: graphgpo`)."""
        if self.params["observation"] != "graphgpo":
            return self.feedback
        where, moved = self.notes.text()
        return f"{self.feedback} {where} {moved}"

    def state_key(self) -> str:
        """The recipe's grouping anchor: the observed text, plus the sorted admissible commands under graphgpo."""
        if self.params["observation"] != "graphgpo":
            return self.feedback
        return f"{self.observed()} {','.join(sorted(self.admissible))}"

    def player_position(self) -> tuple[int, int]:
        return (self.effective, 0)

    def valid_actions(self) -> Sequence[str]:
        return list(self.admissible)

    def walkthrough(self) -> list[str]:
        """The game file's walkthrough (the commands that solve it from its start)."""
        return list(load_json(self.loaded.game_file).get("walkthrough") or [])

    def solve(self) -> list[str]:
        """The rest of the game's walkthrough if every command so far followed it, else [] (no planner here)."""
        plan = self.walkthrough()
        return plan[len(self.plan) :] if plan[: len(self.plan)] == self.plan and not self.won else []

    def _info(self) -> dict[str, Any]:
        return {
            "grid": self.observed(),
            "state_key": self.state_key(),
            "player_pos": [self.effective, 0],
            "feedback": self.feedback,
            "won": self.won,
            "admissible_commands": list(self.admissible),
            "history": list(self.history),
            "history_length": self.params["history_length"],
            "task": self.task,
            "category": self.loaded.category,
            "task_id": self.loaded.task_id,
        }

    # -- task identity ---------------------------------------------------------------------------
    #: eval.panel's choices for a panel of game files: which eligible games of the split it takes
    PANEL_SELECTIONS: ClassVar[dict[str, str]] = {
        "first": "the first eval.tasks eligible games in path order, as the Relax recipe's data preparation selects its "
        "evaluation games (prepare_alfworld.py select_task_files with --limit eval_in_distribution=N), so both "
        "backends play the same games",
        "all": "every eligible game of the split (eval.tasks must be their number)",
    }

    @classmethod
    def frozen_panel(
        cls, data_dir: Path, split: str, params: Mapping[str, Any], tasks: int, select: str = "first"
    ) -> tuple[list[dict[str, Any]], dict[str, str], dict[str, str]]:
        """The panel of the eligible games of `split` that `select` takes (sorted ids; PANEL_SELECTIONS), the hashes
        of their files (relative to `data_dir`) and the versions of the packages that play them
        (agentrepro.manifest.taskpanel)."""
        games = eligible_games(data_dir, split, where="env.split")
        if len(games) < tasks:
            raise BadInput(
                f"{len(games)} eligible games, fewer than eval.tasks ({tasks})",
                path=split_dir(data_dir, split),
                where="eval.tasks",
            )
        if select == "all" and len(games) != tasks:
            raise BadInput(
                f"eval.panel all takes every one of the {len(games)} eligible games, but eval.tasks is {tasks}",
                path=split_dir(data_dir, split),
                where="eval.tasks",
            )
        chosen = [read_game(data_dir, task_id, where="data.eval.path") for task_id in games[:tasks]]
        files: dict[str, str] = {}
        for game in chosen:
            files.update(game.files())
        return [panel_entry(game, params) for game in chosen], files, package_versions()

    @classmethod
    def panel_deviation(cls, data_dir: Path, split: str, panel: Sequence[Mapping[str, Any]], select: str) -> str:
        """The panel's composition beside its split's, one sentence for the lock's deviations: the choice, why, and
        the categories it leaves out or thins (verl-agent's own validation draws its games at random from all)."""
        games = eligible_games(data_dir, split, where="env.split")
        split_counts: dict[str, int] = {}
        for task_id in games:
            category = read_game(data_dir, task_id, where="data.eval.path").category
            split_counts[category] = split_counts.get(category, 0) + 1
        panel_counts: dict[str, int] = {}
        for entry in panel:
            panel_counts[entry["category"]] = panel_counts.get(entry["category"], 0) + 1
        missing = [
            f"{c} ({n - panel_counts.get(c, 0)} of {n})" for c, n in split_counts.items() if panel_counts.get(c, 0) < n
        ]
        mix = "; ".join(f"{c} {panel_counts.get(c, 0)}/{n}" for c, n in sorted(split_counts.items()))
        left = f"it leaves out {', '.join(missing)}" if missing else "it holds every eligible game"
        return (
            f"eval.panel = {select}: {len(panel)} of the {len(games)} eligible games of {split} ({cls.PANEL_SELECTIONS[select]}); "
            f"{left} (panel/split by category: {mix}), where verl-agent's own validation draws its "
            f"{len(panel)} games at random from all {len(games)} (env.seed + 1000 + i), so the category mix differs from "
            "the paper's evaluation"
        )

    def task_description(self, observation: str, info: dict[str, Any]) -> dict[str, Any]:
        return task_description(self.loaded, self.params)

    def task_category(self, info: dict[str, Any]) -> str:
        return self.loaded.category

    def task_entry(self, observation: str, info: dict[str, Any]) -> dict[str, Any]:
        return panel_entry(self.loaded, self.params)

    def turn_fields(self, info: dict[str, Any]) -> dict[str, Any]:
        return {
            "won": info["won"],
            "category": info["category"],
            "admissible": info["admissible"],
            "admissible_commands": info["admissible_commands"],
        }

    def show_fields(self) -> dict[str, Any]:
        return {
            "task_type": self.loaded.task_type,
            "category": self.loaded.category,
            "walkthrough": self.walkthrough(),
            "admissible_commands": list(self.admissible),
            "game_sha256": self.loaded.game_sha256,
            "traj_data_sha256": self.loaded.traj_sha256,
        }


def package_versions() -> dict[str, str]:
    """Installed versions of the packages that play ALFWorld (recorded in a lock that froze a panel of it)."""
    try:
        return {name: version(name) for name in ("alfworld", "textworld")}
    except PackageNotFoundError as exc:
        raise BadInput(
            f"package {exc} is not installed, and the lock records its version: pip install '.[alfworld]'",
            where="env.name",
        ) from None


def task_description(game: Game, params: Mapping[str, Any]) -> dict[str, Any]:
    """What an ALFWorld task's hash covers: the game's id, its two files' hashes and the parameters but `data_dir`."""
    return {
        "env": ALFWorld.name,
        "params": {k: v for k, v in params.items() if k != "data_dir"},
        "task_id": game.task_id,
        "game_sha256": game.game_sha256,
        "traj_data_sha256": game.traj_sha256,
    }


def panel_entry(game: Game, params: Mapping[str, Any]) -> dict[str, Any]:
    """The task panel's row of one game (no seed: the game is the task)."""
    return {
        "task_id": game.task_id,
        "task_hash": sha256_json(task_description(game, params)),
        "seed": None,
        "category": game.category,
    }
