"""The report embeds `agentrepro.audit.audit_study`'s result, whatever it is (`agentrepro.audit.audit_result`)."""

from __future__ import annotations

import types

import pytest

from agentrepro.audit import study
from agentrepro.audit.study import audit_result
from agentrepro.errors import BadInput


@pytest.fixture
def fake_manifest(monkeypatch):
    """Stand in for the audit: audit_result calls the audit_study the test sets on this object."""
    stand_in = types.SimpleNamespace()
    monkeypatch.setattr(study, "audit_study", lambda *a, **k: stand_in.audit_study(*a, **k))
    return stand_in


def test_problems_are_listed(fake_manifest):
    """Each problem string the audit returns is kept; it is called with the study and root, requiring the study up
    to its analysis and leaving out the report folder that is being replaced."""
    calls = []
    fake_manifest.audit_study = lambda study, root=".", require="report", check_reports=True: (
        calls.append((study, root, require, check_reports)) or ["runs/s/a/seed0/metrics.jsonl: changed"]
    )
    result = audit_result("s", "/r")
    assert result["status"] == "problems" and result["problems"] == ["runs/s/a/seed0/metrics.jsonl: changed"]
    assert calls == [("s", "/r", "analysis", False)]


def test_clean_audit_passes(fake_manifest):
    """No problem means passed."""
    fake_manifest.audit_study = lambda study, root=".", require="report", check_reports=True: []
    assert audit_result("s")["status"] == "passed"


def test_audit_that_cannot_run_says_why(fake_manifest):
    """A BadInput from the audit (e.g. no lock) becomes status error with its message, not a pass."""

    def boom(study, root=".", require="report", check_reports=True):
        raise BadInput("file not found", path="manifests/s.lock.json")

    fake_manifest.audit_study = boom
    result = audit_result("s")
    assert result["status"] == "error" and "manifests/s.lock.json" in result["message"]


def test_real_audit_runs(tmp_path):
    """The real audit_study (agentrepro.audit) reports the missing lock of a bare root."""
    result = audit_result("nostudy", tmp_path)
    assert result["status"] in ("problems", "error")
    assert "nostudy" in result["message"] + " ".join(result["problems"])
