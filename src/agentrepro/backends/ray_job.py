"""`python -m agentrepro.backends.ray_job --key KEY [options] -- PROGRAM ARG...`: PROGRAM against this job's own Ray head.

The ports and temp dir come from ray_launch.py (derived from the job's key). The head runs in its own
session (`ray start --head --block`); PROGRAM gets RAY_ADDRESS=127.0.0.1:<head port> (verl's `ray.init()`
connects to it instead of joining whatever cluster another job on the node started); on exit, failure or
SIGTERM only that head's process group is stopped, never `ray stop` or pkill. Exit status: PROGRAM's; 75
(EX_TEMPFAIL) if the head port is already taken; 1 if the head does not come up. Arguments are a list
from start to end: no shell is involved.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from agentrepro.backends import ray_launch

EX_TEMPFAIL = 75


def run(program: list[str], *, key: str, ray: str = "ray", num_cpus: int | None = None, num_gpus: int | None = None,
        client: bool = True, pid_file: Path | None = None, wait_s: float = 120.0) -> int:
    port = ray_launch.ray_ports(key).head
    if ray_launch.listening(port):
        print(f"agentrepro: port {port} (Ray head of job {key}) is already in use; not starting", file=sys.stderr)
        return EX_TEMPFAIL
    launch = ray_launch.head_launch(key, ray=ray, num_cpus=num_cpus, num_gpus=num_gpus, client=client)
    head = subprocess.Popen(list(launch.argv), start_new_session=True)
    if pid_file is not None:
        pid_file.write_text(f"{head.pid}\n")
    child: subprocess.Popen | None = None

    def terminate(signum, frame):  # noqa: ARG001 - the finally below stops the head
        if child is not None and child.poll() is None:
            child.terminate()
        raise SystemExit(143)

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        deadline = time.monotonic() + wait_s
        while not ray_launch.listening(port):
            if head.poll() is not None:
                print("agentrepro: the Ray head exited before listening", file=sys.stderr)
                return 1
            if time.monotonic() > deadline:
                print(f"agentrepro: the Ray head did not listen on {port}", file=sys.stderr)
                return 1
            time.sleep(0.5)
        child = subprocess.Popen(program, env={**os.environ, "RAY_ADDRESS": f"127.0.0.1:{port}"})
        return child.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)
        if child is not None and child.poll() is None:
            child.terminate()
            child.wait()
        ray_launch.stop_group(head)
        if pid_file is not None:
            pid_file.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentrepro.backends.ray_job", description=__doc__.splitlines()[0])
    parser.add_argument("--key", required=True)
    parser.add_argument("--ray", default="ray")
    parser.add_argument("--num-cpus", type=int)
    parser.add_argument("--num-gpus", type=int)
    parser.add_argument("--no-client", action="store_true")
    parser.add_argument("--pid-file", type=Path)
    parser.add_argument("program", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not program:
        parser.error("give the program after --")
    return run(program, key=args.key, ray=args.ray, num_cpus=args.num_cpus, num_gpus=args.num_gpus,
               client=not args.no_client, pid_file=args.pid_file)


if __name__ == "__main__":
    raise SystemExit(main())
