"""`agentrepro eval` as a subprocess: outcomes of one checkpoint, validated, with their own attempts and seal."""

from __future__ import annotations

import json

from helpers import run_cli

from agentrepro.seal import verify_outputs


def test_eval_writes_sealed_outcomes(trained_run):
    """eval --step N writes eval/stepN/outcomes.jsonl (one row per panel task), an ok attempt bound to the run seal, and its own seal."""
    run_dir = trained_run
    run_seal_before = (run_dir / "OUTPUTS.sha256").read_text()
    for step in (0, 3):
        result = run_cli("eval", "--run", run_dir, "--step", step)
        assert result.returncode == 0, result.stderr
        eval_dir = run_dir / "eval" / f"step{step}"
        rows = [json.loads(x) for x in (eval_dir / "outcomes.jsonl").read_text().splitlines()]
        assert [r["task_id"] for r in rows] == [f"frozenlake-{i}" for i in range(8)]
        assert {r["step"] for r in rows} == {step}
        prov = json.loads((eval_dir / "provenance.json").read_text())
        assert prov["attempts"][-1]["status"] == "ok" and prov["attempts"][-1]["episodes"] == 8
        assert prov["run_outputs_sha256"] is not None
        assert verify_outputs(eval_dir / "OUTPUTS.sha256") == []
    assert (run_dir / "OUTPUTS.sha256").read_text() == run_seal_before  # evaluation never touches the training seal
    assert verify_outputs(run_dir / "OUTPUTS.sha256") == []


def test_eval_refuses_invalid_rows(trained_run):
    """A row with success = 2 fails the eval (exit 2) naming the row and field; no outcomes.jsonl, a failed attempt."""
    run_dir = trained_run
    result = run_cli("eval", "--run", run_dir, "--step", 3, env={"MINI_BAD_ROW": "1"})
    assert result.returncode == 2
    assert "row 1: success" in result.stderr
    eval_dir = run_dir / "eval" / "step3"
    assert not (eval_dir / "outcomes.jsonl").exists() and not (eval_dir / "OUTPUTS.sha256").exists()
    assert json.loads((eval_dir / "provenance.json").read_text())["attempts"][-1]["status"] == "failed"


def test_eval_of_missing_checkpoint_fails(trained_run):
    """Evaluating a step that has no checkpoint is a failure (exit 1) that points at the log."""
    run_dir = trained_run
    result = run_cli("eval", "--run", run_dir, "--step", 7)
    assert result.returncode == 1
    assert "no checkpoint for step 7" in result.stderr


def test_eval_needs_a_run_directory(tmp_path):
    """eval of a directory without resolved_config.yaml is bad input naming it."""
    (tmp_path / "empty").mkdir()
    result = run_cli("eval", "--run", tmp_path / "empty", "--step", 0)
    assert result.returncode == 2 and "resolved_config.yaml" in result.stderr
