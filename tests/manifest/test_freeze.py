"""`agentrepro freeze`: the lock's content, refusals naming the field, git state, idempotence."""

from __future__ import annotations

import json

import pytest
from helpers import REPO, run_cli
from study_kit import BASE, COMMIT_A, COMMIT_B, DELETE, DIGEST, git, set_key, write_study

from agentrepro.errors import BadInput
from agentrepro.fileio import sha256_file, sha256_json
from agentrepro.jobs.freeze import build_lock, directory_sha256, freeze
from agentrepro.lockfile import content_sha256, lock_problems
from agentrepro.manifest import taskpanel


def test_freeze_writes_a_complete_lock(study):
    """A clean, pinned study freezes (subprocess): hashes, identifiers, panel, commit and packages recorded."""
    result = run_cli("freeze", "manifests/demo.yaml", cwd=study)
    assert result.returncode == 0, result.stderr
    lock = json.loads((study / "manifests" / "demo.lock.json").read_text())
    assert lock_problems(lock) == []
    assert lock["manifest_sha256"] == sha256_json(lock["manifest"]) and lock["manifest"]["study"] == "demo"
    assert lock["resolved"]["backend"] == {"name": "verl-agent", "repo": "langfengQ/verl-agent", "commit": COMMIT_A}
    assert lock["resolved"]["files"] == {
        "data/eval.jsonl": sha256_file(study / "data" / "eval.jsonl"),
        "manifests/references/demo.yaml": sha256_file(study / "manifests" / "references" / "demo.yaml"),
    }
    assert lock["harness"] == {
        "commit": git(study, "rev-parse", "HEAD"),
        "dirty": False,
        "dirty_paths": [],
        "allow_dirty": False,
    }
    assert [t["task_id"] for t in lock["task_panel"]] == ["t0", "t1", "t2", "t3"]
    assert any(p.startswith("jsonschema==") for p in lock["python"]["packages"])
    assert lock["python"]["packages_sha256"] == sha256_json(lock["python"]["packages"])
    assert lock["machine"]["cpu_model"] and "threads" not in lock["machine"]["blas"]  # the freezing machine
    assert lock["lock_self_sha256"] == content_sha256(lock)
    streams = {
        s["stream"]: s for s in lock["seed_streams"]["verl-agent"]
    }  # which randomness the seed reaches (planning)
    assert list(streams) == [
        "environment games",
        "data order",
        "rollout sampling",
        "model initialisation",
        "evaluation sampling",
    ]
    assert streams["model initialisation"]["reached"] is False and streams["environment games"]["reached"] is True


def test_freeze_refuses_a_job_that_asks_for_less_than_it_demands(study):
    """freeze runs the preflight: a study whose jobs would reserve more CPUs in Ray than resources.cpus is refused in one
    line naming the field, the framework's key and both numbers (subprocess), and no lock is written."""
    path = study / "manifests" / "demo.yaml"
    path.write_text(path.read_text().replace("cpus: 5", "cpus: 2"))
    git(study, "commit", "-qam", "fewer CPUs")
    result = run_cli("freeze", "manifests/demo.yaml", cwd=study)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert (
        "resources.cpus = 2: env.resources_per_worker.num_cpus 0.1 x 12 env workers + 1 TaskRunner + 1 x 2 GPU workers = 4.2 exceeds it"
        in result.stderr
    )
    assert not (study / "manifests" / "demo.lock.json").exists()


def test_freeze_again_keeps_the_identical_lock(study):
    """Re-freezing an unchanged study leaves the lock byte for byte (runs made from it stay valid);
    the untracked lock itself does not make the tree dirty."""
    assert run_cli("freeze", "manifests/demo.yaml", cwd=study).returncode == 0
    before = (study / "manifests" / "demo.lock.json").read_bytes()
    again = run_cli("freeze", "manifests/demo.yaml", cwd=study)
    assert again.returncode == 0, again.stderr
    assert "unchanged" in again.stdout
    assert (study / "manifests" / "demo.lock.json").read_bytes() == before


