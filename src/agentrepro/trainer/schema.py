"""The estimator part of workflow/schemas/train_config.schema.json, written from agentrepro.algorithms.spec.

    python -m agentrepro.trainer.schema [SCHEMA]     # rewrite the file in place (default: the repository's)

`estimator` and one property per estimator option (type, allowed values, default, description) come from
the specs, the minimum and maximum of every integer field from `TrainConfig`'s `INTEGER_BOUNDS`; every other part of
a property is kept as written. Properties follow TrainConfig's field order.
tests/trainer/test_schema.py checks that the file equals what this writes.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path
from typing import Any

from agentrepro import schema
from agentrepro.algorithms.spec import SPECS, Option, option_help
from agentrepro.trainer.config import ESTIMATOR_OPTIONS, INTEGER_BOUNDS, SPECS_BY_NAME, TrainConfig

SCHEMA = schema.SCHEMA_DIR / "train_config.schema.json"


def option_property(option: Option) -> dict[str, Any]:
    """The JSON Schema of one option's value."""
    if option.choices:
        prop: dict[str, Any] = {"enum": list(option.choices)}
    else:
        prop = {"type": "number"}
        prop.update({k: v for k, v in (("minimum", option.low), ("maximum", option.high)) if math.isfinite(v)})
    return {**prop, "default": option.default, "description": option_help(option, tuple(SPECS_BY_NAME.values()))}


def estimator_property() -> dict[str, Any]:
    variants = "; ".join(
        f"{s.name} is {s.variant_of} with " + ", ".join(f"{k} {v:g}" for k, v in s.fixed.items())
        for s in SPECS
        if s.variant_of
    )
    return {
        "enum": list(SPECS_BY_NAME),
        "default": TrainConfig.estimator,
        "description": "advantage estimator: "
        + " | ".join(f"{s.name} ({s.help})" for s in SPECS_BY_NAME.values())
        + (f"; {variants}" if variants else ""),
    }


def render(document: dict[str, Any]) -> dict[str, Any]:
    """`document` with its estimator properties rewritten from the specs, in TrainConfig's field order."""
    generated = {"estimator": estimator_property(), **{o.name: option_property(o) for o in ESTIMATOR_OPTIONS}}
    kept = document.get("properties", {})
    for name, (low, high) in INTEGER_BOUNDS.items():
        if name in kept:
            rest = {k: v for k, v in kept[name].items() if k not in ("type", "minimum", "maximum")}
            kept[name] = {"type": "integer", "minimum": low, "maximum": high, **rest}
    properties = {
        f.name: generated[f.name] if f.name in generated else kept[f.name]
        for f in dataclasses.fields(TrainConfig)
        if f.name in generated or f.name in kept
    }
    return {**document, "properties": properties}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    schema.rewrite(Path(args[0]) if args else SCHEMA, render)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
