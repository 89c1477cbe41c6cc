"""Estimators by name: `ESTIMATORS` and `estimate(batch, name, **options)`.

A `Registry` maps a name to a function `fn(batch, **options) -> AdvantageResult`; the options it accepts
are read from its signature. Duplicate names are errors; unknown names and options list the known ones;
an option given as None counts as not given (the fixtures and manifests write null for "not used").
Tests build their own Registry rather than changing the global one.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable

from agentrepro.algorithms.batch import StepBatch
from agentrepro.algorithms.gigpo import gigpo
from agentrepro.algorithms.graphgpo import graph_only, graphgpo
from agentrepro.algorithms.grpo import grpo
from agentrepro.algorithms.result import AdvantageResult

NUMERIC_RANGES = {"gamma": (0.0, 1.0), "omega": (0.0, 1.0), "epsilon": (0.0, 1.0), "invalid_penalty": (0.0, math.inf),
                  "step_weight": (-math.inf, math.inf), "episode_weight": (-math.inf, math.inf)}
"""Allowed closed ranges of the numeric options (non-finite values are always refused)."""
OPTION_CHOICES = {"norm": ("std", "mean"), "episode_stats": ("rows", "trajectories"), "reward_form": ("code", "paper")}


class UnknownEstimator(KeyError, ValueError):
    """An estimator name that is not registered; the message lists the registered ones."""

    def __str__(self) -> str:
        return str(self.args[0])


class Registry:
    """name → estimator function, with the option names and defaults taken from the function's signature."""

    def __init__(self) -> None:
        self._fns: dict[str, Callable[..., AdvantageResult]] = {}
        self._defaults: dict[str, dict] = {}

    def register(self, name: str, fn: Callable[..., AdvantageResult], *, defaults_from: Callable | None = None) -> None:
        if name in self._fns:
            raise ValueError(f"estimator {name!r} is already registered")
        params = inspect.signature(defaults_from or fn).parameters
        self._fns[name] = fn
        self._defaults[name] = {k: p.default for k, p in list(params.items())[1:] if p.default is not inspect.Parameter.empty}

    def names(self) -> list[str]:
        return sorted(self._fns)

    def __contains__(self, name: str) -> bool:
        return name in self._fns

    def defaults(self, name: str) -> dict:
        """The options `name` accepts, with their defaults."""
        self._check(name)
        return dict(self._defaults[name])

    def _check(self, name: str) -> None:
        if name not in self._fns:
            raise UnknownEstimator(f"unknown estimator {name!r}; known: {', '.join(self.names())}")

    def resolve(self, name: str, options: dict) -> dict:
        """The full option dict for `name` (defaults updated with the non-None `options`); ValueError on bad ones."""
        allowed = self.defaults(name)
        given = {k: v for k, v in options.items() if v is not None}
        unknown = sorted(set(given) - set(allowed))
        if unknown:
            raise ValueError(f"option(s) {', '.join(unknown)} do not apply to estimator {name!r}; "
                             f"it takes: {', '.join(sorted(allowed))}")
        for key, value in given.items():
            if key in OPTION_CHOICES:
                if value not in OPTION_CHOICES[key]:
                    raise ValueError(f"option {key} must be one of {', '.join(OPTION_CHOICES[key])}, got {value!r}")
                continue
            low, high = NUMERIC_RANGES.get(key, (-math.inf, math.inf))
            if isinstance(allowed[key], float) and (
                    isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
                    or not low <= value <= high):
                raise ValueError(f"option {key} must be a number in [{low:g}, {high:g}], got {value!r}")
        return {**allowed, **given}

    def estimate(self, batch: StepBatch, name: str, **options) -> AdvantageResult:
        resolved = self.resolve(name, options)
        result = self._fns[name](batch, **resolved)
        result.estimator, result.options = name, resolved
        return result


def _graph_only_defaults(batch, *, norm="std", omega=0.1, step_weight=1.0, episode_weight=0.0, invalid_penalty=0.1,
                         episode_stats="rows", epsilon=1e-6, reward_form="code"):
    """Signature of graph_only's options (episode_weight accepted only as 0)."""


def default_registry() -> Registry:
    """A fresh registry holding grpo, gigpo, graphgpo and graph_only."""
    reg = Registry()
    reg.register("grpo", grpo)
    reg.register("gigpo", gigpo)
    reg.register("graphgpo", graphgpo)
    reg.register("graph_only", graph_only, defaults_from=_graph_only_defaults)
    return reg


ESTIMATORS = default_registry()


def estimate(batch: StepBatch, name: str, *, registry: Registry = ESTIMATORS, **options) -> AdvantageResult:
    """Run estimator `name` on `batch`; `options` are those of docs/design.md §3.5 (norm, gamma, omega, step_weight,
    episode_weight, invalid_penalty, episode_stats, reward_form) plus epsilon. See Registry.resolve."""
    return registry.estimate(batch, name, **options)
