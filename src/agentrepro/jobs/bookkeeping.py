"""What every job records and checks around a backend (docs/design.md §3.3).

* `provenance_base(config, resolved_sha)`: the run's identity written with every attempt (the lock hash, verified
  against the lock file when it is at hand, the resolved-config hash, the package versions).
* `write_command(run_dir, command)`: command.txt.
* `clear_outputs(run_dir)`: what `--no-resume` removes (only the names of the run contract).
* `check_training_outputs(run_dir, resolved)`: the minimum a finished training must have written.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from agentrepro.attempts import package_versions
from agentrepro.errors import BadInput, Failure
from agentrepro.fileio import atomic_write_text
from agentrepro.layout import RunFiles, checkpoint_dir
from agentrepro.lockfile import lock_sha256
from agentrepro.reading import iter_jsonl, load_json

# What `--no-resume` removes: the run contract's outputs, never anything else in the directory.
OUTPUT_NAMES = (
    RunFiles.RESOLVED_CONFIG,
    RunFiles.COMMAND,
    *RunFiles.STEP_LOGS,
    RunFiles.WARMSTART,
    RunFiles.WANDB_RUN,
    RunFiles.BATCHES,
    RunFiles.CHECKPOINTS,
    RunFiles.EVAL,
    RunFiles.OUTPUTS,
)


def write_command(run_dir: Path, command: str) -> None:
    atomic_write_text(run_dir / RunFiles.COMMAND, command + "\n")


def lock_identity(config: dict[str, Any], root: Path = Path(".")) -> dict[str, Any]:
    """The lock hash the run carries; when the lock file is at hand, it must hash to that value."""
    lock = config.get("lock")
    if lock is None:
        return {"lock_sha256": None, "lock_path": None, "lock_verified": False}
    path = root / lock["path"]
    verified = False
    if path.is_file():
        actual = lock_sha256(load_json(path))
        if actual != lock["sha256"]:
            raise BadInput(
                f"the lock file hashes to {actual}, the config says {lock['sha256']} (re-run `agentrepro resolve`)",
                path=path,
                where="lock.sha256",
            )
        verified = True
    return {"lock_sha256": lock["sha256"], "lock_path": lock["path"], "lock_verified": verified}


def provenance_base(config: dict[str, Any], resolved_sha: str, *, root: Path = Path(".")) -> dict[str, Any]:
    return {
        "study": config["study"],
        "method": config["method"],
        "seed": config["seed"],
        "backend": config["backend"]["name"],
        **lock_identity(config, root),
        "resolved_config_sha256": resolved_sha,
        "packages": package_versions(),
    }


def has_checkpoints(run_dir: Path) -> bool:
    ckpt = checkpoint_dir(run_dir)
    return ckpt.is_dir() and any(ckpt.iterdir())


def clear_outputs(run_dir: Path, names: tuple[str, ...] = OUTPUT_NAMES) -> list[str]:
    """Remove the run contract's outputs (not provenance.json, logs/, or the input config; `names`: another
    directory's list, e.g. a warm start's); returns the names removed."""
    removed = []
    for name in names:
        path = run_dir / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
            removed.append(name)
        elif path.exists() or path.is_symlink():
            path.unlink()
            removed.append(name)
    return removed


def check_training_outputs(run_dir: Path, resolved: dict[str, Any]) -> None:
    """metrics.jsonl exists, every row has an integer `step`, steps increase and end at train.steps."""
    path = run_dir / RunFiles.METRICS
    if not path.is_file():
        raise Failure(f"{path}: the backend finished without writing {RunFiles.METRICS}")
    last = None
    for number, row in iter_jsonl(path):
        step = row.get("step") if isinstance(row, dict) else None
        if not isinstance(step, int) or isinstance(step, bool):
            raise Failure(f"{path}: line {number}: expected an object with an integer `step`")
        if last is not None and step <= last:
            raise Failure(f"{path}: line {number}: step {step} does not follow step {last}")
        last = step
    wanted = (resolved.get("train") or {}).get("steps")
    if isinstance(wanted, int) and wanted > 0 and last != wanted:
        raise Failure(f"{path}: training ended at step {last}, the config asks for train.steps = {wanted}")
