"""Pruned checkpoints in the manifest and the audit (backends/checkpoints.py): eval.keep_checkpoints is validated;
the removed files are excused exactly when a sealed eval/step<N>/pruned.json lists them with the training seal's hashes."""

from __future__ import annotations

import json
import shutil

import pytest
from helpers import run_cli
from study_kit import BASE, fake_outputs, set_key, write_study

from agentrepro.audit import audit_study
from agentrepro.backends.checkpoints import KEEP
from agentrepro.errors import BadInput
from agentrepro.fileio import sha256_file
from agentrepro.manifest.loading import load_manifest
from agentrepro.seal import read_outputs_manifest, write_outputs_manifest


def _prune_by_hand(run, step, digest=None):
    """What `agentrepro eval` leaves after pruning checkpoints/last.pt: the file gone, the record sealed with the step."""
    sealed = read_outputs_manifest(run / "OUTPUTS.sha256")["checkpoints/last.pt"]
    (run / "checkpoints" / "last.pt").unlink()
    ev = run / "eval" / f"step{step}"
    record = {
        "step": step,
        "keep": "none",
        "outcomes_sha256": sha256_file(ev / "outcomes.jsonl"),
        "removed": {"checkpoints/last.pt": digest or sealed},
        "removed_bytes": 1000,
        "kept": {},
    }
    (ev / "pruned.json").write_text(json.dumps(record))
    write_outputs_manifest(ev)
    root = run.parents[3]
    for stage in ("analysis", "reports"):  # analysed and reported after the evaluations, as the workflow does
        shutil.rmtree(root / stage / "demo")
    fake_outputs(root)


def test_pruned_checkpoint_passes_the_audit(frozen):
    """A checkpoint removed after evaluation, with its record, leaves the audit clean (subprocess, exit 0)."""
    root, _ = frozen
    _prune_by_hand(root / "runs" / "demo" / "grpo" / "seed0", 10)
    result = run_cli("audit", "demo", "--root", root)
    assert result.returncode == 0, result.stdout + result.stderr


def test_missing_checkpoint_without_a_true_record_is_reported(frozen):
    """A record naming another hash does not excuse the file: both the record and the missing file are reported."""
    root, _ = frozen
    run = root / "runs" / "demo" / "grpo" / "seed0"
    _prune_by_hand(run, 10, digest="0" * 64)
    problems = audit_study("demo", root)
    assert any(
        p.startswith(f"{run / 'eval' / 'step10' / 'pruned.json'}: lists checkpoints/last.pt") for p in problems
    ), problems
    assert any(p.startswith(f"{run / 'checkpoints' / 'last.pt'}: missing") for p in problems), problems


def test_manifest_schema_takes_only_the_three_keep_values(tmp_path):
    """load_manifest accepts eval.keep_checkpoints hf/none/all and names the key of any other value."""
    for keep in KEEP:
        assert (
            load_manifest(write_study(tmp_path / keep, set_key(BASE, "eval.keep_checkpoints", keep)))["eval"][
                "keep_checkpoints"
            ]
            == keep
        )
    with pytest.raises(BadInput, match=r"eval.keep_checkpoints"):
        load_manifest(write_study(tmp_path / "bad", set_key(BASE, "eval.keep_checkpoints", "optimizer")))
