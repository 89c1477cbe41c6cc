"""`freeze`: turn a manifest into a lock in which every identifier is immutable and every file hashed.

Refused, each with its key path: a placeholder (`TODO-...`), a branch or tag where a 40-hex commit is
needed, a short hash, an image tag without `sha256:<64 hex>` digest, a missing file or model directory,
a file whose SHA-256 differs from the manifest's. All refusals are collected and reported together. Then what every
job will demand of its node is checked (agentrepro.preflight: the first violation is named, with the manifest field,
the framework's key and both numbers).

Freezing is idempotent: when a lock already at the output path says the same thing (everything but
`created` and the self-hash), it is left untouched, so that runs made from it stay valid.

The verb: `agentrepro freeze MANIFEST [--allow-dirty] [-o LOCK] [--root DIR]` writes the study's lock.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path
from typing import Any

from agentrepro import containers, lockfile, placement, planning, preflight
from agentrepro.analysis.reference import load_reference
from agentrepro.attempts import machine
from agentrepro.backends.sources import pinned_sources
from agentrepro.errors import BadInput, Failure, read_from
from agentrepro.fileio import atomic_write_json, check_output_file, sha256_file, sha256_json
from agentrepro.layout import lock_path
from agentrepro.lockfile import lock_sha256
from agentrepro.manifest.identifiers import commit_problem, digest_problem, is_placeholder, sha256_problem
from agentrepro.manifest.loading import load_manifest
from agentrepro.manifest.taskpanel import build_panel_sources, panel_deviations
from agentrepro.software import harness_state, python_environment


def _rel(path: Path, root: Path) -> str:
    return Path(os.path.relpath(path.resolve(), root.resolve())).as_posix()


def directory_sha256(path: Path) -> tuple[str, dict[str, str]]:
    """Hash of a model directory: SHA-256 of the canonical JSON {relative path: file SHA-256}.

    Hidden entries (`.git`, `.cache`) are skipped. Returns (hash, per-file hashes).
    """
    files = {}
    for file in sorted(path.rglob("*")):
        rel = file.relative_to(path)
        if any(part.startswith(".") for part in rel.parts) or not file.is_file():
            continue
        files[rel.as_posix()] = sha256_file(file)
    return sha256_json(files), files


class _Problems(list):
    def add(self, where: str, reason: str | None) -> None:
        if reason:
            self.append(f"{where}: {reason}")


def _resolve_file(
    where: str, spec: dict[str, Any], path: Path, root: Path, problems: _Problems, files: dict[str, str]
) -> None:
    if is_placeholder(spec.get("path")):
        problems.add(f"{where}.path", f"placeholder {spec['path']!r}: give the file's path")
        return
    if path.is_dir() and where == "data.eval" and "sha256" not in spec:
        return  # a game data directory: the panel hashes each of its games (taskpanel.panel_from_data_dir)
    if not path.is_file():
        problems.add(
            f"{where}.path",
            f"file not found: {path}" + (" (or, for a game environment, its data directory)" * (where == "data.eval")),
        )
        return
    actual = sha256_file(path)
    declared = spec.get("sha256")
    if declared is not None:
        problems.add(f"{where}.sha256", sha256_problem(declared))
        if sha256_problem(declared) is None and declared != actual:
            problems.add(f"{where}.sha256", f"{path} hashes to {actual}, not the manifest's {declared}")
    files[_rel(path, root)] = actual


TOKENIZER_BUILT = (
    "built at train time from the environment's vocabulary (word level, agentrepro.trainer.tokenizer); "
    "every run seals it in checkpoints/tokenizer/"
)


def resolve_identifiers(manifest: dict[str, Any], manifest_file: Path, root: Path) -> dict[str, Any]:
    """The lock's `resolved` block; BadInput listing every refused identifier, each with its key path."""
    problems = _Problems()
    files: dict[str, str] = {}
    model = manifest["model"]
    pinned = {
        label: (
            _resolve_backend(p.backend, p.where, problems, root=root, revision=model.get("revision")),
            _resolve_image(p.image, p.where, problems, root, files),
        )
        for label, p in placement.declared(manifest).items()
    }
    (resolved_backend, resolved_image), others = pinned.pop(manifest["backend"]["name"]), pinned

    tokenizer = None
    if "revision" in model:  # a hub model (external backends)
        problems.add("model.revision", commit_problem(model["revision"]))
        problems.add("model.tokenizer_revision", commit_problem(model["tokenizer_revision"]))
        resolved_model = {"name": model["name"], "revision": model["revision"]}
        tokenizer = {"name": model["name"], "revision": model["tokenizer_revision"]}
    elif "config" in model:  # built from a config: the config is the identity
        resolved_model = {"name": model["name"], "config_sha256": sha256_json(model["config"])}
        tokenizer = {"from": TOKENIZER_BUILT}
    else:  # a local directory
        resolved_model = {"name": model.get("name"), "path": model["path"]}
        tokenizer = {"from": "the model directory's own tokenizer files, hashed with it (resolved.model.files)"}
        directory = root / model["path"]
        if is_placeholder(model["path"]):
            problems.add("model.path", f"placeholder {model['path']!r}: give the local model directory")
        elif not directory.is_dir():
            problems.add("model.path", f"model directory not found: {directory}")
        else:
            digest, per_file = directory_sha256(directory)
            if not per_file:
                problems.add("model.path", f"model directory {directory} holds no files")
            declared = model.get("sha256")
            if declared is not None:
                problems.add("model.sha256", sha256_problem(declared))
                if sha256_problem(declared) is None and declared != digest:
                    problems.add("model.sha256", f"{directory} hashes to {digest}, not the manifest's {declared}")
            resolved_model.update(sha256=digest, files=per_file)

    for name, spec in sorted(manifest.get("data", {}).items()):
        _resolve_file(f"data.{name}", spec, root / spec["path"], root, problems, files)
    if "reference" in manifest:
        _resolve_file(
            "reference",
            {"path": manifest["reference"]},
            manifest_file.parent / manifest["reference"],
            root,
            problems,
            files,
        )

    if problems:
        raise BadInput("; ".join(problems), path=manifest_file)
    resolved = {
        "image": resolved_image,
        "model": resolved_model,
        "tokenizer": tokenizer,
        "backend": resolved_backend,
        "files": files,
    }
    if others:  # the study's further backends (agentrepro.placement), each with its own container
        resolved["backends"] = {
            label: {"backend": backend, "image": image} for label, (backend, image) in others.items()
        }
    return resolved


