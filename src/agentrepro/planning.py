"""What a study plans, from its manifest alone: the one place the Snakefile, `agentrepro command`, freeze and the
audit ask (docs/design.md §1).

Pure functions over the manifest, so that the DAG is known before anything runs (a dry run needs no lock):

* `draft_config(manifest, manifest_file, method, seed)`: the run config `agentrepro resolve` would write from the
  lock, built from the manifest alone (the lock's own parts, the task panel and file hashes, are not there yet;
  placeholders stay as they are) and resolved over its backend's defaults as `agentrepro train` resolves it. Every
  other answer below is read from these configs, so the plan and the jobs read the same values.
* `planned_steps(manifest)`: the evaluated (= checkpointed) steps, `runconfig.checkpoint_steps` of each method's
  draft config; every method must have the same steps (so the same `train.steps`: the last one is always
  evaluated), and its backend must save exactly them.
* `planned_warmstarts(manifest)`: {(method, seed): identity} of every method x seed that warm-starts with the
  builtin backend (trainer/shared_warmstart.py); the workflow runs one warm-start job per distinct (seed, identity).
* `job_resources(resources)`: a `resources` block as Snakemake resources (`gpu`, `runtime` in minutes, `mem_mb`,
  `cpus_per_task`, `slurm_partition`, `constraint`) and the job's thread count; each method's are its placement's.
* `study_plan(manifest_path) -> StudyPlan`: all of the above for one manifest, with the study's paths.
* `shown(...)` / `planned_launches(...)`: the programs a job runs (`Backend.launches`), as `agentrepro command` and
  the train job's message under `snakemake -n -p` print them; `deviations(...)`: the backends' departures from
  their official recipes over all jobs, one sentence per setting, for the lock.
* `seed_streams(...)`: per backend of the study, which random streams the run's seed reaches (`Backend.seed_streams`),
  for the lock; the report names the ones shared across seeds.
* `lock_state(manifest_path)`: `missing` or `ok`; a lock that disagrees with its manifest raises `LockMismatch`,
  whose message tells the user to run `agentrepro freeze` (never re-frozen silently).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentrepro import layout, lockfile, runconfig
from agentrepro.backends import Backend, get_backend
from agentrepro.backends.launch import Launch
from agentrepro.errors import BadInput, read_from
from agentrepro.fileio import sha256_json
from agentrepro.manifest.loading import load_manifest
from agentrepro.manifest.resolve import run_config
from agentrepro.placement import placements
from agentrepro.trainer.shared_warmstart import identity, uses_warmstart, warmstart_config

NOT_FROZEN = "(not frozen)"


class LockMismatch(BadInput):
    """The lock on disk was frozen from a different manifest (or was edited)."""


# --- each job's config -----------------------------------------------------------------------------------------


def draft_config(
    manifest: dict[str, Any], manifest_file: str | os.PathLike, method: str, seed: int, *, check: bool = True
) -> tuple[Backend, dict[str, Any]]:
    """(backend, resolved run config) of method x seed, checked by the backend unless `check` is false;
    BadInput names the manifest."""
    draft = {"manifest": manifest, "study": manifest["study"], "resolved": {"files": {}}, "task_panel": []}
    config = run_config(draft, method, seed, lock_path=manifest_file)
    config["lock"] = {"path": NOT_FROZEN, "sha256": NOT_FROZEN}
    with read_from(manifest_file):
        backend = get_backend(config["backend"]["name"])
    config = runconfig.resolve_config(config, backend.default_config())
    if check:
        with read_from(manifest_file):
            backend.validate_config(config)
    return backend, config


def run_dir(manifest: dict[str, Any], manifest_file: str | os.PathLike, method: str, seed: int) -> Path:
    """runs/<study>/<method>/seed<k>, relative to the study root (where the workflow runs)."""
    return layout.Study(manifest["study"], Path(manifest_file)).run_dir(method, seed)


def planned_steps(manifest: dict[str, Any], *, path: object = "manifest") -> list[int]:
    """The evaluated (= checkpointed) steps of a study: `runconfig.checkpoint_steps` of each method's draft config.
    Every method must have the same steps, and the backend must save exactly them (`Backend.checkpoint_steps`)."""
    per_method = {}
    for method in manifest["methods"]:
        backend, config = draft_config(manifest, path, method, manifest["seeds"][0], check=False)
        per_method[method] = runconfig.checkpoint_steps(config, path=path)
        saved = backend.checkpoint_steps(config)
        if saved != per_method[method]:
            raise BadInput(
                f"the {backend.name} backend would save steps {saved} of {method}, but the study evaluates "
                f"{per_method[method]}",
                path=path,
                where="eval",
            )
    if len({tuple(steps) for steps in per_method.values()}) != 1:
        raise BadInput(f"every method must evaluate the same steps, got {per_method}", path=path, where="methods")
    return next(iter(per_method.values()))


def planned_warmstarts(manifest: dict[str, Any], *, path: object = "manifest") -> dict[tuple[str, int], str]:
    """{(method, seed): warm-start identity} for every method x seed of the manifest that warm-starts with the
    builtin backend, from its draft config (the backend's defaults under the manifest's blocks)."""
    planned: dict[tuple[str, int], str] = {}
    for method in manifest["methods"]:
        for seed in manifest["seeds"]:
            _, config = draft_config(manifest, path, method, seed, check=False)
            if uses_warmstart(config):
                planned[(method, seed)] = identity(warmstart_config(config, path=path))
    return planned


# --- the study's plan ------------------------------------------------------------------------------------------


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
    warmstarts: dict[tuple[str, int], str] = field(default_factory=dict)

    def job_resources(self) -> dict[str, Any]:
        """The `resources:` of a train or eval job: values when every method's backend asks the same, else one
        function of the job's wildcards per resource (a resource a backend does not set is None: unset)."""
        per_method = self.method_resources or dict.fromkeys(self.methods, (self.resources, self.threads))
        if all(res == self.resources for res, _ in per_method.values()):
            return dict(self.resources)
        keys = dict.fromkeys(k for res, _ in per_method.values() for k in res)
        return {key: (lambda wildcards, key=key: per_method[wildcards.method][0].get(key)) for key in keys}

    def job_threads(self) -> int | Any:
        """The `threads:` of a train or eval job: a number, or a function of the wildcards when backends differ."""
        per_method = self.method_resources or dict.fromkeys(self.methods, (self.resources, self.threads))
        if all(threads == self.threads for _, threads in per_method.values()):
            return self.threads
        return lambda wildcards: per_method[wildcards.method][1]

    @property
    def study(self) -> str:
        return self.layout.name

    @property
    def manifest(self) -> str:
        return str(self.layout.manifest)

    @property
    def lock(self) -> str:
        return str(self.layout.lock)


