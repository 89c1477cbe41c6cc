"""Which backend runs a method: the one rule, read by loading, freeze, resolve, the plan, source parity and the audit.

A study has a default backend (its top-level `backend:`, `image:` and `resources:`). Other backends are
declared once under `backends:`, each by its backend name, with the same blocks:

```yaml
backend: {name: verl-agent, repo: langfengQ/verl-agent, commit: <40 hex>}     # the default
image: {ref: ..., digest: sha256:...}
resources: {gpus: 2, runtime_min: 1440, mem_mb: 200000}
backends:
  relax:                                   # label = backend.name
    backend: {name: relax, repo: redai-infra/Relax, commit: <40 hex>}
    image: {ref: ..., digest: sha256:...}  # required: each framework runs in its own container
    resources: {gpus: 4}                   # optional: key by key over the study's resources
methods:
  graphgpo: {estimator: graphgpo}          # no @: the default backend
  graphgpo@relax: {estimator: graphgpo}    # @relax: backends.relax
```

A method's name is its key, written once and used unchanged everywhere (run directories, outcomes,
analysis, report): `<method>` or `<method>@<backend>`. `@<backend>` must name the default backend's name or
a label under `backends:`; a label must equal the name in its block, must not repeat the default backend,
and must be used by some method. The model is the study's for every backend (a comparison across backends
is only fair on the same weights), so it must be a form every backend in use takes (manifest/loading.py checks
each placement against its backend's facts).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from agentrepro.errors import BadInput

BASE_NAME, LABEL = r"[a-z][a-z0-9_]*", r"[a-z][a-z0-9-]*"
METHOD_NAME = rf"{BASE_NAME}(?:@{LABEL})?"  # manifest.schema.json says the same (a test keeps them equal)
_METHOD = re.compile(rf"^({BASE_NAME})(?:@({LABEL}))?$")

HUB_FORM, BUILTIN_FORM = "hub", "builtin"  # the model forms (Backend.model_forms)


@dataclass(frozen=True)
class Placement:
    """Where one method runs: its backend block, image and resources, and the key path they come from."""

    backend: dict[str, Any]
    image: dict[str, Any]
    resources: dict[str, Any] = field(default_factory=dict)
    where: str = ""  # "" for the study's default blocks, "backends.<label>." otherwise
    label: str | None = None  # None for the default backend

    @property
    def name(self) -> str:
        return self.backend["name"]


def split_method(name: str) -> tuple[str, str | None]:
    """`"graphgpo@relax"` -> `("graphgpo", "relax")`; `"graphgpo"` -> `("graphgpo", None)`."""
    match = _METHOD.match(name)
    if not match:
        raise ValueError(f"{name!r} is not a method name (<method> or <method>@<backend>)")
    return match.group(1), match.group(2)


def default_placement(manifest: dict[str, Any]) -> Placement:
    return Placement(backend=manifest["backend"], image=manifest["image"], resources=manifest.get("resources") or {})


def declared(manifest: dict[str, Any]) -> dict[str, Placement]:
    """Every backend of the study by label (the default under its own name), in manifest order."""
    default = default_placement(manifest)
    out = {default.name: default}
    for label, entry in (manifest.get("backends") or {}).items():
        out[label] = Placement(
            backend=entry["backend"],
            image=entry["image"],
            resources={**default.resources, **(entry.get("resources") or {})},
            where=f"backends.{label}.",
            label=label,
        )
    return out


def method_placement(manifest: dict[str, Any], method: str, *, path: object = "manifest") -> Placement:
    """The backend, image and resources of `method` (a key of `methods`); BadInput if its @backend is not declared."""
    _, label = split_method(method)
    backends = declared(manifest)
    if label is None:
        return backends[manifest["backend"]["name"]]
    if label not in backends:
        raise BadInput(
            f"{label!r} is neither the study's backend ({manifest['backend']['name']}) nor declared under "
            f"backends: (declared: {', '.join(backends)})",
            path=path,
            where=f"methods.{method}",
        )
    return backends[label]


def placements(manifest: dict[str, Any], *, path: object = "manifest") -> dict[str, Placement]:
    """`method_placement` of every method, in manifest order."""
    return {method: method_placement(manifest, method, path=path) for method in manifest["methods"]}


def model_form(model: dict[str, Any]) -> str:
    """`hub` for a model pinned by revision, else `builtin` (a config-built model or a local directory)."""
    return HUB_FORM if "revision" in model or "tokenizer_revision" in model else BUILTIN_FORM


__all__ = [
    "BUILTIN_FORM",
    "HUB_FORM",
    "METHOD_NAME",
    "Placement",
    "declared",
    "default_placement",
    "method_placement",
    "model_form",
    "placements",
    "split_method",
]
