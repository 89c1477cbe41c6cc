"""The estimator registry: names, duplicates, options and defaults; tests use their own registry."""

from __future__ import annotations

import pytest

from agentrepro.algorithms import (
    ESTIMATORS,
    EstimatorSpec,
    Option,
    Registry,
    StepBatch,
    UnknownEstimator,
    default_registry,
    estimate,
)
from agentrepro.algorithms.result import AdvantageResult

ROW = {
    "group": "g",
    "traj": "t",
    "turn": 0,
    "state": "s",
    "next_state": "success",
    "reward": 10.0,
    "episode_reward": 10.0,
    "valid": True,
    "success": True,
}


def test_default_names():
    """The shipped registry holds the estimators of the study manifests, PPO included, with their defaults."""
    assert ESTIMATORS.names() == ["gigpo", "graph_only", "graphgpo", "grpo", "ppo"]
    assert ESTIMATORS.defaults("graph_only")["episode_weight"] == 0.0
    assert ESTIMATORS.defaults("gigpo")["gamma"] == 0.95 and ESTIMATORS.defaults("graphgpo")["omega"] == 0.1
    assert ESTIMATORS.defaults("ppo") == {"gamma": 0.95, "lam": 1.0, "value_coef": 0.5}
    assert {n: ESTIMATORS.defaults(n).get("norm") for n in ESTIMATORS.names()} == {
        "gigpo": "std",
        "graph_only": "std",
        "graphgpo": "std",
        "grpo": "std",
        "ppo": None,
    }


def test_unknown_name_lists_known_ones():
    """An unknown estimator raises UnknownEstimator (a KeyError and ValueError) listing the registered names."""
    with pytest.raises(
        UnknownEstimator, match="unknown estimator 'dqn'; known: gigpo, graph_only, graphgpo, grpo, ppo"
    ):
        estimate(StepBatch.from_rows([ROW]), "dqn")


def test_an_estimator_that_needs_a_critic_has_no_step_row_advantages():
    """ppo is registered (its options are checked) but estimate() on step rows says it needs a critic."""
    with pytest.raises(ValueError, match="ppo' needs a critic"):
        estimate(StepBatch.from_rows([ROW]), "ppo", lam=0.9)
    with pytest.raises(ValueError, match=r"option lam must be a number in \[0, 1\]"):
        estimate(StepBatch.from_rows([ROW]), "ppo", lam=2.0)


def test_duplicate_registration_is_an_error_and_registries_are_separate():
    """Registering a name twice fails; a test's own registry does not touch the global one."""
    reg = Registry()

    def const(batch, *, value: float = 1.0):
        import numpy as np

        return AdvantageResult("const", {}, advantage=np.full(len(batch), value))

    spec = EstimatorSpec("const", "a constant advantage", (Option("value", float, 1.0, "the advantage"),), fn=const)
    reg.register(spec)
    with pytest.raises(ValueError, match="already registered"):
        reg.register(spec)
    assert "const" not in ESTIMATORS and "const" in reg
    res = estimate(StepBatch.from_rows([ROW]), "const", registry=reg, value=2.5)
    assert res.advantage.tolist() == [2.5] and res.options == {"value": 2.5} and res.estimator == "const"
    assert default_registry().names() == ESTIMATORS.names()


def test_options_are_checked_and_none_means_default():
    """Inapplicable options and bad choices are errors; None stands for "not given" (fixture nulls)."""
    batch = StepBatch.from_rows([ROW])
    with pytest.raises(ValueError, match="omega do not apply to estimator 'grpo'"):
        estimate(batch, "grpo", omega=0.1)
    with pytest.raises(ValueError, match="norm must be one of std, mean"):
        estimate(batch, "grpo", norm="max")
    res = estimate(batch, "gigpo", gamma=None, omega=None)
    assert res.options["gamma"] == 0.95 and "omega" not in res.options


@pytest.mark.parametrize(
    "option, value",
    [
        ("gamma", 1.5),
        ("omega", -0.1),
        ("epsilon", float("nan")),
        ("invalid_penalty", "0.1"),
        ("step_weight", float("inf")),
        ("gamma", True),
    ],
)
def test_numeric_options_are_range_checked(option, value):
    """Out-of-range, non-finite, boolean or string numeric options are refused, naming the option."""
    name = "gigpo" if option == "gamma" else "graphgpo"
    with pytest.raises(ValueError, match=f"option {option} must be a number"):
        estimate(StepBatch.from_rows([ROW]), name, **{option: value})
