"""The Weights & Biases run of a run directory, so that every attempt of a run logs to one W&B run.

`wandb_run(run_dir, study=, method=, seed=)` is the run's record, `wandb_run.json` in the run directory: its W&B
id, project and name, made at the run's first use of W&B and read by every later attempt (a resumed attempt
continues the same W&B run, `resume="allow"`), and removed with the run's other outputs when it starts over
(`agentrepro train --no-resume`), so that a run started over is a new W&B run. The builtin trainer passes the
record to `wandb.init`; a framework's own `wandb.init` reads it from the environment (`environment`: WANDB_RUN_ID,
WANDB_RESUME, WANDB_PROJECT, WANDB_NAME, WANDB_DIR, and WANDB_MODE offline unless it is set). `recorded(run_dir)`
is the id the run's provenance records.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path
from typing import Any

from agentrepro.errors import BadInput
from agentrepro.fileio import atomic_write_json
from agentrepro.layout import RunFiles
from agentrepro.reading import load_json

PROJECT = "agentrepro"
ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}\Z")  # the characters and length W&B accepts in a run id


def wandb_run(run_dir: str | os.PathLike, *, study: str, method: str, seed: int) -> dict[str, str]:
    """The run directory's W&B run ({id, project, name}), made and written on first use."""
    path = Path(run_dir) / RunFiles.WANDB_RUN
    if path.is_file():
        record = load_json(path)
        if not isinstance(record, dict) or not ID_RE.match(str(record.get("id", ""))):
            raise BadInput("expected {id, project, name} with a W&B run id", path=path, where="id")
        return {k: str(record[k]) for k in ("id", "project", "name")}
    stem = re.sub(r"[^A-Za-z0-9_-]", "-", f"{study}-{method}-seed{seed}")[:48]
    record = {"id": f"{stem}-{secrets.token_hex(4)}", "project": PROJECT, "name": f"{study}/{method}/seed{seed}"}
    atomic_write_json(path, record)
    return record


def environment(record: dict[str, str], logs: str | os.PathLike) -> dict[str, str]:
    """The variables a framework's own `wandb.init` reads to log to `record`'s run, into `logs`."""
    return {
        "WANDB_RUN_ID": record["id"],
        "WANDB_RESUME": "allow",
        "WANDB_PROJECT": record["project"],
        "WANDB_NAME": record["name"],
        "WANDB_DIR": str(logs),
        "WANDB_MODE": os.environ.get("WANDB_MODE", "offline"),
    }


def recorded(run_dir: str | os.PathLike) -> Any:
    """The W&B id of the run directory's record, None when the run never logged to W&B."""
    path = Path(run_dir) / RunFiles.WANDB_RUN
    return load_json(path).get("id") if path.is_file() else None
