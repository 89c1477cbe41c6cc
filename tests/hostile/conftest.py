"""Fixtures of the reliability suite: one frozen study, built once, that each example copies.

The builders of the manifest, analysis and report tests are reused (made importable here). When
$AGENTREPRO_HOSTILE_COUNTS names a file, the session writes the per-class counts there (inputs, targets,
failures); benchmarks/RESULTS.md quotes them.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
for folder in (HERE, HERE.parent / "manifest", HERE.parent / "analysis", HERE.parent / "report"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from hostile_kit import COUNTS  # noqa: E402


@pytest.fixture(scope="session")
def frozen_study(tmp_path_factory) -> Path:
    """study_kit's demo study, frozen in-process, with its four sealed runs, analysis and report (do not modify: copy)."""
    from study_kit import fake_outputs, fake_run, git_commit_all, write_study

    from agentrepro.jobs.freeze import freeze

    root = tmp_path_factory.mktemp("hostile") / "root"
    root.mkdir()
    write_study(root)
    git_commit_all(root)
    lock, _, _ = freeze(root / "manifests" / "demo.yaml", root=root)
    for method in ("grpo", "gigpo"):
        for seed in (0, 1):
            fake_run(root, lock, method, seed)
    fake_outputs(root)  # the real analysis and report: they need every planned run
    return root


@pytest.fixture(scope="session")
def analysis_doc() -> dict:
    from report_synthetic import build_analysis

    return build_analysis(study="demo", methods={"grpo": 0.4, "gigpo": 0.5}, seeds=(0, 1), steps=(0, 10), n_tasks=8)


def pytest_sessionfinish(session, exitstatus):
    target = os.environ.get("AGENTREPRO_HOSTILE_COUNTS")
    if target and COUNTS:
        rows = {
            k: {"inputs": v["inputs"], "targets": sorted(v["targets"]), "failures": v["failures"]}
            for k, v in sorted(COUNTS.items())
        }
        Path(target).write_text(json.dumps(rows, indent=2) + "\n")
