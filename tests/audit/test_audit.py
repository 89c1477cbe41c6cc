"""`agentrepro audit`: a frozen study with sealed runs passes; every kind of tampering is reported."""

from __future__ import annotations

import json

from helpers import run_cli

from agentrepro.audit import audit_study
from agentrepro.fileio import atomic_write_jsonl, sha256_json
from agentrepro.reading import iter_jsonl
from agentrepro.seal import write_outputs_manifest


def test_intact_study_passes(frozen):
    """Lock, manifest, two runs with evaluations, analysis and report all match: exit 0 (subprocess)."""
    root, _ = frozen
    result = run_cli("audit", "demo", "--root", root)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "OK" in result.stdout


def test_hand_edited_lock_is_detected(frozen):
    """Changing one value in the lock breaks its self-hash; audit names the lock (subprocess, exit 1)."""
    root, _ = frozen
    path = root / "manifests" / "demo.lock.json"
    lock = json.loads(path.read_text())
    lock["task_panel"][0]["category"] = "other"
    path.write_text(json.dumps(lock, indent=2))
    result = run_cli("audit", "demo", "--root", root)
    assert result.returncode == 1
    assert f"{path}: lock_self_sha256: the content does not hash to it" in result.stdout


def test_output_changed_after_the_run_is_detected(frozen):
    """One changed byte in a sealed metrics file is reported with its path (subprocess, exit 1)."""
    root, _ = frozen
    metrics = root / "runs" / "demo" / "grpo" / "seed0" / "metrics.jsonl"
    metrics.write_text(metrics.read_text().replace("0.1", "0.2", 1))
    result = run_cli("audit", "demo", "--root", root)
    assert result.returncode == 1
    assert f"{metrics}: changed after it was sealed" in result.stdout


def test_nested_evaluation_seal_is_checked(frozen):
    """An outcome flipped inside eval/step10/ is caught by that directory's own seal."""
    root, _ = frozen
    outcomes = root / "runs" / "demo" / "gigpo" / "seed1" / "eval" / "step10" / "outcomes.jsonl"
    outcomes.write_text(outcomes.read_text().replace('"success": 0', '"success": 1', 1))
    assert any(p.startswith(f"{outcomes}: changed after it was sealed") for p in audit_study("demo", root))


def test_manifest_changed_after_freezing_is_detected(frozen):
    """Editing the manifest after freeze is reported: it no longer hashes to the lock."""
    root, _ = frozen
    path = root / "manifests" / "demo.yaml"
    path.write_text(path.read_text().replace("lr: 1.0e-06", "lr: 2.0e-06"))
    problems = audit_study("demo", root)
    assert any(p.startswith(f"{path}: changed since it was frozen") for p in problems), problems


def test_frozen_data_file_changed_is_detected(frozen):
    """A data file hashed in the lock and changed afterwards is reported."""
    root, _ = frozen
    (root / "data" / "eval.jsonl").write_text("{}\n")
    assert f"{root / 'data' / 'eval.jsonl'}: changed since it was frozen (hash differs from the lock)" in audit_study(
        "demo", root
    )


def test_run_from_another_lock_or_config_is_detected(frozen):
    """provenance.json with a different lock hash, or a resolved config that no longer hashes to it, is reported."""
    root, _ = frozen
    run = root / "runs" / "demo" / "grpo" / "seed0"
    prov = json.loads((run / "provenance.json").read_text())
    prov["lock_sha256"] = "0" * 64
    (run / "provenance.json").write_text(json.dumps(prov))
    config = run / "resolved_config.yaml"
    config.write_text(config.read_text().replace("seed: 0", "seed: 5"))
    write_outputs_manifest(run)  # resealed, so only the provenance checks can catch it
    problems = audit_study("demo", root)
    assert any("lock_sha256 is '000" in p and "not produced from the current lock" in p for p in problems)
    assert any(f"but {config} hashes to" in p for p in problems)


def test_outcomes_not_on_the_frozen_panel_are_detected(frozen):
    """Rows whose task_hash differs from the lock's panel, repeated keys and missing tasks are reported."""
    root, _lock = frozen
    step = root / "runs" / "demo" / "grpo" / "seed0" / "eval" / "step10"
    rows = [row for _, row in iter_jsonl(step / "outcomes.jsonl")]
    rows[0]["task_hash"] = sha256_json("another map")
    rows[2] = dict(rows[1])
    atomic_write_jsonl(step / "outcomes.jsonl", rows)
    write_outputs_manifest(step)
    problems = [p for p in audit_study("demo", root) if p.startswith(str(step))]
    assert any("task_hash differs from the lock's task panel: line 1 ('t0')" in p for p in problems)
    assert any("key(s) repeated" in p and "'t1'" in p for p in problems)
    assert any("have no row: t2" in p for p in problems)


