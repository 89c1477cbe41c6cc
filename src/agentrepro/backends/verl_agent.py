"""The verl-agent backend (langfengQ/verl-agent): its launch command, and converters of its outputs.

Launch. verl-agent trains with `python3 -m verl.trainer.main_ppo` and Hydra overrides, as in its
examples/gigpo_trainer/run_alfworld.sh (`algorithm.adv_estimator=gigpo`, `env.env_name=alfworld/AlfredTWEnv`,
`env.rollout.n=8`, `data.train_batch_size=16`, `actor_rollout_ref.actor.optim.lr=1e-6`,
`algorithm.gamma=0.95`, `algorithm.gigpo.step_advantage_w=1.0`, `trainer.test_freq`, `trainer.save_freq`,
`trainer.val_before_train=True`, ...). The overrides derived from the run config are listed in
`overrides()`; `backend.overrides` adds or replaces any Hydra key. The command runs inside a launch
script (ray_launch.py) that starts a private Ray head for this job.

Outputs converted (shapes learned from verl and verl-agent sources; see tests/backends/test_verl_agent.py):
* metrics: verl's FileLogger (`trainer.logger=[...,'file']`, path from VERL_FILE_LOGGER_PATH) writes one
  JSON line per `log()` call, `{"step": N, "data": {"actor/pg_loss": ..., "val/success_rate": ...}}`
  (newer verl adds "elapsed_seconds"). verl-agent's validation logs `val/success_rate` and
  `val/<task type>_success_rate`; training logs `episode/...`, `actor/...`, `critic/...`, `timing_s/...`.
* outcomes: with `trainer.validation_data_dir`, verl dumps `<global_step>.jsonl` at every validation,
  one line per sample with `input`, `output`, `score`, `step` and the reward's extra infos. verl-agent
  does not put a task id or a success flag there by default: the converter needs, per line, the field
  `backend.task_key` (default `task_id`; a string id, or an integer index into the task panel) and
  either `backend.success_key` (default `won`, ALFWorld's flag) or, when only
  `backend.success_threshold` is given, `score >= success_threshold`, and the episode's `turns` and `response_length` (keys
  `backend.turns_key`, `backend.tokens_key`): counts are never invented. A line without them is
  BadInput naming file, line and field.
  Step 0 is the validation before training (`trainer.val_before_train=True`).
* evaluated steps: verl validates before training, every `trainer.test_freq` (= eval.every) steps and at the
  last step (`validated_steps`); a study whose `layout.checkpoint_steps` differ (an `eval.checkpoint` off
  that grid, or no `eval.every`) is refused by `validate_config`, so the plan never asks for a step verl skips.

Not run against a real verl-agent cluster here: the converters are tested on sample files shaped like
the real ones, and the launch script against a stand-in `ray`.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from agentrepro.backends import convert, ray_launch, runconfig
from agentrepro.backends.base import Backend
from agentrepro.backends.process import run_logged
from agentrepro.errors import BadInput
from agentrepro.fileio import atomic_write_text
from agentrepro.layout import RunFiles, checkpoint_dir, checkpoint_steps

BLOCK_KEYS = {"name", "repo", "commit", "workdir", "python", "entry", "env_name", "overrides", "task_key",
              "success_key", "success_threshold", "turns_key", "tokens_key", "ray", "model_path"}
ENV_NAMES = {"alfworld": "alfworld/AlfredTWEnv", "sokoban": "sokoban", "webshop": "webshop"}
METRICS_FILE, VAL_DIR, LAUNCH = "verl_metrics.jsonl", "verl_validation", "launch.sh"
RENAME = {
    "train_success_rate": ("episode/success_rate",),
    "reward_mean": ("episode/reward/mean", "critic/rewards/mean"),
    "valid_action_ratio": ("episode/valid_action_ratio", "valid_action_ratio"),
    "loss_policy": ("actor/pg_loss",), "loss_value": ("critic/vf_loss",),
    "kl": ("actor/kl_loss", "critic/kl"), "entropy": ("actor/entropy", "actor/entropy_loss"),
    "grad_norm": ("actor/grad_norm",), "lr": ("actor/lr",), "val_success_rate": ("val/success_rate",),
}
TIMINGS = {"rollout": "timing_s/gen", "advantage": "timing_s/adv", "update": "timing_s/update_actor",
           "checkpoint": "timing_s/save_checkpoint", "step_total": "timing_s/step"}
_SAFE = re.compile(r"^[A-Za-z0-9_./:@+-]+$")


def hydra_value(value: Any) -> str:
    """A Hydra override value: numbers and simple words as they are, lists as [..], other text quoted."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    text = str(value)
    if _SAFE.match(text):
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def overrides(config: dict[str, Any], run_dir: Path, *, resume: bool) -> dict[str, Any]:
    """Hydra overrides from the run config (only what the config states), then backend.overrides."""
    train, evaluation = config.get("train") or {}, config.get("eval") or {}
    block, model = config["backend"], config.get("model") or {}
    run_dir = Path(run_dir).resolve()
    out: dict[str, Any] = {
        "trainer.project_name": config["study"],
        "trainer.experiment_name": f"{config['method']}-seed{config['seed']}",
        "trainer.default_local_dir": str(checkpoint_dir(run_dir)),
        "trainer.validation_data_dir": str(run_dir / VAL_DIR),
        "trainer.logger": ["console", "file"],
        "trainer.val_before_train": True,
        "trainer.resume_mode": "auto" if resume else "disable",
        "trainer.nnodes": 1,
        "env.seed": config["seed"],
    }
    optional = {
        "algorithm.adv_estimator": train.get("estimator"),
        "trainer.total_training_steps": train.get("steps"),
        "data.train_batch_size": train.get("groups"),
        "env.rollout.n": train.get("group_size"),
        "actor_rollout_ref.actor.optim.lr": train.get("lr"),
        "algorithm.gamma": train.get("gamma"),
        "algorithm.gigpo.step_advantage_w": train.get("step_weight"),
        "actor_rollout_ref.actor.invalid_action_penalty_coef": train.get("invalid_penalty"),
        "actor_rollout_ref.actor.kl_loss_coef": train.get("kl_coef"),
        "trainer.test_freq": evaluation.get("every"),
        "trainer.save_freq": train.get("checkpoint_every", evaluation.get("every")),
        "actor_rollout_ref.rollout.val_kwargs.temperature": evaluation.get("temperature"),
        "trainer.n_gpus_per_node": (config.get("resources") or {}).get("gpus"),
        "actor_rollout_ref.model.path": block.get("model_path") or model.get("name"),
        "env.env_name": block.get("env_name") or ENV_NAMES.get((config.get("env") or {}).get("name")),
    }
    out.update({k: v for k, v in optional.items() if v is not None})
    out.update(block.get("overrides") or {})
    return out


