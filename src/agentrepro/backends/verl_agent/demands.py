"""What a verl-agent job asks of its node, from the values its entry point runs with (recipes.composed).

Facts of verl-agent @ 20bd331 (tests/fixtures/frameworks/verl-agent-20bd331.ray.json has each with its file:line):
* environment workers: one Ray actor per environment, `ray.remote(**env.resources_per_worker)` (GraphGPO:
  recipe/GraphGPO/alfworld_envs.py:249; GiGPO/GRPO: agent_system/environments/env_package/alfworld/envs.py:102):
  data.train_batch_size x env.rollout.n training envs and data.val_batch_size validation envs
  (graphgpo_env_manager.py:733-734, env_manager.py:642-643), each reserving env.resources_per_worker.num_cpus;
* the TaskRunner, `@ray.remote(num_cpus=1)` (main_graphgpo.py:53, main_ppo.py:54);
* one worker per GPU, trainer.n_gpus_per_node x trainer.nnodes, each a placement-group bundle {CPU: 1, GPU: 1}
  (RayResourcePool(max_colocate_count=1), graphgpo_ray_trainer.py:120, ray_trainer.py:115; base.py:114);
* the driver (the script's `python3 -m <entry>`) binds a worker port too, and Ray keeps up to num_cpus idle workers
  (num_workers_soft_limit, -1 = num_cpus: ray src/ray/common/ray_config_def.h), so the head's worker ports are the
  processes above plus that pool;
* batch checks before the first step: data.train_batch_size x rollout.n divisible by the GPUs
  (graphgpo_ray_trainer.py:490, ray_trainer.py:470); ppo_mini_batch_size x rollout.n / GPUs divisible by
  ppo_micro_batch_size_per_gpu (fsdp_workers.py:151, 159); the GPUs divisible by the rollout's tensor-parallel size
  (fsdp_workers.py:402); vLLM splits the model's attention heads over that size, and its KV heads too, or
  replicates them when there are fewer (read from the model's config.json when backend.model_path holds it);
* ALFWorld's training env workers draw their games from $ALFWORLD_DATA/json_2.1.1/train
  (agent_system/environments/env_package/alfworld/configs/config_tw.yaml:2, which both entry points load:
  graphgpo_env_manager.py:724, env_manager.py:633); the harness sets ALFWORLD_DATA to data.eval.path. With no game
  there, the workers start and the first reset of a training env never returns (run: a rehearsal cannot see it, the
  reset comes after the GPUs).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from agentrepro.backends.base import AT_LEAST, DIVIDES, DIVISOR, Demand
from agentrepro.backends.verl_agent import recipes
from agentrepro.environments.alfworld_data import GAME_FILE, JSON_DIR, SPLITS, TRAJ_FILE
from agentrepro.reading import load_json

TASK_RUNNER_CPUS = 1  # @ray.remote(num_cpus=1) class TaskRunner
BUNDLE_CPUS = 1  # {"CPU": max_colocate_count = 1, "GPU": 1} per GPU worker
DRIVERS = 1  # the entry point's own process


def _where(config: dict[str, Any], graphgpo: str, ppo: str) -> str:
    return graphgpo if recipes.script_for(config).entry == "recipe.GraphGPO.main_graphgpo" else ppo


def ray_processes(values: dict[str, Any]) -> tuple[int, int, int]:
    """(environment workers, GPU workers, every Ray worker process: those, the TaskRunner and the driver)."""
    envs = int(values["data.train_batch_size"]) * int(values["env.rollout.n"]) + int(values["data.val_batch_size"])
    gpus = int(values["trainer.n_gpus_per_node"]) * int(values["trainer.nnodes"])
    return envs, gpus, envs + 1 + gpus + DRIVERS


def reserved_cpus(values: dict[str, Any]) -> float:
    """The CPUs the job's actors reserve in Ray (rounded to 1e-6 against float noise)."""
    envs, gpus, _ = ray_processes(values)
    return round(envs * float(values["env.resources_per_worker.num_cpus"]) + TASK_RUNNER_CPUS + gpus * BUNDLE_CPUS, 6)


