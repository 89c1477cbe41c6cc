"""Outcomes per validation episode from verl-agent, without editing its files (docs/design.md §3.4).

Installed by the shared startup sitecustomize.py (agentrepro/hooks/startup) in every process of a job, which
AGENTREPRO_STARTUP tells to, with AGENTREPRO_VERL_OUT naming the run directory; AGENTREPRO_VERL_PANEL names the
panel (a JSON list of {task_id, task_hash, category, game_file}; a relative game_file is taken under
$ALFWORLD_DATA). Self-contained: the job's image needs only this folder.

An import hook wraps these names right after their module runs (before any `from m import name` binds
them), at verl-agent 20bd331bdbc9026a5668e11362178e10ab7400c8 (read from the public mirror
zzj1111/alfworldauto). Each wrapper first checks the name's signature and refuses to start on a mismatch:

* `AlfworldEnvs.__init__` (recipe/GraphGPO/alfworld_envs.py:233 and agent_system/environments/env_package/
  alfworld/envs.py:86): for validation envs (is_train false) with a panel, worker i plays only game i of
  the panel (its environment's game list is that one file), instead of its own seeded shuffle of the split.
* `_process_batch` of AlfWorldEnvironmentManager (recipe/GraphGPO/graphgpo_env_manager.py:297,
  agent_system/environments/env_manager.py:214): while validating, it records env i's episode: won at the
  last active step, turns = active steps, tokens = response tokens of those steps, the game file seen.
* `RayPPOTrainer._validate` (recipe/GraphGPO/graphgpo_ray_trainer.py:709, verl/trainer/ppo/ray_trainer.py:689):
  its global step names the file: RUN_DIR/verl_validation/<step>.jsonl, one line per episode.
* `Tracking.log` (verl/utils/tracking.py:127): every logged metrics dict is appended to
  RUN_DIR/verl_metrics.jsonl as {"step": N, "data": {...}} (verl-agent has no file logger).
* `RayPPOTrainer.fit` and the module function `compute_advantage` of both trainers (graphgpo_ray_trainer.py:1027
  and :249, ray_trainer.py:1007 and :244): the step rows and advantages of the steps in AGENTREPRO_STEP_ROWS,
  for the parity certificate (agentrepro_verl_rows.py).
* `RayPPOTrainer._save_checkpoint` of both trainers (graphgpo_ray_trainer.py:931, ray_trainer.py:911): after
  checkpoint N is saved, older checkpoints lose their training state, their Hugging Face copies stay, as
  AGENTREPRO_VERL_PRUNE says (agentrepro_verl_prune.py).

Signatures are compared without annotations (the recipe annotates `data: DataProto`).
"""

from __future__ import annotations

import functools
import json
import os
import sys
import threading
from typing import Any

try:  # by its own name inside the framework's processes (the hooks folder is on their PYTHONPATH)
    import agentrepro_import_patch
    import agentrepro_signature
    import agentrepro_verl_prune
    import agentrepro_verl_rows
except ModuleNotFoundError:  # as part of the agentrepro package (tests, the harness)
    from agentrepro.backends.verl_agent.hooks import agentrepro_verl_prune, agentrepro_verl_rows
    from agentrepro.hooks import agentrepro_import_patch, agentrepro_signature

