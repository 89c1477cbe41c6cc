"""Step rows for the parity certificate, written from inside a framework's processes (docs/design.md §3.5).

Shared by the verl-agent integration (agentrepro_verl_rows.py) and the Relax advantage wrapper
(agentrepro_relax_advantage.py). Switched on by two environment variables the backends set from the run
config's `train.step_rows`:

* AGENTREPRO_STEP_ROWS: the harness steps to dump, comma-separated (e.g. `1,50`);
* AGENTREPRO_STEP_ROWS_DIR: the run's `batches/` folder; step N goes to `<folder>/step<N>.jsonl`
  (`agentrepro.layout.batch_dump` owns that name; tests/hooks/test_step_rows.py keeps the two equal).

Each line is one step row of docs/design.md §3.5 (group, traj, turn, state, next_state, reward,
episode_reward, valid, success) plus `advantage`: the advantage the framework computed for that row.
Python standard library only.
"""

from __future__ import annotations

import json
import os

STEPS, FOLDER = "AGENTREPRO_STEP_ROWS", "AGENTREPRO_STEP_ROWS_DIR"
GOAL = "success"  # the goal node of the step rows (agentrepro.algorithms.batch.GOAL)


def wanted_steps() -> frozenset[int]:
    """The steps named by AGENTREPRO_STEP_ROWS (empty when unset); a malformed value stops the job."""
    text = os.environ.get(STEPS, "").strip()
    if not text or not os.environ.get(FOLDER):
        return frozenset()
    try:
        return frozenset(int(word) for word in text.split(","))
    except ValueError:
        raise RuntimeError(f"agentrepro: {STEPS}={text!r} is not a comma-separated list of steps") from None


def path(step: int) -> str:
    return os.path.join(os.environ[FOLDER], f"step{int(step)}.jsonl")


def write_error(step: int, message: str) -> str:
    """Record why the rows of `step` could not be written (`<file>.error`, read by the certificate): a failure
    of this diagnostic never stops the framework's training."""
    target = path(step) + ".error"
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, "w", encoding="utf-8") as f:
        f.write(message.strip() + "\n")
    return target


def _text(rows: list[dict]) -> str:
    return "".join(json.dumps(row, sort_keys=True, allow_nan=False) + "\n" for row in rows)


def write(step: int, rows: list[dict]) -> str:
    """Write the whole batch of `step` (replacing an earlier file, e.g. of a step run again after a resume)."""
    target = path(step)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target + ".tmp", "w", encoding="utf-8") as f:
        f.write(_text(rows))
    os.replace(target + ".tmp", target)
    return target


def append(step: int, rows: list[dict]) -> str:
    """Add one rollout group's rows to `step` with a single O_APPEND write (groups may come from several
    processes of one node; each group's lines stay together)."""
    target = path(step)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    data = _text(rows).encode("utf-8")
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        written = os.write(fd, data)
        if written != len(data):
            raise RuntimeError(f"agentrepro: short write to {target} ({written} of {len(data)} bytes)")
    finally:
        os.close(fd)
    return target
