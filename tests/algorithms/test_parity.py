"""Parity of the estimators (called as functions) with every line of the reference fixtures."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from parity_fixtures import STEP_FILES, compare_case, load_cases

from agentrepro.algorithms import StepBatch, estimate


def _run(case: dict):
    params = dict(case["params"])
    name = params.pop("estimator")
    return estimate(StepBatch.from_rows(case["rows"]), name, **params)


@pytest.mark.parametrize("name", STEP_FILES)
def test_every_fixture_line_matches_reference(fixtures_dir, name):
    """Every unflagged value of every line (all 12 settings) agrees with the reference within 1e-4 relative."""
    cases = load_cases(fixtures_dir, name)
    assert len(cases) == {"edge_cases.jsonl": 240, "random_batches.jsonl": 84}[name]
    problems, compared = [], 0
    for case in cases:
        p, c = compare_case(case, _run(case).rows())
        problems += p
        compared += c
    assert not problems, "\n".join(problems[:20])
    assert compared > 1000


def _flagged(fixtures_dir):
    for case in load_cases(fixtures_dir, "edge_cases.jsonl"):
        rows = [i for i, e in enumerate(case["expected"]) if e.get("fp32_artifact")]
        if rows:
            yield case, rows


def test_fp32_artifact_rows_are_exact_zero_in_float64(fixtures_dir):
    """Where the reference's float32 gives a spurious advantage (|x| > 1e-3) to an equal-valued group, ours is exactly 0.

    The group's inputs are bitwise identical, so the exact deviation from the mean is 0. In float32,
    torch.mean of six 9.9s lands one ulp off and torch.std is then ~1e-6, the size of ε, so the
    reference divides an ulp by ~2e-6. We take statistics over x − x_first (exact 0 here) in float64."""
    n_flagged = 0
    for case, rows in _flagged(fixtures_dir):
        ours = _run(case).rows()
        for i in rows:
            exp = case["expected"][i]
            for key in ("advantage", "advantage_episode", "advantage_step"):
                if key in exp and abs(exp[key]) > 1e-3:
                    assert ours[i][key] == 0.0, (case["case"], i, key, ours[i][key])
                    n_flagged += 1
    assert n_flagged >= 48  # README: 48 flagged rows (some carry two flagged terms)


def test_fp32_artifact_is_reproduced_by_float32_torch(fixtures_dir):
    """The reference's −0.4664 on `zero_variance_fp32_artifact` is float32 arithmetic: torch.float32 gives it, float64 gives 0."""
    case = next(
        c
        for c in load_cases(fixtures_dir, "edge_cases.jsonl")
        if c["case"] == "zero_variance_fp32_artifact"
        and c["params"]["estimator"] == "grpo"
        and c["params"]["norm"] == "std"
    )
    scores = [r["episode_reward"] - 0.1 * (not r["valid"]) for r in case["rows"]]
    assert len(set(scores)) == 1 and len(scores) == 6
    x32 = torch.tensor(scores, dtype=torch.float32)
    ref32 = ((x32 - x32.mean()) / (x32.std() + 1e-6)).tolist()
    expected = [e["advantage"] for e in case["expected"]]
    assert np.allclose(ref32, expected, rtol=1e-5, atol=1e-6) and abs(expected[0]) > 0.4
    x64 = torch.tensor(scores, dtype=torch.float64)
    assert x64.std().item() < 1e-12  # float64 has no such artefact here either ...
    assert _run(case).advantage.tolist() == [0.0] * 6  # ... and ours is exact by construction