COMMIT = "20bd331bdbc9026a5668e11362178e10ab7400c8"
ENVS_INIT = "(self, alf_config_path, seed, env_num, group_n, resources_per_worker, is_train=True, env_kwargs={})"
PROCESS_BATCH = "(self, batch_idx, total_batch_list, total_infos, success)"
ADVANTAGE = (
    "(data, adv_estimator, gamma=1.0, lam=1.0, num_repeat=1, multi_turn=False, norm_adv_by_std_in_grpo=True, "
    "step_advantage_w=1.0, {}gigpo_mode='mean_std_norm', {}**kwargs)"
)
# module -> {qualified name: signature at COMMIT}
PATCHES = {
    "recipe.GraphGPO.alfworld_envs": {
        "AlfworldEnvs.__init__": ENVS_INIT,
        "AlfworldWorker.__init__": "(self, config, seed, base_env)",
    },
    "agent_system.environments.env_package.alfworld.envs": {
        "AlfworldEnvs.__init__": ENVS_INIT,
        "AlfworldWorker.__init__": "(self, config, seed, base_env)",
    },
    "recipe.GraphGPO.graphgpo_env_manager": {"AlfWorldEnvironmentManager._process_batch": PROCESS_BATCH},
    "agent_system.environments.env_manager": {"AlfWorldEnvironmentManager._process_batch": PROCESS_BATCH},
    "recipe.GraphGPO.graphgpo_ray_trainer": {
        "RayPPOTrainer._validate": "(self)",
        "RayPPOTrainer.fit": "(self)",
        "RayPPOTrainer._save_checkpoint": "(self)",
        "compute_advantage": ADVANTAGE.format("episode_advantage_w=0.0, ", ""),
    },
    "verl.trainer.ppo.ray_trainer": {
        "RayPPOTrainer._validate": "(self)",
        "RayPPOTrainer.fit": "(self)",
        "RayPPOTrainer._save_checkpoint": "(self)",
        "compute_advantage": ADVANTAGE.format("", "gigpo_enable_similarity=False, gigpo_similarity_thresh=0.95, "),
    },
    "verl.utils.tracking": {"Tracking.log": "(self, data, step, backend=None)"},
}
_state = threading.local()


def out_dir() -> str:
    return os.environ["AGENTREPRO_VERL_OUT"]


def panel() -> list[dict] | None:
    path = os.environ.get("AGENTREPRO_VERL_PANEL")
    if not path:
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def game_path(entry: dict) -> str:
    game = entry.get("game_file") or entry["task_id"]
    return game if os.path.isabs(game) else os.path.join(os.environ.get("ALFWORLD_DATA", ""), game)


def _resolve(module, qualname: str):
    owner = module
    *parents, name = qualname.split(".")
    for part in parents:
        owner = getattr(owner, part)
    return owner, name, getattr(owner, name)


def check(module, qualname: str, expected: str) -> None:
    """Refuse to run against a framework whose patched name or signature is not the one of COMMIT."""
    try:
        _, _, target = _resolve(module, qualname)
    except AttributeError:
        raise RuntimeError(
            f"agentrepro: {module.__name__} has no {qualname} (integration written for verl-agent {COMMIT[:7]})"
        ) from None
    found = agentrepro_signature.bare(target)
    if found != expected:
        raise RuntimeError(
            f"agentrepro: {module.__name__}.{qualname}{found} is not {expected} of verl-agent {COMMIT[:7]}"
        )


def _wrap(module, qualname: str, make):
    owner, name, original = _resolve(module, qualname)
    wrapper = functools.wraps(original)(make(original))
    setattr(owner, name, wrapper)


def patch_envs(module) -> None:
    worker_class: Any = module.AlfworldWorker

    class PinnedWorker(worker_class):
        """Validation worker i (created with seed i) plays only game i of the panel."""

        def __init__(self, config, seed, base_env):
            games = panel()
            base_env.game_files = [game_path(games[seed])]
            base_env.num_games = 1
            super().__init__(config, seed, base_env)

    def make(original):
        def __init__(self, alf_config_path, seed, env_num, group_n, resources_per_worker, is_train=True, env_kwargs={}):  # noqa: B006
            games = panel()
            if is_train or games is None:
                return original(
                    self, alf_config_path, seed, env_num, group_n, resources_per_worker, is_train, env_kwargs
                )
            if env_num * group_n != len(games):
                raise RuntimeError(
                    f"agentrepro: {env_num * group_n} validation envs for a panel of {len(games)} games "
                    "(data.val_batch_size must equal eval.tasks)"
                )
            module.AlfworldWorker = PinnedWorker  # looked up by name when the workers are created
            try:  # seed 0: worker i gets seed 0 + i (one game each: the seed no longer orders anything)
                return original(self, alf_config_path, 0, env_num, group_n, resources_per_worker, is_train, env_kwargs)
            finally:
                module.AlfworldWorker = worker_class

        return __init__

    _wrap(module, "AlfworldEnvs.__init__", make)


def _tokens(step_row: dict) -> int | None:
    responses, mask = step_row.get("responses"), step_row.get("attention_mask")
    if responses is None or mask is None:
        return None
    length = responses.shape[-1]
    return int(mask[-length:].sum())