@pytest.mark.parametrize(
    "dotted, value, field, words",
    [
        ("model.revision", "main", "model.revision", "branch or tag"),
        ("model.revision", "20bd331", "model.revision", "short commit hash"),
        ("model.tokenizer_revision", "TODO-pin", "model.tokenizer_revision", "placeholder"),
        ("backend.commit", "v0.2", "backend.commit", "branch or tag"),
        ("backend.commit", COMMIT_A + "\n", "backend.commit", "whitespace around it"),
        ("model.revision", COMMIT_B + "\n", "model.revision", "whitespace around it"),
        ("image.digest", DIGEST + "\n", "image.digest", "expected sha256:<64"),
        ("image.ref", "example.org/verl-agent:1.0\n", "image.ref", "expected a registry reference"),
        ("image.digest", DELETE, "image.digest", "alone is mutable"),
        ("image.digest", "sha256:1234", "image.digest", "expected sha256:<64"),
        ("data.eval.path", "data/missing.jsonl", "data.eval.path", "file not found"),
        ("data.eval.sha256", "0" * 64, "data.eval.sha256", "not the manifest's"),
        ("reference", "references/missing.yaml", "reference.path", "file not found"),
    ],
)
def test_each_mutable_identifier_is_refused_naming_its_field(tmp_path, dotted, value, field, words):
    """freeze exits 2 and names the field and the reason, writing no lock (subprocess)."""
    write_study(tmp_path, set_key(BASE, dotted, value))
    result = run_cli("freeze", "manifests/demo.yaml", "--allow-dirty", cwd=tmp_path)
    assert result.returncode == 2
    assert f"manifests/demo.yaml: {field}: " in result.stderr and words in result.stderr
    assert not (tmp_path / "manifests" / "demo.lock.json").exists()


def test_all_refusals_are_reported_together(tmp_path):
    """Several unpinned identifiers are all named in the one error line."""
    manifest = set_key(set_key(BASE, "model.revision", "main"), "image.digest", "TODO")
    write_study(tmp_path, manifest)
    with pytest.raises(BadInput) as info:
        build_lock(tmp_path / "manifests" / "demo.yaml", root=tmp_path, allow_dirty=True)
    assert "image.digest: placeholder" in str(info.value) and "model.revision: 'main'" in str(info.value)


def test_dirty_tree_refused_unless_allowed_and_then_recorded(study):
    """Uncommitted changes stop freeze (exit 2, naming the file); --allow-dirty freezes and records them."""
    (study / "notes.txt").write_text("uncommitted")
    refused = run_cli("freeze", "manifests/demo.yaml", cwd=study)
    assert refused.returncode == 2 and "harness" in refused.stderr and "notes.txt" in refused.stderr
    allowed = run_cli("freeze", "manifests/demo.yaml", "--allow-dirty", cwd=study)
    assert allowed.returncode == 0, allowed.stderr
    harness = json.loads((study / "manifests" / "demo.lock.json").read_text())["harness"]
    assert harness["dirty"] is True and harness["allow_dirty"] is True and harness["dirty_paths"] == ["notes.txt"]


def test_ignored_outputs_are_not_dirt(study):
    """Files under git-ignored runs/ do not block freeze."""
    (study / "runs").mkdir()
    (study / "runs" / "x.txt").write_text("output")
    assert run_cli("freeze", "manifests/demo.yaml", cwd=study).returncode == 0


def test_outside_git_needs_allow_dirty(tmp_path):
    """Without a git repository the commit cannot be recorded: refused unless --allow-dirty."""
    write_study(tmp_path)
    with pytest.raises(BadInput, match="not inside a git repository"):
        freeze(tmp_path / "manifests" / "demo.yaml", root=tmp_path)
    lock, _, _ = freeze(tmp_path / "manifests" / "demo.yaml", root=tmp_path, allow_dirty=True)
    assert lock["harness"]["commit"] is None and lock["harness"]["dirty"] is True


def test_reference_values_must_be_methods(tmp_path):
    """A reference value for a method the study does not run is refused, naming the reference key."""
    write_study(tmp_path)
    ref = tmp_path / "manifests" / "references" / "demo.yaml"
    ref.write_text(ref.read_text().replace("gigpo:", "ppo:"))
    with pytest.raises(BadInput, match=r"demo.yaml: values.ppo"):
        build_lock(tmp_path / "manifests" / "demo.yaml", root=tmp_path, allow_dirty=True)


def _builtin(model: dict) -> dict:
    manifest = set_key(set_key(BASE, "backend", {"name": "builtin"}), "image", {"none": "CPU"})
    return set_key(manifest, "model", model)


def test_local_model_directory_is_hashed(tmp_path):
    """A local model directory is hashed file by file; a declared hash that differs, or a placeholder, is refused."""
    (tmp_path / "models" / "m").mkdir(parents=True)
    (tmp_path / "models" / "m" / "config.json").write_text("{}")
    (tmp_path / "models" / "m" / "weights.bin").write_bytes(b"\x01\x02")
    write_study(tmp_path, _builtin({"path": "models/m"}))
    lock = build_lock(tmp_path / "manifests" / "demo.yaml", root=tmp_path, allow_dirty=True)
    digest, files = directory_sha256(tmp_path / "models" / "m")
    assert lock["resolved"]["model"]["sha256"] == digest and set(files) == {"config.json", "weights.bin"}
    write_study(tmp_path, _builtin({"path": "models/m", "sha256": "1" * 64}))
    with pytest.raises(BadInput, match=r"model.sha256: .* not the manifest's"):
        build_lock(tmp_path / "manifests" / "demo.yaml", root=tmp_path, allow_dirty=True)
    write_study(tmp_path, _builtin({"path": "TODO-local-qwen"}))
    with pytest.raises(BadInput, match=r"model.path: placeholder"):
        build_lock(tmp_path / "manifests" / "demo.yaml", root=tmp_path, allow_dirty=True)


