"""Provenance of a run or an evaluation: provenance.json with every attempt (docs/design.md §3.3).

`start_attempt` marks an attempt that never finished (a killed job) as `killed`, then appends a new one with
where it runs (`host_info`: among it the CPUs the machine has and the CPUs this process may run on);
`finish_attempt` closes it with an exit status, a reason and the CPU time it used (`cpu_s`, user and system, its
own and its children's), so that the CPU time over the wall time says how many CPUs the attempt actually had;
`attempt_closed_on_error` closes it when the work inside fails or is stopped. Every attempt records the exact
command line (`command_line`), the versions of the packages that decide the numbers (`package_versions`), what code
it ran (`software`: the checkout's commit and state, the agentrepro package's files, every installed package;
agentrepro.software) and the machine's arithmetic (`machine`: CPU model, vector instruction sets, BLAS and threads),
since the same code and seed can end otherwise on another CPU.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import resource
import shlex
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy
import threadpoolctl

from agentrepro import slurm, software
from agentrepro.errors import BadInput, Failure
from agentrepro.fileio import atomic_write_json
from agentrepro.layout import RunFiles
from agentrepro.process import PREEMPT_EXIT, Preempted, Terminated, now
from agentrepro.reading import load_json

PROVENANCE = RunFiles.PROVENANCE
PACKAGES = (
    "agentrepro",
    "numpy",
    "scipy",
    "torch",
    "transformers",
    "tokenizers",
    "statsmodels",
    "pandas",
    "pyyaml",
    "jsonschema",
    "snakemake",
)


def newest_attempt(provenance: Any) -> dict[str, Any]:
    """The newest attempt of a provenance.json object (or of a run's entry in analysis.json), {} when it has none."""
    attempts = provenance.get("attempts") if isinstance(provenance, dict) else None
    newest = attempts[-1] if isinstance(attempts, list) and attempts else None
    return newest if isinstance(newest, dict) else {}


def read_provenance(run_dir: str | os.PathLike) -> dict[str, Any]:
    path = Path(run_dir) / PROVENANCE
    return load_json(path) if path.exists() else {}


def host_info() -> dict[str, Any]:
    """Where this attempt runs: host, platform, CPU count, and the GPUs actually visible to it."""
    info: dict[str, Any] = {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "slurm_restart_count": int(os.environ.get("SLURM_RESTART_COUNT") or 0),  # > 0: SLURM requeued the job
    }
    info["gpus"] = visible_gpus()
    info["machine"] = machine()
    return info


# The vector instruction sets (Linux /proc/cpuinfo flags) that change which kernels numpy, BLAS and torch run.
ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "amx_tile")


def machine(*, threads: bool = True) -> dict[str, Any]:
    """The CPU (model, vector instruction sets, architecture) and the BLAS numpy calls, with its threads unless
    `threads` is false (the lock's record: which libraries are loaded, and their threads, depend on the process)."""
    model: str | None = None
    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and model is None:
                    model = value.strip()
                elif key.strip() == "flags" and not flags:
                    flags = set(value.split())
                if model is not None and flags:
                    break
    except OSError:
        pass  # not Linux: the model stays unknown, and says so
    return {
        "cpu_model": model or platform.processor() or None,
        "architecture": platform.machine(),
        "isa": [flag for flag in ISA_FLAGS if flag in flags],
        "blas": blas(threads=threads),
    }


def machine_words(machine: Any, *, threads: bool = True) -> str:
    """An attempt's `machine` in words: CPU model (vector instruction sets); BLAS, version and, with `threads`, its
    libraries' threads (which libraries are loaded when an attempt starts depends on the verb, so the audit groups
    machines without them)."""
    if not isinstance(machine, dict):
        return "not recorded"
    blas = machine.get("blas")
    blas = blas if isinstance(blas, dict) else {}
    isa = machine.get("isa")
    isa = isa if isinstance(isa, list) else []
    libraries = blas.get("threads")
    counts = (
        sorted({str(lib.get("num_threads")) for lib in libraries if isinstance(lib, dict)})
        if isinstance(libraries, list)
        else []
    )
    said = (
        f"{machine.get('cpu_model') or '?'} ({', '.join(map(str, isa)) or 'no listed vector sets'}); "
        f"{blas.get('name') or '?'} {blas.get('version') or ''}"
    )
    return f"{said}, {'/'.join(counts) or '?'} thread(s)" if threads else said.rstrip()


