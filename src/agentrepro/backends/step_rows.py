"""`train.step_rows`: the training steps whose step rows and trainer advantages a job dumps for the parity
certificate (analysis/parity.py), the same field for every backend.

* `problem(step_rows, steps)`: what is wrong with the field (None when nothing), the one rule: distinct steps in
  [1, steps]. The builtin trainer's config (trainer/config.py) and `named_steps` both ask here.
* `hook_env(config, run_dir)`: the environment that switches on the dump inside a framework's processes
  (hooks/agentrepro_step_rows.py): the steps, and the run's `batches/` folder (`layout.batch_dump`'s folder).
  Empty when the run config names no step, so a job without step rows runs exactly as before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentrepro.errors import BadInput
from agentrepro.hooks.agentrepro_step_rows import FOLDER, STEPS   # the variables the hook reads, named once
from agentrepro.layout import batch_dump


def problem(step_rows, steps) -> str | None:
    if not isinstance(step_rows, (list, tuple)) or any(isinstance(s, bool) or not isinstance(s, int) for s in step_rows):
        return f"expected a list of training steps, got {step_rows!r}"
    if isinstance(steps, int) and any(not 1 <= s <= steps for s in step_rows) or len(set(step_rows)) != len(step_rows):
        return f"expected distinct training steps in [1, steps = {steps}], got {list(step_rows)}"
    return None


def named_steps(config: dict[str, Any]) -> list[int]:
    """The run config's train.step_rows, checked (BadInput naming the field), sorted."""
    train = config.get("train") or {}
    value = train.get("step_rows") or []
    message = problem(value, train.get("steps"))
    if message:
        raise BadInput(message, where="train.step_rows")
    return sorted(value)


def hook_env(config: dict[str, Any], run_dir: Path) -> dict[str, str]:
    steps = named_steps(config)
    if not steps:
        return {}
    return {STEPS: ",".join(map(str, steps)), FOLDER: str(batch_dump(Path(run_dir).resolve(), 0).parent)}
