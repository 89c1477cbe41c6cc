"""AUC of the eval curve and steps/env steps to a threshold, by hand."""

import pandas as pd
import pytest

from agentrepro.analysis.convergence import auc, convergence_table


def test_auc_is_the_normalised_trapezoid():
    """Rates 0, 0.5, 1 at steps 0, 10, 30: area (2.5 + 15) / 30."""
    assert auc([0, 10, 30], [0.0, 0.5, 1.0]) == pytest.approx(17.5 / 30)
    assert auc([5], [0.4]) == 0.4


def test_steps_and_env_steps_to_threshold_and_costs():
    """The first step reaching the threshold, its env steps, and the last cumulative costs."""
    runs = pd.DataFrame({"method": ["m"] * 3, "seed": [0] * 3, "step": [10, 20, 30], "rate": [0.2, 0.7, 0.9]})
    metrics = {
        ("m", 0): [
            {"step": s, "env_steps": 100 * s, "tokens_generated": 7 * s, "wall_s": s / 2, "gpu_hours": 0}
            for s in range(1, 31)
        ]
    }
    row = convergence_table(runs, metrics, 0.6).iloc[0]
    assert row["steps_to_threshold"] == 20 and row["env_steps_to_threshold"] == 2000
    assert row["tokens_generated"] == 210 and row["wall_s"] == 15
    never = convergence_table(runs, {}, 0.95).iloc[0]
    assert pd.isna(never["steps_to_threshold"]) and pd.isna(never["tokens_generated"])