def job_resources(resources: dict[str, Any], *, path: object = "manifest") -> tuple[dict[str, Any], int]:
    """(Snakemake resources, threads) for one train or eval job: gpu, runtime (min), mem_mb, cpus_per_task,
    and, when the manifest names them, slurm_partition and constraint (SLURM only)."""

    def number(key: str, default: int) -> int:
        value = resources.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise BadInput(f"expected a non-negative integer, got {value!r}", path=path, where=f"resources.{key}")
        return value

    cpus = max(1, number("cpus", 1))
    out: dict[str, Any] = {
        "gpu": number("gpus", 0),
        "runtime": max(1, number("runtime_min", 60)),
        "mem_mb": max(1, number("mem_mb", 4000)),
        "cpus_per_task": cpus,
    }
    for key, resource in (("partition", "slurm_partition"), ("constraint", "constraint")):
        if resources.get(key) is not None:
            if not isinstance(resources[key], str) or not resources[key]:
                raise BadInput(
                    f"expected a non-empty string, got {resources[key]!r}", path=path, where=f"resources.{key}"
                )
            out[resource] = resources[key]
    return out, cpus


def study_plan(manifest_path: str | os.PathLike) -> StudyPlan:
    """The study's plan from its manifest: methods x seeds, evaluated steps, job resources and warm starts."""
    path = str(manifest_path)
    if not Path(path).is_file():
        raise BadInput("manifest not found (set it with --config manifest=manifests/<study>.yaml)", path=path)
    manifest = load_manifest(path)  # its `study` must equal its file name: paths derive from it
    methods, seeds, train_steps = manifest["methods"], manifest["seeds"], manifest["train"].get("steps")
    if train_steps is None:
        raise BadInput("missing key `steps` (the workflow needs it)", path=path, where="train")
    resources, threads = job_resources(manifest.get("resources") or {}, path=path)
    per_method = {
        method: job_resources(placement.resources, path=path)  # the schema has checked each block
        for method, placement in placements(manifest, path=path).items()
    }
    return StudyPlan(
        layout=layout.locate(path),
        methods=tuple(methods),
        seeds=tuple(seeds),
        train_steps=train_steps,
        steps=tuple(planned_steps(manifest, path=path)),
        resources=resources,
        threads=threads,
        method_resources=per_method,
        warmstarts=planned_warmstarts(manifest, path=path),
    )


def lock_state(manifest_path: str | os.PathLike, lock_file: str | os.PathLike | None = None) -> str:
    """`missing` (the workflow's first job freezes it) or `ok`; a lock from another manifest raises LockMismatch."""
    lock_file = Path(lock_file or layout.lock_path(manifest_path))
    if not lock_file.exists():
        return "missing"
    try:
        lock = lockfile.read_lock(lock_file, verify=False)  # its hashes are resolve's and the audit's to check
    except BadInput as exc:
        raise LockMismatch(
            f"{exc.message}; run `agentrepro freeze {manifest_path}` to freeze it again",
            path=lock_file,
            where=exc.where,
        ) from None
    recorded = lock.get(lockfile.MANIFEST_SHA256)
    current = sha256_json(load_manifest(manifest_path))
    if recorded != current:
        raise LockMismatch(
            f"frozen from a different manifest (manifest_sha256 {str(recorded)[:12]}…, {manifest_path} is now {current[:12]}…); "
            f"the workflow never re-freezes silently: review the change, then run `agentrepro freeze {manifest_path}`",
            path=lock_file,
            where=lockfile.MANIFEST_SHA256,
        )
    return "ok"


