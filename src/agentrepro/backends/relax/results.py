"""Relax's per-sample rollout summaries as outcomes and metrics: the command backend's `relax` adapter (`ADAPTER`).

For a Relax run started by a command template with `--save RUN_DIR/relax` whose samples are whole episodes
(one sample per trajectory, e.g. a VAGEN-Lite port until it ships a recipe; relax/utils/training/
train_dump_utils.py `save_rollout_result_jsonl`, `save_eval_summary_jsonl`):
`<save>/rollout_result/{train,eval}/{rollout_id}.jsonl`, one line per sample with `rollout_id`,
`sample_index`, `reward`, `response_length`, `agent_turns`, `status`, `group_index` (and `dataset` in eval).
* outcomes: eval/<step>.jsonl -> one row per sample; the task is `record[backend.task_key]` (default
  `group_index`, the index of the evaluation prompt on the task panel; a string value is a task id);
  success is `reward >= backend.success_threshold` (default 1.0) unless `backend.success_key` names a 0/1
  field; turns = agent_turns, tokens = response_length. Step N is the file of Relax's rollout_id
  recipe.rollout_of_step(N) (0 before training, N - 1 after the N-th update).
* metrics: train/<rollout_id>.jsonl -> the metrics row of step recipe.step_of_rollout(rollout_id)
  (`summary_metrics`, the one reader of these summaries, which the relax backend uses too).
The GraphGPO recipe exports one sample per *turn*: use the `relax` backend (backend.py) for it, not this.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentrepro.backends import convert
from agentrepro.backends.base import Adapter
from agentrepro.backends.relax import recipe
from agentrepro.errors import BadInput

SAVE = "relax"


def _threshold(block: dict[str, Any]) -> float:
    return float(block.get("success_threshold", 1.0))


def convert_eval(run_dir: Path, step: int, config: dict[str, Any]) -> list[dict[str, Any]]:
    """rollout_result/eval/<step>.jsonl (one line per episode) -> outcome rows of docs/design.md §3.4."""
    block = config["backend"]
    path = Path(run_dir) / SAVE / "rollout_result" / "eval" / f"{recipe.rollout_of_step(step)}.jsonl"
    fields = convert.EpisodeFields(
        task=block.get("task_key", "group_index"),
        reward="reward",
        turns="agent_turns",
        tokens="response_length",
        category="dataset",
        success=block.get("success_key"),
        threshold=_threshold(block),
    )
    return convert.episode_rows(config, step, path, fields)


def convert_training(run_dir: Path, config: dict[str, Any]) -> None:
    """rollout_result/train/<rollout_id>.jsonl (one line per episode) -> metrics.jsonl."""
    summary_metrics(
        run_dir,
        Path(run_dir) / SAVE / "rollout_result" / "train",
        config,
        per_line="episodes",
        success_key=config["backend"].get("success_key"),
        hint="was Relax started with --save?",
    )


def summary_metrics(
    run_dir: Path, folder: Path, config: dict[str, Any], *, per_line: str, success_key: str | None, hint: str
) -> None:
    """Relax's rollout summaries `folder/{rollout_id}.jsonl` -> RUN_DIR/metrics.jsonl, one row per rollout at
    step `recipe.step_of_rollout(rollout_id)`: `reward_mean` and `train_success_rate` (means over its lines;
    success as in `convert.success_value` with `success_key` and `backend.success_threshold`), cumulative
    `tokens_generated` (response_length) and the cumulative count of lines as `per_line` (what a line is:
    "episodes" here, "env_steps" for the GraphGPO recipe's one line per turn). `hint`: why none might be there."""
    files = sorted((p for p in folder.glob("*.jsonl") if p.stem.isdigit()), key=lambda p: int(p.stem))
    if not files:
        raise BadInput(f"no rollout summaries {{rollout_id}}.jsonl ({hint})", path=folder)
    threshold = _threshold(config["backend"])
    records = []
    for path in files:
        rewards, successes, tokens = [], 0, 0
        for line, record in convert.read_records(path):
            where = f"line {line}"
            rewards.append(convert.number(record, "reward", source=path, where=where))
            successes += convert.success_value(
                record, key=success_key, reward_key="reward", threshold=threshold, source=path, where=where
            )
            tokens += convert.count(record, "response_length", source=path, where=where)
        if not rewards:
            raise BadInput("empty rollout summary", path=path)
        records.append(
            (
                recipe.step_of_rollout(int(path.stem)),
                {
                    "reward_mean": sum(rewards) / len(rewards),
                    "train_success_rate": successes / len(rewards),
                    "_lines": len(rewards),
                    "_tokens": tokens,
                },
            )
        )
    rows = convert.merge_metric_records(
        records, rename={}, cumulative={per_line: "_lines", "tokens_generated": "_tokens"}
    )
    convert.write_metrics(run_dir, [{k: v for k, v in r.items() if not k.startswith("_")} for r in rows])


ADAPTER = Adapter(convert_training, convert_eval)
