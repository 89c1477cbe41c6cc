"""The full default study as a background run shared by its tests (tests/workflow/test_default_study.py).

`make test` with AGENTREPRO_FULL_STUDY=1 starts it when collection ends (tests/workflow/conftest.py), so
Snakemake's 2-core run of the 12 training jobs overlaps the rest of the suite; the study's tests wait for it.
A session that ends early (`-x`, Ctrl-C) stops it and everything it started, by PID.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import psutil
import pytest
from helpers import REPO
from wfkit import snakemake_in_background

STUDY = "frozenlake-cpu"
TIMEOUT_S = 3600
_RUN = pytest.StashKey[tuple[Path, subprocess.Popen]]()


def start(config: pytest.Config) -> tuple[Path, subprocess.Popen]:
    """Copy the shipped manifest and its reference into a fresh working directory and start the workflow there."""
    if _RUN in config.stash:
        return config.stash[_RUN]
    workdir = Path(tempfile.mkdtemp(prefix="agentrepro-default-study-"))
    (workdir / "manifests" / "references").mkdir(parents=True)
    shutil.copy(REPO / "manifests" / f"{STUDY}.yaml", workdir / "manifests")
    shutil.copy(REPO / "manifests" / "references" / f"{STUDY}.yaml", workdir / "manifests" / "references")
    proc = snakemake_in_background(
        workdir, "--cores", "2", "--config", f"manifest=manifests/{STUDY}.yaml", "freeze_flags=--allow-dirty"
    )
    config.stash[_RUN] = (workdir, proc)
    return workdir, proc


def finished(config: pytest.Config) -> Path:
    """Wait for the background study (starting it if collection did not) and return its working directory."""
    workdir, proc = start(config)
    try:
        returncode = proc.wait(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        stop(config)
        pytest.fail(f"the default study did not finish within {TIMEOUT_S} s (log: {workdir / 'snakemake.log'})")
    log = (workdir / "snakemake.log").read_text(errors="replace")
    assert returncode == 0, log[-5000:]
    return workdir


def stop(config: pytest.Config, *, passed: bool = False) -> None:
    """Terminate the background study and its descendants if it is still running; remove its working directory
    when the session passed (it is kept, with snakemake.log, for a failure)."""
    if _RUN not in config.stash:
        return
    workdir, proc = config.stash[_RUN]
    if proc.poll() is not None:
        if passed:
            shutil.rmtree(workdir, ignore_errors=True)
        return
    try:
        family = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for member in family:
        member.terminate()
    _, alive = psutil.wait_procs(family, timeout=20)
    for member in alive:
        member.kill()
