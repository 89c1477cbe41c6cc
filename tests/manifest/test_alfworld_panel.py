"""ALFWorld task panels frozen from a data directory: sorted eligible games, each hashed from its two files."""

from __future__ import annotations

import json
import shutil
from importlib.metadata import version

import pytest
from helpers import require_alfworld, run_cli
from study_kit import BASE, fake_run, git_commit_all, set_key, write_study

from agentrepro.audit import audit_study
from agentrepro.errors import BadInput
from agentrepro.jobs.freeze import freeze


def alfworld_study(root, tasks=4):
    """The demo study on the test games of tests/environments, ALFWorld data in data/alfworld, plus ineligible games."""
    from agentrepro.environments.alfworld_testgames import GAMES, write_data_dir

    manifest = set_key(
        set_key(set_key(BASE, "data.eval.path", "data/alfworld"), "eval.tasks", tasks), "eval.panel", "first"
    )
    write_study(root, manifest)
    data = root / "data" / "alfworld"
    games = write_data_dir(data)
    write_data_dir(data, split="train")  # what verl-agent's training env workers play (the preflight asks for some)
    valid = data / "json_2.1.1" / "valid_seen"
    # ALFWorld skips these: a 'movable' task, an unsolvable game, a task type it does not know, a missing game file
    shutil.copytree(valid / next(iter(games)).split("/")[2], valid / "pick_and_place_simple-movable-1")
    from agentrepro.environments.alfworld_testgames import write_game

    write_game(data, GAMES[0], split="eval_in_distribution", trial=90, solvable=False)
    odd = data / write_game(data, GAMES[1], split="eval_in_distribution", trial=91)
    (odd / "traj_data.json").write_text(json.dumps({"task_type": "pick_and_slice", "pddl_params": {}}))
    gone = data / write_game(data, GAMES[2], split="eval_in_distribution", trial=92)
    (gone / "game.tw-pddl").unlink()
    git_commit_all(root)
    return root / "manifests" / "demo.yaml", sorted(games)


@pytest.fixture
def root(tmp_path):
    require_alfworld()
    path = tmp_path / "root"
    path.mkdir()
    return path


def test_panel_is_the_first_eligible_games_sorted_with_versions(root):
    """The panel lists the first N eligible games in path order, their files are hashed, the versions recorded."""
    manifest, games = alfworld_study(root, tasks=4)
    lock, _, _ = freeze(manifest, root=root)
    panel = lock["task_panel"]
    assert [t["task_id"] for t in panel] == games[:4] and all(t["seed"] is None for t in panel)
    assert [t["category"] for t in panel] == ["look", "pick", "clean", "cool"]
    files = lock["resolved"]["files"]
    assert {f"data/alfworld/{g}/{name}" for g in games[:4] for name in ("game.tw-pddl", "traj_data.json")} <= set(files)
    assert not any("movable" in f or "000090" in f for f in files)
    assert lock["resolved"]["env_packages"] == {"alfworld": version("alfworld"), "textworld": version("textworld")}
    again, _, written = freeze(manifest, root=root)
    assert not written and again["task_panel"] == panel  # same directory, same lock
    assert audit_study("demo", root, require="lock") == []


def test_a_changed_game_byte_changes_its_hash_and_fails_the_audit_of_earlier_outcomes(root):
    """One byte of one game changed: audit names the file; re-frozen, that task's hash differs and old outcomes fail."""
    manifest, games = alfworld_study(root, tasks=6)
    lock, _, _ = freeze(manifest, root=root)
    for method in ("grpo", "gigpo"):
        for seed in (0, 1):
            fake_run(root, lock, method, seed)
    assert audit_study("demo", root, require="runs") == []
    game_file = root / "data" / "alfworld" / games[2] / "game.tw-pddl"
    game_file.write_bytes(game_file.read_bytes().replace(b"apple", b"appla", 1))
    problems = audit_study("demo", root, require="runs")
    assert problems == [f"{game_file}: changed since it was frozen (hash differs from the lock)"]
    git_commit_all(root)
    relock, _, _ = freeze(manifest, root=root)
    old, new = ({t["task_id"]: t["task_hash"] for t in lk["task_panel"]} for lk in (lock, relock))
    assert [g for g in games if old[g] != new[g]] == [games[2]]
    problems = audit_study("demo", root, require="runs")
    assert any("task_hash differs from the lock's task panel" in p and games[2] in p for p in problems), problems


def test_too_few_games_and_bad_splits_are_refused(root):
    """More tasks than eligible games, or an unknown split, stop freeze naming the field (subprocess)."""
    manifest, _ = alfworld_study(root, tasks=7)
    result = run_cli("freeze", manifest, "--root", root, cwd=root)
    assert result.returncode == 2 and "eval.tasks: 6 eligible games, fewer than eval.tasks (7)" in result.stderr
    (root / "manifests" / "demo.yaml").write_text(
        (root / "manifests" / "demo.yaml")
        .read_text()
        .replace("eval_in_distribution", "valid_seen")
        .replace("tasks: 7", "tasks: 2")
    )
    git_commit_all(root)
    with pytest.raises(BadInput, match=r"env.split: unknown ALFWorld split 'valid_seen'"):
        freeze(manifest, root=root)
