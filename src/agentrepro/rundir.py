"""The run directory contract (docs/design.md §3.3): provenance with attempts, and the OUTPUTS.sha256 seal.

A run directory is sealed by `write_outputs_manifest`, which hashes every file under it (except the seal
itself, temporary files and logs that are still being written) into OUTPUTS.sha256, written last.
`verify_outputs` re-hashes and lists every difference. An evaluation writes its own seal inside
eval/step<N>/, so that evaluations of different checkpoints can run at the same time.

Provenance records every attempt: `start_attempt` marks an attempt that never finished (a killed job)
as `killed`, then appends a new one; `finish_attempt` closes it with an exit status and a reason.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import socket
from pathlib import Path
from typing import Any

from agentrepro.errors import BadInput
from agentrepro.fileio import atomic_write_json, atomic_write_text, load_json, sha256_file

OUTPUTS = "OUTPUTS.sha256"
PROVENANCE = "provenance.json"
# Never sealed: the seal itself, temporary files of atomic writes, and live logs.
_UNSEALED_DIRS = {"logs"}


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _sealable(root: Path, exclude_dirs: set[str]) -> list[Path]:
    files = []
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        rel = path.relative_to(root)
        if rel.name == OUTPUTS and rel.parent != Path("."):
            continue  # a nested seal (eval/step<N>/) belongs to its own directory
        if rel.name == OUTPUTS or rel.name.startswith(".") and rel.name.endswith(".tmp"):
            continue
        if rel.parts[0] in exclude_dirs:
            continue
        files.append(path)
    return files


def write_outputs_manifest(root: str | os.PathLike, *, exclude_dirs: set[str] | None = None) -> Path:
    """Hash every file under `root` into `root`/OUTPUTS.sha256 (sha256sum format, sorted paths)."""
    root = Path(root)
    exclude = _UNSEALED_DIRS | set(exclude_dirs or ())
    lines = [f"{sha256_file(p)}  {p.relative_to(root).as_posix()}\n" for p in _sealable(root, exclude)]
    return atomic_write_text(root / OUTPUTS, "".join(lines))


def read_outputs_manifest(path: str | os.PathLike) -> dict[str, str]:
    path = Path(path)
    entries: dict[str, str] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        digest, sep, rel = line.partition("  ")
        if not sep or len(digest) != 64:
            raise BadInput("expected '<sha256>  <path>'", path=path, where=f"line {number}")
        entries[rel] = digest
    return entries


def verify_outputs(seal: str | os.PathLike) -> list[str]:
    """Problems with the files a seal lists: changed, missing. One message per problem, with the path."""
    seal = Path(seal)
    root = seal.parent
    problems = []
    for rel, digest in read_outputs_manifest(seal).items():
        path = root / rel
        if not path.is_file():
            problems.append(f"{path}: missing (listed in {seal})")
        elif sha256_file(path) != digest:
            problems.append(f"{path}: changed after it was sealed in {seal}")
    return problems


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
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
    }
    info["gpus"] = visible_gpus()
    return info


def visible_gpus() -> list[str] | str:
    """The GPUs this process really sees (which can be fewer than were asked for).

    Asks torch when it is already imported (a trainer), else `nvidia-smi -L` filtered by
    CUDA_VISIBLE_DEVICES (nvidia-smi itself lists every GPU), so that light verbs do not pay for importing torch.
    """
    import shutil
    import subprocess
    import sys

    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
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


def start_attempt(run_dir: str | os.PathLike, *, stage: str, command: str, base: dict[str, Any]) -> dict[str, Any]:
    """Open a new attempt in provenance.json; an earlier attempt that never closed is recorded as killed.

    `base` holds the run's identity (lock hash, resolved-config hash, study, method, seed, versions); it
    is written on every attempt so that the newest one always describes the run.
    """
    run_dir = Path(run_dir)
    prov = read_provenance(run_dir)
    attempts = prov.get("attempts", [])
    for attempt in attempts:
        if attempt.get("end") is None:
            attempt.update(end=None, status="killed", reason="the attempt ended without closing (job killed, node lost or timed out)")
    attempt = {"stage": stage, "number": len(attempts) + 1, "start": now(), "end": None, "status": "running", "command": command, **host_info()}
    attempts.append(attempt)
    prov.update(base)
    prov["attempts"] = attempts
    atomic_write_json(run_dir / PROVENANCE, prov)
    return prov


def finish_attempt(run_dir: str | os.PathLike, *, status: str, reason: str | None = None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Close the newest open attempt with its exit status ("ok" or "failed") and reason."""
    run_dir = Path(run_dir)
    prov = read_provenance(run_dir)
    open_attempts = [a for a in prov.get("attempts", []) if a.get("end") is None and a.get("status") == "running"]
    if not open_attempts:
        raise BadInput("no open attempt to finish", path=run_dir / PROVENANCE)
    open_attempts[-1].update(end=now(), status=status, reason=reason, **(extra or {}))
    prov["status"] = status
    atomic_write_json(run_dir / PROVENANCE, prov)
    return prov
