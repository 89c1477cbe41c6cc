"""A STAND-IN verl-agent module tree for the tests of the verl-agent integration (hooks/agentrepro_verl_*.py): the
modules, classes, names and signatures of verl-agent @ 20bd331 (tests/fixtures/frameworks/verl-agent-20bd331.patched.json),
with bodies that only do what the integration relies on (no verl code: behaviour only).

`stand_in_tree(root)` writes it under root, with two drivers: driver.py (validation with a panel, a metrics log)
and save_driver.py ROOT STEP... (a trainer whose `_save_checkpoint` writes verl's files of each step under ROOT,
trainer.default_local_dir: SAVED inside global_step_<N>/, then latest_checkpointed_iteration.txt).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

# what verl-agent's _save_checkpoint leaves in global_step_<N>/ with two FSDP ranks, hf_model and a critic
# (tests/fixtures/frameworks/verl-agent-20bd331.outputs.json, checkpoint.layout)
SAVED = [
    "actor/model_world_size_2_rank_0.pt",
    "actor/model_world_size_2_rank_1.pt",
    "actor/optim_world_size_2_rank_0.pt",
    "actor/optim_world_size_2_rank_1.pt",
    "actor/extra_state_world_size_2_rank_0.pt",
    "actor/extra_state_world_size_2_rank_1.pt",
    "actor/config.json",
    "actor/huggingface/config.json",
    "actor/huggingface/model.safetensors",
    "actor/huggingface/tokenizer.json",
    "critic/model_world_size_2_rank_0.pt",
    "data.pt",
]


def saved_text(name: str, step: int) -> str:
    """The stand-in content of checkpoint file `name` of `step`."""
    return f"{name} of step {step}"


RAY = """
import copy
def remote(**resources):
    def wrap(cls):
        class Handle:
            @staticmethod
            def remote(*args):   # a Ray actor gets pickled copies of its arguments
                return cls(*copy.deepcopy(args))
        return Handle
    return wrap
"""
ENVS = """
import ray
class BaseEnv:
    def __init__(self, games):
        self.game_files, self.num_games = list(games), len(games)
    def init_env(self, batch_size):
        return Env(list(self.game_files))
class Env:
    def __init__(self, games):
        self.games = games
    def seed(self, seed):
        self.order = self.games[seed % len(self.games):] + self.games[:seed % len(self.games)]
class AlfworldWorker:
    def __init__(self, config, seed, base_env):
        self.env = base_env.init_env(batch_size=1)
        self.env.seed(seed)
    def game(self):
        return self.env.order[0]
