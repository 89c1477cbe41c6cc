"""The study's frozen task panel: which evaluation tasks every method and seed is scored on.

Three sources:
* a generated environment (frozenlake, sokoban): `agentrepro.environments.task_panel(name, params, seeds)`
  with seeds `eval.first_seed .. eval.first_seed + eval.tasks - 1`; with image observations
  (`env.params.render_mode: vision`) the versions of the packages that draw the pictures enter
  `resolved.env_packages` (`Env.panel_packages`);
* a game data directory (`data.eval.path` is a directory; alfworld): the environment's `frozen_panel`
  (`agentrepro.environments.alfworld.frozen_panel`): the eligible games of the split `env.split` that `eval.panel`
  selects (a choice the manifest must state, e.g. `first`: the first `eval.tasks` in sorted path order;
  `panel_deviations` records the panel's composition in the lock), each hashed from its two files (`game.tw-pddl`,
  `traj_data.json`).
  Those files also enter the lock's `resolved.files` (so `audit` catches a game changed after freezing) and
  the environment's package versions its `resolved.env_packages`;
* an evaluation data file (`data.eval`, a file): JSONL, one task per line with a string
  `task_id` and optionally `category` and `seed`; the task's hash is the SHA-256 of the line's canonical
  JSON, so any change to a task's definition changes its hash.
Each entry: `{"task_id", "task_hash", "seed", "category"}` (an ALFWorld game has `seed` null: its id is the game).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from agentrepro.environments import REGISTRY, panel_packages, task_panel
from agentrepro.errors import BadInput, Failure
from agentrepro.fileio import sha256_json
from agentrepro.manifest.identifiers import SHA256
from agentrepro.reading import iter_jsonl


def panel_from_file(path: str | os.PathLike, *, tasks: int, env_name: str) -> list[dict[str, Any]]:
    path = Path(path)
    if not path.is_file():
        raise BadInput("evaluation data file not found: the task panel is read from it", path=path)
    panel: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for number, row in iter_jsonl(path):
        if not isinstance(row, dict) or not isinstance(row.get("task_id"), str) or not row["task_id"]:
            raise BadInput("expected an object with a non-empty string task_id", path=path, where=f"line {number}")
        task_id = row["task_id"]
        if task_id in seen:
            raise BadInput(f"task_id {task_id!r} repeats line {seen[task_id]}", path=path, where=f"line {number}")
        seen[task_id] = number
        seed = row.get("seed", len(panel))
        if not isinstance(seed, int):
            raise BadInput(f"seed: expected an integer, got {seed!r}", path=path, where=f"line {number}")
        panel.append(
            {
                "task_id": task_id,
                "task_hash": sha256_json(row),
                "seed": seed,
                "category": str(row.get("category", env_name)),
            }
        )
    if len(panel) != tasks:
        raise BadInput(f"lists {len(panel)} tasks but the manifest's eval.tasks is {tasks}", path=path)
    return panel


def panel_from_environment(name: str, params: dict[str, Any], seeds: list[int]) -> list[dict[str, Any]]:
    """The panel the environments package describes for these seeds, checked."""
    panel = task_panel(name, params, seeds)
    return check_panel(panel, expected=len(seeds), source=f"agentrepro.environments.task_panel({name!r})")


def check_panel(panel: Any, *, expected: int, source: str) -> list[dict[str, Any]]:
    """A panel must be a list of `expected` entries with unique task ids and 64-hex task hashes."""
    if not isinstance(panel, list) or len(panel) != expected:
        raise Failure(
            f"{source} returned {len(panel) if isinstance(panel, list) else type(panel).__name__} tasks, expected {expected}"
        )
    ids = set()
    for entry in panel:
        if not isinstance(entry, dict) or not {"task_id", "task_hash", "seed", "category"} <= set(entry):
            raise Failure(f"{source}: entry {entry!r} lacks task_id, task_hash, seed or category")
        if entry["task_id"] in ids:
            raise Failure(f"{source}: task_id {entry['task_id']!r} appears twice")
        if not isinstance(entry["task_hash"], str) or not SHA256.match(entry["task_hash"]):
            raise Failure(f"{source}: task_hash of {entry['task_id']!r} is not 64 hex digits")
        ids.add(entry["task_id"])
    return [{k: entry[k] for k in ("task_id", "task_hash", "seed", "category")} for entry in panel]


def panel_from_data_dir(
    manifest: dict[str, Any], data_dir: Path, root: Path
) -> tuple[list[dict[str, Any]], dict[str, str], dict[str, str]]:
    """(panel, {root-relative file: SHA-256}, {package: version}) of a game data directory."""
    env = manifest["env"]
    cls = REGISTRY.get(env["name"])
    freeze_panel = getattr(cls, "frozen_panel", None)
    if freeze_panel is None:
        raise BadInput(
            f"environment {env['name']!r} takes no data directory: data.eval.path must be a JSONL file",
            where="data.eval.path",
        )
    params = cls.validate_params(env.get("params", {}))
    selections = getattr(cls, "PANEL_SELECTIONS", {})
    select = manifest["eval"].get("panel")
    if select not in selections:
        raise BadInput(
            "a panel of game files is a choice the manifest states: "
            + "; ".join(f"{name}: {what}" for name, what in selections.items()),
            where="eval.panel",
        )
    panel, files, packages = freeze_panel(data_dir, env["split"], params, manifest["eval"]["tasks"], select)
    panel = check_panel(panel, expected=manifest["eval"]["tasks"], source=f"{cls.__qualname__}.frozen_panel")
    rel = {
        Path(os.path.relpath((data_dir / name).resolve(), root.resolve())).as_posix(): digest
        for name, digest in files.items()
    }
    return panel, rel, packages


def build_panel_sources(
    manifest: dict[str, Any], root: str | os.PathLike
) -> tuple[list[dict[str, Any]], dict[str, str], dict[str, str]]:
    """(panel, files the panel was frozen from with their hashes, package versions the panel depends on)."""
    env, ev, root = manifest["env"], manifest["eval"], Path(root)
    eval_file = manifest.get("data", {}).get("eval")
    if eval_file is not None:
        path = root / eval_file["path"]
        if path.is_dir():
            return panel_from_data_dir(manifest, path, root)
        return panel_from_file(path, tasks=ev["tasks"], env_name=env["name"]), {}, {}
    seeds = list(range(ev["first_seed"], ev["first_seed"] + ev["tasks"]))
    return (
        panel_from_environment(env["name"], env.get("params", {}), seeds),
        {},
        panel_packages(env["name"], env.get("params", {})),
    )


def panel_deviations(manifest: dict[str, Any], root: str | os.PathLike, panel: list[dict[str, Any]]) -> list[str]:
    """The panel's composition as a deviation sentence, for a panel frozen from a game data directory; [] otherwise."""
    eval_file = manifest.get("data", {}).get("eval")
    path = Path(root) / eval_file["path"] if eval_file is not None else None
    cls = REGISTRY.get(manifest["env"]["name"])
    if path is None or not path.is_dir() or not hasattr(cls, "panel_deviation"):
        return []
    return [cls.panel_deviation(path, manifest["env"]["split"], panel, manifest["eval"]["panel"])]


def build_panel(manifest: dict[str, Any], root: str | os.PathLike) -> list[dict[str, Any]]:
    return build_panel_sources(manifest, root)[0]
