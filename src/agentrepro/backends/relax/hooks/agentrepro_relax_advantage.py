"""Relax GraphGPO recipe: its own custom advantage function, with the step rows of the named steps dumped.

`--agentic-custom-advantage-path` names `agentrepro_relax_advantage.compute_custom_advantage` (instead of the
recipe's `examples.graphgpo.custom_advantage.compute_custom_advantage`, `HANDOVER`) when the run config names
step rows (backends/relax/backend.py). It calls the recipe's function with the same argument and returns its result
unchanged, so training is exactly the recipe's; at the named steps it also appends the group's rows to the
run's `batches/step<N>.jsonl` (agentrepro_step_rows.py).

What Relax passes, read at redai-infra/Relax eaf262f (examples/graphgpo/custom_advantage.py): one call per
rollout group, `compute_custom_advantage(metadata_by_slot)`, a list with one mapping per trajectory (slot)
of {unit name `turn_NNN`: sample.metadata} (one unit per environment turn, so a variable number of rows per
trajectory); it returns one {unit name: advantage} per slot. The metadata fields used (its
_REQUIRED_FIELDS): rollout_group_id -> group, trajectory_id -> traj, turn_index -> turn, state_key -> state,
next_state_key -> next_state ('__GRAPHGPO_SUCCESS__', graph_credit.SUCCESS, becomes the step rows' goal
'success'), is_action_valid -> valid, success -> success; episode_reward = 10·success and reward = 10 on the
winning turn (the recipe's success_reward 10, fixed); the recipe's own episode_return and policy_version are
kept beside them. The harness step is policy_version (a decimal string as Relax stamps it, or an int) +
AGENTREPRO_POLICY_VERSION_OFFSET (backends/relax/recipe.py owns Relax's numbering).

Runs inside Relax's Ray processes: Python standard library only.
"""

from __future__ import annotations

import importlib
import os

try:  # by its own name inside the framework's processes (the hooks folder is on their PYTHONPATH)
    import agentrepro_signature
    import agentrepro_step_rows as step_rows
except ModuleNotFoundError:  # as part of the agentrepro package (tests, the harness)
    from agentrepro.hooks import agentrepro_signature
    from agentrepro.hooks import agentrepro_step_rows as step_rows

HANDOVER = "examples.graphgpo.custom_advantage.compute_custom_advantage"
SIGNATURE = "(metadata_by_slot)"  # examples/graphgpo/custom_advantage.py @ eaf262f, annotations aside
SUCCESS = "__GRAPHGPO_SUCCESS__"
SUCCESS_REWARD = 10.0
OFFSET = "AGENTREPRO_POLICY_VERSION_OFFSET"


def recipe_function():
    """The recipe's function, refused unless its parameters are the ones of eaf262f."""
    module_name, name = HANDOVER.rsplit(".", 1)
    function = getattr(importlib.import_module(module_name), name)
    found = agentrepro_signature.bare(function)
    if found != SIGNATURE:
        raise RuntimeError(f"agentrepro: {HANDOVER}{found} is not {SIGNATURE} of Relax eaf262f")
    return function


def group_rows(metadata_by_slot, result) -> list[dict]:
    """One step row per unit (turn), in the recipe's slot and unit order, with the advantage it returned."""
    rows = []
    for slot, advantages in zip(metadata_by_slot, result):
        for unit, meta in slot.items():
            success, goal = bool(meta["success"]), meta["next_state_key"] == SUCCESS
            rows.append(
                {
                    "group": str(meta["rollout_group_id"]),
                    "traj": str(meta["trajectory_id"]),
                    "turn": int(meta["turn_index"]),
                    "state": str(meta["state_key"]),
                    "next_state": step_rows.GOAL if goal else str(meta["next_state_key"]),
                    "reward": SUCCESS_REWARD if (success and goal) else 0.0,
                    "episode_reward": SUCCESS_REWARD * success,
                    "valid": bool(meta["is_action_valid"]),
                    "success": success,
                    "advantage": float(advantages[unit]),
                    "episode_return": float(meta["episode_return"]),
                    "policy_version": meta["policy_version"],
                    "unit": unit,
                }
            )
    return rows


def policy_version(value) -> int | None:
    """A row's policy_version as a number: Relax stamps str(weight_version) or str(start_rollout_id) (reward.py
    RewardWaitingGroup._resolved_policy_version at eaf262f); None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return int(value)
    return None


def compute_custom_advantage(metadata_by_slot):
    result = recipe_function()(metadata_by_slot)
    steps = step_rows.wanted_steps()
    if steps and metadata_by_slot:
        first = next(iter(metadata_by_slot[0].values()), None)
        version = policy_version(first.get("policy_version") if hasattr(first, "get") else None)
        if version is not None:
            step = version + int(os.environ.get(OFFSET, "0"))
            if step in steps:
                try:
                    rows = group_rows(metadata_by_slot, result)
                except Exception as exc:
                    step_rows.write_error(step, f"{type(exc).__name__}: {exc}")
                else:
                    step_rows.append(step, rows)
    return result
