"""The frozen task panel: from an evaluation file (hash per task line) or from the environments package."""

from __future__ import annotations

import pytest
from helpers import write_alfworld_games
from study_kit import TASKS

from agentrepro.environments.alfworld import ALFWorld, panel_entry
from agentrepro.environments.alfworld_data import read_game
from agentrepro.errors import BadInput, Failure
from agentrepro.fileio import atomic_write_jsonl, sha256_json
from agentrepro.manifest import taskpanel
from agentrepro.manifest.taskpanel import (
    build_panel,
    check_panel,
    panel_deviations,
    panel_from_data_dir,
    panel_from_file,
)


def test_panel_from_file_hashes_each_task(tmp_path):
    """Each line gives one task; its hash is that of the line's canonical JSON; order and categories kept."""
    atomic_write_jsonl(tmp_path / "eval.jsonl", TASKS)
    panel = panel_from_file(tmp_path / "eval.jsonl", tasks=4, env_name="alfworld")
    assert [t["task_id"] for t in panel] == ["t0", "t1", "t2", "t3"]
    assert panel[1] == {"task_id": "t1", "task_hash": sha256_json(TASKS[1]), "seed": 1, "category": "clean"}


@pytest.mark.parametrize(
    "rows, tasks, words",
    [
        ([{"task_id": "a"}, {"task_id": "a"}], 2, "repeats line 1"),
        ([{"id": "a"}], 1, "line 1"),
        ([{"task_id": "a"}], 2, "lists 1 tasks but the manifest's eval.tasks is 2"),
    ],
)
def test_bad_panel_files(tmp_path, rows, tasks, words):
    """Repeated ids, rows without task_id and a wrong count are refused, naming the file and line."""
    atomic_write_jsonl(tmp_path / "eval.jsonl", rows)
    with pytest.raises(BadInput, match=words):
        panel_from_file(tmp_path / "eval.jsonl", tasks=tasks, env_name="alfworld")


def test_missing_panel_file(tmp_path):
    """A missing evaluation file is refused (the panel cannot be frozen without it)."""
    with pytest.raises(BadInput, match="evaluation data file not found"):
        panel_from_file(tmp_path / "nope.jsonl", tasks=1, env_name="alfworld")


def test_environment_panel_gets_the_manifest_seeds(tmp_path, monkeypatch):
    """For a generated environment, task_panel is called with first_seed .. first_seed+tasks-1."""
    calls = []

    def task_panel(name, params, seeds):
        calls.append((name, params, list(seeds)))
        return [{"task_id": f"{name}-{s}", "task_hash": sha256_json(s), "seed": s, "category": name} for s in seeds]

    monkeypatch.setattr(taskpanel, "task_panel", task_panel)
    monkeypatch.setattr(taskpanel, "panel_packages", lambda name, params: {})
    manifest = {
        "env": {"name": "frozenlake", "split": "eval", "params": {"size": 4}},
        "eval": {"tasks": 3, "first_seed": 100},
    }
    panel = build_panel(manifest, tmp_path)
    assert calls == [("frozenlake", {"size": 4}, [100, 101, 102])]
    assert [t["task_id"] for t in panel] == ["frozenlake-100", "frozenlake-101", "frozenlake-102"]


def test_a_panel_with_repeated_ids_from_the_environment_is_a_failure():
    """An environment returning a duplicated task id stops freeze (it would break pairing)."""
    entry = {"task_id": "x", "task_hash": "0" * 64, "seed": 1, "category": "c"}
    with pytest.raises(Failure, match="appears twice"):
        check_panel([entry, entry], expected=2, source="test")


def test_a_panel_of_game_files_states_its_selection_and_its_composition_is_recorded(tmp_path):
    """A panel frozen from an ALFWorld data directory needs eval.panel (which eligible games it takes), refused naming the
    field and the choices; with `first`, the lock's deviation says which categories the panel leaves out and how the
    split's mix differs: here 14 games of which the 2 pick_two ones sort last, a panel of 12 drops them."""
    types = [
        "look_at_obj_in_light",
        "pick_and_place_simple",
        "pick_clean_then_place_in_recep",
        "pick_cool_then_place_in_recep",
        "pick_heat_then_place_in_recep",
        "pick_two_obj_and_place",
    ]
    data = tmp_path / "data" / "alfworld"
    ids = write_alfworld_games(
        data,
        [f"{t}-Obj-None-Place-{i}" for t in types for i in (1, 2)] + [f"{types[1]}-Obj-None-Place-{i}" for i in (3, 4)],
    )
    manifest = {
        "env": {"name": "alfworld", "split": "eval_in_distribution"},
        "data": {"eval": {"path": "data/alfworld"}},
        "eval": {"tasks": 12},
    }
    with pytest.raises(
        BadInput, match=r"eval\.panel: a panel of game files is a choice the manifest states: first: .*; all: "
    ):
        panel_from_data_dir(manifest, data, tmp_path)
    manifest["eval"]["panel"] = "first"
    panel = [
        panel_entry(read_game(data, task_id), {}) for task_id in ids[:12]
    ]  # frozen_panel's rows (it adds package versions)
    (sentence,) = panel_deviations(manifest, tmp_path, panel)
    assert sentence.startswith(
        "eval.panel = first: 12 of the 14 eligible games of eval_in_distribution (the first eval.tasks"
    )
    assert "it leaves out pick2 (2 of 2)" in sentence and "pick 4/4" in sentence and "pick2 0/2" in sentence
    assert ALFWorld.PANEL_SELECTIONS.keys() == {"first", "all"}
    assert panel_deviations({**manifest, "data": {"eval": {"path": "eval.jsonl"}}}, tmp_path, panel) == []
