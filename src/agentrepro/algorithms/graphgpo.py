"""GraphGPO (verl-agent recipe/GraphGPO/core_graph.py, `normalize_distance=False`).

Step reward of a row = 10·ω^d(next_state) − penalty·invalid (`reward_form="paper"`: 10·ω^(d+1)), with d
from the group's state graph (graph.py). Step groups are the outgoing edges of each source state, i.e. the
rows sharing (group, state); a step group of one row gets 0. The episode term is GRPO's.
A = step_weight·A_step + episode_weight·A_episode; graph-only is episode_weight = 0 (the episode term is
then not computed, as in the reference).
"""

from __future__ import annotations

from agentrepro.algorithms.batch import StepBatch
from agentrepro.algorithms.diagnostics import graph_diagnostics, group_diagnostics
from agentrepro.algorithms.graph import build_graph, goal_distances, graph_rewards
from agentrepro.algorithms.grpo import episode_scores, episode_term
from agentrepro.algorithms.normalize import normalize
from agentrepro.algorithms.result import AdvantageResult
from agentrepro.algorithms.timing import Timings


def graphgpo(
    batch: StepBatch,
    *,
    norm: str = "std",
    omega: float = 0.1,
    step_weight: float = 1.0,
    episode_weight: float = 1.0,
    invalid_penalty: float = 0.1,
    episode_stats: str = "rows",
    epsilon: float = 1e-6,
    reward_form: str = "code",
) -> AdvantageResult:
    """GraphGPO advantages (n,) with graph rewards, distances and the graph diagnostics."""
    timings = Timings()
    with timings.time("graph_build"):
        graph = build_graph(batch)
    with timings.time("shortest_paths"):
        dist = goal_distances(graph)
    with timings.time("step_returns"):
        distance = dist.node[graph.dst]
        reward = graph_rewards(
            distance, batch.valid, omega=omega, invalid_penalty=invalid_penalty, reward_form=reward_form
        )
    with timings.time("advantage"):
        score = episode_scores(batch, invalid_penalty)
        codes, n_steps = batch.step_groups
        a_step = normalize(reward, codes, n_steps, norm=norm, epsilon=epsilon, singleton="zero")
        if episode_weight == 0.0:
            a_ep, advantage = None, step_weight * a_step
        else:
            a_ep = episode_term(batch, score, norm=norm, epsilon=epsilon, episode_stats=episode_stats)
            advantage = step_weight * a_step + episode_weight * a_ep
    diagnostics = graph_diagnostics(batch, graph, dist, distance, a_step)
    return AdvantageResult(
        "graphgpo",
        {},
        advantage=advantage,
        episode_score=score,
        advantage_episode=a_ep,
        advantage_step=a_step,
        graph_reward=reward,
        distance=distance,
        diagnostics=diagnostics,
        group_diagnostics=group_diagnostics(batch, graph, dist, a_step),
        timings=dict(timings),
    )


def graph_only(batch: StepBatch, **options) -> AdvantageResult:
    """GraphGPO with episode_weight = 0: only the graph step term."""
    weight = options.pop("episode_weight", 0.0)
    if weight != 0.0:
        raise ValueError(f"graph_only has episode_weight 0; got {weight!r} (use graphgpo instead)")
    result = graphgpo(batch, episode_weight=0.0, **options)
    result.estimator = "graph_only"
    return result
