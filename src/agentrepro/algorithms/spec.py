"""One declaration per advantage estimator: the options it takes (name, type, default, help, allowed values)
and what it needs. Every other place that names an estimator or one of its options is derived from `SPECS`:

* the registry's names and option checking (registry.py),
* the `agentrepro advantages` flags and their help (cli/advantages.py),
* the builtin trainer's estimator fields, their validation and its dispatch (trainer/config.py, trainer/credit.py),
* the options the parity check reads from a run's resolved config (analysis/parity.py),
* the training config's JSON Schema (workflow/schemas/train_config.schema.json, written by
  `python -m agentrepro.trainer.schema`; a test keeps it in step).

An option is one `Option` object shared by every estimator that takes it, so it has one default everywhere
(the trainer's `train` block is one flat namespace). `norm` defaults to `std`, verl-agent's behaviour; a study
that wants `mean` says so in its manifest. An estimator may pin an option instead of taking it (`fixed`:
graph_only is graphgpo with episode_weight 0); such a variant is named by its parent in a trainer config.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from agentrepro.algorithms.gigpo import gigpo
from agentrepro.algorithms.graphgpo import graph_only, graphgpo
from agentrepro.algorithms.grpo import grpo


@dataclass(frozen=True)
class Option:
    """One estimator option: a float in the closed range [low, high] (always finite), or a str among `choices`."""

    name: str
    type: type
    default: Any
    help: str
    choices: tuple[str, ...] = ()
    low: float = -math.inf
    high: float = math.inf

    def expected(self, value: Any) -> str | None:
        """None when `value` is allowed, else what was expected ("one of ...", "a number in [a, b]")."""
        if self.choices:
            return None if value in self.choices else "one of " + ", ".join(self.choices)
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or not self.low <= value <= self.high
        ):
            return f"a number in [{self.low:g}, {self.high:g}]"
        return None

    def describe(self) -> str:
        """The help line with the allowed values and the default, as the CLI and the schema show it."""
        allowed = "|".join(self.choices) if self.choices else f"[{self.low:g}, {self.high:g}]"
        return (
            f"{self.help}; {allowed}, default {self.default:g}"
            if self.type is float
            else f"{self.help}; {allowed}, default {self.default}"
        )


@dataclass(frozen=True)
class EstimatorSpec:
    """An estimator: its name, a one-line description, the options it takes and how its advantages are computed.

    `fn(batch: StepBatch, **options) -> AdvantageResult` computes advantages from step rows; an estimator that
    `needs_critic` has none: its advantages are GAE over a value head's predictions, which only a trainer has
    (the builtin trainer's trainer/credit.py). `fixed` pins options to one value (accepted only with that value).
    """

    name: str
    help: str
    options: tuple[Option, ...]
    fn: Callable | None = None
    needs_critic: bool = False
    fixed: Mapping[str, Any] = field(default_factory=dict)
    variant_of: str | None = None

    def __post_init__(self) -> None:
        if (self.fn is None) != self.needs_critic:
            raise ValueError(f"estimator {self.name!r}: give fn (step rows) or needs_critic, exactly one")
        object.__setattr__(self, "fixed", MappingProxyType(dict(self.fixed)))

    @property
    def step_rows(self) -> bool:
        """Whether advantages come from step rows alone (`agentrepro advantages`, the parity check)."""
        return self.fn is not None

    def defaults(self) -> dict[str, Any]:
        """Every option with its default, pinned ones included."""
        return {**{o.name: o.default for o in self.options}, **self.fixed}


# --- the options (docs/design.md §3.5) -----------------------------------------------------------
NORM = Option(
    "norm", str, "std", "group normalisation: std (x - mean)/(std + epsilon) | mean (x - mean)", choices=("std", "mean")
)
EPSILON = Option("epsilon", float, 1e-6, "added to the group std before dividing (norm std)", low=0.0, high=1.0)
INVALID_PENALTY = Option(
    "invalid_penalty", float, 0.1, "subtracted from a turn's score when its action was invalid", low=0.0
)
EPISODE_STATS = Option(
    "episode_stats",
    str,
    "rows",
    "episode mean/std over step rows (reference) | each trajectory once",
    choices=("rows", "trajectories"),
)
EPISODE_WEIGHT = Option("episode_weight", float, 1.0, "weight of the episode-level advantage (0 = graph-only)")
STEP_WEIGHT = Option("step_weight", float, 1.0, "weight of the step-level advantage")
GAMMA = Option("gamma", float, 0.95, "discount of the step returns (gigpo) or of GAE (ppo)", low=0.0, high=1.0)
OMEGA = Option("omega", float, 0.1, "GraphGPO distance decay of the graph reward 10*omega^d", low=0.0, high=1.0)
REWARD_FORM = Option(
    "reward_form",
    str,
    "code",
    "GraphGPO graph reward 10*omega^d (code, reference) | 10*omega^(d+1) (paper)",
    choices=("code", "paper"),
)
LAM = Option("lam", float, 1.0, "GAE lambda", low=0.0, high=1.0)
VALUE_COEF = Option("value_coef", float, 0.5, "value-loss coefficient of the critic", low=0.0)

_EPISODE = (NORM, INVALID_PENALTY, EPISODE_STATS, EPSILON, EPISODE_WEIGHT)
_GRAPH = (*_EPISODE, OMEGA, STEP_WEIGHT, REWARD_FORM)

SPECS: tuple[EstimatorSpec, ...] = (
    EstimatorSpec("grpo", "GRPO: episode score normalised within its group", _EPISODE, fn=grpo),
    EstimatorSpec(
        "gigpo",
        "GiGPO: episode term + discounted step returns grouped by anchor state",
        (*_EPISODE, GAMMA, STEP_WEIGHT),
        fn=gigpo,
    ),
    EstimatorSpec(
        "graphgpo", "GraphGPO: episode term + graph rewards 10*omega^d grouped by source state", _GRAPH, fn=graphgpo
    ),
    EstimatorSpec(
        "graph_only",
        "GraphGPO's graph step term alone",
        tuple(o for o in _GRAPH if o is not EPISODE_WEIGHT),
        fn=graph_only,
        fixed={"episode_weight": 0.0},
        variant_of="graphgpo",
    ),
    EstimatorSpec(
        "ppo",
        "PPO: token-level GAE over a value head's predictions, whitened over generated tokens",
        (GAMMA, LAM, VALUE_COEF),
        needs_critic=True,
    ),
)
"""The shipped estimators, in the order the CLI and the schema list them."""


def all_options(specs: tuple[EstimatorSpec, ...] = SPECS) -> tuple[Option, ...]:
    """Every option of `specs`, each once, in order of first appearance; ValueError if two differ under one name."""
    seen: dict[str, Option] = {}
    for spec in specs:
        for option in spec.options:
            if seen.setdefault(option.name, option) != option:
                raise ValueError(f"option {option.name!r} is declared twice with different settings ({spec.name})")
    return tuple(seen.values())


def option_help(option: Option, specs: tuple[EstimatorSpec, ...] = SPECS) -> str:
    """`Option.describe()` plus which of `specs` pin it and which take it (the CLI's and the schema's help)."""
    pinned = [f"{s.name}: {s.fixed[option.name]:g}" for s in specs if option.name in s.fixed]
    users = [s.name for s in specs if option in s.options]
    return f"{option.describe()}{' (' + ', '.join(pinned) + ')' if pinned else ''}; taken by {', '.join(users)}"


def trainer_specs(specs: tuple[EstimatorSpec, ...] = SPECS) -> tuple[EstimatorSpec, ...]:
    """The estimators a trainer config names (variants are named by their parent and the pinned options)."""
    return tuple(s for s in specs if s.variant_of is None)