def blas(*, threads: bool = True) -> dict[str, Any]:
    """numpy's BLAS (name and version as numpy was built with it) and, with `threads`, the threads each loaded
    library uses."""
    built = (numpy.show_config(mode="dicts") or {}).get("Build Dependencies", {}).get("blas", {})
    found: dict[str, Any] = {"name": built.get("name"), "version": built.get("version")}
    if not threads:
        return found
    found["threads"] = [
        {key: lib.get(key) for key in ("internal_api", "version", "num_threads")}
        for lib in threadpoolctl.threadpool_info()
    ]
    return found


def visible_gpus() -> list[str] | str:
    """The GPUs this process really sees (which can be fewer than were asked for).

    Asks torch when it is already imported (a trainer), else `nvidia-smi -L` filtered by
    CUDA_VISIBLE_DEVICES (nvidia-smi itself lists every GPU), so that light verbs do not pay for importing torch.
    """
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        return (
            [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
            if torch.cuda.is_available()
            else []
        )
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unknown (nvidia-smi: {exc})"
    if out.returncode != 0:
        return f"unknown (nvidia-smi exit {out.returncode})"
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    gpus = [line.strip() for line in out.stdout.splitlines() if line.startswith("GPU ")]
    if visible is not None:
        wanted = {v.strip() for v in visible.split(",") if v.strip()}
        gpus = [g for i, g in enumerate(gpus) if str(i) in wanted or any(w in g for w in wanted)]
    return gpus


def cpu_seconds() -> float:
    """User and system CPU seconds of this process and of the children it waited for, so far."""
    return sum(
        u.ru_utime + u.ru_stime
        for u in (resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN))
    )


def _lock_commit(lock_path: Any) -> str | None:
    """The harness commit the run's lock was frozen at, when the lock is at hand (a job runs in the study's root)."""
    if not isinstance(lock_path, str) or not Path(lock_path).is_file():
        return None
    try:
        commit = (load_json(Path(lock_path)).get("harness") or {}).get("commit")
    except (BadInput, AttributeError):
        return None  # the lock's problems are the audit's and the job's lock check's to report
    return commit if isinstance(commit, str) else None


def _how_it_ended(attempt: dict[str, Any]) -> dict[str, Any]:
    """The reason of an attempt that never closed, and where SLURM can tell, the state its job ended in
    (`slurm_state`: OUT_OF_MEMORY, TIMEOUT, NODE_FAIL, ...). A requeued job keeps its id: its earlier attempt's job
    is this one, still running, and says nothing of how that attempt ended."""
    job = attempt.get("slurm_job_id")
    state = slurm.ended_as(str(job)) if job and str(job) != os.environ.get("SLURM_JOB_ID") else None
    if state is None:
        return {"reason": "the attempt ended without closing (job killed, node lost or timed out)"}
    return {"reason": slurm.ended(str(job), state), "slurm_state": state}


