"""Outcome rows are checked field by field and against the frozen task panel before they are written."""

from __future__ import annotations

import copy

import pytest

from agentrepro.errors import BadInput
from agentrepro.outcomes import check_rows

HASH = "a" * 64


def config(n=2, episodes=1):
    return {
        "study": "s",
        "method": "m",
        "seed": 1,
        "eval": {
            "episodes_per_task": episodes,
            "task_panel": [{"task_id": f"t{i}", "task_hash": HASH, "category": "c"} for i in range(n)],
        },
    }


def rows(n=2, step=5):
    return [
        {
            "study": "s",
            "method": "m",
            "seed": 1,
            "step": step,
            "task_id": f"t{i}",
            "task_hash": HASH,
            "category": "c",
            "episode": 0,
            "success": i % 2,
            "reward": 0.5,
            "turns": 2,
            "tokens": 9,
        }
        for i in range(n)
    ]


def test_valid_rows_pass():
    """Rows of the right run, step and panel pass."""
    check_rows(rows(), config=config(), step=5, source="src")


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("success", True, "row 1: success"),
        ("success", 2, "row 1: success"),
        ("reward", float("nan"), "row 1: reward"),
        ("task_hash", "abc", "row 1: task_hash"),
        ("turns", -1, "row 1: turns"),
        ("seed", 2, "row 1: seed"),
        ("step", 4, "row 1: step"),
        ("task_id", "t9", "not in the frozen task panel"),
        ("category", "d", "row 1: category"),
    ],
)
def test_bad_field_is_named(field, value, message):
    """Each wrong type, wrong run identity or panel mismatch is BadInput naming the source, row and field."""
    bad = rows()
    bad[0][field] = value
    with pytest.raises(BadInput, match=message) as info:
        check_rows(bad, config=config(), step=5, source="src")
    assert str(info.value).startswith("src: ")


def test_duplicates_missing_and_missing_fields():
    """Duplicated keys, a task of the panel never played, a row without a field, and no rows at all are refused."""
    with pytest.raises(BadInput, match="duplicate"):
        check_rows([*rows(), copy.deepcopy(rows()[0])], config=config(), step=5, source="src")
    with pytest.raises(BadInput, match="not played 1 time"):
        check_rows(rows(1), config=config(), step=5, source="src")
    incomplete = rows()
    del incomplete[1]["tokens"]
    with pytest.raises(BadInput, match="row 2: missing field"):
        check_rows(incomplete, config=config(), step=5, source="src")
    with pytest.raises(BadInput, match="no outcome rows"):
        check_rows([], config={"study": "s", "method": "m", "seed": 1}, step=5, source="src")


def test_episodes_per_task():
    """With two episodes per task both must be present; a third episode index is refused."""
    two = rows() + [dict(r, episode=1) for r in rows()]
    check_rows(two, config=config(episodes=2), step=5, source="src")
    with pytest.raises(BadInput, match="episodes_per_task"):
        check_rows(two, config=config(episodes=1), step=5, source="src")
