"""What a backend's job runs, as data: the programs (argv, environment, working directory) in order.

A backend that drives an external framework lists its programs with `Backend.launches(...)`: data
preparation, the training launch, an evaluation. `agentrepro command` prints them for review before a
study is frozen, the job runs them (`run_launch`, the one place a job's programs start), and nothing here is ever
joined into shell syntax except `shown()`, which quotes each word for a person to read or copy.

`contain(...)` puts a launch into the container of the job's placement (agentrepro.containers): the launch then
holds the runtime's command line, exactly what runs and what `agentrepro command` prints, and `run_launch` records
its proof (`containers.proven`) in the job's directory: the run's, or an evaluation's. Every launch it returns is
offline (`OFFLINE`): a compute node has no network, and a download would fetch a hub's `main` instead of the pinned
revision, so Hugging Face's libraries read only local files and caches; a launch's own value of one of them wins.
"""

from __future__ import annotations

import contextlib
import shlex
import subprocess
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agentrepro import containers
from agentrepro.backends import ray_head
from agentrepro.layout import RunFiles
from agentrepro.process import run_logged, stop_tree

# Hugging Face hub, datasets and transformers: local files and caches only, never a download
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@dataclass(frozen=True)
class Launch:
    """One program a job runs: `purpose` names it for people ("prepare data", "train", "evaluate step 50")."""

    purpose: str
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    contained: containers.Program | None = (
        None  # the program in its container (contain), whose proof run_launch records
    )
    job_dir: Path | None = None  # where that proof goes: the run's directory or the evaluation's
    owner: Path | None = None  # the owner lock run_launch holds while it runs (contain; ray_head.owned)

    def shown(self) -> str:
        """The command as a person would type it: `cd DIR && NAME=value ... argv`, every word quoted."""
        words = [f"{name}={shlex.quote(value)}" for name, value in sorted(self.env.items())]
        words += [shlex.quote(word) for word in self.argv]
        prefix = f"cd {shlex.quote(str(self.cwd))} && " if self.cwd else ""
        return prefix + " ".join(words)


def contain(
    launch: Launch,
    config: dict[str, Any],
    *,
    run_dir: Path,
    job_dir: Path,
    label: str,
    extra: Iterable[Path] = (),
    shared: Iterable[Path] = (),
) -> Launch:
    """`launch` as it runs in the container of the run config's placement (containers.program: the run directory,
    study root, checkout, data and model mounted, with `extra` read-only and `shared` read-write), its container's ID
    and proof kept under `job_dir` as `label`; without a container, as it is but offline."""
    owner = ray_head.owner_lock(job_dir, label)  # held by run_launch, watched by the head
    launch = replace(launch, env={**OFFLINE, **launch.env, ray_head.OWNER_ENV: str(owner)}, owner=owner)
    program = containers.program(
        config,
        launch.argv,
        launch.env,
        launch.cwd,
        run_dir=Path(run_dir),
        job_dir=Path(job_dir),
        label=label,
        extra=extra,
        shared=shared,
    )
    if program.container is None:
        return launch
    return Launch(launch.purpose, program.argv, dict(program.env), program.cwd, program, Path(job_dir), owner)


def proven(launch: Launch, run_dir: Path) -> contextlib.AbstractContextManager:
    """Around the run of `launch`: its image prepared and its proof recorded (containers.proven) when it is contained."""
    return (
        contextlib.nullcontext()
        if launch.contained is None
        else containers.proven(launch.contained, Path(launch.job_dir or run_dir))
    )


def run_launch(launch: Launch, run_dir: Path, label: str, *, abandon: threading.Event | None = None) -> None:
    """Run one launch, no shell, with its output appended to RUN_DIR/logs/<label>.stdout.log and .stderr.log;
    Failure names the exit status and the last line of stderr (process.run_logged). A contained launch runs with
    its image prepared and its proof recorded (containers.proven); a launch made by `contain` with its owner lock held
    (ray_head.owned), which its Ray head watches so that it ends with the process running it. Once `abandon` is set
    (the training's worker nodes failed: ray_nodes.worker_nodes), that lock is let go, which stops the program."""
    finished = threading.Event()
    with ray_head.owned(launch.owner) if launch.owner else contextlib.nullcontext() as let_go, proven(launch, run_dir):
        if abandon is not None and let_go is not None:
            threading.Thread(target=_let_go_when, args=(abandon, finished, let_go), daemon=True).start()
        try:
            run_logged(
                list(launch.argv),
                log_dir=Path(run_dir) / RunFiles.LOGS,
                label=label,
                cwd=launch.cwd,
                env=dict(launch.env),
                stop=_stopper(launch),
            )
        finally:
            finished.set()


def _stopper(launch: Launch) -> Callable[[subprocess.Popen], None]:
    """How an interrupted launch is ended: its container first (containers.stop: SLURM signals none of its
    processes), then the process it runs on this host (the runtime's client, or the program itself)."""
    contained = launch.contained
    if contained is None:
        return stop_tree

    def stop(proc: subprocess.Popen) -> None:
        containers.stop(contained)
        stop_tree(proc)

    return stop


def _let_go_when(abandon: threading.Event, finished: threading.Event, let_go) -> None:
    """Let go of the owner lock once `abandon` is set, unless the program has `finished` (and the lock is gone)."""
    while not finished.is_set():
        if abandon.wait(0.5):
            if not finished.is_set():
                let_go()
            return
