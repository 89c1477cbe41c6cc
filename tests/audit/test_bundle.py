"""`agentrepro bundle` and `audit --bundle`: deterministic archives that verify offline and catch one changed byte."""

from __future__ import annotations

import gzip
import io
import json
import re
import shutil
import subprocess
import tarfile

from helpers import require_executable, run_cli, tar_members

from agentrepro.audit.bundle import BUNDLE_JSON, BUNDLE_SHA256, BUNDLE_SIG, audit_bundle, write_bundle
from agentrepro.audit.reeval import TaskSample, declared_final_step, final_step
from agentrepro.audit.sign import sign
from agentrepro.runconfig import RESOLVED


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
    root, _lock = frozen
    info = write_bundle("demo", tmp_path / "b.tar.gz", root)
    members = tar_members(tmp_path / "b.tar.gz")
    run = "runs/demo/grpo/seed0/"
    for name in [
        "manifests/demo.yaml",
        "manifests/demo.lock.json",
        "manifests/references/demo.yaml",
        "data/eval.jsonl",
        run + "resolved_config.yaml",
        run + "command.txt",
        run + "provenance.json",
        run + "metrics.jsonl",
        run + "OUTPUTS.sha256",
        run + "eval/step10/outcomes.jsonl",
        run + "eval/step10/OUTPUTS.sha256",
        "analysis/demo/runs.csv",
        "analysis/demo/OUTPUTS.sha256",
        "reports/demo/report.html",
        BUNDLE_JSON,
    ]:
        assert name in members, name
    assert run + "checkpoints/last.pt" not in members
    bundle_info = json.loads(members[BUNDLE_JSON])
    assert {e["path"] for e in bundle_info["left_out"]} == {
        f"runs/demo/{m}/seed{s}/checkpoints/last.pt" for m in ("grpo", "gigpo") for s in (0, 1)
    }
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
    members = tar_members(path)
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


def _key(tmp_path, name: str) -> tuple:
    """A fresh Ed25519 key pair made by ssh-keygen (no passphrase): (private key path, allowed-signers line)."""
    keygen = require_executable("ssh-keygen", "ssh-keygen")
    key = tmp_path / "keys" / name
    key.parent.mkdir(exist_ok=True)
    subprocess.run([keygen, "-q", "-t", "ed25519", "-N", "", "-C", f"{name}@example.org", "-f", str(key)], check=True)
    return key, f'{name}@example.org namespaces="agentrepro-bundle" {key.with_suffix(".pub").read_text().strip()}\n'


def _digest(text: str) -> str:
    found = re.search(r"bundle digest (sha256:[0-9a-f]{16})", text)
    assert found, text
    return found.group(1)


def test_signed_bundle_verifies_against_allowed_signers(frozen, tmp_path):
    """`bundle --sign KEY` signs with ssh-keygen; `audit --bundle --allowed-signers` names the verified signer, and both
    print the same short digest (subprocesses, real ssh-keygen)."""
    root, _ = frozen
    key, line = _key(tmp_path, "author")
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(line)
    made = run_cli("bundle", "demo", "-o", tmp_path / "b.tar.gz", "--sign", key, cwd=root)
    assert made.returncode == 0, made.stderr
    assert "signed (namespace agentrepro-bundle) by 256 SHA256:" in made.stdout and BUNDLE_SIG in tar_members(
        tmp_path / "b.tar.gz"
    )
    checked = run_cli("audit", "--bundle", tmp_path / "b.tar.gz", "--allowed-signers", allowed)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"signed by author@example.org, verified against {allowed}" in checked.stdout
    assert _digest(checked.stdout) == _digest(made.stdout)
    anyone = run_cli("audit", "--bundle", tmp_path / "b.tar.gz")
    assert anyone.returncode == 0 and "not checked against an allowed-signers file" in anyone.stdout


def test_a_bad_signature_fails_the_audit(frozen, tmp_path):
    """A bundle signed by a key the allowed-signers file does not list, one whose signature covers other content, and
    one whose signature is damaged each fail `audit --bundle` (exit 1) with a line naming BUNDLE.sha256.sig."""
    root, _ = frozen
    author, _ = _key(tmp_path, "author")
    _, stranger = _key(tmp_path, "stranger")
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(stranger)
    write_bundle("demo", tmp_path / "b.tar.gz", root, key=author)
    result = run_cli("audit", "--bundle", tmp_path / "b.tar.gz", "--allowed-signers", allowed)
    assert result.returncode == 1 and f"{BUNDLE_SIG}: the signing key is not in {allowed}" in result.stdout, (
        result.stdout
    )
    members = tar_members(tmp_path / "b.tar.gz")
    for case, signature in [
        ("other content", sign(b"another bundle's BUNDLE.sha256\n", author)),
        ("damaged", members[BUNDLE_SIG].replace(b"\n", b"\nAAAA", 2)),
    ]:
        _repack({**members, BUNDLE_SIG: signature}, tmp_path / "forged.tar.gz")
        result = run_cli("audit", "--bundle", tmp_path / "forged.tar.gz")
        assert result.returncode == 1, f"{case}: {result.stdout}"
        assert any(
            BUNDLE_SIG in line and "the signature does not verify" in line for line in result.stdout.splitlines()
        ), case


