"""Overhead percentiles and share of step time from timings rows."""

import numpy as np
import pytest

from agentrepro.analysis.overhead import overhead_table


def test_percentiles_share_and_absent_components():
    """p50/p95 equal numpy's; share is Σcomponent/Σstep_total over rows where it ran; absent is not zero."""
    rows0 = [{"step": i, "rollout": 1.0 + i, "graph_build": 0.01 * i, "step_total": 2.0 + i} for i in range(1, 11)]
    rows1 = [{"step": i, "rollout": 3.0, "step_total": 4.0} for i in range(1, 6)]  # graph_build did not run
    out = overhead_table({("g", 0): rows0, ("g", 1): rows1}).set_index("component")
    gb = np.array([0.01 * i for i in range(1, 11)])
    assert out.loc["graph_build", "n"] == 10
    assert out.loc["graph_build", "p50_s"] == pytest.approx(np.percentile(gb, 50))
    assert out.loc["graph_build", "p95_s"] == pytest.approx(np.percentile(gb, 95))
    assert out.loc["graph_build", "share_of_step"] == pytest.approx(gb.sum() / sum(r["step_total"] for r in rows0))
    assert out.loc["rollout", "n"] == 15
    assert out.loc["step_total", "share_of_step"] == pytest.approx(1.0)
