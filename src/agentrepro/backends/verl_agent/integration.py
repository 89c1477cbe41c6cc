"""The harness's side of the integration that runs inside verl-agent's processes (hooks/, standard library only).

* `env(run_dir)`: the environment that switches it on in every Python process of the job (driver and Ray workers
  inherit it): the Python path begins with the shared agentrepro/hooks/startup (whose sitecustomize.py installs the
  hooks AGENTREPRO_STARTUP names: agentrepro_verl_hook.py), hooks/ (this backend's integration) and the shared
  agentrepro/hooks/ (the step-row dump, the pinned-signature check and the import patcher, shared with Relax's
  integration).
* `write_panel(config, run_dir)`: verl_panel.json, which validation env i plays game i of.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from agentrepro.backends.ray_head import PYTHONPATH_ENV
from agentrepro.fileio import atomic_write_text
from agentrepro.hooks import HOOKS_DIR as SHARED_HOOKS
from agentrepro.hooks import STARTUP_DIR, STARTUP_ENV
from agentrepro.runconfig import EvalConfig

HOOKS = Path(__file__).resolve().parent / "hooks"
HOOK = "agentrepro_verl_hook"  # in hooks/: what the job's start-up hook installs (hooks/agentrepro_verl_hook.py)
PREPARE = HOOKS / "agentrepro_verl_prepare.py"  # the script's data preparation, its download answered locally
PANEL = "verl_panel.json"


def env(run_dir: Path, *, panel_file: Path | None = None) -> dict[str, str]:
    """Switches the integration on in every Python process of the job (driver and Ray workers)."""
    out = {
        # put before the PYTHONPATH the job's Ray head runs with (the image's own in a container; hooks/agentrepro_ray_head.py)
        PYTHONPATH_ENV: os.pathsep.join(map(str, (STARTUP_DIR, HOOKS, SHARED_HOOKS))),
        STARTUP_ENV: HOOK,
        "AGENTREPRO_VERL_OUT": str(Path(run_dir).resolve()),
    }
    if panel_file is not None:
        out["AGENTREPRO_VERL_PANEL"] = str(panel_file)
    return out


def write_panel(config: dict[str, Any], run_dir: Path) -> Path:
    """The integration's panel: validation env i plays game i. Join point with the ALFWorld task panel
    (environments/alfworld_data.py, frozen in the lock): an entry's `game_file` (or `gamefile`) if it has one;
    else, when data.eval.path is an ALFWorld data directory, `<that directory>/<task_id>/game.tw-pddl`; else the
    task_id itself, which the integration takes under $ALFWORLD_DATA when relative."""
    panel = EvalConfig.of(config).task_panel or []
    data_dir = Path(((config.get("data") or {}).get("eval") or {}).get("path") or "")

    def game(entry: dict[str, Any]) -> str:
        named = entry.get("game_file") or entry.get("gamefile")
        if named:
            return str(named)
        if str(data_dir) != "." and data_dir.is_dir():
            return str((data_dir / entry["task_id"] / "game.tw-pddl").resolve())
        return str(entry["task_id"])

    games = [
        {"task_id": t["task_id"], "task_hash": t.get("task_hash"), "category": t.get("category"), "game_file": game(t)}
        for t in panel
    ]
    path = Path(run_dir) / PANEL
    atomic_write_text(path, json.dumps(games, indent=1) + "\n")
    return path
