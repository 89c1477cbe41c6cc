"""The reference file: paper values (docs/design.md §3.6.1) a study compares its final-step rates with.

`load_reference(path)` validates the YAML (unknown keys are errors naming the key path); its `kind` (a paper, a
reference implementation or an earlier run, default paper) says what the values come from, and its `caveats` (default
none) what a reader must know before comparing with them. It reads YAML only,
so `freeze` checks a study's reference without the statistics (agentrepro.analysis.verdicts compares with it).
"""

from __future__ import annotations

import os
from pathlib import Path

from agentrepro.errors import BadInput
from agentrepro.reading import load_yaml

_TOP = {"paper", "kind", "metric", "values", "caveats"}
# `caveats`: what a reader must know before comparing with the values (another recipe, other seeds, why a method
# has no value), each a sentence the report shows beside the verdicts and the bottom line counts.
MAX_CAVEATS = 20
MAX_CAVEAT_CHARS = 1000
# What the reference is (its `kind`; default paper): the report names it so in titles and text.
KINDS = ("paper", "reference implementation", "earlier run")
_VALUE = {"value", "std", "seeds", "source", "checked"}


def load_reference(path: str | os.PathLike) -> dict:
    """The reference YAML, validated: values.<method> has value in [0, 1], optional std/seeds, source, checked."""
    path = Path(path)
    ref = load_yaml(path)
    if not isinstance(ref, dict):
        raise BadInput("expected a mapping with paper, metric, values", path=path)
    for key in ref:
        if key not in _TOP:
            raise BadInput(f"unknown key (expected one of {sorted(_TOP)})", path=path, where=str(key))
    for key in ("paper", "metric", "values"):
        if key not in ref:
            raise BadInput("missing key", path=path, where=key)
    for key in ("paper", "metric"):
        if not isinstance(ref[key], str) or not ref[key].strip():
            raise BadInput(f"expected a non-empty string, got {ref[key]!r}", path=path, where=key)
    kind = ref.setdefault("kind", KINDS[0])
    if kind not in KINDS:
        raise BadInput(f"expected one of {', '.join(map(repr, KINDS))}, got {kind!r}", path=path, where="kind")
    caveats = ref.setdefault("caveats", [])
    if (
        not isinstance(caveats, list)
        or len(caveats) > MAX_CAVEATS
        or not all(isinstance(c, str) and c.strip() and len(c) <= MAX_CAVEAT_CHARS for c in caveats)
    ):
        raise BadInput(
            f"expected a list of at most {MAX_CAVEATS} sentences of at most {MAX_CAVEAT_CHARS} characters",
            path=path,
            where="caveats",
        )
    if not isinstance(ref["values"], dict) or not ref["values"]:
        raise BadInput("expected a non-empty mapping from method to value", path=path, where="values")
    for method, entry in ref["values"].items():
        where = f"values.{method}"
        if not isinstance(method, str) or not method:
            raise BadInput(f"a method name must be a non-empty string, got {method!r}", path=path, where="values")
        if not isinstance(entry, dict):
            raise BadInput("expected a mapping {value, std, seeds, source, checked}", path=path, where=where)
        for key in entry:
            if key not in _VALUE:
                raise BadInput(f"unknown key (expected one of {sorted(_VALUE)})", path=path, where=f"{where}.{key}")
        value = entry.get("value")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise BadInput(f"expected a fraction in [0, 1], got {value!r}", path=path, where=f"{where}.value")
        std = entry.get("std")
        if std is not None and (isinstance(std, bool) or not isinstance(std, (int, float)) or std < 0):
            raise BadInput(f"expected null or a non-negative number, got {std!r}", path=path, where=f"{where}.std")
        seeds = entry.get("seeds")
        if seeds is not None and (type(seeds) is not int or seeds < 1):
            raise BadInput(f"expected null or a positive integer, got {seeds!r}", path=path, where=f"{where}.seeds")
        if not isinstance(entry.get("source", ""), str):
            raise BadInput("expected a string", path=path, where=f"{where}.source")
        if not isinstance(entry.get("checked", False), bool):
            raise BadInput("expected true or false", path=path, where=f"{where}.checked")
    return ref
