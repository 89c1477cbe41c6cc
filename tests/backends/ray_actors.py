"""The program a Ray scale test runs against a job's head: `python ray_actors.py N CPUS OUT.json`.

Like verl-agent's environment workers (one actor per environment, `ray.remote(**env.resources_per_worker)`), it
starts N actors reserving CPUS each, waits until every one has answered (its process id, the ports it listens on,
and VLLM_ATTENTION_BACKEND as its process sees it) within BOUND seconds, and writes what it saw to OUT.json:
{actors, alive, distinct_pids, ports, env, seconds, node_cpus}. A worker that never comes up (no port for it)
fails the wait: ray.get raises GetTimeoutError and the program exits 1.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import psutil
import ray

BOUND = 900  # seconds for every actor to answer: a hang detector, far above what the slowest machine needs


class Worker:
    def describe(self) -> dict:
        listening = [c.laddr.port for c in psutil.Process().net_connections("tcp") if c.status == psutil.CONN_LISTEN]
        return {"pid": os.getpid(), "ports": listening, "env": os.environ.get("VLLM_ATTENTION_BACKEND")}


EnvWorker = ray.remote(Worker)


def main(count: int, cpus: float, out: str) -> int:
    started = time.monotonic()
    ray.init(logging_level="ERROR", log_to_driver=False)
    workers: list[Any] = [EnvWorker.options(num_cpus=cpus).remote() for _ in range(count)]  # Ray's actor handles
    seen = ray.get([w.describe.remote() for w in workers], timeout=BOUND)
    elapsed = time.monotonic() - started
    report = {
        "actors": count,
        "alive": len(seen),
        "distinct_pids": len({s["pid"] for s in seen}),
        "ports": sorted({p for s in seen for p in s["ports"]}),
        "env": sorted({str(s["env"]) for s in seen}),
        "seconds": round(elapsed, 1),
        "node_cpus": ray.cluster_resources().get("CPU"),
    }
    with open(out, "w", encoding="utf-8") as fh:
        json.dump(report, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]))