def test_an_oversized_signature_is_refused_naming_it_without_running_ssh_keygen(frozen, tmp_path):
    """A 60 MB BUNDLE.sha256.sig (ssh-keygen takes a minute over one, then names nothing) fails the audit with a line
    naming it and its size; sign.check gives nothing that large to ssh-keygen."""
    root, _ = frozen
    author, _ = _key(tmp_path, "author")
    write_bundle("demo", tmp_path / "b.tar.gz", root, key=author)
    members = tar_members(tmp_path / "b.tar.gz")
    armour = b"-----BEGIN SSH SIGNATURE-----\n" + b"A" * 60_000_000 + b"\n-----END SSH SIGNATURE-----\n"
    _repack({**members, BUNDLE_SIG: armour}, tmp_path / "forged.tar.gz")
    result = run_cli("audit", "--bundle", tmp_path / "forged.tar.gz")
    assert result.returncode == 1, result.stdout + result.stderr
    said = f"{BUNDLE_SIG}: is {len(armour):,} bytes, more than an SSH signature has"
    assert any(said in line for line in result.stdout.splitlines()), result.stdout


def test_an_unsigned_bundle_fails_when_a_signer_is_required(frozen, tmp_path):
    """With --allowed-signers a bundle must be signed; --allowed-signers without --bundle is bad input (exit 2)."""
    root, _ = frozen
    _, line = _key(tmp_path, "author")
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(line)
    write_bundle("demo", tmp_path / "b.tar.gz", root)
    result = run_cli("audit", "--bundle", tmp_path / "b.tar.gz", "--allowed-signers", allowed)
    assert result.returncode == 1 and "not signed, but an allowed-signers file was given" in result.stdout
    wrong = run_cli("audit", "demo", "--root", root, "--allowed-signers", allowed)
    assert wrong.returncode == 2 and "--allowed-signers goes with --bundle" in wrong.stderr


def test_re_evaluation_says_what_it_could_not_play_and_tasks_needs_it(frozen, tmp_path):
    """The fixture's runs are verl-agent's, whose evaluation needs its image and a GPU, so `--re-eval` plays nothing:
    each run says why, and none counts as agreement or as a problem; `--tasks` without `--re-eval` is bad input."""
    root, _ = frozen
    write_bundle("demo", tmp_path / "b.tar.gz", root)
    result = run_cli("audit", "--bundle", tmp_path / "b.tar.gz", "--re-eval")
    assert result.returncode == 0, result.stdout + result.stderr
    said = [line for line in result.stdout.splitlines() if line.startswith("re-evaluation: ")]
    why = "not re-evaluated: the verl-agent backend's evaluation runs in its framework's image, not here"
    assert len(said) == 4 and all(line.endswith(why) for line in said), said
    card = [line.removeprefix("card: ") for line in result.stdout.splitlines() if line.startswith("card: ")]
    differs = sum(line.startswith("differs from the lock: ") for line in result.stdout.splitlines())
    assert differs  # the fixture's jobs recorded no software: said as differences, not problems
    assert card == [
        "signed: no (an unsigned bundle: no one vouches for it)",
        "every output matches the lock: yes",
        "final checkpoints shipped: 0 of 4 run(s)",
        "outcomes re-derived from the checkpoints: not checked (no run could be played; 4 run(s) not played, above)",
        f"jobs ran the code the lock names: no ({differs} line(s) above: differs from the lock)",
        "the study's own checks passed: yes",
    ]
    wrong = run_cli("audit", "demo", "--root", root, "--tasks", "3")
    assert wrong.returncode == 2 and "--tasks goes with --re-eval" in wrong.stderr


def test_the_digest_names_the_content(frozen, tmp_path):
    """The short digest is the same for the same content (signed or not) and changes with any member."""
    root, _ = frozen
    key, _ = _key(tmp_path, "author")
    plain = write_bundle("demo", tmp_path / "a.tar.gz", root)
    signed = write_bundle("demo", tmp_path / "b.tar.gz", root, key=key)
    assert (
        plain["digest"] == signed["digest"] and plain["digest"].startswith("sha256:") and len(plain["digest"]) == 7 + 16
    )
    assert write_bundle("demo", tmp_path / "c.tar.gz", root)["digest"] == plain["digest"]
    (root / "manifests/references/demo.yaml").write_text(
        (root / "manifests/references/demo.yaml").read_text() + "# note\n"
    )
    assert write_bundle("demo", tmp_path / "d.tar.gz", root)["digest"] != plain["digest"]


