"""The workflow's plan: what a study manifest asks Snakemake to build (imported by workflow/rules/common.smk).

Pure functions over the manifest, so that the DAG is known before anything runs (a dry run needs no lock):

* `study_plan(manifest_path) -> StudyPlan`: the study (its paths, from `agentrepro.layout`), methods, seeds,
  the evaluated steps and the per-job resources.
* the evaluated steps, which the backend checkpoints, are `agentrepro.layout.planned_steps` (each method's run
  config resolved as `agentrepro train` resolves it, so that the plan and the trainer read the same values;
  a backend that would save other steps stops the plan). The audit expects the same steps.
* the shared warm starts: `StudyPlan.warmstarts` maps each (method, seed) that warm-starts with the builtin
  backend to its warm start's identity (`agentrepro.trainer.warmstart_id.planned_warmstarts`); the workflow runs
  one warm-start job per distinct (seed, identity) and every such run starts from it.
* `lock_state(manifest_path, lock_path) -> "missing" | "ok"`; a lock that disagrees with its manifest
  raises `LockMismatch`, whose message tells the user to run `agentrepro freeze` (never re-frozen silently).
* `job_resources(resources) -> dict`: the manifest's `resources` block as Snakemake resources
  (`gpu`, `runtime` in minutes, `mem_mb`, `cpus_per_task`, `slurm_partition`, `constraint`) and the
  job's thread count; each method's are those of its backend (`agentrepro.manifest.backends`), and
  `StudyPlan.job_resources()` / `job_threads()` give the train and eval rules per-method values.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentrepro import layout
from agentrepro.errors import BadInput
from agentrepro.fileio import sha256_json
from agentrepro.manifest.backends import placements


class LockMismatch(BadInput):
    """The lock on disk was frozen from a different manifest (or was edited)."""


@dataclass(frozen=True)
class StudyPlan:
    """Everything the DAG needs from one manifest; paths are relative to the workflow's working directory."""

    layout: layout.Study
    methods: tuple[str, ...]
    seeds: tuple[int, ...]
    train_steps: int
    steps: tuple[int, ...]
    resources: dict[str, Any] = field(default_factory=dict)
    threads: int = 1
    method_resources: dict[str, tuple[dict[str, Any], int]] = field(default_factory=dict)  # per method, of its backend

    def job_resources(self) -> dict[str, Any]:
        """The `resources:` of a train or eval job: values when every method's backend asks the same, else one
        function of the job's wildcards per resource (a resource a backend does not set is None: unset)."""
        per_method = self.method_resources or {m: (self.resources, self.threads) for m in self.methods}
        if all(res == self.resources for res, _ in per_method.values()):
            return dict(self.resources)
        keys = dict.fromkeys(k for res, _ in per_method.values() for k in res)
        return {key: (lambda wildcards, key=key: per_method[wildcards.method][0].get(key)) for key in keys}

    def job_threads(self) -> int | Any:
        """The `threads:` of a train or eval job: a number, or a function of the wildcards when backends differ."""
        per_method = self.method_resources or {m: (self.resources, self.threads) for m in self.methods}
        if all(threads == self.threads for _, threads in per_method.values()):
            return self.threads
        return lambda wildcards: per_method[wildcards.method][1]
    warmstarts: dict[tuple[str, int], str] = field(default_factory=dict)

    @property
    def study(self) -> str:
        return self.layout.name

    @property
    def manifest(self) -> str:
        return str(self.layout.manifest)

    @property
    def lock(self) -> str:
        return str(self.layout.lock)


def load_study_manifest(manifest_path: str | os.PathLike) -> dict[str, Any]:
    """The manifest, validated by the manifest module's schema (unknown keys are errors)."""
    from agentrepro.manifest.loading import load_manifest

    return load_manifest(manifest_path)


