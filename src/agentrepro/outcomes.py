"""Checks of outcome rows (docs/design.md §3.4) before `agentrepro eval` writes them.

Each row: study, method, seed, step, task_id, task_hash, category, episode, success (0/1), reward, turns,
tokens (more fields may follow). A row must belong to the run and checkpoint being evaluated;
(task_id, episode) keys are unique; when the run config carries the frozen task panel
(eval.task_panel), every task of the panel is played exactly `eval.episodes_per_task` times (default 1)
with the panel's task_hash and category, and no other task appears. Every row is also validated against
the outcomes JSON Schema (`agentrepro.schema`; a missing schema is an error).

Problems raise BadInput naming `source` (the file or backend the rows came from), the row and the field.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

from agentrepro import schema
from agentrepro.environments import task_panel
from agentrepro.errors import BadInput, Failure
from agentrepro.runconfig import EvalConfig

OUTCOMES_SCHEMA = "outcomes.schema.json"

SHA256_RE = re.compile(r"^[0-9a-f]{64}\Z")
FIELDS = (
    "study",
    "method",
    "seed",
    "step",
    "task_id",
    "task_hash",
    "category",
    "episode",
    "success",
    "reward",
    "turns",
    "tokens",
)


def row(
    identity: dict[str, Any],
    step: int,
    task: dict[str, Any],
    *,
    episode: int,
    success: bool,
    reward: float,
    turns: int,
    tokens: int,
    category: str,
) -> dict[str, Any]:
    """One outcome row of an episode the harness played itself (`identity`: the run's study, method, seed;
    `category`: used when the panel's task has none)."""
    return {
        "study": identity["study"],
        "method": identity["method"],
        "seed": identity["seed"],
        "step": step,
        "task_id": task["task_id"],
        "task_hash": task["task_hash"],
        "category": task.get("category", category),
        "episode": episode,
        "success": int(success),
        "reward": float(reward),
        "turns": int(turns),
        "tokens": int(tokens),
    }


def matrix_gaps(pairs: Iterable[tuple[str, int]]) -> list[str]:
    """'method seed K' for each method and seed of a method x seed matrix that `pairs` (the (method, seed) of
    outcome rows) leave out while another method has that seed; empty for a whole matrix."""
    have = {(str(m), int(s)) for m, s in pairs}
    methods, seeds = sorted({m for m, _ in have}), sorted({s for _, s in have})
    return [f"{m} seed {s}" for m in methods for s in seeds if (m, s) not in have]


def frozen_panel(env_name: str, env_params: dict[str, Any], evaluation: EvalConfig) -> list[dict[str, Any]]:
    """The panel to play: `eval.task_panel` checked hash for hash against the environment's own task
    descriptions, or, without one, the seeds `eval.first_seed .. + eval.tasks`."""
    if evaluation.task_panel:
        panel = list(evaluation.task_panel)
        fresh = {r["task_id"]: r for r in task_panel(env_name, env_params, [int(r["seed"]) for r in panel])}
        for k, task in enumerate(panel):
            mine = fresh.get(task.get("task_id"))
            if mine is None or mine["task_hash"] != task.get("task_hash"):
                raise Failure(
                    f"eval.task_panel[{k}] ({task.get('task_id')}): the environment now describes this task "
                    f"differently (hash {None if mine is None else mine['task_hash'][:12]} vs frozen {str(task.get('task_hash'))[:12]})"
                )
        return panel
    tasks, first = evaluation.tasks, evaluation.first_seed
    if tasks is None or first is None:
        raise BadInput("needs either task_panel or both tasks and first_seed", where="eval")
    return task_panel(env_name, env_params, range(int(first), int(first) + int(tasks)))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _field_problem(row: dict[str, Any], field: str) -> str | None:
    value = row[field]
    if field in ("study", "method", "task_id", "category"):
        return None if isinstance(value, str) and value else "expected a non-empty string"
    if field == "task_hash":
        return None if isinstance(value, str) and SHA256_RE.match(value) else "expected 64 lowercase hex digits"
    if field == "success":
        return None if _is_int(value) and value in (0, 1) else "expected 0 or 1"
    if field == "reward":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        return None if ok else "expected a finite number"
    return None if _is_int(value) and value >= 0 else "expected a non-negative integer"


def check_rows(rows: list[Any], *, config: dict[str, Any], step: int, source: str) -> None:
    """Raise BadInput on the first problem; the message names `source`, the row number and the field."""
    expected = {"study": config["study"], "method": config["method"], "seed": config["seed"], "step": step}
    validator = schema.validator(OUTCOMES_SCHEMA)
    seen: Counter = Counter()
    for number, row in enumerate(rows, start=1):
        where = f"row {number}"
        if not isinstance(row, dict):
            raise BadInput(f"expected an object, got {type(row).__name__}", path=source, where=where)
        missing = [f for f in FIELDS if f not in row]
        if missing:
            raise BadInput(f"missing field(s) {', '.join(missing)}", path=source, where=where)
        for field in FIELDS:
            problem = _field_problem(row, field)
            if problem:
                raise BadInput(f"{problem}, got {row[field]!r}", path=source, where=f"{where}: {field}")
        for field, value in expected.items():
            if row[field] != value:
                raise BadInput(
                    f"expected {value!r} (this run and checkpoint), got {row[field]!r}",
                    path=source,
                    where=f"{where}: {field}",
                )
        error = next(iter(validator.iter_errors(row)), None)
        if error is not None:
            field_path = ".".join(str(p) for p in error.absolute_path) or "(row)"
            raise BadInput(f"{error.message} (outcomes schema)", path=source, where=f"{where}: {field_path}")
        key = (row["task_id"], row["episode"])
        if key in seen:
            raise BadInput(f"duplicate (task_id, episode) = {key}", path=source, where=where)
        seen[key] += 1
    if not rows:
        raise BadInput("no outcome rows", path=source)
    _check_panel(rows, config, source)


def _check_panel(rows: list[dict[str, Any]], config: dict[str, Any], source: str) -> None:
    evaluation = EvalConfig.of(config, path=source)
    panel = evaluation.task_panel
    if panel is None:
        return
    episodes = evaluation.episodes_per_task
    by_id = {task["task_id"]: task for task in panel}
    played: Counter = Counter()
    for number, row in enumerate(rows, start=1):
        task = by_id.get(row["task_id"])
        where = f"row {number}"
        if task is None:
            raise BadInput(
                f"task {row['task_id']!r} is not in the frozen task panel (eval.task_panel)",
                path=source,
                where=f"{where}: task_id",
            )
        if row["task_hash"] != task["task_hash"]:
            raise BadInput(
                f"task {row['task_id']!r} was played with content {row['task_hash']}, the lock froze {task['task_hash']}",
                path=source,
                where=f"{where}: task_hash",
            )
        if "category" in task and row["category"] != task["category"]:
            raise BadInput(
                f"expected category {task['category']!r}, got {row['category']!r}",
                path=source,
                where=f"{where}: category",
            )
        if row["episode"] >= episodes:
            raise BadInput(
                f"episode {row['episode']} but eval.episodes_per_task = {episodes}",
                path=source,
                where=f"{where}: episode",
            )
        played[row["task_id"]] += 1
    missing = [t for t in by_id if played[t] != episodes]
    if missing:
        raise BadInput(
            f"{len(missing)} task(s) of the panel not played {episodes} time(s), first {missing[0]!r}", path=source
        )