def test_a_checkpoint_folder_ships_its_tokenizer_and_leaves_out_weights(frozen, tmp_path):
    """The small text files of checkpoints/ (a tokenizer, configs) are packed; weights are left out, saying why."""
    from agentrepro.seal import write_outputs_manifest

    root, _ = frozen
    run = root / "runs/demo/grpo/seed0"
    (run / "checkpoints/tokenizer").mkdir()
    (run / "checkpoints/tokenizer/tokenizer.json").write_text('{"model": {"type": "WordLevel"}}\n')
    write_outputs_manifest(run, exclude_dirs={"eval", "logs"})
    info = write_bundle("demo", tmp_path / "b.tar.gz", root)
    assert "runs/demo/grpo/seed0/checkpoints/tokenizer/tokenizer.json" in tar_members(tmp_path / "b.tar.gz")
    reasons = {e["path"]: e["reason"] for e in info["left_out"]}
    assert (
        reasons["runs/demo/grpo/seed0/checkpoints/last.pt"]
        == "checkpoint weights or training state (its hash is in the run's seal)"
    )


def test_the_re_evaluated_step_is_the_one_the_verdicts_use(frozen):
    """The lock's `analysis.final_step` names the checkpoint shipped and played again where the run evaluated it
    (here 5 of 0, 5, 10); a step never evaluated, or none declared, leaves the last evaluated step (10), as the
    analysis does."""
    root, lock = frozen
    assert declared_final_step(lock) is None
    run_dir = next(p.parent for p in sorted((root / "runs").rglob(RESOLVED)))
    for declared, expected in [(5, 5), (7, 10), (None, 10)]:
        lock["manifest"]["analysis"] = {**(lock["manifest"].get("analysis") or {}), "final_step": declared}
        assert final_step(run_dir, declared_final_step(lock))[1] == expected, declared


def test_a_task_sample_is_drawn_not_the_first_tasks_and_repeats_from_its_seed():
    """`--tasks N`: N distinct panel positions, sorted, the same for a seed, spread beyond the first N for some seed,
    the whole panel (None) when N covers it; without `--tasks-seed` each audit draws its own seed."""
    drawn = [TaskSample(4, seed).positions(100) for seed in range(20)]
    assert all(p is not None and len(set(p)) == 4 and p == sorted(p) and max(p) < 100 for p in drawn)
    assert TaskSample(4, 3).positions(100) == drawn[3] and any(p != [0, 1, 2, 3] for p in drawn)
    assert TaskSample(100, 0).positions(100) is None and TaskSample(200, 0).positions(100) is None
    assert len({TaskSample.drawn(4).seed for _ in range(5)}) > 1 and TaskSample.drawn(4, 11).seed == 11


def test_the_verdict_card_words_what_the_audit_found():
    """Each line answers yes, no or not checked with its count; a study's folder has no signature line."""
    from agentrepro.audit.card import Findings, verdict_card
    from agentrepro.audit.reeval import ReEvaluation

    replay = ReEvaluation([], [], as_recorded=3, otherwise=1, not_played=2)
    found = Findings(2, 1, 0, (3, 6), "signed by reviewer@x (ED25519 SHA256:abc)", replay)
    assert verdict_card(found) == [
        "signed: yes (signed by reviewer@x (ED25519 SHA256:abc))",
        "every output matches the lock: no (2 problem(s) above)",
        "final checkpoints shipped: 3 of 6 run(s)",
        "outcomes re-derived from the checkpoints: no (1 of 4 run(s) played otherwise; 2 run(s) not played, above)",
        "jobs ran the code the lock names: no (1 line(s) above: differs from the lock)",
        "the study's own checks passed: not checked (the outputs do not match the lock)",
    ]
    clean = verdict_card(Findings(0, 0, 3, (6, 6), None, ReEvaluation([], [], as_recorded=6)))
    assert clean == [
        "every output matches the lock: yes",
        "final checkpoints kept: 6 of 6 run(s)",
        "outcomes re-derived from the checkpoints: yes (6 run(s), each as recorded)",
        "jobs ran the code the lock names: yes",
        "the study's own checks passed: no (3 failure(s) above: results, not tampering)",
    ]
    assert "not checked (`--re-eval` plays them again)" in verdict_card(Findings(0, 0, 0, (0, 6)))[2]
