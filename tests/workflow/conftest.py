"""Fixtures of the workflow tests; helpers live in wfkit.py (this directory is put on sys.path here)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import default_study
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
