"""The estimator specs are the one declaration: every place that names an estimator or an option agrees with them."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import math
import typing
from pathlib import Path

import jsonschema
import pytest

from agentrepro.algorithms import ESTIMATORS, SPECS, EstimatorSpec, Option
from agentrepro.algorithms.spec import all_options, trainer_specs
from agentrepro.errors import BadInput

SCHEMA = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "train_config.schema.json"
TRAINER = trainer_specs()
TRAINER_OPTIONS = all_options(TRAINER)


def _bad_value(option: Option):
    """A value the option refuses."""
    if option.choices:
        return "nope"
    return (
        option.high + 1 if math.isfinite(option.high) else (option.low - 1 if math.isfinite(option.low) else math.nan)
    )


def test_every_estimator_is_registered_and_ppo_needs_a_critic():
    """The registry holds exactly the specs; PPO is an entry whose capability is needing a critic."""
    assert ESTIMATORS.specs() == list(SPECS)
    assert [s.name for s in SPECS] == ["grpo", "gigpo", "graphgpo", "graph_only", "ppo"]
    assert [s.name for s in SPECS if s.needs_critic] == ["ppo"]
    assert ESTIMATORS.spec("graph_only").variant_of == "graphgpo"


def test_reference_functions_default_to_the_spec():
    """Each step-row function's keyword options and defaults are the spec's (norm std everywhere, verl-agent's)."""
    for spec in SPECS:
        params = (
            {k: p.default for k, p in inspect.signature(spec.fn).parameters.items() if p.kind is p.KEYWORD_ONLY}
            if spec.fn
            else {}
        )
        if spec.variant_of:  # graph_only forwards to its parent with the pinned options
            parent = ESTIMATORS.spec(spec.variant_of)
            assert spec.defaults() == {**parent.defaults(), **spec.fixed}, spec.name
        elif spec.fn is not None:
            assert params == spec.defaults(), spec.name
    assert {s.defaults()["norm"] for s in SPECS if "norm" in s.defaults()} == {"std"}


def test_one_option_has_one_declaration():
    """An option shared by estimators is one object; two different declarations under one name are refused."""
    assert len({o.name for o in all_options()}) == len(all_options())
    one = Option("x", float, 1.0, "x")
    other = dataclasses.replace(one, default=2.0)
    fn = ESTIMATORS.spec("grpo").fn
    with pytest.raises(ValueError, match="option 'x' is declared twice"):
        all_options((EstimatorSpec("a", "a", (one,), fn=fn), EstimatorSpec("b", "b", (other,), fn=fn)))
    with pytest.raises(ValueError, match="exactly one"):
        EstimatorSpec("c", "c", (one,), fn=fn, needs_critic=True)


def test_options_check_choices_ranges_and_finiteness():
    """Option.expected accepts the declared values and names what it expected otherwise."""
    norm = ESTIMATORS.spec("grpo").options[0]
    gamma = next(o for o in all_options() if o.name == "gamma")
    assert norm.expected("mean") is None and norm.expected("max") == "one of std, mean"
    assert gamma.expected(1) is None and gamma.expected(1.5) == "a number in [0, 1]"
    assert gamma.expected(True) and gamma.expected(math.nan) and gamma.expected("0.5")


def test_train_config_fields_are_the_trainer_estimators_options():
    """TrainConfig has one field per option (type and default from the spec) and names exactly the trainer estimators."""
    from agentrepro.trainer.config import ESTIMATORS as CONFIG_ESTIMATORS
    from agentrepro.trainer.config import TrainConfig

    fields = {f.name: f.default for f in dataclasses.fields(TrainConfig)}
    hints = typing.get_type_hints(TrainConfig)
    for option in TRAINER_OPTIONS:
        assert fields[option.name] == option.default and hints[option.name] is option.type, option.name
    assert (
        CONFIG_ESTIMATORS
        == tuple(s.name for s in SPECS if s.variant_of is None)
        == ("grpo", "gigpo", "graphgpo", "ppo")
    )
    for spec in TRAINER:
        cfg = TrainConfig(estimator=spec.name)
        assert cfg.estimator_options == {o.name: o.default for o in spec.options}
        assert cfg.uses_value is spec.needs_critic


@pytest.mark.parametrize("option", TRAINER_OPTIONS, ids=lambda o: o.name)
def test_train_config_and_schema_refuse_what_the_spec_refuses(option):
    """A value outside an option's declared values is refused by TrainConfig (naming train.<key>) and by the schema."""
    from agentrepro.trainer.config import TrainConfig

    bad = _bad_value(option)
    with pytest.raises(BadInput, match=rf"train\.{option.name}: expected"):
        TrainConfig.from_dict({option.name: bad})
    schema = json.loads(SCHEMA.read_text())
    if not (isinstance(bad, float) and math.isnan(bad)):  # JSON has no NaN: YAML's .nan is refused by TrainConfig alone
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({option.name: bad}, schema)
    jsonschema.validate({option.name: option.default}, schema)


def test_schema_is_generated_from_the_spec():
    """workflow/schemas/train_config.schema.json is what `python -m agentrepro.trainer.schema` writes from the specs."""
    from agentrepro.schema import dump
    from agentrepro.trainer import schema as generator

    current = json.loads(SCHEMA.read_text())
    assert SCHEMA.read_text() == dump(generator.render(current))
    assert current["properties"]["estimator"]["enum"] == [s.name for s in TRAINER]
    for option in TRAINER_OPTIONS:
        prop = current["properties"][option.name]
        assert prop["default"] == option.default and option.help in prop["description"]
        assert prop.get("enum", list(option.choices) or None) == (list(option.choices) or None)


def test_advantages_flags_are_the_step_row_options():
    """`agentrepro advantages` has one flag per option of a step-row estimator, with the spec's type and choices."""
    from agentrepro.cli import advantages as cli_advantages

    parser = argparse.ArgumentParser()
    cli_advantages.add_arguments(parser)
    actions = {a.dest: a for a in parser._actions}
    step_row = all_options(tuple(s for s in SPECS if s.step_rows))
    assert {o.name for o in cli_advantages.OPTIONS} == {o.name for o in step_row}
    for option in step_row:
        action = actions[option.name]
        assert action.option_strings == ["--" + option.name.replace("_", "-")]
        if option.default is not None:  # the flag's parser (a range-checking one for numbers) gives the spec's type
            parsed = action.type(str(option.default)) if action.type else str(option.default)
            assert type(parsed) is option.type and parsed == option.default
        assert tuple(action.choices or ()) == option.choices and option.help in action.help
    assert "lam" not in actions and "value_coef" not in actions  # ppo's options: no step-row estimator takes them


def test_parity_reads_every_option():
    """The parity check reads every declared option from a run's resolved train block."""
    from agentrepro.analysis.parity import OPTION_KEYS

    assert set(OPTION_KEYS) == {o.name for o in all_options()}


def test_schema_generator_rewrites_a_stale_copy(tmp_path):
    """`python -m agentrepro.trainer.schema FILE` restores a schema whose estimator part was edited by hand."""
    from agentrepro.trainer import schema as generator

    stale = json.loads(SCHEMA.read_text())
    stale["properties"]["norm"]["default"] = "mean"
    del stale["properties"]["lam"]
    path = tmp_path / "train_config.schema.json"
    path.write_text(json.dumps(stale))
    assert generator.main([str(path)]) == 0
    assert path.read_text() == SCHEMA.read_text()
