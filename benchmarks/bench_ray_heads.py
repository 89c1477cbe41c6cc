"""A graphgpo-alfworld job's Ray head at the recipe's scale, and two heads at once (benchmarks/RESULTS.md, "Ray heads").

    .venv/bin/python benchmarks/bench_ray_heads.py [--actors N] [--ray PATH] [--two]

Builds the graphgpo job's train launch as the verl-agent backend does (planning.draft_config, job_launches), runs its
head part (`src/agentrepro/hooks/agentrepro_ray_head.py` with the preflight's worker ports and resources.cpus) around
tests/backends/ray_actors.py, which starts N actors of env.resources_per_worker.num_cpus each (default: the recipe's
env workers, 16 x 8 + 128 = 256) and waits until every one has answered, and prints one JSON line: actors, alive,
seconds until the last answered (from the program's start, ray.init included), the head's worker ports and CPUs, the
load average before and after. With --two, two jobs' heads (seeds 0 and 1) start at the same moment with 12 actors
each, and their port blocks are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from agentrepro.backends.verl_agent import backend as verl_agent
from agentrepro.backends.verl_agent import demands, recipes
from agentrepro.manifest.loading import load_manifest
from agentrepro.planning import draft_config

REPO = Path(__file__).resolve().parents[1]
MANIFEST = REPO / "manifests" / "graphgpo-alfworld.yaml"
ACTORS = REPO / "tests" / "backends" / "ray_actors.py"


def start(work: Path, seed: int, count: int, ray: str) -> tuple[subprocess.Popen, Path, dict, dict]:
    _, config = draft_config(load_manifest(MANIFEST), MANIFEST, "graphgpo", seed)
    config["backend"]["workdir"] = str(work)
    run_dir = work / f"seed{seed}"
    run_dir.mkdir()
    launch = verl_agent.job_launches(config, run_dir)[-1]
    values = recipes.composed(config, run_dir)
    head = list(launch.argv[: launch.argv.index("--")])
    out = work / f"actors{seed}.json"
    program = [sys.executable, str(ACTORS), str(count), str(values["env.resources_per_worker.num_cpus"]), str(out)]
    proc = subprocess.Popen(
        [*head[:3], "--ray", ray, *head[3:], "--", *program],
        cwd=work,
        env={**os.environ, **launch.env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc, out, config, values


def block(stderr: str) -> str:
    return (
        next(line for line in stderr.splitlines() if "agentrepro: Ray head of job" in line)
        .split(" on ports ")[1]
        .split(",")[0]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actors", type=int, help="actors to start (default: the recipe's env workers)")
    parser.add_argument("--ray", default=shutil.which("ray") or "ray")
    parser.add_argument("--two", action="store_true", help="two jobs' heads at once, 12 actors each")
    args = parser.parse_args()
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if args.two:
            started = [start(work, seed, 12, args.ray) for seed in (0, 1)]
            results = []
            for proc, out, _, _ in started:
                _, stderr = proc.communicate(timeout=1800)
                results.append({"status": proc.returncode, "head_block": block(stderr), **json.loads(out.read_text())})
            print(json.dumps({"jobs": results, "load_before": load, "load_after": os.getloadavg()}))
            return 0
        envs, _, processes = demands.ray_processes(recipes.composed(*planned(work)))
        count = args.actors or envs
        proc, out, config, values = start(work, 0, count, args.ray)
        _, stderr = proc.communicate(timeout=3600)
        report = json.loads(out.read_text()) if proc.returncode == 0 else {"error": stderr[-2000:]}
        _need, ports = demands.worker_ports(config, values)
        print(
            json.dumps(
                {
                    "actors": count,
                    "recipe_env_workers": envs,
                    "recipe_processes": processes,
                    "head_worker_ports": ports,
                    "head_cpus": demands.head_cpus(config)[1],
                    "status": proc.returncode,
                    "head_block": block(stderr),
                    **{k: v for k, v in report.items() if k != "ports"},
                    "worker_ports_used": len(report.get("ports", [])),
                    "load_before": load,
                    "load_after": os.getloadavg(),
                }
            )
        )
    return 0


def planned(work: Path) -> tuple[dict, Path]:
    """The graphgpo seed-0 job's draft config and a run directory for it (for its numbers; nothing starts)."""
    _, config = draft_config(load_manifest(MANIFEST), MANIFEST, "graphgpo", 0)
    return config, work / "plan"


if __name__ == "__main__":
    sys.exit(main())
