"""The JSON Schemas and their one loader: validation with messages a person can act on (file, key path, what was
expected, what came).

The schemas live in workflow/schemas/ (the one source of truth; the package sees them through its `schemas` link,
SCHEMA_DIR). They are Draft 2020-12 and refer to each other by file name (`"$ref": "train_config.schema.json"`),
resolved through a `referencing.Registry` of every schema there. A missing schema is a broken installation
(Failure), never a skipped validation.

* `validate(instance, schema_name, path=...)` raises BadInput with one line such as
  `manifests/x.yaml: methods.gigpo.gamma: expected a number, got 'abc'`; `problems(...)` lists every error.
* `validator(schema_name)`: the cached validator, for callers that check many rows (outcomes).
* `load(schema_name)`: the schema document itself (defaults declared there, e.g. train_config's).
* `rewrite(path, render)`: a schema file whose generated parts are rewritten from their declarations (the estimators'
  in train_config, agentrepro.trainer.schema; the backends' in manifest, agentrepro.backends.schema); `dump` is the
  one way those files are written.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast

import jsonschema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from agentrepro.errors import BadInput, Failure
from agentrepro.reading import load_json

SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"


# JSON Schema counts 1.0e30 as an integer; our integers (seeds, counts, steps) must be written as integers.
_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", lambda _, value: type(value) is int),
)

_TYPE_NAMES = {
    "number": "a number",
    "integer": "an integer",
    "string": "a string",
    "object": "a mapping",
    "array": "a list",
    "boolean": "true or false",
    "null": "null",
}


def schema_path(name: str) -> Path:
    """workflow/schemas/<name> as the package sees it; a missing schema is a broken installation (exit 1)."""
    path = SCHEMA_DIR / name
    if not path.is_file():
        raise Failure(
            f"{path}: schema not found (the package's schemas folder links to workflow/schemas/; reinstall the package)"
        )
    return path


@functools.cache
def load(schema_name: str) -> dict[str, Any]:
    """The schema document `schema_name` (read once)."""
    return load_json(schema_path(schema_name))


def dump(document: dict[str, Any]) -> str:
    """A schema document as the files in workflow/schemas/ are written."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def rewrite(path: str | Path, render: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """Rewrite the schema file at `path` with `render` applied (its generated parts made current)."""
    path = Path(path)
    path.write_text(dump(render(load_json(path))), encoding="utf-8")


@functools.cache
def registry() -> Registry:
    """Every schema in SCHEMA_DIR, addressable by its `$id` (its file name)."""
    resources = []
    for file in sorted(SCHEMA_DIR.glob("*.schema.json")):
        contents = load(file.name)
        resources.append(
            (contents.get("$id", file.name), Resource.from_contents(contents, default_specification=DRAFT202012))
        )
    return Registry().with_resources(resources)


@functools.cache
def validator(schema_name: str) -> jsonschema.protocols.Validator:
    return _Validator(load(schema_name), registry=registry())


def key_path(parts) -> str:
    """`['methods', 'gigpo', 'gamma']` -> `methods.gigpo.gamma`; list indices as `seeds[1]`."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _short(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _branch_errors(error: jsonschema.ValidationError) -> list[jsonschema.ValidationError]:
    """For oneOf/anyOf: the errors of the alternative that came closest (fewest errors, deepest path)."""
    branches: dict[str | int, list] = {}
    for sub in error.context:
        branches.setdefault(sub.schema_path[0], []).append(sub)
    if not branches:
        return []
    best = min(branches.values(), key=lambda errs: (len(errs), -max(len(e.absolute_path) for e in errs)))
    return best


def _leaf(error: jsonschema.ValidationError) -> jsonschema.ValidationError:
    while error.validator in ("oneOf", "anyOf") and error.context:
        errs = _branch_errors(error)
        error = sorted(errs, key=lambda e: (-len(e.absolute_path), str(e.absolute_path)))[0]
    return error


def describe(error: jsonschema.ValidationError) -> tuple[str, str]:
    """(key path, message) for one validation error, written for the person editing the file."""
    error = _leaf(error)
    parts = list(error.absolute_path)
    # jsonschema's stubs allow "unset" for what a raised error always has
    kind, expected, value, schema = error.validator, cast(Any, error.validator_value), error.instance, error.schema
    if kind == "additionalProperties":
        allowed = sorted(cast(Mapping[str, Any], schema).get("properties", {}))
        extra = sorted(set(value) - set(allowed)) if isinstance(value, dict) else []
        if extra:
            parts = [*parts, extra[0]]
            hint = f" (allowed: {', '.join(allowed)})" if allowed else ""
            return key_path(parts), f"unknown key{hint}"
    if kind == "required":
        missing = [k for k in expected if isinstance(value, dict) and k not in value]
        if missing:
            return key_path([*parts, missing[0]]), "missing required key"
    if kind == "type":
        names = expected if isinstance(expected, list) else [expected]
        wanted = " or ".join(_TYPE_NAMES.get(n, str(n)) for n in names)
        return key_path(parts), f"expected {wanted}, got {_short(value)}"
    if kind == "enum":
        return key_path(parts), f"expected one of {', '.join(map(str, expected))}; got {_short(value)}"
    if kind == "const":
        return key_path(parts), f"expected {_short(expected)}, got {_short(value)}"
    if kind == "pattern" and "propertyNames" in error.schema_path:
        return key_path([*parts, value]), f"invalid name {_short(value)}: names must match {expected}"
    if kind == "pattern":
        return key_path(parts), f"got {_short(value)}, which does not match {expected}"
    if kind == "propertyNames":
        return key_path(parts), f"invalid key name {_short(value)} ({error.message})"
    if kind in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        words = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}[kind]
        return key_path(parts), f"expected a value {words} {expected}, got {_short(value)}"
    if kind == "uniqueItems":
        return key_path(parts), f"entries must be unique, got {_short(value)}"
    return key_path(parts), error.message


def validate(instance: Any, schema_name: str, *, path: object) -> None:
    """Raise BadInput naming `path` and the key path of the most relevant error, if `instance` is invalid."""
    errors = list(validator(schema_name).iter_errors(instance))
    if not errors:
        return
    best = jsonschema.exceptions.best_match(errors, key=jsonschema.exceptions.relevance)
    where, message = describe(best)
    raise BadInput(message, path=path, where=where)


def problems(instance: Any, schema_name: str) -> list[str]:
    """Every validation error as `key.path: message` (for audit, which lists all problems)."""
    return [": ".join(describe(e)) for e in validator(schema_name).iter_errors(instance)]
