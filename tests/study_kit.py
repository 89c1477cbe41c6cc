"""Builders for the manifest and audit tests: a small study on disk, a git repository, fake sealed runs, and the
`study` / `frozen` fixtures (each test folder's conftest imports them).

The study (`demo`) uses an evaluation data file for its task panel, so that freeze runs in a subprocess
without the environments package; identifiers are pinned unless a test overrides them.
"""

from __future__ import annotations

import copy
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from agentrepro import containers
from agentrepro.backends.sources import record_run
from agentrepro.fileio import atomic_write_json, atomic_write_jsonl, atomic_write_yaml, sha256_file, sha256_json
from agentrepro.seal import write_outputs_manifest

COMMIT_A = "20bd331bdbc9026a5668e11362178e10ab7400c8"
COMMIT_B = "0123456789abcdef0123456789abcdef01234567"
DIGEST = "sha256:" + "ab" * 32
TASKS = [{"task_id": f"t{i}", "category": ["pick", "clean"][i % 2], "gamefile": f"games/{i}.tw"} for i in range(4)]

BASE: dict[str, Any] = {
    "study": "demo",
    "title": "a test study",
    "backend": {"name": "verl-agent", "repo": "langfengQ/verl-agent", "commit": COMMIT_A, "model_path": "models/qwen"},
    "image": {"runtime": "apptainer", "ref": "example.org/verl-agent:1.0", "digest": DIGEST},
    "model": {"name": "Qwen/Qwen2.5-1.5B-Instruct", "revision": COMMIT_B, "tokenizer_revision": COMMIT_B},
    "env": {"name": "alfworld", "split": "eval_in_distribution"},
    "data": {"eval": {"path": "data/eval.jsonl"}},
    "methods": {"grpo": {"estimator": "grpo"}, "gigpo": {"estimator": "gigpo", "gamma": 0.95}},
    "seeds": [0, 1],
    "train": {"steps": 10, "groups": 2, "group_size": 4, "lr": 1.0e-6},
    "eval": {"tasks": 4, "episodes_per_task": 1, "temperature": 0.4, "every": 5},
    "resources": {
        "gpus": 2,
        "cpus": 5,
    },  # GRPO's script reserves 0.1 CPU x 12 env workers + 3 in Ray (agentrepro preflight)
    "reference": "references/demo.yaml",
    "analysis": {"tolerance_pp": 3, "alpha": 0.05, "claims": ["gigpo > grpo"]},
}


def set_key(doc: dict, dotted: str, value: Any) -> dict:
    """Set (or with value=DELETE remove) `a.b.c` in a deep copy of doc."""
    doc = copy.deepcopy(doc)
    *parents, last = dotted.split(".")
    node = doc
    for key in parents:
        node = node.setdefault(key, {})
    if value is DELETE:
        node.pop(last, None)
    else:
        node[last] = value
    return doc


DELETE = object()


def write_study(root: Path, manifest: dict | None = None, *, tasks: list[dict] = TASKS) -> Path:
    """Write manifests/demo.yaml, its reference and data/eval.jsonl under root; return the manifest path."""
    manifest = BASE if manifest is None else manifest
    (root / "manifests" / "references").mkdir(parents=True, exist_ok=True)
    atomic_write_yaml(
        root / "manifests" / "references" / "demo.yaml",
        {
            "paper": "test",
            "metric": "success_rate",
            "values": {"gigpo": {"value": 0.5, "std": None, "seeds": 2, "source": "none", "checked": False}},
        },
    )
    atomic_write_jsonl(root / "data" / "eval.jsonl", tasks)
    path = root / "manifests" / f"{manifest['study']}.yaml"
    atomic_write_yaml(path, manifest)
    return path


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout.strip()


