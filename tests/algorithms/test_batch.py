"""StepBatch.from_rows: validation with line numbers, codes, and the round trip back to rows."""

from __future__ import annotations

import numpy as np
import pytest

from agentrepro.algorithms import StepBatch
from agentrepro.errors import BadInput


def _row(**over):
    row = {
        "group": "g",
        "traj": "t",
        "turn": 0,
        "state": "a",
        "next_state": "b",
        "reward": 0.0,
        "episode_reward": 0.0,
        "valid": True,
        "success": False,
    }
    row.update(over)
    return row


def test_round_trip_and_codes():
    """Rows survive from_rows → to_rows unchanged; codes number groups and trajectories by first appearance."""
    rows = [_row(group="g2", traj="x"), _row(group="g1", traj="y"), _row(group="g2", traj="x", turn=1)]
    batch = StepBatch.from_rows(rows)
    assert batch.to_rows() == rows
    assert batch.group_codes.tolist() == [0, 1, 0] and batch.traj_codes.tolist() == [0, 1, 0]
    codes, n = batch.step_groups
    assert n == 4 and codes[0] == codes[2] != codes[1]  # node ids over g2/a, g2/b, g1/a, g1/b


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"turn": -1}, "field 'turn' must be a non-negative integer"),
        ({"turn": True}, "field 'turn'"),
        ({"reward": float("nan")}, "field 'reward' must be a finite number"),
        ({"episode_reward": "10"}, "field 'episode_reward'"),
        ({"valid": 1}, "field 'valid' must be true or false"),
        ({"state": 3}, "field 'state' must be a string"),
        ({"group": None}, "field 'group'"),
    ],
)
def test_bad_field_names_line_and_field(bad, message):
    """A bad value raises BadInput naming the source, the line and the field."""
    rows = [(1, _row()), (7, _row(traj="u", **bad))]
    with pytest.raises(BadInput) as err:
        StepBatch.from_rows(rows, source="in.jsonl")
    assert str(err.value).startswith("in.jsonl: line 7: ") and message in str(err.value)


def test_missing_field_and_non_object():
    """A missing field and a non-object row are named with their line (plain dicts: 0-based row index)."""
    row = _row()
    del row["success"]
    with pytest.raises(BadInput, match="row 0: missing field 'success'"):
        StepBatch.from_rows([row])
    with pytest.raises(BadInput, match="line 3: expected a JSON object"):
        StepBatch.from_rows([(3, [1, 2])])


def test_trajectory_consistency_is_checked():
    """A repeated (traj, turn) or a trajectory that changes group or episode_reward is refused with both lines."""
    with pytest.raises(BadInput, match=r"line 2: trajectory 't' has turn 0 twice \(also at line 1\)"):
        StepBatch.from_rows([(1, _row()), (2, _row())])
    with pytest.raises(
        BadInput, match=r"line 2: field 'episode_reward' changes within trajectory 't' \(first row at line 1\)"
    ):
        StepBatch.from_rows([(1, _row()), (2, _row(turn=1, episode_reward=10.0))])
    with pytest.raises(BadInput, match="field 'group' changes"):
        StepBatch.from_rows([(1, _row()), (2, _row(turn=1, group="h"))])


def test_integer_ids_become_strings_and_empty_batch():
    """Integer group/traj ids are accepted as strings; an empty batch is valid and has no groups."""
    batch = StepBatch.from_rows([_row(group=3, traj=4)])
    assert batch.group.tolist() == ["3"] and batch.traj.tolist() == ["4"]
    empty = StepBatch.from_rows([])
    assert len(empty) == 0 and empty.n_groups == 0


def test_from_arrays_matches_from_rows():
    """The trainer's column constructor builds the same batch as the row constructor."""
    rows = [_row(traj="a"), _row(traj="a", turn=1, state="b", next_state="success", reward=10.0)]
    rows = [dict(r, episode_reward=10.0, success=True) for r in rows]
    cols = {k: [r[k] for r in rows] for k in rows[0]}
    a, b = StepBatch.from_rows(rows), StepBatch.from_arrays(**cols)
    assert a.to_rows() == b.to_rows()
    assert np.array_equal(a.state_codes, b.state_codes)
