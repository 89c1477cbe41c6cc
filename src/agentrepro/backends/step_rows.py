"""The step-row dump inside a framework's processes: `hook_env(config, run_dir)` is the environment that switches on
hooks/agentrepro_step_rows.py for the steps `train.step_rows` names (`runconfig.step_rows`), writing into the run's
`batches/` folder (`layout.batch_dump`'s folder). Empty when the run config names no step, so a job without step
rows runs exactly as before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentrepro.hooks.agentrepro_step_rows import FOLDER, STEPS  # the variables the hook reads, named once
from agentrepro.layout import batch_dump
from agentrepro.runconfig import step_rows


def hook_env(config: dict[str, Any], run_dir: Path) -> dict[str, str]:
    steps = step_rows(config)
    if not steps:
        return {}
    return {STEPS: ",".join(map(str, steps)), FOLDER: str(batch_dump(Path(run_dir).resolve(), 0).parent)}
