"""Shared pieces of the converters that turn another framework's outputs into the run contract.

* `outcome_row(...)`: one docs/design.md §3.4 row from a framework's per-episode record. The task is found in
  the frozen task panel (eval.task_panel) by id (a string) or by position (an integer index, for
  frameworks that only know the order of their evaluation prompts). External frameworks do not know
  our task hashes, so task_hash and category come from the panel, and the row says so
  (`task_hash_source: "panel"`): it proves which panel task the row claims, not the content played.
* `episode_rows(...)`: every outcome row of one framework file of per-episode records, given the names of
  its fields (`EpisodeFields`); repeated tasks get episode 0, 1, ... in file order.
* `success_value(...)`: a framework's success flag (bool, 0/1) as 0/1, or a reward compared with a threshold.
* `merge_metric_records(...)`: per-step dicts, merged when a framework logs one step in several calls,
  renamed to docs/design.md §3.3 names where a mapping says so (the original keys are kept as they are).
* `write_metrics(...)`: metrics.jsonl and timings.jsonl, atomically.

Every problem is BadInput naming the framework file, its line and the field.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrepro.errors import BadInput
from agentrepro.fileio import atomic_write_jsonl
from agentrepro.layout import RunFiles
from agentrepro.reading import iter_jsonl
from agentrepro.runconfig import EvalConfig


def panel_of(config: dict[str, Any], source: Path) -> list[dict[str, Any]]:
    panel = EvalConfig.of(config, path=source).task_panel
    if not panel:
        raise BadInput("the run config has no eval.task_panel to map the framework's tasks onto", path=source)
    return panel


def find_task(panel: list[dict[str, Any]], key: Any, *, source: Path, where: str) -> dict[str, Any]:
    if isinstance(key, bool):
        raise BadInput(f"expected a task id or index, got {key!r}", path=source, where=where)
    if isinstance(key, int):
        if not 0 <= key < len(panel):
            raise BadInput(f"task index {key} outside the task panel (0..{len(panel) - 1})", path=source, where=where)
        return panel[key]
    for task in panel:
        if task["task_id"] == key:
            return task
    raise BadInput(f"task {key!r} is not in the frozen task panel", path=source, where=where)


def success_value(
    record: dict[str, Any], *, key: str | None, reward_key: str, threshold: float, source: Path, where: str
) -> int:
    """0/1 from record[key] (bool or 0/1), or, when key is None, record[reward_key] >= threshold."""
    if key is not None:
        if key not in record:
            raise BadInput(
                f"no field {key!r} (set the backend's success_key, or null to use the reward)", path=source, where=where
            )
        value = record[key]
        if isinstance(value, bool) or value in (0, 1):
            return int(value)
        raise BadInput(f"field {key!r}: expected a boolean or 0/1, got {value!r}", path=source, where=where)
    return int(number(record, reward_key, source=source, where=where) >= threshold)


def number(record: dict[str, Any], key: str, *, source: Path, where: str) -> float:
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise BadInput(f"field {key!r}: expected a finite number, got {value!r}", path=source, where=where)
    return float(value)


def count(record: dict[str, Any], key: str, *, source: Path, where: str, default: int | None = None) -> int:
    if key not in record and default is not None:
        return default
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadInput(f"field {key!r}: expected a non-negative integer, got {value!r}", path=source, where=where)
    return value


def outcome_row(
    config: dict[str, Any],
    step: int,
    task: dict[str, Any],
    *,
    episode: int,
    success: int,
    reward: float,
    turns: int,
    tokens: int,
    category: str | None = None,
) -> dict[str, Any]:
    return {
        "study": config["study"],
        "method": config["method"],
        "seed": config["seed"],
        "step": step,
        "task_id": task["task_id"],
        "task_hash": task["task_hash"],
        "category": task.get("category") or category or (config.get("env") or {}).get("name", "unknown"),
        "episode": episode,
        "success": success,
        "reward": reward,
        "turns": turns,
        "tokens": tokens,
        "task_hash_source": "panel",
    }


@dataclass(frozen=True)
class EpisodeFields:
    """Where a framework's per-episode record keeps each outcome field (None: not there)."""

    task: str
    reward: str
    turns: str
    tokens: str
    category: str
    success: str | None = None  # a success flag; None: reward >= threshold
    threshold: float = 1.0
    task_id: Callable[[Any], Any] | None = None  # the panel's task id of the framework's task field (None: as it is)


def episode_rows(config: dict[str, Any], step: int, path: Path, fields: EpisodeFields) -> list[dict[str, Any]]:
    """Outcome rows (docs/design.md §3.4) of the per-episode records in `path`, one per record, in file order."""
    panel = panel_of(config, path)
    rows: list[dict[str, Any]] = []
    episodes: dict[Any, int] = {}
    for line, record in read_records(path):
        where = f"line {line}"
        if fields.task not in record:
            raise BadInput(
                f"no field {fields.task!r} to identify the task (set backend.task_key)", path=path, where=where
            )
        key = (
            fields.task_id(record[fields.task])
            if fields.task_id and isinstance(record[fields.task], str)
            else record[fields.task]
        )
        task = find_task(panel, key, source=path, where=f"{where}: {fields.task}")
        episode = episodes.get(task["task_id"], 0)
        episodes[task["task_id"]] = episode + 1
        rows.append(
            outcome_row(
                config,
                step,
                task,
                episode=episode,
                success=success_value(
                    record,
                    key=fields.success,
                    reward_key=fields.reward,
                    threshold=fields.threshold,
                    source=path,
                    where=where,
                ),
                reward=number(record, fields.reward, source=path, where=where),
                turns=count(record, fields.turns, source=path, where=where),
                tokens=count(record, fields.tokens, source=path, where=where),
                category=record.get(fields.category),
            )
        )
    return rows


def read_records(path: Path) -> Iterable[tuple[int, dict[str, Any]]]:
    if not path.is_file():
        raise BadInput("file not found (did the framework write it?)", path=path)
    for number_, record in iter_jsonl(path):
        if not isinstance(record, dict):
            raise BadInput(f"expected a JSON object, got {type(record).__name__}", path=path, where=f"line {number_}")
        yield number_, record


def merge_metric_records(
    records: Iterable[tuple[int, dict[str, Any]]],
    *,
    rename: dict[str, tuple[str, ...]],
    cumulative: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """records: (step, metrics). Returns one row per step >= 1, sorted, with `step`, renamed fields and
    cumulative sums (`cumulative`: new name -> per-step source name)."""
    by_step: dict[int, dict[str, Any]] = {}
    for step, metrics in records:
        by_step.setdefault(step, {}).update(metrics)
    rows: list[dict[str, Any]] = []
    totals: dict[str, Any] = {}
    for step in sorted(s for s in by_step if s >= 1):
        raw = by_step[step]
        row: dict[str, Any] = {"step": step}
        for name, candidates in rename.items():
            for candidate in candidates:
                if candidate in raw:
                    row[name] = raw[candidate]
                    break
        for name, source_name in (cumulative or {}).items():
            if source_name in raw:
                totals[name] = totals.get(name, 0) + raw[source_name]
                row[name] = totals[name]
        row.update({k: v for k, v in raw.items() if k not in row})
        rows.append(row)
    return rows


def write_metrics(run_dir: Path, metrics: list[dict[str, Any]], timings: list[dict[str, Any]] | None = None) -> None:
    atomic_write_jsonl(Path(run_dir) / RunFiles.METRICS, metrics)
    if timings:
        atomic_write_jsonl(Path(run_dir) / RunFiles.TIMINGS, timings)
