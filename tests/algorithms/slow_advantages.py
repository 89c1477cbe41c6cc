"""Slow, obvious implementations of the estimators, written from the README's rules with plain Python
loops and dicts. The property tests check the vectorised package against these on random batches."""

from __future__ import annotations

import math
from collections import defaultdict, deque


def mean_std(xs):
    """Mean and sample std (N − 1) of a list; std 0 for one value."""
    m = sum(xs) / len(xs)
    if len(xs) == 1:
        return m, 0.0
    return m, math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def norm_group(x, members, norm, eps, singleton):
    """Normalise x[i] for i in members; singleton groups per 'passthrough' or 'zero'."""
    out = {}
    vals = [x[i] for i in members]
    if len(vals) == 1:
        i = members[0]
        if singleton == "zero":
            out[i] = 0.0
        else:
            out[i] = x[i] / (1 + eps) if norm == "std" else x[i]
        return out
    if all(v == vals[0] for v in vals):
        return dict.fromkeys(members, 0.0)
    m, s = mean_std(vals)
    for i in members:
        out[i] = (x[i] - m) / (s + eps) if norm == "std" else x[i] - m
    return out


def episode_term(rows, scores, norm, eps, stats):
    groups = defaultdict(list)
    for i, r in enumerate(rows):
        groups[r["group"]].append(i)
    out = [0.0] * len(rows)
    for members in groups.values():
        if stats == "rows":
            out_g = norm_group(scores, members, norm, eps, "passthrough")
            for i, v in out_g.items():
                out[i] = v
            continue
        per_traj = defaultdict(list)
        for i in members:
            per_traj[rows[i]["traj"]].append(scores[i])
        tvals = [sum(v) / len(v) for v in per_traj.values()]
        for i in members:
            if len(tvals) == 1:
                out[i] = scores[i] / (1 + eps) if norm == "std" else scores[i]
            elif all(v == tvals[0] for v in tvals) and all(scores[i] == tvals[0] for i in members):
                out[i] = 0.0
            else:
                m, s = mean_std(tvals)
                out[i] = (scores[i] - m) / (s + eps) if norm == "std" else scores[i] - m
    return out


def step_term(rows, values, norm, eps):
    groups = defaultdict(list)
    for i, r in enumerate(rows):
        groups[(r["group"], r["state"])].append(i)
    out = [0.0] * len(rows)
    for members in groups.values():
        for i, v in norm_group(values, members, norm, eps, "zero").items():
            out[i] = v
    return out


def step_returns(rows, gamma):
    """Discounted return of every row over the rest of its trajectory (turn order)."""
    by_traj = defaultdict(list)
    for i, r in enumerate(rows):
        by_traj[r["traj"]].append(i)
    out = [0.0] * len(rows)
    for members in by_traj.values():
        members.sort(key=lambda i: rows[i]["turn"])
        running = 0.0
        for i in reversed(members):
            running = rows[i]["reward"] + gamma * running
            out[i] = running
    return out


def distances(rows):
    """d(next_state) of every row: BFS from "success" on each group's reversed graph; unreachable d_max + 1."""
    by_group = defaultdict(list)
    for i, r in enumerate(rows):
        by_group[r["group"]].append(i)
    out = [0.0] * len(rows)
    for members in by_group.values():
        preds = defaultdict(set)
        nodes = set()
        for i in members:
            preds[rows[i]["next_state"]].add(rows[i]["state"])
            nodes.update((rows[i]["state"], rows[i]["next_state"]))
        dist = {}
        if "success" in nodes:
            dist["success"] = 0
            queue = deque(["success"])
            while queue:
                u = queue.popleft()
                for p in preds[u]:
                    if p not in dist:
                        dist[p] = dist[u] + 1
                        queue.append(p)
        d_max = max(dist.values(), default=0)
        for i in members:
            out[i] = float(dist.get(rows[i]["next_state"], d_max + 1))
    return out


def estimate(
    rows,
    name,
    norm="std",
    gamma=0.95,
    omega=0.1,
    step_weight=1.0,
    episode_weight=1.0,
    invalid_penalty=0.1,
    episode_stats="rows",
    epsilon=1e-6,
    reward_form="code",
):
    """Dict of per-row lists, like AdvantageResult.row_fields()."""
    pen = [invalid_penalty * (not r["valid"]) for r in rows]
    scores = [r["episode_reward"] - p for r, p in zip(rows, pen)]
    out = {"episode_score": scores}
    if name == "graph_only":
        name, episode_weight = "graphgpo", 0.0
    a_ep = episode_term(rows, scores, norm, epsilon, episode_stats)
    if name == "grpo":
        out["advantage"] = [episode_weight * a for a in a_ep]
        return out
    if name == "gigpo":
        ret = [g - p for g, p in zip(step_returns(rows, gamma), pen)]
        a_step = step_term(rows, ret, norm, epsilon)
        out.update(
            step_return=ret,
            advantage_episode=a_ep,
            advantage_step=a_step,
            advantage=[episode_weight * e + step_weight * s for e, s in zip(a_ep, a_step)],
        )
        return out
    d = distances(rows)
    shift = 0.0 if reward_form == "code" else 1.0
    gr = [10.0 * omega ** (x + shift) - p for x, p in zip(d, pen)]
    a_step = step_term(rows, gr, norm, epsilon)
    out.update(
        distance=d,
        graph_reward=gr,
        advantage_step=a_step,
        advantage=[step_weight * s + episode_weight * e for e, s in zip(a_ep, a_step)],
    )
    if episode_weight != 0.0:
        out["advantage_episode"] = a_ep
    return out


def masked_gae(rewards, values, mask, gamma, lam):
    """One sequence: the README's recurrence, token by token."""
    nextvalues, lastgaelam = 0.0, 0.0
    adv = [0.0] * len(rewards)
    for t in reversed(range(len(rewards))):
        g = rewards[t] + gamma * nextvalues - values[t] + gamma * lam * lastgaelam
        if mask[t]:
            nextvalues, lastgaelam = values[t], g
        adv[t] = lastgaelam
    return adv, [a + v for a, v in zip(adv, values)]
