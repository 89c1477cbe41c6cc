"""The audit result shown in the report's appendix: `agentrepro.manifest.audit_study(study, root)`.

Imported lazily, when the report is rendered, so the report does not depend on the manifest part at
import time. The outcome is one of: `passed` (no problem), `problems` (the list, each naming a path),
`error` (the audit could not run, e.g. no lock: its message) or `unavailable` (the function is not
installed in this version of the package: the import error). reports/<study> itself is left out: it is
being replaced by the report that shows this result (`agentrepro audit` checks it afterwards).
"""

from __future__ import annotations

import importlib
from pathlib import Path

from agentrepro.errors import BadInput, Failure

# reports/<study>/analysis.sha256: every analysis file the report was rendered from (sha256sum lines, root-relative
# paths), sealed with the report; the audit checks that the analysis still hashes so (agentrepro.manifest.audit_chain).
ANALYSIS_RECORD = "analysis.sha256"


def audit_result(study: str, root: str | Path = ".") -> dict:
    """{"status": passed|problems|error|unavailable, "problems": [str], "message": str}."""
    try:
        audit_study = importlib.import_module("agentrepro.manifest").audit_study
    except (ImportError, AttributeError) as exc:
        return {"status": "unavailable", "problems": [], "message": f"audit not available: {exc}"}
    try:
        problems = list(audit_study(study, root=str(root), require="analysis", check_reports=False))  # the report being written cannot vouch for itself
    except (BadInput, Failure, OSError) as exc:
        return {"status": "error", "problems": [], "message": f"the audit could not run: {exc}"}
    if problems:
        return {"status": "problems", "problems": [str(p) for p in problems],
                "message": f"{len(problems)} problem{'s' if len(problems) != 1 else ''} found"}
    return {"status": "passed", "problems": [], "message": "the lock, every run, evaluation and analysis output match (the report itself is checked by `agentrepro audit`)"}
