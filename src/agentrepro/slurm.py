"""What SLURM says about a job: its state while the controller still lists it (`squeue --states=all` lists a job
that ended for MinJobAge seconds after, 300 by default), and how it ended, from accounting (`sacct`) where the
cluster keeps it and from the controller otherwise. None wherever SLURM's commands are absent or do not answer: the
callers then say that SLURM could not tell, never a guess."""

from __future__ import annotations

import shutil
import subprocess

TIMEOUT_S = 15
RUNNING = {"RUNNING", "COMPLETING", "CONFIGURING", "STAGE_OUT", "SIGNALING"}
WAITING = {"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "SUSPENDED", "RESIZING"}
# how a job that ended this way ended, in the words of the manifest a user would change
ENDINGS = {
    "OUT_OF_MEMORY": "its processes went over the job's memory (resources.mem_mb) and the node killed them",
    "TIMEOUT": "it reached its time limit (resources.runtime_min)",
    "NODE_FAIL": "its node failed",
    "PREEMPTED": "SLURM preempted it for another job",
    "CANCELLED": "it was cancelled (scancel)",
    "DEADLINE": "it reached its deadline",
    "BOOT_FAIL": "its node failed to boot",
}


def _run(argv: list[str]) -> subprocess.CompletedProcess | None:
    path = shutil.which(argv[0])
    if path is None:
        return None
    try:
        return subprocess.run([path, *argv[1:]], capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None


def job_states(job_ids: set[str]) -> dict[str, tuple[str, str]] | None:
    """{job id: (state, nodes)} of the jobs SLURM still lists, ended ones included; None when squeue is absent or
    does not answer."""
    if not job_ids:
        return {}
    done = _run(["squeue", "--noheader", "--states=all", "--format=%i|%T|%N", f"--jobs={','.join(sorted(job_ids))}"])
    if done is None:
        return None
    if done.returncode != 0:  # every job gone from the queue: squeue says so as an error
        return {} if "Invalid job id" in done.stderr else None
    states = {}
    for line in done.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3:
            states[parts[0]] = (parts[1], parts[2])
    return states


def ended_as(job_id: str) -> str | None:
    """The state job `job_id` ended in (OUT_OF_MEMORY, TIMEOUT, NODE_FAIL, CANCELLED, ...): accounting's, else the
    controller's while it still lists the job; None while it runs or waits, or where neither can tell."""
    done = _run(["sacct", "--noheader", "--allocations", "--parsable2", f"--jobs={job_id}", "--format=State"])
    if done is not None and done.returncode == 0 and done.stdout.strip():
        state = done.stdout.split()[0]  # "CANCELLED by 0": the state, then who
    else:  # no accounting on this cluster (sacct exits 1 and says so), or it does not know the job
        state = (job_states({job_id}) or {}).get(job_id, ("", ""))[0]
    return state if state and state not in RUNNING | WAITING else None


def ended(job_id: str, state: str) -> str:
    """How job `job_id` ended, in `state`, said for a person."""
    return f"SLURM ended job {job_id} as {state}" + (f": {ENDINGS[state]}" if state in ENDINGS else "")