class AlfworldEnvs:
    def __init__(self, alf_config_path, seed, env_num, group_n, resources_per_worker, is_train=True, env_kwargs={}):
        base_env = BaseEnv(alf_config_path)
        env_worker = ray.remote(**resources_per_worker)(AlfworldWorker)
        self.workers = [env_worker.remote({}, seed + (i // group_n), base_env) for i in range(env_num * group_n)]
"""
MANAGER = """
class AlfWorldEnvironmentManager:
    def __init__(self, envs):
        self.envs = envs
    def success_evaluator(self, total_infos, total_batch_list, **kwargs):
        success = {"success_rate": []}
        for i in range(len(total_batch_list)):
            self._process_batch(i, total_batch_list, total_infos, success)
        return success
    def _process_batch(self, batch_idx, total_batch_list, total_infos, success):
        for i in reversed(range(len(total_batch_list[batch_idx]))):
            if total_batch_list[batch_idx][i]["active_masks"]:
                success["success_rate"].append(float(total_infos[batch_idx][i]["won"]))
                return
"""
TRAINER = """
import json, os
import numpy as np
class DataProto:   # verl.protocol.DataProto: .batch holds tensors (numpy arrays here), .non_tensor_batch numpy object arrays
    def __init__(self, batch, non_tensor_batch):
        self.batch, self.non_tensor_batch = batch, non_tensor_batch
def compute_advantage(data, adv_estimator, gamma=1.0, lam=1.0, num_repeat=1, multi_turn=False, norm_adv_by_std_in_grpo=True, step_advantage_w=1.0, episode_advantage_w=0.0, gigpo_mode="mean_std_norm", **kwargs):
    values = np.array(json.loads(open(os.environ["STANDIN_ADVANTAGES"]).read()))   # one scalar per row, on every response token
    data.batch["advantages"] = values[:, None] * data.batch["response_mask"]
    return data
SAVED = SAVED_NAMES
class RayPPOTrainer:
    def __init__(self, val_envs, config=None):
        self.val_envs, self.config, self.global_steps = val_envs, config, 0
    def _save_checkpoint(self):   # global_step_N/ (actor shards, the HF copy, critic, data.pt), then the tracker
        root = self.config.trainer.default_local_dir
        for name in SAVED:
            path = os.path.join(root, f"global_step_{self.global_steps}", name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(f"{name} of step {self.global_steps}")
        with open(os.path.join(root, "latest_checkpointed_iteration.txt"), "w") as f:
            f.write(str(self.global_steps))
    def fit(self):   # replays one rollout batch (STANDIN_BATCH: step rows) at steps 1 and 2, as the recipe's loop calls compute_advantage
        rows = json.loads(open(os.environ["STANDIN_BATCH"]).read())
        columns = {"uid": "group", "traj_uid": "traj", "anchor_obs": "state", "next_obs": "next_state", "rewards": "reward",
                   "episode_rewards": "episode_reward", "is_action_valid": "valid"}
        self.global_steps = 1
        for _ in range(2):
            non = {name: np.array([r[key] for r in rows], dtype=object) for name, key in columns.items()}
            non["active_masks"] = np.ones(len(rows), dtype=bool)
            mask = np.array([[1.0] * (1 + i % 4) + [0.0] * (4 - i % 4) for i in range(len(rows))])   # right-padded responses
            compute_advantage(DataProto({"response_mask": mask}, non), "GraphGPO", gamma=0.1, epsilon=1e-6)
            self.global_steps += 1
    def _validate(self):
        rows, infos = [], []
        for i, worker in enumerate(self.val_envs.envs.workers):   # env i: i + 1 active turns of 4 tokens, won if i is even
            turns = i + 1
            rows.append([{"active_masks": t < turns, "responses": np.zeros(6), "attention_mask": np.array([1] * 5 + [1, 1, 1, 1, 0, 0])}
                         for t in range(turns + 1)])
            infos.append([{"won": t == turns - 1 and i % 2 == 0, "extra.gamefile": worker.game()} for t in range(turns + 1)])
        success = self.val_envs.success_evaluator(total_infos=infos, total_batch_list=rows)
        return {"val/success_rate": float(np.mean(success["success_rate"]))}
"""
TRACKING = """
class Tracking:
    def log(self, data, step, backend=None):
        print("step:%d" % step)
"""
DRIVER = """
from recipe.GraphGPO.graphgpo_ray_trainer import RayPPOTrainer   # bound by name: the hook must patch before this
from recipe.GraphGPO.alfworld_envs import AlfworldEnvs
from recipe.GraphGPO.graphgpo_env_manager import AlfWorldEnvironmentManager
from verl.utils.tracking import Tracking
import sys
split = sys.argv[1:]
train = AlfworldEnvs(split, 0, 2, 2, {}, is_train=True)
assert [w.game() for w in train.workers] == [split[0], split[0], split[1], split[1]]   # training envs untouched
trainer = RayPPOTrainer(AlfWorldEnvironmentManager(AlfworldEnvs(split, 1000, 3, 1, {}, is_train=False)))
trainer.global_steps = 5
metrics = trainer._validate()
Tracking().log(data={**metrics, "timing_s/step": 2.5, "note": "text"}, step=5)
"""


SAVE_DRIVER = """
from recipe.GraphGPO.graphgpo_ray_trainer import RayPPOTrainer
import sys, types
trainer = RayPPOTrainer(None, types.SimpleNamespace(trainer=types.SimpleNamespace(default_local_dir=sys.argv[1])))
for step in sys.argv[2:]:
    trainer.global_steps = int(step)
    trainer._save_checkpoint()
"""


def stand_in_tree(root: Path) -> None:
    files = {
        "ray.py": RAY,
        "recipe/__init__.py": "",
        "recipe/GraphGPO/__init__.py": "",
        "recipe/GraphGPO/alfworld_envs.py": ENVS,
        "recipe/GraphGPO/graphgpo_env_manager.py": MANAGER,
        "recipe/GraphGPO/graphgpo_ray_trainer.py": TRAINER,
        "verl/__init__.py": "",
        "verl/utils/__init__.py": "",
        "verl/utils/tracking.py": TRACKING,
        "driver.py": DRIVER,
        "save_driver.py": SAVE_DRIVER,
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text).replace("SAVED_NAMES", repr(SAVED)))
