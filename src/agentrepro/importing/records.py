"""One evaluated episode as another tool recorded it (`Record`), and the outcome rows made of records (`to_rows`).

Every record keeps where it came from (`source`, an index into the import's list of files, and `line`: the line,
or for a CSV the data row's line), so that each outcome row can be traced back to its record. What a tool did not
write is said, never invented: a record without `reward` takes its success as reward, without `turns` or `tokens`
0, and `to_rows` counts the records that lacked each, so that the import's record names them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from agentrepro.errors import BadInput
from agentrepro.layout import METHOD_RE

OPTIONAL = ("reward", "turns", "tokens")


@dataclass(frozen=True)
class Record:
    """One episode: who (method, seed, step), which task (as the tool names it), how it went."""

    method: str
    seed: int
    step: int
    task: str
    success: int
    source: int  # index into the import's files
    line: int
    reward: float | None = None
    turns: int | None = None
    tokens: int | None = None
    episode: int | None = None


def _panel_index(panel: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """A task of the panel by its task_id, and by its seed (plain files often name a task by its seed)."""
    index: dict[str, dict[str, Any]] = {}
    for task in panel:
        index.setdefault(str(task["seed"]), task)
    for task in panel:
        index[str(task["task_id"])] = task  # an id wins over a seed that reads the same
    return index


def _match(name: str, index: dict[str, dict[str, Any]], panel: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The panel's task a record names: by task_id or seed, else the one task whose id ends the record's path (a
    game path relative to another root: `json_2.1.1/valid_seen/x/trial_1` names the panel's `valid_seen/x/trial_1`)."""
    if name in index:
        return index[name]
    ends = [t for t in panel if name.endswith("/" + str(t["task_id"]))]
    return ends[0] if len(ends) == 1 else None


def to_rows(
    records: list[Record], panel: list[dict[str, Any]], *, study: str, category: str, files: list[str]
) -> tuple[list[dict[str, Any]], list[tuple[int, int]], dict[str, int]]:
    """(outcome rows sorted by method, seed, step, task, episode; each row's (file index, line); for each optional
    field, how many records lacked it). BadInput names the file and the line of the first record that cannot be
    matched."""
    index = _panel_index(panel)
    episodes: Counter = Counter()
    seen: dict[tuple, tuple[int, int]] = {}
    made = []
    for record in records:
        where = f"{files[record.source]}"
        if not METHOD_RE.match(record.method):
            raise BadInput(
                f"method {record.method!r} is not a name the harness can use (letters, digits, . _ - and one @)",
                path=where,
                where=f"line {record.line}: method",
            )
        task = _match(record.task, index, panel)
        if task is None:
            raise BadInput(
                f"task {record.task!r} is not on the frozen panel ({len(panel)} tasks: by task_id or seed)",
                path=where,
                where=f"line {record.line}: task_id",
            )
        run = (record.method, record.seed, record.step, task["task_id"])
        episode = record.episode if record.episode is not None else episodes[run]
        episodes[run] += 1
        key = (*run, episode)
        if key in seen:
            source, line = seen[key]
            raise BadInput(
                f"repeats episode {episode} of {record.method} seed {record.seed} step {record.step} on task "
                f"{task['task_id']} (first at {files[source]} line {line})",
                path=where,
                where=f"line {record.line}",
            )
        seen[key] = (record.source, record.line)
        row = {
            "study": study,
            "method": record.method,
            "seed": record.seed,
            "step": record.step,
            "task_id": task["task_id"],
            "task_hash": task["task_hash"],
            "category": task.get("category") or category,
            "episode": episode,
            "success": record.success,
            "reward": float(record.success if record.reward is None else record.reward),
            "turns": 0 if record.turns is None else record.turns,
            "tokens": 0 if record.tokens is None else record.tokens,
        }
        made.append((key, row, (record.source, record.line)))
    made.sort(key=lambda item: (item[0][0], item[0][1], item[0][2], str(item[0][3]), item[0][4]))
    absent = {f: n for f in OPTIONAL if (n := sum(getattr(r, f) is None for r in records))}
    return [row for _, row, _ in made], [where for _, _, where in made], absent
