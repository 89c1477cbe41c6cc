"""`agentrepro rehearse MANIFEST --method M --seed K`: one framework job run as its train job runs, on a machine without
GPUs and offline, up to the framework's first use of the GPUs (docs/containers.md, "Rehearse before you queue").

The job's run config (from the study's lock, as `agentrepro resolve` writes it; or given the manifest, its draft
config, planning.Job, before freeze, with the task panel freeze would build from the study's files) is written
into the rehearsal's folder, and `agentrepro train` runs it there, never in the study's runs/, with
AGENTREPRO_REHEARSAL naming <folder>/boundary: every program of the job gets the rehearsal's variables and, in its
container, no network and no GPU devices (containers/rehearsal.py); the job's start-up hook makes torch report the
job's GPUs and records the first process that would use them, which then exits (hooks/agentrepro_rehearsal.py,
installed in every process of a verl-agent or Relax job). Everything before that runs for real: data preparation, the
framework's configuration, the model and tokenizer read from the local path, the job's Ray head and port block, the
environment workers, the GPU placement request. Once a record is there the job has `after_s` to end by itself (its
driver sees the worker go), then it is stopped with its processes.

Each program of the train job ends in one of: reached the GPUs (the record: the call and where it was made), ended
(it exited 0), failed (its exit status and the last line of its stderr, as the train job reported it), stopped (still
running when the job was stopped), or not started. The rehearsal holds when the last program reached the GPUs or
every program ended. What it cannot show: GPU kernels, NCCL between GPUs, vLLM's engine, memory at model size.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agentrepro.cgroups import host_memory
from agentrepro.containers import rehearsal
from agentrepro.errors import BadInput, read_from
from agentrepro.fileio import atomic_write_json, atomic_write_yaml, check_output_dir, make_dir
from agentrepro.layout import RunFiles
from agentrepro.manifest.resolve import run_config
from agentrepro.manifest.taskpanel import build_panel_sources
from agentrepro.planning import StudyPlan
from agentrepro.process import FAILED, stop_tree
from agentrepro.reading import load_json

REHEARSED = ("verl-agent", "relax")  # backends whose processes carry the start-up hook (agentrepro/hooks/startup)
MARKER = "rehearsal.json"  # the rehearsal's own record in its folder: a folder holding it may be rehearsed again


@dataclass
class Program:
    """One program of the train job and how it ended in the rehearsal."""

    label: str
    purpose: str
    outcome: str = "not started"  # reached the GPUs | ended | failed | stopped | not started
    detail: str = ""


@dataclass
class Rehearsal:
    """What a rehearsal found: each program's outcome, the boundary records, the time it took."""

    study: str
    method: str
    seed: int
    backend: str
    folder: str
    contained: bool
    programs: list[Program] = field(default_factory=list)
    boundary: list[dict[str, Any]] = field(default_factory=list)
    train_exit: int | None = None
    train_said: str = ""  # the train job's last line on stderr, when it failed
    seconds: float = 0.0
    memory_mb: int = 0  # what the rehearsal's programs could hold together: the node's, or its SLURM job's cgroup's
    asked_mb: int | None = None  # the train job's resources.mem_mb

    @property
    def holds(self) -> bool:
        last = self.programs[-1].outcome if self.programs else "not started"
        return last == "reached the GPUs" or all(p.outcome == "ended" for p in self.programs)

    def memory_note(self) -> str:
        """A line when the rehearsal had less memory than its job will ask: a program killed for its memory here (a
        Ray worker's "killed by OOM killer") may fit in its job; nothing otherwise."""
        if self.asked_mb is None or self.memory_mb >= self.asked_mb:
            return ""
        return (
            f"memory: this rehearsal could hold {self.memory_mb} MB, less than the {self.asked_mb} MB its train job "
            "asks (resources.mem_mb): a program killed for its memory here may fit in its job; under SLURM, rehearse "
            f"with --mem={self.asked_mb}"
        )

    def table(self) -> str:
        lines = ["| program | outcome | detail |", "|---|---|---|"]
        lines += [f"| {p.label} ({p.purpose}) | {p.outcome} | {p.detail} |" for p in self.programs]
        return "\n".join(lines)


def _fresh(out: Path) -> Path:
    """The rehearsal's folder, empty: a new one, or an earlier rehearsal's (its MARKER) cleared; anything else refused."""
    check_output_dir(out, option="--out")
    if out.is_dir() and any(out.iterdir()):
        if not (out / MARKER).is_file():
            raise BadInput("exists and holds files that are not an earlier rehearsal's: give an empty folder", path=out)
        shutil.rmtree(out)
    return make_dir(out)


