"""The workflow evaluates exactly the checkpoints the trainer saves, and a study's home is its manifest's folder.

* For every shipped manifest, the steps the plan evaluates equal the steps each method's backend saves (the builtin
  trainer's `checkpoint_schedule`, a framework backend's `checkpoint_steps`) for every method.
* vagen-sokoban (`every: 25`, 200 steps) plans 0, 25, ..., 200, and `snakemake -n` asks for no other step.
* A manifest outside manifests/ plans, trains, analyses, reports and audits (its lock and reference beside it).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from helpers import REPO, run_cli
from test_snakefile import job_counts
from wfkit import HERE, snakemake

from agentrepro import planning as plan
from agentrepro.backends import get_backend
from agentrepro.fileio import sha256_json
from agentrepro.manifest.loading import load_manifest
from agentrepro.placement import method_placement

SHIPPED = sorted((REPO / "manifests").glob("*.yaml"))


def _run_config(manifest: dict, method: str, model_dir: Path) -> dict:
    """The run config `agentrepro train` would resolve for `method` (placeholders of model.path filled in)."""
    model = dict(manifest["model"])
    if "path" in model:
        model["path"] = str(model_dir)  # freeze would refuse the placeholder; any local directory stands in
    placement = method_placement(manifest, method)  # the method's own backend
    config = {
        "study": manifest["study"],
        "method": method,
        "seed": manifest["seeds"][0],
        "backend": placement.backend,
        "model": model,
        "env": manifest["env"],
        "train": {**manifest["train"], **(manifest["methods"][method] or {})},
        "eval": manifest["eval"],
        "resources": placement.resources,
    }
    return get_backend(placement.name).resolve(config)


@pytest.mark.parametrize("manifest_path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_the_backend_saves_exactly_the_planned_steps(manifest_path, tmp_path):
    """Every method of every shipped manifest checkpoints exactly the steps the workflow evaluates."""
    planned = list(plan.study_plan(manifest_path).steps)
    manifest = load_manifest(manifest_path)
    for method in manifest["methods"]:
        config = _run_config(manifest, method, tmp_path)
        backend = get_backend(config["backend"]["name"])
        if backend.name == "builtin":
            from agentrepro.trainer.context import RunSpec
            from agentrepro.trainer.loop import checkpoint_schedule

            saved = checkpoint_schedule(RunSpec.from_config(config))
        else:
            backend.validate_config(config)
            saved = backend.checkpoint_steps(config)
        assert saved == planned, f"{manifest_path.name}: {method}"
    assert planned[0] == 0 and planned[-1] == manifest["train"]["steps"]


def test_vagen_sokoban_plans_every_25_steps_and_snakemake_asks_for_no_other(tmp_path):
    """vagen-sokoban: steps 0, 25, ..., 200; `snakemake -n` (with a lock the test writes) plans only those evaluations."""
    source = REPO / "manifests" / "vagen-sokoban.yaml"
    assert plan.study_plan(source).steps == tuple(range(0, 201, 25))
    (tmp_path / "manifests").mkdir()
    manifest = shutil.copy(source, tmp_path / "manifests" / source.name)
    # freeze refuses the manifest's placeholders; the plan only needs a lock that matches the manifest
    (tmp_path / "manifests" / "vagen-sokoban.lock.json").write_text(
        json.dumps({"manifest_sha256": sha256_json(load_manifest(manifest))})
    )
    proc = snakemake(tmp_path, "-n", "--config", "manifest=manifests/vagen-sokoban.yaml")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    evaluated = [int(s) for s in re.findall(r"^\s+wildcards: .*\bstep=(\d+)", proc.stdout, re.M)]
    assert sorted(set(evaluated)) == list(range(0, 201, 25))
    assert len(evaluated) == 4 * 3 * 9  # methods x seeds x steps
    counts = job_counts(proc.stdout)
    assert counts["train"] == 12 and "warmstart" not in counts, counts  # a pretrained model: RL starts from its weights


@pytest.mark.slow
def test_a_manifest_outside_manifests_runs_to_its_report_and_audit(tmp_path):
    """studies/wf-home.yaml: lock beside it, reference read beside it; trained, analysed, reported, audit passes."""
    (tmp_path / "studies" / "references").mkdir(parents=True)
    shutil.copy(HERE / "manifests" / "wf-home.yaml", tmp_path / "studies")
    shutil.copy(HERE / "manifests" / "references" / "wf-home.yaml", tmp_path / "studies" / "references")
    proc = snakemake(
        tmp_path,
        "--cores",
        "2",
        "--config",
        "manifest=studies/wf-home.yaml",
        "freeze_flags=--allow-dirty",
        "pdf=false",
        timeout=900,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
    lock = json.loads((tmp_path / "studies" / "wf-home.lock.json").read_text())
    assert lock["manifest_path"] == "studies/wf-home.yaml" and not (tmp_path / "manifests").exists()
    for step in (0, 1):
        assert (tmp_path / "runs" / "wf-home" / "grpo" / "seed0" / "eval" / f"step{step}" / "outcomes.jsonl").is_file()
    analysis = json.loads((tmp_path / "analysis" / "wf-home" / "analysis.json").read_text())
    assert analysis["settings"]["reference"]["path"] == "studies/references/wf-home.yaml"
    assert [v["method"] for v in analysis["tables"]["verdicts"]] == ["grpo"]
    html = (tmp_path / "reports" / "wf-home" / "report.html").read_text()
    assert "the audit could not run" not in html
    audit = run_cli("audit", "studies/wf-home.yaml", cwd=tmp_path)
    assert audit.returncode == 0, audit.stdout + audit.stderr
