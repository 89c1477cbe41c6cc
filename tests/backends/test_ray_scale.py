"""Real Ray at the scale of the official GraphGPO recipe: the head of a graphgpo-alfworld job, started exactly as the
verl-agent backend starts it (its train launch: `agentrepro_ray_head.py ...` with the launch's
environment), holds one actor per environment worker the recipe creates, every one alive, with the script's driver-only
export in each; two jobs on one machine at once get disjoint ports and both finish.

The recipe's numbers (verl-agent @ 20bd331, tests/fixtures/frameworks/verl-agent-20bd331.ray.json and the recorded
scripts): 16 x 8 training + 128 validation env workers at env.resources_per_worker.num_cpus 0.2, one TaskRunner, one
worker per GPU, the driver. The GPU workers and the TaskRunner need the trainer's own code and GPUs; the env workers are
started here as actors of the same resources. On a machine that cannot hold all of them, as many as it holds are
started (each needs about 40 MB of its own, and each idle worker's own threads take a share of a core: PER_CORE),
and the arithmetic for the full number is the preflight's (test_preflight.py; benchmarks/bench_ray_heads.py brings
up all 256 and times it); the count and the time are printed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, require_ray

from agentrepro import preflight
from agentrepro.backends.verl_agent import backend as verl_agent
from agentrepro.backends.verl_agent import demands
from agentrepro.hooks import agentrepro_ray_head as ray_head
from agentrepro.planning import StudyPlan

MANIFEST = REPO / "manifests" / "graphgpo-alfworld.yaml"
ACTORS = Path(__file__).with_name("ray_actors.py")
OWN_MB = 64  # a Ray worker's own memory (measured PSS about 40 MB) with room for the raylet's bookkeeping
PER_CORE = 48  # idle Ray workers one core carries: 256 on 2 cores kept the load above 150 for 14 minutes (RESULTS.md)


def available_mb() -> int:
    import psutil

    return int(psutil.virtual_memory().available / 2**20)


def train_launch(tmp_path, method: str = "graphgpo", seed: int = 0):
    """(the draft config, the job's train launch) of graphgpo-alfworld, run directory under tmp_path."""
    config = StudyPlan.load(MANIFEST).checked(method, seed).config
    config["backend"]["workdir"] = str(tmp_path)
    run_dir = tmp_path / f"{method}-{seed}"
    run_dir.mkdir()  # the train job's, which agentrepro train creates
    return config, verl_agent.programs(config, run_dir)[-1]


def run_head(launch, program: list[str], ray: str, tmp_path, **env) -> subprocess.Popen:
    """The launch's head words (agentrepro_ray_head.py and its options, `--ray` the real one) around `program`, with its environment."""
    head = list(launch.argv[: launch.argv.index("--")])
    return subprocess.Popen(
        [*head[:2], "--ray", ray, *head[2:], "--", *program],
        cwd=tmp_path,
        env={**os.environ, **launch.env, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
def test_a_jobs_head_holds_every_env_worker_of_the_graphgpo_recipe(tmp_path):
    """The graphgpo job's head (worker ports and CPUs as the preflight computes them) brings up one actor per env worker
    of the recipe (256), or as many as this machine's memory holds, each alive and holding a worker port of the job's
    block, each seeing VLLM_ATTENTION_BACKEND, which the script exports to its driver only."""
    ray, _ = require_ray()
    config, launch = train_launch(tmp_path)
    values = verl_agent.recipes.composed(config, tmp_path)
    envs, _, processes = demands.ray_processes(values)
    job = preflight.job_demands(StudyPlan.load(MANIFEST), "graphgpo", 0)
    ports = next(d for d in job.demands if d.what == "Ray worker ports")
    assert ports.holds() and ports.need == processes + config["resources"]["cpus"] and envs == 16 * 8 + 128
    head = launch.argv[: launch.argv.index("--")]
    assert head[head.index("--worker-ports") + 1] == str(ports.need)
    count = min(envs, available_mb() * 3 // 4 // OWN_MB, PER_CORE * len(os.sched_getaffinity(0)))
    assert count > 80, (
        f"this machine holds {count} Ray workers: fewer than the old fixed block of 80 ports, proving nothing"
    )
    out = tmp_path / "actors.json"
    proc = run_head(
        launch,
        [sys.executable, str(ACTORS), str(count), str(values["env.resources_per_worker.num_cpus"]), str(out)],
        ray,
        tmp_path,
        **{ray_head.PORTS_ENV: str(tmp_path / "ports")},
    )
    _stdout, stderr = proc.communicate(timeout=1500)
    assert proc.returncode == 0, stderr[-3000:]
    report = json.loads(out.read_text())
    block = next(line for line in stderr.splitlines() if "agentrepro: Ray head of job" in line)
    low, high = (int(p) for p in block.split(" on ports ")[1].split(",")[0].split("-"))
    assert report["alive"] == report["distinct_pids"] == count and report["env"] == ["XFORMERS"]
    assert len(report["ports"]) == count and all(low + ray_head.HEAD_PORTS <= port <= high for port in report["ports"])
    assert report["node_cpus"] == config["resources"]["cpus"]
    print(
        f"\nRAY_SCALE actors={count} of {envs} env workers, all alive after {report['seconds']} s "
        f"(head: {ports.need} worker ports, {config['resources']['cpus']} CPUs)"
    )


@pytest.mark.slow
def test_two_jobs_on_one_machine_at_once_do_not_collide(tmp_path):
    """Two graphgpo jobs' heads started at the same moment on one machine (each as the backend starts it, with the
    node's shared reservations) reserve disjoint blocks, each runs its actors to the end, and no reservation is left."""
    ray, _ = require_ray()
    shared = {ray_head.PORTS_ENV: str(tmp_path / "ports")}
    procs, outs = [], []
    for seed in (0, 1):
        _config, launch = train_launch(tmp_path, seed=seed)
        out = tmp_path / f"actors{seed}.json"
        outs.append(out)
        procs.append(run_head(launch, [sys.executable, str(ACTORS), "12", "0.2", str(out)], ray, tmp_path, **shared))
    blocks = []
    for proc in procs:
        _stdout, stderr = proc.communicate(timeout=900)
        assert proc.returncode == 0, stderr[-3000:]
        line = next(line for line in stderr.splitlines() if "agentrepro: Ray head of job" in line)
        low, high = (int(p) for p in line.split(" on ports ")[1].split(",")[0].split("-"))
        blocks.append(set(range(low, high + 1)))
    assert not blocks[0] & blocks[1]
    for out, block in zip(outs, blocks):
        report = json.loads(out.read_text())
        assert report["alive"] == 12 and len(report["ports"]) == 12
        assert all(
            min(block) + ray_head.HEAD_PORTS <= port <= max(block) for port in report["ports"]
        )  # each worker's in its job's
    assert not list((tmp_path / "ports").glob("agentrepro-ray-*.ports"))
