"""A job's Ray cluster over the nodes of its SLURM allocation: the head on the node agentrepro runs on (the batch
step's, the allocation's first), one worker node on each of the others, started there by `srun`.

The head launcher (hooks/agentrepro_ray_head.py) does the Ray part on each node: `--node-ip ADDR --address-file FILE`
on the head's node, `--join FILE` on the others. What it cannot know from inside the job's image is SLURM's view,
which this module reads on the host: the job's nodes (`Allocation`, from SLURM_JOB_NODELIST through `scontrol show
hostnames`), each node's address as SLURM reaches it (`node_address`: its NodeAddr), the address the head binds
(`head_address`: this node's address on the route to another node of the job, the one the worker nodes' packets
come back to; not the host name's, which often resolves to 127.0.0.1), and the `srun` that starts a program once on
each other node (`worker_step`), run beside the head by `worker_nodes`. Every value is checked before it becomes a
word of a command line, and no shell is involved.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import socket
import subprocess
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from agentrepro.errors import BadInput, Failure
from agentrepro.hooks import agentrepro_ray_head as head

NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")  # a host name as SLURM lists it
SCONTROL_TIMEOUT_S = 30
STOP_WAIT_S = 120.0  # how long the worker nodes get to stop by themselves after the head, then again after SIGTERM


@dataclass(frozen=True)
class Allocation:
    """The nodes of this SLURM job, in SLURM's order, and the one this process runs on."""

    nodes: tuple[str, ...]
    here: str

    @property
    def others(self) -> tuple[str, ...]:
        """The nodes that run a worker node: all but this one."""
        return tuple(node for node in self.nodes if node != self.here)


