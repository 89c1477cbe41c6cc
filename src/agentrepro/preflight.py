"""`agentrepro preflight MANIFEST`: what each job of a study will demand, checked before anything is queued.

For every method x seed, the job's draft config (its `planning.Job`: what `agentrepro train` will run) and its
backend's `Backend.demands`: values its framework takes only as they are (a pinned model revision), Ray worker
processes against the head's worker ports, the CPUs its recipe reserves in Ray against resources.cpus, GPUs against
tensor-parallel sizes, the model's heads and the batch sizes that must divide by the data-parallel size, ports the
framework hard-codes. Each demand names the manifest field on the job's side, the framework's key on the other, and
how they must relate (backends/base.py `Demand`); a violation is one line naming both and their numbers, exit 2.
Freeze runs the same check (`check`), and `agentrepro command` prints the job's demand table (`table`). The numbers
come from the backend's facts about its framework, computed in the backend's folder; here they are only compared
and shown. The backends' own checks of a config (some read files relative to where a job runs) stay the job's.

Where a method's resources name a SLURM partition, `partition_problems` reads the partition's limits with sinfo
(slurm.py `read_partition`: the time limit, CPUs, memory and GPUs of its largest node, the GPU types its GRES names)
and says each request of a train or eval job that it cannot schedule, naming the manifest field and the limit, on the
job's first attempt and on the last of the SLURM profile's retries, each of which asks resources.runtime_retry_min and
mem_retry_mb more; a partition sinfo cannot be asked about here is said as not checked.

The verb `agentrepro preflight` (agentrepro/cli/preflight.py) prints the demand tables and every violation.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from agentrepro.backends.base import FIXED, Demand
from agentrepro.errors import BadInput, read_from
from agentrepro.placement import method_placement
from agentrepro.planning import RETRIES, StudyPlan, gpus_per_node
from agentrepro.slurm import Partition, read_partition

SLURM_PROFILE = Path("profiles") / "slurm" / "config.yaml"  # `snakemake --profile slurm`'s settings, retries among them


@dataclass(frozen=True)
class JobDemands:
    """The demands of one method x seed, their fields named as the manifest names them (its placement's block)."""

    method: str
    seed: int
    backend: str
    demands: tuple[Demand, ...]

    def violations(self, manifest_file: object) -> list[str]:
        return [
            f"{manifest_file}: {self.method} seed {self.seed}: {d.violation()}" for d in self.demands if not d.holds()
        ]


def _in_manifest(manifest: dict[str, Any], method: str, field: str, *, path: object) -> str:
    """`field` as the manifest names it for `method`: its placement's own block when the value comes from there."""
    placement = method_placement(manifest, method, path=path)
    if not placement.label:
        return field
    own = (manifest.get("backends") or {}).get(placement.label) or {}
    block, _, key = field.partition(".")
    if block == "backend" or (block == "resources" and key.split(".")[0] in (own.get("resources") or {})):
        return placement.where + field
    return field


def job_demands(plan: StudyPlan, method: str, seed: int) -> JobDemands:
    """The demands of one job, from its draft config (the config a job of it will run; its backend's own checks of a
    config, some of which read files relative to where a job runs, are the job's and `agentrepro command`'s)."""
    job = plan.job(method, seed)
    with read_from(plan.manifest_file):
        found = job.backend.demands(job.config, job.run_dir)
    named = tuple(
        Demand(
            d.what,
            d.key,
            d.need,
            _in_manifest(plan.document, method, d.field, path=plan.manifest_file),
            d.have,
            d.rule,
            d.source,
            d.via,
        )
        for d in found
    )
    return JobDemands(method, seed, job.backend.name, named)


def study_demands(
    plan: StudyPlan, *, methods: list[str] | None = None, seeds: list[int] | None = None
) -> list[JobDemands]:
    return [job_demands(plan, method, seed) for method in (methods or plan.methods) for seed in (seeds or plan.seeds)]


def check(plan: StudyPlan) -> list[JobDemands]:
    """Every job's demands; BadInput with the first violation (and how many more) when one does not hold."""
    jobs, manifest_file = study_demands(plan), plan.manifest_file
    bad = [(job, demand) for job in jobs for demand in job.demands if not demand.holds()]
    if bad:
        (job, demand), more = bad[0], len(bad) - 1
        also = f" (and {more} more: `agentrepro preflight {manifest_file}` lists them)" if more else ""
        raise BadInput(f"{job.method} seed {job.seed}: {demand.violation()}{also}", path=manifest_file)
    return jobs


def _number(value: Any) -> str:
    return "-" if value is None else (f"{value:g}" if isinstance(value, float) else str(value))


def table(job: JobDemands, *, seeds: str | None = None) -> str:
    """The demand table of one job, as Markdown: what, the framework's key and number, the manifest field and its value,
    the rule, and whether it holds."""
    head = f"{job.method} ({job.backend}), seed {seeds or job.seed}"
    if not job.demands:
        return f"{head}: the {job.backend} backend states no demands (it runs inside agentrepro, or its command's are its own)"
    lines = [
        head,
        "",
        "| demand | framework: key = need | manifest: field = have | rule | holds |",
        "|---|---|---|---|---|",
    ]
    for d in job.demands:
        have = "reserved on the node when the job starts" if d.rule == FIXED else d.job_side()
        holds = "-" if d.rule == FIXED else ("yes" if d.holds() else "**no**")
        lines.append(f"| {d.what} | {d.key} = {_number(d.need)} | {have} | {d.rule} | {holds} |")
    return "\n".join(lines)


def tables(jobs: list[JobDemands]) -> list[str]:
    """One table per method when every seed of it demands the same, else one per job."""
    out: list[str] = []
    by_method: dict[str, list[JobDemands]] = {}
    for job in jobs:
        by_method.setdefault(job.method, []).append(job)
    for method_jobs in by_method.values():
        same = all(j.demands == method_jobs[0].demands for j in method_jobs)
        if same:
            out.append(table(method_jobs[0], seeds=", ".join(str(j.seed) for j in method_jobs)))
        else:
            out += [table(job) for job in method_jobs]
    return out


# --- the SLURM partition's limits ----------------------------------------------------------------------------------


def profile_retries(root: Path | None = None) -> int | None:
    """How many times the SLURM profile resubmits a failed job (`retries` of SLURM_PROFILE under `root`, the working
    directory by default, where `snakemake --profile slurm` runs); None where it is not there or says none."""
    try:
        doc = yaml.safe_load(((root or Path.cwd()) / SLURM_PROFILE).read_text())
    except (OSError, yaml.YAMLError):
        return None
    retries = doc.get("retries") if isinstance(doc, dict) else None
    return retries if isinstance(retries, int) and not isinstance(retries, bool) and retries >= 0 else None


def _fits(resources: dict[str, Any], partition: Partition, retries: int = 0) -> list[tuple[str, str]]:
    """(manifest resources key, why) for each thing a job's Snakemake resources ask that the partition cannot give, on
    its first attempt or on its last of `retries` (each asks resources.runtime_retry_min and mem_retry_mb more)."""
    bad = []
    limits = {
        "runtime": (partition.minutes, "its time limit of {}"),
        "mem_mb": (partition.mem_mb, "its largest node's {} MB"),
    }
    if partition.minutes is not None and resources["runtime"] > partition.minutes:
        bad.append(("runtime_min", f"{resources['runtime']} minutes, more than its time limit of {partition.minutes}"))
    if resources["cpus_per_task"] > partition.cpus:
        bad.append(("cpus", f"{resources['cpus_per_task']} CPUs, more than its largest node's {partition.cpus}"))
    if resources["mem_mb"] > partition.mem_mb:
        bad.append(("mem_mb", f"{resources['mem_mb']} MB, more than its largest node's {partition.mem_mb} MB"))
    for retry in RETRIES:  # a retry SLURM cannot schedule waits for ever (PartitionTimeLimit), as a first attempt would
        limit, what = limits[retry.resource]
        last = resources[retry.resource] + retries * (resources.get(retry.key) or 0)
        if limit is not None and resources[retry.resource] <= limit < last:
            bad.append(
                (
                    retry.field,
                    f"{last} {retry.unit} on the last of their {retries} retries ({SLURM_PROFILE}), more than "
                    + what.format(limit),
                )
            )
    if resources.get("nodes", 1) > partition.nodes:
        bad.append(("nodes", f"{resources['nodes']} nodes, more than it has ({partition.nodes})"))
    model, wanted = gpus_per_node(resources)
    if model and wanted and model not in partition.gpus:
        kinds = ", ".join(sorted(str(k) for k in partition.gpus if k)) or "none named"
        bad.append(("gpu_model", f"GPUs of model {model!r}; its nodes' GPU types: {kinds}"))
    elif wanted:
        have = partition.gpus.get(model) if model else max(partition.gpus.values(), default=0)
        if wanted > (have or 0):
            bad.append(("gpus", f"{wanted} GPU(s) on one node, more than its nodes have ({have or 0})"))
    return bad


def partition_problems(plan: StudyPlan) -> tuple[list[str], list[str]]:
    """(violations, notes): every train and eval job's resources against its SLURM partition's limits (sinfo), for
    the methods whose resources name a partition; a partition sinfo cannot be asked about is a note, not a pass."""
    violations, notes = [], []
    seen: dict[str, Partition | str] = {}
    retries = profile_retries() or 0
    jobs = (("train", plan.method_resources), ("eval", plan.method_eval_resources))
    for kind, per_method in jobs:
        for method, (resources, _) in per_method.items():
            name = resources.get("slurm_partition")
            if not name:
                continue
            if name not in seen:  # one sinfo call per partition
                seen[name] = read_partition(name)
            partition = seen[name]
            field = _in_manifest(plan.document, method, "resources.partition", path=plan.manifest_file)
            if partition == "":
                violations.append(f"{plan.manifest_file}: {field}: sinfo lists no partition {name!r}")
            elif isinstance(partition, str):
                notes.append(f"partition {name!r} not checked: {partition}")
            else:
                for key, why in _fits(resources, partition, retries):
                    where = _in_manifest(plan.document, method, f"resources.{key}", path=plan.manifest_file)
                    violations.append(
                        f"{plan.manifest_file}: {where}: {method}'s {kind} jobs ask {why} (partition {name!r}, sinfo)"
                    )
    return list(dict.fromkeys(violations)), list(dict.fromkeys(notes))