def nodes(config: dict[str, Any]) -> int:
    """The job's nodes (resources.nodes): its Ray cluster offers each node's CPUs and GPUs once per node."""
    return int((config.get("resources") or {}).get("nodes", 1))


def head_cpus(config: dict[str, Any]) -> tuple[str, int]:
    """(manifest field, value): the CPUs the job's Ray head offers, backend.ray.num_cpus or else resources.cpus
    (what the scheduler gives the job; 1 when unset, as planning.job_resources asks for)."""
    ray = (config.get("backend") or {}).get("ray") or {}
    if ray.get("num_cpus") is not None:
        return "backend.ray.num_cpus", int(ray["num_cpus"])
    return "resources.cpus", int((config.get("resources") or {}).get("cpus", 1))


def worker_ports(config: dict[str, Any], values: dict[str, Any]) -> tuple[int, int]:
    """(worker ports the job needs, worker ports its head reserves: backend.ray.worker_ports, else the need)."""
    _, _, processes = ray_processes(values)
    need = processes + head_cpus(config)[1]
    given = ((config.get("backend") or {}).get("ray") or {}).get("worker_ports")
    return need, int(given) if given is not None else need


def model_heads(config: dict[str, Any]) -> tuple[int, int] | None:
    """(attention heads, KV heads) from the model's config.json under backend.model_path; None when not there."""
    path = (config.get("backend") or {}).get("model_path")
    found = Path(path) / "config.json" if path else None
    if found is None or not found.is_file():
        return None
    model = load_json(found)
    heads = model.get("num_attention_heads") if isinstance(model, dict) else None
    kv = model.get("num_key_value_heads", heads) if isinstance(model, dict) else None
    return (heads, kv) if isinstance(heads, int) and isinstance(kv, int) else None


def training_games(config: dict[str, Any]) -> int | None:
    """The game directories (traj_data.json beside game.tw-pddl) of ALFWorld's train split under data.eval.path;
    None for a study on another environment or without a data directory. Counted, not read: the split holds
    thousands of games."""
    data_path = ((config.get("data") or {}).get("eval") or {}).get("path")
    if (config.get("env") or {}).get("name") != "alfworld" or not data_path or not Path(data_path).is_dir():
        return None
    train = Path(data_path) / JSON_DIR / SPLITS["train"]
    return sum(1 for _root, _dirs, files in os.walk(train) if GAME_FILE in files and TRAJ_FILE in files)


