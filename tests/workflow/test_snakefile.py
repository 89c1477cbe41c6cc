"""The DAG without running it: lint, the dry-run plan of every manifest, and the lock gate before any job."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO
from wfkit import snakemake

from agentrepro import planning as plan
from agentrepro.fileio import sha256_json
from agentrepro.reading import load_yaml


def job_counts(output: str) -> dict[str, int]:
    """The `Job stats` table of a dry run as {rule: count}."""
    table = output.split("Job stats:", 1)[1].split("Reasons:", 1)[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M) if m.group(1) != "total"}


def test_lint_is_clean():
    """`snakemake --lint` finds nothing to complain about."""
    proc = snakemake(REPO, "--lint", "--nolock")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Congratulations" in proc.stdout + proc.stderr


@pytest.mark.parametrize("manifest", plan.all_manifests(REPO / "manifests"), ids=lambda p: p.rsplit("/", 1)[-1])
def test_dry_run_plans_every_manifest(manifest):
    """`snakemake -n` plans each study in manifests/: one train per method x seed, one eval per checkpoint."""
    p = plan.study_plan(manifest)
    rel = str(p.manifest).replace(str(REPO) + "/", "")
    proc = snakemake(REPO, "-n", "--nolock", "--config", f"manifest={rel}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = job_counts(proc.stdout)
    runs = len(p.methods) * len(p.seeds)
    assert counts["train"] == runs and counts["eval"] == runs * len(p.steps)
    assert counts["analyze"] == 1 and counts["report"] == 1


def test_dry_run_of_a_fresh_study_freezes_first(study_dir):
    """Without a lock the plan starts with the freeze job, and every other job depends on the lock."""
    proc = snakemake(study_dir, "-n", "--config", "manifest=manifests/wf-tiny.yaml")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert job_counts(proc.stdout) == {
        "freeze": 1,
        "resolve": 2,
        "warmstart": 1,
        "train": 2,
        "eval": 4,
        "analyze": 1,
        "report": 1,
        "all": 1,
    }
    first_rule = re.search(r"^rule (\w+):", proc.stdout, re.M).group(1)
    assert first_rule == "freeze"


def _write_lock(study_dir, sha):
    manifest = study_dir / "manifests" / "wf-tiny.yaml"
    (study_dir / "manifests" / "wf-tiny.lock.json").write_text(json.dumps({"lock_version": 1, "manifest_sha256": sha}))
    return manifest


def test_a_matching_lock_is_never_refrozen(study_dir):
    """With a lock matching the manifest, no freeze job is planned, even when the manifest is newer."""
    manifest = _write_lock(study_dir, sha256_json(load_yaml(study_dir / "manifests" / "wf-tiny.yaml")))
    manifest.touch()  # newer than the lock, as after a fresh clone
    proc = snakemake(study_dir, "-n", "--config", "manifest=manifests/wf-tiny.yaml")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "freeze" not in job_counts(proc.stdout)


def test_a_disagreeing_lock_stops_the_workflow(study_dir):
    """A lock frozen from another manifest stops even a dry run, naming the lock and `agentrepro freeze`."""
    _write_lock(study_dir, "0" * 64)
    proc = snakemake(study_dir, "-n", "--config", "manifest=manifests/wf-tiny.yaml")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "wf-tiny.lock.json" in out and "agentrepro freeze" in out and "manifest_sha256" in out


def test_a_bad_manifest_is_reported_with_its_key(study_dir):
    """An unknown manifest key stops the workflow with the file and key, before any job."""
    path = study_dir / "manifests" / "wf-tiny.yaml"
    path.write_text(path.read_text() + "colour: blue\n")
    proc = snakemake(study_dir, "-n", "--config", "manifest=manifests/wf-tiny.yaml")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "wf-tiny.yaml" in out and "colour" in out


@pytest.mark.parametrize("profile", ["slurm", "local"])
def test_profile_works_from_the_repository_root_as_typed(profile):
    """`snakemake --profile slurm -n` (and local) in the repository root finds the profile and plans the default study."""
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "--profile", profile, "-n", "--nolock"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"},
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert f"Using profile {profile}" in proc.stdout + proc.stderr
    default = plan.study_plan(REPO / "manifests" / "frozenlake-cpu.yaml")
    assert job_counts(proc.stdout)["train"] == len(default.methods) * len(default.seeds)


def test_pdf_can_be_turned_off(study_dir):
    """`--config pdf=false` plans the report without its PDF and passes --no-pdf to `agentrepro report`."""
    proc = snakemake(study_dir, "-n", "-p", "--config", "manifest=manifests/wf-tiny.yaml", "pdf=false")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "report.pdf" not in proc.stdout and "agentrepro report --no-pdf manifests/wf-tiny.yaml" in proc.stdout
    default = snakemake(study_dir, "-n", "--config", "manifest=manifests/wf-tiny.yaml")
    assert "reports/wf-tiny/report.pdf" in default.stdout