def patch_manager(module) -> None:
    def make(original):
        def _process_batch(self, batch_idx, total_batch_list, total_infos, success):
            result = original(self, batch_idx, total_batch_list, total_infos, success)
            episodes = getattr(_state, "episodes", None)
            if episodes is not None:
                steps = [
                    (row, info)
                    for row, info in zip(total_batch_list[batch_idx], total_infos[batch_idx])
                    if row["active_masks"]
                ]
                tokens = [_tokens(row) for row, _ in steps]
                last = steps[-1][1] if steps else {}
                episodes[batch_idx] = {
                    "won": bool(last.get("won", False)),
                    "turns": len(steps),
                    "tokens": None if None in tokens else sum(tokens),
                    "gamefile": last.get("extra.gamefile"),
                }
            return result

        return _process_batch

    _wrap(module, "AlfWorldEnvironmentManager._process_batch", make)


def episode_lines(episodes: dict[int, dict], games: list[dict] | None) -> list[dict]:
    """One line per validation env, in env order, joined to the panel entry the env was pinned to."""
    lines = []
    for index in sorted(episodes):
        episode = dict(episodes[index])
        if games is not None:
            entry = games[index]
            seen = episode.get("gamefile")
            if seen is not None and os.path.normpath(seen) != os.path.normpath(game_path(entry)):
                raise RuntimeError(
                    f"agentrepro: validation env {index} played {seen}, not its pinned game {game_path(entry)}"
                )
            episode.update(task_id=entry["task_id"], task_hash=entry.get("task_hash"), category=entry.get("category"))
        else:
            episode.update(task_id=episode.get("gamefile"))
        episode["reward"] = 10.0 * episode["won"]  # the ALFWorld text reward (alfworld_envs.py compute_reward)
        lines.append(episode)
    return lines


def patch_trainer(module) -> None:
    def make(original):
        def _validate(self):
            _state.episodes = {}
            try:
                metrics = original(self)
                lines = episode_lines(_state.episodes, panel())
            finally:
                _state.episodes = None
            folder = os.path.join(out_dir(), "verl_validation")
            os.makedirs(folder, exist_ok=True)
            path = os.path.join(folder, f"{self.global_steps}.jsonl")
            with open(path + ".tmp", "w", encoding="utf-8") as f:
                f.writelines(json.dumps(line, sort_keys=True) + "\n" for line in lines)
            os.replace(path + ".tmp", path)
            return metrics

        return _validate

    _wrap(module, "RayPPOTrainer._validate", make)
    _wrap(module, "RayPPOTrainer.fit", agentrepro_verl_rows.wrap_fit)
    _wrap(module, "compute_advantage", agentrepro_verl_rows.wrap_compute_advantage)
    _wrap(module, "RayPPOTrainer._save_checkpoint", agentrepro_verl_prune.wrap_save_checkpoint)


def _number(value):
    try:
        return float(value) if not isinstance(value, (int, float)) else value
    except (TypeError, ValueError):
        return None


def patch_tracking(module) -> None:
    def make(original):
        def log(self, data, step, backend=None):
            record = {k: _number(v) for k, v in data.items() if _number(v) is not None}
            with open(os.path.join(out_dir(), "verl_metrics.jsonl"), "a", encoding="utf-8") as f:
                f.write(json.dumps({"step": int(step), "data": record}) + "\n")
            return original(self, data, step, backend)

        return log

    _wrap(module, "Tracking.log", make)


PATCHERS = {
    "recipe.GraphGPO.alfworld_envs": patch_envs,
    "agent_system.environments.env_package.alfworld.envs": patch_envs,
    "recipe.GraphGPO.graphgpo_env_manager": patch_manager,
    "agent_system.environments.env_manager": patch_manager,
    "recipe.GraphGPO.graphgpo_ray_trainer": patch_trainer,
    "verl.trainer.ppo.ray_trainer": patch_trainer,
    "verl.utils.tracking": patch_tracking,
}


def apply(module) -> None:
    """Check, then wrap, the names of `module` listed in PATCHES."""
    for qualname, signature in PATCHES[module.__name__].items():
        check(module, qualname, signature)
    PATCHERS[module.__name__](module)


FINDER = agentrepro_import_patch.PatchOnImport(dict.fromkeys(PATCHES, apply))  # each patched module, as it runs


def install() -> None:
    if FINDER not in sys.meta_path:
        sys.meta_path.insert(0, FINDER)
