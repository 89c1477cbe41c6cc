"""The audit result shown in the report's appendix: `agentrepro.audit.audit_study(study, root)`.

The outcome is one of: `passed` (no problem), `problems` (the list, each naming a path),
or `error` (the audit could not run, e.g. no lock: its message). reports/<study> itself is left out: it is
being replaced by the report that shows this result (`agentrepro audit` checks it afterwards).
"""

from __future__ import annotations

from pathlib import Path

from agentrepro.audit import audit_study, coverage
from agentrepro.errors import BadInput, Failure

REQUIRE = "analysis"  # the report being written cannot vouch for itself: audited up to the analysis, reports/ left out
COVERS = coverage(REQUIRE, check_reports=False)


def audit_result(study: str, root: str | Path = ".") -> dict:
    """{"status": passed|problems|error, "problems": [str], "message": str, "covers": what the audit checked, in words}."""
    try:
        problems = list(audit_study(study, root=str(root), require=REQUIRE, check_reports=False))
    except (BadInput, Failure, OSError) as exc:
        return {"status": "error", "problems": [], "message": f"the audit could not run: {exc}"}
    if problems:
        return {
            "status": "problems",
            "problems": [str(p) for p in problems],
            "covers": COVERS,
            "message": f"{len(problems)} problem{'s' if len(problems) != 1 else ''} found",
        }
    return {
        "status": "passed",
        "problems": [],
        "covers": COVERS,
        "message": "the lock, every run, evaluation and analysis output match (the report itself is checked by `agentrepro audit`)",
    }