def _resolve_backend(
    backend: dict[str, Any], where: str, problems: _Problems, *, root: Path, revision: str | None
) -> dict[str, Any]:
    """The backend's pinned commit; and a local model snapshot (`model_path`) that a Hugging Face cache holds
    (`.../snapshots/<commit>`) must be the one of model.revision, since the job loads what is there."""
    resolved = {"name": backend["name"]}
    if "commit" in backend or "repo" in backend:
        problems.add(f"{where}backend.commit", commit_problem(backend.get("commit")))
        resolved.update(repo=backend.get("repo"), commit=backend.get("commit"))
    model_path = backend.get("model_path")
    if revision and isinstance(model_path, str) and model_path and not is_placeholder(model_path):
        snapshot = (root / model_path).resolve()
        if snapshot.parent.name == "snapshots" and snapshot.name != revision:
            problems.add(
                f"{where}backend.model_path",
                f"{snapshot} is the Hugging Face cache's snapshot of revision {snapshot.name}, not of model.revision "
                f"{revision}: the job would train those weights",
            )
    return resolved


def _resolve_image(
    image: dict[str, Any], where: str, problems: _Problems, root: Path, files: dict[str, str]
) -> dict[str, Any]:
    """The pinned container of one placement (agentrepro.containers): a registry image by digest, or a local image
    file hashed like a data file (its sha256 required, so that the run config carries the pin)."""
    if "none" in image:
        return dict(image)
    if "file" in image:
        path, declared = root / image["file"], image.get("sha256")
        if is_placeholder(image["file"]) or not path.is_file():
            problems.add(f"{where}image.file", f"image file not found: {path}")
            return dict(image)
        try:
            actual = sha256_file(path)
        except OSError as exc:  # a file that is there and cannot be read (/proc/self/mem, a device, no permission)
            problems.add(f"{where}image.file", f"cannot read the image file {path} ({exc.strerror or exc})")
            return dict(image)
        if declared is None:
            problems.add(f"{where}image.sha256", f"missing: pin the image file by its hash (sha256: {actual})")
        elif sha256_problem(declared) is not None or declared != actual:
            problems.add(
                f"{where}image.sha256",
                sha256_problem(declared) or f"{path} hashes to {actual}, not the manifest's {declared}",
            )
        else:
            pinned = containers.image_of(image, where=f"{where}image")
            assert pinned is not None  # a file block: `{none: ...}` returned above
            problems.add(f"{where}image.file", containers.file_problem(pinned, path))
            files[_rel(path, root)] = actual
        return {"runtime": image["runtime"], "file": image["file"], "sha256": actual}
    before = len(problems)
    if is_placeholder(image["ref"]):
        problems.add(f"{where}image.ref", f"placeholder {image['ref']!r}: name the image (registry/name:tag)")
    problems.add(f"{where}image.digest", digest_problem(image.get("digest"), image.get("ref")))
    if len(problems) == before:  # the runtimes' own rules: a reference that is one, never an option
        try:
            containers.image_of(image, where=f"{where}image")
        except BadInput as exc:
            problems.add(str(exc.where), exc.message)
    return {"runtime": image["runtime"], "ref": image["ref"], "digest": image.get("digest")}