def test_unsealed_run_and_files_added_after_sealing_are_detected(frozen):
    """A run without OUTPUTS.sha256, and a file added to a sealed directory, are reported; live logs and
    Snakemake's directory marker are not."""
    root, _ = frozen
    run = root / "runs" / "demo" / "grpo" / "seed1"
    (run / "OUTPUTS.sha256").unlink()
    sealed = root / "analysis" / "demo"
    (sealed / "extra.csv").write_text("a,b\n")
    (root / "runs" / "demo" / "gigpo" / "seed1" / "logs" / "more.log").write_text("still writing")
    (sealed / "figures").mkdir(exist_ok=True)
    (sealed / "figures" / ".snakemake_timestamp").write_text(
        ""
    )  # Snakemake's directory() marker, touched after the job
    problems = audit_study("demo", root)
    assert f"{run}: no OUTPUTS.sha256: unfinished or never sealed, so its files cannot be vouched for" in problems
    assert any(p.startswith(f"{sealed}: 1 file(s) not listed") and "extra.csv" in p for p in problems)
    assert not any("more.log" in p or ".snakemake_timestamp" in p for p in problems)


def test_a_file_added_to_or_removed_from_the_analysis_and_resealed_is_detected(frozen):
    """With the analysis folder sealed again over the change, the recount still finds a file the analysis never
    writes, and one it writes that is gone."""
    root, _ = frozen
    sealed = root / "analysis" / "demo"
    (sealed / "extra.csv").write_text("a,b\n")
    (sealed / "learning.csv").unlink()
    write_outputs_manifest(sealed)
    problems = audit_study("demo", root)
    assert f"{sealed / 'extra.csv'}: a stray file: the analysis writes no such file (added after it ran?)" in problems
    assert f"{sealed / 'learning.csv'}: missing: the analysis writes it (removed after it ran?)" in problems


def test_run_of_a_method_the_lock_does_not_have(frozen):
    """A run directory for a method outside the lock is reported."""
    root, _lock = frozen
    stray = root / "runs" / "demo" / "ppo" / "seed0"
    stray.mkdir(parents=True)
    assert f"{stray.parent}: 'ppo' is not a method of the lock" in audit_study("demo", root)


def test_missing_lock_and_unknown_study(tmp_path):
    """A study never frozen is one problem (exit 1); an unknown study is bad input (exit 2)."""
    from study_kit import write_study

    write_study(tmp_path)
    assert run_cli("audit", "demo", "--root", tmp_path).returncode == 1
    unknown = run_cli("audit", "nope", "--root", tmp_path)
    assert unknown.returncode == 2 and "nope" in unknown.stderr


def test_audit_takes_a_study_or_a_bundle_not_both(frozen):
    """Giving both a study and --bundle (or neither) is bad input, exit 2."""
    root, _ = frozen
    assert run_cli("audit", "demo", "--bundle", "x.tar.gz", cwd=root).returncode == 2
    assert run_cli("audit", cwd=root).returncode == 2


def test_evaluation_provenance_is_checked(frozen):
    """An evaluation from another lock, one still running, and one without provenance are each reported."""
    root, _ = frozen
    step = root / "runs" / "demo" / "grpo" / "seed0" / "eval" / "step10"
    prov = json.loads((step / "provenance.json").read_text())
    prov.update(lock_sha256="f" * 64, status=None)
    (step / "provenance.json").write_text(json.dumps(prov))
    write_outputs_manifest(step)
    other = root / "runs" / "demo" / "gigpo" / "seed1" / "eval" / "step10"
    (other / "provenance.json").unlink()
    write_outputs_manifest(other)
    problems = audit_study("demo", root)
    assert any(p.startswith(f"{step / 'provenance.json'}: lock_sha256 is 'fff") for p in problems)
    assert f"{step / 'provenance.json'}: the last attempt has not finished" in problems
    assert f"{other / 'provenance.json'}: missing: nothing says how these outcomes were produced" in problems


def test_run_trained_on_another_backend_is_detected(frozen):
    """A run whose resolved config names a backend other than the lock's for its method is reported, even re-hashed."""
    import yaml

    from agentrepro.runconfig import config_file_sha256

    root, _ = frozen
    run = root / "runs" / "demo" / "gigpo" / "seed1"
    config = run / "resolved_config.yaml"
    doc = yaml.safe_load(config.read_text())
    doc["backend"] = {"name": "relax", "repo": "redai-infra/Relax", "commit": "1" * 40}
    config.write_text(yaml.safe_dump(doc, sort_keys=False))
    prov = json.loads((run / "provenance.json").read_text())
    prov["resolved_config_sha256"] = config_file_sha256(config)
    (run / "provenance.json").write_text(json.dumps(prov))
    write_outputs_manifest(run)
    problems = audit_study("demo", root)
    assert any(
        f"{config}: backend 'relax/redai-infra/Relax/{'1' * 40}' differs from the lock's backend of gigpo" in p
        for p in problems
    ), problems