def launch_argv(config: dict[str, Any], run_dir: Path, *, resume: bool) -> list[str]:
    block = config["backend"]
    args = [f"{key}={hydra_value(value)}" for key, value in overrides(config, run_dir, resume=resume).items()]
    return [block.get("python", "python3"), "-m", block.get("entry", "verl.trainer.main_ppo"), *args]


def launch_script(config: dict[str, Any], run_dir: Path, *, resume: bool) -> str:
    run_dir = Path(run_dir).resolve()
    ray = config["backend"].get("ray") or {}
    return ray_launch.render_launch_script(
        launch_argv(config, run_dir, resume=resume), key=ray_launch.job_key(run_dir),
        env={"VERL_FILE_LOGGER_PATH": str(run_dir / METRICS_FILE), "WANDB_MODE": "offline"},
        ray=ray.get("executable", "ray"), num_cpus=ray.get("num_cpus"),
        num_gpus=ray.get("num_gpus", (config.get("resources") or {}).get("gpus")), pid_file=run_dir / "ray_head.pid",
        client=ray.get("client", True))


def convert_training(run_dir: Path, config: dict[str, Any]) -> None:
    """verl_metrics.jsonl (FileLogger lines) -> metrics.jsonl and timings.jsonl of docs/design.md §3.3."""
    path = Path(run_dir) / METRICS_FILE
    records = []
    for line, record in convert.read_records(path):
        step, data = record.get("step"), record.get("data")
        if not isinstance(step, int) or isinstance(step, bool) or not isinstance(data, dict):
            raise BadInput('expected {"step": <int>, "data": {...}} (verl FileLogger)', path=path, where=f"line {line}")
        records.append((step, data))
    metrics = convert.merge_metric_records(records, rename=RENAME, cumulative={"wall_s": "timing_s/step"})
    timings = [{"step": m["step"], **{name: m[src] for name, src in TIMINGS.items() if src in m}} for m in metrics]
    convert.write_metrics(run_dir, metrics, [t for t in timings if len(t) > 1])


