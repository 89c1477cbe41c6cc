"""Print the `agentrepro train` flag for a run: nothing (resume) or `--no-resume` (the run's config changed).

    python workflow/scripts/resume_flag.py RUN_DIR/config.yaml RUN_DIR

Snakemake re-runs a train job for two reasons: the job did not finish (a failure, a kill, a retry: resume
from the last checkpoint of the same config), or its config changed (a re-frozen lock, new method
overrides: the old checkpoints belong to another config, so the run starts again; `agentrepro train
--no-resume` keeps provenance.json and the logs). The run's previous `resolved_config.yaml` is the config it
was trained from plus backend defaults, so the config is unchanged exactly when every key of the new
config.yaml has the same value there.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from agentrepro.layout import RunFiles


def contained(new: Any, old: Any) -> bool:
    """Every key of `new` is in `old` with an equal value (mappings compared recursively)."""
    if isinstance(new, dict):
        return isinstance(old, dict) and all(k in old and contained(v, old[k]) for k, v in new.items())
    return new == old


def flag(config_path: str | Path, run_dir: str | Path) -> str:
    previous = Path(run_dir) / RunFiles.RESOLVED_CONFIG
    if not previous.is_file():
        return ""
    with open(config_path, encoding="utf-8") as fh:
        new = yaml.safe_load(fh)
    with open(previous, encoding="utf-8") as fh:
        old = yaml.safe_load(fh)
    return "" if contained(new, old) else "--no-resume"


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(f"usage: {sys.argv[0]} RUN_DIR/config.yaml RUN_DIR")
    print(flag(sys.argv[1], sys.argv[2]))
