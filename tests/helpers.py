"""Shared test helpers (import with `from helpers import ...`; tests/ is on pytest's pythonpath).

`require(name)` skips a test whose dependency (Debian's chromium, a local SLURM, the alfworld package) is missing, unless
AGENTREPRO_REQUIRE lists it: then the missing dependency is a failure, so CI never passes by skipping.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"  # reference data, each folder with a README of its provenance


def require(name: str, available: bool, why: str) -> None:
    required = {s.strip() for s in os.environ.get("AGENTREPRO_REQUIRE", "").split(",") if s.strip()}
    if available:
        return
    if name in required:
        pytest.fail(f"{name} is required here (AGENTREPRO_REQUIRE) but {why}")
    pytest.skip(f"{name} not available: {why}")


def require_executable(name: str, executable: str) -> str:
    path = shutil.which(executable)
    require(name, path is not None, f"`{executable}` is not on PATH")
    return path


def require_alfworld() -> None:
    """Skip (or under AGENTREPRO_REQUIRE=alfworld fail) unless the alfworld package and TextWorld are installed."""
    import importlib.util

    installed = all(importlib.util.find_spec(name) is not None for name in ("alfworld", "textworld"))
    require("alfworld", installed, "the alfworld package is not installed (pip install '.[alfworld]')")


def run_cli(
    *args: str,
    cwd: str | os.PathLike | None = None,
    input: str | None = None,
    env: dict | None = None,
    timeout: float = 600,
    prefix: tuple[str, ...] = (),
):
    """Run `python -m agentrepro ARGS` as a subprocess, as a user would (after the words of `prefix`, a command that
    runs it, as podman_kit.stand_in_gpus); returns CompletedProcess."""
    return subprocess.run(
        [*prefix, sys.executable, "-m", "agentrepro", *map(str, args)],
        cwd=cwd,
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def require_vision() -> None:
    """Skip (or under AGENTREPRO_REQUIRE=vision fail) unless the packages holding the sprites are installed."""
    import importlib.util

    installed = all(importlib.util.find_spec(name) is not None for name in ("gym_sokoban", "gymnasium"))
    require("vision", installed, "gym-sokoban and gymnasium are not installed (pip install '.[vision]')")


def step_checkpoint(config: dict, run_dir, step: int):
    """Checkpoint `step` of a run as its backend lays it out (`Backend.checkpoint`)."""
    from agentrepro.backends import get_backend

    return get_backend(config["backend"]["name"]).checkpoint(config, Path(run_dir), step)


def write_alfworld_games(root: Path, names: list[str], *, split_dir: str = "valid_seen") -> list[str]:
    """ALFWorld's layout under `root` (no alfworld package needed), one trial per task directory `name`: traj_data.json
    with the task type its name starts with, and a solvable game.tw-pddl; returns the games' ids (their directories)."""
    import json

    ids = []
    for name in names:
        trial = Path(root) / "json_2.1.1" / split_dir / name / "trial_T20190907_000000_000000"
        trial.mkdir(parents=True)
        (trial / "traj_data.json").write_text(json.dumps({"task_type": name.split("-")[0]}))
        (trial / "game.tw-pddl").write_text(
            json.dumps({"solvable": True, "pddl_domain": "d", "grammar": "g", "pddl_problem": "p"})
        )
        ids.append(trial.relative_to(root).as_posix())
    return sorted(ids)