def rehearse(
    plan: StudyPlan,
    method: str,
    seed: int,
    out: Path,
    *,
    timeout_s: float,
    after_s: float,
    say: Callable[[str], None] = print,
    lock: dict[str, Any] | None = None,
    lock_path: Path | None = None,
) -> Rehearsal:
    """Run the train job of `method` x `seed` in `out` up to its GPUs (module docstring); with `lock` (the study's,
    read from `lock_path`), from the run config `agentrepro resolve` writes, task panel included."""
    job = plan.checked(method, seed)
    if job.backend.name not in REHEARSED:
        raise BadInput(
            f"the {job.backend.name} backend is not rehearsed: only {', '.join(REHEARSED)}'s processes carry the "
            "startup hook that recognises the GPUs",
            path=plan.manifest_file,
            where=f"methods.{method}",
        )
    out = _fresh(Path(out).absolute())
    run_dir, boundary = out / "run", make_dir(out / "boundary")
    if lock is not None:  # the job's own run config, as the workflow resolves it
        config = run_config(lock, method, seed, lock_path=lock_path or plan.manifest_file)
    else:  # the draft has no lock yet: written without one, as a config outside a study (train records no lock)
        config = {k: v for k, v in job.config.items() if k != "lock"}
        with read_from(plan.manifest_file):  # the panel freeze will build: verl's validation envs play its games
            panel, _files, _packages = build_panel_sources(plan.document, Path.cwd())
        config["eval"] = {**config["eval"], "task_panel": panel}
    config_file = atomic_write_yaml(out / "config.yaml", config)
    labels = [
        (launch.contained.label if launch.contained else launch.purpose.replace(" ", "_"), launch.purpose)
        for launch in job.backend.launches(job.config, run_dir)
    ]
    result = Rehearsal(
        plan.document["study"],
        method,
        seed,
        job.backend.name,
        str(out),
        "image" in job.config,
        [Program(label, purpose) for label, purpose in labels],
        memory_mb=host_memory()[1] // 2**20,
        asked_mb=plan.method_resources[method][0].get("mem_mb"),
    )
    atomic_write_json(out / MARKER, asdict(result))
    argv = [sys.executable, "-m", "agentrepro", "train", "--config", str(config_file), "--out", str(run_dir)]
    env = {**os.environ, rehearsal.FOLDER_ENV: str(boundary)}
    say(f"rehearse: {method} seed {seed} ({job.backend.name}) in {out}; programs: {', '.join(p for p, _ in labels)}")
    start = time.monotonic()
    with open(out / "train.stdout.log", "w") as stdout, open(out / "train.stderr.log", "w") as stderr:
        proc = subprocess.Popen(argv, env=env, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL)
        try:
            result.train_exit = _watch(proc, boundary, start, timeout_s=timeout_s, after_s=after_s, say=say)
        finally:
            if proc.poll() is None:
                stop_tree(proc)
    result.seconds = round(time.monotonic() - start, 1)
    result.boundary = [load_json(p) for p in sorted(boundary.glob(rehearsal.RECORDS))]
    said = (out / "train.stderr.log").read_text(encoding="utf-8", errors="replace")
    if result.train_exit not in (0, None):
        result.train_said = (said.strip().splitlines() or [""])[-1]
    _outcomes(result, run_dir, said)
    atomic_write_json(out / MARKER, asdict(result))
    return result


def _watch(proc, boundary: Path, start: float, *, timeout_s: float, after_s: float, say) -> int | None:
    """Wait for the train job: its exit status, or None when it was still running at the time limit or `after_s` after
    a process reached the GPUs."""
    reached_at = None
    while proc.poll() is None:
        now = time.monotonic()
        if reached_at is None and any(boundary.glob(rehearsal.RECORDS)):
            reached_at = now
            say(
                f"rehearse: a process reached the GPUs after {now - start:.0f} s; the job may take {after_s:g} s to end"
            )
        if now - start > timeout_s or (reached_at is not None and now - reached_at > after_s):
            say(f"rehearse: stopping the job after {now - start:.0f} s")
            return None
        time.sleep(0.5)
    return proc.returncode


def _outcomes(result: Rehearsal, run_dir: Path, train_stderr: str) -> None:
    """Each program's outcome from the boundary records, the job's logs and the train job's own report."""
    logs = run_dir / RunFiles.LOGS
    started = [(logs / f"{p.label}.stderr.log").is_file() for p in result.programs]
    failures = {line.split(FAILED, 1)[0]: line for line in train_stderr.splitlines() if FAILED in line}
    for i, program in enumerate(result.programs):
        records = [r for r in result.boundary if r.get("program") == program.label]
        if records:
            program.outcome, program.detail = "reached the GPUs", _where(records[0])
        elif not started[i]:
            program.outcome = "not started"
        elif any(key.endswith(program.label) for key in failures):
            program.outcome = "failed"
            program.detail = next(line for key, line in failures.items() if key.endswith(program.label)).strip()
        elif any(started[i + 1 :]) or result.train_exit == 0:
            program.outcome = "ended"
        else:
            program.outcome = "stopped"
            program.detail = "still running when the rehearsal stopped the job"


def _where(record: dict[str, Any]) -> str:
    frames = record.get("frames") or []
    at = f" at {frames[0]['file']}:{frames[0]['line']} ({frames[0]['function']})" if frames else ""
    return f"{record.get('call')}{at}, process {record.get('pid')}"
