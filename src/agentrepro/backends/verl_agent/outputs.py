"""verl-agent's outputs as the run contract (docs/design.md §3.3, §3.4); also the command backend's `verl-agent`
adapter (`ADAPTER`), for a verl-agent run launched by a command template with the same integration.

* metrics: the integration appends every `Tracking.log(data, step)` call to verl_metrics.jsonl as
  `{"step": N, "data": {...}}`; `convert_training` renames verl's keys to the contract's (`RENAME`, `TIMINGS`).
* outcomes: the integration writes verl_validation/<step>.jsonl, one line per validation episode with `task_id`,
  `task_hash`, `category`, `won`, `turns` and `tokens`; `convert_eval` maps them onto the frozen task panel.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentrepro.backends import convert
from agentrepro.backends.base import Adapter
from agentrepro.errors import BadInput

METRICS_FILE, VAL_DIR = "verl_metrics.jsonl", "verl_validation"
RENAME = {
    "train_success_rate": ("episode/success_rate",),
    "reward_mean": ("episode/reward/mean", "critic/rewards/mean"),
    "valid_action_ratio": ("episode/valid_action_ratio",),
    "loss_policy": ("actor/pg_loss",),
    "loss_value": ("critic/vf_loss",),
    "kl": ("actor/kl_loss",),
    "entropy": ("actor/entropy_loss",),
    "grad_norm": ("actor/grad_norm",),
    "lr": ("actor/lr",),
    "val_success_rate": ("val/success_rate",),
}
TIMINGS = {
    "rollout": "timing_s/gen",
    "advantage": "timing_s/adv",
    "update": "timing_s/update_actor",
    "checkpoint": "timing_s/save_checkpoint",
    "step_total": "timing_s/step",
}


def validation_file(run_dir: Path, step: int) -> Path:
    """verl_validation/<step>.jsonl: the integration's lines of the validation at `step`."""
    return Path(run_dir) / VAL_DIR / f"{step}.jsonl"


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
    """verl_validation/<step>.jsonl (the integration's lines, one per episode) -> outcome rows of docs/design.md §3.4."""
    fields = convert.EpisodeFields(
        task="task_id", reward="reward", turns="turns", tokens="tokens", category="category", success="won"
    )
    return convert.episode_rows(config, step, validation_file(run_dir, step), fields)


ADAPTER = Adapter(convert_training, convert_eval)
