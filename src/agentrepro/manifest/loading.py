"""Load a study manifest (docs/design.md §3.1): safe YAML, schema validation, and the checks a schema cannot say.

Paths are `agentrepro.layout`'s: the manifest's `reference:` is relative to the manifest's own directory;
`data.*.path` and a local `model.path` are relative to the root.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from agentrepro.analysis.claim_text import check_methods, parse_claim_text
from agentrepro.backends import REGISTRY, backend_class, get_backend
from agentrepro.bounds import MAX_SEED
from agentrepro.errors import BadInput
from agentrepro.placement import HUB_FORM, Placement, declared, default_placement, model_form, placements
from agentrepro.reading import load_yaml
from agentrepro.schema import key_path, validate
from agentrepro.trainer import model_size

MANIFEST_SCHEMA = "manifest.schema.json"


def _non_json(value: Any, parts: list) -> tuple[list, Any] | None:
    """The first value JSON cannot hold (a YAML date, NaN, infinity, a non-string key), with its key path."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return [*parts, str(key)], key
            found = _non_json(item, [*parts, key])
            if found:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found = _non_json(item, [*parts, i])
            if found:
                return found
    elif isinstance(value, float) and not math.isfinite(value):
        return parts, value
    elif value is not None and not isinstance(value, (str, int, float, bool)):
        return parts, value
    return None


def _check_backend_forms(manifest: dict[str, Any], *, path: object) -> None:
    """Name the rule when an image or model form belongs to another kind of backend (clearer than the schema's branch)."""
    backend, image, model = manifest.get("backend"), manifest.get("image"), manifest.get("model")
    if (
        isinstance(backend, dict)
        and backend.get("name") in REGISTRY.names()
        and isinstance(image, dict)
        and isinstance(model, dict)
    ):
        check_forms(default_placement(manifest), model, path=path)


def check_forms(placement: Placement, model: dict[str, Any], *, path: object) -> None:
    """One backend's image and the study's model form, by the backend's facts (`container`, `model_forms`)."""
    name, where, form = placement.name, placement.where, model_form(model)
    facts = backend_class(name)
    if facts.container == "required" and "none" in placement.image:
        bare = [n for n, c in REGISTRY.classes().items() if c.container != "required"]
        raise BadInput(
            f"only the {' and '.join(bare)} backends may run without a container; backend {name!r} "
            "needs image: {runtime, ref, digest} or {runtime, file, sha256}",
            path=path,
            where=f"{where}image.none",
        )
    if (
        facts.container == "never" and "none" not in placement.image
    ):  # no program of its own to wrap (docs/containers.md)
        raise BadInput(
            f"the {name} backend trains inside the harness's own process, which no container wraps: give "
            "image: {none: <why>} (the lock records the harness's Python environment)",
            path=path,
            where=f"{where}image",
        )
    if form not in facts.model_forms:
        backend = f"the {name} backend{'' if not where else f' ({where[:-1]})'}"
        if form == HUB_FORM:
            raise BadInput(
                f"{backend} takes a config-built model {{name, config}} or a local directory {{path, sha256?}}, "
                "not a hub revision (download it and give its path)",
                path=path,
                where="model.revision" if "revision" in model else "model.tokenizer_revision",
            )
        raise BadInput(f"{backend} takes a hub model {{name, revision, tokenizer_revision}}", path=path, where="model")


def check_placements(manifest: dict[str, Any], *, path: object) -> None:
    """The rules a schema cannot say: labels agree with their blocks, every @backend is declared and every declared
    backend used, each image and the study's model are forms each backend takes, each block is one its backend takes
    read alone (a command template that no shell-free run can take fails here)."""
    default = manifest["backend"]["name"]
    for label, entry in (manifest.get("backends") or {}).items():
        if entry["backend"]["name"] != label:
            raise BadInput(
                f"{entry['backend']['name']!r} differs from its label {label!r}: methods name a backend as "
                f"<method>@{label}, so the label must be the backend's name",
                path=path,
                where=f"backends.{label}.backend.name",
            )
        if label == default:
            raise BadInput(
                f"{label!r} is already the study's backend: methods without @ (or <method>@{label}) run there",
                path=path,
                where=f"backends.{label}",
            )
    used = placements(manifest, path=path)
    in_use = {p.where for p in used.values()}
    for label, placement in declared(manifest).items():
        if placement.label is not None and placement.where not in in_use:
            raise BadInput(
                f"no method runs on {label!r}: name one <method>@{label}, or remove the block",
                path=path,
                where=f"backends.{label}",
            )
    for placement in {p.where: p for p in used.values()}.values():
        check_forms(placement, manifest["model"], path=path)
        try:
            get_backend(placement.name).check_block(placement.backend)
        except BadInput as exc:
            raise BadInput(
                exc.message, path=path, where=f"{placement.where}{exc.where}" if exc.where else None
            ) from None


def check_manifest(manifest: Any, *, path: object) -> dict[str, Any]:
    """Validate a parsed manifest; raise BadInput naming `path` and the key path of the first problem."""
    if not isinstance(manifest, dict):
        raise BadInput(f"expected a mapping at the top level, got {type(manifest).__name__}", path=path)
    bad = _non_json(manifest, [])
    if bad:
        raise BadInput(
            f"{bad[1]!r} ({type(bad[1]).__name__}) cannot be frozen into JSON: quote it or give a finite number",
            path=path,
            where=key_path(bad[0]),
        )
    _check_backend_forms(manifest, path=path)
    validate(manifest, MANIFEST_SCHEMA, path=path)
    check_placements(manifest, path=path)
    stem = Path(str(path)).name.rsplit(".", 1)[0]
    if Path(str(path)).suffix in (".yaml", ".yml") and stem != manifest["study"]:
        raise BadInput(
            f"{manifest['study']!r} differs from the file name {Path(str(path)).name!r}: "
            "runs and the lock are found by the study name, so they must agree",
            path=path,
            where="study",
        )
    methods = manifest["methods"]
    if "config" in manifest["model"]:  # a builtin model: bounded, and its training memory estimated, per method
        model_size.check_model(
            manifest["model"], {f"method {m}": {**manifest["train"], **methods[m]} for m in methods}, path=path
        )
    for i, claim in enumerate(manifest.get("analysis", {}).get("claims", [])):  # the grammar's one owner: claim_text
        check_methods(
            parse_claim_text(claim, where=f"analysis.claims[{i}]", path=path),
            list(methods),
            where=f"analysis.claims[{i}]",
            path=path,
        )
    evaluation = manifest.get("eval", {})
    if (
        "first_seed" in evaluation
        and "tasks" in evaluation
        and evaluation["first_seed"] + evaluation["tasks"] - 1 > MAX_SEED
    ):
        raise BadInput(
            f"task seeds first_seed .. first_seed + tasks - 1 must stay below 2**32 ({MAX_SEED}); "
            f"{evaluation['first_seed']} + {evaluation['tasks']} - 1 does not",
            path=path,
            where="eval.first_seed",
        )
    final = manifest.get("analysis", {}).get("final_step")
    steps = manifest["train"].get("steps")
    if final is not None and steps is not None and final > steps:
        raise BadInput(f"{final} is after the last training step ({steps})", path=path, where="analysis.final_step")
    return manifest


def load_manifest(path: str | os.PathLike) -> dict[str, Any]:
    """Read and validate a manifest file; BadInput names the file and the key path (or the YAML line)."""
    return check_manifest(load_yaml(path), path=path)
