"""The report embeds `agentrepro.manifest.audit_study`'s result, whatever it is."""

from __future__ import annotations

import importlib
import sys
import types

import pytest

from agentrepro.errors import BadInput
from agentrepro.report.audit import audit_result


@pytest.fixture
def fake_manifest(monkeypatch):
    """Replace agentrepro.manifest with a module whose audit_study the test sets."""
    module = types.ModuleType("agentrepro.manifest")
    monkeypatch.setitem(sys.modules, "agentrepro.manifest", module)
    return module


def test_problems_are_listed(fake_manifest):
    """Each problem string the audit returns is kept; it is called with the study and root, requiring the study up
    to its analysis and leaving out the report folder that is being replaced."""
    calls = []
    fake_manifest.audit_study = lambda study, root=".", require="report", check_reports=True: calls.append((study, root, require, check_reports)) or ["runs/s/a/seed0/metrics.jsonl: changed"]
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
    """The real audit_study (agentrepro.manifest) is found and reports the missing lock of a bare root."""
    importlib.import_module("agentrepro.manifest").audit_study  # noqa: B018 - fails if the function is gone
    result = audit_result("nostudy", tmp_path)
    assert result["status"] in ("problems", "error")
    assert "nostudy" in result["message"] + " ".join(result["problems"])
