"""Loading and comparing the reference fixtures of tests/fixtures/advantages (shared by the parity tests)."""

from __future__ import annotations

import json
from pathlib import Path

TOL = 1e-4  # |Δ| / max(1, |x|): the reference computes in float32 (README "Tolerance")
STEP_FILES = ("edge_cases.jsonl", "random_batches.jsonl")


def load_cases(fixtures_dir: Path, name: str) -> list[dict]:
    with open(fixtures_dir / "advantages" / name, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def rel_err(ours: float, ref: float) -> float:
    return abs(ours - ref) / max(1.0, abs(ref))


def compare_case(case: dict, ours: list[dict]) -> tuple[list[str], int]:
    """(mismatches as strings, number of values compared) between a case's `expected` and our rows.

    Every expected field must be present in ours; rows flagged fp32_artifact are skipped here and tested
    on their own (test_parity.py)."""
    problems, compared = [], 0
    if len(ours) != len(case["expected"]):
        return [f"{case['case']}: {len(ours)} rows, expected {len(case['expected'])}"], 0
    for i, (exp, got) in enumerate(zip(case["expected"], ours)):
        if exp.get("fp32_artifact"):
            continue
        for key, ref in exp.items():
            if key == "fp32_artifact":
                continue
            if key not in got:
                problems.append(f"{case['case']} {case['params']['estimator']} row {i}: missing {key}")
                continue
            compared += 1
            if rel_err(got[key], ref) > TOL:
                problems.append(f"{case['case']} {case['params']} row {i} {key}: ours {got[key]!r}, reference {ref!r}")
    return problems, compared
