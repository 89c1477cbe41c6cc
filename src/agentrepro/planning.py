"""What a study plans, from its manifest alone: the one place the Snakefile, `agentrepro command`, freeze, the
preflight and the audit ask (docs/design.md §1). Nothing is run, so the DAG is known before anything runs (a dry
run needs no lock).

* `StudyPlan(manifest, manifest_file)`: every job of the study (`Job`: method, seed, backend, draft run config, run
  directory), each draft config built once, and every answer read from them: `steps` (the evaluated = checkpointed
  steps, the same for every method, which its backend must save), `warmstarts` ({(method, seed): identity} of the
  jobs that warm-start with the builtin backend), the Snakemake resources of each method's placement, a job's
  `launches` and what `agentrepro command` and `snakemake -n -p` show of them (`shown`), and, for the lock, the
  backends' `deviations` from their official recipes and the `seed_streams` the seed reaches.
* `study_plan(manifest_path)`: the Snakefile's plan, with everything the DAG needs computed at once.
* `job_resources(resources)`: a `resources` block as Snakemake resources (`gpu`, `runtime` in minutes, `mem_mb`,
  `cpus_per_task`, `slurm_partition`, `constraint`) and the job's thread count.
* `lock_state(manifest_path)`: `missing` or `ok`; a lock that disagrees with its manifest raises `LockMismatch`,
  whose message tells the user to run `agentrepro freeze` (never re-frozen silently).
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrepro import layout, lockfile, runconfig
from agentrepro.backends import Backend, get_backend
from agentrepro.backends.launch import Launch
from agentrepro.backends.ray_head import address_file
from agentrepro.containers.image import Image, image_of
from agentrepro.errors import BadInput, read_from
from agentrepro.fileio import sha256_json
from agentrepro.manifest.loading import load_manifest
from agentrepro.manifest.resolve import run_config
from agentrepro.placement import Placement, placements
from agentrepro.process import PREEMPT_SIGNAL
from agentrepro.trainer.shared_warmstart import identity, uses_warmstart, warmstart_config

NOT_FROZEN = "(not frozen)"
CONVERT_RESOURCES = {"gpus": 0, "cpus": 1, "mem_mb": 2000, "runtime_min": 30}
"""An eval job that converts what the training wrote (a JSONL of a few hundred episodes) into outcome rows."""


class LockMismatch(BadInput):
    """The lock on disk was frozen from a different manifest (or was edited)."""


# --- the study's plan ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Job:
    """One method x seed of a study: its backend, its draft run config (what `agentrepro resolve` would write from
    the lock, built from the manifest alone and resolved over the backend's defaults as `agentrepro train` resolves
    it; the lock's own parts, the task panel and file hashes, are not there yet, placeholders stay as they are) and
    its run directory (runs/<study>/<method>/seed<k>, relative to the study root)."""

    method: str
    seed: int
    backend: Backend
    config: dict[str, Any]
    run_dir: Path


class StudyPlan:
    """What a study plans from its manifest, each job's draft config built once (on first use: `agentrepro command`
    asks for one job), and every answer read from those jobs, so that the plan and the jobs read the same values.
    Freeze, preflight, `agentrepro command`, the Snakefile and the audit take a plan; none builds a config of its own.

    `manifest_file` names the manifest in messages (the audit plans the lock's manifest under a label); paths are
    relative to the workflow's working directory."""

    def __init__(self, document: dict[str, Any], manifest_file: str | os.PathLike):
        self.document = document
        self.manifest_file = manifest_file
        self.methods: tuple[str, ...] = tuple(document["methods"])
        self.seeds: tuple[int, ...] = tuple(document["seeds"])
        self._jobs: dict[tuple[str, int], Job] = {}

    @classmethod
    def load(cls, manifest_path: str | os.PathLike) -> StudyPlan:
        """The plan of the manifest at `manifest_path` (loaded and checked: BadInput names the file and field)."""
        return cls(load_manifest(manifest_path), manifest_path)

    # -- jobs ---------------------------------------------------------------------------------------------------
    def job(self, method: str, seed: int) -> Job:
        """The job of method x seed (its draft config built on first use; not checked by its backend: `checked`)."""
        key = (method, seed)
        if key not in self._jobs:
            draft = {"manifest": self.document, "study": self.document["study"], "resolved": {"files": {}}}
            config = run_config({**draft, "task_panel": []}, method, seed, lock_path=self.manifest_file)
            config["lock"] = {"path": NOT_FROZEN, "sha256": NOT_FROZEN}
            with read_from(self.manifest_file):
                backend = get_backend(config["backend"]["name"])
            config = backend.resolve(config)
            self._jobs[key] = Job(method, seed, backend, config, self.layout.run_dir(method, seed))
        return self._jobs[key]

    def jobs(self) -> list[Job]:
        """Every job, methods x seeds in the manifest's order."""
        return [self.job(method, seed) for method in self.methods for seed in self.seeds]

    def checked(self, method: str, seed: int) -> Job:
        """The job, its config checked by its backend as `agentrepro train` checks it; BadInput names the manifest."""
        job = self.job(method, seed)
        with read_from(self.manifest_file):
            job.backend.validate_config(job.config)
        return job

    # -- what the DAG needs ---------------------------------------------------------------------------------------
    @functools.cached_property
    def layout(self) -> layout.Study:
        return layout.Study(self.document["study"], Path(self.manifest_file))

    @property
    def study(self) -> str:
        return self.layout.name

    @property
    def manifest(self) -> str:
        return str(self.layout.manifest)

    @property
    def lock(self) -> str:
        return str(self.layout.lock)

    @functools.cached_property
    def steps(self) -> tuple[int, ...]:
        """The evaluated (= checkpointed) steps: `runconfig.checkpoint_steps` of each method's draft config. Every
        method must have the same steps, and its backend must save exactly them (`Backend.checkpoint_steps`)."""
        path, per_method = self.manifest_file, {}
        for method in self.methods:
            job = self.job(method, self.seeds[0])
            per_method[method] = runconfig.checkpoint_steps(job.config, path=path)
            saved = job.backend.checkpoint_steps(job.config)
            if saved != per_method[method]:
                raise BadInput(
                    f"the {job.backend.name} backend would save steps {saved} of {method}, but the study evaluates "
                    f"{per_method[method]}",
                    path=path,
                    where="eval",
                )
        if len({tuple(steps) for steps in per_method.values()}) != 1:
            raise BadInput(f"every method must evaluate the same steps, got {per_method}", path=path, where="methods")
        return tuple(next(iter(per_method.values())))

    @functools.cached_property
    def warmstarts(self) -> dict[tuple[str, int], str]:
        """{(method, seed): warm-start identity} of every job that warm-starts with the builtin backend
        (trainer/shared_warmstart.py); the workflow runs one warm-start job per distinct (seed, identity)."""
        return {
            (job.method, job.seed): identity(warmstart_config(job.config, path=self.manifest_file))
            for job in self.jobs()
            if uses_warmstart(job.config)
        }

    @functools.cached_property
    def train_steps(self) -> int:
        steps = self.document["train"].get("steps")
        if steps is None:
            raise BadInput("missing key `steps` (the workflow needs it)", path=self.manifest_file, where="train")
        return steps

    @functools.cached_property
    def _resources(self) -> tuple[dict[str, Any], int]:
        return job_resources(self.document.get("resources") or {}, path=self.manifest_file)

    @property
    def resources(self) -> dict[str, Any]:
        """The study's default `resources` as Snakemake resources (a warm-start job's: its retries ask no more runtime
        or memory)."""
        return {k: v for k, v in self._resources[0].items() if k not in {r.key for r in RETRIES}}

    @property
    def threads(self) -> int:
        return self._resources[1]

    @functools.cached_property
    def placements(self) -> dict[str, Placement]:
        """Each method's placement (its backend, image and resources blocks), read once."""
        return placements(self.document, path=self.manifest_file)

    @functools.cached_property
    def method_resources(self) -> dict[str, tuple[dict[str, Any], int]]:
        """Per method, (Snakemake resources, threads) of its placement (the schema has checked each block)."""
        return {
            method: job_resources(
                placement.resources,
                path=self.manifest_file,
                signal=get_backend(placement.name).saves_on_preempt_signal,
                spans_nodes=get_backend(placement.name).spans_nodes,
                backend=placement.name,
            )
            for method, placement in self.placements.items()
        }

    @functools.cached_property
    def images(self) -> list[Image]:
        """The distinct container images of the study's placements (none for placements without a container): what
        `agentrepro images` prepares before the jobs, on the host that submits them."""
        found: dict[tuple[str, str], Image] = {}
        with read_from(self.manifest_file):
            for placement in self.placements.values():
                image = image_of(placement.image, where=f"{placement.where}image") if placement.image else None
                if image is not None:
                    found.setdefault((image.runtime, image.pinned), image)
        return list(found.values())

    @functools.cached_property
    def method_eval_resources(self) -> dict[str, tuple[dict[str, Any], int]]:
        """Per method, what its eval job asks: its placement's resources, or, where the backend evaluates during
        training and the eval job only converts what it wrote (`Backend.evaluates_in_training`), CONVERT_RESOURCES
        on the placement's partition."""
        out = {}
        for method, placement in self.placements.items():
            resources = placement.resources
            if get_backend(placement.name).evaluates_in_training:
                where = {k: resources[k] for k in ("partition", "qos") if resources.get(k)}
                resources = {**CONVERT_RESOURCES, **where}
            out[method] = job_resources(resources, path=self.manifest_file)
        return out

    def job_resources(self, *, evaluation: bool = False) -> dict[str, Any]:
        """The `resources:` of a train job (or, `evaluation`, an eval job): values when every method asks the same,
        else one function of the job's wildcards per resource (a resource a method does not set is None: unset)."""
        per_method = self.method_eval_resources if evaluation else self.method_resources
        first = next(iter(per_method.values()), (self.resources, self.threads))[0]
        if all(res == first for res, _ in per_method.values()):
            out = dict(first)
        else:
            keys = dict.fromkeys(k for res, _ in per_method.values() for k in res)
            out = {key: (lambda wildcards, key=key: per_method[wildcards.method][0].get(key)) for key in keys}
        for retry in RETRIES:
            out.pop(retry.key, None)
            more = {method: res.get(retry.key, 0) for method, (res, _) in per_method.items()}
            if any(more.values()):
                out[retry.resource] = _grown_on_retry(out[retry.resource], more)
        return out

    def job_threads(self, *, evaluation: bool = False) -> int | Any:
        """The `threads:` of a train (or eval) job: a number, or a function of the wildcards when methods differ."""
        per_method = self.method_eval_resources if evaluation else self.method_resources
        first = next(iter(per_method.values()), (self.resources, self.threads))[1]
        if all(threads == first for _, threads in per_method.values()):
            return first
        return lambda wildcards: per_method[wildcards.method][1]

    # -- what each job runs ---------------------------------------------------------------------------------------
    def launches(self, method: str, seed: int, eval_step: int | None = None, *, check: bool = True) -> list[Launch]:
        """The programs of one job, as `train` (or `eval` of `eval_step`) would run them; `check=False` skips the
        backend's config check (the workflow's dry run, which plans before freeze checks)."""
        job = self.checked(method, seed) if check else self.job(method, seed)
        steps = job.backend.checkpoint_steps(job.config)
        if eval_step is not None and eval_step not in steps:
            raise BadInput(
                f"step {eval_step} is not an evaluated step of this study ({', '.join(map(str, steps))})",
                path=self.manifest_file,
                where="--eval-step",
            )
        return job.backend.launches(job.config, job.run_dir, eval_step=eval_step)

    def shown(self, method: str, seed: int, eval_step: int | None = None, *, check: bool = True) -> str:
        """What `agentrepro command` prints for one job (and the workflow's train job message shows under
        `snakemake -n -p`, with `check=False`): a header line, then each launch's purpose and its `Launch.shown()`."""
        launches = self.launches(method, seed, eval_step, check=check)
        job = self.job(method, seed)
        name, what = (
            job.backend.name,
            f"the evaluation of step {eval_step}" if eval_step is not None else "the train job",
        )
        lines = [f"# {self.manifest_file}: {method} seed {seed}, {what} (backend {name}, run directory {job.run_dir})"]
        if not launches:
            lines.append(
                f"# the {name} backend lists no external program for this job (Backend.launches is empty): "
                f"`agentrepro {'eval' if eval_step is not None else 'train'}` does the work itself"
            )
        for number, launch in enumerate(launches, start=1):
            lines += [f"# {number}. {launch.purpose}", launch.shown()]
        nodes = int((job.config.get("resources") or {}).get("nodes", 1))
        if nodes > 1 and eval_step is None:
            lines.append(
                f"# over {nodes} nodes (in the job, from its SLURM allocation): the head also gets --node-ip <the first "
                f"node's address> --address-file {address_file(job.run_dir)}, and `srun --nodes="
                f"{nodes - 1} --ntasks-per-node=1` runs `agentrepro node {job.run_dir.resolve()} --key <the head's key>` "
                "on each other node, which builds its worker node's launch there (docs/commands.md#node)"
            )
        return "\n".join(lines)

    # -- what the lock records ------------------------------------------------------------------------------------
    def seed_streams(self) -> dict[str, list[dict[str, Any]]]:
        """{backend label: [{stream, reached, how}]} over the study's placements (each from its first method's job)."""
        out: dict[str, list[dict[str, Any]]] = {}
        for method, placement in self.placements.items():
            label = placement.label or placement.name
            if label not in out:
                job = self.job(method, self.seeds[0])
                with read_from(self.manifest_file):
                    out[label] = [stream.record() for stream in job.backend.seed_streams(job.config)]
        return out

    def deviations(self) -> list[str]:
        """The backends' deviations from their official recipes over all jobs, one sentence per setting: the value
        when every job it applies to sets the same one, else "per run" (run names, paths, seeds), with the official
        value, why, and the methods concerned. Backends that change no official recipe give none (a study may mix
        backends). Each run keeps its own exact list (verl: verl_deviations.json)."""
        seen: dict[tuple[str, str, str], dict[str, Any]] = {}
        for job in self.jobs():
            with read_from(self.manifest_file):
                found = job.backend.deviations(job.config, job.run_dir)
            for record in found:
                entry = seen.setdefault(
                    (record["key"], str(record["official"]), record["why"]),
                    {"values": [], "methods": [], "source": record.get("source", "the script")},
                )
                entry["values"].append(json.dumps(record["value"]))
                if job.method not in entry["methods"]:
                    entry["methods"].append(job.method)
        sentences = []
        for (key, official, why), entry in seen.items():
            values = set(entry["values"])  # one value, set by every job of its methods: shown; else it varies by run
            every = len(entry["values"]) == len(entry["methods"]) * len(self.seeds)
            value = values.pop() if len(values) == 1 and every else "per run"
            source = entry["source"]
            official = f"not set by {source}" if official == "None" else f"{source} sets {official}"
            methods = "all methods" if len(entry["methods"]) == len(self.methods) else ", ".join(entry["methods"])
            sentences.append(f"{key} = {value} ({official}; {why}; {methods})")
        return sentences

    def lock_state(self) -> str:
        """`missing` (the workflow's first job freezes it) or `ok`; a lock from another manifest raises LockMismatch,
        whose message tells the user to run `agentrepro freeze` (never re-frozen silently)."""
        return lock_state(self.manifest_file, self.lock, document=self.document)


@dataclass(frozen=True)
class Retry:
    """A Snakemake resource each retry of a job asks more of than the attempt before it: a job cut at its time limit
    is retried longer, one killed for its memory with more."""

    resource: str  # the Snakemake resource
    key: str  # how much more, among the resources job_resources returns
    field: str  # the manifest's key under `resources`
    unit: str


RETRIES = (
    Retry("runtime", "runtime_per_retry", "runtime_retry_min", "minutes"),
    Retry("mem_mb", "mem_mb_per_retry", "mem_retry_mb", "MB"),
)


def _grown_on_retry(base: Any, more: dict[str, int]) -> Any:
    """A resource function of Snakemake's attempt (1, 2, ...): `base` (a value, or a function of the job's wildcards)
    on the first, `more[method]` more on each retry."""

    def grown(wildcards, attempt: int) -> int:
        first_try = base(wildcards) if callable(base) else base
        return first_try + (attempt - 1) * more[wildcards.method]

    return grown


# manifest `resources` key -> the Snakemake resource snakemake-executor-plugin-slurm turns into its sbatch flag
SLURM_NAMES = {"partition": "slurm_partition", "constraint": "constraint", "qos": "qos", "gpu_model": "gpu_model"}
SIGNAL_LEAD_S = 300  # resources.signal_before_limit_s when unset: seconds for the step in flight and its save


def job_resources(
    resources: dict[str, Any],
    *,
    path: object = "manifest",
    signal: bool = False,
    spans_nodes: bool = False,
    backend: str = "this backend",
) -> tuple[dict[str, Any], int]:
    """(Snakemake resources, threads) for one train or eval job: gpu, runtime (min), mem_mb, cpus_per_task, how much
    more runtime and memory each retry asks (RETRIES, which StudyPlan.job_resources makes functions of the attempt),
    and, when the manifest names them, slurm_partition, constraint, qos, gpu_model and nodes (SLURM only).

    `spans_nodes` (a backend whose job may run over several nodes, Backend.spans_nodes): `nodes` > 1 is allowed, and
    then CPUs, memory and GPUs are each node's (sbatch's --cpus-per-task and --mem are; GPUs are asked as the GRES
    `gpu[:MODEL]:N`, which is per node, instead of --gpus, which is the job's total: `gpus_per_node`).

    `signal` (a training that saves on PREEMPT_SIGNAL): `slurm_extra` asks SLURM for that signal
    `signal_before_limit_s` seconds before the job's time limit (default SIGNAL_LEAD_S, or a tenth of the runtime
    when that is shorter; 0: no signal), so that the training saves its step and its retry resumes from it."""

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
        **{retry.key: number(retry.field, 0) for retry in RETRIES},
        "cpus_per_task": cpus,
    }
    nodes = number("nodes", 1)
    if nodes > 1 and not spans_nodes:
        raise BadInput(
            f"a job of {backend} runs on one node, got {nodes} (jobs over several nodes: verl-agent's)",
            path=path,
            where="resources.nodes",
        )
    if resources.get("nodes") is not None:
        out["nodes"] = max(1, nodes)
    for key, resource in SLURM_NAMES.items():
        if resources.get(key) is not None:
            if not isinstance(resources[key], str) or not resources[key]:
                raise BadInput(
                    f"expected a non-empty string, got {resources[key]!r}", path=path, where=f"resources.{key}"
                )
            out[resource] = resources[key]
    if out.get("gpu_model") and not out["gpu"]:
        raise BadInput(
            "names a GPU model for a job of no GPUs (resources.gpus is 0)", path=path, where="resources.gpu_model"
        )
    lead = number("signal_before_limit_s", min(SIGNAL_LEAD_S, out["runtime"] * 6))
    if lead >= out["runtime"] * 60:
        raise BadInput(
            f"the signal would come at the job's start: {lead} s is not less than resources.runtime_min "
            f"({out['runtime']} min)",
            path=path,
            where="resources.signal_before_limit_s",
        )
    if signal and lead:
        # The plugin appends slurm_extra to sbatch's command line: built here from a checked integer only.
        out["slurm_extra"] = f"--signal={PREEMPT_SIGNAL.name.removeprefix('SIG')}@{lead}"
    if nodes > 1 and out["gpu"]:  # the plugin makes `gres` --gres (per node) and `gpu` --gpus (the job's total)
        model = out.pop("gpu_model", None)
        out["gres"] = f"gpu:{model}:{out['gpu']}" if model else f"gpu:{out['gpu']}"
        out["gpu"] = 0  # the rules' GPU slots run under SLURM unchanged; a local run of such a job is refused
    return out, cpus


