"""The warm start as a step of the DAG: one job per seed and warm-start identity, input of every train job of
that seed that shares it, in the dry-run plan."""

from __future__ import annotations

import re
import shutil

import yaml
from helpers import REPO
from test_snakefile import job_counts
from wfkit import TINY, snakemake


def test_the_warm_start_runs_once_per_seed_and_each_train_job_starts_from_its_seeds(tmp_path):
    """3 methods x 2 seeds, one of them with its own warm-start learning rate: 4 warm-start jobs (not 6), and every
    train job's command names the warm start of its seed and settings."""
    manifest = yaml.safe_load(TINY.read_text())
    manifest["methods"]["gigpo"] = {"estimator": "gigpo", "gamma": 0.95}
    manifest["methods"]["graphgpo"] = {**manifest["methods"]["graphgpo"], "warmstart_lr": 1.0e-3}
    manifest["seeds"] = [0, 1]
    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests" / TINY.name).write_text(yaml.safe_dump(manifest))
    proc = snakemake(tmp_path, "-n", "-p", "--config", f"manifest=manifests/{TINY.name}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = job_counts(proc.stdout)
    assert counts["warmstart"] == 4 and counts["train"] == 6, counts
    starts = dict(
        re.findall(
            r"--out runs/wf-tiny/(\w+/seed\d+) --from-warmstart runs/wf-tiny/_warmstart/(seed\d+-[0-9a-f]{12})",
            proc.stdout,
        )
    )
    assert len(starts) == 6, proc.stdout[-3000:]
    for seed in (0, 1):
        assert starts[f"grpo/seed{seed}"] == starts[f"gigpo/seed{seed}"] != starts[f"graphgpo/seed{seed}"]
        assert all(starts[f"{m}/seed{seed}"].startswith(f"seed{seed}-") for m in ("grpo", "gigpo", "graphgpo"))
    made = re.findall(
        r"agentrepro warmstart --config \S+ --out runs/wf-tiny/_warmstart/(seed\d+-[0-9a-f]{12})", proc.stdout
    )
    assert sorted(made) == sorted(set(starts.values()))


def test_the_default_study_plans_three_warm_starts_for_twelve_runs(tmp_path):
    """manifests/frozenlake-cpu.yaml: 4 methods x 3 seeds train from 3 warm starts."""
    (tmp_path / "manifests" / "references").mkdir(parents=True)
    shutil.copy(REPO / "manifests" / "frozenlake-cpu.yaml", tmp_path / "manifests")
    shutil.copy(REPO / "manifests" / "references" / "frozenlake-cpu.yaml", tmp_path / "manifests" / "references")
    proc = snakemake(tmp_path, "-n", "--config", "manifest=manifests/frozenlake-cpu.yaml")
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = job_counts(proc.stdout)
    assert counts["warmstart"] == 3 and counts["train"] == 12, counts
