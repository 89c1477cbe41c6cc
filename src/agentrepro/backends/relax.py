"""The Relax backend (redai-infra/Relax): its launch command, and converters of its rollout summaries.

Launch. Relax trains with `python3 -m relax.entrypoints.train` and command-line flags, e.g. in its example
scripts `--hf-checkpoint`, `--num-rollout`, `--rollout-batch-size`, `--n-samples-per-prompt`,
`--advantage-estimator grpo`, `--resource '{"actor": [1, 1], "rollout": [1, 1]}'`, `--save`. Its scripts
submit to a Ray cluster on the fixed dashboard port 8265 or run in "driver mode" with RAY_ADDRESS; here
the driver mode runs against this job's private Ray head (ray_launch.py). Flags derived from the run
config are listed in `flags()`; `backend.args` adds or replaces any flag (`{flag: value}`; a value of
true gives a bare flag, false or null drops it), or, as a list, is appended verbatim.

Outputs converted. With `--save <dir>`, Relax always writes compact per-rollout summaries
(docs "Rollout Result Viewer"; relax/utils/... `save_rollout_result_jsonl`, `save_eval_summary_jsonl`):
`<save>/rollout_result/train/{rollout_id}.jsonl` and `<save>/rollout_result/eval/{rollout_id}.jsonl`,
one line per sample with `rollout_id`, `sample_index`, `prompt`, `response`, `reward`,
`response_length`, `total_length`, `agent_turns`, `status`, `group_index`, and for eval `dataset`.
* outcomes: eval/{step}.jsonl -> one row per sample. The task is `record[backend.task_key]` (default
  `group_index`: the index of the evaluation prompt, mapped onto the task panel by position; a string
  value is a task id); samples of one task are its episodes in file order. Success is
  `reward >= backend.success_threshold` (default 1.0) unless `backend.success_key` names a 0/1 field.
  turns = agent_turns, tokens = response_length.
* metrics: train/{rollout_id}.jsonl -> one metrics.jsonl row per rollout, step = rollout_id + 1:
  `reward_mean`, `train_success_rate` (same threshold), cumulative `episodes` and `tokens_generated`.
  Relax's optimiser losses go to its own loggers (TensorBoard, W&B, ClearML), not to these files, and
  are not invented here.

Assumption to check on a real run: an evaluation at training step N is the file eval/N.jsonl.
Not run against a real Relax cluster here: converters are tested on sample files shaped like the real ones.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from agentrepro.backends import convert, ray_launch, runconfig
from agentrepro.backends.base import Backend
from agentrepro.backends.process import run_logged
from agentrepro.errors import BadInput
from agentrepro.fileio import atomic_write_text, canonical_json
from agentrepro.layout import RunFiles

BLOCK_KEYS = {"name", "repo", "commit", "workdir", "python", "entry", "args", "task_key", "success_key",
              "success_threshold", "ray", "model_path"}
SAVE, LAUNCH = "relax", "launch.sh"


def flags(config: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    train, evaluation = config.get("train") or {}, config.get("eval") or {}
    block, model = config["backend"], config.get("model") or {}
    out: dict[str, Any] = {"--save": str(Path(run_dir).resolve() / SAVE), "--seed": config["seed"]}
    optional = {
        "--hf-checkpoint": block.get("model_path") or model.get("name"),
        "--num-rollout": train.get("steps"),
        "--rollout-batch-size": train.get("groups"),
        "--n-samples-per-prompt": train.get("group_size"),
        "--advantage-estimator": train.get("estimator"),
        "--lr": train.get("lr"),
        "--eval-interval": evaluation.get("every"),
    }
    out.update({k: v for k, v in optional.items() if v is not None})
    if isinstance(block.get("args"), dict):
        out.update(block["args"])
    return out


def launch_argv(config: dict[str, Any], run_dir: Path) -> list[str]:
    block = config["backend"]
    argv = [block.get("python", "python3"), "-m", block.get("entry", "relax.entrypoints.train")]
    for flag, value in flags(config, run_dir).items():
        if value is None or value is False:
            continue
        argv.append(flag)
        if value is not True:
            argv.append(canonical_json(value) if isinstance(value, (dict, list)) else str(value))
    if isinstance(block.get("args"), list):
        argv.extend(str(a) for a in block["args"])
    return argv


def launch_script(config: dict[str, Any], run_dir: Path) -> str:
    run_dir = Path(run_dir).resolve()
    ray = config["backend"].get("ray") or {}
    return ray_launch.render_launch_script(
        launch_argv(config, run_dir), key=ray_launch.job_key(run_dir), env={"WANDB_MODE": "offline"},
        ray=ray.get("executable", "ray"), num_cpus=ray.get("num_cpus"),
        num_gpus=ray.get("num_gpus", (config.get("resources") or {}).get("gpus")), pid_file=run_dir / "ray_head.pid",
        client=ray.get("client", True))


def _threshold(block: dict[str, Any]) -> float:
    return float(block.get("success_threshold", 1.0))


def convert_eval(run_dir: Path, step: int, config: dict[str, Any]) -> list[dict[str, Any]]:
    """rollout_result/eval/<step>.jsonl (one line per episode) -> outcome rows of docs/design.md §3.4."""
    block = config["backend"]
    path = Path(run_dir) / SAVE / "rollout_result" / "eval" / f"{step}.jsonl"
    fields = convert.EpisodeFields(task=block.get("task_key", "group_index"), reward="reward", turns="agent_turns",
                                   tokens="response_length", category="dataset", success=block.get("success_key"),
                                   threshold=_threshold(block))
    return convert.episode_rows(config, step, path, fields)


def convert_training(run_dir: Path, config: dict[str, Any]) -> None:
    block = config["backend"]
    folder = Path(run_dir) / SAVE / "rollout_result" / "train"
    files = sorted((p for p in folder.glob("*.jsonl") if p.stem.isdigit()), key=lambda p: int(p.stem))
    if not files:
        raise BadInput("no rollout summaries {rollout_id}.jsonl (was Relax started with --save?)", path=folder)
    records = []
    for path in files:
        rewards, successes, tokens = [], 0, 0
        for line, record in convert.read_records(path):
            where = f"line {line}"
            reward = convert.number(record, "reward", source=path, where=where)
            rewards.append(reward)
            successes += convert.success_value(record, key=block.get("success_key"), reward_key="reward",
                                               threshold=_threshold(block), source=path, where=where)
            tokens += convert.count(record, "response_length", source=path, where=where)
        if not rewards:
            raise BadInput("empty rollout summary", path=path)
        records.append((int(path.stem) + 1, {"reward_mean": sum(rewards) / len(rewards),
                                             "train_success_rate": successes / len(rewards),
                                             "_episodes": len(rewards), "_tokens": tokens}))
    rows = convert.merge_metric_records(records, rename={}, cumulative={"episodes": "_episodes", "tokens_generated": "_tokens"})
    convert.write_metrics(run_dir, [{k: v for k, v in r.items() if not k.startswith("_")} for r in rows])


class RelaxBackend(Backend):
    name = "relax"

    def validate_config(self, config: dict[str, Any]) -> None:
        block = config["backend"]
        unknown = sorted(set(block) - BLOCK_KEYS)
        if unknown:
            raise BadInput(f"unknown key (expected {', '.join(sorted(BLOCK_KEYS))})", where=f"backend.{unknown[0]}")
        args = block.get("args")
        if args is not None and not (isinstance(args, list) or (isinstance(args, dict) and all(str(k).startswith("--") for k in args))):
            raise BadInput("expected a mapping of --flags to values, or a list of arguments", where="backend.args")

    def train(self, config: dict[str, Any], run_dir: Path, *, resume: bool = True) -> None:
        workdir = config["backend"].get("workdir")
        if not workdir or not Path(workdir).is_dir():
            raise BadInput(f"expected the path of a Relax checkout, got {workdir!r}", where="backend.workdir")
        if resume and (Path(run_dir) / SAVE).is_dir():  # Megatron's --load resumes from the last save
            args = config["backend"].get("args")
            load = ["--load", str(Path(run_dir).resolve() / SAVE)]
            args = [*args, *load] if isinstance(args, list) else {"--load": load[1], **(args or {})}
            config = {**config, "backend": {**config["backend"], "args": args}}
        script = Path(run_dir) / LAUNCH
        atomic_write_text(script, launch_script(config, run_dir))
        run_logged(["bash", str(script.resolve())], log_dir=Path(run_dir) / RunFiles.LOGS, label="train", cwd=workdir)
        convert_training(Path(run_dir), config)

    def evaluate(self, run_dir: Path, step: int) -> list[dict[str, Any]]:
        return convert_eval(Path(run_dir), step, runconfig.read_resolved_config(Path(run_dir)))


if __name__ == "__main__":  # print the launch script of a run config: python -m agentrepro.backends.relax CONFIG RUN_DIR
    cfg = runconfig.load_run_config(sys.argv[1])
    print(launch_script(cfg, Path(sys.argv[2])), end="")
