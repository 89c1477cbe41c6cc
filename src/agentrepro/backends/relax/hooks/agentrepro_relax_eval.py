"""Relax eval-log hook: one outcome line per evaluation trajectory, then the recipe's own logger.

Relax calls `--custom-eval-rollout-log-function-path` as `fn(rollout_id, args, data, extra_metrics)` with
`data[dataset]["samples"]`: one Sample per exported row. The GraphGPO agent exports one row per turn, with
the trajectory in `sample.metadata` (trajectory_id, task_id = the game path relative to ALFWORLD_DATA,
turn_index, success, episode_return, truncated; redai-infra/Relax examples/graphgpo/rollout_agent.py), so
a trajectory is the rows sharing a trajectory_id. For each, this writes one JSON line to
`<args.save>/agentrepro_eval/<rollout_id>.jsonl`: task_id, the SHA-256 of that id, category (the ALFWorld task type:
the game's task directory name up to its first '-'), success, reward (episode_return), turns (its rows),
tokens (the sum of the rows' response_length), truncated, trajectory_id, dataset. The file is written
whole and renamed into place. Then the recipe's logger (`HANDOVER`) is called with the same arguments and
its return value is returned, so Relax's own evaluation metrics are exactly the recipe's.

Runs inside Relax's Ray processes: Python standard library only.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import math
import os
from pathlib import Path

HANDOVER = "examples.graphgpo.eval_logger.log_eval_rollout_data"
FOLDER = "agentrepro_eval"
TASK_TYPES = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)


def task_type(task_id: str) -> str:
    """ALFWorld's task type of a game path `<split>/<task dir>/<trial>/game.tw-pddl`."""
    parts = task_id.split("/")
    name = parts[-3].split("-", 1)[0] if len(parts) >= 3 else ""
    if name not in TASK_TYPES:
        raise ValueError(f"task {task_id!r}: its task directory does not start with an ALFWorld task type")
    return name


def _field(metadata: dict, key: str, context: str):
    if key not in metadata:
        raise ValueError(f"{context}: metadata has no {key!r}")
    return metadata[key]


def trajectories(dataset: str, samples) -> list[dict]:
    """The turn rows of one dataset -> one record per trajectory, in order of first appearance."""
    by_id: dict = {}
    for index, sample in enumerate(samples):
        context = f"{dataset} sample {index}"
        metadata = getattr(sample, "metadata", None)
        if not isinstance(metadata, dict):
            raise ValueError(f"{context}: metadata must be a mapping")
        by_id.setdefault(_field(metadata, "trajectory_id", context), []).append((sample, metadata, context))
    records = []
    for trajectory_id, rows in by_id.items():
        context = f"{dataset} trajectory {trajectory_id!r}"
        task_ids = {_field(m, "task_id", c) for _, m, c in rows}
        successes = {_field(m, "success", c) for _, m, c in rows}
        returns = {_field(m, "episode_return", c) for _, m, c in rows}
        turns = sorted(_field(m, "turn_index", c) for _, m, c in rows)
        if len(task_ids) != 1 or len(successes) != 1 or len(returns) != 1:
            raise ValueError(f"{context}: task_id, success and episode_return must be the same on every turn")
        (task_id,), (success,), (reward,) = task_ids, successes, returns
        if not isinstance(success, bool) or not isinstance(reward, (int, float)) or not math.isfinite(reward):
            raise ValueError(f"{context}: success must be a boolean and episode_return a finite number")
        if turns != list(range(len(rows))):
            raise ValueError(f"{context}: turn_index values {turns} are not 0..{len(rows) - 1}")
        tokens = sum(int(sample.response_length) for sample, _, _ in rows)
        records.append(
            {
                "dataset": dataset,
                "trajectory_id": str(trajectory_id),
                "task_id": task_id,
                "task_id_sha256": hashlib.sha256(task_id.encode()).hexdigest(),
                "category": task_type(task_id),
                "success": success,
                "reward": float(reward),
                "turns": len(rows),
                "tokens": tokens,
                "truncated": any(bool(m.get("truncated")) for _, m, _ in rows),
            }
        )
    return records


def write_outcomes(rollout_id: int, args, data) -> Path:
    records = []
    for dataset, block in data.items():
        samples = block.get("samples") if isinstance(block, dict) else None
        if not samples:
            raise ValueError(f"eval dataset {dataset!r} has no samples: outcomes per trajectory need them")
        records += trajectories(dataset, samples)
    folder = Path(args.save) / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{int(rollout_id)}.jsonl"
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as fh:
        for record in records:
            fh.write(json.dumps({"rollout_id": int(rollout_id), **record}, sort_keys=True) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return path


def log_eval_rollout_data(rollout_id, args, data, extra_metrics=None):
    """Write the trajectories, then return whatever the recipe's own eval logger returns."""
    write_outcomes(rollout_id, args, data)
    module, _, name = HANDOVER.rpartition(".")
    return getattr(importlib.import_module(module), name)(rollout_id, args, data, extra_metrics)
