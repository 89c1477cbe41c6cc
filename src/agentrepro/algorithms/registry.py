"""Estimators by name: `ESTIMATORS` and `estimate(batch, name, **options)`.

A `Registry` maps a name to its `EstimatorSpec` (spec.py): the function and the options it takes, with
their defaults and allowed values. Duplicate names are errors; unknown names and options list the known
ones; an option given as None counts as not given (the fixtures and manifests write null for "not used").
Tests build their own Registry rather than changing the global one.
"""

from __future__ import annotations

from agentrepro.algorithms.batch import StepBatch
from agentrepro.algorithms.result import AdvantageResult
from agentrepro.algorithms.spec import SPECS, EstimatorSpec


class UnknownEstimator(KeyError, ValueError):
    """An estimator name that is not registered; the message lists the registered ones."""

    def __str__(self) -> str:
        return str(self.args[0])


class Registry:
    """name → EstimatorSpec."""

    def __init__(self) -> None:
        self._specs: dict[str, EstimatorSpec] = {}

    def register(self, spec: EstimatorSpec) -> None:
        if spec.name in self._specs:
            raise ValueError(f"estimator {spec.name!r} is already registered")
        self._specs[spec.name] = spec

    def names(self) -> list[str]:
        return sorted(self._specs)

    def specs(self) -> list[EstimatorSpec]:
        """The registered specs, in registration order."""
        return list(self._specs.values())

    def __contains__(self, name: str) -> bool:
        return name in self._specs

    def spec(self, name: str) -> EstimatorSpec:
        if name not in self._specs:
            raise UnknownEstimator(f"unknown estimator {name!r}; known: {', '.join(self.names())}")
        return self._specs[name]

    def defaults(self, name: str) -> dict:
        """The options `name` accepts, with their defaults (pinned options with their one value)."""
        return self.spec(name).defaults()

    def resolve(self, name: str, options: dict) -> dict:
        """The full option dict of a step-row call of `name` (defaults updated with the non-None `options`);
        ValueError on bad options, or when `name` needs a critic (its advantages cannot come from step rows)."""
        spec = self.spec(name)
        allowed = spec.defaults()
        given = {k: v for k, v in options.items() if v is not None}
        unknown = sorted(set(given) - set(allowed))
        if unknown:
            raise ValueError(
                f"option(s) {', '.join(unknown)} do not apply to estimator {name!r}; "
                f"it takes: {', '.join(sorted(allowed))}"
            )
        declared = {o.name: o for o in spec.options}
        for key, value in given.items():
            if key in spec.fixed:
                if value != spec.fixed[key]:
                    raise ValueError(
                        f"estimator {name!r} has {key} {spec.fixed[key]!r}; got {value!r}"
                        + (f" (use {spec.variant_of})" if spec.variant_of else "")
                    )
                continue
            expected = declared[key].expected(value)
            if expected:
                raise ValueError(f"option {key} must be {expected}, got {value!r}")
        if spec.fn is None:
            raise ValueError(
                f"estimator {name!r} needs a critic: its advantages are GAE over a value head's predictions, "
                "which step rows do not hold (the trainer computes them; `agentrepro gae` on token rows)"
            )
        return {**allowed, **given}

    def estimate(self, batch: StepBatch, name: str, **options) -> AdvantageResult:
        resolved = self.resolve(name, options)
        fn = self.spec(name).fn
        assert fn is not None  # resolve refuses an estimator without one
        result = fn(batch, **resolved)
        result.estimator, result.options = name, resolved
        return result


def default_registry() -> Registry:
    """A fresh registry holding the shipped estimators (spec.SPECS)."""
    reg = Registry()
    for spec in SPECS:
        reg.register(spec)
    return reg


ESTIMATORS = default_registry()


def estimate(batch: StepBatch, name: str, *, registry: Registry = ESTIMATORS, **options) -> AdvantageResult:
    """Run estimator `name` on `batch`; `options` are those of its spec (docs/design.md §3.5). See Registry.resolve."""
    return registry.estimate(batch, name, **options)
