"""The study's own failures (agentrepro.audit.failures): what its analysis found wrong with the study itself, said
beside an audit whose files all match (the end-to-end case: tests/audit/test_tamper.py)."""

from __future__ import annotations

from agentrepro.audit.failures import study_failures


def test_study_failures_name_each_failed_check_and_the_certificates_batches():
    """Failed parity checks one line each; the certificate's failed batches in one line, the first few named;
    passed and not-run entries and entries of another shape say nothing."""
    analysis = {
        "parity": [
            {"check": "panel", "status": "pass", "detail": "ok"},
            {"check": "seeds disjoint", "status": "fail", "detail": "3 seeds overlap"},
            "not an entry",
        ],
        "certificate": [{"method": "grpo", "seed": s, "step": 5, "status": "fail"} for s in range(5)]
        + [{"method": "gigpo", "seed": 0, "step": 5, "status": "not_run"}],
    }
    assert study_failures(analysis) == [
        "the parity check 'seeds disjoint' failed: 3 seeds overlap",
        "the parity certificate failed for 5 batch(es): grpo seed 0 step 5, grpo seed 1 step 5, grpo seed 2 step 5 and 2 more",
    ]
    assert study_failures({"parity": [], "certificate": []}) == []