def gpus_per_node(resources: dict[str, Any]) -> tuple[str | None, int]:
    """(GPU model or None, GPUs on each node) that a job's Snakemake resources (`job_resources`) ask for."""
    gres = resources.get("gres")
    if gres:
        words = gres.split(":")
        return (words[1] if len(words) == 3 else None), int(words[-1])
    return resources.get("gpu_model"), int(resources.get("gpu") or 0)


def slurm_request(resources: dict[str, Any]) -> list[str]:
    """The sbatch flags snakemake-executor-plugin-slurm (2.8: submit_string.py, utils.set_gres_string) makes of a
    job's Snakemake resources (`job_resources`), as `agentrepro command` shows them; the profile adds its own
    (account, log files, job name)."""
    flags = [f"-p {resources['slurm_partition']}"] if resources.get("slurm_partition") else []
    flags += [
        f"-t {resources['runtime']}",
        f"--mem {resources['mem_mb']}",
        f"--cpus-per-task={resources['cpus_per_task']}",
    ]
    flags += [f"-C {resources['constraint']}"] if resources.get("constraint") else []
    flags += [f"--qos={resources['qos']}"] if resources.get("qos") else []
    flags += [f"--nodes={resources['nodes']}"] if resources.get("nodes") else []
    if resources.get("gres"):
        flags.append(f"--gres={resources['gres']}")
    elif resources.get("gpu_model"):
        flags.append(f"--gpus={resources['gpu_model']}:{resources['gpu']}")
    elif resources.get("gpu"):
        flags.append(f"--gpus={resources['gpu']}")
    return flags + ([resources["slurm_extra"]] if resources.get("slurm_extra") else [])


def study_plan(manifest_path: str | os.PathLike) -> StudyPlan:
    """The plan of the manifest at `manifest_path` with everything the DAG needs computed now, so that a manifest the
    workflow cannot run stops it before any job: methods x seeds, evaluated steps, job resources and warm starts."""
    path = str(manifest_path)
    if not Path(path).is_file():
        raise BadInput("manifest not found (set it with --config manifest=manifests/<study>.yaml)", path=path)
    plan = StudyPlan.load(path)  # its `study` must equal its file name: paths derive from it
    plan.train_steps, plan.steps, plan.method_resources, plan.warmstarts  # noqa: B018 (each raises BadInput if wrong)
    return plan


def lock_state(
    manifest_path: str | os.PathLike,
    lock_file: str | os.PathLike | None = None,
    *,
    document: dict[str, Any] | None = None,
) -> str:
    """`missing` (the workflow's first job freezes it) or `ok`; a lock from another manifest raises LockMismatch.
    `document`: the manifest, when the caller has loaded it already."""
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
    current = sha256_json(document if document is not None else load_manifest(manifest_path))
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
