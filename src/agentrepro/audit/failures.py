"""The study's own failures: what its analysis found wrong with the study itself, as opposed to files changed after
they were written. A parity check that failed (the frozen panel not scored whole, training and evaluation seeds that
overlap, a parity certificate whose recomputed advantages disagree) is a result of the study; an audit whose files
all match still has to say it, or its "OK" reads as a clean study.

`study_failures(analysis)` lists them from an analysis.json object; `agentrepro audit` reads the study's (equal to
the recomputation once the audit finds no problem) and prints them beside its verdict.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from agentrepro.analysis.study import ANALYSIS_JSON
from agentrepro.audit.tree import EXAMPLES, load_object
from agentrepro.layout import locate

FAILED = "fail"


def study_failures(analysis: dict[str, Any]) -> list[str]:
    """One line per failed parity check, and one for the certificate's failed batches (the first few named)."""
    found = [
        f"the parity check '{check.get('check')}' failed: {check.get('detail')}"
        for check in analysis.get("parity") or []
        if isinstance(check, dict) and check.get("status") == FAILED
    ]
    failed = [
        f"{entry.get('method')} seed {entry.get('seed')} step {entry.get('step')}"
        for entry in analysis.get("certificate") or []
        if isinstance(entry, dict) and entry.get("status") == FAILED
    ]
    if failed:
        more = f" and {len(failed) - EXAMPLES} more" if len(failed) > EXAMPLES else ""
        found.append(f"the parity certificate failed for {len(failed)} batch(es): {', '.join(failed[:EXAMPLES])}{more}")
    return found


def failures_of(study: str, root: str | os.PathLike = ".") -> list[str]:
    """`study_failures` of the study's analysis.json; [] when it cannot be read (the audit reports that)."""
    analysis, _ = load_object(locate(study, Path(root)).analysis / ANALYSIS_JSON)
    return study_failures(analysis) if analysis is not None else []
