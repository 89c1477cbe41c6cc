"""The local SLURM the tests drive for real: `slurm_cluster` (a session fixture, imported by the root conftest) is the
controller already up, or one started by scripts/slurm-cluster.sh and stopped after; required (not skipped) when
AGENTREPRO_REQUIRE lists `slurm`, as in CI."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from helpers import REPO, require


def _slurm_up() -> bool:
    if not shutil.which("scontrol"):
        return False
    ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=30)
    return ping.returncode == 0 and "UP" in ping.stdout


@pytest.fixture(scope="session")
def slurm_cluster():
    """A running local SLURM (module docstring)."""
    started = False
    if not _slurm_up():
        can_start = os.geteuid() == 0 and (
            shutil.which("slurmctld") is not None or os.path.exists("/usr/sbin/slurmctld")
        )
        require(
            "slurm",
            can_start,
            "no SLURM controller answers and this session cannot start one (needs root and Debian's slurmctld)",
        )
        proc = subprocess.run(
            ["bash", str(REPO / "scripts" / "slurm-cluster.sh"), "start"], capture_output=True, text=True, timeout=120
        )
        require("slurm", proc.returncode == 0, f"scripts/slurm-cluster.sh start failed: {proc.stderr.strip()[-500:]}")
        started = True
    yield
    if started:
        subprocess.run(
            ["bash", str(REPO / "scripts" / "slurm-cluster.sh"), "stop"], capture_output=True, text=True, timeout=120
        )
