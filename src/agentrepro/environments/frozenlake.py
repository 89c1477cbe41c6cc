"""FrozenLake with VAGEN-Lite semantics (4×4, p = 0.8, not slippery, random start and goal).

Map generation (VAGEN `generate_random_map(size, p, seed)`): `rng = np.random.default_rng(seed)`; repeat
{board = rng.choice(["F", "H"], (size, size), p=[p, 1 - p]); start = rng.integers(size, size=2);
goal = rng.integers(size, size=2); if start == goal: repeat; write S and G; accept if a 4-neighbour
path S → G avoids holes}. The player starts on S. Moves follow gymnasium's FrozenLake with
`is_slippery=False`: deterministic, a move off the board leaves the player in place, the episode ends on
G (success) or H. Per turn: up to `max_actions_per_step` actions, +1.0 on the goal, +0.02 format reward.

Text cells: ` P ` player, ` _ ` frozen (also S), ` O ` hole, ` G ` goal, ` X ` player in a hole,
` V ` player on the goal. The class declares its parameters (VAGEN's `FrozenLakeEnvConfig` names) and prompts.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from agentrepro.environments.base import Env, grid_text, turn_parameters
from agentrepro.environments.images import frozenlake_image
from agentrepro.environments.params import Param, integer, number, one_of
from agentrepro.environments.prompts import GridPrompts
from agentrepro.errors import BadInput

MOVES = {"left": (0, -1), "down": (1, 0), "right": (0, 1), "up": (-1, 0)}  # gymnasium order 0..3
SYMBOLS = {"S": "_", "F": "_", "H": "O", "G": "G"}  # map letter -> symbol of the cell
PLAYER_SYMBOLS = {"S": "P", "F": "P", "H": "X", "G": "V"}  # map letter -> symbol of the cell with the player on it


def reachable(board: list[list[str]] | np.ndarray, start: tuple[int, int], goal: tuple[int, int]) -> bool:
    """Whether a 4-neighbour path from `start` to `goal` avoids every 'H' cell."""
    return shortest_path(board, start, goal) is not None


def shortest_path(board, start: tuple[int, int], goal: tuple[int, int]) -> list[str] | None:
    """BFS over cells (moves tried left, down, right, up); the action words, or None if unreachable."""
    rows, cols = len(board), len(board[0])
    parent: dict[tuple[int, int], tuple[tuple[int, int], str] | None] = {start: None}
    queue = deque([start])
    while queue:
        cell = queue.popleft()
        if cell == goal:
            path = []
            step = parent[cell]
            while step is not None:
                cell, action = step
                path.append(action)
                step = parent[cell]
            return path[::-1]
        if board[cell[0]][cell[1]] == "H":
            continue
        for action, (dr, dc) in MOVES.items():
            r, c = cell[0] + dr, cell[1] + dc
            if 0 <= r < rows and 0 <= c < cols and (r, c) not in parent and board[r][c] != "H":
                parent[(r, c)] = (cell, action)
                queue.append((r, c))
    return None


def generate_random_map(size: int, p: float, seed: int) -> list[str]:
    """The reference's random map: rows over 'S F H G' (draw order as documented in the module)."""
    rng = np.random.default_rng(seed)
    p = min(1, p)
    while True:
        board = rng.choice(["F", "H"], (size, size), p=[p, 1 - p])
        row, col = (int(v) for v in rng.integers(size, size=2))
        start = (row, col)
        row, col = (int(v) for v in rng.integers(size, size=2))
        goal = (row, col)
        if start == goal:
            continue
        board[start] = "S"
        board[goal] = "G"
        if reachable(board, start, goal):
            return ["".join(row) for row in board]


MAX_SIZE = 64  # rows and columns of a map: `size`, and a given `desc` (whose row count becomes `size`)


def _desc(v: Any) -> list[str] | None:
    if v is None:
        return None
    if (
        not isinstance(v, list)
        or not 0 < len(v) <= MAX_SIZE
        or not all(isinstance(r, str) and 0 < len(r) <= MAX_SIZE for r in v)
        or len({len(r) for r in v}) != 1
        or any(set(r) - set("SFHG") for r in v)
        or sum(r.count("S") for r in v) != 1
        or sum(r.count("G") for r in v) < 1
    ):
        raise ValueError(
            f"null or a list of at most {MAX_SIZE} equal-length row strings of at most {MAX_SIZE} letters "
            "over S F H G with one S and a G"
        )
    return list(v)


GUIDE = """You are a FrozenLake solver.
FrozenLake Quick Guide
Goal: Reach the goal (G).
Symbols (If image is provided there are no symbols):
_ Frozen | O Hole | G Goal | P Player | X Player fell into hole | V Player on goal
Rules:
1. Avoid falling into holes.
2. Frozen tiles are slippery, you may move perpendicular to your intended direction.
Actions you can take: Left, Down, Right, Up."""


