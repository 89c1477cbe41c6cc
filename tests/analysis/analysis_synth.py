"""Synthetic outcome rows and files for the analysis tests (no trainer needed); import as `analysis_synth`."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np


def task_hash(task_id: str) -> str:
    return hashlib.sha256(f"task:{task_id}".encode()).hexdigest()


def outcome_rows(study: str, method: str, seed: int, step: int, successes, *, episodes: int = 1, category=None):
    """Rows for tasks t000.. with the given 0/1 successes (one per task × episode, task-major)."""
    successes = list(successes)
    n_tasks = len(successes) // episodes
    rows = []
    for t in range(n_tasks):
        for e in range(episodes):
            tid = f"t{t:03d}"
            rows.append(
                {
                    "study": study,
                    "method": method,
                    "seed": seed,
                    "step": step,
                    "task_id": tid,
                    "task_hash": task_hash(tid),
                    "category": category or ("even" if t % 2 == 0 else "odd"),
                    "episode": e,
                    "success": int(successes[t * episodes + e]),
                    "reward": float(successes[t * episodes + e]),
                    "turns": 3,
                    "tokens": 100,
                }
            )
    return rows


def write_jsonl(path: Path, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def draws(p: float, n: int, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).random(n) < p).astype(int)


def make_study(
    root: Path,
    study: str = "toy",
    methods=("grpo", "graphgpo"),
    seeds=(0, 1),
    steps=(5, 10),
    n_tasks: int = 40,
    p=None,
    reference: str | None = None,
    claims=("graphgpo > grpo",),
    lock: bool = True,
    rng_seed: int = 0,
) -> Path:
    """A complete study tree under `root`: manifest, lock with task panel, sealed runs with every side file."""
    import yaml

    from agentrepro.attempts import finish_attempt, start_attempt
    from agentrepro.fileio import sha256_json
    from agentrepro.seal import write_outputs_manifest

    rng = np.random.default_rng(rng_seed)
    p = p or {m: 0.5 + 0.3 * i for i, m in enumerate(methods)}
    panel = [
        {"task_id": f"t{t:03d}", "task_hash": task_hash(f"t{t:03d}"), "seed": t, "category": "toy"}
        for t in range(n_tasks)
    ]
    manifest = {
        "study": study,
        "title": f"{study} title",
        "methods": {m: {"estimator": m} for m in methods},
        "seeds": list(seeds),
        "train": {"steps": max(steps)},
        "eval": {"tasks": n_tasks},
        "analysis": {"tolerance_pp": 3, "alpha": 0.05, "claims": list(claims)},
    }
    if reference:
        manifest["reference"] = "references/ref.yaml"
        (root / "manifests" / "references").mkdir(parents=True, exist_ok=True)
        (root / "manifests" / "references" / "ref.yaml").write_text(reference)
    (root / "manifests").mkdir(parents=True, exist_ok=True)
    (root / "manifests" / f"{study}.yaml").write_text(yaml.safe_dump(manifest))
    if lock:
        lock_obj = {
            "lock_version": 1,
            "study": study,
            "manifest": manifest,
            "manifest_sha256": sha256_json(manifest),
            "task_panel": panel,
        }
        (root / "manifests" / f"{study}.lock.json").write_text(json.dumps(lock_obj))
    for m in methods:
        for s in seeds:
            run = root / "runs" / study / m / f"seed{s}"
            run.mkdir(parents=True)
            (run / "command.txt").write_text(
                f"agentrepro train --config runs/{study}/{m}/seed{s}/config.yaml --out {run}\n"
            )
            (run / "resolved_config.yaml").write_text(yaml.safe_dump({"train": {"estimator": m}}))
            start_attempt(run, stage="train", command="agentrepro train", base={"study": study, "method": m, "seed": s})
            metrics = [
                {
                    "step": k,
                    "env_steps": 50 * k,
                    "episodes": 8 * k,
                    "tokens_generated": 1000 * k,
                    "tokens_trained": 900 * k,
                    "train_success_rate": 0.5,
                    "wall_s": 2.0 * k,
                    "gpu_hours": 0.0,
                }
                for k in range(1, max(steps) + 1)
            ]
            timings = [
                {"step": k, "rollout": 1.0, "advantage": 0.001 * k, "update": 0.5, "step_total": 1.6}
                for k in range(1, max(steps) + 1)
            ]
            write_jsonl(run / "metrics.jsonl", metrics)
            write_jsonl(run / "timings.jsonl", timings)
            if m != "grpo":
                write_jsonl(
                    run / "graph_diagnostics.jsonl",
                    [
                        {"step": k, "groups": 4, "nodes": 10 + k, "edges": 20, "distance_hist": {"0": 2, "1": 5}}
                        for k in range(1, max(steps) + 1)
                    ],
                )
            finish_attempt(run, status="ok")
            for step in steps:
                succ = (rng.random(n_tasks) < p[m] * (0.8 + 0.2 * step / max(steps))).astype(int)
                rows = outcome_rows(study, m, s, step, succ, category="toy")
                write_jsonl(run / "eval" / f"step{step}" / "outcomes.jsonl", rows)
                write_outputs_manifest(run / "eval" / f"step{step}")
            write_outputs_manifest(run)
    return root
