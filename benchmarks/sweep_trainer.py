"""Hyper-parameter sweep of the builtin trainer on FrozenLake: configurations in parallel, one torch thread each.

    .venv/bin/python benchmarks/sweep_trainer.py SWEEP.json OUT_DIR [--workers N]

SWEEP.json is a list of {"name", "method", "seed", "train": {...overrides}}; each run is trained from
scratch (warm start + RL), then steps 0 and last are evaluated greedily on the 128 evaluation seeds
(10001-10128). One JSON line per run goes to OUT_DIR/results.jsonl: step-0 and final rates, the paired
discordant counts and the exact McNemar p, warm-start steps, wall seconds, env steps/s and tokens/s.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import yaml

MANIFEST_TRAIN = {"progress": False}
# The default study's model, read from its manifest so that a sweep measures what `make demo` runs.
DEFAULT_MODEL = yaml.safe_load((Path(__file__).resolve().parents[1] / "manifests" / "frozenlake-cpu.yaml").read_text())[
    "model"
]


def run_one(spec: dict, out_dir: str) -> dict:
    os.environ["OMP_NUM_THREADS"] = "1"
    import torch

    torch.set_num_threads(1)
    from scipy.stats import binomtest

    from agentrepro.trainer.evaluate import evaluate_run
    from agentrepro.trainer.loop import train

    config = {
        "study": "sweep",
        "method": spec["method"],
        "seed": spec["seed"],
        "model": spec.get("model", DEFAULT_MODEL),
        "env": {"name": "frozenlake", "params": {}},
        "train": {**MANIFEST_TRAIN, **spec["train"]},
        "eval": {"tasks": 128, "first_seed": 10001, "temperature": 0},
    }
    run_dir = Path(out_dir) / spec["name"]
    started = time.perf_counter()
    trainer = train(config, run_dir, resume=False)
    train_s = time.perf_counter() - started
    t0 = time.perf_counter()
    first = evaluate_run(config, run_dir, 0)
    last = evaluate_run(config, run_dir, trainer.cfg.steps)
    eval_s = time.perf_counter() - t0
    a, b = [r["success"] for r in first], [r["success"] for r in last]
    up = sum(y > x for x, y in zip(a, b))
    down = sum(x > y for x, y in zip(a, b))
    p = binomtest(up, up + down).pvalue if up + down else 1.0
    warm = json.loads((run_dir / "warmstart.json").read_text())
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rl_s = metrics[-1]["wall_s"] - warm.get("wall_s", 0.0) if metrics else 0.0
    return {
        "name": spec["name"],
        "method": spec["method"],
        "seed": spec["seed"],
        "train": spec["train"],
        "step0": sum(a) / len(a),
        "final": sum(b) / len(b),
        "up": up,
        "down": down,
        "mcnemar_p": p,
        "warmstart_steps": warm["steps"],
        "warmstart_val": warm.get("val_success"),
        "warmstart_s": warm.get("wall_s"),
        "train_s": train_s,
        "eval_s": eval_s,
        "rl_s": rl_s,
        "env_steps_per_s": metrics[-1]["env_steps"] / rl_s if rl_s else None,
        "tokens_per_s": metrics[-1]["tokens_generated"] / rl_s if rl_s else None,
        "train_success_last10": sum(m["train_success_rate"] for m in metrics[-10:]) / max(1, len(metrics[-10:])),
        "valid_last": metrics[-1]["valid_action_ratio"] if metrics else None,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweep", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    specs = json.loads(args.sweep.read_text())
    args.out.mkdir(parents=True, exist_ok=True)
    with ProcessPoolExecutor(args.workers) as pool, open(args.out / "results.jsonl", "a") as fh:
        futures = {pool.submit(run_one, spec, str(args.out)): spec for spec in specs}
        for future in as_completed(futures):
            try:
                row = future.result()
            except Exception as exc:
                row = {"name": futures[future]["name"], "error": f"{type(exc).__name__}: {exc}"}
            print(json.dumps(row), flush=True)
            fh.write(json.dumps(row) + "\n")
            fh.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
