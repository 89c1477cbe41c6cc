"""verl-agent's step rows and advantages at the steps the run config names (agentrepro_step_rows.py).

Wrapped at verl-agent 20bd331bdbc9026a5668e11362178e10ab7400c8 (zzj1111/alfworldauto), by
agentrepro_verl_hook.py, which checks each name's signature first:

* `RayPPOTrainer.fit` (recipe/GraphGPO/graphgpo_ray_trainer.py:1027, verl/trainer/ppo/ray_trainer.py:1007):
  remembers the trainer while its loop runs, for its `global_steps` (1 at the first update).
* the module function `compute_advantage` (recipe/GraphGPO/graphgpo_ray_trainer.py:249 for GraphGPO and
  graph-only; verl/trainer/ppo/ray_trainer.py:244 for GRPO and GiGPO). `fit` calls it by its global name on
  the driver (graphgpo_ray_trainer.py:1207, ray_trainer.py:1221) after the step rewards, the invalid-action
  penalty and `token_level_rewards` are in the batch, and before `adjust_batch`/`_balance_batch` reorder it.
  The wrapper calls the original and then, at a named step, writes one row per batch row (one agent turn):

  group = `uid`, traj = `traj_uid`, turn = the row's position within its trajectory in batch order (the
  rollout emits turns in order and the recipe reads no turn index), state = `anchor_obs`, next_state =
  `next_obs` (the GraphGPO rollout writes 'success' on the winning turn, rollout_loop.py:283-292; verl's own
  rollout keeps no next_obs: then the next row's anchor_obs, or 'success' / the row's own state at the end
  of a won / lost trajectory; GRPO and GiGPO do not read it), reward = `rewards`, episode_reward =
  `episode_rewards`, valid = `is_action_valid` (true where the batch has none), success = episode_rewards > 0
  (core_graph.py find_success_states_per_task), active = `active_masks`, advantage = the row's advantage on
  its first response token (every response token holds the same value; tests/fixtures/advantages/README.md).
  A state that is not a string is written as its repr (the recipe hashes it with to_hashable).
"""

from __future__ import annotations

import itertools
import threading

try:  # by its own name inside the framework's processes (the hooks folder is on their PYTHONPATH)
    import agentrepro_step_rows as step_rows
except ModuleNotFoundError:  # as part of the agentrepro package (tests, the harness)
    from agentrepro.hooks import agentrepro_step_rows as step_rows

_state = threading.local()


def _key(value) -> str:
    return value if isinstance(value, str) else repr(value)


def _column(non_tensor: dict, name: str, n: int, default=None) -> list:
    if name in non_tensor:
        return list(non_tensor[name])
    if default is None:
        raise RuntimeError(f"agentrepro: the batch has no non-tensor column {name!r} (step rows at verl-agent 20bd331)")
    return [default] * n


def row_advantage(advantages: list[float], mask: list[float]):
    """The advantage on the row's first response token (None for a row without one)."""
    return next((float(a) for a, m in zip(advantages, mask) if m), None)


def batch_rows(data) -> list[dict]:
    """The step rows of a DataProto after compute_advantage (see the module docstring)."""
    non = data.non_tensor_batch
    n = len(non["uid"])
    uid, traj = _column(non, "uid", n), _column(non, "traj_uid", n)
    anchor = [_key(x) for x in _column(non, "anchor_obs", n)]
    rewards, episode = _column(non, "rewards", n), _column(non, "episode_rewards", n)
    valid, active = _column(non, "is_action_valid", n, True), _column(non, "active_masks", n, True)
    advantages, masks = data.batch["advantages"].tolist(), data.batch["response_mask"].tolist()
    positions: dict[str, list[int]] = {}
    for i, t in enumerate(traj):
        positions.setdefault(str(t), []).append(i)
    nxt: list[str | None]
    if "next_obs" in non:
        nxt = [_key(x) for x in non["next_obs"]]
    else:
        nxt = [None] * n
        for idx in positions.values():
            for a, b in itertools.pairwise(idx):
                nxt[a] = anchor[b]
            last = idx[-1]
            nxt[last] = step_rows.GOAL if float(episode[last]) > 0 else anchor[last]
    turn = [0] * n
    for idx in positions.values():
        for k, i in enumerate(idx):
            turn[i] = k
    return [
        {
            "group": str(uid[i]),
            "traj": str(traj[i]),
            "turn": turn[i],
            "state": anchor[i],
            "next_state": nxt[i],
            "reward": float(rewards[i]),
            "episode_reward": float(episode[i]),
            "valid": bool(valid[i]),
            "success": float(episode[i]) > 0,
            "active": bool(active[i]),
            "advantage": row_advantage(advantages[i], masks[i]),
        }
        for i in range(n)
    ]


def wrap_fit(original):
    def fit(self):
        _state.trainer = self
        try:
            return original(self)
        finally:
            _state.trainer = None

    return fit


def wrap_compute_advantage(original):
    def compute_advantage(data, adv_estimator, *args, **kwargs):
        result = original(data, adv_estimator, *args, **kwargs)
        trainer = getattr(_state, "trainer", None)
        steps = step_rows.wanted_steps()
        if trainer is not None and steps and int(trainer.global_steps) in steps:
            step = int(trainer.global_steps)
            try:
                rows = batch_rows(result)
            except Exception as exc:
                step_rows.write_error(step, f"{type(exc).__name__}: {exc}")
            else:
                step_rows.write(step, rows)
        return result

    return compute_advantage
