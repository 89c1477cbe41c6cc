"""Fixtures of the workflow tests; helpers live in wfkit.py (this directory is put on sys.path here)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import default_study
from helpers import REPO, require
from wfkit import TINY


def pytest_collection_modifyitems(session, config, items):
    """The default study's tests run last: until then the rest of the suite runs beside its background run."""
    items.sort(key=lambda item: item.path.name == "test_default_study.py")  # stable: the order is otherwise kept


def pytest_collection_finish(session):
    """Start the full default study in the background as soon as collection shows one of its tests will run
    (AGENTREPRO_FULL_STUDY=1), so its 2-core Snakemake run overlaps the rest of the suite instead of following it."""
    if os.environ.get("AGENTREPRO_FULL_STUDY") == "1" and not session.config.option.collectonly:
        if any(item.path.name == "test_default_study.py" for item in session.items):
            default_study.start(session.config)


def pytest_sessionfinish(session, exitstatus):
    default_study.stop(session.config, passed=exitstatus == 0)


@pytest.fixture
def study_dir(tmp_path: Path) -> Path:
    """A scratch working directory with manifests/wf-tiny.yaml."""
    (tmp_path / "manifests").mkdir()
    shutil.copy(TINY, tmp_path / "manifests" / TINY.name)
    return tmp_path


def _slurm_up() -> bool:
    if not shutil.which("scontrol"):
        return False
    ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=30)
    return ping.returncode == 0 and "UP" in ping.stdout


@pytest.fixture(scope="session")
def slurm_cluster():
    """A running local SLURM: the one already up, or one started by scripts/slurm-cluster.sh and stopped after.

    Required (not skipped) when AGENTREPRO_REQUIRE lists `slurm`, as in CI.
    """
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
