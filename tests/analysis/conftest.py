"""Fixtures of the analysis tests; puts this folder on sys.path so tests can `import analysis_synth`."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from analysis_synth import outcome_rows, write_jsonl


@pytest.fixture
def make_outcomes(tmp_path):
    """make_outcomes(method, seed, step, successes) -> path of an outcomes.jsonl under tmp_path."""

    def make(method, seed, step, successes, study="synthetic", name=None, **kw):
        path = tmp_path / "in" / (name or f"{method}-s{seed}-step{step}.jsonl")
        return write_jsonl(path, outcome_rows(study, method, seed, step, successes, **kw))

    return make
