"""Which backend runs a method: the one rule, read by loading, freeze, resolve, the plan and the audit.

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
is only fair on the same weights), so it must be a form every backend in use takes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from agentrepro.errors import BadInput

BASE_NAME, LABEL = r"[a-z][a-z0-9_]*", r"[a-z][a-z0-9-]*"
METHOD_NAME = rf"{BASE_NAME}(?:@{LABEL})?"  # manifest.schema.json says the same (a test keeps them equal)
_METHOD = re.compile(rf"^({BASE_NAME})(?:@({LABEL}))?$")

# Which model forms (manifest.schema.json $defs) each backend takes (any other: a hub model, as the schema's
# last branch says), and which may run without a container.
HUB, BUILTIN_FORMS = "hub", "builtin"
MODEL_FORMS = {"builtin": {BUILTIN_FORMS}, "command": {BUILTIN_FORMS, HUB}}
NO_CONTAINER = ("builtin", "command")  # these run in the harness's own Python environment, which the lock records


@dataclass(frozen=True)
class Placement:
    """Where one method runs: its backend block, image and resources, and the key path they come from."""

    backend: dict[str, Any]
    image: dict[str, Any]
    resources: dict[str, Any] = field(default_factory=dict)
    where: str = ""          # "" for the study's default blocks, "backends.<label>." otherwise
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
        out[label] = Placement(backend=entry["backend"], image=entry["image"],
                               resources={**default.resources, **(entry.get("resources") or {})},
                               where=f"backends.{label}.", label=label)
    return out


def method_placement(manifest: dict[str, Any], method: str, *, path: object = "manifest") -> Placement:
    """The backend, image and resources of `method` (a key of `methods`); BadInput if its @backend is not declared."""
    _, label = split_method(method)
    backends = declared(manifest)
    if label is None:
        return backends[manifest["backend"]["name"]]
    if label not in backends:
        raise BadInput(f"{label!r} is neither the study's backend ({manifest['backend']['name']}) nor declared under "
                       f"backends: (declared: {', '.join(backends)})", path=path, where=f"methods.{method}")
    return backends[label]


def placements(manifest: dict[str, Any], *, path: object = "manifest") -> dict[str, Placement]:
    """`method_placement` of every method, in manifest order."""
    return {method: method_placement(manifest, method, path=path) for method in manifest["methods"]}


def model_form(model: dict[str, Any]) -> str:
    return HUB if "revision" in model or "tokenizer_revision" in model else BUILTIN_FORMS


def check(manifest: dict[str, Any], *, path: object) -> None:
    """The rules a schema cannot say: labels agree with their blocks, every @backend is declared and every
    declared backend used, each image and the study's model are forms each backend takes, command templates parse."""
    default = manifest["backend"]["name"]
    for label, entry in (manifest.get("backends") or {}).items():
        if entry["backend"]["name"] != label:
            raise BadInput(f"{entry['backend']['name']!r} differs from its label {label!r}: methods name a backend as "
                           f"<method>@{label}, so the label must be the backend's name", path=path, where=f"backends.{label}.backend.name")
        if label == default:
            raise BadInput(f"{label!r} is already the study's backend: methods without @ (or <method>@{label}) run there",
                           path=path, where=f"backends.{label}")
    used = placements(manifest, path=path)
    in_use = {p.where for p in used.values()}
    for label, placement in declared(manifest).items():
        if placement.label is not None and placement.where not in in_use:
            raise BadInput(f"no method runs on {label!r}: name one <method>@{label}, or remove the block",
                           path=path, where=f"backends.{label}")
    for placement in {p.where: p for p in used.values()}.values():
        check_placement(placement, manifest["model"], path=path)


def check_placement(placement: Placement, model: dict[str, Any], *, path: object) -> None:
    """One backend's image and the study's model form; a command backend's templates."""
    name, where, form = placement.name, placement.where, model_form(model)
    if name not in NO_CONTAINER and "none" in placement.image:
        raise BadInput(f"only the {' and '.join(NO_CONTAINER)} backends may run without a container; backend {name!r} "
                       "needs image: {runtime, ref, digest} or {runtime, file, sha256}", path=path, where=f"{where}image.none")
    if name == "builtin" and "none" not in placement.image:   # no program of its own to wrap (docs/containers.md)
        raise BadInput("the builtin backend trains inside the harness's own process, which no container wraps: give "
                       "image: {none: <why>} (the lock records the harness's Python environment)", path=path, where=f"{where}image")
    if form not in MODEL_FORMS.get(name, {HUB}):
        if form == HUB:
            raise BadInput(f"the {name} backend{'' if not where else f' ({where[:-1]})'} takes a config-built model "
                           "{name, config} or a local directory {path, sha256?}, not a hub revision (download it and give its path)",
                           path=path, where="model.revision" if "revision" in model else "model.tokenizer_revision")
        raise BadInput(f"the {name} backend{'' if not where else f' ({where[:-1]})'} takes a hub model "
                       "{name, revision, tokenizer_revision}", path=path, where="model")
    if name == "command":  # a template that no shell-free run can take fails at freeze
        from agentrepro.backends.command import validate_block

        try:
            validate_block(placement.backend)
        except BadInput as exc:
            raise BadInput(str(exc).removeprefix(f"{exc.where}: ") if exc.where else str(exc), path=path,
                           where=f"{where}{exc.where}" if exc.where else None) from None


__all__ = ["METHOD_NAME", "Placement", "check", "check_placement", "declared", "default_placement", "method_placement",
           "model_form", "placements", "split_method"]