EXAMPLES = {
    "free_think": """
Example 1:
<think>The goal is below me. I should go down to reach it while avoiding the hole on my left.</think>
<answer>Down</answer>

Example 2:
<think>The goal is to my right and there's a hole directly below me. I should go right first to avoid the hole.</think>
<answer>Right</answer>

Example 3:
<think>I can see the goal is up and to the left. I should move up first to get closer.</think>
<answer>Up</answer>
""",
    "wm": """
Example 1:
<observation>The goal is below and right of the player, and there is a hole below and same column of the player</observation>
<think>I should move right to avoid the hole and get closer to the goal</think>
<answer>Right</answer>
<prediction>The goal will be below and same column of the player, and the hole will be below and left of the player</prediction>

Example 2:
<observation>The goal is above and left of the player</observation>
<think>I should move up to get closer to the goal</think>
<answer>Up</answer>
<prediction>The goal will be same row and left of the player</prediction>

Example 3:
<observation>The goal is same row and right of the player, and there is a hole above and right of the player</observation>
<think>I should move right to reach the goal</think>
<answer>Right</answer>
<prediction>The player will reach the goal</prediction>
""",
}


class FrozenLake(Env):
    """FrozenLake; `params` as validated by `FrozenLake.validate_params`."""

    name = "frozenlake"
    grid_symbols = ("P", "_", "O", "G", "X", "V")  # the order the word tokenizer's probe text lists them in
    image_packages = ("gymnasium",)
    prompts = GridPrompts(guide=GUIDE, examples=EXAMPLES, wm_goal="goal", wm_other="hole")
    parameters = (
        Param(
            "size", 4, integer(1, MAX_SIZE), "rows and columns of a generated map (the given map's when desc is set)"
        ),
        Param("p", 0.8, number(0, 1), "probability that a generated cell is frozen rather than a hole"),
        Param("is_slippery", False, one_of(False), "slippery ice (only the VAGEN-Lite setting, false, is supported)"),
        Param("slip_prob", 0.0, one_of(0.0), "probability of slipping (0 without slippery ice)"),
        Param("desc", None, _desc, "null (maps drawn from the seed) or a fixed map as rows over S F H G"),
        *turn_parameters(
            prompts.formats,
            prompt_format="free_think",
            max_actions_per_step=5,
            format_reward=0.02,
            render_modes=("text", "vision"),
        ),
    )

    @classmethod
    def resolve_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        if params["desc"] is not None:
            params["size"] = len(params["desc"])
        elif params["size"] < 2:  # a start and a different goal need two cells
            raise BadInput(
                f"expected an integer >= 2 for a generated map (no desc), got {params['size']}", where="env.params.size"
            )
        return params

    def _generate(self, seed: int) -> None:
        desc = self.params.get("desc")
        if desc is None:
            if not 0 <= seed < 2**128:
                raise ValueError(f"seed {seed} out of range for numpy's SeedSequence")
            desc = generate_random_map(self.params["size"], self.params["p"], seed)
        self.desc = [list(row) for row in desc]
        self.nrow, self.ncol = len(self.desc), len(self.desc[0])
        self.pos = next((r, c) for r in range(self.nrow) for c in range(self.ncol) if self.desc[r][c] == "S")

    def _apply(self, action: str) -> None:
        dr, dc = MOVES[action]
        r, c = self.pos
        self.pos = (min(max(r + dr, 0), self.nrow - 1), min(max(c + dc, 0), self.ncol - 1))

    def _terminal(self) -> tuple[bool, bool]:
        cell = self.desc[self.pos[0]][self.pos[1]]
        return cell in "GH", cell == "G"

    def player_position(self) -> tuple[int, int]:
        return self.pos

    def render(self) -> str:
        return grid_text(
            ((PLAYER_SYMBOLS if (r, c) == self.pos else SYMBOLS)[letter] for c, letter in enumerate(row))
            for r, row in enumerate(self.desc)
        )

    def render_image(self):
        """gymnasium's FrozenLake picture (images.frozenlake_image), as VAGEN's vision mode shows the board."""
        return frozenlake_image(self.desc, self.pos)

    def solve(self) -> list[str]:
        if self._terminal()[0]:
            return []
        goal = next((r, c) for r in range(self.nrow) for c in range(self.ncol) if self.desc[r][c] == "G")
        return shortest_path(self.desc, self.pos, goal) or []

    def _info(self) -> dict[str, Any]:
        info = super()._info()
        info["state_index"] = self.pos[0] * self.ncol + self.pos[1]
        return info