def convert_eval(run_dir: Path, step: int, config: dict[str, Any]) -> list[dict[str, Any]]:
    """verl_validation/<step>.jsonl (one line per episode) -> outcome rows of docs/design.md §3.4."""
    block = config["backend"]
    fields = convert.EpisodeFields(task=block.get("task_key", "task_id"), reward="score",
                                   turns=block.get("turns_key", "turns"), tokens=block.get("tokens_key", "response_length"),
                                   category="data_source",
                                   success=block.get("success_key", None if "success_threshold" in block else "won"),
                                   threshold=float(block.get("success_threshold", 1.0)))
    return convert.episode_rows(config, step, Path(run_dir) / VAL_DIR / f"{step}.jsonl", fields)


def validated_steps(config: dict[str, Any]) -> list[int]:
    """The steps verl validates: 0 (val_before_train), every trainer.test_freq steps, and the last step."""
    steps, every = (config.get("train") or {}).get("steps", 0), (config.get("eval") or {}).get("every")
    return sorted({0} | (set(range(every, steps + 1, every)) | {steps} if every else set()))


class VerlAgentBackend(Backend):
    name = "verl-agent"

    def checkpoint_steps(self, config: dict[str, Any]) -> list[int]:
        return validated_steps(config)

    def validate_config(self, config: dict[str, Any]) -> None:
        block = config["backend"]
        unknown = sorted(set(block) - BLOCK_KEYS)
        if unknown:
            raise BadInput(f"unknown key (expected {', '.join(sorted(BLOCK_KEYS))})", where=f"backend.{unknown[0]}")
        if "overrides" in block and not isinstance(block["overrides"], dict):
            raise BadInput("expected a mapping of Hydra keys to values", where="backend.overrides")
        wanted, validated = checkpoint_steps(config), validated_steps(config)
        if wanted != validated:
            raise BadInput(f"verl-agent validates at step 0, every eval.every steps and the last step ({validated}), "
                           f"but the study evaluates {wanted}", where="eval")

    def train(self, config: dict[str, Any], run_dir: Path, *, resume: bool = True) -> None:
        workdir = config["backend"].get("workdir")
        if not workdir or not Path(workdir).is_dir():
            raise BadInput(f"expected the path of a verl-agent checkout, got {workdir!r}", where="backend.workdir")
        script = Path(run_dir) / LAUNCH
        atomic_write_text(script, launch_script(config, run_dir, resume=resume))
        run_logged(["bash", str(script.resolve())], log_dir=Path(run_dir) / RunFiles.LOGS, label="train", cwd=workdir)
        convert_training(Path(run_dir), config)

    def evaluate(self, run_dir: Path, step: int) -> list[dict[str, Any]]:
        return convert_eval(Path(run_dir), step, runconfig.read_resolved_config(Path(run_dir)))


if __name__ == "__main__":  # print the launch script of a run config: python -m agentrepro.backends.verl_agent CONFIG RUN_DIR
    cfg = runconfig.load_run_config(sys.argv[1])
    print(launch_script(cfg, Path(sys.argv[2]), resume=True), end="")
