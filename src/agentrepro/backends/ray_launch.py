"""A Ray head per job: its own ports, its own temp dir, stopped by its own PID — never `ray stop` or pkill.

verl-agent and Relax both run on Ray. On a shared node several jobs run at once, and the usual recipes
(`ray stop --force`, `pkill -f ray`, a fixed port 6379/8265) kill or hijack the other jobs' clusters.
Here every job derives a block of ports from its identity (SLURM_JOB_ID[.SLURM_STEP_ID], or the hash of
the run directory outside SLURM), starts `ray start --head --block` in its own session with a private
`--temp-dir`, points the trainer at it through RAY_ADDRESS (verl's `ray.init()` and Relax's driver mode
both connect to RAY_ADDRESS), and on exit — normal, failure or SIGTERM — signals only that session's
process group. The script refuses to start when the head port is already taken (exit 75, EX_TEMPFAIL).

Ports: base = 20000 + 100 * (hash(key) mod 400); head (GCS) base, dashboard base+1, client server base+2,
node manager base+3, object manager base+4, metrics export base+5, dashboard agent gRPC base+6 and HTTP
base+7, runtime-env agent base+8, Ray Serve HTTP base+9 (Relax's RELAX_SERVE_PORT), workers base+20 .. base+99.

The head is `head_launch(...)` (a Launch, backends/launch.py). Relax runs it with `private_head(...)`, in its own
session for the length of a `with` block; verl-agent through `python -m agentrepro.backends.ray_job`, which wraps
the training program. Both stop exactly that session (`stop_group`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from agentrepro.backends.launch import Launch
from agentrepro.errors import Failure

PORT_LOW, SLOTS, BLOCK = 20000, 400, 100


def job_key(run_dir: str | os.PathLike, environ: dict[str, str] | None = None) -> str:
    """SLURM_JOB_ID (with SLURM_STEP_ID when set) or, outside SLURM, 'run-' + hash of the absolute run dir."""
    environ = os.environ if environ is None else environ
    if environ.get("SLURM_JOB_ID"):
        step = environ.get("SLURM_STEP_ID")
        return f"slurm-{environ['SLURM_JOB_ID']}" + (f".{step}" if step else "")
    return "run-" + hashlib.sha256(str(Path(run_dir).resolve()).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class RayPorts:
    base: int

    @property
    def head(self) -> int:
        return self.base

    @property
    def dashboard(self) -> int:
        return self.base + 1

    @property
    def serve(self) -> int:
        """Ray Serve's HTTP port (Relax reads it from RELAX_SERVE_PORT; its default 8000 is shared by every job)."""
        return self.base + 9

    def flags(self, *, client: bool = True) -> list[str]:
        """`ray start` port flags. client=False leaves out --ray-client-server-port, which Ray refuses unless
        the client extra (grpcio; part of ray[default], which verl installs) is there."""
        b = self.base
        client_flag = [f"--ray-client-server-port={b + 2}"] if client else []
        return [f"--port={b}", f"--dashboard-port={b + 1}", *client_flag,
                f"--node-manager-port={b + 3}", f"--object-manager-port={b + 4}", f"--metrics-export-port={b + 5}",
                f"--dashboard-agent-grpc-port={b + 6}", f"--dashboard-agent-listen-port={b + 7}",
                f"--runtime-env-agent-port={b + 8}", f"--min-worker-port={b + 20}", f"--max-worker-port={b + BLOCK - 1}"]


def ray_ports(key: str) -> RayPorts:
    slot = int(hashlib.sha256(key.encode()).hexdigest(), 16) % SLOTS
    return RayPorts(PORT_LOW + BLOCK * slot)


def temp_dir(key: str) -> str:
    """Short (unix socket paths are limited to 107 bytes) and private to the job."""
    return f"/tmp/ray-{hashlib.sha256(key.encode()).hexdigest()[:10]}"


def head_launch(key: str, *, ray: str = "ray", env: Mapping[str, str] | None = None, cwd: Path | None = None,
                num_cpus: int | None = None, num_gpus: int | None = None, dashboard: bool = False,
                client: bool = True) -> Launch:
    """`ray start --head --block` on this job's ports and temp dir. With `dashboard`, the dashboard (and its
    job-submission API, which `ray job submit` needs) listens on 127.0.0.1 at `RayPorts.dashboard`. Workers
    inherit `env` from the head: that is how a Ray job's driver and actors receive the job's settings."""
    ports = ray_ports(key)
    argv = [ray, "start", "--head", "--block", "--node-ip-address=127.0.0.1", *ports.flags(client=client),
            f"--temp-dir={temp_dir(key)}", "--disable-usage-stats"]
    argv += ["--include-dashboard=true", "--dashboard-host=127.0.0.1"] if dashboard else ["--include-dashboard=false"]
    if num_cpus is not None:
        argv.append(f"--num-cpus={int(num_cpus)}")
    if num_gpus is not None:
        argv.append(f"--num-gpus={int(num_gpus)}")
    purpose = f"Ray head of job {key}: ports {ports.base}-{ports.base + BLOCK - 1}" + (f", dashboard {ports.dashboard}" if dashboard else "")
    return Launch(purpose, tuple(argv), dict(env or {}), cwd)


def listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def private_head(launch: Launch, *, wait_for: tuple[int, ...], log_dir: Path, pid_file: Path,
                 wait_s: float = 120) -> Iterator[subprocess.Popen]:
    """Run a `head_launch` in its own session while the block runs; refuse (Failure) when its first port is
    taken by another job; stop only that session's process group afterwards (TERM, then KILL after 30 s)."""
    if listening(wait_for[0]):
        raise Failure(f"port {wait_for[0]} ({launch.purpose}) is already in use; not starting")
    log_dir.mkdir(parents=True, exist_ok=True)
    with open(log_dir / "ray_head.stdout.log", "a") as out, open(log_dir / "ray_head.stderr.log", "a") as err:
        proc = subprocess.Popen(list(launch.argv), cwd=launch.cwd, env={**os.environ, **launch.env}, stdout=out,
                                stderr=err, stdin=subprocess.DEVNULL, start_new_session=True)
    pid_file.write_text(f"{proc.pid}\n")
    try:
        deadline = time.monotonic() + wait_s
        while not all(listening(port) for port in wait_for):
            if proc.poll() is not None:
                raise Failure(f"the Ray head exited with status {proc.returncode} before listening; see {log_dir}/ray_head.stderr.log")
            if time.monotonic() > deadline:
                raise Failure(f"the Ray head did not listen on {', '.join(map(str, wait_for))} within {wait_s:.0f} s")
            time.sleep(0.5)
        yield proc
    finally:
        stop_group(proc)
        pid_file.unlink(missing_ok=True)


def stop_group(proc: subprocess.Popen) -> None:
    """TERM the head's process group, wait up to 30 s for the head, then KILL whatever of the group is left."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=30)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
