"""Helpers of the workflow tests: the tiny study, a Snakemake runner, and the workflow scripts as modules.

The workflow runs with `-s <repo>/Snakefile -d <scratch>`: manifests, locks, runs, analysis and reports are
all written under the scratch directory, never into the repository.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from helpers import REPO, load_file_module

HERE = Path(__file__).resolve().parent
TINY = HERE / "manifests" / "wf-tiny.yaml"
BIN = str(Path(sys.executable).parent)


def load_script(name: str):
    """Import workflow/scripts/<name>.py (not a package) as a module."""
    return load_file_module(f"wf_{name}", REPO / "workflow" / "scripts" / f"{name}.py")


def _snakemake_call(workdir: Path, args: tuple[str, ...], env: dict | None, wrap: list[str] | None) -> dict:
    return {
        "args": [
            *(wrap or []),
            sys.executable,
            "-m",
            "snakemake",
            "-s",
            str(REPO / "Snakefile"),
            "-d",
            str(workdir),
            *args,
        ],
        "cwd": workdir,
        "env": {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}", "WANDB_MODE": "offline", **(env or {})},
    }


def snakemake(
    workdir: Path, *args: str, timeout: float = 600, env: dict | None = None, wrap: list[str] | None = None
) -> subprocess.CompletedProcess:
    """Run `[WRAP] snakemake -s <repo>/Snakefile -d WORKDIR ARGS` as a user would, with this venv's bin on PATH."""
    return subprocess.run(**_snakemake_call(workdir, args, env, wrap), capture_output=True, text=True, timeout=timeout)


def snakemake_in_background(workdir: Path, *args: str) -> subprocess.Popen:
    """Start `snakemake ... ARGS` and return at once; its output goes to WORKDIR/snakemake.log."""
    with open(workdir / "snakemake.log", "wb") as log:
        return subprocess.Popen(**_snakemake_call(workdir, args, None, None), stdout=log, stderr=subprocess.STDOUT)


SLURM_OVERRIDES = ("--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "2")


def study_targets(workdir: Path, study: str) -> list[Path]:
    """Every run directory of a finished study under `workdir`."""
    return sorted(p.parent for p in (workdir / "runs" / study).glob("[!_]*/seed*/OUTPUTS.sha256"))  # not _warmstart/


def processes_in(workdir: Path, needle: str) -> list[int]:
    """PIDs of processes whose working directory is `workdir` and whose command line contains `needle`.

    Used to kill the one evaluation a test started itself (never a process by name).
    """
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if Path(os.readlink(proc / "cwd")) != workdir:
                continue
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if needle in cmdline:
            pids.append(int(proc.name))
    return pids
