"""Sokoban room generation, written from gym-sokoban's documented algorithm (room_utils.py @ 8e06e44).

Cell codes (`room_state`): 0 wall, 1 floor, 2 empty target, 3 box on target, 4 box off target, 5 player.
`room_fixed` holds the static layer (0 wall, 1 floor, 2 target). Rooms are flat lists of length
rows·cols in row-major order (index = row·cols + col); this keeps the search fast in pure Python.

`generate_room(rows, cols, ...)` draws, in the reference's order:

1. topology: a random walk of `num_steps` steps that stamps 3×3 floor masks (`random.sample`,
   `random.randint`, `random.random` from the Python generator);
2. placement: the player, then each box/target, on a uniformly drawn free floor cell
   (`randint` of numpy's legacy generator);
3. reverse play: a depth-first search that moves the player and pulls boxes away from their targets,
   keeping the first state of highest score `box_swaps · Σ manhattan(box, its target)` (0 while any box
   sits on a target). Fixed action order (pull up, down, left, right, then move up, down, left, right),
   states de-duplicated by their exact cell codes, time-to-live 300, at most 300000 states.

Up to `tries` topologies are drawn; `RuntimeError` if a room has too few floor cells, `RuntimeWarning`
if every try scores 0 — the same exceptions the reference raises, which its reset loop catches.
"""

from __future__ import annotations

import random
import sys
from collections import deque

import numpy as np

WALL, FLOOR, TARGET, BOX_ON_TARGET, BOX, PLAYER = 0, 1, 2, 3, 4, 5

_MASKS = (
    ((0, 0, 0), (1, 1, 1), (0, 0, 0)),
    ((0, 1, 0), (0, 1, 0), (0, 1, 0)),
    ((0, 0, 0), (1, 1, 0), (0, 1, 0)),
    ((0, 0, 0), (1, 1, 0), (1, 1, 0)),
    ((0, 0, 0), (0, 1, 1), (0, 1, 0)),
)
_DIRECTIONS = ((1, 0), (0, 1), (-1, 0), (0, -1))
_CHANGES = ((-1, 0), (1, 0), (0, -1), (0, 1))  # up, down, left, right
ACTION_WORDS = ("up", "down", "left", "right")


def room_topology(rows: int, cols: int, p_change_directions: float, num_steps: int, rng: random.Random) -> list[int]:
    """Random-walk floor plan: 1 floor, 0 wall, the border always wall."""
    level = [[0] * cols for _ in range(rows)]
    direction = rng.sample(_DIRECTIONS, 1)[0]
    r, c = rng.randint(1, rows - 1), rng.randint(1, cols - 1)
    for _ in range(num_steps):
        if rng.random() < p_change_directions:
            direction = rng.sample(_DIRECTIONS, 1)[0]
        r = max(min(r + direction[0], rows - 2), 1)
        c = max(min(c + direction[1], cols - 2), 1)
        mask = rng.sample(_MASKS, 1)[0]
        for i in range(3):
            for j in range(3):
                level[r - 1 + i][c - 1 + j] += mask[i][j]
    flat = []
    for i in range(rows):
        for j in range(cols):
            border = i in (0, rows - 1) or j in (0, cols - 1)
            flat.append(0 if border or level[i][j] == 0 else 1)
    return flat


def place_boxes_and_player(room: list[int], num_boxes: int, nprng: np.random.RandomState) -> list[int]:
    """Player (5) then each box target (2) on a uniformly drawn floor cell; RuntimeError if too few."""
    free = [i for i, v in enumerate(room) if v == FLOOR]
    if len(free) <= num_boxes + 1:
        raise RuntimeError(f"Not enough free spots (#{len(free)}) to place 1 player and {num_boxes} boxes.")
    room = list(room)
    room[free[nprng.randint(len(free))]] = PLAYER
    for _ in range(num_boxes):
        free = [i for i, v in enumerate(room) if v == FLOOR]
        room[free[nprng.randint(len(free))]] = TARGET
    return room


