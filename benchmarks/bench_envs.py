"""Resets and steps per second of the Sokoban and FrozenLake environments, with same-run baselines.

Run: `.venv/bin/python benchmarks/bench_envs.py [--seeds N] [--repeat R]`

Numbers are machine dependent; the ratios are what carries across machines:
* reset vs step: does map generation dominate an environment step (and so a rollout)?
* our Sokoban generator vs a reference-style port (numpy arrays, `np.where` for the player, marshal keys,
  as gym-sokoban's room_utils does it), on the same seeds; the port's rooms are checked to be identical;
* our linear-time tag matcher vs the reference regex, on ordinary (well-formed) responses.
"""

from __future__ import annotations

import argparse
import marshal
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from agentrepro.environments import make_env
from agentrepro.environments import sokoban_rooms as rooms
from agentrepro.environments.parsing import REFERENCE_PATTERNS, parse_response
from agentrepro.environments.quirks import reference_generators
from agentrepro.environments.sokoban import generate_for_seed


def best_of(fn, repeat: int) -> float:
    """Smallest wall time of `repeat` calls of fn() (seconds)."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


# -- baseline: reverse play the way gym-sokoban writes it (numpy state, marshal keys) ---------------
def _np_reverse_playing(room_state: np.ndarray, room_structure: np.ndarray):
    changes = {0: (-1, 0), 1: (1, 0), 2: (0, -1), 3: (0, 1)}
    box_locations = np.where(room_structure == 2)
    num_boxes = len(box_locations[0])
    mapping0 = {
        (box_locations[0][i], box_locations[1][i]): (box_locations[0][i], box_locations[1][i]) for i in range(num_boxes)
    }
    explored: set = set()
    best = {"room": None, "score": -1}

    def move(state, mapping, last_pull, action):
        pp = np.where(state == 5)
        pp = np.array([pp[0][0], pp[1][0]])
        change = changes[action % 4]
        nxt = pp + change
        if state[nxt[0], nxt[1]] in [1, 2]:
            state[pp[0], pp[1]] = room_structure[pp[0], pp[1]]
            state[nxt[0], nxt[1]] = 5
            if action < 4:
                box = pp - change
                if state[box[0], box[1]] in [3, 4]:
                    state[pp[0], pp[1]] = 3
                    state[box[0], box[1]] = room_structure[box[0], box[1]]
                    for k in mapping:
                        if mapping[k] == (box[0], box[1]):
                            mapping[k] = (pp[0], pp[1])
                            last_pull = k
        return state, mapping, last_pull

    def dfs(state, mapping, swaps, last_pull, ttl):
        ttl -= 1
        if ttl <= 0 or len(explored) >= 300000:
            return
        key = marshal.dumps(state)
        if key in explored:
            return
        score = swaps * sum(int(np.sum(np.abs(np.array(v) - np.array(k)))) for k, v in mapping.items())
        if np.where(state == 2)[0].shape[0] != num_boxes:
            score = 0
        if score > best["score"]:
            best["room"], best["score"] = state, score
        explored.add(key)
        for action in range(8):
            s2, m2, lp2 = move(state.copy(), dict(mapping), last_pull, action)
            dfs(s2, m2, swaps + (lp2 != last_pull), last_pull, ttl)

    dfs(room_state, mapping0, 0, (-1, -1), 300)
    return best["room"], best["score"]


def _np_generate(seed: int):
    """One attempt of generate_room (6×6, 20 steps, 1 box, 4 tries) with the numpy reverse play."""
    rng, nprng = reference_generators(seed)
    for _ in range(4):
        room = np.array(rooms.room_topology(6, 6, 0.35, 20, rng), dtype=int).reshape(6, 6)
        room = np.array(rooms.place_boxes_and_player(room.ravel().tolist(), 1, nprng)).reshape(6, 6)
        structure = room.copy()
        structure[structure == 5] = 1
        state = room.copy()
        state[state == 2] = 4
        state, score = _np_reverse_playing(state, structure)
        state[state == 3] = 4
        if score > 0:
            return structure, state
    raise RuntimeWarning("score 0")


def _our_generate(seed: int):
    rng, nprng = reference_generators(seed)
    return rooms.generate_room(6, 6, p_change_directions=0.35, num_steps=20, num_boxes=1, tries=4, rng=rng, nprng=nprng)


def bench_env(name: str, params: dict, seeds: list[int], repeat: int) -> dict:
    """Cold resets (empty room cache), cached resets (same seeds again), and steps of 5-turn episodes."""
    env = make_env(name, params)
    wrap = (
        "<observation>o</observation><think>t</think><answer>{}</answer><prediction>p</prediction>"
        if env.params["prompt_format"] != "free_think"
        else "<think>t</think><answer>{}</answer>"
    )
    rng = random.Random(0)
    scripts = [
        [wrap.format(", ".join(rng.choice(env.action_names) for _ in range(rng.randint(1, 3)))) for _ in range(5)]
        for _ in seeds
    ]

    def cold():
        if name == "sokoban":
            generate_for_seed.cache_clear()
        for s in seeds:
            env.reset(s)

    def warm():
        for s in seeds:
            env.reset(s)

    def steps() -> float:
        spent = 0.0
        for s, script in zip(seeds, scripts):
            env.reset(s)
            for response in script:
                t0 = time.perf_counter()
                env.step(response)
                spent += time.perf_counter() - t0
        return spent

    t_cold = best_of(cold, repeat)
    t_warm = best_of(warm, repeat)
    t_steps = min(steps() for _ in range(repeat))
    n_steps = 5 * len(seeds)
    return {
        "resets_per_s": len(seeds) / t_cold,
        "cached_resets_per_s": len(seeds) / t_warm,
        "steps_per_s": n_steps / t_steps,
        "reset_ms": 1000 * t_cold / len(seeds),
        "step_ms": 1000 * t_steps / n_steps,
        "reset_over_step": (t_cold / len(seeds)) / (t_steps / n_steps),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=200, help="number of seeds (10001, 10002, ...)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    seeds = list(range(10001, 10001 + args.seeds))
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, {len(seeds)} seeds, best of {args.repeat}")
    rows = [
        bench_env("sokoban", {"min_solution_steps": [1, 5]}, seeds, args.repeat),
        bench_env("sokoban", {}, seeds, args.repeat),
        bench_env("frozenlake", {}, seeds, args.repeat),
    ]
    labels = ["sokoban min_solution_steps=[1,5]", "sokoban min_solution_steps=null", "frozenlake"]
    print(
        f"{'environment':34s} {'resets/s':>9s} {'cached/s':>9s} {'steps/s':>9s} {'reset ms':>9s} {'step ms':>8s} {'reset/step':>10s}"
    )
    for label, r in zip(labels, rows):
        print(
            f"{label:34s} {r['resets_per_s']:9.0f} {r['cached_resets_per_s']:9.0f} {r['steps_per_s']:9.0f} "
            f"{r['reset_ms']:9.3f} {r['step_ms']:8.4f} {r['reset_over_step']:10.1f}"
        )

    gen_seeds = seeds[: max(20, args.seeds // 5)]
    for s in gen_seeds:  # parity of the baseline port, so the comparison is like for like
        try:
            ours = _our_generate(s)
        except (RuntimeError, RuntimeWarning):
            continue
        base = _np_generate(s)
        assert ours[1] == base[1].ravel().tolist() and ours[0] == base[0].ravel().tolist(), s
    t_ours = best_of(lambda: [_our_generate(s) for s in gen_seeds], args.repeat)
    t_base = best_of(lambda: [_np_generate(s) for s in gen_seeds], 1)
    print(
        f"sokoban generate_room: ours {1000 * t_ours / len(gen_seeds):.3f} ms, reference-style numpy port "
        f"{1000 * t_base / len(gen_seeds):.3f} ms per room -> speedup x{t_base / t_ours:.1f} ({len(gen_seeds)} seeds, identical rooms)"
    )

    texts = [
        f"<observation>box below</observation><think>{'push it ' * 20}</think><answer>Up, Left</answer><prediction>p</prediction>"
    ] * 2000
    t_lin = best_of(lambda: [parse_response(t, prompt_format="wm") for t in texts], args.repeat)
    t_re = best_of(lambda: [REFERENCE_PATTERNS["wm"].search(t).groups() for t in texts], args.repeat)
    print(
        f"wm parse, well-formed responses: linear matcher {1e6 * t_lin / len(texts):.1f} us (whole parse) vs reference regex "
        f"{1e6 * t_re / len(texts):.1f} us (search only) -> ratio x{t_lin / t_re:.2f}"
    )
    bad = "<observation></observation><think></think><answer>" * 40
    t_lin_bad = best_of(lambda: parse_response(bad, prompt_format="wm"), 1)
    t_re_bad = best_of(lambda: REFERENCE_PATTERNS["wm"].search(bad), 1)
    print(
        f"wm parse, adversarial {len(bad)} chars: linear {1000 * t_lin_bad:.2f} ms vs reference regex {1000 * t_re_bad:.1f} ms "
        f"-> speedup x{t_re_bad / t_lin_bad:.0f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