def all_manifests(directory: str | os.PathLike = layout.MANIFESTS) -> list[str]:
    """Every study manifest in `directory` (not the references)."""
    return sorted(str(p) for p in Path(directory).glob("*.yaml"))


# --- what each job runs ----------------------------------------------------------------------------------------


def planned_launches(
    manifest: dict[str, Any],
    manifest_file: str | os.PathLike,
    method: str,
    seed: int,
    eval_step: int | None = None,
    *,
    check: bool = True,
) -> tuple[str, Path, list[Launch]]:
    """(backend name, run directory, launches) of one job, as `train` (or `eval` of `eval_step`) would run it;
    `check=False` skips the backend's config check (the workflow's dry run, which plans before freeze checks)."""
    backend, config = draft_config(manifest, manifest_file, method, seed, check=check)
    steps = backend.checkpoint_steps(config)
    if eval_step is not None and eval_step not in steps:
        raise BadInput(
            f"step {eval_step} is not an evaluated step of this study ({', '.join(map(str, steps))})",
            path=manifest_file,
            where="--eval-step",
        )
    where = run_dir(manifest, manifest_file, method, seed)
    return backend.name, where, backend.launches(config, where, eval_step=eval_step)


def shown(
    manifest: dict[str, Any],
    manifest_file: str | os.PathLike,
    method: str,
    seed: int,
    eval_step: int | None = None,
    *,
    check: bool = True,
) -> str:
    """What `agentrepro command` prints for one job (and the workflow's train job message shows under
    `snakemake -n -p`, with `check=False`): a header line, then each launch's purpose and its `Launch.shown()`."""
    name, where, launches = planned_launches(manifest, manifest_file, method, seed, eval_step, check=check)
    job = f"the evaluation of step {eval_step}" if eval_step is not None else "the train job"
    lines = [f"# {manifest_file}: {method} seed {seed}, {job} (backend {name}, run directory {where})"]
    if not launches:
        lines.append(
            f"# the {name} backend lists no external program for this job (Backend.launches is empty): "
            f"`agentrepro {'eval' if eval_step is not None else 'train'}` does the work itself"
        )
    for number, launch in enumerate(launches, start=1):
        lines += [f"# {number}. {launch.purpose}", launch.shown()]
    return "\n".join(lines)


def seed_streams(manifest: dict[str, Any], manifest_file: str | os.PathLike) -> dict[str, list[dict[str, Any]]]:
    """{backend label: [{stream, reached, how}]} over the study's placements (each from its first method's draft config)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for method, placement in placements(manifest, path=manifest_file).items():
        label = placement.label or placement.name
        if label not in out:
            backend, config = draft_config(manifest, manifest_file, method, manifest["seeds"][0], check=False)
            with read_from(manifest_file):
                out[label] = [stream.record() for stream in backend.seed_streams(config)]
    return out


def deviations(manifest: dict[str, Any], manifest_file: str | os.PathLike) -> list[str]:
    """The backends' deviations from their official recipes over all jobs, one sentence per setting: the value when
    every job it applies to sets the same one, else "per run" (run names, paths, seeds), with the official value,
    why, and the methods concerned. Backends that change no official recipe give none (a study may mix backends).
    Each run keeps its own exact list (verl: verl_deviations.json)."""
    seen: dict[tuple[str, str, str], dict[str, Any]] = {}
    for method in manifest["methods"]:
        for seed in manifest["seeds"]:
            backend, config = draft_config(manifest, manifest_file, method, seed, check=False)
            with read_from(manifest_file):
                found = backend.deviations(config, run_dir(manifest, manifest_file, method, seed))
            for record in found:
                entry = seen.setdefault(
                    (record["key"], str(record["official"]), record["why"]), {"values": [], "methods": []}
                )
                entry["values"].append(json.dumps(record["value"]))
                if method not in entry["methods"]:
                    entry["methods"].append(method)
    sentences = []
    for (key, official, why), entry in seen.items():
        values = set(entry["values"])  # one value, set by every job of its methods: shown; else it varies by run
        every = len(entry["values"]) == len(entry["methods"]) * len(manifest["seeds"])
        value = values.pop() if len(values) == 1 and every else "per run"
        official = "not set by the script" if official == "None" else f"the script sets {official}"
        methods = "all methods" if len(entry["methods"]) == len(manifest["methods"]) else ", ".join(entry["methods"])
        sentences.append(f"{key} = {value} ({official}; {why}; {methods})")
    return sentences