class _ReversePlay:
    """The reference's depth-first reverse play over one room (state kept on the instance)."""

    def __init__(self, fixed: list[int], cols: int, max_states: int = 300000):
        self.fixed, self.cols, self.max_states = fixed, cols, max_states
        self.targets = [i for i, v in enumerate(fixed) if v == TARGET]
        self.explored: set[tuple[int, ...]] = set()
        self.best: list[int] = []  # set by the first state searched (its score beats -1)
        self.best_score = -1
        self.steps = tuple(dr * cols + dc for dr, dc in _CHANGES)

    def score(self, mapping: dict[int, int]) -> int:
        total = 0
        for target, box in mapping.items():
            tr, tc = divmod(target, self.cols)
            br, bc = divmod(box, self.cols)
            total += abs(br - tr) + abs(bc - tc)
        return total

    def move(self, state: list[int], mapping: dict[int, int], last_pull: int, action: int) -> int:
        """Reverse action in place: 0-3 move and pull, 4-7 move only; returns the new last_pull."""
        player = state.index(PLAYER)
        step = self.steps[action % 4]
        nxt = player + step
        if state[nxt] in (FLOOR, TARGET):
            state[player] = self.fixed[player]
            state[nxt] = PLAYER
            if action < 4:
                box = player - step
                if state[box] in (BOX_ON_TARGET, BOX):
                    state[player] = BOX_ON_TARGET  # the reference marks every pulled box 3 (fixed up later)
                    state[box] = self.fixed[box]
                    for key in mapping:
                        if mapping[key] == box:
                            mapping[key] = player
                            last_pull = key
        return last_pull

    def search(self, state: list[int], mapping: dict[int, int], box_swaps: int, last_pull: int, ttl: int) -> None:
        ttl -= 1
        if ttl <= 0 or len(self.explored) >= self.max_states:
            return
        key = tuple(state)
        if key in self.explored:
            return
        score = box_swaps * self.score(mapping)
        if state.count(TARGET) != len(self.targets):
            score = 0
        if score > self.best_score:
            self.best, self.best_score = state, score
        self.explored.add(key)
        for action in range(8):
            nxt_state, nxt_mapping = list(state), dict(mapping)
            nxt_pull = self.move(nxt_state, nxt_mapping, last_pull, action)
            swaps = box_swaps + (nxt_pull != last_pull)
            # Reference quirk kept for parity: the child receives the parent's `last_pull`, not nxt_pull.
            self.search(nxt_state, nxt_mapping, swaps, last_pull, ttl)


def reverse_playing(state: list[int], fixed: list[int], cols: int) -> tuple[list[int], int]:
    """(best state, its score) of the reverse-play search from `state` (boxes on their targets)."""
    play = _ReversePlay(fixed, cols)
    mapping = {t: t for t in play.targets}
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 2000))  # the search recurses up to 300 levels deep
    try:
        play.search(state, mapping, 0, -1, 300)
    finally:
        sys.setrecursionlimit(limit)
    return list(play.best), play.best_score


def generate_room(
    rows: int,
    cols: int,
    *,
    p_change_directions: float,
    num_steps: int,
    num_boxes: int,
    tries: int,
    rng: random.Random,
    nprng: np.random.RandomState,
) -> tuple[list[int], list[int]]:
    """(room_fixed, room_state) as flat lists; raises RuntimeError / RuntimeWarning like the reference."""
    score = 0
    fixed: list[int] = []
    state: list[int] = []
    for _ in range(tries):
        room = room_topology(rows, cols, p_change_directions, num_steps, rng)
        room = place_boxes_and_player(room, num_boxes, nprng)
        fixed = [FLOOR if v == PLAYER else v for v in room]
        start = [BOX if v == TARGET else v for v in room]
        state, score = reverse_playing(start, fixed, cols)
        state = [BOX if v == BOX_ON_TARGET else v for v in state]
        if score > 0:
            break
    if score == 0:
        raise RuntimeWarning("Generated Model with score == 0")
    return fixed, state


def push_or_move(state: list[int], fixed: list[int], rows: int, cols: int, action: int) -> bool:
    """gym-sokoban's push action (0 up, 1 down, 2 left, 3 right) in place; True if the player moved.

    A box in the way is pushed if the cell beyond is floor or an empty target; otherwise the player moves
    only onto floor or an empty target. A vacated cell reverts to `fixed`; a box on a target becomes 3.
    """
    player = state.index(PLAYER)
    pr, pc = divmod(player, cols)
    dr, dc = _CHANGES[action]
    nr, nc = pr + dr, pc + dc
    br, bc = nr + dr, nc + dc
    if not (0 <= nr < rows and 0 <= nc < cols):
        return False
    nxt = nr * cols + nc
    if (
        state[nxt] in (BOX_ON_TARGET, BOX)
        and 0 <= br < rows
        and 0 <= bc < cols
        and state[br * cols + bc] in (FLOOR, TARGET)
    ):
        beyond = br * cols + bc
        state[beyond] = BOX_ON_TARGET if fixed[beyond] == TARGET else BOX
        state[nxt] = PLAYER
        state[player] = fixed[player]
        return True
    if state[nxt] in (FLOOR, TARGET):
        state[nxt] = PLAYER
        state[player] = fixed[player]
        return True
    return False


def bfs_solution(state: list[int], fixed: list[int], rows: int, cols: int, max_depth: int) -> list[str]:
    """VAGEN's breadth-first solver: shortest action words to put every box on a target, [] if none
    within `max_depth` (moves expanded up, down, left, right; first solved state dequeued wins)."""
    start = tuple(state)
    queue: deque[tuple[tuple[int, ...], tuple[str, ...]]] = deque([(start, ())])
    seen: set[tuple[int, ...]] = set()
    while queue:
        cur, path = queue.popleft()
        if len(path) > max_depth:
            return []
        if cur in seen:
            continue
        seen.add(cur)
        if BOX not in cur:
            return list(path)
        for action, word in enumerate(ACTION_WORDS):
            nxt = list(cur)
            if push_or_move(nxt, fixed, rows, cols, action):
                queue.append((tuple(nxt), (*path, word)))
    return []
