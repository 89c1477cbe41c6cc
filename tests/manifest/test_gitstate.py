"""The harness's git state: commit, dirt (untracked included), ignored outputs and the lock excluded."""

from __future__ import annotations

from study_kit import git, git_commit_all

from agentrepro.manifest.gitstate import harness_state


def test_clean_repository(tmp_path):
    """A fully committed tree reports HEAD and no dirt."""
    (tmp_path / "a.txt").write_text("a")
    head = git_commit_all(tmp_path)
    assert harness_state(tmp_path) == {"commit": head, "dirty": False, "dirty_paths": []}


def test_changes_untracked_and_renames_are_dirt_but_ignored_and_excluded_paths_are_not(tmp_path):
    """Modified, untracked and renamed files count; git-ignored outputs and the `ignore` paths do not."""
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "b.txt").write_text("b")
    git_commit_all(tmp_path)
    (tmp_path / "a.txt").write_text("changed")
    git(tmp_path, "mv", "b.txt", "c.txt")
    (tmp_path / "new.txt").write_text("new")
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "out.jsonl").write_text("{}")  # git-ignored by the kit's .gitignore
    (tmp_path / "x.lock.json").write_text("{}")
    state = harness_state(tmp_path, ignore=[tmp_path / "x.lock.json"])
    assert state["dirty"] is True
    assert state["dirty_paths"] == ["a.txt", "c.txt", "new.txt"]


def test_not_a_repository(tmp_path):
    """Outside git there is no commit, and the state says why."""
    state = harness_state(tmp_path)
    assert state["commit"] is None and state["dirty"] is True and "not inside a git repository" in state["note"]
