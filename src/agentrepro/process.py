"""Running an external program for a job: output to RUN_DIR/logs/, failures with their reason, and the time stamp
(`now`) of every record of when something ran (log headers, provenance attempts).

`run_logged(argv, log_dir=, label=)` appends the program's stdout and stderr to
`logs/<label>.stdout.log` and `logs/<label>.stderr.log` (each attempt starts with a header line naming
the command and the time), waits, and raises Failure with the exit status and the last stderr line when
the program fails. If agentrepro itself is interrupted (Ctrl-C, or SIGTERM turned into an exception by
the verb), the child and its descendants are terminated by PID before the exception travels on, so no
trainer outlives its attempt (psutil, a dependency of snakemake, finds the descendants).
The child stays in agentrepro's process group, so a scheduler that kills the job's group (SLURM) kills it too.
"""

from __future__ import annotations

import datetime as _dt
import os
import shlex
import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import psutil

from agentrepro.errors import Failure

GRACE_S = 20
FAILED = ": external command failed with "  # after the program's label in its failure line (rehearse reads it)


def now() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


class Terminated(BaseException):
    """SIGTERM received (scheduler time limit, scancel): unwinds like KeyboardInterrupt."""


def install_sigterm_handler() -> None:
    def _raise(signum, frame):
        raise Terminated(f"signal {signum}")

    signal.signal(signal.SIGTERM, _raise)


PREEMPT_SIGNAL = signal.SIGUSR1  # what the SLURM profile asks before a job's time limit (--signal=USR1@SECONDS)
PREEMPT_EXIT = 75  # EX_TEMPFAIL: the job saved its state on that signal and stopped, for its retry to resume
PREEMPTED = threading.Event()


class Preempted(BaseException):
    """A job stopped on PREEMPT_SIGNAL after saving what its retry resumes from (`step`)."""

    def __init__(self, step: int):
        super().__init__(f"stopped on signal {PREEMPT_SIGNAL.name} (the time limit is near) with step {step} saved")
        self.step = step


def install_preemption_handler() -> None:
    """On PREEMPT_SIGNAL set PREEMPTED, which a training polls between steps: it saves and raises Preempted."""
    signal.signal(PREEMPT_SIGNAL, lambda signum, frame: PREEMPTED.set())


PREEMPT_HELD = f"trap '' {PREEMPT_SIGNAL.name.removeprefix('SIG')}"  # a job's shell: ignored, and by what it starts


def forward_preemption_signal() -> None:
    """Pass PREEMPT_SIGNAL on to every process this one has started, however deep: the workflow's processes call this
    (workflow/rules/common.smk) and their shells ignore it (PREEMPT_HELD: an ignored signal stays ignored across fork
    and exec) until `agentrepro train` installs its handler, where its backend saves on it. Where SLURM tracks a job
    step's processes by their parents (proctrack/linuxproc) it signals every one of them: Snakemake's job executor,
    its shell, the GPU slot wrapper and the training, and each of the first three would otherwise end on it (the
    default action) and take the step, and the training, down before it saved. Where it tracks them in cgroups
    (proctrack/cgroup, most clusters) it signals only the step's own tasks, its first process: here Snakemake's job
    executor, which passes it on; the training then has it once or twice, either is one request to save."""

    def forward(signum, _frame):
        try:
            started = psutil.Process().children(recursive=True)
        except psutil.Error:
            return
        for process in started:
            try:
                process.send_signal(signum)
            except psutil.Error:  # ended since
                pass

    signal.signal(PREEMPT_SIGNAL, forward)


def stop_tree(proc: subprocess.Popen, grace_s: float = GRACE_S) -> None:
    """SIGTERM the child and all its descendants (by PID: `/bin/sh -c` does not forward signals), then SIGKILL
    whatever is left after `grace_s`. Only processes this attempt started are touched."""
    try:
        tree = [psutil.Process(proc.pid)]
        tree += tree[0].children(recursive=True)
    except psutil.NoSuchProcess:
        proc.wait()
        return
    for p in tree:
        try:
            p.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(tree, timeout=grace_s)
    for p in alive:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    proc.wait()


def last_line(path: Path, limit: int = 300) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, os.path.getsize(path) - 8192))
            lines = [ln for ln in fh.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:limit] if lines else ""


def run_logged(
    argv: list[str],
    *,
    log_dir: Path,
    label: str,
    cwd: str | Path | None = None,
    env: dict[str, str] | None = None,
    stop: Callable[[subprocess.Popen], None] = stop_tree,
) -> None:
    """Run `argv` with its output appended to the label's logs (module docstring); on an interruption, `stop` ends it
    before the exception travels on."""
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    out_path, err_path = log_dir / f"{label}.stdout.log", log_dir / f"{label}.stderr.log"
    header = f"=== agentrepro {now()}: {shlex.join(argv)}\n"
    with open(out_path, "a", encoding="utf-8") as out, open(err_path, "a", encoding="utf-8") as err:
        out.write(header)
        err.write(header)
        out.flush()
        err.flush()
        try:
            proc = subprocess.Popen(
                argv, cwd=cwd, env={**os.environ, **(env or {})}, stdout=out, stderr=err, stdin=subprocess.DEVNULL
            )
        except OSError as exc:
            raise Failure(f"cannot start {argv[0]!r}: {exc}") from exc
        try:
            status = proc.wait()
        except BaseException:
            stop(proc)
            raise
    if status != 0:
        reason = f"signal {-status}" if status < 0 else f"exit status {status}"
        tail = last_line(err_path)
        raise Failure(f"{label}{FAILED}{reason}; see {err_path}" + (f" (last line: {tail})" if tail else ""))
