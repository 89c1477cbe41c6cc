"""Claims parsed, oriented and tested: ordering on the paired `all` rows with Holm, equivalence on the shared tasks."""

import numpy as np
import pandas as pd
import pytest

from agentrepro.analysis.claims import claims_table, parse_claim, shared_arrays
from agentrepro.errors import BadInput

PAIRED = pd.DataFrame(
    [
        {
            "method_a": "x",
            "method_b": "y",
            "seed": "all",
            "step": 5,
            "n_tasks": 10,
            "delta": 0.10,
            "ci_lo": 0.05,
            "ci_hi": 0.15,
            "p": 0.001,
            "test": "task_clustered_t",
        },
        {
            "method_a": "x",
            "method_b": "z",
            "seed": "all",
            "step": 5,
            "n_tasks": 10,
            "delta": 0.02,
            "ci_lo": -0.01,
            "ci_hi": 0.05,
            "p": 0.20,
            "test": "task_clustered_t",
        },
        {
            "method_a": "x",
            "method_b": "y",
            "seed": "0",
            "step": 5,
            "n_tasks": 10,
            "delta": 0.5,
            "ci_lo": 0.4,
            "ci_hi": 0.6,
            "p": 1e-9,
            "test": "newcombe10+mcnemar_exact",
        },
    ]
)


def final_rows(per_method: dict[str, np.ndarray], tasks=None) -> pd.DataFrame:
    """Outcome rows at one step from {method: (seeds, tasks) 0/1}; `tasks` limits a method to some task indices."""
    rows = []
    for method, success in per_method.items():
        for s in range(success.shape[0]):
            for t in range(success.shape[1]):
                if tasks and method in tasks and t not in tasks[method]:
                    continue
                rows.append(
                    {"method": method, "seed": s, "task_id": f"t{t:04d}", "episode": 0, "success": int(success[s, t])}
                )
    return pd.DataFrame(rows)


def test_parse_claim_forms_and_errors():
    """'a > b' and 'b<a' give the same (better, worse); unknown methods and bad syntax name the field."""
    one, two = parse_claim("x > y", ["x", "y"], "m"), parse_claim("y<x", ["x", "y"], "m")
    assert (one.a, one.b) == (two.a, two.b) == ("x", "y")
    for bad in ("x >> y", "x > w", "x > x"):
        with pytest.raises(BadInput, match=r"manifest.yaml: analysis.claims\[0\]"):
            parse_claim(bad, ["x", "y"], "analysis.claims[0]", "manifest.yaml")


def test_claims_use_the_all_row_flip_signs_and_holm():
    """A reversed claim flips delta and CI; p_holm is Holm over the claims; holds needs direction and significance."""
    final = final_rows({m: np.zeros((1, 10), int) for m in "xyz"})
    out = claims_table(["x > y", "y > x", "x > z"], PAIRED, final, ["x", "y", "z"], 5, 0.05, field="--claim")
    assert out["delta"].tolist() == pytest.approx([0.10, -0.10, 0.02])
    assert out.loc[1, ["ci_lo", "ci_hi"]].tolist() == pytest.approx([-0.15, -0.05])
    assert out["p_holm"].tolist() == pytest.approx([0.003, 0.003, 0.20])
    assert out["holds"].tolist() == [True, False, False]
    assert set(out["kind"]) == {"ordering"} and set(out["seed"]) == {"all"} and out["verdict"].isna().all()
    assert "opposite direction" in out.loc[1, "statement"] and "not significant" in out.loc[2, "statement"]


def test_equivalence_rows_per_seed_and_all_only_over_shared_tasks():
    """An equivalence claim gives one row per seed and an `all` row, on the tasks both methods were scored on."""
    rng = np.random.default_rng(1)
    a = (rng.random((2, 30)) < 0.5).astype(int)
    final = final_rows({"m@relax": a, "m@verl-agent": a}, tasks={"m@verl-agent": set(range(25))})
    left, right, seeds = shared_arrays(final, "m@relax", "m@verl-agent")
    assert left.shape == right.shape == (2, 25, 1) and seeds == [0, 1]
    out = claims_table(
        ["m@relax == m@verl-agent +- 3 pp"],
        PAIRED.iloc[:0],
        final,
        ["m@relax", "m@verl-agent"],
        5,
        0.05,
        field="--claim",
    )
    assert out["seed"].tolist() == ["0", "1", "all"] and out["n_tasks"].tolist() == [25, 25, 25]
    assert out["seeds"].tolist() == [1, 1, 2] and out["margin"].tolist() == pytest.approx([0.03] * 3)
    assert out["p_holm"].isna().all() and set(out["kind"]) == {"equivalence"}
    assert "on the 25 tasks both were scored on, 2 seeds" in out.iloc[-1]["statement"]


def test_equivalence_with_too_few_shared_tasks_is_bad_input():
    """Methods that share fewer than 2 scored tasks cannot be compared: BadInput naming the field."""
    final = final_rows({"a": np.ones((1, 5), int), "b": np.ones((1, 5), int)}, tasks={"a": {0}, "b": {0, 1}})
    with pytest.raises(BadInput, match=r"analysis.claims\[0\].*share 1 scored task"):
        claims_table(["a == b ± 3pp"], PAIRED.iloc[:0], final, ["a", "b"], 5, 0.05, field="analysis.claims[{i}]")