def start_attempt(
    run_dir: str | os.PathLike, *, stage: str, command: str, base: dict[str, Any], extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Open a new attempt in provenance.json; an earlier attempt that never closed is recorded as killed.

    `base` holds the run's identity (lock hash, resolved-config hash, study, method, seed, versions); it
    is written on every attempt so that the newest one always describes the run. `extra`: more facts of this
    attempt known at its start (a training attempt: whether it resumed or started over).
    """
    run_dir = Path(run_dir)
    prov = read_provenance(run_dir)
    attempts = prov.get("attempts", [])
    for attempt in attempts:
        if attempt.get("end") is None and attempt.get("status") == "running":
            attempt.pop("cpu_s_at_start", None)  # its CPU time died with its process
            attempt.update(end=None, status="killed", **_how_it_ended(attempt))
    attempt = {
        "stage": stage,
        "number": len(attempts) + 1,
        "start": now(),
        "end": None,
        "status": "running",
        "command": command,
        "pid": os.getpid(),  # with `host`: whether the attempt still runs (agentrepro status)
        **host_info(),
        "software": software.running(lock=base.get("lock_path"), lock_commit=_lock_commit(base.get("lock_path"))),
        **(extra or {}),
        "cpu_s_at_start": round(cpu_seconds(), 3),
    }
    attempts.append(attempt)
    prov.update(base)
    prov["attempts"] = attempts
    atomic_write_json(run_dir / PROVENANCE, prov)
    return prov


def finish_attempt(
    run_dir: str | os.PathLike, *, status: str, reason: str | None = None, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Close the newest open attempt with its exit status ("ok" or "failed") and reason."""
    run_dir = Path(run_dir)
    prov = read_provenance(run_dir)
    open_attempts = [a for a in prov.get("attempts", []) if a.get("end") is None and a.get("status") == "running"]
    if not open_attempts:
        raise BadInput("no open attempt to finish", path=run_dir / PROVENANCE)
    attempt = open_attempts[-1]
    used = cpu_seconds() - attempt.pop("cpu_s_at_start", 0.0)
    attempt.update(end=now(), status=status, reason=reason, cpu_s=round(used, 3), **(extra or {}))
    prov["status"] = status
    atomic_write_json(run_dir / PROVENANCE, prov)
    return prov


def command_line(argv: list[str] | None = None) -> str:
    """The exact command line of this process, shell-quoted, as a user would type it."""
    argv = list(sys.argv[1:] if argv is None else argv)
    return shlex.join(["agentrepro", *argv])


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _saved(last_saved: Callable[[], int | None] | None) -> dict[str, Any] | None:
    """A stopped attempt's `last_saved_step` (where its retry resumes), when the caller can tell."""
    return {"last_saved_step": last_saved()} if last_saved is not None else None


@contextlib.contextmanager
def attempt_closed_on_error(
    directory: Path, *, verb: str, backend_name: str, last_saved: Callable[[], int | None] | None = None
):
    """Close the open provenance attempt of `directory` when the work inside fails or is stopped.

    Ctrl-C or SIGTERM: `killed` (SIGTERM exits 143 after saying so); BadInput/Failure: `failed` with the
    message; any other exception (a backend crash): `failed` with its type, re-raised as Failure (exit 1).
    On success the caller closes the attempt itself, with what it wants to record.
    """
    try:
        yield
    except Preempted as exc:  # saved on the time limit's signal: the retry resumes from that step
        finish_attempt(directory, status="preempted", reason=str(exc), extra={"saved_step": exc.step})
        print(f"agentrepro {verb}: {exc}; its retry resumes from there", file=sys.stderr)
        raise SystemExit(PREEMPT_EXIT) from None
    except (KeyboardInterrupt, Terminated) as exc:
        reason = f"interrupted ({type(exc).__name__}: {exc})"
        finish_attempt(directory, status="killed", reason=reason, extra=_saved(last_saved))
        if isinstance(exc, Terminated):
            print(f"agentrepro {verb}: terminated ({exc}); the attempt is recorded as killed", file=sys.stderr)
            raise SystemExit(143) from None
        raise
    except (BadInput, Failure) as exc:
        finish_attempt(directory, status="failed", reason=str(exc), extra=_saved(last_saved))
        raise
    except Exception as exc:
        finish_attempt(directory, status="failed", reason=f"{type(exc).__name__}: {exc}", extra=_saved(last_saved))
        raise Failure(f"{backend_name} backend raised {type(exc).__name__}: {exc}") from exc
