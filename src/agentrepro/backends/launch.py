"""What a backend's job runs, as data: the programs (argv, environment, working directory) in order.

A backend that drives an external framework lists its programs with `Backend.launches(...)`: data
preparation, the training launch, an evaluation. `agentrepro command` prints them for review before a
study is frozen, the job runs them (`run_launch`, the one place a job's programs start), and nothing here is ever
joined into shell syntax except `shown()`, which quotes each word for a person to read or copy.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from agentrepro.layout import RunFiles
from agentrepro.process import run_logged


@dataclass(frozen=True)
class Launch:
    """One program a job runs: `purpose` names it for people ("prepare data", "train", "evaluate step 50")."""

    purpose: str
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: Path | None = None

    def shown(self) -> str:
        """The command as a person would type it: `cd DIR && NAME=value ... argv`, every word quoted."""
        words = [f"{name}={shlex.quote(value)}" for name, value in sorted(self.env.items())]
        words += [shlex.quote(word) for word in self.argv]
        prefix = f"cd {shlex.quote(str(self.cwd))} && " if self.cwd else ""
        return prefix + " ".join(words)


def run_launch(launch: Launch, run_dir: Path, label: str) -> None:
    """Run one launch, no shell, with its output appended to RUN_DIR/logs/<label>.stdout.log and .stderr.log;
    Failure names the exit status and the last line of stderr (process.run_logged)."""
    run_logged(list(launch.argv), log_dir=Path(run_dir) / RunFiles.LOGS, label=label, cwd=launch.cwd, env=dict(launch.env))
