"""Graph diagnostics on a hand-checked batch (the oracle plus an all-fail and an all-success group)."""

from __future__ import annotations

import pytest
from test_graph import ORACLE, _rows

from agentrepro.algorithms import StepBatch, estimate


def test_diagnostics_by_hand():
    """Every docs/design.md §3.3 field, counted by hand on three groups."""
    rows = (
        _rows(ORACLE, "g1")
        + _rows([("a", "S", "A"), ("a", "A", "A"), ("b", "S", "A")], "g2")  # all fail
        + _rows([("c", "S", "success"), ("d", "S", "success")], "g3")
    )  # all success
    d = estimate(StepBatch.from_rows(rows), "graphgpo").diagnostics
    assert list(d) == [
        "groups",
        "nodes",
        "edges",
        "duplicate_edge_ratio",
        "shared_state_rate",
        "singleton_out_edge_ratio",
        "nonzero_graph_adv_ratio",
        "all_fail_groups",
        "all_success_groups",
        "unreachable_ratio",
        "distance_hist",
        "step_group_size_hist",
    ]
    assert d["groups"] == 3
    assert d["nodes"] == 5 + 2 + 2  # g1: S X Y Z success; g2: S A; g3: S success
    assert d["edges"] == 6 + 2 + 1  # g2: S→A twice, A→A; g3: S→success twice
    assert d["duplicate_edge_ratio"] == pytest.approx(1 - 9 / 11)
    # anchor states: g1 S(3 trajs) X(2) Y(1); g2 S(2) A(1); g3 S(2) -> 4 of 6 shared
    assert d["shared_state_rate"] == pytest.approx(4 / 6)
    assert d["singleton_out_edge_ratio"] == pytest.approx(2 / 6)  # g1/Y and g2/A
    assert d["step_group_size_hist"] == {"1": 2, "2": 3, "3": 1}
    assert d["all_fail_groups"] == 1 and d["all_success_groups"] == 1
    assert d["unreachable_ratio"] == pytest.approx(3 / 9)  # g1/Z, g2/S, g2/A
    assert d["distance_hist"] == {"0": 4, "1": 5, "2": 1, "3": 1}
    # non-zero step advantages: g1/S (3 rows) and g1/X (2 rows); g2, g3 and singletons are 0
    assert d["nonzero_graph_adv_ratio"] == pytest.approx(5 / 11)


def test_group_diagnostics_by_hand():
    """Per-group counts for the same three groups add up to the totals."""
    rows = (
        _rows(ORACLE, "g1")
        + _rows([("a", "S", "A"), ("a", "A", "A"), ("b", "S", "A")], "g2")
        + _rows([("c", "S", "success"), ("d", "S", "success")], "g3")
    )
    res = estimate(StepBatch.from_rows(rows), "graphgpo")
    per = res.group_diagnostics
    assert [p["group"] for p in per] == ["g1", "g2", "g3"]
    assert [(p["rows"], p["trajectories"], p["successes"]) for p in per] == [(6, 3, 2), (3, 2, 0), (2, 2, 2)]
    assert [(p["nodes"], p["edges"], p["unreachable_nodes"], p["d_max"]) for p in per] == [
        (5, 6, 1, 2),
        (2, 2, 2, 0),
        (2, 1, 0, 1),
    ]
    assert per[2]["duplicate_edge_ratio"] == pytest.approx(0.5)
    assert (
        sum(p["nodes"] for p in per) == res.diagnostics["nodes"]
        and sum(p["edges"] for p in per) == res.diagnostics["edges"]
    )
    assert [p["nonzero_graph_adv_ratio"] for p in per] == pytest.approx([5 / 6, 0.0, 0.0])
