"""The GraphGPO state graph: per-group graphs, reverse unit-cost distances, d_max + 1, and graph rewards."""

from __future__ import annotations

import numpy as np
import pytest
import slow_advantages as slow
from hypothesis import given, settings
from strategies import step_rows

from agentrepro.algorithms import StepBatch
from agentrepro.algorithms.graph import build_graph, goal_distances, graph_rewards

ORACLE = [  # S → success; S → X → success; S → Y → X → Z (fail)
    ("t0", "S", "success"),
    ("t1", "S", "X"),
    ("t1", "X", "success"),
    ("t2", "S", "Y"),
    ("t2", "Y", "X"),
    ("t2", "X", "Z"),
]


def _rows(edges, group="g"):
    turns, out = {}, []
    won = {t for t, _, ns in edges if ns == "success"}
    for t, s, ns in edges:
        k = turns[t] = turns.get(t, -1) + 1
        out.append(
            {
                "group": group,
                "traj": f"{group}{t}",
                "turn": k,
                "state": s,
                "next_state": ns,
                "reward": 10.0 * (ns == "success"),
                "episode_reward": 10.0 * (t in won),
                "valid": True,
                "success": t in won,
            }
        )
    return out


def _row_distances(rows):
    batch = StepBatch.from_rows(rows)
    graph = build_graph(batch)
    return graph, goal_distances(graph).node[graph.dst]


def test_oracle_three_edges():
    """Source S with edges to d = 0, 1, 2 at ω = 0.1 gives graph rewards [10, 1, 0.1] (the review's oracle)."""
    rows = _rows(ORACLE)
    graph, d = _row_distances(rows)
    assert d.tolist() == [0.0, 1.0, 0.0, 2.0, 1.0, 3.0]  # Z cannot reach the goal: d_max (2) + 1
    rewards = graph_rewards(d, np.ones(6, dtype=bool), omega=0.1, invalid_penalty=0.1)
    s_rows = [i for i, r in enumerate(rows) if r["state"] == "S"]
    assert rewards[s_rows] == pytest.approx([10.0, 1.0, 0.1], rel=1e-12)
    paper = graph_rewards(d, np.ones(6, dtype=bool), omega=0.1, invalid_penalty=0.1, reward_form="paper")
    assert paper[s_rows] == pytest.approx([1.0, 0.1, 0.01], rel=1e-12)
    assert graph.n_nodes == 5 and graph.n_edges == 6


def test_all_fail_group_has_every_distance_one_and_penalty_applies():
    """Without a goal node d_max = 0, so every node gets d = 1; an invalid row loses the penalty."""
    rows = _rows([("a", "S", "A"), ("a", "A", "A"), ("b", "S", "B")])
    _, d = _row_distances(rows)
    assert d.tolist() == [1.0, 1.0, 1.0]
    r = graph_rewards(d, np.array([True, False, True]), omega=0.5, invalid_penalty=0.1)
    assert r.tolist() == [5.0, 4.9, 5.0]


def test_groups_do_not_share_graphs():
    """X reaches the goal in g1 only; in g2 the same name is unreachable and gets g2's d_max + 1."""
    rows = _rows([("a", "S", "X"), ("a", "X", "success")], "g1") + _rows([("b", "S", "X"), ("c", "S", "success")], "g2")
    _, d = _row_distances(rows)
    assert d.tolist() == [1.0, 0.0, 2.0, 0.0]


def test_duplicate_edges_count_once_in_the_graph():
    """Repeated edges are one graph edge with unit cost (duplicates do not lengthen paths)."""
    rows = _rows([("a", "S", "X"), ("a", "X", "S"), ("a", "S", "X"), ("a", "X", "success")])
    graph, d = _row_distances(rows)
    assert graph.n_edges == 3 and d.tolist() == [1.0, 2.0, 1.0, 0.0]


@settings(max_examples=80, deadline=None)
@given(rows=step_rows(max_groups=5, max_trajs=6, max_turns=8))
def test_distances_equal_per_group_bfs(rows):
    """One block-diagonal multi-source Dijkstra equals a BFS per group with d_max + 1 for unreachable nodes."""
    _, d = _row_distances(rows)
    assert d.tolist() == slow.distances(rows)
