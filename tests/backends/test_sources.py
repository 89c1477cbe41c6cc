"""Source parity against a small git repository built in a temp dir: pinned blobs, what a job ran, the audit's finding."""

from __future__ import annotations

import json
import subprocess

import pytest
from study_kit import BASE, git_commit_all, set_key, write_study

from agentrepro.audit.runs import source_problems
from agentrepro.backends import sources
from agentrepro.errors import BadInput
from agentrepro.jobs.freeze import build_lock


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    repo = tmp_path / "checkout"
    (repo / "recipe").mkdir(parents=True)
    (repo / "recipe" / "core_graph.py").write_text("def graph():\n    return 1\n")
    (repo / "trainer.py").write_text("TRAIN = True\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "pinned")
    return repo


def test_pinned_and_running_agree_until_a_file_is_edited(repo, tmp_path):
    """The blob at the commit equals `git hash-object` of the clean file; an uncommitted edit changes the running hash
    and `differences` names exactly that file."""
    commit = git(repo, "rev-parse", "HEAD")
    paths = ["recipe/core_graph.py", "trainer.py"]
    pinned = sources.pinned(repo, commit, paths)
    assert pinned["trainer.py"] == git(repo, "hash-object", "trainer.py")
    assert sources.differences(pinned, sources.running(repo, paths)) == []
    (repo / "recipe" / "core_graph.py").write_text("def graph():\n    return 2\n")
    found = sources.differences(pinned, sources.running(repo, paths))
    assert [d["path"] for d in found] == ["recipe/core_graph.py"] and found[0]["pinned"] == pinned[
        "recipe/core_graph.py"
    ]
    (repo / "trainer.py").unlink()
    assert sources.running(repo, paths)["trainer.py"] is None


def test_pinned_refuses_an_unknown_commit_or_path(repo):
    """A commit the checkout lacks and a path the commit lacks are BadInput naming the manifest field."""
    commit = git(repo, "rev-parse", "HEAD")
    with pytest.raises(BadInput, match=r"backend.commit"):
        sources.pinned(repo, "0" * 40, ["trainer.py"])
    with pytest.raises(BadInput, match=r"backend.sources: missing.py is not a file"):
        sources.pinned(repo, commit, ["missing.py"])


def test_a_run_that_ran_an_edited_file_fails_the_audit(repo, tmp_path):
    """record_run writes what the job runs; the audit reports each file differing from the blob the lock pins for the
    method's placement, and a run without the record."""
    commit = git(repo, "rev-parse", "HEAD")
    paths = ["recipe/core_graph.py", "trainer.py"]
    manifest = {
        "backend": {"name": "verl-agent", "commit": commit, "workdir": str(repo), "sources": paths},
        "image": {},
        "methods": {"grpo": {}},
    }
    lock = {"manifest": manifest, "backend_sources": sources.pinned_sources(manifest, tmp_path)}
    run = tmp_path / "grpo" / "seed0"
    run.mkdir(parents=True)
    assert source_problems(run, lock)[0].endswith("missing: nothing says which verl-agent sources this run ran")
    sources.record_run(manifest, run)
    assert source_problems(run, lock) == []
    (repo / "trainer.py").write_text("TRAIN = False  # patched locally\n")
    sources.record_run(manifest, run)
    problems = source_problems(run, lock)
    assert (
        len(problems) == 1
        and "grpo on verl-agent: trainer.py ran as blob" in problems[0]
        and "not the pinned one" in problems[0]
    )
    assert json.loads((run / "backend_sources.json").read_text())["files"]["trainer.py"] == git(
        repo, "hash-object", "trainer.py"
    )
    assert source_problems(run, {"manifest": manifest}) == []  # a lock that pins no sources checks nothing


def test_freeze_records_sources_and_deviations(tmp_path, repo):
    """Freezing a verl-agent study whose manifest names backend.sources in a checkout records their blobs at the pinned
    commit and the overrides appended to the official scripts as sentences; a path the commit lacks is refused in one line."""
    root = tmp_path / "root"
    root.mkdir()
    commit = git(repo, "rev-parse", "HEAD")
    manifest = set_key(
        set_key(set_key(BASE, "backend.commit", commit), "backend.workdir", str(repo)),
        "backend.sources",
        ["recipe/core_graph.py"],
    )
    path = write_study(root, manifest)
    git_commit_all(root)
    lock = build_lock(path, root=root)
    assert lock["backend_sources"] == {
        "verl-agent": {
            "commit": commit,
            "workdir": str(repo),
            "files": {"recipe/core_graph.py": git(repo, "hash-object", "recipe/core_graph.py")},
        }
    }
    seeds = [
        d for d in lock["deviations"] if d.startswith(("env.seed", "+actor_rollout_ref.rollout.seed", "+data.seed"))
    ]
    assert sorted(d.split(" (")[0] for d in seeds) == [
        "+actor_rollout_ref.rollout.seed = per run",
        "+data.seed = per run",
        "env.seed = per run",
    ]
    env_seed = next(d for d in seeds if d.startswith("env.seed"))
    assert env_seed.startswith("env.seed = per run (the script sets 0; seed x 1004: ") and env_seed.endswith(
        "; all methods)"
    )
    assert "trainer.total_epochs = 10 (the script sets 150; manifest train.steps; all methods)" in lock["deviations"]
    assert (
        "trainer.save_freq = 5 (the script sets -1; checkpoint cadence: the evaluated steps (the script saves none); all methods)"
        in lock["deviations"]
    )
    write_study(root, set_key(manifest, "backend.sources", ["missing.py"]))
    git_commit_all(root)
    with pytest.raises(BadInput, match=r"demo.yaml: backend.sources: missing.py is not a file"):
        build_lock(path, root=root)
