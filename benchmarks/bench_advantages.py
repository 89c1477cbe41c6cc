"""Benchmark: GraphGPO graph build + shortest paths + advantages on an ALFWorld-sized batch and 10× larger.

    .venv/bin/python benchmarks/bench_advantages.py [--repeats 15] [--seed 0]

ALFWorld-sized: 16 groups × 8 trajectories × up to 50 turns (about 6,400 rows). Trajectories of a group
random-walk from one start state over a per-group world of 120 states with 3 successors each (so states
repeat across and within trajectories), stop at the goal or after 50 turns, with 10% invalid turns
(which stay in place). Sizes 10× scale the number of groups. Reports the median (and minimum, less sensitive to other load) over repeats of
(a) building the StepBatch from columns, (b) estimate(..., "graphgpo") with its component timings (graph_build includes factorising the state
strings, which the batch does lazily), and
gigpo / grpo for comparison; then ratios against baselines measured in the same run (GRPO on the same
batch, and the 1× size). Numbers depend on the machine; record them in benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from agentrepro.algorithms import StepBatch, estimate


def make_batch_columns(
    groups: int,
    rng: np.random.Generator,
    trajs: int = 8,
    max_turns: int = 50,
    world: int = 120,
    out_degree: int = 3,
    invalid: float = 0.1,
) -> dict:
    """Columns of a synthetic rollout batch with ALFWorld-like state reuse (see module docstring)."""
    cols = {
        k: [] for k in ("group", "traj", "turn", "state", "next_state", "reward", "episode_reward", "valid", "success")
    }
    for g in range(groups):
        succ = rng.integers(0, world, size=(world, out_degree))
        goal_from = set(rng.choice(world, size=3, replace=False).tolist())  # states with an action that wins
        for t in range(trajs):
            s, steps, won = 0, [], False
            for k in range(max_turns):
                ok = rng.random() >= invalid
                if ok and s in goal_from and rng.random() < 0.3:
                    steps.append((k, s, "success", True))
                    won = True
                    break
                nxt = int(succ[s, rng.integers(out_degree)]) if ok else s
                steps.append((k, s, nxt, ok))
                s = nxt
            for k, a, b, ok in steps:
                cols["group"].append(f"task{g}")
                cols["traj"].append(f"task{g}-t{t}")
                cols["turn"].append(k)
                cols["state"].append(f"g{g}:room {a}")
                cols["next_state"].append("success" if b == "success" else f"g{g}:room {b}")
                cols["reward"].append(10.0 if b == "success" else 0.0)
                cols["episode_reward"].append(10.0 * won)
                cols["valid"].append(ok)
                cols["success"].append(won)
    return cols


def fresh_strings(cols: dict) -> dict:
    """A copy of the columns whose strings are new objects (so Python's cached string hashes do not carry over)."""
    return {k: [x.encode().decode() for x in v] if isinstance(v[0], str) else v for k, v in cols.items()}


def measure(cols: dict, repeats: int) -> dict:
    """Median seconds of batch construction and of each estimator (fresh batch each repeat)."""
    out: dict[str, list] = {"from_arrays": [], "grpo": [], "gigpo": [], "graphgpo": []}
    comps: dict[str, list] = {}
    for _ in range(repeats):
        t0 = time.perf_counter()
        batch = StepBatch.from_arrays(**fresh_strings(cols))
        out["from_arrays"].append(time.perf_counter() - t0)
        for name in ("grpo", "gigpo", "graphgpo"):
            # fresh batch and fresh string objects (as each training step has): hashing and factorising the
            # state strings is part of the estimator's cost
            b = StepBatch.from_arrays(**fresh_strings(cols))
            t0 = time.perf_counter()
            res = estimate(b, name)
            out[name].append(time.perf_counter() - t0)
            if name == "graphgpo":
                for k, v in res.timings.items():
                    comps.setdefault(k, []).append(v)
        diag = res.diagnostics
    med = {k: statistics.median(v) for k, v in out.items()}
    med["min"] = {k: min(v) for k, v in out.items()}
    med["components"] = {k: statistics.median(v) for k, v in comps.items()}
    med["rows"] = len(batch)
    med["diagnostics"] = diag
    return med


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    estimate(StepBatch.from_arrays(**make_batch_columns(2, rng)), "graphgpo")  # warm-up (imports, caches)
    results = {}
    for scale in (1, 10):
        cols = make_batch_columns(16 * scale, rng)
        results[scale] = m = measure(cols, args.repeats if scale == 1 else max(3, args.repeats // 3))
        d = m["diagnostics"]
        print(
            f"\n{scale}x: {m['rows']} rows, {16 * scale} groups; nodes {d['nodes']}, edges {d['edges']}, "
            f"shared_state_rate {d['shared_state_rate']:.2f}, duplicate_edge_ratio {d['duplicate_edge_ratio']:.2f}, "
            f"all_fail_groups {d['all_fail_groups']}"
        )
        print(
            f"  StepBatch.from_arrays  {m['from_arrays'] * 1e3:8.2f} ms median, {m['min']['from_arrays'] * 1e3:8.2f} ms min"
        )
        for name in ("grpo", "gigpo", "graphgpo"):
            print(
                f"  estimate {name:<13} {m[name] * 1e3:8.2f} ms median, {m['min'][name] * 1e3:8.2f} ms min"
                f"   ({m[name] / m['grpo']:.1f}x grpo)"
            )
        print("  graphgpo components: " + ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in m["components"].items()))
        print(f"  graphgpo per row: {m['graphgpo'] / m['rows'] * 1e6:.2f} us")
    r1, r10 = results[1], results[10]
    rows_ratio = r10["rows"] / r1["rows"]
    print(
        f"\ngrowth 1x -> 10x: rows x{rows_ratio:.1f}; graphgpo time x{r10['graphgpo'] / r1['graphgpo']:.1f}; "
        f"gigpo x{r10['gigpo'] / r1['gigpo']:.1f}; grpo x{r10['grpo'] / r1['grpo']:.1f}; "
        f"from_arrays x{r10['from_arrays'] / r1['from_arrays']:.1f}"
    )


if __name__ == "__main__":
    main()
