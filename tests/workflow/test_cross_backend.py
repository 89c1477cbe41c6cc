"""One study, two backends, end to end through Snakemake on the CPU (tests/workflow/manifests/wf-xbackend.yaml).

`grpo` trains on the builtin backend and `grpo@command` on the command backend (tests/workflow/second_framework.py,
the builtin trainer under another name): each run gets its own backend's config, the lock pins both, and the
name `grpo@command` reaches outcomes, analysis and report unchanged, paired with `grpo` on the same tasks.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from wfkit import HERE, snakemake

from agentrepro.reading import load_yaml

STUDY = "wf-xbackend"
MANIFEST = HERE / "manifests" / f"{STUDY}.yaml"
CONFIG = ("--config", f"manifest=manifests/{STUDY}.yaml", "freeze_flags=--allow-dirty", "pdf=false")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A working directory where the cross-backend study ran to its report (`snakemake --cores 2`)."""
    workdir = tmp_path_factory.mktemp("wf-xbackend")
    (workdir / "manifests").mkdir()
    shutil.copy(MANIFEST, workdir / "manifests" / MANIFEST.name)
    (workdir / "tests" / "workflow").mkdir(parents=True)  # the command templates name the script from the root
    shutil.copy(HERE / "second_framework.py", workdir / "tests" / "workflow" / "second_framework.py")
    proc = snakemake(workdir, "--cores", "2", *CONFIG, timeout=900)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
    return workdir


def test_each_run_is_trained_by_its_own_backend(finished):
    """The run config of grpo names the builtin backend and that of grpo@command the command one, which ran the script."""
    runs = finished / "runs" / STUDY
    assert sorted(p.name for p in runs.iterdir()) == ["grpo", "grpo@command"]
    assert load_yaml(runs / "grpo" / "seed0" / "config.yaml")["backend"] == {"name": "builtin"}
    command = load_yaml(runs / "grpo@command" / "seed0" / "config.yaml")
    assert command["backend"]["name"] == "command" and command["resources"]["mem_mb"] == 1500
    assert "second_framework.py train" in (runs / "grpo@command" / "seed0" / "external_command.txt").read_text()
    assert not (runs / "grpo" / "seed0" / "external_command.txt").exists()
    lock = json.loads((finished / "manifests" / f"{STUDY}.lock.json").read_text())
    assert lock["resolved"]["backend"] == {"name": "builtin"} and lock["resolved"]["backends"]["command"][
        "backend"
    ] == {"name": "command"}


def test_the_same_trainer_under_two_backends_trains_identically(finished):
    """Same trainer, seed and config through two backends: the per-step losses and gradient norms agree exactly."""

    def fingerprint(method):
        rows = [
            json.loads(line)
            for line in (finished / "runs" / STUDY / method / "seed0" / "metrics.jsonl").read_text().splitlines()
        ]
        return [(r["step"], r["loss_policy"], r["grad_norm"], r["entropy"]) for r in rows]

    assert len(fingerprint("grpo")) == 2 and fingerprint("grpo") == fingerprint("grpo@command")


def test_the_backend_qualified_name_flows_to_outcomes_analysis_and_report(finished):
    """Outcomes, the methods and paired tables, and the report carry `grpo@command` as written, paired with grpo task by task."""
    outcomes = finished / "runs" / STUDY / "grpo@command" / "seed0" / "eval" / "step2" / "outcomes.jsonl"
    rows = [json.loads(line) for line in outcomes.read_text().splitlines()]
    assert len(rows) == 4 and {r["method"] for r in rows} == {"grpo@command"}
    analysis = json.loads((finished / "analysis" / STUDY / "analysis.json").read_text())
    assert {r["method"] for r in analysis["tables"]["methods"]} == {"grpo", "grpo@command"}
    pooled = [r for r in analysis["tables"]["paired"] if r["seed"] == "all" and r["step"] == 2]
    assert [(r["method_a"], r["method_b"], r["n_tasks"]) for r in pooled] == [("grpo", "grpo@command", 4)]
    assert "grpo@command" in (finished / "reports" / STUDY / "report.html").read_text()


def test_the_cross_backend_equivalence_claim_is_decided_and_shown_first(finished):
    """The manifest's `grpo@command == grpo ± 5pp` is tested on the 4 shared tasks: identical outcomes on 4 tasks
    cannot show equivalence (inconclusive, with the tasks needed), and the report shows it right after the summary."""
    claims = json.loads((finished / "analysis" / STUDY / "analysis.json").read_text())["tables"]["claims"]
    pooled = [r for r in claims if r["claim"] == "grpo@command == grpo ± 5pp" and str(r["seed"]) == "all"]
    assert len(pooled) == 1 and pooled[0]["n_tasks"] == 4, claims
    assert pooled[0]["verdict"] == "inconclusive" and pooled[0]["tasks_needed"] > 4, pooled
    html = (finished / "reports" / STUDY / "report.html").read_text()
    sections = [html.index(f'<section id="{name}">') for name in ("summary", "equivalence", "verdicts")]
    assert sections == sorted(sections)
    equivalence = html[sections[1] : sections[2]]
    assert "grpo@command" in equivalence and "inconclusive" in equivalence


def test_the_audit_passes_on_the_cross_backend_study(finished):
    """`agentrepro audit` finds the two-backend study complete and unchanged."""
    from helpers import run_cli

    result = run_cli("audit", f"manifests/{STUDY}.yaml", cwd=finished)
    assert result.returncode == 0, result.stdout + result.stderr
