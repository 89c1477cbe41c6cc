"""What one builtin training step records (docs/design.md §3.3): its metrics.jsonl row and its batch dump.

* `COUNTERS` and `count(counters, ro, mask)`: the run's cumulative environment steps, episodes, generated and
  trained tokens (checkpoints carry them, with `wall_s`), advanced by one step's rollout.
* `metrics_row(step, counters, ro, stats, lr, memory)`: the step's metrics row up to its memory use; the loop
  adds `wall_s` and `gpu_hours` after the checkpoint, whose time they include.
* `memory_use(device)`: the step's peak GPU memory and the process's RSS; `device_memory(device)`: what the
  update's passes may still take (trainer/memory.py sizes them from it; on the CPU, cgroups.host_memory).
* `dump_rows(ro, rows, advantages, turn_advantages)`: batches/step<N>.jsonl, the step rows with each turn's advantage.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import psutil
import torch

from agentrepro.cgroups import host_memory
from agentrepro.trainer.credit import ordered_turns
from agentrepro.trainer.policy import gpu_share
from agentrepro.trainer.rollout import Rollout

COUNTERS = ("env_steps", "episodes", "tokens_generated", "tokens_trained")


def count(counters: dict[str, Any], ro: Rollout, mask: torch.Tensor) -> None:
    """Add one step's rollout `ro` (with `mask`, its trained tokens) to the run's `counters`, in place."""
    counters["env_steps"] += sum(len(t.actions) for t in ro.turns)
    counters["episodes"] += ro.n_traj
    counters["tokens_generated"] += ro.generated_tokens()
    counters["tokens_trained"] += int(mask.sum())


def memory_use(device: torch.device) -> dict[str, float | None]:
    """Peak GPU memory allocated by torch since the step began (GiB; None on the CPU) and the process's RSS (GiB)."""
    gpu = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None
    return {"gpu_peak_mem_gb": gpu, "cpu_rss_gb": psutil.Process().memory_info().rss / 2**30}


def device_memory(device: torch.device) -> tuple[int, int]:
    """(bytes torch can still use on `device`, its total). On CUDA: free plus torch's own cached blocks, and under a
    share of 1/K (GPU_SHARE) at most that share less what this process holds, the total being the share. On the CPU:
    the host's available memory, or less where a cgroup (a SLURM job's, a container's) limits this process."""
    if device.type != "cuda":
        return host_memory()
    free, total = torch.cuda.mem_get_info(device)
    allocated = torch.cuda.memory_allocated(device)
    available = free + torch.cuda.memory_reserved(device) - allocated
    share = gpu_share()
    if share > 1:
        total //= share
        available = min(available, total - allocated)
    return available, total


def metrics_row(
    step: int, counters: dict[str, Any], ro: Rollout, stats: dict[str, Any], lr: float, memory: dict[str, float | None]
) -> dict[str, Any]:
    """The metrics row of `step`: cumulative counters, the rollout's success, reward, valid actions and turns,
    the update's `stats`, the learning rate and `memory` (`memory_use`, the largest over ranks)."""
    successes = {t.traj for t in ro.turns if t.success}
    return {
        "step": step,
        **{k: counters[k] for k in COUNTERS},
        "train_success_rate": len(successes) / ro.n_traj,
        "reward_mean": float(np.mean([sum(t.reward for t in ro.traj_turns(i)) for i in range(ro.n_traj)])),
        "valid_action_ratio": float(np.mean([t.valid for t in ro.turns])),
        "turns_mean": len(ro.turns) / ro.n_traj,
        "loss_policy": stats["loss_policy"],
        "loss_value": stats.get("loss_value"),
        "kl": stats.get("kl"),
        "entropy": stats["entropy"],
        "grad_norm": stats["grad_norm"],
        "clipfrac": stats["clipfrac"],
        "lr": lr,
        **memory,
    }


def dump_rows(ro: Rollout, rows: list[dict], advantages: torch.Tensor, turn_advantages: Any) -> list[dict]:
    """The step rows `rows` of `ro`, each with its turn's `advantage`: the estimator's per-turn values when it
    gives them (`turn_advantages`), else the token-level advantage at the turn's first token."""
    dump = [dict(r) for r in rows]
    per_turn = (
        turn_advantages
        if turn_advantages is not None
        else [float(advantages[t.row, t.start]) for t in ordered_turns(ro)]
    )
    for r, a in zip(dump, per_turn):
        r["advantage"] = float(a)
    return dump
