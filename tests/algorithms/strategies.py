"""Hypothesis strategies for random step-row batches (shared by the property tests)."""

from __future__ import annotations

from hypothesis import strategies as st


@st.composite
def step_rows(draw, max_groups: int = 4, max_trajs: int = 5, max_turns: int = 6, shuffle: bool = True):
    """A batch of step rows: groups of 1..max_trajs trajectories of 1..max_turns turns, states from a small
    pool per group (so they repeat, revisit and self-loop), some successes and invalid turns, and rows in
    random order (each trajectory's own rows may come in any order: turn indices say where they belong)."""
    rows = []
    shared_names = draw(st.booleans())
    for g in range(draw(st.integers(1, max_groups))):
        pool = [f"s{k}" if shared_names else f"g{g}s{k}" for k in range(draw(st.integers(1, 5)))]
        start = pool[0]
        big_reward = draw(st.sampled_from([10.0, 1.0, 9.9]))
        for t in range(draw(st.integers(1, max_trajs))):
            won = draw(st.booleans())
            n = draw(st.integers(1, max_turns))
            state = start
            for k in range(n):
                last = k == n - 1
                valid = True if (won and last) else draw(st.booleans() | st.just(True))
                nxt = "success" if (won and last) else (state if not valid else draw(st.sampled_from(pool)))
                rows.append(
                    {
                        "group": f"g{g}",
                        "traj": f"g{g}t{t}",
                        "turn": k,
                        "state": state,
                        "next_state": nxt,
                        "reward": big_reward if (won and last) else 0.0,
                        "episode_reward": big_reward if won else 0.0,
                        "valid": valid,
                        "success": won,
                    }
                )
                state = nxt
    if shuffle:
        rows = draw(st.permutations(rows))
    return list(rows)
