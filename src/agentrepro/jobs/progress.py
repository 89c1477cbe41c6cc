"""Where a study stands (`agentrepro status`): every job its plan holds (freeze, the shared warm starts, each
training and each evaluation of it, the analysis, the report), read from what the jobs write and, for attempts
that ran under SLURM, from `squeue`; the running trainings' last metrics; and the time left, estimated from the
durations of the jobs that finished.

A job is
* `done`: its seal (freeze, analyze, report: its output) is on disk;
* `running`: its newest attempt is open and its process lives: SLURM lists its job as running, or a process of this
  host has the attempt's pid;
* `queued`: SLURM lists the attempt's job as pending (a requeued job waits so);
* `stopped`: its newest attempt is open but its process is gone (killed, its node lost, out of time; the state
  its SLURM job ended in, while the controller lists it): its next attempt records it as killed;
* `unknown`: its newest attempt is open on another host and outside SLURM, so nothing here can tell;
* `preempted`: its newest attempt saved its step on the time limit's signal and stopped; its retry resumes there;
* `failed`: its newest attempt closed as failed or killed (the reason is shown);
* `stale` (the analysis, the report): its output is on disk but reads jobs that are not done;
* `pending`: no attempt yet.

The time left of a running training is its steps left times its median step (timings.jsonl); of any other job not
done, the median duration of the finished jobs of its kind (the same method first); the study's is their sum over
the jobs running at once (at least one), an estimate that says how many jobs it could not count.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agentrepro import layout
from agentrepro.analysis.format import seconds
from agentrepro.attempts import newest_attempt, read_provenance
from agentrepro.errors import BadInput
from agentrepro.layout import RunFiles
from agentrepro.planning import StudyPlan, lock_state
from agentrepro.reading import iter_jsonl
from agentrepro.slurm import RUNNING, WAITING, ended, job_states


@dataclass
class JobState:
    """One job of the study and where it stands."""

    kind: str  # freeze, warmstart, train, eval, analyze, report
    name: str  # what a person reads: "train ppo seed0", "eval ppo seed0 step5"
    state: str
    detail: str = ""
    method: str | None = None
    seed: int | None = None
    step: int | None = None
    attempts: int = 0
    slurm_job: str | None = None
    last_metrics: dict[str, Any] = field(default_factory=dict)
    duration_s: float | None = None  # a finished job's newest attempt, start to end
    left_s: float | None = None  # the estimate of the time left; None: done, or nothing to estimate from


def _seconds(start: Any, end: Any) -> float | None:
    try:
        return (dt.datetime.fromisoformat(end) - dt.datetime.fromisoformat(start)).total_seconds()
    except (TypeError, ValueError):
        return None


def _alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    return True


def _attempt_state(attempt: dict, sealed: bool, slurm: dict[str, tuple[str, str]] | None) -> tuple[str, str]:
    """(state, detail) of a job by its seal and the newest attempt its provenance.json records."""
    if sealed:
        return "done", ""
    if not attempt:
        return "pending", ""
    if attempt.get("status") == "preempted":
        return "preempted", f"attempt {attempt.get('number')} saved step {attempt.get('saved_step')}"
    if attempt.get("end") is not None or attempt.get("status") != "running":
        reason = str(attempt.get("reason") or attempt.get("status"))[:240]
        saved = f"; step {attempt['last_saved_step']} saved" if attempt.get("last_saved_step") is not None else ""
        return "failed", f"attempt {attempt.get('number')}: {reason}{saved}"
    job = attempt.get("slurm_job_id")
    if job:
        if slurm is None:
            return "unknown", f"SLURM job {job}: squeue does not answer here"
        state, nodes = slurm.get(str(job), ("", ""))
        if state in RUNNING:
            return "running", f"SLURM job {job} {state.lower()} on {nodes}"
        if state in WAITING:
            return "queued", f"SLURM job {job} {state.lower()}"
        if state:  # ended, and the controller still lists it
            return "stopped", f"{ended(str(job), state)}; the attempt never closed"
        return "stopped", f"SLURM job {job} is no longer queued and the attempt never closed"
    if attempt.get("host") == socket.gethostname():
        if _alive(attempt.get("pid")):
            return "running", f"pid {attempt.get('pid')}"
        return "stopped", "its process is gone and the attempt never closed"
    return "unknown", f"open on {attempt.get('host')}, outside SLURM: not checkable from here"


def _rows(path: Path) -> list[dict[str, Any]]:
    """The JSON rows of a JSONL file being written (a torn or bad line ends the reading), [] when absent."""
    rows = []
    try:
        for _, row in iter_jsonl(path):
            rows.append(row)
    except (BadInput, OSError):
        pass
    return rows


def _job(kind: str, name: str, directory: Path, attempt: dict, slurm: dict | None, **who: Any) -> JobState:
    state, detail = _attempt_state(attempt, (directory / RunFiles.OUTPUTS).is_file(), slurm)
    if attempt.get("slurm_restart_count"):  # SLURM requeued the job this many times
        detail = f"{detail}; requeued {attempt['slurm_restart_count']} time(s)".lstrip("; ")
    job = JobState(kind, name, state, detail, attempts=int(attempt.get("number") or 0), **who)
    job.slurm_job = attempt.get("slurm_job_id")
    if state == "done":
        job.duration_s = _seconds(attempt.get("start"), attempt.get("end"))
    return job


def _train(job: JobState, run_dir: Path, steps: int) -> None:
    """A training's steps and last metrics; a running one's time left from its median step."""
    metrics = _rows(run_dir / RunFiles.METRICS)
    done = int(metrics[-1].get("step") or 0) if metrics else 0
    if job.state == "done":
        return
    if metrics:
        last = metrics[-1]
        job.last_metrics = {k: last[k] for k in ("step", "train_success_rate", "reward_mean", "wall_s") if k in last}
    said = f"step {done} of {steps}"
    if metrics and last.get("train_success_rate") is not None:
        said += f", train success {100 * float(last['train_success_rate']):.1f}%"
    times = [
        t["step_total"] for t in _rows(run_dir / RunFiles.TIMINGS) if isinstance(t.get("step_total"), (int, float))
    ]
    if job.state == "running" and times:
        job.left_s = max(0, steps - done) * statistics.median(times)
        said += f", {statistics.median(times):.1f} s a step"
    job.detail = f"{said}; {job.detail}" if job.detail else said


def _eval(job: JobState, directory: Path) -> None:
    if job.state == "done":
        rows = _rows(directory / RunFiles.OUTCOMES)
        won = sum(int(r.get("success") or 0) for r in rows)
        job.detail = f"{won} of {len(rows)} episodes solved"


def _made(kind: str, output: Path, before: list[JobState], root: str | os.PathLike) -> JobState:
    """The analysis or the report: done when its output is on disk and every job before it is done; stale when
    its output reads jobs that are not (Snakemake runs it again once they are)."""
    if not output.is_file():
        return JobState(kind, kind, "pending")
    if all(job.state == "done" for job in before):
        return JobState(kind, kind, "done")
    return JobState(kind, kind, "stale", f"{output.relative_to(root)} reads jobs not done")


def study_status(study: str | os.PathLike, root: str | os.PathLike = ".", *, slurm: bool = True) -> list[JobState]:
    """Every job of the study under `root` and where it stands (see the module docstring); `slurm`: ask squeue
    about attempts that ran under SLURM. BadInput names the manifest when the study cannot be planned."""
    home = layout.locate(study, root)
    plan = StudyPlan.load(home.manifest)
    warmstarts = sorted({(seed, identity) for (_, seed), identity in plan.warmstarts.items()})
    planned: list[tuple[str, str, Path, dict[str, Any]]] = [  # (kind, name, the directory of its attempts, who)
        ("warmstart", f"warm start seed{seed}", home.warmstart_dir(seed, identity), {"seed": seed})
        for seed, identity in warmstarts
    ]
    for method in plan.methods:
        for seed in plan.seeds:
            run_dir, who = home.run_dir(method, seed), {"method": method, "seed": seed}
            planned.append(("train", f"train {method} seed{seed}", run_dir, who))
            planned += [
                ("eval", f"eval {method} seed{seed} step{step}", layout.eval_dir(run_dir, step), {**who, "step": step})
                for step in plan.steps
            ]
    newest = {d: newest_attempt(read_provenance(d) if d.is_dir() else {}) for _, _, d, _ in planned}
    ids = {str(a["slurm_job_id"]) for a in newest.values() if a.get("slurm_job_id")}
    states = job_states(ids) if slurm else None  # one squeue call for the whole study
    jobs = [_freeze(home)]
    for kind, name, directory, who in planned:
        job = _job(kind, name, directory, newest[directory], states, **who)
        if kind == "train":
            _train(job, directory, plan.train_steps)
        elif kind == "eval":
            _eval(job, directory)
        jobs.append(job)
    jobs.append(_made("analyze", home.analysis / "analysis.json", jobs, root))
    jobs.append(_made("report", home.reports / "report.html", jobs, root))
    _estimate(jobs)
    return jobs


def _freeze(home: layout.Study) -> JobState:
    try:
        state = lock_state(home.manifest, home.lock)
    except BadInput as exc:
        return JobState("freeze", "freeze", "failed", str(exc)[:300])
    return JobState("freeze", "freeze", "done" if state == "ok" else "pending", str(home.lock) if state == "ok" else "")


def _estimate(jobs: list[JobState]) -> None:
    """The time left of each job not done that has none yet: the median duration of the finished jobs of its kind
    and method, else of its kind."""
    finished: dict[tuple, list[float]] = {}
    for job in jobs:
        if job.duration_s is not None:
            finished.setdefault((job.kind, job.method), []).append(job.duration_s)
            finished.setdefault((job.kind, None), []).append(job.duration_s)
    for job in jobs:
        if job.state == "done" or job.left_s is not None:
            continue
        known = finished.get((job.kind, job.method)) or finished.get((job.kind, None))
        if known:
            job.left_s = statistics.median(known)


def summary(jobs: list[JobState]) -> dict[str, Any]:
    """How many jobs in each state, and the study's time left: the jobs' estimates over the jobs running at once
    (at least one), with the number of jobs not done that had no estimate."""
    counts: dict[str, int] = {}
    for job in jobs:
        counts[job.state] = counts.get(job.state, 0) + 1
    left = [j for j in jobs if j.state not in ("done", "failed")]  # a failed job waits for a person, not the clock
    known = [j.left_s for j in left if j.left_s is not None]
    at_once = max(1, counts.get("running", 0))
    return {
        "counts": counts,
        "left_s": sum(known) / at_once if known else None,
        "not_estimated": len(left) - len(known),
        "at_once": at_once,
    }


def as_json(jobs: list[JobState]) -> dict[str, Any]:
    return {"jobs": [asdict(j) for j in jobs], **summary(jobs)}


def table(study: str, jobs: list[JobState]) -> str:
    """One screen for a person: a line per job, then the counts and the time left."""
    width = max(len(j.name) for j in jobs)
    lines = [f"study {study}"]
    for job in jobs:
        detail = job.detail
        if job.state not in ("done", "failed") and job.left_s is not None:
            detail = f"{detail}; about {seconds(job.left_s)} left" if detail else f"about {seconds(job.left_s)}"
        lines.append(f"  {job.name:<{width}}  {job.state:<8} {detail}".rstrip())
    s = summary(jobs)
    order = ("done", "running", "queued", "preempted", "stopped", "unknown", "failed", "stale", "pending")
    counted = ", ".join(f"{s['counts'][k]} {k}" for k in order if k in s["counts"])
    if s["left_s"] is None:
        left = s["not_estimated"]
        ends = f"no estimate: no job of their kind has finished ({left} left)" if left else "nothing left to run"
    else:
        ends = f"about {seconds(s['left_s'])} left at {s['at_once']} job(s) at once"
        if s["not_estimated"]:
            ends += f" ({s['not_estimated']} job(s) of no known length not counted)"
    lines.append(f"{len(jobs)} jobs: {counted}; {ends}")
    return "\n".join(lines)
