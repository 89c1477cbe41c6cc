"""Graph and step-group diagnostics of one batch (docs/design.md §3.3 graph_diagnostics.jsonl, without `step`).

Definitions (totals over the batch's groups):
* groups, nodes (graph nodes, goal included), edges (distinct edges);
* duplicate_edge_ratio: 1 − distinct edges / edge occurrences (rows);
* shared_state_rate: fraction of anchor states (step groups) visited by ≥ 2 trajectories;
* singleton_out_edge_ratio: fraction of step groups with a single row (their step advantage is 0);
* nonzero_graph_adv_ratio: fraction of rows whose step advantage is non-zero (|A_step| > 1e-12);
* all_fail_groups / all_success_groups: groups in which no / every trajectory succeeded;
* unreachable_ratio: fraction of graph nodes that cannot reach the goal (they get d_max + 1);
* distance_hist: d(next_state) → number of rows (keys are the integer distances as strings);
* step_group_size_hist: step-group size → number of step groups (keys as strings).
GiGPO reports the step-group entries only (its groups are exact anchor states, not a graph).

`group_diagnostics` gives the same counts per rollout group (a list, one dict per group), kept apart
from the per-step totals so that graph_diagnostics.jsonl stays one flat object per step.
"""

from __future__ import annotations

from typing import SupportsFloat

import numpy as np

from agentrepro.algorithms.batch import StepBatch
from agentrepro.algorithms.graph import Distances, StateGraph


def _hist(values: np.ndarray) -> dict[str, int]:
    keys, counts = np.unique(values, return_counts=True)
    return {str(int(k)): int(c) for k, c in zip(keys, counts)}


def _ratio(num: SupportsFloat, den: SupportsFloat) -> float:
    return float(num) / float(den) if den else 0.0


def step_diagnostics(batch: StepBatch, advantage_step: np.ndarray) -> dict:
    """Group outcome counts and step-group statistics shared by GiGPO and GraphGPO."""
    codes, n_codes = batch.step_groups
    sizes = np.bincount(codes, minlength=n_codes)
    # distinct trajectories per step group
    # a step group is shared when its rows come from more than one trajectory (min traj != max traj)
    lo = np.full(n_codes, np.iinfo(np.int64).max)
    hi = np.full(n_codes, -1)
    np.minimum.at(lo, codes, batch.traj_codes)
    np.maximum.at(hi, codes, batch.traj_codes)
    used = sizes > 0  # node ids that are never an anchor are not step groups
    sizes, shared = sizes[used], (hi > lo)[used]
    n_steps = sizes.size
    # success per trajectory, then per group
    first = batch.traj_first
    traj_success = batch.success[first]
    traj_group = batch.group_codes[first]
    succ = np.bincount(traj_group, weights=traj_success, minlength=batch.n_groups)
    total = np.bincount(traj_group, minlength=batch.n_groups)
    return {
        "groups": batch.n_groups,
        "shared_state_rate": _ratio(np.count_nonzero(shared), n_steps),
        "singleton_out_edge_ratio": _ratio(np.count_nonzero(sizes == 1), n_steps),
        "nonzero_graph_adv_ratio": _ratio(np.count_nonzero(np.abs(advantage_step) > 1e-12), len(batch)),
        "all_fail_groups": int(np.count_nonzero(succ == 0)),
        "all_success_groups": int(np.count_nonzero(succ == total)),
        "step_group_size_hist": _hist(sizes),
    }


def graph_diagnostics(
    batch: StepBatch, graph: StateGraph, distances: Distances, row_distance: np.ndarray, advantage_step: np.ndarray
) -> dict:
    """All docs/design.md §3.3 diagnostics for a GraphGPO batch."""
    out = step_diagnostics(batch, advantage_step)
    out.update(
        {
            "nodes": graph.n_nodes,
            "edges": graph.n_edges,
            "duplicate_edge_ratio": _ratio(len(batch) - graph.n_edges, len(batch)),
            "unreachable_ratio": _ratio(np.count_nonzero(~distances.reachable), graph.n_nodes),
            "distance_hist": _hist(row_distance),
        }
    )
    order = [
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
    return {k: out[k] for k in order}


def group_diagnostics(
    batch: StepBatch, graph: StateGraph, distances: Distances, advantage_step: np.ndarray
) -> list[dict]:
    """Per rollout group (in order of first appearance): group, rows, trajectories, successes, nodes, edges,
    duplicate_edge_ratio, unreachable_nodes, d_max (largest finite distance), nonzero_graph_adv_ratio."""
    G = batch.n_groups
    rows = np.bincount(batch.group_codes, minlength=G)
    first = batch.traj_first
    traj_group = batch.group_codes[first]
    trajs = np.bincount(traj_group, minlength=G)
    wins = np.bincount(traj_group, weights=batch.success[first], minlength=G)
    nodes = np.bincount(graph.node_group, minlength=G)
    edges = np.bincount(graph.node_group[graph.edge_src], minlength=G)
    unreachable = np.bincount(graph.node_group, weights=~distances.reachable, minlength=G)
    d_max = np.zeros(G)
    np.maximum.at(d_max, graph.node_group[distances.reachable], distances.node[distances.reachable])
    nonzero = np.bincount(batch.group_codes, weights=np.abs(advantage_step) > 1e-12, minlength=G)
    return [
        {
            "group": name,
            "rows": int(rows[g]),
            "trajectories": int(trajs[g]),
            "successes": int(wins[g]),
            "nodes": int(nodes[g]),
            "edges": int(edges[g]),
            "duplicate_edge_ratio": _ratio(rows[g] - edges[g], rows[g]),
            "unreachable_nodes": int(unreachable[g]),
            "d_max": int(d_max[g]),
            "nonzero_graph_adv_ratio": _ratio(nonzero[g], rows[g]),
        }
        for g, name in enumerate(batch.group_names)
    ]
