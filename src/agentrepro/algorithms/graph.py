"""The GraphGPO state graph (verl-agent recipe/GraphGPO/core_graph.py), all groups of a batch at once.

One graph per rollout group: nodes are the group's states (anchors and next states), every row adds one
edge state → next_state (invalid rows, self-loops and repeats included), every edge costs 1, and the goal
node is the literal `"success"`. The groups are built as one block-diagonal sparse graph, so a single
multi-source shortest-path call (scipy's Dijkstra, unit weights, from every goal node on the reversed
graph) gives every node's distance to its own group's goal. A node that cannot reach the goal gets
d_max + 1, d_max being the largest finite distance in its group (0 when the group has no goal node).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from agentrepro.algorithms.batch import GOAL, StepBatch


@dataclass(frozen=True)
class StateGraph:
    """Block-diagonal edge set of the per-group graphs.

    n_nodes: nodes over all groups; node_group (n_nodes,): group of each node; node_is_goal (n_nodes,);
    src, dst (n,): node of each row's state and next_state; edge_src, edge_dst (n_edges,): distinct edges.
    """

    n_groups: int
    n_nodes: int
    node_group: np.ndarray
    node_is_goal: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    edge_src: np.ndarray
    edge_dst: np.ndarray

    @property
    def n_edges(self) -> int:
        return int(self.edge_src.size)


def build_graph(batch: StepBatch) -> StateGraph:
    """Nodes are (group, state) pairs (StepBatch.nodes); one edge per distinct (state → next_state) of a group."""
    src, dst, node_keys = batch.nodes
    vocab = max(len(batch.state_vocab), 1)
    n_nodes = int(node_keys.size)
    goal_code = batch.state_vocab.index(GOAL) if GOAL in batch.state_vocab else -1
    edges = np.unique(src * max(n_nodes, 1) + dst)
    return StateGraph(
        n_groups=batch.n_groups,
        n_nodes=n_nodes,
        node_group=node_keys // vocab,
        node_is_goal=(node_keys % vocab) == goal_code,
        src=src,
        dst=dst,
        edge_src=edges // max(n_nodes, 1),
        edge_dst=edges % max(n_nodes, 1),
    )


@dataclass(frozen=True)
class Distances:
    """node (n_nodes,): distance to the group's goal, float64, unreachable nodes set to d_max + 1;
    reachable (n_nodes,): bool, whether the node can reach the goal."""

    node: np.ndarray
    reachable: np.ndarray


def goal_distances(graph: StateGraph) -> Distances:
    """Reverse unit-cost shortest paths from every goal node (one multi-source Dijkstra call)."""
    goals = np.flatnonzero(graph.node_is_goal)
    if goals.size == 0 or graph.n_nodes == 0:
        d = np.full(graph.n_nodes, np.inf)
    else:
        # heavy: loaded here, verbs that only name the estimators (freeze, command) skip it
        from scipy.sparse import csr_matrix  # heavy: see above
        from scipy.sparse.csgraph import dijkstra  # heavy: as above

        # reversed adjacency: an edge u → v becomes v → u, so distances from the goals are distances *to* them
        reverse = csr_matrix((np.ones(graph.n_edges), (graph.edge_dst, graph.edge_src)), shape=(graph.n_nodes,) * 2)
        d = dijkstra(reverse, directed=True, indices=goals, unweighted=True, min_only=True)
    reachable = np.isfinite(d)
    d_max = np.zeros(graph.n_groups)
    np.maximum.at(d_max, graph.node_group[reachable], d[reachable])
    node = np.where(reachable, d, d_max[graph.node_group] + 1.0)
    return Distances(node=node, reachable=reachable)


def graph_rewards(
    distance: np.ndarray, valid: np.ndarray, *, omega: float, invalid_penalty: float, reward_form: str = "code"
) -> np.ndarray:
    """float64 (n,): 10·ω^d (code) or 10·ω^(d+1) (paper) of each row's next state, minus penalty·invalid."""
    if reward_form == "code":
        base = 10.0 * np.power(omega, distance)
    elif reward_form == "paper":
        base = 10.0 * np.power(omega, distance + 1.0)
    else:
        raise ValueError(f"reward_form must be 'code' or 'paper', got {reward_form!r}")
    return base - invalid_penalty * (~np.asarray(valid, dtype=bool))