def demands(config: dict[str, Any], run_dir: Path) -> list[Demand]:
    """The job's demands (module docstring), each beside the manifest value it must fit."""
    values = recipes.composed(config, run_dir)
    envs, gpus, processes = ray_processes(values)
    cpus_field, cpus = head_cpus(config)
    need_ports, ports = worker_ports(config, values)
    per_env = values["env.resources_per_worker.num_cpus"]
    tp = int(values["actor_rollout_ref.rollout.tensor_model_parallel_size"])
    rollout_n = int(values["actor_rollout_ref.rollout.n"])
    have_gpus = int((config.get("resources") or {}).get("gpus", 0)) * nodes(config)
    micro = values["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"]
    out = [
        Demand(
            "Ray worker ports",
            f"{processes} Ray worker processes ({envs} env workers = data.train_batch_size x env.rollout.n "
            f"+ data.val_batch_size, 1 TaskRunner, {gpus} GPU workers, {DRIVERS} driver) + Ray's idle pool of {cpus} ({cpus_field})",
            need_ports,
            "backend.ray.worker_ports",
            ports,
            AT_LEAST,
            _where(
                config,
                "recipe/GraphGPO/alfworld_envs.py:249, main_graphgpo.py:53, graphgpo_ray_trainer.py:120",
                "alfworld/envs.py:102, main_ppo.py:54, ray_trainer.py:115",
            ),
        ),
        Demand(
            "CPUs the recipe reserves in Ray",
            f"env.resources_per_worker.num_cpus {per_env} x {envs} env workers + "
            f"{TASK_RUNNER_CPUS} TaskRunner + {BUNDLE_CPUS} x {gpus} GPU workers",
            reserved_cpus(values),
            cpus_field,
            cpus * nodes(config),
            AT_LEAST,
            _where(
                config,
                "recipe/GraphGPO/run_qwen2.5_1.5b_alfworld_train.sh:9, alfworld_envs.py:249, main_graphgpo.py:53, base.py:114",
                "examples/*/run_alfworld.sh:5, alfworld/envs.py:102, main_ppo.py:54, base.py:114",
            ),
            via=f"{cpus} on each of resources.nodes {nodes(config)}" if nodes(config) > 1 else None,
        ),
        Demand(
            "GPUs of the trainer",
            "trainer.n_gpus_per_node x trainer.nnodes",
            gpus,
            "resources.gpus",
            have_gpus,
            AT_LEAST,
            _where(config, "graphgpo_ray_trainer.py:120", "ray_trainer.py:115"),
            via=f"{have_gpus // nodes(config)} on each of resources.nodes {nodes(config)}"
            if nodes(config) > 1
            else None,
        ),
        Demand(
            "rollout tensor parallel",
            "actor_rollout_ref.rollout.tensor_model_parallel_size",
            tp,
            "resources.gpus",
            gpus,
            DIVISOR,
            "verl/workers/fsdp_workers.py:402",
            via="trainer.n_gpus_per_node x trainer.nnodes",
        ),
        Demand(
            "train batch over the GPUs",
            "data.train_batch_size x actor_rollout_ref.rollout.n",
            int(values["data.train_batch_size"]) * rollout_n,
            "resources.gpus",
            gpus,
            DIVIDES,
            _where(config, "graphgpo_ray_trainer.py:490", "ray_trainer.py:470"),
            via="trainer.n_gpus_per_node x trainer.nnodes",
        ),
    ]
    if micro is not None:
        out.append(
            Demand(
                "actor mini-batch per GPU",
                "actor_rollout_ref.actor.ppo_mini_batch_size x actor_rollout_ref.rollout.n",
                int(values["actor_rollout_ref.actor.ppo_mini_batch_size"]) * rollout_n,
                "resources.gpus",
                gpus * int(micro),
                DIVIDES,
                "verl/workers/fsdp_workers.py:151, 159",
                via=f"{gpus} GPUs x actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu {micro}",
            )
        )
    heads = model_heads(config)
    if heads is not None:
        attention, kv = heads
        field = "backend.overrides.actor_rollout_ref.rollout.tensor_model_parallel_size"  # else the script's value
        out.append(
            Demand(
                "attention heads over the rollout's tensor parallel",
                "num_attention_heads (model config.json)",
                attention,
                field,
                tp,
                DIVIDES,
                "vLLM splits attention heads over tensor-parallel ranks",
            )
        )
        out.append(
            Demand(
                "KV heads over the rollout's tensor parallel",
                "num_key_value_heads (model config.json)",
                kv,
                field,
                tp,
                DIVIDES if tp <= kv else DIVISOR,
                "vLLM splits KV heads over tensor-parallel ranks, or replicates them when fewer",
            )
        )
    games = training_games(config)
    if games is not None:
        out.append(
            Demand(
                "ALFWorld games to train on",
                f"data_path of config_tw.yaml ($ALFWORLD_DATA/{JSON_DIR}/{SPLITS['train']})",
                1,
                "data.eval.path",
                games,
                AT_LEAST,
                "config_tw.yaml:2; with no game there, a training env's first reset never returns",
                via=f"game directories in {JSON_DIR}/{SPLITS['train']}",
            )
        )
    return out
