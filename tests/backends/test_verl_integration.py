"""The verl-agent outcome integration (agentrepro/hooks: verl_site/sitecustomize.py and agentrepro_verl_hook.py) driven through its real entry (sitecustomize on
PYTHONPATH, switched on by AGENTREPRO_VERL_OUT) against a STAND-IN module tree: the modules, classes, names and
signatures of verl-agent @ 20bd331 (tests/fixtures/frameworks/verl-agent-20bd331.patched.json), with bodies that only
do what the integration relies on. It cannot run against the real verl here (no GPU stack)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from agentrepro.backends import outcomes, verl_agent

FACTS = json.loads((Path(__file__).parents[1] / "fixtures" / "frameworks" / "verl-agent-20bd331.patched.json").read_text())
from agentrepro.hooks import agentrepro_verl_hook as hook  # noqa: E402

RAY = '''
import copy
def remote(**resources):
    def wrap(cls):
        class Handle:
            @staticmethod
            def remote(*args):   # a Ray actor gets pickled copies of its arguments
                return cls(*copy.deepcopy(args))
        return Handle
    return wrap
'''
ENVS = '''
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
'''
MANAGER = '''
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
'''
TRAINER = '''
import json, os
import numpy as np
class DataProto:   # verl.protocol.DataProto: .batch holds tensors (numpy arrays here), .non_tensor_batch numpy object arrays
    def __init__(self, batch, non_tensor_batch):
        self.batch, self.non_tensor_batch = batch, non_tensor_batch
def compute_advantage(data, adv_estimator, gamma=1.0, lam=1.0, num_repeat=1, multi_turn=False, norm_adv_by_std_in_grpo=True, step_advantage_w=1.0, episode_advantage_w=0.0, gigpo_mode="mean_std_norm", **kwargs):
    values = np.array(json.loads(open(os.environ["STANDIN_ADVANTAGES"]).read()))   # one scalar per row, on every response token
    data.batch["advantages"] = values[:, None] * data.batch["response_mask"]
    return data
class RayPPOTrainer:
    def __init__(self, val_envs):
        self.val_envs, self.global_steps = val_envs, 0
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
'''
TRACKING = '''
class Tracking:
    def log(self, data, step, backend=None):
        print("step:%d" % step)
'''
DRIVER = '''
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
'''


def stand_in_tree(root: Path) -> None:
    files = {"ray.py": RAY, "recipe/__init__.py": "", "recipe/GraphGPO/__init__.py": "", "recipe/GraphGPO/alfworld_envs.py": ENVS,
             "recipe/GraphGPO/graphgpo_env_manager.py": MANAGER, "recipe/GraphGPO/graphgpo_ray_trainer.py": TRAINER,
             "verl/__init__.py": "", "verl/utils/__init__.py": "", "verl/utils/tracking.py": TRACKING, "driver.py": DRIVER}
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))


def test_patched_names_match_the_facts():
    """Every name the integration wraps, with its signature, is the one recorded at 20bd331, and nothing else is wrapped."""
    recorded = {(n["module"], n["qualname"]): n["signature"] for n in FACTS["names"]}
    shipped = {(module, name): sig for module, names in hook.PATCHES.items() for name, sig in names.items()}
    assert FACTS["commit"] == hook.COMMIT and shipped == recorded
    assert set(hook.PATCHERS) == set(hook.PATCHES)


def test_outcome_lines_from_the_stand_in_tree(tmp_path):
    """Validation env i plays panel game i (not its seeded shuffle); one line per episode lands in
    verl_validation/<step>.jsonl and converts to outcome rows that pass the outcomes schema and the panel; the
    metrics of Tracking.log land in verl_metrics.jsonl."""
    tree, run = tmp_path / "verl-agent", tmp_path / "run"
    tree.mkdir()
    run.mkdir()
    stand_in_tree(tree)
    games = ["valid_seen/pick_and_place_simple-1/trial_a/game.tw-pddl", "valid_seen/look_at_obj_in_light-2/trial_b/game.tw-pddl",
             "valid_seen/pick_two_obj_and_place-3/trial_c/game.tw-pddl"]
    split = [str(tmp_path / "data" / g) for g in reversed(games)] + [str(tmp_path / "data" / "valid_seen/other/game.tw-pddl")]
    config = {"study": "graphgpo-alfworld", "method": "graphgpo", "seed": 0, "backend": {"name": "verl-agent"},
              "eval": {"task_panel": [{"task_id": g, "task_hash": f"{i:064x}", "category": g.split("/")[1].split("-")[0]}
                                      for i, g in enumerate(games)]}}
    env = {**verl_agent.integration_env(run, panel_file=verl_agent.write_panel(config, run)),
           "ALFWORLD_DATA": str(tmp_path / "data"), "PATH": "/usr/bin:/bin"}
    env["PYTHONPATH"] += f":{tree}"   # the job's PYTHONPATH is the integration; the stand-in tree plays the checkout
    result = subprocess.run([sys.executable, "driver.py", *split], cwd=tree, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(x) for x in (run / "verl_validation" / "5.jsonl").read_text().splitlines()]
    assert [(x["task_id"], x["won"], x["turns"], x["tokens"]) for x in lines] == [
        (games[0], True, 1, 4), (games[1], False, 2, 8), (games[2], True, 3, 12)]
    assert [x["gamefile"] for x in lines] == [str(tmp_path / "data" / g) for g in games]
    rows = verl_agent.convert_eval(run, 5, config)
    outcomes.check_rows(rows, config=config, step=5, source="5.jsonl")
    assert [(r["task_id"], r["success"], r["category"]) for r in rows] == [
        (games[0], 1, "pick_and_place_simple"), (games[1], 0, "look_at_obj_in_light"), (games[2], 1, "pick_two_obj_and_place")]
    metrics = [json.loads(x) for x in (run / "verl_metrics.jsonl").read_text().splitlines()]
    assert metrics == [{"step": 5, "data": {"val/success_rate": 2 / 3, "timing_s/step": 2.5}}]


def test_a_signature_other_than_20bd331_refuses_to_start(tmp_path):
    """A framework whose wrapped name has another signature stops at import, naming the name, instead of recording wrong outcomes."""
    tree, run = tmp_path / "verl-agent", tmp_path / "run"
    tree.mkdir()
    run.mkdir()
    stand_in_tree(tree)
    tracking = tree / "verl" / "utils" / "tracking.py"
    tracking.write_text(tracking.read_text().replace("def log(self, data, step, backend=None)", "def log(self, data, step)"))
    env = {**verl_agent.integration_env(run), "PATH": "/usr/bin:/bin"}
    env["PYTHONPATH"] += f":{tree}"
    result = subprocess.run([sys.executable, "-c", "import verl.utils.tracking"], cwd=tree, env=env, capture_output=True, text=True)
    assert result.returncode != 0 and "verl.utils.tracking.Tracking.log(self, data, step) is not (self, data, step, backend=None)" in result.stderr
