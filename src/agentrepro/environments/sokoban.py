"""Sokoban with VAGEN-Lite semantics (6×6, one box), seed for seed with the reference.

`reset(seed)`: attempts 1 … `reset_seed_max_tries` with a generation seed `s` starting at the episode
seed: generate a room from `s` (sokoban_rooms.generate_room, generators from quirks.reference_generators);
if `min_solution_steps` is set, accept only when the BFS solution length lies in that range; on a
rejection or a generator exception continue with `s = quirks.retry_seed(s)`. If every attempt is
rejected the last generated room is kept (as the reference does). Rooms are a pure function of the seed
and the generation parameters and are cached (`generate_for_seed`), since a rollout group resets one
seed many times.

A turn executes up to `max_actions_per_step` push actions; +`success_reward` (1.0) when every box is on a
target (done; later actions not executed), +`format_reward` (0.1) when at least one action executed.
gym-sokoban's own step rewards and `max_steps` are ignored, like the reference; the agent loop limits turns.

Text cells: ` # ` wall, ` _ ` floor, ` O ` target, ` √ ` box on target, ` X ` box, ` P ` player,
` S ` player on a target. The class declares its parameters (VAGEN's `SokobanEnvConfig` names) and prompts.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from agentrepro.environments import quirks
from agentrepro.environments.base import Env, grid_text, turn_parameters
from agentrepro.environments.images import sokoban_image
from agentrepro.environments.params import Param, integer, integer_pair, number, one_of, optional_integer
from agentrepro.environments.prompts import GridPrompts
from agentrepro.environments.sokoban_rooms import (
    ACTION_WORDS,
    BOX,
    BOX_ON_TARGET,
    PLAYER,
    TARGET,
    bfs_solution,
    generate_room,
    push_or_move,
)

SYMBOLS = {0: "#", 1: "_", 2: "O", 3: "√", 4: "X", 5: "P", 6: "S"}  # cell code (6: player on a target) -> symbol
GENERATION_KEYS = (
    "dim_room",
    "num_boxes",
    "num_gen_steps",
    "p_change_directions",
    "generate_room_tries",
    "min_solution_steps",
    "reset_seed_max_tries",
    "min_solution_bfs_max_depth",
)


@lru_cache(maxsize=4096)
def generate_for_seed(seed: int, generation: tuple) -> tuple[tuple[int, ...], tuple[int, ...], int, tuple]:
    """(room_fixed, room_state, accepted generation seed, attempt log) for an episode seed.

    A pure function of the seed and the generation parameters (`generation` = the values of
    GENERATION_KEYS, lists as tuples), cached because GRPO-style groups reset the same seed many times.
    """
    p = dict(zip(GENERATION_KEYS, generation))
    rows, cols = p["dim_room"]
    bounds = p["min_solution_steps"]
    s = seed
    log: list[dict[str, Any]] = []
    generated = None
    for _ in range(p["reset_seed_max_tries"]):
        rng, nprng = quirks.reference_generators(s)
        try:
            fixed, state = generate_room(
                rows,
                cols,
                p_change_directions=p["p_change_directions"],
                num_steps=p["num_gen_steps"],
                num_boxes=p["num_boxes"],
                tries=p["generate_room_tries"],
                rng=rng,
                nprng=nprng,
            )
        except (RuntimeError, RuntimeWarning) as exc:
            log.append({"seed": s, "error": str(exc), "bfs_len": None})
            s = quirks.retry_seed(s)
            continue
        generated = (tuple(fixed), tuple(state), s)
        if bounds is None:
            log.append({"seed": s, "error": None, "bfs_len": None})
            break
        length = len(bfs_solution(state, fixed, rows, cols, p["min_solution_bfs_max_depth"]))
        log.append({"seed": s, "error": None, "bfs_len": length})
        if bounds[0] <= length <= bounds[1]:
            break
        s = quirks.retry_seed(s)
    if generated is None:
        raise RuntimeError(
            f"no Sokoban room could be generated from seed {seed} in {p['reset_seed_max_tries']} attempts"
        )
    return (*generated, tuple(log))


# Upper bounds of the generation parameters (the reference has none): a room of 24 x 24 already takes about a
# second a reset on one core, and every reset may retry `reset_seed_max_tries` x `generate_room_tries` rooms.
MAX_ROOM_SIDE = 20  # rows and columns of dim_room (VAGEN's studies use 6 to 10)
MAX_RESET_TRIES = 10_000  # reset_seed_max_tries: the reference's default is also its most
MAX_ROOM_TRIES = 100  # generate_room_tries (default 4)
MAX_GEN_STEPS = 1_000  # num_gen_steps (default 1.7 x (rows + cols): 68 at the largest room)
MAX_SOLUTION_STEPS = 1_000  # min_solution_steps' maximum and min_solution_bfs_max_depth (default 200)
MAX_STEPS = 1_000_000  # max_steps (ignored, as by the reference)


def _dim_room(v: Any) -> list[int]:
    v = integer_pair(v)
    if not all(3 <= side <= MAX_ROOM_SIDE for side in v):
        raise ValueError(f"a list of two integers in [3, {MAX_ROOM_SIDE}]")
    return v


def _min_solution_steps(v: Any) -> list[int] | None:
    if v is None:
        return None
    v = integer_pair(v)
    if not 0 <= v[0] <= v[1] <= MAX_SOLUTION_STEPS:
        raise ValueError(f"null or [min, max] with 0 <= min <= max <= {MAX_SOLUTION_STEPS}")
    return v


GUIDE = """You are a Sokoban solver.
Sokoban Quick Guide
Goal: Push all boxes onto targets.
Symbols (If image is provided there are no symbols):
# Wall | _ Floor | O Target | X Box | P You | √ Box on Target | S You on Target
Rules:
1. Push boxes (can't pull).
2. Avoid walls.
Actions you can take: Left, Down, Right, Up."""


EXAMPLES = {
    "free_think": """
Example 1:
<think>The box is one step below me, and the target is two steps below me. I should go down to reach the box and then push it down to the target.</think>
<answer>Down</answer>

Example 2:
<think>The box is to the right of me, and the target is further to the right. I need to move right to get behind the box and push it toward the target.</think>
<answer>Right</answer>

Example 3:
<think>The box is above me, and the target is above the box. I should move up to reach the box and then push it upward to the target.</think>
<answer>Up</answer>
""",
    "wm": """
Example 1:
<observation>The box is below and right of the player, and the target is below and right of the player</observation>
<think>I should move right to align my column with the box and the target</think>
<answer>Right</answer>
<prediction>The box will be below and same column of the player, and the target will be below and same column of the player</prediction>

Example 2:
<observation>The box is above and left of the player, and the target is above and same column of the player</observation>
<think>I should move up to align my row with the box and reach the target's row position</think>
<answer>Up</answer>
<prediction>The box will be same row and left of the player, and the target will be same row and same column of the player</prediction>

Example 3:
<observation>The box is same row and right of the player, and the target is same row and left of the player</observation>
<think>I should move right to push the box right while keeping the target on my left</think>
<answer>Right</answer>
<prediction>The box will be same row and right of the player, and the target will be same row and left of the player</prediction>
""",
    "free_wm": """
Example 1:
<observation>The box is below and right of the player, and the target is below and right of the player</observation>
I should move right to align my column with the box and the target.
<answer>Right</answer>
After moving right, the box and target should still be below me but now in the same column.
<prediction>The box will be below and same column of the player, and the target will be below and same column of the player</prediction>

Example 2:
<observation>The box is above and left of the player, and the target is above and same column of the player</observation>
I should move up to align my row with the box and reach the target's row position.
<answer>Up</answer>
After moving up, the box should be on the same row to my left, and the target on the same row in the same column.
<prediction>The box will be same row and left of the player, and the target will be same row and same column of the player</prediction>

Example 3:
<observation>The box is same row and right of the player, and the target is same row and left of the player</observation>
I should move right to push the box right while keeping the target on my left.
<answer>Right</answer>
After pushing right, the box stays to my right and the target stays to my left.
<prediction>The box will be same row and right of the player, and the target will be same row and left of the player</prediction>
""",
}


class Sokoban(Env):
    """Sokoban; `params` as validated by `Sokoban.validate_params`."""

    name = "sokoban"
    grid_symbols = tuple(SYMBOLS.values())
    image_packages = ("gym-sokoban",)
    prompts = GridPrompts(guide=GUIDE, examples=EXAMPLES, wm_goal="target", wm_other="box", wm_rules_end="\n")
    parameters = (
        Param("dim_room", [6, 6], _dim_room, "rows and columns of the room, border walls included"),
        Param("num_boxes", 1, one_of(1), "boxes (the single-box reverse play is what the fixtures cover)"),
        Param("max_steps", 100, integer(1, MAX_STEPS), "gym-sokoban's step limit (ignored, as by the reference)"),
        Param(
            "num_gen_steps",
            None,
            optional_integer(1, MAX_GEN_STEPS),
            "random-walk steps; null: int(1.7 * (rows + cols))",
        ),
        Param("p_change_directions", 0.35, number(0, 1), "probability that the random walk turns"),
        Param("generate_room_tries", 4, integer(1, MAX_ROOM_TRIES), "topologies drawn per generation attempt"),
        Param(
            "min_solution_steps",
            None,
            _min_solution_steps,
            "null or [min, max]: regenerate until the BFS solution length lies in it",
        ),
        Param("reset_seed_max_tries", 10000, integer(1, MAX_RESET_TRIES), "generation attempts per episode seed"),
        Param("min_solution_bfs_max_depth", 200, integer(1, MAX_SOLUTION_STEPS), "depth limit of the BFS solver"),
        *turn_parameters(
            prompts.formats,
            prompt_format="wm",
            max_actions_per_step=3,
            format_reward=0.1,
            render_modes=("text", "vision"),
        ),
    )

    @classmethod
    def resolve_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        if params["num_gen_steps"] is None:
            params["num_gen_steps"] = int(1.7 * sum(params["dim_room"]))
        return params

    def _generate(self, seed: int) -> None:
        if not 0 <= seed < 2**32:  # numpy's legacy seeding accepts exactly this range
            raise ValueError(f"Sokoban seeds must lie in [0, 2**32), got {seed}")
        p = self.params
        self.rows, self.cols = p["dim_room"]
        generation = tuple(tuple(p[k]) if isinstance(p[k], list) else p[k] for k in GENERATION_KEYS)
        fixed, state, self.generation_seed, log = generate_for_seed(seed, generation)
        self.room_fixed, self.room_state = list(fixed), list(state)
        self.attempt_log = [dict(entry) for entry in log]

    def _apply(self, action: str) -> None:
        push_or_move(self.room_state, self.room_fixed, self.rows, self.cols, ACTION_WORDS.index(action))

    def boxes_on_target(self) -> int:
        return self.room_state.count(BOX_ON_TARGET)

    def _terminal(self) -> tuple[bool, bool]:
        solved = self.boxes_on_target() == self.params["num_boxes"]
        return solved, solved

    def player_position(self) -> tuple[int, int]:
        return divmod(self.room_state.index(PLAYER), self.cols)

    def render(self) -> str:
        cells = [6 if v == PLAYER and f == TARGET else v for v, f in zip(self.room_state, self.room_fixed)]
        return grid_text((SYMBOLS[v] for v in cells[r * self.cols : (r + 1) * self.cols]) for r in range(self.rows))

    def render_image(self):
        """gym-sokoban's 16-pixel tiles (images.sokoban_image), as VAGEN's vision mode shows the room."""
        return sokoban_image(self.room_state, self.room_fixed, self.rows, self.cols)

    def solve(self) -> list[str]:
        if BOX not in self.room_state:
            return []
        return bfs_solution(
            self.room_state, self.room_fixed, self.rows, self.cols, self.params["min_solution_bfs_max_depth"]
        )

    def grid_array(self, which: str = "state") -> list[list[int]]:
        """`room_state` or `room_fixed` as a rows × cols nested list (the reference's arrays)."""
        flat = self.room_state if which == "state" else self.room_fixed
        return [flat[r * self.cols : (r + 1) * self.cols] for r in range(self.rows)]

    def _info(self) -> dict[str, Any]:
        info = super()._info()
        info["boxes_on_target"] = self.boxes_on_target()
        return info

    def show_fields(self) -> dict[str, Any]:
        """The seed the accepted room was generated from, and how many generation attempts it took."""
        return {"generation_seed": self.generation_seed, "attempts": len(self.attempt_log)}
