"""The backend part of workflow/schemas/manifest.schema.json, written from the backends' own declarations.

    python -m agentrepro.backends.schema [SCHEMA]     # rewrite the file in place (default: the repository's)

Generated, from the registry's classes (backends/base.py): `$defs.backend` (`name` one of the registered backends,
and for each name exactly the keys its `block` declares, with their types and descriptions), `$defs.backend_forms`
(for each backend of the study's `backend:`, the image form its `container` fact allows and the model forms its
`model_forms` take) and `$defs.placement_forms` (the image form of a `backends:` entry). Everything else is kept as
written. tests/backends/test_schema.py checks that the file equals what this writes, so the schema and the code
cannot disagree.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from agentrepro import schema
from agentrepro.backends.base import Backend
from agentrepro.backends.registry import REGISTRY
from agentrepro.placement import BUILTIN_FORM, HUB_FORM

SCHEMA = "manifest.schema.json"
MODEL_DEFS = {
    frozenset({BUILTIN_FORM}): "model_builtin",
    frozenset({HUB_FORM}): "model_hub",
    frozenset({BUILTIN_FORM, HUB_FORM}): "model_any",
}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/$defs/{name}"}


def _when(name: str, then: dict[str, Any], *, inside: str | None = None) -> dict[str, Any]:
    """`if` the backend (at `inside`.name, else name) is `name`, `then` ..."""
    test: dict[str, Any] = {"properties": {"name": {"const": name}}, "required": ["name"]}
    if inside:
        test = {"properties": {inside: test}, "required": [inside]}
    return {"if": test, "then": then}


def _image(cls: type[Backend]) -> dict[str, str]:
    return _ref({"required": "image_container", "optional": "image_or_none", "never": "image_none"}[cls.container])


def backend_def(classes: dict[str, type[Backend]]) -> dict[str, Any]:
    """The `backend:` block: a registered name, and the keys that backend declares."""
    return {
        "type": "object",
        "required": ["name"],
        "description": "the backend that trains and evaluates; each backend takes the keys it declares (agentrepro.backends)",
        "properties": {"name": {"enum": list(classes)}},
        "allOf": [
            _when(
                name,
                {
                    "properties": {**cls.block.keys, "name": {"const": name}},
                    "additionalProperties": False,
                    "required": list(cls.block.required),
                },
            )
            for name, cls in classes.items()
        ],
    }


def render(document: dict[str, Any], classes: dict[str, type[Backend]] | None = None) -> dict[str, Any]:
    """`document` (the manifest schema) with its backend part rewritten from the backends' declarations."""
    classes = classes or REGISTRY.classes()
    defs = dict(document["$defs"])
    defs["backend"] = backend_def(classes)
    defs["backend_forms"] = {
        "description": "the study's backend: the image form its container need allows and the model forms it takes",
        "allOf": [
            _when(
                name,
                {"properties": {"image": _image(cls), "model": _ref(MODEL_DEFS[cls.model_forms])}},
                inside="backend",
            )
            for name, cls in classes.items()
        ],
    }
    defs["placement_forms"] = {
        "description": "a backends: entry: the image form its container need allows",
        "allOf": [
            _when(name, {"properties": {"image": _image(cls)}}, inside="backend") for name, cls in classes.items()
        ],
    }
    return {**document, "$defs": defs}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    path = Path(args[0]) if args else schema.SCHEMA_DIR / SCHEMA
    schema.rewrite(path, render)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
