"""Environment registry: names → environment classes, nothing else.

Everything about an environment (parameters, prompts, renderer, task description) lives in its class
(base.py); the registry looks a class up by its `name` and asks it. Registering a duplicate name, a class
without a name, without parameters or without prompts is an error at registration; an unknown name is
`BadInput` listing the known ones. Tests build their own `Registry` instead of changing the default one
(the pattern of lm-evaluation-harness's `lm_eval/api/registry.py`).

The module functions (`make_env`, `validate_params`, `task_description`, `task_panel`, `env_names`) use
the default registry, `REGISTRY`, which holds the built-in environments listed in `BUILTIN`.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterable
from typing import Any

from agentrepro.environments.alfworld import ALFWorld
from agentrepro.environments.base import Env
from agentrepro.environments.frozenlake import FrozenLake
from agentrepro.environments.seeds import parse_seed_ranges
from agentrepro.environments.sokoban import Sokoban
from agentrepro.errors import BadInput
from agentrepro.reading import MalformedJSON, check_string, parse_json

BUILTIN: tuple[type[Env], ...] = (Sokoban, FrozenLake, ALFWorld)


class Registry:
    """name → environment class (`Env` subclass); `make`, `validate_params` and `task_panel` by name."""

    def __init__(self, classes: Iterable[type[Env]] = ()) -> None:
        self._classes: dict[str, type[Env]] = {}
        for cls in classes:
            self.register(cls)

    def register(self, cls: type[Env]) -> type[Env]:
        """Add `cls` under `cls.name` (usable as a class decorator); ValueError if it cannot serve as one."""
        name = getattr(cls, "name", None)
        if not (isinstance(cls, type) and issubclass(cls, Env)) or inspect.isabstract(cls):
            raise ValueError(f"{cls!r} is not a concrete subclass of Env")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{cls.__qualname__} has no name")
        if name in self._classes:
            raise ValueError(f"environment {name!r} is already registered ({self._classes[name].__qualname__})")
        if not getattr(cls, "parameters", None):
            raise ValueError(f"{cls.__qualname__} declares no parameters")
        prompts = getattr(cls, "prompts", None)
        if prompts is None or not getattr(prompts, "formats", None):
            raise ValueError(f"{cls.__qualname__} declares no prompts (an environment never borrows another's)")
        defaults = {p.name: p.default for p in cls.parameters}
        if "prompt_format" in defaults and defaults["prompt_format"] not in prompts.formats:
            raise ValueError(
                f"{cls.__qualname__}: no prompt for its default prompt_format {defaults['prompt_format']!r}"
            )
        self._classes[name] = cls
        return cls

    def names(self) -> list[str]:
        return sorted(self._classes)

    def __contains__(self, name: object) -> bool:
        return name in self._classes

    def get(self, name: str) -> type[Env]:
        """The class registered as `name`; BadInput naming `env.name` and the known names otherwise."""
        if name not in self._classes:
            raise BadInput(f"unknown environment {name!r}; expected one of {', '.join(self.names())}", where="env.name")
        return self._classes[name]

    def validate_params(self, name: str, params: dict[str, Any] | None, *, path: object = None) -> dict[str, Any]:
        return self.get(name).validate_params(params, path=path)

    def make(self, name: str, params: dict[str, Any] | None = None) -> Env:
        """A fresh environment `name` with validated `params` (call `reset(seed)` before `step`)."""
        cls = self.get(name)
        return cls(cls.validate_params(params))

    def task_description(self, name: str, params: dict[str, Any] | None, seed: int) -> dict[str, Any]:
        """The canonical description of one task (what its `task_hash` covers)."""
        env = self.make(name, params)
        return env.task_description(*env.reset(seed))

    def task_panel(self, name: str, params: dict[str, Any] | None, seeds: Iterable[int | str]) -> list[dict[str, Any]]:
        """One row per task (`Env.task_entry`: task_id, task_hash, seed, category); a repeated task is BadInput.
        A task is what `reset` takes: a seed, or for ALFWorld a game directory."""
        env = self.make(name, params)
        rows, seen = [], set()
        for seed in seeds:
            if seed in seen:
                raise BadInput(f"seed {seed} appears twice in the task panel", where="eval.seeds")
            seen.add(seed)
            # a str is an ALFWorld game directory, which its reset (overriding Env's seed) takes
            rows.append(env.task_entry(*env.reset(seed)))  # type: ignore[arg-type]
        return rows


REGISTRY = Registry(BUILTIN)


def env_names() -> list[str]:
    return REGISTRY.names()


def validate_params(name: str, params: dict[str, Any] | None, *, path: object = None) -> dict[str, Any]:
    """Full parameters of environment `name` (defaults filled in); BadInput names `env.params.<key>`."""
    return REGISTRY.validate_params(name, params, path=path)


def make_env(name: str, params: dict[str, Any] | None = None) -> Env:
    return REGISTRY.make(name, params)


def task_description(name: str, params: dict[str, Any] | None, seed: int) -> dict[str, Any]:
    return REGISTRY.task_description(name, params, seed)


def task_panel(name: str, params: dict[str, Any] | None, seeds: Iterable[int]) -> list[dict[str, Any]]:
    return REGISTRY.task_panel(name, params, seeds)


def panel_packages(name: str, params: dict[str, Any] | None) -> dict[str, str]:
    """Package versions a generated panel of `name` with `params` depends on (`Env.panel_packages`)."""
    cls = REGISTRY.get(name)
    return cls.panel_packages(cls.validate_params(params, path=None))


def add_panel_options(group: Any, *, seeds_help: str) -> None:
    """`--env`, `--param NAME=VALUE` (repeatable) and `--seeds RANGES` on an argparse parser or group: a panel
    frozen from an environment's seeds on the command line (`eval --model`, `import`; `panel_of_options`)."""
    group.add_argument("--env", help="environment name (frozenlake, sokoban, ...)")
    group.add_argument(
        "--param", action="append", default=[], metavar="NAME=VALUE", help="environment parameter (repeatable)"
    )
    group.add_argument("--seeds", help=seeds_help)


def panel_of_options(env: str, items: list[str], seeds: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(validated full parameters, task panel) of the command line's `--env`, `--param` and `--seeds`."""
    params = parse_params(items, env)
    return params, task_panel(env, params, parse_seed_ranges(seeds))


def parse_params(items: list[str], env: str, data_dir: str | None = None) -> dict[str, Any]:
    """The command line's `--param k=v` (JSON or plain text; `--data-dir` too) → validated full parameters of `env`
    (BadInput names `--param k`): read by the env verb and the served evaluation's."""
    params: dict[str, Any] = {}
    if data_dir is not None:
        if "data_dir" not in {p.name for p in REGISTRY.get(env).parameters}:
            raise BadInput(f"environment {env!r} reads no data directory", where="--data-dir")
        items = [*items, "data_dir=" + json.dumps(data_dir)]
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise BadInput(f"expected NAME=VALUE, got {item!r}", where="--param")
        if key in params:
            raise BadInput("given twice", where=f"--param {key}")
        try:
            params[key] = parse_json(raw, where=f"--param {key}")
        except MalformedJSON:  # not JSON: the text itself
            params[key] = check_string(raw, where=f"--param {key}")
    try:
        return validate_params(env, params)
    except BadInput as exc:
        raise BadInput(str(exc).replace("env.params.", "--param ", 1)) from None
