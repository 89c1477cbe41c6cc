"""The audit's verdict card: what a reviewer asks of a study or a bundle before reading its report, each answered
yes, no or not checked, with its number, in one line.

The report's first page answers what the analysis knows when it is rendered; whether the bundle was signed, which
checkpoints it ships and whether they play the recorded outcomes are known only to the audit of that bundle, so
`agentrepro audit` ends with this card. `verdict_card(...)` only words what the audit found; it checks nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentrepro.audit.reeval import ReEvaluation


@dataclass(frozen=True)
class Findings:
    """What one audit found, counted: `signature` is None for a study's folder (no bundle), else its words."""

    problems: int
    differences: int
    failures: int
    kept: tuple[int, int]  # runs whose final checkpoint is here, of all runs
    signature: str | None = None
    re_evaluation: ReEvaluation | None = None


def verdict_card(found: Findings) -> list[str]:
    """One line per question: `question: yes | no | not checked (number, and why)`."""
    lines = []
    if found.signature is not None:
        signed = found.signature != "not signed"
        lines.append(
            f"signed: yes ({found.signature})" if signed else "signed: no (an unsigned bundle: no one vouches for it)"
        )
    lines.append(
        "every output matches the lock: " + ("yes" if not found.problems else f"no ({found.problems} problem(s) above)")
    )
    kept, runs = found.kept
    where = "shipped" if found.signature is not None else "kept"
    lines.append(f"final checkpoints {where}: {kept} of {runs} run(s)")
    lines.append("outcomes re-derived from the checkpoints: " + _re_derived(found.re_evaluation))
    lines.append(
        "jobs ran the code the lock names: "
        + ("yes" if not found.differences else f"no ({found.differences} line(s) above: differs from the lock)")
    )
    if found.problems:
        lines.append("the study's own checks passed: not checked (the outputs do not match the lock)")
    else:
        lines.append(
            "the study's own checks passed: "
            + ("yes" if not found.failures else f"no ({found.failures} failure(s) above: results, not tampering)")
        )
    return lines


def _re_derived(replay: ReEvaluation | None) -> str:
    if replay is None:
        return "not checked (`--re-eval` plays them again)"
    played = replay.as_recorded + replay.otherwise
    skipped = f"; {replay.not_played} run(s) not played, above" if replay.not_played else ""
    if replay.otherwise:
        return f"no ({replay.otherwise} of {played} run(s) played otherwise{skipped})"
    if not played:
        return f"not checked (no run could be played{skipped})"
    return f"yes ({played} run(s), each as recorded{skipped})"
