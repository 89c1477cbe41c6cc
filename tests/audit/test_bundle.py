"""`agentrepro bundle` and `audit --bundle`: deterministic archives that verify offline and catch one changed byte."""

from __future__ import annotations

import gzip
import io
import json
import shutil
import tarfile

from agentrepro.audit.bundle import BUNDLE_JSON, BUNDLE_SHA256, audit_bundle, write_bundle
from helpers import run_cli


def _members(path) -> dict[str, bytes]:
    with tarfile.open(path, "r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar}


def _repack(members: dict[str, bytes], path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    path.write_bytes(gzip.compress(buffer.getvalue()))


def test_bundle_verifies_on_a_clean_copy_elsewhere(frozen, tmp_path):
    """The bundle, copied away and with the study deleted, passes `audit --bundle` (subprocess)."""
    root, _ = frozen
    made = run_cli("bundle", "demo", "-o", "demo.tar.gz", cwd=root)
    assert made.returncode == 0, made.stderr
    elsewhere = tmp_path / "reviewer" / "demo.tar.gz"
    elsewhere.parent.mkdir()
    shutil.copy(root / "demo.tar.gz", elsewhere)
    shutil.rmtree(root)
    result = run_cli("audit", "--bundle", elsewhere, cwd=tmp_path / "reviewer")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "OK" in result.stdout


def test_bundle_contents(frozen, tmp_path):
    """Manifest, lock, reference, data, configs, commands, provenance, outcomes, analysis and report are packed;
    checkpoints are left out and listed; every member is in BUNDLE.sha256."""
    root, lock = frozen
    info = write_bundle("demo", tmp_path / "b.tar.gz", root)
    members = _members(tmp_path / "b.tar.gz")
    run = "runs/demo/grpo/seed0/"
    for name in ["manifests/demo.yaml", "manifests/demo.lock.json", "manifests/references/demo.yaml", "data/eval.jsonl",
                 run + "resolved_config.yaml", run + "command.txt", run + "provenance.json", run + "metrics.jsonl",
                 run + "OUTPUTS.sha256", run + "eval/step10/outcomes.jsonl", run + "eval/step10/OUTPUTS.sha256",
                 "analysis/demo/runs.csv", "analysis/demo/OUTPUTS.sha256", "reports/demo/report.html", BUNDLE_JSON]:
        assert name in members, name
    assert run + "checkpoints/last.pt" not in members
    bundle_info = json.loads(members[BUNDLE_JSON])
    assert {e["path"] for e in bundle_info["left_out"]} == {f"runs/demo/{m}/seed{s}/checkpoints/last.pt" for m in ("grpo", "gigpo") for s in (0, 1)}
    assert bundle_info["audit_at_bundling"] == [] and info["files"] == len(members) - 1
    listed = {line.split("  ", 1)[1] for line in members[BUNDLE_SHA256].decode().splitlines()}
    assert listed == set(members) - {BUNDLE_SHA256}


def test_bundle_is_deterministic(frozen, tmp_path):
    """Bundling the same study twice gives the same bytes (sorted members, fixed times and owners)."""
    root, _ = frozen
    write_bundle("demo", tmp_path / "a.tar.gz", root)
    (root / "runs" / "demo" / "grpo" / "seed0" / "metrics.jsonl").touch()  # a newer mtime changes nothing
    write_bundle("demo", tmp_path / "b.tar.gz", root)
    assert (tmp_path / "a.tar.gz").read_bytes() == (tmp_path / "b.tar.gz").read_bytes()


def test_one_changed_byte_in_the_archive_fails(frozen, tmp_path):
    """Flipping one byte in the middle of the .tar.gz makes `audit --bundle` fail (subprocess, exit 1)."""
    root, _ = frozen
    path = tmp_path / "b.tar.gz"
    write_bundle("demo", path, root)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    result = run_cli("audit", "--bundle", path)
    assert result.returncode == 1
    assert str(path) in result.stdout


def test_one_changed_byte_in_a_member_is_named(frozen, tmp_path):
    """A member changed by one byte and repacked (valid gzip) is named by its path."""
    root, _ = frozen
    path = tmp_path / "b.tar.gz"
    write_bundle("demo", path, root)
    members = _members(path)
    name = "runs/demo/gigpo/seed1/eval/step10/outcomes.jsonl"
    members[name] = members[name].replace(b'"success": 1', b'"success": 0', 1)
    _repack(members, path)
    problems = audit_bundle(path)
    assert f"{path}:{name}: changed (its hash differs from {BUNDLE_SHA256})" in problems
    assert any(p.startswith(f"{path}:{name}: changed after it was sealed") for p in problems)


def test_unsafe_member_is_refused(tmp_path):
    """A member escaping the extraction directory is refused before anything is written there."""
    path = tmp_path / "evil.tar.gz"
    _repack({"../escape.txt": b"x"}, path)
    assert "not a plain file with a relative path" in audit_bundle(path)[0]
    assert not (tmp_path.parent / "escape.txt").exists()


def test_files_outside_the_root_are_listed_not_packed(tmp_path):
    """A frozen data file outside the root is left out (and listed), so the bundle stays safe to extract and verifies."""
    from study_kit import BASE, set_key, write_study

    from agentrepro.jobs.freeze import freeze

    root = tmp_path / "root"
    root.mkdir()
    outside = tmp_path / "shared-data" / "eval.jsonl"
    write_study(root, set_key(BASE, "data.eval.path", str(outside)))
    outside.parent.mkdir()
    (root / "data" / "eval.jsonl").rename(outside)
    freeze(root / "manifests" / "demo.yaml", root=root, allow_dirty=True)
    info = write_bundle("demo", tmp_path / "b.tar.gz", root)
    assert [e["reason"] for e in info["left_out"]] == ["outside the root directory"]
    assert audit_bundle(tmp_path / "b.tar.gz", require="lock") == []  # frozen only: nothing has run yet


def test_bundle_of_a_study_never_frozen_is_bad_input(tmp_path):
    """Without a lock there is nothing to vouch for: exit 2 naming the lock, no archive written (subprocess)."""
    from study_kit import write_study

    write_study(tmp_path)
    result = run_cli("bundle", "demo", "-o", tmp_path / "b.tar.gz", "--root", tmp_path)
    assert result.returncode == 2 and "demo.lock.json: lock not found" in result.stderr
    assert not (tmp_path / "b.tar.gz").exists()
