"""workflow/scripts/resume_flag.py: a retried run resumes; a run whose config changed starts again."""

from __future__ import annotations

import subprocess
import sys

import yaml
from helpers import REPO
from wfkit import load_script

resume_flag = load_script("resume_flag")
CONFIG = {
    "study": "s",
    "method": "grpo",
    "seed": 0,
    "lock": {"path": "manifests/s.lock.json", "sha256": "a" * 64},
    "train": {"steps": 2, "lr": 0.001},
}


def _run_dir(tmp_path, resolved):
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(CONFIG))
    if resolved is not None:
        (tmp_path / "resolved_config.yaml").write_text(yaml.safe_dump(resolved))
    return tmp_path


def test_first_attempt_and_retry_resume(tmp_path):
    """No previous resolved config, or one that extends the config with defaults: resume (no flag)."""
    assert resume_flag.flag(_run_dir(tmp_path, None) / "config.yaml", tmp_path) == ""
    extended = {**CONFIG, "train": {**CONFIG["train"], "gamma": 0.95, "clip_ratio": 0.2}}
    assert resume_flag.flag(_run_dir(tmp_path, extended) / "config.yaml", tmp_path) == ""


def test_changed_lock_or_override_starts_again(tmp_path):
    """Another lock hash, or another value of a train key: `--no-resume`."""
    refrozen = {**CONFIG, "lock": {**CONFIG["lock"], "sha256": "b" * 64}}
    assert resume_flag.flag(_run_dir(tmp_path, refrozen) / "config.yaml", tmp_path) == "--no-resume"
    other_lr = {**CONFIG, "train": {**CONFIG["train"], "lr": 0.01}}
    assert resume_flag.flag(_run_dir(tmp_path, other_lr) / "config.yaml", tmp_path) == "--no-resume"


def test_command_line_prints_the_flag(tmp_path):
    """As the train rule calls it: prints the flag on stdout."""
    refrozen = {**CONFIG, "lock": {**CONFIG["lock"], "sha256": "b" * 64}}
    _run_dir(tmp_path, refrozen)
    out = subprocess.run(
        [
            sys.executable,
            str(REPO / "workflow" / "scripts" / "resume_flag.py"),
            str(tmp_path / "config.yaml"),
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == "--no-resume"


def test_a_run_whose_warm_start_was_made_again_starts_again(tmp_path):
    """A run from a shared warm start resumes while that warm start's seal is the one it recorded, and starts again
    (`--no-resume`) once the warm start was made again; the flag is taken from the command line as the workflow passes it."""
    import json

    run = _run_dir(tmp_path, CONFIG)
    warm = tmp_path / "warm"
    warm.mkdir()
    (warm / "OUTPUTS.sha256").write_text("a" * 64 + "  checkpoints/step0.pt\n")
    from agentrepro.fileio import sha256_file

    (run / "warmstart.json").write_text(
        json.dumps({"shared": {"outputs_sha256": sha256_file(warm / "OUTPUTS.sha256")}})
    )
    assert resume_flag.flag(run / "config.yaml", run, warm) == ""
    (warm / "OUTPUTS.sha256").write_text("b" * 64 + "  checkpoints/step0.pt\n")
    assert resume_flag.flag(run / "config.yaml", run, warm) == "--no-resume"
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "workflow" / "scripts" / "resume_flag.py"),
            str(run / "config.yaml"),
            str(run),
            "--from-warmstart",
            str(warm),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "--no-resume", proc.stderr