def _require(mapping: dict, key: str, kind: type | tuple, path: str, where: str) -> Any:
    if not isinstance(mapping, dict) or key not in mapping:
        raise BadInput(f"missing key `{key}` (the workflow needs it)", path=path, where=where or "top level")
    value = mapping[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise BadInput(f"expected {getattr(kind, '__name__', kind)}, got {value!r}", path=path, where=f"{where}.{key}".lstrip("."))
    return value


def job_resources(resources: dict[str, Any], *, path: str = "manifest") -> tuple[dict[str, Any], int]:
    """(Snakemake resources, threads) for one train or eval job: gpu, runtime (min), mem_mb, cpus_per_task,
    and, when the manifest names them, slurm_partition and constraint (SLURM only)."""
    def number(key: str, default: int) -> int:
        value = resources.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise BadInput(f"expected a non-negative integer, got {value!r}", path=path, where=f"resources.{key}")
        return value

    cpus = max(1, number("cpus", 1))
    out: dict[str, Any] = {"gpu": number("gpus", 0), "runtime": max(1, number("runtime_min", 60)),
                           "mem_mb": max(1, number("mem_mb", 4000)), "cpus_per_task": cpus}
    for key, resource in (("partition", "slurm_partition"), ("constraint", "constraint")):
        if resources.get(key) is not None:
            if not isinstance(resources[key], str) or not resources[key]:
                raise BadInput(f"expected a non-empty string, got {resources[key]!r}", path=path, where=f"resources.{key}")
            out[resource] = resources[key]
    return out, cpus


def study_plan(manifest_path: str | os.PathLike) -> StudyPlan:
    """The study's plan from its manifest: methods x seeds, evaluated steps and job resources."""
    path = str(manifest_path)
    if not Path(path).is_file():
        raise BadInput("manifest not found (set it with --config manifest=manifests/<study>.yaml)", path=path)
    manifest = load_study_manifest(path)  # its `study` must equal its file name: paths derive from it
    methods = _require(manifest, "methods", dict, path, "")
    seeds = _require(manifest, "seeds", list, path, "")
    if not methods or not seeds:
        raise BadInput("a study needs at least one method and one seed", path=path, where="methods/seeds")
    for i, seed in enumerate(seeds):
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            raise BadInput(f"expected a non-negative integer, got {seed!r}", path=path, where=f"seeds[{i}]")
    train = _require(manifest, "train", dict, path, "")
    train_steps = _require(train, "steps", int, path, "train")
    method_steps = {m: (o or {}).get("steps", train_steps) for m, o in methods.items()}
    if len(set(method_steps.values())) != 1:
        raise BadInput(f"every method must train the same number of steps, got {method_steps}", path=path, where="methods.*.steps")
    steps = layout.planned_steps(manifest, path=path)
    resources, threads = job_resources(manifest.get("resources") or {}, path=path)
    per_method = {method: job_resources(placement.resources, path=path)  # the schema has checked each block
                  for method, placement in placements(manifest, path=path).items()}
    from agentrepro.trainer.warmstart_id import planned_warmstarts

    return StudyPlan(layout=layout.locate(path), methods=tuple(methods), seeds=tuple(seeds), train_steps=train_steps,
                     steps=tuple(steps), resources=resources, threads=threads, method_resources=per_method,
                     warmstarts=planned_warmstarts(manifest, path=path))


def lock_state(manifest_path: str | os.PathLike, lock_file: str | os.PathLike | None = None) -> str:
    """`missing` (the workflow's first job freezes it) or `ok`; a lock from another manifest raises LockMismatch."""
    lock_file = Path(lock_file or layout.lock_path(manifest_path))
    if not lock_file.exists():
        return "missing"
    try:
        lock = json.loads(lock_file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise LockMismatch(f"malformed JSON ({exc.msg}); run `agentrepro freeze {manifest_path}` to freeze it again", path=lock_file, where=f"line {exc.lineno}") from None
    recorded = lock.get("manifest_sha256") if isinstance(lock, dict) else None
    current = sha256_json(load_study_manifest(manifest_path))
    if recorded != current:
        raise LockMismatch(
            f"frozen from a different manifest (manifest_sha256 {str(recorded)[:12]}…, {manifest_path} is now {current[:12]}…); "
            f"the workflow never re-freezes silently: review the change, then run `agentrepro freeze {manifest_path}`",
            path=lock_file, where="manifest_sha256")
    return "ok"


def all_manifests(directory: str | os.PathLike = layout.MANIFESTS) -> list[str]:
    """Every study manifest in `directory` (not the references)."""
    return sorted(str(p) for p in Path(directory).glob("*.yaml"))


__all__ = ["LockMismatch", "StudyPlan", "all_manifests", "job_resources", "lock_state", "study_plan"]