def git_commit_all(root: Path) -> str:
    """Make root a git repository (if needed) with everything committed; return HEAD."""
    if not (root / ".git").exists():
        git(root, "init", "-q")
        git(root, "config", "user.email", "t@example.org")
        git(root, "config", "user.name", "t")
        (root / ".gitignore").write_text("/runs/\n/analysis/\n/reports/\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "state", "--allow-empty")
    return git(root, "rev-parse", "HEAD")


def ran_in_image(block: dict) -> dict:
    """The attempt field a job whose program ran in its pinned image records (agentrepro.containers), as the runtime
    would have answered; {} for a placement without a container."""
    image = containers.image_of(block)
    if image is None:
        return {}
    resolved = {"file_sha256": image.sha256} if image.is_file else {"digests": [image.digest]}
    return {
        "containers": [
            containers.record(
                label="train",
                image=image,
                reference=image.pinned,
                version="1.3.4",
                resolved=resolved,
                obtained="the test kit",
                prepared={"action": "present", "seconds": 0.0},
            )
        ]
    }


def fake_run(
    root: Path,
    lock: dict,
    method: str,
    seed: int,
    *,
    steps: tuple[int, ...] = (0, 5, 10),
    extra: dict[str, list] | None = None,
) -> Path:
    """A sealed run directory as train and eval would leave it (no torch, no training); `extra`: more JSONL files
    of the run ({name: rows}), written before the seal."""
    from agentrepro.manifest import run_config

    run = root / "runs" / lock["study"] / method / f"seed{seed}"
    config = run_config(lock, method, seed, lock_path="manifests/demo.lock.json")
    atomic_write_yaml(run / "config.yaml", config)
    atomic_write_yaml(run / "resolved_config.yaml", config)
    (run / "command.txt").write_text(f"agentrepro train --config {run}/config.yaml --out {run}\n")
    atomic_write_jsonl(run / "metrics.jsonl", [{"step": s, "reward_mean": 0.1 * s} for s in range(1, 3)])
    (run / "checkpoints").mkdir()
    (run / "checkpoints" / "last.pt").write_bytes(b"\x00" * 1000)
    (run / "logs").mkdir()
    (run / "logs" / "train.log").write_text("live log, never sealed\n")
    base = {
        "study": lock["study"],
        "method": method,
        "seed": seed,
        "lock_sha256": config["lock"]["sha256"],
        "resolved_config_sha256": sha256_json(config),
        "status": "ok",
        "attempts": [{"stage": "train", "number": 1, "status": "ok", **ran_in_image(config["image"])}],
    }
    atomic_write_json(run / "provenance.json", base)
    for name, rows in (extra or {}).items():
        atomic_write_jsonl(run / name, rows)
    record_run(config, run, root)  # as `agentrepro train` does: its backend's sources as they are now
    write_outputs_manifest(run)
    for step in steps:
        ev = run / "eval" / f"step{step}"
        rows = [
            {
                "study": lock["study"],
                "method": method,
                "seed": seed,
                "step": step,
                "task_id": t["task_id"],
                "task_hash": t["task_hash"],
                "category": t["category"],
                "episode": 0,
                "success": i % 2,
                "reward": float(i % 2),
                "turns": 3,
                "tokens": 40,
            }
            for i, t in enumerate(lock["task_panel"])
        ]
        atomic_write_jsonl(ev / "outcomes.jsonl", rows)
        atomic_write_json(
            ev / "provenance.json",
            {
                "lock_sha256": config["lock"]["sha256"],
                "resolved_config_sha256": sha256_json(config),
                "run_outputs_sha256": sha256_file(run / "OUTPUTS.sha256"),
                "status": "ok",
                "attempts": [],
            },
        )
        record_run(config, ev, root)  # as `agentrepro eval` by the backend itself does
        write_outputs_manifest(ev)
    return run


def fake_outputs(root: Path, study: str = "demo") -> None:
    """The study's analysis/<study>/ and reports/<study>/ made by the real `analyze` and `report` (no PDF), chained as
    they chain them: analysis.json records every sealed file of every run, the report every analysis file, and
    the report marks every value it prints (the audit recomputes them all)."""
    from agentrepro.analysis.study import analyze_study
    from agentrepro.audit import audit_result
    from agentrepro.report.write import write_report

    analyze_study(study, root)
    write_report(study, root, audit=audit_result(study, root), pdf=False)


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


@pytest.fixture
def study(tmp_path) -> Path:
    """A root directory with the demo study written and committed in a fresh git repository."""
    root = tmp_path / "root"
    root.mkdir()
    write_study(root)
    git_commit_all(root)
    return root


@pytest.fixture(scope="session")
def frozen_template(tmp_path_factory) -> tuple[Path, dict]:
    """The demo study frozen (in-process), with its four sealed runs (each evaluated at steps 0, 5, 10), analysis and
    report: made once per session (the analysis and the report take seconds); tests get a copy (`frozen`)."""
    from agentrepro.jobs.freeze import freeze

    root = tmp_path_factory.mktemp("frozen") / "root"
    root.mkdir()
    write_study(root)
    git_commit_all(root)
    lock, _, _ = freeze(root / "manifests" / "demo.yaml", root=root)
    for method in ("grpo", "gigpo"):
        for seed in (0, 1):
            fake_run(root, lock, method, seed)
    fake_outputs(root)
    return root, lock


@pytest.fixture
def frozen(tmp_path, frozen_template) -> tuple[Path, dict]:
    """A fresh copy of the frozen demo study (`frozen_template`) in this test's own directory, and its lock."""
    template, lock = frozen_template
    root = tmp_path / "root"
    shutil.copytree(template, root, symlinks=True)
    return root, copy.deepcopy(lock)
