"""The Relax reader: the per-turn records Relax's GraphGPO agent exports (`$RELAX_OUTPUT_JSON`, JSONL, one record
per environment turn, examples/graphgpo/rollout_agent.py::write_session_output), made one record per trajectory.

A line is `{"name": "turn_NNN", "messages": [...], "reward": ..., "metadata": {...}}`; what is read is the
metadata: `trajectory_id` (one managed session, one trajectory), `task_id` (the game's path relative to
ALFWORLD_DATA, ending in game.tw-pddl, which names the game's folder), `turn_index`, `success` (episode-level, the
same on every turn) and `episode_return` (likewise). The trajectory is the episode: its success, its return as
the reward, and its number of turns; as Relax's own evaluation logger does (examples/graphgpo/eval_logger.py), a
trajectory whose rows disagree on success or return is refused. Relax's records carry no method, seed or step
(they live in the recipe's directories), so the import is given them (`--method`, `--seed`, `--step`); its
rollout_result/eval/*.jsonl summaries carry no task and are not read.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from agentrepro.errors import BadInput
from agentrepro.importing.records import Record
from agentrepro.reading import iter_jsonl

GAME_FILE = "/game.tw-pddl"  # a task_id names the game file; the panel names its folder


def _given(given: dict[str, Any], path: Path) -> tuple[str, int, int]:
    missing = [f"--{k}" for k in ("method", "seed", "step") if given.get(k) is None]
    if missing:
        raise BadInput(
            f"Relax's records name no method, seed or step: give {', '.join(missing)} (the run's)",
            path=path,
        )
    return given["method"], given["seed"], given["step"]


def read_relax(path: Path, source: int, given: dict[str, Any]) -> list[Record]:
    """One record per trajectory of the file; BadInput names the file and the line of the first turn record that
    cannot be read or that disagrees with its trajectory's earlier turns."""
    path = Path(path)
    method, seed, step = _given(given, path)
    trajectories: dict[str, dict[str, Any]] = {}
    for line, obj in iter_jsonl(path):
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        if not isinstance(meta, dict):
            raise BadInput("expected a turn record with a metadata object", path=path, where=f"line {line}")
        fields: dict[str, Any] = {
            k: meta.get(k) for k in ("trajectory_id", "task_id", "success", "episode_return", "turn_index")
        }
        for key in ("trajectory_id", "task_id"):
            if not isinstance(fields[key], str) or not fields[key] or len(fields[key]) > 1000:
                raise BadInput("expected a non-empty string", path=path, where=f"line {line}: metadata.{key}")
        if not isinstance(fields["success"], bool):
            raise BadInput("expected true or false", path=path, where=f"line {line}: metadata.success")
        ret = fields["episode_return"]
        if isinstance(ret, bool) or not isinstance(ret, (int, float)) or not math.isfinite(ret) or abs(ret) > 1e100:
            raise BadInput("expected a finite number", path=path, where=f"line {line}: metadata.episode_return")
        turn = fields["turn_index"]
        if isinstance(turn, bool) or not isinstance(turn, int) or not 0 <= turn < 1_000_000:
            raise BadInput("expected a turn number", path=path, where=f"line {line}: metadata.turn_index")
        seen = trajectories.setdefault(fields["trajectory_id"], {**fields, "line": line, "turns": set()})
        for key in ("task_id", "success", "episode_return"):
            if seen[key] != fields[key]:
                raise BadInput(
                    f"trajectory {fields['trajectory_id']!r} has {key} {seen[key]!r} at line {seen['line']} and "
                    f"{fields[key]!r} here",
                    path=path,
                    where=f"line {line}: metadata.{key}",
                )
        if turn in seen["turns"]:
            raise BadInput(
                f"turn {turn} of trajectory {fields['trajectory_id']!r} given twice", path=path, where=f"line {line}"
            )
        seen["turns"].add(turn)
    if not trajectories:
        raise BadInput("holds no turn record", path=path)
    return [
        Record(
            method=method,
            seed=seed,
            step=step,
            task=t["task_id"].removesuffix(GAME_FILE),
            success=int(t["success"]),
            source=source,
            line=t["line"],
            reward=float(t["episode_return"]),
            turns=len(t["turns"]),
        )
        for t in trajectories.values()
    ]
