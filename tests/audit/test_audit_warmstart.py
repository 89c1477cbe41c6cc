"""The audit of the shared warm starts on a tiny real study: every method of a seed started from its warm
start's step-0 checkpoint and shows its step-0 outcomes; a run from other weights, or other step-0 outcomes, fails."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml
from helpers import run_cli
from study_kit import git_commit_all

from agentrepro.audit.study import audit_study
from agentrepro.seal import write_outputs_manifest

pytestmark = pytest.mark.slow
STUDY = "ws-tiny"
METHODS = ("grpo", "graphgpo")
MANIFEST = {
    "study": STUDY,
    "title": "shared warm start audit",
    "backend": {"name": "builtin"},
    "image": {"none": "builtin backend on the CPU"},
    "model": {"name": "tiny-gpt2", "config": {"d_model": 16, "n_layers": 1, "n_heads": 2}},
    "env": {"name": "frozenlake", "split": "eval", "params": {}},
    "methods": {"grpo": {"estimator": "grpo"}, "graphgpo": {"estimator": "graphgpo", "omega": 0.1}},
    "seeds": [0],
    "train": {
        "steps": 1,
        "groups": 2,
        "group_size": 2,
        "warmstart_target": 1.0,
        "warmstart_max_steps": 2,
        "warmstart_eval_every": 1,
        "warmstart_val_seeds": 4,
        "progress": False,
    },
    "eval": {"tasks": 4, "first_seed": 10001, "episodes_per_task": 1, "temperature": 0, "checkpoint": "last"},
    "resources": {"gpus": 0},
}


def _cli(*argv) -> None:
    from agentrepro.cli import main

    assert main([str(a) for a in argv]) == 0, argv


def _run(method: str) -> Path:
    return Path("runs") / STUDY / method / "seed0"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """The study frozen, its one warm start made, both methods trained from it and evaluated at steps 0 and 1
    (the workflow's commands, in-process)."""
    root = tmp_path_factory.mktemp("ws-audit")
    (root / "manifests").mkdir()
    (root / "manifests" / f"{STUDY}.yaml").write_text(yaml.safe_dump(MANIFEST))
    git_commit_all(root)
    here = os.getcwd()
    os.chdir(root)
    try:
        _cli("freeze", f"manifests/{STUDY}.yaml")
        for method in METHODS:
            _cli(
                "resolve",
                f"manifests/{STUDY}.lock.json",
                "--method",
                method,
                "--seed",
                0,
                "-o",
                _run(method) / "config.yaml",
            )
        from agentrepro.layout import locate
        from agentrepro.planning import StudyPlan

        ident = StudyPlan(MANIFEST, "manifest").warmstarts[("grpo", 0)]
        warm = locate(STUDY).warmstart_dir(0, ident)
        _cli("warmstart", "--config", _run("grpo") / "config.yaml", "--out", warm)
        for method in METHODS:
            _cli("train", "--config", _run(method) / "config.yaml", "--out", _run(method), "--from-warmstart", warm)
            for step in (0, 1):
                _cli("eval", "--run", _run(method), "--step", step)
    finally:
        os.chdir(here)
    return root


def _copy(built: Path, tmp_path: Path) -> Path:
    root = tmp_path / "study"
    shutil.copytree(built, root, symlinks=True)
    return root


def test_methods_of_a_seed_share_step_zero_and_the_audit_passes(built):
    """One warm start for the seed; both methods' step-0 outcomes are its rows (relabelled); `agentrepro audit` passes."""
    warm = list((built / "runs" / STUDY / "_warmstart").iterdir())
    assert len(warm) == 1 and warm[0].name.startswith("seed0-")

    def rows(path: Path) -> list[dict]:
        return [{k: v for k, v in json.loads(line).items() if k != "method"} for line in path.read_text().splitlines()]

    step0 = [rows(built / _run(m) / "eval" / "step0" / "outcomes.jsonl") for m in METHODS]
    assert step0[0] == step0[1] == rows(warm[0] / "eval" / "step0" / "outcomes.jsonl") and len(step0[0]) == 4
    proc = run_cli("audit", STUDY, "--root", built, "--require", "runs")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_run_from_other_weights_fails_the_audit(built, tmp_path):
    """grpo's step-0 checkpoint replaced by other weights and the run re-sealed: its hash is not the warm start's."""
    root = _copy(built, tmp_path)
    run = root / _run("grpo")
    shutil.copyfile(root / _run("graphgpo") / "checkpoints" / "step1.pt", run / "checkpoints" / "step0.pt")
    write_outputs_manifest(run, exclude_dirs={"eval", "logs"})
    problems = audit_study(STUDY, root, require="runs")
    assert any(
        "grpo/seed0/checkpoints/step0.pt" in p and "did not start from the shared warm start's weights" in p
        for p in problems
    ), problems


def test_a_run_that_warm_started_itself_fails_the_audit(built, tmp_path):
    """grpo trained again with its own warm start (`train --no-resume`, no --from-warmstart): the audit names it."""
    root = _copy(built, tmp_path)
    here = os.getcwd()
    os.chdir(root)
    try:
        _cli("train", "--config", _run("grpo") / "config.yaml", "--out", _run("grpo"), "--no-resume")
        for step in (0, 1):
            _cli("eval", "--run", _run("grpo"), "--step", step)
    finally:
        os.chdir(here)
    problems = audit_study(STUDY, root, require="runs")
    assert any("grpo/seed0/warmstart.json" in p and "the run warm-started itself" in p for p in problems), problems
    assert any("grpo/seed0/checkpoints/step0.pt" in p and "did not start from" in p for p in problems), problems


def test_other_step_zero_outcomes_or_a_stray_warm_start_fail_the_audit(built, tmp_path):
    """A method's step-0 outcome changed and re-sealed, and a warm-start folder the lock does not plan: both reported."""
    root = _copy(built, tmp_path)
    outcomes = root / _run("graphgpo") / "eval" / "step0" / "outcomes.jsonl"
    rows = [json.loads(line) for line in outcomes.read_text().splitlines()]
    rows[0]["success"] = 1 - rows[0]["success"]
    outcomes.write_text("".join(json.dumps(r) + "\n" for r in rows))
    write_outputs_manifest(outcomes.parent)
    (root / "runs" / STUDY / "_warmstart" / "seed0-000000000000").mkdir()
    problems = audit_study(STUDY, root, require="runs")
    assert any(
        str(outcomes) in p and "1 row(s) differ from the shared warm start's step-0 outcomes" in p for p in problems
    ), problems
    assert any("seed0-000000000000: not a warm start of the lock" in p for p in problems), problems
