"""Fixtures of the backend tests: a run config for the command backend driving tests/backends/mini_trainer.py."""

from __future__ import annotations

import hashlib
import shlex
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

MINI = Path(__file__).with_name("mini_trainer.py")


def panel(n: int = 8) -> list[dict]:
    return [
        {
            "task_id": f"frozenlake-{i}",
            "task_hash": hashlib.sha256(f"task {i}".encode()).hexdigest(),
            "seed": i,
            "category": "frozenlake",
        }
        for i in range(n)
    ]


def command_config(**train) -> dict:
    return {
        "study": "mini-study",
        "method": "grpo",
        "seed": 0,
        "backend": {
            "name": "command",
            "command": f"{{python}} {shlex.quote(str(MINI))} train --run {{run_dir}} --steps {{train.steps}} --lr {{train.lr}} --resume {{resume}}",
            "eval_command": f"{{python}} {shlex.quote(str(MINI))} eval --run {{run_dir}} --step {{step}} --out {{outcomes}}",
        },
        "env": {"name": "frozenlake", "params": {}},
        "train": {"steps": 3, "lr": 0.25, **train},
        "eval": {"every": 1, "episodes_per_task": 1, "task_panel": panel()},
    }


@pytest.fixture
def make_config():
    """make_config(**train_overrides) -> a run config for the command backend and the mini trainer."""
    return command_config


@pytest.fixture
def mini_trainer() -> Path:
    return MINI


@pytest.fixture
def write_config(tmp_path):
    """write_config(config) -> path of config.yaml in tmp_path."""

    def _write(config: dict, name: str = "config.yaml") -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        return path

    return _write


@pytest.fixture(scope="session")
def _trained_once(tmp_path_factory):
    """One `agentrepro train` of the command backend (3 steps), shared read-only by the eval tests."""
    from helpers import run_cli

    root = tmp_path_factory.mktemp("trained")
    path = root / "config.yaml"
    path.write_text(yaml.safe_dump(command_config(), sort_keys=False))
    result = run_cli("train", "--config", path, "--out", root / "run")
    assert result.returncode == 0, result.stderr
    return root / "run"


@pytest.fixture
def trained_run(_trained_once, tmp_path):
    """A private copy of a trained run directory (checkpoints at steps 1-3, sealed)."""
    import shutil

    return Path(shutil.copytree(_trained_once, tmp_path / "run"))


# A stand-in for `ray start --head --block`: listens on --port, spawns a child (as the real head spawns
# raylet and GCS), records both PIDs and the arguments, and blocks.
FAKE_RAY = textwrap.dedent("""\
    #!{python}
    import os, socket, subprocess, sys, time, json
    args = sys.argv[1:]
    port = int(next(a for a in args if a.startswith("--port=")).split("=", 1)[1])
    child = subprocess.Popen(["sleep", "300"])
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port)); s.listen()
    with open(os.environ["FAKE_RAY_LOG"], "w") as fh:
        json.dump({{"args": args, "pid": os.getpid(), "child": child.pid, "pgid": os.getpgid(0)}}, fh)
    time.sleep(300)
    """)


@pytest.fixture
def fake_ray(tmp_path):
    """Path of an executable stand-in for `ray` (see FAKE_RAY); FAKE_RAY_LOG names where it records itself."""
    path = tmp_path / "ray"
    path.write_text(FAKE_RAY.format(python=sys.executable))
    path.chmod(0o755)
    return path