def test_a_model_snapshot_of_another_revision_is_refused(tmp_path):
    """A framework job loads backend.model_path, whatever the lock pins: a Hugging Face cache's snapshot
    (`.../snapshots/<commit>`) of another revision than model.revision is refused naming the field (exit 2); the
    snapshot of model.revision freezes."""
    snapshots = tmp_path / "hub" / "models--Qwen--Qwen2.5-1.5B-Instruct" / "snapshots"
    for commit in ("c" * 40, COMMIT_B):
        (snapshots / commit).mkdir(parents=True)
        (snapshots / commit / "config.json").write_text("{}")
    write_study(
        tmp_path, set_key(BASE, "backend.model_path", f"hub/models--Qwen--Qwen2.5-1.5B-Instruct/snapshots/{'c' * 40}")
    )
    result = run_cli("freeze", "manifests/demo.yaml", "--allow-dirty", cwd=tmp_path)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "backend.model_path: " in result.stderr and f"not of model.revision {COMMIT_B}" in result.stderr
    write_study(tmp_path, set_key(BASE, "backend.model_path", str(snapshots / COMMIT_B)))
    build_lock(tmp_path / "manifests" / "demo.yaml", root=tmp_path, allow_dirty=True)


def test_generated_panel_comes_from_the_environments_package(tmp_path, monkeypatch):
    """A FrozenLake study's panel is environments.task_panel(name, params, first_seed..+tasks-1)."""
    seen = {}

    def task_panel(name, params, seeds):
        seen.update(name=name, params=params, seeds=list(seeds))
        return [
            {"task_id": f"{name}-{s}", "task_hash": sha256_json([name, s]), "seed": s, "category": name} for s in seeds
        ]

    monkeypatch.setattr(taskpanel, "task_panel", task_panel)
    monkeypatch.setattr(taskpanel, "panel_packages", lambda name, params: {})
    manifest = set_key(
        _builtin({"name": "tiny-gpt2", "config": {"d_model": 8}}),
        "env",
        {"name": "frozenlake", "split": "eval", "params": {"size": 4}},
    )
    manifest = set_key(set_key(manifest, "eval.first_seed", 10001), "data", DELETE)
    write_study(tmp_path, manifest)
    lock = build_lock(tmp_path / "manifests" / "demo.yaml", root=tmp_path, allow_dirty=True)
    assert seen == {"name": "frozenlake", "params": {"size": 4}, "seeds": [10001, 10002, 10003, 10004]}
    assert lock["task_panel"][0]["task_id"] == "frozenlake-10001"
    assert lock["resolved"]["model"] == {"name": "tiny-gpt2", "config_sha256": sha256_json({"d_model": 8})}
    assert lock["resolved"]["tokenizer"]["from"].startswith("built at train time from the environment's vocabulary")


def test_default_study_freezes_with_the_real_environments(tmp_path):
    """manifests/frozenlake-cpu.yaml freezes through the real agentrepro.environments.task_panel (128 tasks)."""
    environments = pytest.importorskip("agentrepro.environments")
    if not hasattr(environments, "task_panel"):
        pytest.skip("agentrepro.environments.task_panel not built yet")
    out = tmp_path / "frozenlake-cpu.lock.json"
    lock, _, _ = freeze(REPO / "manifests" / "frozenlake-cpu.yaml", root=REPO, out=out, allow_dirty=True)
    assert len(lock["task_panel"]) == 128 and lock["task_panel"][0]["task_id"] == "frozenlake-10001"
    assert lock["resolved"]["image"] == lock["manifest"]["image"] and "none" in lock["resolved"]["image"]


@pytest.mark.parametrize("study", ["graphgpo-alfworld", "vagen-sokoban"])
def test_shipped_placeholders_are_refused(study, tmp_path):
    """The GPU manifests' placeholders stop freeze, each named (subprocess)."""
    result = run_cli("freeze", f"manifests/{study}.yaml", "--allow-dirty", "-o", tmp_path / "x.lock.json", cwd=REPO)
    assert result.returncode == 2
    expected = {"graphgpo-alfworld": ["image.digest", "data.eval.path"], "vagen-sokoban": ["model.path"]}[study]
    for field in expected:
        assert f"{field}: " in result.stderr
    assert not (tmp_path / "x.lock.json").exists()
