"""Shared test helpers (import with `from helpers import ...`; tests/ is on pytest's pythonpath).

`require(name)` skips a test whose dependency (Debian's chromium, a local SLURM, the alfworld package) is missing, unless
AGENTREPRO_REQUIRE lists it: then the missing dependency is a failure, so CI never passes by skipping.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"  # reference data, each folder with a README of its provenance


def load_file_module(name: str, path: Path) -> ModuleType:
    """Import the Python file `path` (a script outside any package) as module `name`, registered in sys.modules
    (dataclasses look their module up there)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def head_pythonpath(env: dict[str, str], *rest: str | os.PathLike) -> str:
    """The PYTHONPATH a job's Ray head gives its processes: the job's entries (AGENTREPRO_PYTHONPATH in its launch's
    `env`), then the one the head runs with (`rest`: the image's own, or a stand-in checkout)."""
    from agentrepro.hooks.agentrepro_ray_head import PYTHONPATH_ENV

    return os.pathsep.join([env[PYTHONPATH_ENV], *map(str, rest)])


def tar_members(path: str | os.PathLike) -> dict[str, bytes]:
    """Every file of a .tar.gz (a bundle) by its member name."""
    with tarfile.open(path, "r:gz") as tar:
        found = {}
        for member in tar:
            data = tar.extractfile(member)
            assert data is not None, f"{path}: {member.name} is not a file"
            found[member.name] = data.read()
        return found


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
    assert path is not None  # require skipped or failed the test otherwise
    return path


def require_alfworld() -> None:
    """Skip (or under AGENTREPRO_REQUIRE=alfworld fail) unless the alfworld package and TextWorld are installed."""
    import importlib.util

    installed = all(importlib.util.find_spec(name) is not None for name in ("alfworld", "textworld"))
    require("alfworld", installed, "the alfworld package is not installed (pip install '.[alfworld]')")


def in_private_mounts(script: str, *args: str | os.PathLike) -> tuple[str, ...]:
    """The words that run `sh -c SCRIPT sh ARGS...` (then the words after them) in a mount namespace of its own, whose
    mounts never reach the host (`unshare --mount --propagation private`)."""
    return ("unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh", *map(str, args))


def run_cli(
    *args: str | os.PathLike,
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


def require_ray() -> tuple[str, str]:
    """The `ray` executable (AGENTREPRO_RAY, else PATH) and the Python beside it; skip (or under
    AGENTREPRO_REQUIRE=ray fail) without them."""
    ray = os.environ.get("AGENTREPRO_RAY") or shutil.which("ray")
    python = Path(ray).with_name("python") if ray else None
    require(
        "ray",
        python is not None and python.exists(),
        "no `ray` executable (set AGENTREPRO_RAY to one, e.g. a venv's bin/ray)",
    )
    assert ray is not None and python is not None  # require skipped or failed the test otherwise
    return ray, str(python)


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