def _check_reference(manifest: dict[str, Any], manifest_file: Path) -> None:
    """The reference must be valid (docs/design.md §3.6.1) and its `values` must name methods of the study."""
    if "reference" not in manifest:
        return
    path = manifest_file.parent / manifest["reference"]
    values = load_reference(path)["values"]
    for method in values:
        if method not in manifest["methods"]:
            raise BadInput(
                f"{method!r} is not a method of study {manifest['study']!r}", path=path, where=f"values.{method}"
            )


def build_lock(
    manifest_file: str | os.PathLike,
    *,
    root: str | os.PathLike = ".",
    out: str | os.PathLike | None = None,
    allow_dirty: bool = False,
) -> dict[str, Any]:
    """The sealed lock for `manifest_file` (not written). BadInput for anything that cannot be frozen."""
    manifest_file, root = Path(manifest_file), Path(root)
    out = Path(out) if out is not None else lock_path(manifest_file)
    manifest = load_manifest(manifest_file)
    resolved = resolve_identifiers(manifest, manifest_file, root)
    _check_reference(manifest, manifest_file)
    plan = planning.StudyPlan(manifest, manifest_file)  # every job's draft config, built once
    _check_mounts(plan, root)  # the paths every job's container will mount, before the demands read them
    preflight.check(plan)  # what every job will demand of its node, before anything is queued
    harness = harness_state(root, ignore=[out])
    if harness["dirty"] and not allow_dirty:
        if harness["commit"] is None:
            why = harness.get("note", "no commit")
        else:
            shown = ", ".join(harness["dirty_paths"][:5]) + (" ..." if len(harness["dirty_paths"]) > 5 else "")
            why = f"the working tree has uncommitted changes ({shown})"
        raise BadInput(
            f"{why}: the lock could not name the code that runs; commit first, or pass --allow-dirty (recorded in the lock)",
            path=root.resolve(),
            where="harness",
        )
    harness["allow_dirty"] = allow_dirty
    with read_from(manifest_file):  # env.name and env.params are checked by the environment that builds the panel
        panel, panel_files, packages = build_panel_sources(manifest, root)
    resolved["files"].update(panel_files)
    if packages:
        resolved["env_packages"] = packages
    sources = _backend_sources(manifest, manifest_file, root)
    deviations = [
        *plan.deviations(),  # the backends' departures from their official recipes
        *panel_deviations(manifest, root, panel),
    ]  # and the evaluation panel's composition
    lock = lockfile.build(
        study=manifest["study"],
        manifest_path=_rel(manifest_file, root),
        manifest=json.loads(json.dumps(manifest)),
        resolved=resolved,
        task_panel=panel,
        backend_sources=sources,
        deviations=deviations,
        seed_streams=plan.seed_streams(),
        harness=harness,
        python=python_environment(),
        machine=machine(threads=False),
        created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    )
    found = lockfile.lock_problems(lock)
    if found:  # our own output must satisfy the lock schema
        raise Failure(f"the lock built for {manifest_file} is invalid: {found[0]}")
    return lock


def _backend_sources(manifest: dict[str, Any], manifest_file: Path, root: Path) -> dict[str, Any] | None:
    """The git blob hashes of every backend's `sources` at its commit, by placement (backends/sources.py); None if none."""
    with read_from(manifest_file):
        return pinned_sources(manifest, root) or None


def _check_mounts(plan: planning.StudyPlan, root: Path) -> None:
    """The mount rule (containers.check_mount) on every path a job's container will mount, as the field names it."""
    checked: set[tuple[str, str]] = set()
    for job in plan.jobs():
        if "image" not in job.config:
            continue
        fields = {**containers.mounted_fields(job.config), **job.backend.mounted_fields(job.config)}
        for where, path in fields.items():
            if (where, path) not in checked:
                checked.add((where, path))
                with read_from(plan.manifest_file):
                    containers.check_mount(path, where=where, root=root)


def freeze(
    manifest_file: str | os.PathLike,
    *,
    root: str | os.PathLike = ".",
    out: str | os.PathLike | None = None,
    allow_dirty: bool = False,
) -> tuple[dict[str, Any], Path, bool]:
    """Build and write the lock. Returns (lock, path, written); `written` is False if an identical lock was kept."""
    out = check_output_file(
        out if out is not None else lock_path(manifest_file), option="-o" if out is not None else "lock"
    )
    lock = build_lock(manifest_file, root=root, out=out, allow_dirty=allow_dirty)
    if out.is_file():
        try:
            existing = lockfile.read_lock(out)
        except BadInput:  # an unreadable, edited or older lock is simply replaced
            existing = None
        if existing is not None and lockfile.same_content(existing, lock):
            return existing, out, False
    atomic_write_json(out, lock)
    return lock, out, True


__all__ = ["build_lock", "directory_sha256", "freeze", "lock_sha256"]
