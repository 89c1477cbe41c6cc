"""`StepBatch`: the step rows of docs/design.md §3.5 as numpy arrays, one entry per agent turn.

Rows are validated once here, so the estimators can trust their input. A bad row raises `BadInput`
naming its line (when the caller passes line numbers) and its field. Integer codes for groups,
trajectories and states are computed once (hash-based factorisation, order of first appearance) and
shared by every estimator.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from agentrepro.bounds import MAX_MAGNITUDE, check_magnitude
from agentrepro.errors import BadInput

GOAL = "success"
"""The goal node of GraphGPO: `next_state` of the last turn of a successful trajectory."""

FIELDS = ("group", "traj", "turn", "state", "next_state", "reward", "episode_reward", "valid", "success")


def factorize(values: Iterable) -> tuple[np.ndarray, list]:
    """Codes (int64, shape (n,)) and uniques (in order of first appearance) of hashable values."""
    values = values if isinstance(values, list) else list(values)
    index = dict.fromkeys(values)  # C-speed pass; keeps the order of first appearance
    for code, key in enumerate(index):  # one Python step per distinct value only
        index[key] = code
    codes = np.fromiter(map(index.__getitem__, values), dtype=np.int64, count=len(values))
    return codes, list(index)


@dataclass(frozen=True, eq=False)
class StepBatch:
    """One rollout batch of agent turns; every array has shape (n,) and follows the input row order.

    group, traj, state, next_state: str (object arrays); turn: int64; reward, episode_reward: float64;
    valid, success: bool. `lines` holds the input line number of each row (for error messages).
    """

    group: np.ndarray
    traj: np.ndarray
    turn: np.ndarray
    state: np.ndarray
    next_state: np.ndarray
    reward: np.ndarray
    episode_reward: np.ndarray
    valid: np.ndarray
    success: np.ndarray
    lines: np.ndarray | None = field(default=None, repr=False)
    source: str | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return int(self.turn.shape[0])

    # ---- construction -------------------------------------------------------------------------
    @classmethod
    def from_rows(
        cls, rows: Iterable[Mapping] | Iterable[tuple[int, Mapping]], *, source: str | None = None
    ) -> StepBatch:
        """Validate step rows (dicts, or (line_number, dict) pairs as `reading.iter_jsonl` yields) into a batch.

        Raises BadInput naming `source`, the line (or 0-based row index) and the field on the first bad row,
        on a (traj, turn) pair seen twice, and on a trajectory whose group, episode_reward or success changes.
        """
        cols: dict[str, list] = {k: [] for k in FIELDS}
        lines: list[int] = []
        for i, item in enumerate(rows):
            number, row = item if isinstance(item, tuple) else (i + 1, item)
            where = f"line {number}" if isinstance(item, tuple) else f"row {i}"
            if not isinstance(row, Mapping):
                raise BadInput(f"expected a JSON object, got {type(row).__name__}", path=source, where=where)
            for key in FIELDS:
                if key not in row:
                    raise BadInput(f"missing field {key!r}", path=source, where=where)
                cols[key].append(_check(key, row[key], source, where))
            lines.append(number)
        batch = cls(
            group=_objects(cols["group"]),
            traj=_objects(cols["traj"]),
            turn=np.asarray(cols["turn"], dtype=np.int64),
            state=_objects(cols["state"]),
            next_state=_objects(cols["next_state"]),
            reward=np.asarray(cols["reward"], dtype=np.float64),
            episode_reward=np.asarray(cols["episode_reward"], dtype=np.float64),
            valid=np.asarray(cols["valid"], dtype=bool),
            success=np.asarray(cols["success"], dtype=bool),
            lines=np.asarray(lines, dtype=np.int64),
            source=source,
        )
        batch._check_trajectories()
        return batch

    @classmethod
    def from_arrays(cls, *, source: str | None = None, **arrays) -> StepBatch:
        """Build from the nine column arrays (sequences of equal length n, e.g. from the trainer) without
        per-row type checks; the trajectory consistency checks of from_rows still apply."""
        missing = [k for k in FIELDS if k not in arrays]
        if missing or set(arrays) - set(FIELDS):
            raise ValueError(
                f"from_arrays takes exactly the columns {', '.join(FIELDS)}; "
                f"missing {missing}, unknown {sorted(set(arrays) - set(FIELDS))}"
            )
        n = len(arrays["turn"])
        batch = cls(
            group=_objects([str(g) for g in arrays["group"]]),
            traj=_objects([str(t) for t in arrays["traj"]]),
            turn=np.asarray(arrays["turn"], dtype=np.int64),
            state=_objects(list(arrays["state"])),
            next_state=_objects(list(arrays["next_state"])),
            reward=np.asarray(arrays["reward"], dtype=np.float64),
            episode_reward=np.asarray(arrays["episode_reward"], dtype=np.float64),
            valid=np.asarray(arrays["valid"], dtype=bool),
            success=np.asarray(arrays["success"], dtype=bool),
            lines=np.arange(1, n + 1),
            source=source,
        )
        batch._check_trajectories()
        return batch

    def _where(self, i: int) -> str:
        return f"line {int(self.lines[i])}" if self.lines is not None else f"row {i + 1}"

    def _check_trajectories(self) -> None:
        n = len(self)
        for name in ("traj", "state", "next_state", "reward", "episode_reward", "valid", "success"):
            if getattr(self, name).shape != (n,):
                raise BadInput(
                    f"column {name!r} has shape {getattr(self, name).shape}, expected ({n},)", path=self.source
                )
        if n == 0:
            return
        t = self.traj_codes
        # (traj, turn) must be unique. Usual case in O(n): turns 0..k−1 fill offset[traj] + turn exactly once.
        counts = np.bincount(t, minlength=self.n_trajs)
        if self.turn.max() >= counts.max() or not np.all(
            np.bincount((np.cumsum(counts) - counts)[t] + self.turn, minlength=n) == 1
        ):
            key = t * (int(self.turn.max()) + 1) + self.turn
            order = np.argsort(key, kind="stable")
            dup = np.flatnonzero(key[order][1:] == key[order][:-1])
            if dup.size:
                a, b = order[dup[0]], order[dup[0] + 1]
                raise BadInput(
                    f"trajectory {self.traj[b]!r} has turn {self.turn[b]} twice (also at {self._where(a)})",
                    path=self.source,
                    where=self._where(b),
                )
        first = self.traj_first
        for name, codes in (
            ("group", self.group_codes),
            ("episode_reward", self.episode_reward),
            ("success", self.success),
        ):
            bad = np.flatnonzero(codes != codes[first[t]])
            if bad.size:
                i = bad[0]
                raise BadInput(
                    f"field {name!r} changes within trajectory {self.traj[i]!r} "
                    f"(first row at {self._where(first[t[i]])})",
                    path=self.source,
                    where=self._where(i),
                )

    # ---- shared integer codes -----------------------------------------------------------------
    @cached_property
    def _groups(self) -> tuple[np.ndarray, list]:
        return factorize(self.group.tolist())

    @property
    def group_codes(self) -> np.ndarray:
        """int64 (n,): group index of each row, groups numbered in order of first appearance."""
        return self._groups[0]

    @property
    def n_groups(self) -> int:
        return len(self._groups[1])

    @property
    def group_names(self) -> list:
        return self._groups[1]

    @cached_property
    def _trajs(self) -> tuple[np.ndarray, list]:
        return factorize(self.traj.tolist())

    @property
    def traj_codes(self) -> np.ndarray:
        """int64 (n,): trajectory index of each row."""
        return self._trajs[0]

    @property
    def n_trajs(self) -> int:
        return len(self._trajs[1])

    @cached_property
    def traj_first(self) -> np.ndarray:
        """int64 (n_trajs,): index of the first row of each trajectory."""
        return first_index(self.traj_codes, self.n_trajs)

    @cached_property
    def _states(self) -> tuple[np.ndarray, np.ndarray, list]:
        codes, vocab = factorize(self.state.tolist() + self.next_state.tolist())
        n = len(self)
        return codes[:n], codes[n:], vocab

    @property
    def state_codes(self) -> np.ndarray:
        """int64 (n,): code of `state` in the batch's state vocabulary (shared with next_state_codes)."""
        return self._states[0]

    @property
    def next_state_codes(self) -> np.ndarray:
        return self._states[1]

    @property
    def state_vocab(self) -> list:
        return self._states[2]

    @cached_property
    def nodes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(state_node (n,), next_state_node (n,), node_keys (n_nodes,)): every distinct (group, state) pair.

        node_keys[i] = group_code·V + state_code (V = len(state_vocab)); the GraphGPO graph's nodes and the
        step groups of GiGPO/GraphGPO (anchor nodes) share this one sort."""
        n, vocab = len(self), len(self.state_vocab)
        g = self.group_codes
        keys = np.concatenate([g * vocab + self.state_codes, g * vocab + self.next_state_codes])
        node_keys, inverse = np.unique(keys, return_inverse=True)
        inverse = inverse.astype(np.int64)
        return inverse[:n], inverse[n:], node_keys

    @property
    def step_groups(self) -> tuple[np.ndarray, int]:
        """(codes (n,), n_codes): the (group, state) anchor groups of GiGPO / the source states of GraphGPO.

        Codes are node ids (nodes.state_node), so some codes in [0, n_codes) may have no row."""
        state_node, _, node_keys = self.nodes
        return state_node, int(node_keys.size)

    def to_rows(self) -> list[dict]:
        """The rows as plain dicts (inverse of from_rows)."""
        return [
            {
                "group": g,
                "traj": t,
                "turn": int(k),
                "state": s,
                "next_state": ns,
                "reward": float(r),
                "episode_reward": float(e),
                "valid": bool(v),
                "success": bool(w),
            }
            for g, t, k, s, ns, r, e, v, w in zip(
                self.group,
                self.traj,
                self.turn,
                self.state,
                self.next_state,
                self.reward,
                self.episode_reward,
                self.valid,
                self.success,
            )
        ]


def first_index(codes: np.ndarray, n_codes: int) -> np.ndarray:
    """int64 (n_codes,): the first position at which each code occurs in `codes`."""
    first = np.empty(n_codes, dtype=np.int64)
    first[codes[::-1]] = np.arange(codes.size - 1, -1, -1)
    return first


def _objects(values: list) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _check(key: str, value, source, where):
    if key in ("group", "traj"):
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise BadInput(f"field {key!r} must be a string or integer, got {value!r}", path=source, where=where)
        return str(value)
    if key in ("state", "next_state"):
        if not isinstance(value, str):
            raise BadInput(f"field {key!r} must be a string, got {value!r}", path=source, where=where)
        return value
    if key == "turn":
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise BadInput(f"field 'turn' must be a non-negative integer, got {value!r}", path=source, where=where)
        return value
    if key in ("reward", "episode_reward"):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not check_magnitude(value):
            raise BadInput(
                f"field {key!r} must be a finite number of magnitude at most {MAX_MAGNITUDE:g}, got {value!r}",
                path=source,
                where=where,
            )
        return float(value)
    if not isinstance(value, bool):  # valid, success
        raise BadInput(f"field {key!r} must be true or false, got {value!r}", path=source, where=where)
    return value
