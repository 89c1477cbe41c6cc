"""Parameter declarations of the environments, and the one validator that reads them.

An environment class lists its parameters (`Env.parameters`) as `Param(name, default, check, help)`; `check`
returns the normalised value or raises `ValueError(expected)` where `expected` says the type and bounds in
words ("an integer >= 1"). `validate(owner, parameters, given)` fills in the defaults and turns the first
bad value into `BadInput` naming `env.params.<key>`. The checkers below cover the reference's parameters;
an environment may pass any function of the same shape.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agentrepro.errors import BadInput, shown

Check = Callable[[Any], Any]


@dataclass(frozen=True)
class Param:
    """One parameter: its reference name, default (used as given, never checked), checker and help line."""

    name: str
    default: Any
    check: Check
    help: str


def validate(
    owner: str, parameters: Sequence[Param], given: dict[str, Any] | None, *, path: object = None
) -> dict[str, Any]:
    """Every parameter of `owner` in declaration order: the given value checked, or the default."""
    given = {} if given is None else given
    if not isinstance(given, dict):
        raise BadInput("expected a mapping of parameter names to values", path=path, where="env.params")
    names = [p.name for p in parameters]
    for key in given:
        if key not in names:
            raise BadInput(
                f"unknown parameter for {owner}; expected one of {', '.join(sorted(names))}",
                path=path,
                where=f"env.params.{key}",
            )
    out: dict[str, Any] = {}
    for param in parameters:
        if param.name not in given:
            out[param.name] = copy.deepcopy(param.default)
            continue
        value = given[param.name]
        try:
            out[param.name] = param.check(value)
        except ValueError as exc:
            raise BadInput(f"expected {exc}, got {shown(value)}", path=path, where=f"env.params.{param.name}") from None
    return out


# -- checkers: each returns the normalised value or raises ValueError(expected) ------------------------
def integer(lo: int | None = None, hi: int | None = None) -> Check:
    def check(v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or (lo is not None and v < lo) or (hi is not None and v > hi):
            raise ValueError(f"an integer{'' if lo is None else f' >= {lo}'}{'' if hi is None else f' <= {hi}'}")
        return v

    return check


def optional_integer(lo: int, hi: int | None = None) -> Check:
    def check(v: Any) -> int | None:
        if v is None:
            return None
        try:
            return integer(lo, hi)(v)
        except ValueError as exc:
            raise ValueError(f"null or {exc}") from None

    return check


def number(lo: float | None = None, hi: float | None = None) -> Check:
    def check(v: Any) -> float:
        if (
            isinstance(v, bool)
            or not isinstance(v, (int, float))
            or not math.isfinite(v)
            or (lo is not None and v < lo)
            or (hi is not None and v > hi)
        ):
            raise ValueError(
                f"a finite number{'' if lo is None else f' >= {lo:g}'}{'' if hi is None else f' <= {hi:g}'}"
            )
        return float(v)

    return check


def one_of(*options: Any) -> Check:
    def check(v: Any) -> Any:
        if v not in options or isinstance(v, bool) != isinstance(options[0], bool):
            raise ValueError("one of " + ", ".join(map(repr, options)))
        return v

    return check


def boolean(v: Any) -> bool:
    if not isinstance(v, bool):
        raise ValueError("true or false")
    return v


def nonempty_string(v: Any) -> str:
    if not isinstance(v, str) or not v:
        raise ValueError("a non-empty string")
    return v


def integer_pair(v: Any) -> list[int]:
    if not isinstance(v, (list, tuple)) or len(v) != 2 or any(isinstance(x, bool) or not isinstance(x, int) for x in v):
        raise ValueError("a list of two integers")
    return [int(x) for x in v]
