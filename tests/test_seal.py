"""Tests for the run-directory seal (OUTPUTS.sha256) and provenance attempts."""

import json

from agentrepro.attempts import finish_attempt, start_attempt
from agentrepro.seal import read_outputs_manifest, verify_outputs, write_outputs_manifest


def _run(tmp_path):
    run = tmp_path / "run"
    (run / "eval" / "step0").mkdir(parents=True)
    (run / "logs").mkdir()
    (run / "metrics.jsonl").write_text('{"step": 1}\n')
    (run / "eval" / "step0" / "outcomes.jsonl").write_text('{"success": 1}\n')
    (run / "logs" / "train.log").write_text("live log\n")
    return run


def test_seal_lists_every_file_but_logs_and_itself(tmp_path):
    """The seal covers outputs (nested ones too) and excludes live logs and the seal file."""
    run = _run(tmp_path)
    entries = read_outputs_manifest(write_outputs_manifest(run))
    assert set(entries) == {"metrics.jsonl", "eval/step0/outcomes.jsonl"}
    assert verify_outputs(run / "OUTPUTS.sha256") == []


def test_seal_detects_change_and_removal(tmp_path):
    """Changing one byte or deleting a sealed file is reported with the file's path."""
    run = _run(tmp_path)
    seal = write_outputs_manifest(run)
    (run / "metrics.jsonl").write_text('{"step": 2}\n')
    (run / "eval" / "step0" / "outcomes.jsonl").unlink()
    problems = verify_outputs(seal)
    assert any("metrics.jsonl: changed" in p for p in problems)
    assert any("outcomes.jsonl: missing" in p for p in problems)


def test_nested_seal_is_not_sealed_twice(tmp_path):
    """An eval directory's own seal is left to that directory, so evals can be re-sealed independently."""
    run = _run(tmp_path)
    write_outputs_manifest(run / "eval" / "step0")
    entries = read_outputs_manifest(write_outputs_manifest(run))
    assert "eval/step0/OUTPUTS.sha256" not in entries


def test_killed_attempt_is_recorded_on_retry(tmp_path):
    """An attempt that never closed is marked killed when the next one starts; each attempt is kept."""
    run = tmp_path / "run"
    run.mkdir()
    start_attempt(run, stage="train", command="agentrepro train", base={"lock_sha256": "a" * 64})
    start_attempt(run, stage="train", command="agentrepro train", base={"lock_sha256": "a" * 64})
    finish_attempt(run, status="ok")
    prov = json.loads((run / "provenance.json").read_text())
    assert [a["status"] for a in prov["attempts"]] == ["killed", "ok"]
    assert prov["lock_sha256"] == "a" * 64 and prov["status"] == "ok"
    assert prov["attempts"][1]["number"] == 2 and prov["attempts"][1]["end"] is not None


def test_sums_read_back_exactly_the_names_written(tmp_path):
    """Names with U+2028, U+0085, U+2029, a line feed, a carriage return and a backslash
    round-trip through sums_text and read_sums; the escaped lines are what GNU sha256sum writes."""
    from agentrepro.seal import read_sums, sums_text

    names = ["plain.txt", "a\u2028b", "a\u0085b", "a\u2029b", "line\nfeed", "carriage\rreturn", "back\\slash", "ends\r"]
    entries = {name: f"{i:064x}" for i, name in enumerate(names)}
    path = tmp_path / "SUMS"
    path.write_text(sums_text(entries), encoding="utf-8")
    assert read_sums(path) == entries
    lines = path.read_text(encoding="utf-8").split("\n")
    assert (
        f"\\{entries['line' + chr(10) + 'feed']}  line\\nfeed" in lines
        and f"\\{entries['back' + chr(92) + 'slash']}  back\\\\slash" in lines
    )
    assert f"{entries['a' + chr(0x2028) + 'b']}  a\u2028b" in lines


def test_a_seal_of_files_named_with_line_separators_verifies(tmp_path):
    """A directory with a file named with U+2028 seals and verifies (the seal is read as it was written)."""
    (tmp_path / "odd\u2028name.json").write_text("{}")
    (tmp_path / "odd\nline.json").write_text("[]")
    write_outputs_manifest(tmp_path)
    assert set(read_outputs_manifest(tmp_path / "OUTPUTS.sha256")) == {"odd\u2028name.json", "odd\nline.json"}
    assert verify_outputs(tmp_path / "OUTPUTS.sha256") == []


def test_an_attempt_records_the_cpus_it_could_use_and_the_cpu_time_it_used(tmp_path):
    """An attempt says how many CPUs the machine has and this process may use, and closes with the CPU time it spent
    (not counting what ran before it started); a killed attempt keeps no half-measured CPU time."""
    import os

    run = tmp_path / "run"
    run.mkdir()
    sum(i * i for i in range(2_000_000))  # CPU spent before the attempt: not its own
    start_attempt(run, stage="eval", command="agentrepro eval", base={}, extra={"how_started": "started from scratch"})
    start_attempt(run, stage="eval", command="agentrepro eval", base={})
    sum(i * i for i in range(300_000))
    finish_attempt(run, status="ok")
    killed, done = json.loads((run / "provenance.json").read_text())["attempts"]
    assert killed["how_started"] == "started from scratch" and "cpu_s" not in killed and "cpu_s_at_start" not in killed
    assert done["cpus"] == os.cpu_count() and done["cpu_affinity"] == len(os.sched_getaffinity(0))
    assert 0 < done["cpu_s"] < 5 and "cpu_s_at_start" not in done


def test_no_verb_writes_its_output_over_a_file_of_the_study(tmp_path):
    """`bundle -o`, `gae -o` and `advantages -o/--diagnostics` refuse, before any work and in one line naming the
    option, a path inside a sealed folder, a study's lock or its manifest (exit 2); the file is left as it was."""
    from helpers import run_cli

    manifest = tmp_path / "manifests" / "demo.yaml"
    manifest.parent.mkdir()
    manifest.write_text("study: demo\ntitle: a study\n")
    lock = manifest.with_name("demo.lock.json")
    lock.write_text("{}\n")
    run = tmp_path / "runs" / "demo" / "grpo" / "seed0"
    (run / "eval").mkdir(parents=True)
    (run / "metrics.jsonl").write_text("{}\n")
    write_outputs_manifest(run)
    seqs = tmp_path / "seqs.jsonl"
    seqs.write_text('{"id": "a", "rewards": [1.0], "values": [0.0], "mask": [1]}\n')
    gae = ["gae", "--gamma", "1", "--lam", "1", seqs, "-o"]
    for argv, target, words in [
        ([*gae, lock], lock, "is a study's lock"),
        ([*gae, manifest], manifest, "is a study's manifest"),
        ([*gae, run / "metrics.jsonl"], run / "metrics.jsonl", "a sealed folder of a study"),
        ([*gae, run / "eval" / "new.jsonl"], run / "eval" / "new.jsonl", "a sealed folder of a study"),
        (["bundle", "demo", "--root", tmp_path, "-o", lock], lock, "is a study's lock"),
    ]:
        before = target.read_bytes() if target.exists() else None
        result = run_cli(*argv, cwd=tmp_path)
        assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert words in result.stderr and "-o" in result.stderr
        assert (target.read_bytes() if target.exists() else None) == before
    assert run_cli(*gae, tmp_path / "out.jsonl", cwd=tmp_path).returncode == 0
