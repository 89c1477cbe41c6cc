"""Registry: names to classes (own registries in tests), parameter validation with defaults, the task panel contract."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from agentrepro import environments
from agentrepro.environments import Env, make_env, task_description, task_panel, validate_params
from agentrepro.environments.base import grid_text, turn_parameters
from agentrepro.environments.frozenlake import FrozenLake
from agentrepro.environments.params import Param, integer, one_of
from agentrepro.environments.prompts import GridPrompts
from agentrepro.environments.registry import REGISTRY, Registry
from agentrepro.environments.sokoban import Sokoban
from agentrepro.errors import BadInput
from agentrepro.fileio import sha256_json


def test_defaults_are_the_reference_configs():
    """Empty params give VAGEN's class defaults (num_gen_steps resolved as int(1.7·(rows+cols)))."""
    sok = validate_params("sokoban", {})
    assert (
        sok["dim_room"],
        sok["num_gen_steps"],
        sok["max_actions_per_step"],
        sok["format_reward"],
        sok["prompt_format"],
        sok["min_solution_steps"],
    ) == ([6, 6], 20, 3, 0.1, "wm", None)
    fl = validate_params("frozenlake", None)
    assert (
        fl["size"],
        fl["p"],
        fl["is_slippery"],
        fl["max_actions_per_step"],
        fl["format_reward"],
        fl["prompt_format"],
    ) == (4, 0.8, False, 5, 0.02, "free_think")
    assert isinstance(make_env("sokoban", {}), Sokoban) and isinstance(make_env("frozenlake", {}), FrozenLake)


@pytest.mark.parametrize(
    "name,params,key",
    [
        ("sokoban", {"dim_rooms": [6, 6]}, "env.params.dim_rooms"),
        ("sokoban", {"min_solution_steps": [5, 1]}, "env.params.min_solution_steps"),
        ("sokoban", {"max_actions_per_step": True}, "env.params.max_actions_per_step"),
        ("sokoban", {"prompt_format": "json"}, "env.params.prompt_format"),
        ("sokoban", {"num_boxes": 2}, "env.params.num_boxes"),
        ("frozenlake", {"is_slippery": True}, "env.params.is_slippery"),
        ("frozenlake", {"p": 1.5}, "env.params.p"),
        ("frozenlake", {"prompt_format": "free_wm"}, "env.params.prompt_format"),
        ("frozenlake", {"desc": ["SF", "FFF"]}, "env.params.desc"),
        ("frozenlake", {"format_reward": float("nan")}, "env.params.format_reward"),
    ],
)
def test_bad_params_name_the_key(name, params, key):
    """Unknown keys and ill-typed values are BadInput naming env.params.<key>."""
    with pytest.raises(BadInput, match=key.replace(".", r"\.")):
        validate_params(name, params, path="manifests/x.yaml")


def test_unknown_environment_lists_alternatives():
    """An unknown environment name is BadInput listing the known ones."""
    with pytest.raises(BadInput, match="alfworld, frozenlake, sokoban"):
        make_env("webshop", {})


def test_task_panel_contract():
    """task_id = name-seed, category = name, hash = SHA-256 of the canonical task description; seeds unique."""
    panel = task_panel("frozenlake", {}, [3, 1, 2])
    assert [row["task_id"] for row in panel] == ["frozenlake-3", "frozenlake-1", "frozenlake-2"]
    assert all(row["category"] == "frozenlake" for row in panel)
    for row in panel:
        assert row["task_hash"] == sha256_json(task_description("frozenlake", {}, row["seed"]))
    assert len({row["task_hash"] for row in panel}) == 3
    with pytest.raises(BadInput, match="twice"):
        task_panel("frozenlake", {}, [1, 1])


def test_task_hash_binds_params_and_content():
    """The hash changes with any parameter (even one not visible in the grid) and with the seed."""
    base = task_panel("sokoban", {}, [5])[0]["task_hash"]
    assert task_panel("sokoban", {"format_reward": 0.2}, [5])[0]["task_hash"] != base
    assert task_panel("sokoban", {}, [6])[0]["task_hash"] != base
    assert task_panel("sokoban", {"num_gen_steps": 20}, [5])[0]["task_hash"] == base  # explicit default = default


# -- the registry only maps names to classes; each class carries its own parameters and prompts ----------
class Corridor(Env):
    """A third environment for these tests: a 1×n corridor, walk right to the goal."""

    name = "corridor"
    grid_symbols = ("P", "_", "G")
    prompts = GridPrompts(
        guide="You are a Corridor walker.",
        examples={"free_think": "\nExample: <answer>Right</answer>\n"},
        wm_goal="goal",
        wm_other="wall",
    )
    parameters = (
        Param("length", 3, integer(2), "cells in the corridor"),
        *turn_parameters(prompts.formats, prompt_format="free_think", max_actions_per_step=2, format_reward=0.5),
    )

    def _generate(self, seed):
        self.pos = seed % (self.params["length"] - 1)

    def _apply(self, action):
        self.pos = max(0, min(self.params["length"] - 1, self.pos + {"left": -1, "right": 1}.get(action, 0)))

    def _terminal(self):
        at_goal = self.pos == self.params["length"] - 1
        return at_goal, at_goal

    def render(self):
        return grid_text(
            [
                [
                    "P" if c == self.pos else ("G" if c == self.params["length"] - 1 else "_")
                    for c in range(self.params["length"])
                ]
            ]
        )

    def player_position(self):
        return (0, self.pos)

    def solve(self):
        return ["right"] * (self.params["length"] - 1 - self.pos)


