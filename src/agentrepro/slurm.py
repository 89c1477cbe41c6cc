"""What SLURM says about a job: its state while the controller still lists it (`squeue --states=all` lists a job
that ended for MinJobAge seconds after, 300 by default), and how it ended, from accounting (`sacct`) where the
cluster keeps it and from the controller otherwise. None wherever SLURM's commands are absent or do not answer: the
callers then say that SLURM could not tell, never a guess. And what a partition can give a job (`read_partition`,
sinfo), for the preflight's check of a study's resources, with why sinfo could not answer where it cannot."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

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


def _ask(argv: list[str]) -> subprocess.CompletedProcess | str:
    """What SLURM's command `argv` answered, or why it could not answer here (a sentence)."""
    path = shutil.which(argv[0])
    if path is None:
        return f"{argv[0]} is not on PATH here"
    try:
        return subprocess.run([path, *argv[1:]], capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{argv[0]} did not answer ({exc})"


def _run(argv: list[str]) -> subprocess.CompletedProcess | None:
    done = _ask(argv)
    return None if isinstance(done, str) else done


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


# --- a partition's limits ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Partition:
    """What one SLURM partition can give a job (sinfo: the largest node of each kind it holds)."""

    name: str
    minutes: int | None  # its time limit; None: unlimited
    nodes: int
    cpus: int  # on one node
    mem_mb: int  # on one node
    gpus: dict[str | None, int]  # GPUs on one node by GRES type (None: untyped)


def _minutes(limit: str) -> int | None:
    """A SLURM time limit ("infinite", "MM", "MM:SS", "HH:MM:SS", "D-HH", "D-HH:MM", "D-HH:MM:SS") in minutes."""
    if limit.strip().lower() in ("infinite", "unlimited"):
        return None
    days, _, rest = limit.rpartition("-") if "-" in limit else ("0", "", limit)
    parts = [int(p) for p in rest.split(":")]
    if "-" in limit:
        hours, minutes, seconds = [*parts, 0, 0][:3]
    elif len(parts) == 3:
        hours, minutes, seconds = parts
    else:
        hours, (minutes, seconds) = 0, [*parts, 0][:2]
    return int(days) * 1440 + hours * 60 + minutes + (1 if seconds else 0)


def _gpus(gres: str) -> dict[str | None, int]:
    """GPUs per node by type of a GRES list such as "gpu:h100:4(S:0-1),nvme:1" or "gpu:2"."""
    found: dict[str | None, int] = {}
    for item in gres.split(","):
        words = item.split("(")[0].split(":")
        if words[0] == "gpu" and len(words) >= 2 and words[-1].isdigit():
            kind = words[1] if len(words) == 3 else None
            found[kind] = max(found.get(kind, 0), int(words[-1]))
    return found


def read_partition(name: str) -> Partition | str:
    """The partition's limits from sinfo; "" where sinfo lists no such partition, or why they cannot be read here (a
    sentence)."""
    done = _ask(["sinfo", "--noheader", f"--partition={name}", "--format=%P|%l|%D|%c|%m|%G"])
    if isinstance(done, str):
        return done
    if done.returncode != 0:
        return f"sinfo failed: {done.stderr.strip()[:200]}"
    rows = [line.split("|") for line in done.stdout.splitlines() if line.count("|") == 5]
    if not rows:
        return ""  # no such partition
    try:
        gpus: dict[str | None, int] = {}
        for row in rows:
            for kind, count in _gpus(row[5]).items():
                gpus[kind] = max(gpus.get(kind, 0), count)
        return Partition(
            name=name,
            minutes=_minutes(rows[0][1]),
            nodes=sum(int(r[2]) for r in rows),
            cpus=max(int(r[3].rstrip("+")) for r in rows),
            mem_mb=max(int(r[4].rstrip("+")) for r in rows),
            gpus=gpus,
        )
    except ValueError:
        return f"sinfo's answer could not be read: {done.stdout.strip()[:200]}"
