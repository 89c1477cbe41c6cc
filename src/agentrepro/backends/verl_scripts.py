"""verl-agent's official ALFWorld launch scripts at 20bd331: facts read from them (no harness logic).

`SCRIPTS` holds facts read from verl-agent @ 20bd331bdbc9026a5668e11362178e10ab7400c8 (the public mirror
zzj1111/alfworldauto): each script's path, entry module, data-preparation arguments, and the values it sets
for the keys the harness may append (backends/verl_recipes.py), with their script line.
tests/backends/test_verl_recipes.py checks them both ways against tests/fixtures/frameworks/verl-agent-20bd331.recipes.json:
each entry has the script's value and line, and each key the harness may append or compare that the script sets
is an entry. A key named only in backend.overrides is compared with SCRIPTS too: one the script sets but SCRIPTS
lacks would be recorded as not set by the script.
"""

from __future__ import annotations

from dataclasses import dataclass

COMMIT = "20bd331bdbc9026a5668e11362178e10ab7400c8"
# The scripts read $1 as ENGINE=${1:-vllm} and also end with an unquoted $@, so their first argument would reach
# Hydra as an override ("vllm" alone is a Hydra parse error). An empty first argument gives the default engine
# (vllm) and, being empty, disappears from the unquoted $@. The same unquoted $@ splits words on blanks, so a
# value with a blank is refused (`verl_recipes.appended`).
ENGINE = ""


@dataclass(frozen=True)
class Script:
    """One official launch script: `official` maps a Hydra key to (value as written, script line)."""

    path: str
    entry: str
    prepare: tuple[str, ...]
    official: dict[str, tuple[str, int]]


SCRIPTS: dict[str, Script] = {  # keyed by algorithm.adv_estimator
    "graphgpo": Script(
        path="recipe/GraphGPO/run_qwen2.5_1.5b_alfworld_train.sh", entry="recipe.GraphGPO.main_graphgpo",  # entry: line 22
        prepare=('--mode', 'text', '--train_data_size', '16', '--val_data_size', '128'),  # line 17
        official={
            "algorithm.adv_estimator": ("graphgpo", 23),
            "algorithm.gamma": ("0.10", 24),
            "algorithm.graphgpo.step_advantage_w": ("1.0", 25),
            "algorithm.graphgpo.episode_advantage_w": ("1.0", 26),
            "algorithm.graphgpo.mode": ("mean_std_norm", 27),
            "data.train_files": ("${HOME}/data/verl-agent/text/train.parquet", 30),
            "data.val_files": ("${HOME}/data/verl-agent/text/test.parquet", 31),
            "data.train_batch_size": ("16", 32),
            "data.val_batch_size": ("128", 33),
            "actor_rollout_ref.model.path": ("Qwen/Qwen2.5-1.5B-Instruct", 39),
            "actor_rollout_ref.actor.optim.lr": ("1e-6", 40),
            "actor_rollout_ref.actor.kl_loss_coef": ("0.01", 45),
            "actor_rollout_ref.actor.invalid_action_penalty_coef": ("0.1", 62),
            "actor_rollout_ref.rollout.val_kwargs.temperature": ("0.4", 57),
            "actor_rollout_ref.rollout.val_kwargs.do_sample": ("True", 58),
            "env.seed": ("0", 64),
            "env.max_steps": ("50", 65),
            "env.rollout.n": ("8", 66),
            "trainer.logger": ("[console,wandb]", 69),
            "trainer.project_name": ("verl_agent_alfworld", 70),
            "trainer.experiment_name": ("graphgpo_qwen2.5_1.5b_alfworld", 71),
            "trainer.n_gpus_per_node": ("2", 72),
            "trainer.save_freq": ("-1", 74),
            "trainer.test_freq": ("5", 75),
            "trainer.total_epochs": ("150", 76),
            "trainer.default_local_dir": ("${CHECKPOINTS_DIR}/graphgpo_qwen2.5_1.5b_alfworld", 77),
        }),
    "gigpo": Script(
        path="examples/gigpo_trainer/run_alfworld.sh", entry="verl.trainer.main_ppo",  # entry: line 18
        prepare=('--mode', 'text', '--train_data_size', '16', '--val_data_size', '128'),  # line 13
        official={
            "algorithm.adv_estimator": ("gigpo", 19),
            "algorithm.gamma": ("0.95", 54),
            "algorithm.gigpo.step_advantage_w": ("1.0", 55),
            "algorithm.gigpo.mode": ("mean_std_norm", 56),
            "data.train_files": ("${HOME}/data/verl-agent/text/train.parquet", 20),
            "data.val_files": ("${HOME}/data/verl-agent/text/test.parquet", 21),
            "data.train_batch_size": ("16", 22),
            "data.val_batch_size": ("128", 23),
            "actor_rollout_ref.model.path": ("Qwen/Qwen2.5-1.5B-Instruct", 29),
            "actor_rollout_ref.actor.optim.lr": ("1e-6", 30),
            "actor_rollout_ref.actor.kl_loss_coef": ("0.01", 35),
            "actor_rollout_ref.actor.invalid_action_penalty_coef": ("0.1", 52),
            "actor_rollout_ref.rollout.val_kwargs.temperature": ("0.4", 47),
            "actor_rollout_ref.rollout.val_kwargs.do_sample": ("True", 48),
            "env.seed": ("0", 58),
            "env.max_steps": ("50", 59),
            "env.rollout.n": ("8", 60),
            "trainer.logger": ("[console,wandb]", 63),
            "trainer.project_name": ("verl_agent_alfworld", 64),
            "trainer.experiment_name": ("gigpo_qwen2.5_1.5b", 65),
            "trainer.n_gpus_per_node": ("2", 66),
            "trainer.save_freq": ("-1", 68),
            "trainer.test_freq": ("5", 69),
            "trainer.total_epochs": ("150", 70),
        }),
    "grpo": Script(
        path="examples/grpo_trainer/run_alfworld.sh", entry="verl.trainer.main_ppo",  # entry: line 17
        prepare=('--mode', 'text', '--train_data_size', '16', '--val_data_size', '128'),  # line 12
        official={
            "algorithm.adv_estimator": ("grpo", 18),
            "data.train_files": ("${HOME}/data/verl-agent/text/train.parquet", 19),
            "data.val_files": ("${HOME}/data/verl-agent/text/test.parquet", 20),
            "data.train_batch_size": ("16", 21),
            "data.val_batch_size": ("128", 22),
            "actor_rollout_ref.model.path": ("Qwen/Qwen2.5-1.5B-Instruct", 28),
            "actor_rollout_ref.actor.optim.lr": ("1e-6", 29),
            "actor_rollout_ref.actor.kl_loss_coef": ("0.01", 34),
            "actor_rollout_ref.actor.invalid_action_penalty_coef": ("0.1", 51),
            "actor_rollout_ref.rollout.val_kwargs.temperature": ("0.4", 46),
            "actor_rollout_ref.rollout.val_kwargs.do_sample": ("True", 47),
            "env.seed": ("0", 54),
            "env.max_steps": ("50", 55),
            "env.rollout.n": ("8", 56),
            "trainer.logger": ("[console,wandb]", 59),
            "trainer.project_name": ("verl_agent_alfworld", 60),
            "trainer.experiment_name": ("grpo_qwen2.5_1.5b", 61),
            "trainer.n_gpus_per_node": ("2", 62),
            "trainer.save_freq": ("-1", 64),
            "trainer.test_freq": ("5", 65),
            "trainer.total_epochs": ("150", 66),
        }),
}
