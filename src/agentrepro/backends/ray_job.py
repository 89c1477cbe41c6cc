"""`python -m agentrepro.backends.ray_job --key KEY [options] -- PROGRAM ARG...`: PROGRAM against this job's own Ray head.

The ports are reserved on the node when the job starts (ray_launch.reserve: a block no other job holds, with
`--worker-ports N` worker ports, or none and each worker binds a port the kernel picks; `--fixed-port P` for a
port the framework hard-codes), the temp dir is the job's (ray_launch.temp_dir). The head runs in its own
session (`ray start --head --block`) with this process's environment, which its workers inherit; PROGRAM gets
RAY_ADDRESS: the head's GCS address 127.0.0.1:<port> (verl's `ray.init()` connects to it), or with
`--dashboard` the job API http://127.0.0.1:<dashboard port> (Ray's job CLI, `ray job submit`, prefers it to any
--address). On exit, failure or SIGTERM only that head's process group is stopped, never `ray stop` or pkill,
and the reservation goes with the head. Exit status: PROGRAM's; 75 (EX_TEMPFAIL) when no ports could be
reserved (a hard-coded port in use: another job's); 1 if the head does not come up. Arguments are a list from
start to end: no shell is involved.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

from agentrepro.backends import ray_launch
from agentrepro.errors import Failure

EX_TEMPFAIL = 75


def run(program: list[str], *, key: str, ray: str = "ray", num_cpus: int | None = None, num_gpus: int | None = None,
        client: bool = True, dashboard: bool = False, worker_ports: int = 0, fixed_ports: tuple[int, ...] = (),
        pid_file: Path | None = None, wait_s: float = 120.0) -> int:
    try:
        reservation = ray_launch.reserve(worker_ports, fixed=fixed_ports)
    except ray_launch.PortsTaken as exc:
        print(f"agentrepro: no Ray ports for job {key}: {exc}; not starting", file=sys.stderr)
        return EX_TEMPFAIL
    ports = reservation.ports
    argv = ray_launch.head_argv(key, ports, ray=ray, num_cpus=num_cpus, num_gpus=num_gpus, dashboard=dashboard, client=client)
    address = f"http://127.0.0.1:{ports.dashboard}" if dashboard else f"127.0.0.1:{ports.head}"
    print(f"agentrepro: Ray head of job {key} on ports {ports.base}-{ports.base + ports.size - 1}, RAY_ADDRESS={address}",
          file=sys.stderr, flush=True)
    child: subprocess.Popen | None = None

    def terminate(signum, frame):  # noqa: ARG001 - the finally blocks below stop the program and the head
        raise SystemExit(143)

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        wait_for = (ports.head, ports.dashboard) if dashboard else (ports.head,)
        with ray_launch.running_head(argv, reservation, wait_for=wait_for, wait_s=wait_s, pid_file=pid_file):
            child = subprocess.Popen(program, env={**os.environ, "RAY_ADDRESS": address})
            try:
                return child.wait()
            finally:
                if child.poll() is None:
                    child.terminate()
                    child.wait()
    except Failure as exc:
        print(f"agentrepro: {exc}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous)
        reservation.release()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentrepro.backends.ray_job", description=__doc__.splitlines()[0])
    parser.add_argument("--key", required=True)
    parser.add_argument("--ray", default="ray")
    parser.add_argument("--num-cpus", type=int)
    parser.add_argument("--num-gpus", type=int)
    parser.add_argument("--no-client", action="store_true")
    parser.add_argument("--dashboard", action="store_true", help="start the dashboard (job API); RAY_ADDRESS names it")
    parser.add_argument("--worker-ports", type=int, default=0, help="ports reserved for Ray's workers (0: the kernel picks each)")
    parser.add_argument("--fixed-port", type=int, action="append", default=[], help="a port the framework hard-codes")
    parser.add_argument("--pid-file", type=Path)
    parser.add_argument("program", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not program:
        parser.error("give the program after --")
    return run(program, key=args.key, ray=args.ray, num_cpus=args.num_cpus, num_gpus=args.num_gpus, client=not args.no_client,
               dashboard=args.dashboard, worker_ports=args.worker_ports, fixed_ports=tuple(args.fixed_port), pid_file=args.pid_file)


if __name__ == "__main__":
    raise SystemExit(main())
