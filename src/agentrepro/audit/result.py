"""What the audit says about itself: its stages, what each checks in words (`coverage`), and the result a report
shows in its appendix (`result_of`).

A report shows the audit of its study up to the analysis (`agentrepro.audit.study.audit_result`): `passed` (no
problem), `problems` (the list, each naming a path) or `error` (the audit could not run, e.g. no lock: its message).
reports/<study> itself is left out: it is being replaced by the report that shows this result. `agentrepro audit`
checks the report afterwards by rendering it again, with `result_of` its own findings up to the analysis
(audit/report.py).
"""

from __future__ import annotations

STAGES = ("lock", "runs", "analysis", "report")
COVERED = {  # what each stage's audit checks, in words (`coverage`: the report's audit badge says it)
    "lock": "the lock and the manifest, and the files the lock hashed",
    "runs": "every planned run, evaluation and warm start with its seals and provenance, the outcomes against the frozen "
    "task panel, and each evaluation's counts against its outcomes",
    "analysis": "the analysis recomputed from the outcomes and compared value by value",
    "report": "the report rendered again from the recomputation: report.html with every value it prints, its figures and "
    "its provenance page, byte for byte, every printed value in report.pdf's text, and nothing else in its folder",
}


def coverage(require: str = "report", *, check_reports: bool = True) -> str:
    """What `audit_study(require=..., check_reports=...)` checks, in words, for a study complete up to `require`."""
    stages = (
        STAGES[: STAGES.index(require) + 1]
        if check_reports
        else [s for s in STAGES[: STAGES.index(require) + 1] if s != "report"]
    )
    said = "; ".join(COVERED[s] for s in stages)
    return said + (
        ""
        if check_reports and require == "report"
        else "; not the report itself (`agentrepro audit` checks it afterwards)"
    )


REQUIRE = "analysis"  # the report being written cannot vouch for itself: audited up to the analysis, reports/ left out
COVERS = coverage(REQUIRE, check_reports=False)


def result_of(problems: list[str]) -> dict:
    """{"status": passed|problems, "problems": [str], "message": str, "covers": what was checked, in words}: the result
    a report shows for these problems of its study up to the analysis."""
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
