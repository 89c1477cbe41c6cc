"""Fixtures of the manifest tests; the builders live in manifest_kit.py (made importable here)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from manifest_kit import fake_outputs, fake_run, git_commit_all, write_study  # noqa: E402


@pytest.fixture
def study(tmp_path) -> Path:
    """A root directory with the demo study written and committed in a fresh git repository."""
    root = tmp_path / "root"
    root.mkdir()
    write_study(root)
    git_commit_all(root)
    return root


@pytest.fixture
def frozen(study) -> tuple[Path, dict]:
    """The demo study frozen (in-process), with its four sealed runs (each evaluated at steps 0, 5, 10), analysis and report."""
    from agentrepro.manifest.freeze import freeze

    lock, _, _ = freeze(study / "manifests" / "demo.yaml", root=study)
    for method in ("grpo", "gigpo"):
        for seed in (0, 1):
            fake_run(study, lock, method, seed)
    fake_outputs(study)
    return study, lock