def test_third_environment_uses_its_own_prompt_and_parameters():
    """A class registered in a test's own registry plays with its own prompt, parameters and task ids."""
    registry = Registry([Sokoban, Corridor])
    env = registry.make("corridor", {"length": 4})
    assert env.system_prompt().startswith("You are a Corridor walker.\nYou can take up to 2 action(s)")
    assert "FrozenLake" not in env.system_prompt() and "Sokoban" not in env.system_prompt()
    observation, info = env.reset(0)
    assert info["grid"] == " P  _  _  G " and observation.startswith("[Initial Observation]:")
    _, reward, done, info = env.step(env.format_actions(["right", "right"]))
    assert (reward, done, info["actions"]) == (0.5, False, ["right", "right"])
    panel = registry.task_panel("corridor", {"length": 4}, [1, 2])
    assert [(r["task_id"], r["category"]) for r in panel] == [("corridor-1", "corridor"), ("corridor-2", "corridor")]
    with pytest.raises(BadInput, match=r"env\.params\.prompt_format"):  # it has no wm prompt: never another's
        registry.validate_params("corridor", {"prompt_format": "wm"})
    assert "corridor" not in REGISTRY and registry.names() == ["corridor", "sokoban"]


def test_registry_rejects_duplicates_and_lists_alternatives():
    """Duplicate names are errors at registration; an unknown name is BadInput listing the registry's names."""
    registry = Registry([Corridor])
    with pytest.raises(ValueError, match="already registered"):
        registry.register(Corridor)
    with pytest.raises(BadInput, match=r"unknown environment 'maze'; expected one of corridor") as info:
        registry.make("maze")
    assert info.value.where == "env.name"


def test_registry_rejects_an_environment_without_prompts():
    """A class that declares no prompts (or none for its default format) cannot be registered."""

    class Silent(Corridor):
        name = "silent"
        prompts = None

    class WrongDefault(Corridor):
        name = "wrong"
        parameters = (
            *Corridor.parameters[:2],
            Param("prompt_format", "wm", one_of("wm"), "format"),
            *Corridor.parameters[3:],
        )

    with pytest.raises(ValueError, match="declares no prompts"):
        Registry([Silent])
    with pytest.raises(ValueError, match="no prompt for its default prompt_format 'wm'"):
        Registry([WrongDefault])
    with pytest.raises(ValueError, match="examples must be given"):
        GridPrompts(guide="g", examples={"json": "x"}, wm_goal="a", wm_other="b")


REFERENCE_NAMES = {
    "sokoban": {
        "dim_room",
        "num_boxes",
        "min_solution_steps",
        "max_actions_per_step",
        "prompt_format",
        "format_reward",
        "success_reward",
    },
    "frozenlake": {
        "size",
        "p",
        "is_slippery",
        "max_actions_per_step",
        "prompt_format",
        "format_reward",
        "success_reward",
    },
}


@pytest.mark.parametrize("name", sorted(REFERENCE_NAMES))
def test_declared_parameters_are_complete_and_consistent(name):
    """Each class declares the reference's names, each with help and a default its own check accepts."""
    cls = REGISTRY.get(name)
    declared = [p.name for p in cls.parameters]
    assert REFERENCE_NAMES[name] <= set(declared) and len(declared) == len(set(declared))
    for param in cls.parameters:
        assert param.help and param.check(param.default) == param.default, param.name


@pytest.mark.parametrize("cls", [Sokoban, FrozenLake])
def test_symbols_are_declared_by_the_class_and_named_in_its_guide(cls):
    """The renderer's symbols are exactly the class's grid_symbols, and the guide's legend names each one."""
    env = cls(cls.validate_params({}))
    symbols = set()
    for seed in range(40):
        env.reset(seed)
        for action in env.solve() or ["up"]:
            symbols |= set(env.render().split())
            env.step(env.format_actions([action]))
        symbols |= set(env.render().split())
    assert symbols <= set(cls.grid_symbols) and len(symbols) >= len(cls.grid_symbols) - 1
    legend = next(line for line in cls.prompts.guide.splitlines() if "|" in line)
    assert {entry.split()[0] for entry in legend.split("|")} == set(cls.grid_symbols)


def test_no_environment_name_outside_its_class():
    """No module of the package outside an environment's own module holds a registered name as a literal."""
    package = Path(environments.__file__).parent
    own = {sys.modules[REGISTRY.get(n).__module__].__file__ for n in REGISTRY.names()}
    offenders = []
    for path in sorted(package.glob("*.py")):
        if str(path) in own:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in REGISTRY.names():
                offenders.append(f"{path.name}:{node.lineno} {node.value!r}")
    assert len(own) == 3 and offenders == []
