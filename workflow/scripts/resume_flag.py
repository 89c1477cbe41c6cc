"""Print the `agentrepro train` flag for a run: nothing (resume) or `--no-resume` (the run's config changed).

    python workflow/scripts/resume_flag.py RUN_DIR/config.yaml RUN_DIR [--from-warmstart WARMSTART_DIR]

Snakemake re-runs a train job for two reasons: the job did not finish (a failure, a kill, a retry: resume
from the last checkpoint of the same config), or its config changed (a re-frozen lock, new method
overrides: the old checkpoints belong to another config, so the run starts again; `agentrepro train
--no-resume` keeps provenance.json and the logs). The run's previous `resolved_config.yaml` is the config it
was trained from plus backend defaults, so the config is unchanged exactly when every key of the new
config.yaml has the same value there. A run started from a shared warm start also starts again when that warm
start was made again (its seal is not the one the run's warmstart.json records).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from agentrepro.fileio import sha256_file
from agentrepro.layout import RunFiles
from agentrepro.reading import load_json, load_yaml


def contained(new: Any, old: Any) -> bool:
    """Every key of `new` is in `old` with an equal value (mappings compared recursively)."""
    if isinstance(new, dict):
        return isinstance(old, dict) and all(k in old and contained(v, old[k]) for k, v in new.items())
    return new == old


def same_warmstart(run_dir: str | Path, warmstart_dir: str | Path) -> bool:
    """Whether the run's warmstart.json records this warm start's seal (a run not started yet: vacuously true)."""
    record = Path(run_dir) / RunFiles.WARMSTART
    if not record.is_file():
        return True
    shared = load_json(record).get("shared") or {}
    seal = Path(warmstart_dir) / RunFiles.OUTPUTS
    return seal.is_file() and shared.get("outputs_sha256") == sha256_file(seal)


def flag(config_path: str | Path, run_dir: str | Path, warmstart_dir: str | Path | None = None) -> str:
    previous = Path(run_dir) / RunFiles.RESOLVED_CONFIG
    if not previous.is_file():
        return ""
    if warmstart_dir is not None and not same_warmstart(run_dir, warmstart_dir):
        return "--no-resume"
    new, old = load_yaml(config_path), load_yaml(previous, fast=True)
    return "" if contained(new, old) else "--no-resume"


if __name__ == "__main__":
    if len(sys.argv) not in (3, 5) or (len(sys.argv) == 5 and sys.argv[3] != "--from-warmstart"):
        raise SystemExit(f"usage: {sys.argv[0]} RUN_DIR/config.yaml RUN_DIR [--from-warmstart WARMSTART_DIR]")
    print(flag(sys.argv[1], sys.argv[2], sys.argv[4] if len(sys.argv) == 5 else None))
