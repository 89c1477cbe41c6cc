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

The verb `agentrepro preflight` (agentrepro/cli/preflight.py) prints the demand tables and every violation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentrepro.backends.base import FIXED, Demand
from agentrepro.errors import BadInput, read_from
from agentrepro.placement import method_placement
from agentrepro.planning import StudyPlan


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
