"""The job's own Ray head as the framework backends run it: inside the job's image, around the framework's program.

The head and the program that connects to it run as one program (`python3 <hooks>/agentrepro_ray_head.py ... --
PROGRAM ...`, agentrepro/hooks/agentrepro_ray_head.py, standard library only), so both are the image's: its
Python, its Ray, one PID namespace and one /tmp for Ray's sockets and temp dir. `words` writes that prefix, `env`
and `shared` what it needs of the host: the node's port reservations folder (AGENTREPRO_RAY_PORTS_DIR), mounted
read-write so that jobs in other containers see each other's reservations; `ready` creates it before a job runs.
`owned` holds a program's owner lock while agentrepro runs it, and the head launcher stops the program and its head
once that lock is free (OWNER_ENV): a job whose agentrepro was killed leaves nothing running.

A job over several nodes (backends/ray_nodes.py): `words(..., node_ip=ADDR)` binds the head to that address of its
node and has it write its address to `address_file(run_dir)`, in the run directory every node sees; `join_words` are
what each other node runs to join it, with that node's own CPUs, GPUs and ports.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from agentrepro.errors import BadInput, Failure
from agentrepro.hooks import HOOKS_DIR
from agentrepro.hooks import agentrepro_ray_head as head
from agentrepro.layout import RunFiles

SCRIPT = HOOKS_DIR / "agentrepro_ray_head.py"
PYTHONPATH_ENV = head.PYTHONPATH_ENV  # the job's Python path entries, before the one the head runs with


def words(
    run_dir: Path,
    *,
    ray: str | None = None,
    num_cpus: int | None = None,
    num_gpus: int | None = None,
    client: bool = True,
    dashboard: bool = False,
    worker_ports: int | None = None,
    fixed_ports: tuple[int, ...] = (),
    memory_mb: int | None = None,
    node_ip: str | None = None,
) -> tuple[str, ...]:
    """The words before `--` that run a program against this job's own head, with the image's `python3`;
    `memory_mb`: the job's memory (resources.mem_mb), which sizes Ray's object store instead of the node's;
    `node_ip`: the address the head binds in a job over several nodes, whose worker nodes find it in
    `address_file(run_dir)` (otherwise 127.0.0.1, and no file)."""
    out = ["python3", str(SCRIPT), "--key", head.job_key(run_dir)]
    out += ["--dashboard"] if dashboard else []
    for port in fixed_ports:
        out += ["--fixed-port", str(port)]
    out += ["--pid-file", str(Path(run_dir).resolve() / "ray_head.pid")]
    out += ["--node-ip", node_ip, "--address-file", str(address_file(run_dir))] if node_ip is not None else []
    out += _node_options(ray, num_cpus, num_gpus, worker_ports, memory_mb)
    return (*out, *([] if client else ["--no-client"]), "--")


def join_words(
    run_dir: Path,
    key: str,
    *,
    ray: str | None = None,
    num_cpus: int | None = None,
    num_gpus: int | None = None,
    worker_ports: int | None = None,
    memory_mb: int | None = None,
) -> tuple[str, ...]:
    """The words that run a worker node of the job whose head `words(..., node_ip=...)` starts, on another node of
    its allocation: the head's `key` (the job's, as the head's node names it), this node's own CPUs, GPUs, worker
    ports and memory; its address is the one on the route to the head."""
    out = ["python3", str(SCRIPT), "--key", key, "--join", str(address_file(run_dir))]
    return (*out, *_node_options(ray, num_cpus, num_gpus, worker_ports, memory_mb))


def _node_options(
    ray: str | None, num_cpus: int | None, num_gpus: int | None, worker_ports: int | None, memory_mb: int | None
) -> list[str]:
    out = ["--worker-ports", str(worker_ports)] if worker_ports is not None else []
    out += ["--num-cpus", str(num_cpus)] if num_cpus is not None else []
    out += ["--ray", ray] if ray is not None else []
    out += ["--num-gpus", str(num_gpus)] if num_gpus is not None else []
    return out + (["--memory-mb", str(memory_mb)] if memory_mb is not None else [])


def address_file(run_dir: Path) -> Path:
    """Where the head of a job over several nodes writes its address for the worker nodes: in the run directory."""
    return Path(run_dir).resolve() / "ray_head.address"


OWNER_ENV = head.OWNER_ENV  # names the file the agentrepro process running the program holds locked


def owner_lock(job_dir: str | os.PathLike, label: str) -> Path:
    """The owner lock of the program `label` of the job whose records go to `job_dir` (its logs/), which the agentrepro
    process running it holds (`owned`) and the head launcher watches: one per program, as a run's evaluations of
    different steps run at once."""
    return Path(job_dir).resolve() / RunFiles.LOGS / f"{label}.owner"


@contextlib.contextmanager
def owned(path: Path) -> Iterator[Callable[[], None]]:
    """Hold a program's owner lock while it runs: the head launcher (OWNER_ENV) stops the program and its head once no
    process holds it, so a job whose agentrepro is killed (SIGKILL included: a container outlives the `podman run`
    that started it) does not leave them running. Yields what lets go of it early, which stops them the same way.
    Failure when another process holds it: the same program run twice at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:  # not inherited by the programs (close-on-exec)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Failure(f"another process runs this program (it holds {path})") from None
        yield lambda: fcntl.flock(handle, fcntl.LOCK_UN)


def shared() -> tuple[Path, ...]:
    """Host folders the head shares with the node's other jobs: the port reservations."""
    return (head.ports_dir().resolve(),)


def env() -> dict[str, str]:
    """The head's view of the reservations folder (the host's path, mounted at the same path) and, when the job's
    environment sets it, how long it waits for taken ports (a container sees only the environment it is given)."""
    wait = os.environ.get(head.PORT_WAIT_ENV)
    return {head.PORTS_ENV: str(head.ports_dir().resolve()), **({head.PORT_WAIT_ENV: wait} if wait else {})}


def ready() -> None:
    """Create the reservations folder, shared by every user's jobs of the node (a mount must exist before the
    container starts); BadInput in one line when what is there cannot be trusted (hooks/agentrepro_ray_head.py)."""
    folder = head.ports_dir().absolute()
    try:
        mountinfo = Path("/proc/self/mountinfo").read_text()
    except OSError:
        mountinfo = ""
    private = head.private_mount(folder, mountinfo, os.environ.get("SLURM_JOB_ID"))
    if private is not None:
        raise BadInput(
            f"{folder} lies in this job's private {private[0]} (mounted from {private[1]}), which the node's other jobs "
            "do not see, so their Ray port blocks would overlap: set it to a node-local folder every job of the node "
            "sees",
            where=head.PORTS_ENV,
        )
    try:
        head.shared_folder(folder)
    except head.UnsafeFolder as exc:
        raise BadInput(str(exc), where=head.PORTS_ENV) from None