def _scontrol(*args: str) -> str:
    try:
        done = subprocess.run(
            ["scontrol", *args], capture_output=True, text=True, timeout=SCONTROL_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Failure(f"scontrol {' '.join(args)}: {exc}") from None
    if done.returncode != 0:
        raise Failure(f"scontrol {' '.join(args)} exited {done.returncode}: {done.stderr.strip()[-300:]}")
    return done.stdout


def allocation(environ: Mapping[str, str] | None = None) -> Allocation | None:
    """This job's nodes (SLURM_JOB_NODELIST, expanded by `scontrol show hostnames`) and this node (SLURMD_NODENAME);
    None outside a SLURM job. Failure when SLURM's answer is not a list of host names holding this node."""
    environ = os.environ if environ is None else environ
    listed, here = environ.get("SLURM_JOB_NODELIST", ""), environ.get("SLURMD_NODENAME", "")
    if not listed or not here:
        return None
    nodes = tuple(_scontrol("show", "hostnames", listed).split())
    bad = [name for name in (*nodes, here) if not NODE_NAME.match(name)]
    if bad or here not in nodes:
        raise Failure(f"SLURM's node list {listed!r} expands to {nodes!r}, which does not hold this node {here!r}")
    return Allocation(nodes, here)


def for_job(wanted: int, environ: Mapping[str, str] | None = None) -> Allocation | None:
    """The allocation of a job that asks `wanted` nodes (resources.nodes); None for one node. BadInput naming the field
    when the job does not run in a SLURM allocation of that many nodes (a local run, or another allocation)."""
    if wanted <= 1:
        return None
    nodes = allocation(environ)
    if nodes is None:
        raise BadInput(
            f"asks {wanted} nodes, and this job runs outside a SLURM job: run the study with --profile slurm",
            where="resources.nodes",
        )
    if len(nodes.nodes) != wanted:
        raise BadInput(
            f"asks {wanted} nodes, and this job's SLURM allocation has {len(nodes.nodes)} ({','.join(nodes.nodes)})",
            where="resources.nodes",
        )
    return nodes


def this_node(environ: Mapping[str, str] | None = None) -> str:
    """This node's name as SLURM calls it (SLURMD_NODENAME), else the host's short name: what labels its logs."""
    environ = os.environ if environ is None else environ
    name = environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    return name if NODE_NAME.match(name) else "node"


def node_address(name: str) -> str:
    """The IPv4 address SLURM reaches node `name` at (`scontrol show node`'s NodeAddr, resolved when it is a name)."""
    if not NODE_NAME.match(name):
        raise Failure(f"{name!r} is not a node name")
    found = re.search(r"\bNodeAddr=(\S+)", _scontrol("show", "node", "--oneliner", name))
    if not found:
        raise Failure(f"scontrol shows no NodeAddr for node {name}")
    addr = found[1]
    try:
        return str(ipaddress.IPv4Address(addr))
    except ValueError:
        pass
    try:
        return socket.gethostbyname(addr)
    except OSError as exc:
        raise Failure(f"node {name}'s address {addr!r} does not resolve: {exc}") from None


def head_address(nodes: Allocation) -> str:
    """The address the head binds on this node: the one on the route to another node of the job."""
    if not nodes.others:
        raise Failure("a Ray cluster over several nodes needs a job of several nodes")
    return head.route_address(node_address(nodes.others[0]))


def worker_step(nodes: Allocation, argv: Sequence[str], *, cpus: int, gpus: int = 0) -> list[str]:
    """`srun` running `argv` once on each node but this one, with `cpus` CPUs and `gpus` GPUs of that node; the step
    ends as a whole when one of them fails (--kill-on-bad-exit)."""
    others = nodes.others
    if not others:
        raise Failure("a Ray cluster over several nodes needs a job of several nodes")
    words = ["srun", f"--nodes={len(others)}", f"--ntasks={len(others)}", "--ntasks-per-node=1"]
    words += [f"--nodelist={','.join(others)}", f"--cpus-per-task={cpus}", "--kill-on-bad-exit=1"]
    words += [f"--gpus-per-node={gpus}"] if gpus else []
    return [*words, *argv]


@dataclass(frozen=True)
class WorkerNodes:
    """The running worker nodes' `srun` step, and `failed`: set once it ended with an exit status other than 0 while the
    head still ran (a node that could not start or join), for the head's run to stop (launch.run_launch's abandon)."""

    step: subprocess.Popen
    failed: threading.Event


@contextlib.contextmanager
def worker_nodes(
    nodes: Allocation,
    argv: Sequence[str],
    *,
    address: Path,
    cpus: int,
    gpus: int = 0,
    log_dir: Path,
    label: str,
    stop_wait_s: float = STOP_WAIT_S,
) -> Iterator[WorkerNodes]:
    """The worker nodes (`argv` on every other node, `worker_step`) running while the block runs the head, their output
    appended to LOG_DIR/<label>.stdout.log and .stderr.log. The head's `address` file of an earlier attempt is removed
    first: a worker node would join a head that is gone. A step that fails while the block runs sets `failed` at once
    (the head's program would otherwise wait for the missing node's resources until the time limit). After the block
    each worker node stops by itself once the head has removed that file; a step still running after `stop_wait_s` gets
    SIGTERM (srun passes it on), then SIGKILL. Failure when the step ended otherwise than with every worker node's exit
    0, naming the last line a node wrote (raised from the block's own error, when there is one), except where the
    job itself was stopped (scancel signals every step at once): that stop travels on."""
    address.unlink(missing_ok=True)
    log_dir.mkdir(parents=True, exist_ok=True)
    stderr = log_dir / f"{label}.stderr.log"
    with open(log_dir / f"{label}.stdout.log", "ab") as out, open(stderr, "ab") as err:
        step = subprocess.Popen(
            worker_step(nodes, argv, cpus=cpus, gpus=gpus), stdin=subprocess.DEVNULL, stdout=out, stderr=err
        )
    failed, running = threading.Event(), threading.Event()
    running.set()

    def watch() -> None:
        if step.wait() != 0 and running.is_set():
            failed.set()

    threading.Thread(target=watch, daemon=True).start()
    error: BaseException | None = None
    try:
        yield WorkerNodes(step, failed)
    except BaseException as exc:
        error = exc
    finally:
        running.clear()
        for stop in (None, step.terminate, step.kill):
            if stop is not None:
                stop()
            try:
                step.wait(timeout=stop_wait_s)
                break
            except subprocess.TimeoutExpired:
                continue
    stopped = error is not None and not isinstance(error, Exception)  # SIGTERM or Ctrl-C: the job's too, so its nodes'
    if step.returncode != 0 and not stopped and (error is None or failed.is_set()):
        written = stderr.read_text(errors="replace").strip().splitlines()
        lines = [line for line in written if not line.startswith("srun: ")] or written  # the node's, not srun's own
        raise Failure(
            f"the worker nodes on {','.join(nodes.others)} ended with exit {step.returncode}"
            + (f": {lines[-1]}" if lines else "")
        ) from error
    if error is not None:
        raise error
